//! Hostile inputs to the host evaluations of the operators: shapes, axes
//! and indices a file can give that once reached an index out of range;
//! each is an error naming what is wrong, never a panic.

use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::HTensor;
use crate::models::onnx::model::{Attr, OnnxNode};
use std::collections::HashMap;
use std::sync::Arc;

/// A node of `op` with attributes `attrs`.
fn node(op: &str, attrs: Vec<(&str, Attr)>) -> OnnxNode {
    OnnxNode {
        name: "n".into(),
        op: op.into(),
        domain: String::new(),
        inputs: Vec::new(),
        outputs: vec!["y".into()],
        attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<HashMap<_, _>>(),
    }
}

fn f(shape: &[usize], v: &[f64]) -> Option<Arc<HTensor>> {
    Some(Arc::new(HTensor::from_f64(Elem::F32, shape.to_vec(), v.to_vec()).unwrap()))
}

/// The error of folding `n` on `ins`.
fn fold_err(n: &OnnxNode, ins: &[Option<Arc<HTensor>>]) -> String {
    let fold = super::folding(&n.op).unwrap();
    match fold(n, ins, 21) {
        Ok(_) => panic!("{} folded", n.op),
        Err(e) => format!("{e:#}"),
    }
}

/// A scalar input with a per-tensor scale and a zero point of two values:
/// the zero point is per axis of an input that has none.
#[test]
fn a_per_axis_zero_point_on_a_scalar_is_an_error() {
    for op in ["DequantizeLinear", "QuantizeLinear"] {
        let e = fold_err(&node(op, vec![]), &[f(&[], &[3.0]), f(&[], &[0.5]), f(&[2], &[1.0, 2.0])]);
        assert!(e.contains("rank 0"), "{op}: {e}");
    }
}

/// MatMul of a scalar is refused (the host product took its last two
/// dimensions without looking).
#[test]
fn a_scalar_matmul_is_an_error() {
    let e = fold_err(&node("MatMul", vec![]), &[f(&[], &[2.0]), f(&[1], &[3.0])]);
    assert!(e.contains("rank 1 or more"), "{e}");
}

/// Softmax, LogSoftmax and Hardmax of a scalar: one row of one value.
#[test]
fn softmax_of_a_scalar_is_one_row() {
    for (op, want) in [("Softmax", 1.0), ("LogSoftmax", 0.0), ("Hardmax", 1.0)] {
        let fold = super::folding(op).unwrap();
        let y = fold(&node(op, vec![]), &[f(&[], &[5.0])], 21).unwrap();
        assert_eq!(y[0].f64s().to_vec(), vec![want], "{op}");
    }
}
