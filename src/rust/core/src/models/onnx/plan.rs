//! Planning a graph for bound input shapes: shape inference and constant
//! folding in one walk over the nodes.
//!
//! Every value is either a constant (an initializer, or the result of a
//! node whose inputs are all constants, computed here on the host: shape
//! arithmetic, weight transforms, everything that does not depend on the
//! inputs' values) or a tensor of the engine graph being built, whose shape
//! is known from its inputs'. A node with an input tensor is mapped onto
//! engine ops by its operator's lowering; an operator that exists only on
//! the host (its output shape depends on values: NonZero,
//! NonMaxSuppression, ...) needs the input data: planned at load, it stops
//! the plan ([`NeedsData`]); planned during a run, it computes the graph so
//! far, runs on the host and goes on with its results as constants.

use super::builder::Builder;
use super::elem::Elem;
use super::host::HTensor;
use super::model::{OnnxGraph, OnnxNode};
use super::val::{Const, Dev, Taint, Val};
use crate::graph::Graph;
use crate::op::Op;
use crate::tensor::{DataSlot, Tensor};
use anyhow::{bail, Context as _};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A plan made without input data reached an operator that needs it.
#[derive(Debug)]
pub struct NeedsData {
    pub node: String,
}

impl std::fmt::Display for NeedsData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} runs on the host and needs the input values", self.node)
    }
}

impl std::error::Error for NeedsData {}

/// Maps a node onto the engine graph (inputs: one per node input, None
/// when omitted).
pub type Lower = fn(&mut Planner, &OnnxNode, &[Option<Val>]) -> crate::Result<Vec<Val>>;
/// Computes a node on the host (constant inputs; the default-domain opset).
pub type Fold = fn(&OnnxNode, &[Option<Arc<HTensor>>], i64) -> crate::Result<Vec<HTensor>>;
/// An operator's implementations: (engine mapping, host evaluation).
pub type OpTable = fn(&str) -> Option<(Option<Lower>, Option<Fold>)>;

pub struct Planner {
    /// The operators' implementations by operator type (the operator
    /// table is above the planner, which only calls it).
    find: OpTable,
    pub b: Builder,
    pub opset: i64,
    scopes: Vec<HashMap<String, Val>>,
    /// Input data have been written into the input tensors.
    pub has_data: bool,
    /// Operator types run on the host during planning.
    pub host_ops: Vec<String>,
    /// The highest dependence of a constant made (Data: the plan is per run).
    pub taint: Taint,
    /// Graph computations made while planning (host operators' inputs).
    pub computes: usize,
    /// Index checks of graph inputs, made on their values before each run:
    /// (input, size of the indexed dimension, node).
    pub index_checks: Vec<IndexCheck>,
    /// The graph inputs' tensors (by tensor id) and names.
    inputs: Vec<(u64, String)>,
}

/// Input `input` holds indices into a dimension of size `size` (at `node`).
#[derive(Debug, Clone)]
pub struct IndexCheck {
    pub input: String,
    pub size: usize,
    pub node: String,
}

impl Planner {
    pub fn new(b: Builder, opset: i64, find: OpTable) -> Planner {
        Planner {
            find,
            b,
            opset,
            scopes: vec![HashMap::new()],
            has_data: false,
            host_ops: Vec::new(),
            taint: Taint::Static,
            computes: 0,
            index_checks: Vec::new(),
            inputs: Vec::new(),
        }
    }

    /// Makes an input tensor of the engine graph.
    pub fn bind_input(&mut self, name: &str, shape: Vec<usize>, elem: Elem) -> crate::Result<Dev> {
        let t = self.b.leaf(crate::base::dtype::DType::F32, super::dev::ne_of(&shape))?;
        t.set_name(name);
        self.inputs.push((t.id(), name.to_string()));
        let d = Dev { t, shape, elem };
        self.bind(name, Val::D(d.clone()));
        Ok(d)
    }

    /// Records that `v`, when it is a graph input, holds indices into a
    /// dimension of size `size` (checked on the input's values at each run:
    /// indices computed in the graph are not, and read as zeros when out
    /// of range).
    pub fn check_indices(&mut self, v: &Val, size: usize, node: &OnnxNode) {
        if let Val::D(d) = v {
            if let Some((_, name)) = self.inputs.iter().find(|(id, _)| *id == d.t.id()) {
                self.index_checks.push(IndexCheck { input: name.clone(), size, node: node.describe() });
            }
        }
    }

