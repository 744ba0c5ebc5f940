//! ONNX models for R: load, inspect, run. The model lives in a `RefCell`
//! behind its external pointer; every call converts, calls the engine's
//! `models::onnx` and maps errors (class `onnx_error`).

use crate::conv::{f64_vec, scalar_i64, scalar_str, usize_vec, xptr};
use crate::guard;
use crate::guard::out;
use extendr_api::prelude::*;
use ggmlr_core::models::onnx::{self, onnx_err, Runner};
use std::cell::RefCell;
use std::path::Path;

type RModel = RefCell<Runner>;

fn model_of(p: &Robj) -> anyhow::Result<&RModel> {
    xptr::<RModel>(p, "model", "onnx_model").map_err(|e| onnx_err(e.to_string()))
}

/// An R array from row-major values of ONNX `shape`: the values stay in
/// ONNX order, `dim` is set (in ONNX order) for 2 or more dimensions.
fn array(shape: &[usize], vals: Vec<f64>) -> Robj {
    let mut r: Robj = vals.into();
    if shape.len() >= 2 {
        let d: Vec<i32> = shape.iter().map(|&x| x as i32).collect();
        let _ = r.set_attrib("dim", d);
    }
    r
}

/// @noRd
#[extendr]
fn rs_onnx_load(path: Robj, device: Robj, shapes: Robj, n_threads: Robj, dtype: Robj) -> Robj {
    guard(|| {
        let path = scalar_str(&path, "path")?;
        let device = if device.is_null() { None } else { Some(scalar_str(&device, "device")?) };
        let n = scalar_i64(&n_threads, "n_threads")?;
        anyhow::ensure!((1..=1024).contains(&n), "`n_threads` must be between 1 and 1024, not {n}");
        let f16 = match scalar_str(&dtype, "dtype")?.as_str() {
            "f32" => false,
            "f16" => true,
            other => return Err(onnx_err(format!("`dtype` must be \"f32\" or \"f16\", not \"{other}\""))),
        };
        let mut list = Vec::new();
        if !shapes.is_null() {
            let l = shapes.as_list().ok_or_else(|| onnx_err("`input_shapes` must be a named list of integer vectors"))?;
            for (name, v) in l.iter() {
                anyhow::ensure!(!name.is_empty() && name != "NA", onnx_err("`input_shapes` must be a named list"));
                let dims = usize_vec(&v, &format!("input_shapes${name}"), 0).map_err(|e| onnx_err(e.to_string()))?;
                list.push((name.to_string(), dims.into_iter().map(|d| d as i64).collect()));
            }
        }
        let backend = onnx::backend_for(device.as_deref(), n as usize)?;
        let runner = onnx::load(Path::new(&path), backend, f16, list)?;
        let m = &runner.model;
        let ops: Vec<String> = m.op_types().iter().map(|o| out(o)).collect();
        let info = list!(
            ir_version = m.ir_version as f64,
            opset_version = m.opset as f64,
            producer = out(&m.producer),
            graph_name = out(&m.graph.name),
            n_nodes = m.graph.nodes.len() as i32,
            n_initializers = m.graph.inits.len() as i32,
            ops = ops
        );
        let ptr: Robj = ExternalPtr::new(RefCell::new(runner)).into();
        Ok(list!(ptr = ptr, info = info).into())
    })
}

/// @noRd
#[extendr]
fn rs_onnx_inputs(p: Robj) -> Robj {
    guard(|| {
        let m = model_of(&p)?.try_borrow().map_err(|_| onnx_err("the model is in use"))?;
        let ins = m.inputs();
        let names: Vec<String> = ins.iter().map(|i| out(&i.0)).collect();
        let vals: Vec<Robj> = ins.iter().map(|i| Robj::from(i.1.iter().map(|&d| d as i32).collect::<Vec<i32>>())).collect();
        let mut l = List::from_values(vals);
        l.set_names(names).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(l.into())
    })
}

