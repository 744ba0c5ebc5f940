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

/// ScatterElements with indices wider than the data along another axis
/// (it wrote past the data's values), and GatherElements with indices of
/// a higher rank (it read past the data's strides).
#[test]
fn element_indices_larger_than_the_data_are_errors() {
    let data = f(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let wide = f(&[2, 3], &[0.0; 6]);
    let e = fold_err(&node("ScatterElements", vec![]), &[data.clone(), wide.clone(), wide]);
    assert!(e.contains("larger than the data"), "{e}");
    let e = fold_err(&node("GatherElements", vec![]), &[data, f(&[1, 1, 1], &[0.0])]);
    assert!(e.contains("the data's rank"), "{e}");
}

/// Unique and Compress with an `axis` attribute that is an empty list of
/// ints (it was read as its first value).
#[test]
fn an_empty_axis_attribute_is_an_error() {
    for op in ["Unique", "Compress"] {
        let n = node(op, vec![("axis", Attr::Is(Vec::new()))]);
        let e = fold_err(&n, &[f(&[2], &[1.0, 2.0]), f(&[2], &[1.0, 0.0])]);
        assert!(e.contains("axis attribute has no value"), "{op}: {e}");
    }
}

/// RoiAlign on a feature map of height 0 (it computed h - 1), and with an
/// output size from the file too large to allocate (it aborted).
#[test]
fn roialign_refuses_an_empty_map_and_a_huge_output() {
    let rois = f(&[1, 4], &[0.0, 0.0, 1.0, 1.0]);
    let bi = Some(Arc::new(HTensor::from_i64(Elem::I64, vec![1], vec![0]).unwrap()));
    let e = fold_err(&node("RoiAlign", vec![]), &[f(&[1, 1, 0, 2], &[]), rois.clone(), bi.clone()]);
    assert!(e.contains("at least 1 x 1"), "{e}");
    let big = node("RoiAlign", vec![("output_height", Attr::I(1 << 40)), ("output_width", Attr::I(1 << 40))]);
    let e = fold_err(&big, &[f(&[1, 1, 2, 2], &[1.0; 4]), rois, bi]);
    assert!(e.contains("too large"), "{e}");
}

/// The runner of a model of one node `op` (inputs `ins`, the first
/// `shapes.len()` of them graph inputs of those f32 shapes, the others
/// initializers `inits`), with attributes `attrs`.
fn one_node(
    op: &str,
    ins: &[&str],
    shapes: &[&[i64]],
    inits: Vec<crate::models::onnx::proto::TensorProto>,
    attrs: Vec<crate::models::onnx::proto::AttributeProto>,
) -> crate::Result<crate::models::onnx::run::Runner> {
    use crate::models::onnx::proto::{self, type_proto};
    use prost::Message;
    let value = |name: &str, dims: &[i64]| proto::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(proto::TypeProto {
            value: Some(type_proto::TypeValue::TensorType(type_proto::TensorTypeProto {
                elem_type: Some(1),
                shape: Some(proto::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| proto::tensor_shape_proto::Dimension {
                            value: Some(proto::tensor_shape_proto::dimension::DimensionValue::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let g = proto::GraphProto {
        name: Some("one".into()),
        node: vec![proto::NodeProto {
            op_type: Some(op.into()),
            input: ins.iter().map(|s| s.to_string()).collect(),
            output: vec!["y".into()],
            attribute: attrs,
            ..Default::default()
        }],
        input: ins.iter().zip(shapes).map(|(n, d)| value(n, d)).collect(),
        output: vec![proto::ValueInfoProto { name: Some("y".into()), ..Default::default() }],
        initializer: inits,
        ..Default::default()
    };
    let bytes = proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(g),
        ..Default::default()
    }
    .encode_to_vec();
    let m = crate::models::onnx::model::Model::from_bytes(prost::bytes::Bytes::from(bytes), None)?;
    crate::models::onnx::run::Runner::new(m, Arc::new(crate::backend::Backend::cpu()), false, Vec::new())
}

fn floats(name: &str, dims: &[i64], v: &[f32]) -> crate::models::onnx::proto::TensorProto {
    crate::models::onnx::proto::TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(1), float_data: v.to_vec(), ..Default::default() }
}

/// MatMul of a [2, 3] input by a 1-D constant of 3 values: the constant is
/// transposed as the column it is (the swap of its last two axes reached
/// index r - 2 of rank 1), and the product drops its unit axis.
#[test]
fn matmul_by_a_1d_constant_is_a_matrix_vector_product() {
    let mut r = one_node("MatMul", &["x", "v"], &[&[2, 3]], vec![floats("v", &[3], &[1.0, 10.0, 100.0])], vec![]).unwrap();
    let out = r.run(vec![("x".into(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], None)]).unwrap();
    assert_eq!(out[0].1, vec![2]);
    assert_eq!(out[0].2, vec![321.0, 654.0]);
}

/// An RNN whose sequence_lens has fewer values than the batch (it indexed
/// past them), and one whose peepholes have the wrong shape (sliced past
/// them): errors naming the input.
#[test]
fn rnn_inputs_of_the_wrong_length_are_errors() {
    let (w, r) = (floats("w", &[1, 2, 1], &[1.0, 1.0]), floats("r", &[1, 2, 2], &[0.5; 4]));
    let lens = crate::models::onnx::proto::TensorProto { name: Some("l".into()), dims: vec![1], data_type: Some(7), int64_data: vec![1], ..Default::default() };
    let e = one_node("RNN", &["x", "w", "r", "", "l"], &[&[2, 3, 1]], vec![w.clone(), r.clone(), lens], vec![]).err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(e.contains("sequence_lens has 1 values for a batch of 3"), "{e}");
    let lstm_w = floats("w", &[1, 4, 1], &[1.0; 4]);
    let lstm_r = floats("r", &[1, 4, 1], &[0.5; 4]);
    let p = floats("p", &[1, 2], &[0.0; 2]);
    let e = one_node("LSTM", &["x", "w", "r", "", "", "", "", "p"], &[&[2, 1, 1]], vec![lstm_w, lstm_r, p], vec![]).err().map(|e| format!("{e:#}")).unwrap_or_default();
    assert!(e.contains("P must be [1, 3]"), "{e}");
}

/// MultiHeadAttention with a 2-D query (its shape was indexed at 2).
#[test]
fn attention_of_the_wrong_rank_is_an_error() {
    let heads = crate::models::onnx::proto::AttributeProto {
        name: Some("num_heads".into()),
        i: Some(1),
        r#type: Some(crate::models::onnx::proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    };
    let mut n = one_node("MultiHeadAttention", &["q", "k", "v"], &[&[2, 4], &[2, 4], &[2, 4]], vec![], vec![heads]);
    let e = match n.as_mut() {
        Ok(r) => r.run(vec![("q".into(), vec![0.0; 8], None), ("k".into(), vec![0.0; 8], None), ("v".into(), vec![0.0; 8], None)]).err().map(|e| format!("{e:#}")).unwrap_or_default(),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("query must be [batch, sequence, hidden]"), "{e}");
}
