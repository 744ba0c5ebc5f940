//! Operators that make constants: Constant, ConstantOfShape, EyeLike,
//! Range and the window functions. They only depend on attributes, input
//! shapes or constant inputs, so they never reach the engine.

use super::common::{arg, harg, hopt, Fold, Lower};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{numel, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Const, Taint, Val};
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Constant" => (Some(lower_constant), Some(fold_constant)),
        "ConstantOfShape" => (None, Some(fold_constant_of_shape)),
        "EyeLike" => (Some(lower_eyelike), Some(fold_eyelike)),
        "Range" => (None, Some(fold_range)),
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => (None, Some(fold_window)),
        _ => return None,
    })
}

/// The value of a Constant node.
fn constant_value(n: &OnnxNode) -> crate::Result<HTensor> {
    if let Some(t) = n.tensor("value") {
        return t.to_host();
    }
    if n.has("value_float") {
        return Ok(HTensor::scalar_f(Elem::F32, n.float("value_float", 0.0) as f64));
    }
    if let Some(v) = n.floats("value_floats").filter(|_| n.has("value_floats")) {
        return HTensor::from_f64(Elem::F32, vec![v.len()], v.iter().map(|&x| x as f64).collect());
    }
    if n.has("value_int") {
        return HTensor::from_i64(Elem::I64, Vec::new(), vec![n.int("value_int", 0)]);
    }
    if let Some(v) = n.ints("value_ints").filter(|_| n.has("value_ints")) {
        return Ok(HTensor::ints(v));
    }
    if n.has("sparse_value") || n.has("value_string") || n.has("value_strings") {
        bail!("string and sparse constants are not supported");
    }
    bail!("the Constant has no value attribute")
}

fn lower_constant(_p: &mut Planner, n: &OnnxNode, _ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let key = n.outputs.first().map(|o| format!("val:{o}"));
    Ok(vec![Val::C(Arc::new(Const::host(constant_value(n)?, Taint::Static, key)))])
}

fn fold_constant(n: &OnnxNode, _ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    Ok(vec![constant_value(n)?])
}

fn fold_constant_of_shape(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let shape: Vec<usize> = harg(ins, 0, "input")?
        .i64s()
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| anyhow::anyhow!("the shape has a negative size {d}")))
        .collect::<crate::Result<_>>()?;
    let (elem, v) = match n.tensor("value") {
        Some(t) => {
            let h = t.to_host()?;
            ensure!(h.numel() == 1, "ConstantOfShape's value must have one element");
            (h.elem, h.f(0))
        }
        None => (Elem::F32, 0.0),
    };
    let count = numel(&shape)?;
    HTensor::from_f64(elem, shape, crate::models::onnx::host::filled(count, v)?).map(|t| vec![t])
}

// BOUNDS-FN: shape.len() == 2 is checked first.
fn eye(n: &OnnxNode, shape: &[usize], like: Elem) -> crate::Result<HTensor> {
    ensure!(shape.len() == 2, "EyeLike needs a 2-D input, not rank {}", shape.len());
    let elem = if n.has("dtype") { Elem::from_code(n.int("dtype", 1) as i32)? } else { like };
    let k = n.int("k", 0);
    let (r, c) = (shape[0], shape[1]);
    let v: Vec<f64> = (0..r * c).map(|i| (((i % c) as i64 - (i / c) as i64) == k) as i64 as f64).collect();
    HTensor::from_f64(elem, vec![r, c], v)
}

fn lower_eyelike(_p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = arg(ins, 0, "input")?;
    Ok(vec![Val::c(eye(n, x.shape(), x.elem())?, Taint::Shape)])
}

fn fold_eyelike(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    Ok(vec![eye(n, &x.shape, x.elem)?])
}

fn fold_range(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let s = harg(ins, 0, "start")?;
    let (start, limit, delta) = (s.scalar("start")?, harg(ins, 1, "limit")?.scalar("limit")?, harg(ins, 2, "delta")?.scalar("delta")?);
    ensure!(delta != 0.0, "Range: delta is 0");
    let count = ((limit - start) / delta).ceil().max(0.0);
    ensure!(count <= crate::models::onnx::host::MAX_ELEMENTS as f64, "Range: {count} elements is too many");
    let count = count as usize;
    if s.elem.is_float() {
        HTensor::from_f64(s.elem, vec![count], (0..count).map(|i| start + i as f64 * delta).collect()).map(|t| vec![t])
    } else {
        let (a, d) = (start as i64, delta as i64);
        HTensor::from_i64(s.elem, vec![count], (0..count as i64).map(|i| a + i * d).collect()).map(|t| vec![t])
    }
}

fn fold_window(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let size = harg(ins, 0, "size")?.scalar("size")?;
    ensure!(size >= 0.0 && size <= crate::models::onnx::host::MAX_ELEMENTS as f64, "window size {size} is out of range");
    let size = size as usize;
    let periodic = n.int("periodic", 1) != 0;
    let elem = Elem::from_code(n.int("output_datatype", 1) as i32)?;
    let denom = if periodic { size as f64 } else { (size as f64 - 1.0).max(1.0) };
    let tau = std::f64::consts::TAU;
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let x = tau * i as f64 / denom;
            match n.op.as_str() {
                "HannWindow" => 0.5 - 0.5 * x.cos(),
                "HammingWindow" => 25.0 / 46.0 - (21.0 / 46.0) * x.cos(),
                _ => 0.42 - 0.5 * x.cos() + 0.08 * (2.0 * x).cos(),
            }
        })
        .collect();
    let _ = hopt(ins, 1);
    HTensor::from_f64(elem, vec![size], v).map(|t| vec![t])
}