/// @noRd
#[extendr]
fn rs_onnx_run(p: Robj, names: Robj, values: Robj, dims: Robj) -> Robj {
    guard(|| {
        let mut m = model_of(&p)?.try_borrow_mut().map_err(|_| onnx_err("the model is in use"))?;
        let names: Vec<String> = if names.is_null() {
            Vec::new()
        } else {
            names.as_str_vector().ok_or_else(|| onnx_err("`inputs` must be a named list"))?.iter().map(|s| s.to_string()).collect()
        };
        let values = values.as_list().ok_or_else(|| onnx_err("`inputs` must be a list"))?;
        let dims = dims.as_list().ok_or_else(|| onnx_err("internal: dims"))?;
        let mut given = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let v = values.elt(i).map_err(|e| anyhow::anyhow!("{e}"))?;
            let d = dims.elt(i).map_err(|e| anyhow::anyhow!("{e}"))?;
            let vals = f64_vec(&v, &format!("inputs${name}")).map_err(|e| onnx_err(e.to_string()))?;
            let rd = if d.is_null() { None } else { Some(usize_vec(&d, "dim", 0).map_err(|e| onnx_err(e.to_string()))?) };
            given.push((name.clone(), vals, rd));
        }
        let outs = m.run(given)?;
        let out_names: Vec<String> = outs.iter().map(|o| out(&o.0)).collect();
        let vals: Vec<Robj> = outs.into_iter().map(|(_, s, v)| array(&s, v)).collect();
        let mut l = List::from_values(vals);
        l.set_names(out_names).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(l.into())
    })
}

/// @noRd
#[extendr]
fn rs_onnx_device_info(p: Robj) -> Robj {
    guard(|| {
        let m = model_of(&p)?.try_borrow().map_err(|_| onnx_err("the model is in use"))?;
        let info = &m.info;
        let mut engine_ops = Vec::new();
        let mut host_ops: Vec<String> = Vec::new();
        for op in m.model.op_types() {
            if onnx::ops::on_engine(&op) {
                engine_ops.push(out(&op));
            } else {
                host_ops.push(out(&op));
            }
        }
        let mut counts: Vec<(String, i32)> = Vec::new();
        for op in &info.host_ops {
            match counts.iter_mut().find(|c| &c.0 == op) {
                Some(c) => c.1 += 1,
                None => counts.push((op.clone(), 1)),
            }
        }
        let mut cpu_only: Robj = counts.iter().map(|c| c.1).collect::<Vec<i32>>().into();
        let _ = cpu_only.set_attrib("names", counts.iter().map(|c| out(&c.0)).collect::<Vec<String>>());
        let backend = m.backend.name().to_string();
        let n_nodes = if info.planned { info.n_nodes } else { m.model.graph.nodes.len() };
        Ok(list!(
            backends = vec![backend],
            n_backends = 1i32,
            n_splits = info.n_splits.max(1) as i32,
            n_nodes = n_nodes as i32,
            gpu_ops = if m.backend.is_vulkan() { engine_ops.clone() } else { Vec::<String>::new() },
            cpu_ops = host_ops,
            cpu_only_ops = cpu_only,
            engine_ops = engine_ops,
            planned = info.planned,
            pass_bytes = info.pass_bytes as f64
        )
        .into())
    })
}

/// Reads a serialized ONNX TensorProto (`.pb`): list(name, value) with the
/// value an array in ONNX order.
/// @noRd
#[extendr]
fn rs_onnx_read_tensor(path: Robj) -> Robj {
    guard(|| {
        let path = scalar_str(&path, "path")?;
        let (name, t) = onnx::read_tensor_file(Path::new(&path))?;
        let shape = t.shape.clone();
        let v = t.f64s().to_vec();
        Ok(list!(name = name, value = array(&shape, v), shape = shape.iter().map(|&d| d as i32).collect::<Vec<i32>>()).into())
    })
}

/// The operators the importer implements.
/// @noRd
#[extendr]
fn rs_onnx_operators() -> Robj {
    guard(|| Ok(onnx::ops::OPERATORS.iter().map(|s| s.to_string()).collect::<Vec<String>>().into()))
}

extendr_module! {
    mod onnx;
    fn rs_onnx_operators;
    fn rs_onnx_load;
    fn rs_onnx_inputs;
    fn rs_onnx_run;
    fn rs_onnx_device_info;
    fn rs_onnx_read_tensor;
}
