//! Running a model: plans per set of input shapes (made at load when the
//! shapes are known, else at the first run that binds them), inputs
//! checked and written, one engine graph computed, outputs read back.

use super::builder::{write_f32, Builder, Persist};
use super::elem::Elem;
use super::host::fmt_shape;
use super::model::{OnnxDim, Model};
use super::plan::{NeedsData, Planner};
use super::val::{Dev, Taint, Val};
use crate::backend::Backend;
use crate::base::error::Classed;
use crate::graph::Graph;
use anyhow::{bail, Context as _};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Plans kept per model (one per set of input shapes, most recent first).
const MAX_PLANS: usize = 4;

/// The error class of everything the importer reports.
pub const CLASS: &str = "onnx_error";

/// An ONNX error for R (class `onnx_error`).
pub fn onnx_err(msg: impl Into<String>) -> anyhow::Error {
    Classed::new(CLASS, msg)
}

/// A planned graph for one set of input shapes.
struct Plan {
    shapes: Vec<Vec<usize>>,
    b: Builder,
    inputs: Vec<Dev>,
    outputs: Vec<Val>,
    graph: Graph,
    /// False when the plan holds values computed from input data.
    reusable: bool,
    info: PlanInfo,
    checks: Vec<super::plan::IndexCheck>,
}

/// What the last plan did, for `onnx_device_info()`.
#[derive(Debug, Clone, Default)]
pub struct PlanInfo {
    pub n_nodes: usize,
    /// Engine graph computations per run (1 unless host operators split it).
    pub n_splits: usize,
    pub host_ops: Vec<String>,
    pub pass_bytes: usize,
    pub planned: bool,
}

/// One output: name, ONNX shape, values (row-major).
pub type Output = (String, Vec<usize>, Vec<f64>);

pub struct Runner {
    pub model: Model,
    pub backend: Arc<Backend>,
    persist: Arc<Mutex<Persist>>,
    f16: bool,
    /// Input shapes given at load (overriding the declared ones).
    bound: HashMap<String, Vec<usize>>,
    plans: Vec<Plan>,
    pub info: PlanInfo,
}