    pub fn bind(&mut self, name: &str, v: Val) {
        // INVARIANT: the planner starts with one scope and pops only the ones it pushes.
        self.scopes.last_mut().expect("a scope").insert(name.to_string(), v);
    }

    pub fn lookup(&self, name: &str) -> crate::Result<Val> {
        for s in self.scopes.iter().rev() {
            if let Some(v) = s.get(name) {
                return Ok(v.clone());
            }
        }
        bail!("its input '{name}' is not produced by any earlier node, initializer or graph input")
    }

    /// Plans the nodes of `g` in a new scope (its initializers visible) after
    /// binding `inputs` to its input names; returns its outputs.
    pub fn run_graph(&mut self, g: &OnnxGraph, inputs: &[(String, Val)]) -> crate::Result<Vec<Val>> {
        let mut scope: HashMap<String, Val> = HashMap::new();
        for (name, i) in &g.inits {
            scope.insert(name.clone(), Val::C(Arc::new(Const::init(i.clone()))));
        }
        for (name, v) in inputs {
            scope.insert(name.clone(), v.clone());
        }
        self.scopes.push(scope);
        let r = self.run_nodes(g);
        let outs = r.and_then(|_| g.outputs.iter().map(|o| self.lookup(&o.name).with_context(|| format!("graph output '{}'", o.name))).collect());
        self.scopes.pop();
        outs
    }

    fn run_nodes(&mut self, g: &OnnxGraph) -> crate::Result<()> {
        let uses = reads(g);
        let mut i = 0;
        while let Some(n) = g.nodes.get(i) {
            if let (Some(next), Some(uses)) = (g.nodes.get(i + 1), &uses) {
                if self.pair(n, next, uses)? {
                    i += 2;
                    continue;
                }
            }
            self.node(n)?;
            i += 1;
        }
        Ok(())
    }

    /// Plans `n` and the node after it as one when the operator table maps
    /// the pair (named "A+B", as "Conv+Relu"), `next` reads `n`'s only
    /// output as its only input and nothing else reads that output. False
    /// (nothing planned) otherwise, and when `n`'s inputs are all constant
    /// (folded one node at a time).
    // BOUNDS-FN: n has one output and next one input and one output (checked first).
    fn pair(&mut self, n: &OnnxNode, next: &OnnxNode, uses: &HashMap<&str, usize>) -> crate::Result<bool> {
        if n.outputs.len() != 1 || next.inputs.len() != 1 || next.outputs.len() != 1 || next.inputs[0] != n.outputs[0] {
            return Ok(false);
        }
        if uses.get(n.outputs[0].as_str()) != Some(&1) {
            return Ok(false);
        }
        let Some(lower) = (self.find)(&format!("{}+{}", n.op, next.op)).and_then(|(l, _)| l) else { return Ok(false) };
        let ins = self.inputs_of(n)?;
        if ins.iter().flatten().all(|v| v.konst().is_some()) {
            return Ok(false);
        }
        let outs = lower(self, n, &ins).map_err(|e| if e.downcast_ref::<NeedsData>().is_some() { e } else { e.context(n.describe()) })?;
        if let Some(v) = outs.first() {
            self.bind(&next.outputs[0], v.clone());
        }
        Ok(true)
    }

    /// The values of `n`'s inputs (None for an omitted optional one).
    fn inputs_of(&self, n: &OnnxNode) -> crate::Result<Vec<Option<Val>>> {
        n.inputs
            .iter()
            .map(|s| if s.is_empty() { Ok(None) } else { self.lookup(s).map(Some) })
            .collect::<crate::Result<Vec<_>>>()
            .with_context(|| n.describe())
    }

