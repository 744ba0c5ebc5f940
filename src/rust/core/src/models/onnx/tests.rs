//! Tests of the importer on models built here from the protobuf types:
//! results against hand computations, constant folding, the errors, and
//! truncated or corrupted files (errors, never panics).

use super::model::Model;
use super::proto::{self, attribute_proto::AttributeType, type_proto, TensorProto};
use super::run::Runner;
use crate::backend::Backend;
use prost::bytes::Bytes;
use prost::Message;
use std::sync::Arc;

fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<proto::AttributeProto>) -> proto::NodeProto {
    proto::NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> proto::AttributeProto {
    proto::AttributeProto { name: Some(name.into()), ints: v.to_vec(), r#type: Some(AttributeType::Ints as i32), ..Default::default() }
}

fn int(name: &str, v: i64) -> proto::AttributeProto {
    proto::AttributeProto { name: Some(name.into()), i: Some(v), r#type: Some(AttributeType::Int as i32), ..Default::default() }
}

fn value(name: &str, elem: i32, dims: &[i64]) -> proto::ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| proto::tensor_shape_proto::Dimension {
            value: Some(if d < 0 {
                proto::tensor_shape_proto::dimension::DimensionValue::DimParam("N".into())
            } else {
                proto::tensor_shape_proto::dimension::DimensionValue::DimValue(d)
            }),
            ..Default::default()
        })
        .collect();
    proto::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(proto::TypeProto {
            value: Some(type_proto::TypeValue::TensorType(type_proto::TensorTypeProto {
                elem_type: Some(elem),
                shape: Some(proto::TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: dims.to_vec(), data_type: Some(1), float_data: v.to_vec(), ..Default::default() }
}

fn int64s(name: &str, v: &[i64]) -> TensorProto {
    TensorProto { name: Some(name.into()), dims: vec![v.len() as i64], data_type: Some(7), int64_data: v.to_vec(), ..Default::default() }
}

fn model(nodes: Vec<proto::NodeProto>, inputs: Vec<proto::ValueInfoProto>, outputs: &[&str], inits: Vec<TensorProto>) -> Vec<u8> {
    let g = proto::GraphProto {
        name: Some("t".into()),
        node: nodes,
        input: inputs,
        output: outputs.iter().map(|o| value(o, 1, &[])).collect(),
        initializer: inits,
        ..Default::default()
    };
    proto::ModelProto {
        ir_version: Some(8),
        opset_import: vec![proto::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(g),
        ..Default::default()
    }
    .encode_to_vec()
}

fn runner(bytes: &[u8]) -> crate::Result<Runner> {
    let m = Model::from_bytes(Bytes::copy_from_slice(bytes), None)?;
    Runner::new(m, Arc::new(Backend::cpu()), false, Vec::new())
}

/// The message of the error `bytes` must give.
fn err(bytes: &[u8]) -> String {
    match runner(bytes) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => format!("{e:#}"),
    }
}

/// A 2-layer perceptron with a transposed Gemm, a MatMul, broadcasting and
/// a softmax, against the same computed by hand.
#[test]
fn a_small_network_computes_what_it_says() {
    let w1 = [0.5f32, -1.0, 0.25, 2.0, 1.5, -0.5];
    let b1 = [0.1f32, -0.2];
    let w2 = [1.0f32, -2.0, 0.5, 3.0, -1.0, 0.25];
    let bytes = model(
        vec![
            node("Gemm", &["x", "w1", "b1"], &["h"], vec![int("transB", 1)]),
            node("Relu", &["h"], &["r"], vec![]),
            node("MatMul", &["r", "w2"], &["z"], vec![]),
            node("Softmax", &["z"], &["y"], vec![int("axis", -1)]),
        ],
        vec![value("x", 1, &[2, 3])],
        &["y"],
        vec![floats("w1", &[2, 3], &w1), floats("b1", &[2], &b1), floats("w2", &[2, 3], &w2)],
    );
    let mut r = runner(&bytes).unwrap();
    let x = [1.0, 2.0, -1.0, 0.5, 0.0, 3.0];
    let out = r.run(vec![("x".into(), x.to_vec(), None)]).unwrap();
    assert_eq!(out[0].1, vec![2, 3]);
    for row in 0..2 {
        let h: Vec<f64> = (0..2)
            .map(|j| ((0..3).map(|k| x[row * 3 + k] * w1[j * 3 + k] as f64).sum::<f64>() + b1[j] as f64).max(0.0))
            .collect();
        let z: Vec<f64> = (0..3).map(|c| (0..2).map(|j| h[j] * w2[j * 3 + c] as f64).sum()).collect();
        let m = z.iter().cloned().fold(f64::MIN, f64::max);
        let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
        for c in 0..3 {
            let want = (z[c] - m).exp() / s;
            assert!((out[0].2[row * 3 + c] - want).abs() < 1e-6, "row {row} col {c}");
        }
    }
    assert_eq!(r.info.n_splits, 1);
}

/// Shape arithmetic folds at load: only the data path reaches the engine.
#[test]
fn shape_arithmetic_is_folded() {
    let bytes = model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "i0"], &["n0"], vec![int("axis", 0)]),
            node("Unsqueeze", &["n0", "ax"], &["n0u"], vec![]),
            node("Concat", &["n0u", "m1"], &["shape"], vec![int("axis", 0)]),
            node("Reshape", &["x", "shape"], &["y"], vec![]),
        ],
        vec![value("x", 1, &[2, 3, 4])],
        &["y"],
        vec![TensorProto { dims: vec![], ..int64s("i0", &[0]) }, int64s("ax", &[0]), int64s("m1", &[-1])],
    );
    let mut r = runner(&bytes).unwrap();
    assert!(r.info.planned);
    let direct = model(
        vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
        vec![value("x", 1, &[2, 3, 4])],
        &["y"],
        vec![int64s("shape", &[2, -1])],
    );
    assert_eq!(r.info.n_nodes, runner(&direct).unwrap().info.n_nodes, "only the reshape reaches the engine");
    let x: Vec<f64> = (0..24).map(|v| v as f64).collect();
    let out = r.run(vec![("x".into(), x.clone(), None)]).unwrap();
    assert_eq!(out[0].1, vec![2, 12]);
    assert_eq!(out[0].2, x);
}

#[test]
fn unsupported_operators_and_bad_graphs_are_errors() {
    let bytes = model(
        vec![node("Foo", &["x"], &["a"], vec![]), node("Bar", &["a"], &["b"], vec![]), node("Foo", &["b"], &["y"], vec![])],
        vec![value("x", 1, &[2])],
        &["y"],
        vec![],
    );
    let e = err(&bytes);
    assert!(e.contains("2 operators") && e.contains("Bar (node '#1')") && e.contains("Foo (nodes '#0', '#2')"), "{e}");
    let bytes = model(vec![node("Relu", &["nowhere"], &["y"], vec![])], vec![value("x", 1, &[2])], &["y"], vec![]);
    let e = err(&bytes);
    assert!(e.contains("Relu node '#0'") && e.contains("'nowhere'"), "{e}");
    let bytes = model(
        vec![node("Reshape", &["x", "s"], &["y"], vec![])],
        vec![value("x", 1, &[6])],
        &["y"],
        vec![int64s("s", &[4, 2])],
    );
    let e = err(&bytes);
    assert!(e.contains("Reshape node '#0'") && e.contains("6 elements"), "{e}");
    let bytes = model(
        vec![node("Transpose", &["x"], &["y"], vec![ints("perm", &[0, 0])])],
        vec![value("x", 1, &[2, 2])],
        &["y"],
        vec![],
    );
    assert!(err(&bytes).contains("not a permutation"));
}

/// Every prefix and many single-byte corruptions of a model load or fail
/// with an error; none panics.
#[test]
fn corrupted_files_never_panic() {
    crate::base::alloc::set_limit(256 << 20);
    let bytes = model(
        vec![
            node("Conv", &["x", "w"], &["c"], vec![ints("pads", &[1, 1, 1, 1])]),
            node("Resize", &["c", "", "sc"], &["r"], vec![]),
            node("ReduceMean", &["r"], &["y"], vec![ints("axes", &[2, 3])]),
        ],
        vec![value("x", 1, &[1, 2, 4, 4])],
        &["y"],
        vec![floats("w", &[3, 2, 3, 3], &[0.1; 54]), floats("sc", &[4], &[1.0, 1.0, 2.0, 2.0])],
    );
    assert!(runner(&bytes).is_ok());
    let mut seed = 12345u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let mut cases: Vec<Vec<u8>> = (0..bytes.len()).map(|n| bytes[..n].to_vec()).collect();
    for _ in 0..1500 {
        let mut b = bytes.clone();
        let i = next() % b.len();
        b[i] = match next() % 4 {
            0 => 0xff,
            1 => 0x00,
            2 => b[i] ^ (1 << (next() % 8)),
            _ => (next() % 256) as u8,
        };
        cases.push(b);
    }
    for b in cases {
        let r = std::panic::catch_unwind(|| {
            let _ = runner(&b);
        });
        assert!(r.is_ok(), "a corrupted model panicked ({} bytes)", b.len());
    }
    crate::base::alloc::set_limit(0);
}