impl Runner {
    pub fn new(model: Model, backend: Arc<Backend>, f16: bool, shapes: Vec<(String, Vec<i64>)>) -> crate::Result<Runner> {
        let mut bound = HashMap::new();
        for (name, s) in shapes {
            let Some(v) = model.graph.inputs.iter().find(|i| i.name == name) else {
                bail!(onnx_err(format!(
                    "input_shapes names '{name}', which is not an input of the model; its inputs are: {}",
                    input_names(&model)
                )));
            };
            let dims: Vec<usize> = s
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| onnx_err(format!("input_shapes${name} has a negative size {d}"))))
                .collect::<crate::Result<_>>()?;
            if let Some(decl) = &v.dims {
                if decl.len() != dims.len() {
                    bail!(onnx_err(format!(
                        "input_shapes${name} has {} dimensions, but the model declares {} ({})",
                        dims.len(),
                        decl.len(),
                        fmt_dims(decl)
                    )));
                }
                for (k, (d, &g)) in decl.iter().zip(&dims).enumerate() {
                    if let OnnxDim::Fixed(f) = d {
                        if *f != g {
                            bail!(onnx_err(format!(
                                "input_shapes${name} gives size {g} to dimension {} that the model fixes at {f}",
                                k + 1
                            )));
                        }
                    }
                }
            }
            bound.insert(name, dims);
        }
        let mut r = Runner { model, backend, persist: Arc::new(Mutex::new(Persist::new())), f16, bound, plans: Vec::new(), info: PlanInfo::default() };
        // Plan at load when every input shape is known.
        if let Some(shapes) = r.static_shapes() {
            match r.make_plan(&shapes, None) {
                Ok(()) => {}
                Err(e) if e.downcast_ref::<NeedsData>().is_some() => {}
                Err(e) => return Err(classed(e)),
            }
        }
        Ok(r)
    }

    /// The inputs with their shapes (-1 for dimensions bound at run time).
    pub fn inputs(&self) -> Vec<(String, Vec<i64>, Option<Elem>)> {
        self.model
            .graph
            .inputs
            .iter()
            .map(|v| {
                let dims = match (self.bound.get(&v.name), &v.dims) {
                    (Some(b), _) => b.iter().map(|&d| d as i64).collect(),
                    (None, Some(d)) => d.iter().map(|d| if let OnnxDim::Fixed(f) = d { *f as i64 } else { -1 }).collect(),
                    (None, None) => Vec::new(),
                };
                (v.name.clone(), dims, v.elem)
            })
            .collect()
    }

    fn static_shapes(&self) -> Option<Vec<Vec<usize>>> {
        self.inputs().iter().map(|(_, d, _)| d.iter().map(|&x| usize::try_from(x).ok()).collect::<Option<Vec<_>>>()).collect()
    }

    /// Runs the model on named inputs (row-major values; `dims` the R array's
    /// dimensions when it has them, used to bind dynamic dimensions).
    pub fn run(&mut self, given: Vec<(String, Vec<f64>, Option<Vec<usize>>)>) -> crate::Result<Vec<Output>> {
        let (shapes, data) = self.check_inputs(given).map_err(classed)?;
        if let Some(i) = self.plans.iter().position(|p| p.shapes == shapes) {
            let plan = self.plans.remove(i);
            self.info = plan.info.clone();
            self.plans.insert(0, plan);
            self.check_indices(0, &data).map_err(classed)?;
            return self.finish(0, Some(&data)).map_err(classed);
        }
        // Planned with the data: the inputs are written while planning.
        self.make_plan(&shapes, Some(&data)).map_err(classed)?;
        if let Err(e) = self.check_indices(0, &data) {
            self.plans.remove(0);
            return Err(classed(e));
        }
        let outs = self.finish(0, None).map_err(classed);
        if self.plans.first().is_some_and(|p| !p.reusable) {
            self.plans.remove(0);
        }
        outs
    }

    /// Checks the index inputs of plan `i` against their dimensions.
    fn check_indices(&self, i: usize, data: &[Vec<f64>]) -> crate::Result<()> {
        let plan = self.plans.get(i).ok_or_else(|| anyhow::anyhow!("internal: no plan {i}"))?;
        for c in &plan.checks {
            let Some(k) = self.model.graph.inputs.iter().position(|v| v.name == c.input) else { continue };
            let n = c.size as f64;
            let values = data.get(k).ok_or_else(|| anyhow::anyhow!("internal: no values for input '{}'", c.input))?;
            if let Some(bad) = values.iter().find(|&&v| v < -n || v >= n) {
                bail!("input '{}' holds index {bad}, out of range for a dimension of size {} (at {})", c.input, c.size, c.node);
            }
        }
        Ok(())
    }

    /// Computes plan `i` (writing `data` into its inputs first) and reads the outputs.
    fn finish(&mut self, i: usize, data: Option<&[Vec<f64>]>) -> crate::Result<Vec<Output>> {
        let p = self.plans.get_mut(i).ok_or_else(|| anyhow::anyhow!("internal: no plan {i}"))?;
        if let Some(data) = data {
            for (d, v) in p.inputs.iter().zip(data) {
                let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                write_f32(&d.t, &f)?;
            }
        }
        if p.graph.n_nodes() > 0 {
            // The graph keeps its nodes resolved to their memory between
            // runs (the plan's tensors keep their places).
            p.graph.compute(&p.b.backend).context("computing the model")?;
        }
        let mut outs = Vec::with_capacity(p.outputs.len());
        for (o, v) in self.model.graph.outputs.iter().zip(&p.outputs) {
            let (shape, vals) = match v {
                Val::C(c) => (c.shape().to_vec(), c.value()?.f64s().to_vec()),
                Val::D(d) => (d.shape.clone(), crate::tensor::io::get_values(&d.t, 0, None)?),
            };
            // Values of a narrower type than f32 are rounded to it, as the
            // model's type says.
            let e = v.elem();
            let vals = if e.is_narrow() {
                // Computed on the host, already on the type's grid.
                vals
            } else if e.is_float() {
                vals.into_iter().map(|x| super::host::round_to(e, x)).collect()
            } else {
                vals.into_iter().map(f64::round).collect()
            };
            outs.push((o.name.clone(), shape, vals));
        }
        Ok(outs)
    }

    /// Plans the model for `shapes` (with the input values when given) as
    /// the first plan.
    fn make_plan(&mut self, shapes: &[Vec<usize>], data: Option<&[Vec<f64>]>) -> crate::Result<()> {
        let b = Builder::new(self.backend.clone(), self.persist.clone(), self.f16);
        let mut pl = Planner::new(b, self.model.opset, super::ops::find);
        let mut inputs = Vec::new();
        for (v, s) in self.model.graph.inputs.iter().zip(shapes) {
            inputs.push(pl.bind_input(&v.name, s.clone(), v.elem.unwrap_or(Elem::F32))?);
        }
        if let Some(data) = data {
            pl.b.flush()?;
            for (d, v) in inputs.iter().zip(data) {
                let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                write_f32(&d.t, &f)?;
            }
            pl.has_data = true;
        }
        let graph = self.model.graph.clone();
        let outputs = pl.run_graph(&graph, &[])?;
        pl.b.flush()?;
        let mut g = Graph::new();
        for o in &outputs {
            if let Val::D(d) = o {
                g.expand(&d.t)?;
            }
        }
        let info = PlanInfo {
            n_nodes: g.n_nodes(),
            n_splits: pl.computes + usize::from(g.n_nodes() > 0),
            host_ops: pl.host_ops.clone(),
            pass_bytes: pl.b.pass.bytes(),
            planned: true,
        };
        self.info = info.clone();
        let reusable = pl.taint < Taint::Data && pl.host_ops.is_empty();
        let checks = pl.index_checks.clone();
        let plan = Plan { shapes: shapes.to_vec(), inputs, outputs, graph: g, reusable, info, checks, b: pl.b };
        self.plans.insert(0, plan);
        self.plans.truncate(MAX_PLANS);
        Ok(())
    }

    /// Checks the given inputs against the model's; returns the bound shapes
    /// and the values in model input order.
    fn check_inputs(&self, given: Vec<(String, Vec<f64>, Option<Vec<usize>>)>) -> crate::Result<(Vec<Vec<usize>>, Vec<Vec<f64>>)> {
        let expected = self.inputs();
        let mut by_name: HashMap<String, (Vec<f64>, Option<Vec<usize>>)> = HashMap::new();
        for (n, v, d) in given {
            if !expected.iter().any(|e| e.0 == n) {
                bail!("'{n}' is not an input of the model; its inputs are: {}", input_names(&self.model));
            }
            by_name.insert(n, (v, d));
        }
        let missing: Vec<String> = expected.iter().filter(|e| !by_name.contains_key(&e.0)).map(|e| format!("'{}'", e.0)).collect();
        if !missing.is_empty() {
            bail!("input{} {} missing; the model's inputs are: {}", if missing.len() > 1 { "s" } else { "" }, missing.join(", "), input_names(&self.model));
        }
        let mut shapes = Vec::with_capacity(expected.len());
        let mut data = Vec::with_capacity(expected.len());
        for (name, dims, elem) in expected {
            // INVARIANT: every expected input was checked present above.
            let (v, rdims) = by_name.remove(&name).expect("present");
            let shape = bind_shape(&name, &dims, v.len(), rdims)?;
            if let Some(e) = elem {
                if !e.is_float() {
                    if let Some(bad) = v.iter().find(|x| !x.is_finite() || x.fract() != 0.0) {
                        bail!("input '{name}' is {}, but {bad} is not a whole number", e.name());
                    }
                    if let Some((lo, hi)) = e.int_range() {
                        if let Some(bad) = v.iter().find(|&&x| x < lo as f64 || x > hi as f64) {
                            bail!("input '{name}' is {}, but {bad} is outside its range {lo}..{hi}", e.name());
                        }
                    }
                }
            }
            shapes.push(shape);
            data.push(v);
        }
        Ok((shapes, data))
    }
}