    fn node(&mut self, n: &OnnxNode) -> crate::Result<()> {
        let ins = self.inputs_of(n)?;
        let outs = self.eval(n, &ins).map_err(|e| {
            if e.downcast_ref::<NeedsData>().is_some() {
                e
            } else {
                e.context(n.describe())
            }
        })?;
        for (i, name) in n.outputs.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            match outs.get(i) {
                Some(v) => self.bind(name, v.clone()),
                None => {
                    // An optional output this implementation does not make:
                    // an error only if something reads it.
                }
            }
        }
        Ok(())
    }

    fn eval(&mut self, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
        let all_const = ins.iter().flatten().all(|v| v.konst().is_some());
        if all_const {
            if let Some(f) = (self.find)(&n.op).and_then(|(_, f)| f) {
                return self.fold(n, ins, f);
            }
        }
        if let Some(lower) = (self.find)(&n.op).and_then(|(l, _)| l) {
            return lower(self, n, ins);
        }
        if let Some(f) = (self.find)(&n.op).and_then(|(_, f)| f) {
            return self.host_op(n, ins, f);
        }
        bail!("operator {} is not supported", n.op)
    }

    fn fold(&mut self, n: &OnnxNode, ins: &[Option<Val>], f: Fold) -> crate::Result<Vec<Val>> {
        let mut vals = Vec::with_capacity(ins.len());
        let mut taint = Taint::Static;
        for v in ins {
            match v {
                Some(Val::C(c)) => {
                    taint = taint.max(c.taint);
                    vals.push(Some(c.value()?));
                }
                _ => vals.push(None),
            }
        }
        let outs = f(n, &vals, self.opset)?;
        let top = self.scopes.len() <= 2;
        Ok(outs
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let key = if top { n.outputs.get(i).map(|o| format!("val:{o}")) } else { None };
                Val::C(Arc::new(Const::host(t, taint, key)))
            })
            .collect())
    }

    /// Runs an operator on the host with the values of its inputs.
    fn host_op(&mut self, n: &OnnxNode, ins: &[Option<Val>], f: Fold) -> crate::Result<Vec<Val>> {
        if !self.has_data {
            return Err(NeedsData { node: n.describe() }.into());
        }
        let devs: Vec<Dev> = ins.iter().flatten().filter_map(|v| if let Val::D(d) = v { Some(d.clone()) } else { None }).collect();
        self.materialize(&devs)?;
        let mut vals = Vec::with_capacity(ins.len());
        for v in ins {
            vals.push(match v {
                None => None,
                Some(Val::C(c)) => Some(c.value()?),
                Some(Val::D(d)) => Some(Arc::new(download(d)?)),
            });
        }
        let outs = f(n, &vals, self.opset)?;
        self.taint = Taint::Data;
        self.host_ops.push(n.op.clone());
        Ok(outs.into_iter().map(|t| Val::c(t, Taint::Data)).collect())
    }

    /// Computes the engine graph of `devs` now, and replaces every value it
    /// computed by a leaf aliasing its memory (so it is not computed again).
    pub fn materialize(&mut self, devs: &[Dev]) -> crate::Result<()> {
        self.b.flush()?;
        let mut g = Graph::new();
        for d in devs {
            g.expand(&d.t)?;
        }
        if g.n_nodes() == 0 {
            return Ok(());
        }
        g.compute(&self.b.backend)?;
        self.computes += 1;
        let done: HashSet<u64> = g.nodes().iter().map(|t| t.id()).collect();
        let ctx = self.b.ctx()?;
        for s in self.scopes.iter_mut() {
            for v in s.values_mut() {
                if let Val::D(d) = v {
                    if done.contains(&d.t.id()) {
                        d.t = detach(&ctx, &d.t)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A leaf aliasing the memory of the computed tensor `t`.
fn detach(ctx: &crate::tensor::Context, t: &Arc<Tensor>) -> crate::Result<Arc<Tensor>> {
    if *t.op() == Op::None {
        return Ok(t.clone());
    }
    let r = t.resolve()?;
    let leaf = ctx.push(r.layout, Op::None, Vec::new(), None)?;
    leaf.set_storage(DataSlot { buf: r.buf, offset: r.offset });
    Ok(leaf)
}

/// The values of a computed tensor, as a host tensor of its ONNX type.
/// How many times each value of `g` is read (by its nodes and as a graph
/// output); None when a node has subgraphs (they may read any value).
fn reads(g: &OnnxGraph) -> Option<HashMap<&str, usize>> {
    if g.nodes.iter().any(|n| matches!(n.op.as_str(), "If" | "Loop" | "Scan")) {
        return None;
    }
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for name in g.nodes.iter().flat_map(|n| n.inputs.iter()).chain(g.outputs.iter().map(|o| &o.name)) {
        *uses.entry(name.as_str()).or_default() += 1;
    }
    Some(uses)
}

pub fn download(d: &Dev) -> crate::Result<super::host::HTensor> {
    let v = crate::tensor::io::get_values(&d.t, 0, None)?;
    if d.elem.is_float() {
        super::host::HTensor::from_f64(d.elem, d.shape.clone(), v)
    } else {
        super::host::HTensor::from_i64(d.elem, d.shape.clone(), v.iter().map(|x| x.round() as i64).collect())
    }
}