fn input_names(m: &Model) -> String {
    let v: Vec<String> = m.graph.inputs.iter().map(|i| format!("'{}'", i.name)).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn fmt_dims(d: &[OnnxDim]) -> String {
    let v: Vec<String> = d.iter().map(|x| if let OnnxDim::Fixed(f) = x { f.to_string() } else { "?".into() }).collect();
    format!("[{}]", v.join(", "))
}

/// The shape of input `name` declared `dims` (-1 dynamic) given `n` values
/// and the R array's dimensions `rdims`.
fn bind_shape(name: &str, dims: &[i64], n: usize, rdims: Option<Vec<usize>>) -> crate::Result<Vec<usize>> {
    let shown = |d: &[i64]| {
        let v: Vec<String> = d.iter().map(|&x| if x < 0 { "?".into() } else { x.to_string() }).collect();
        format!("[{}]", v.join(", "))
    };
    let dynamic = dims.iter().filter(|&&d| d < 0).count();
    if dynamic == 0 {
        let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        let want: usize = shape.iter().product();
        if n != want {
            bail!("input '{name}' must have {want} values (shape {}), not {n}", fmt_shape(&shape));
        }
        return Ok(shape);
    }
    if let Some(rd) = rdims {
        if rd.len() == dims.len() && rd.iter().product::<usize>() == n && dims.iter().zip(&rd).all(|(&d, &r)| d < 0 || d as usize == r) {
            return Ok(rd);
        }
    }
    if dynamic == 1 {
        let known: usize = dims.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
        if known > 0 && n % known == 0 {
            return Ok(dims.iter().map(|&d| if d < 0 { n / known } else { d as usize }).collect());
        }
    }
    bail!(
        "input '{name}' has the dynamic shape {}; {n} values do not determine it. Pass an array with \
         dim() giving the full shape, or fix it with onnx_load(..., input_shapes = list({name} = c(...)))",
        shown(dims)
    )
}

/// `e` with the `onnx_error` class (unless it has a class already).
pub fn classed(e: anyhow::Error) -> anyhow::Error {
    if crate::base::error::class_of(&e).is_some() {
        return e;
    }
    onnx_err(format!("{e:#}"))
}


#[cfg(test)]
mod profile;
