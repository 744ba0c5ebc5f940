//! The extended ops (`op::extended`) on Vulkan against the CPU backend:
//! every function code, broadcasting on both sides, strided sources,
//! gathers along each dimension, padding modes, scatters, row reductions
//! and scans.

use crate::backend::Backend;
use crate::base::dtype::DType;
use crate::graph::Graph;
use crate::memory::BufferTag;
use crate::op::{BinFn, MapFn, Op, PadMode, RowFn, ScanFn, ScatterReduce};
use crate::tensor::io::{get_values, set_values};
use crate::tensor::{Context, Tensor, TENSOR_OVERHEAD};
use std::sync::Arc;

type Build = dyn Fn(&Context, &[Arc<Tensor>]) -> Arc<Tensor>;

/// `build` over sources of sizes `srcs` (values from `vals`) on `backend`.
fn run(backend: &Backend, srcs: &[([usize; 4], Vec<f64>)], build: &Build) -> Vec<f64> {
    let ctx = Context::new(64 * TENSOR_OVERHEAD, true).unwrap();
    let ts: Vec<Arc<Tensor>> = srcs.iter().map(|(ne, _)| ctx.new_tensor(DType::F32, ne).unwrap()).collect();
    let y = build(&ctx, &ts);
    let _buf = ctx.alloc_tensors(backend, BufferTag::User).unwrap();
    for (t, (_, v)) in ts.iter().zip(srcs) {
        set_values(t, v, 0).unwrap();
    }
    Graph::build(&y).unwrap().compute(backend).unwrap();
    get_values(&y, 0, None).unwrap()
}

fn vals(n: usize, seed: u64) -> Vec<f64> {
    super::test_util::values(n, seed, -3.0, 3.0).into_iter().map(|v| v as f64).collect()
}

fn same(what: &str, srcs: &[([usize; 4], Vec<f64>)], build: &Build, tol: f64) {
    let Some(c) = super::test_util::ctx() else { return };
    let vk = Backend::on_vulkan_context(0, c);
    let want = run(&Backend::cpu(), srcs, build);
    let got = run(&vk, srcs, build);
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: Vulkan {g}, CPU {w}");
    }
}

#[test]
fn maps_match_the_cpu() {
    let x = vals(60, 1);
    let pos: Vec<f64> = x.iter().map(|v| v.abs() + 1.0).collect();
    for f in MapFn::ALL {
        let input = if matches!(f, MapFn::Acosh) { pos.clone() } else if matches!(f, MapFn::Asin | MapFn::Acos | MapFn::Atanh) {
            x.iter().map(|v| v / 4.0).collect()
        } else {
            x.clone()
        };
        let op = Op::Map { f, a: 0.7, b: 1.3 };
        same(&format!("{f:?}"), &[([5, 12, 1, 1], input)], &move |c, s| c.op(op.clone(), &[s[0].clone()]).unwrap(), 2e-5);
    }
}

#[test]
fn binaries_broadcast_both_operands() {
    for f in BinFn::ALL {
        let a = vals(12, 2);
        let b: Vec<f64> = vals(10, 3).iter().map(|v| if *v == 0.0 { 1.0 } else { *v }).collect();
        let op = Op::Binary { f };
        same(&format!("{f:?}"), &[([3, 1, 4, 1], a), ([1, 5, 1, 2], b)], &move |c, s| {
            c.op(op.clone(), &[s[0].clone(), s[1].clone()]).unwrap()
        }, 2e-5);
    }
    // a strided (permuted) first operand
    same("transposed Binary", &[([4, 3, 1, 1], vals(12, 4)), ([3, 1, 1, 1], vals(3, 5))], &|c, s| {
        let t = c.permute(&s[0], [1, 0, 2, 3]).unwrap();
        c.op(Op::Binary { f: BinFn::Max }, &[t, s[1].clone()]).unwrap()
    }, 0.0);
}

#[test]
fn gathers_pads_and_scatters_match_the_cpu() {
    for dim in 0..4 {
        let idx = vec![2.0, -1.0, 0.0, 7.0, 1.0];
        same(&format!("GatherAxis {dim}"), &[([3, 3, 3, 3], vals(81, 6)), ([5, 1, 1, 1], idx)], &move |c, s| {
            c.op(Op::GatherAxis { dim }, &[s[0].clone(), s[1].clone()]).unwrap()
        }, 0.0);
    }
    for mode in [PadMode::Constant, PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
        let op = Op::PadEx { lo: [2, 1, 0, 1], hi: [1, 2, 1, 0], mode, value: -7.5 };
        same(&format!("PadEx {mode:?}"), &[([4, 3, 2, 2], vals(48, 7))], &move |c, s| c.op(op.clone(), &[s[0].clone()]).unwrap(), 0.0);
    }
    for reduce in [ScatterReduce::None, ScatterReduce::Add, ScatterReduce::Mul, ScatterReduce::Max, ScatterReduce::Min] {
        let pairs = vec![1.0, 5.0, 3.0, -2.0, 1.0, 4.0, 9.0, 1.0, 0.0, 0.5];
        let op = Op::ScatterFlat { reduce };
        same(&format!("ScatterFlat {reduce:?}"), &[([4, 1, 1, 1], vals(4, 8)), ([2, 5, 1, 1], pairs)], &move |c, s| {
            c.op(op.clone(), &[s[0].clone(), s[1].clone()]).unwrap()
        }, 1e-6);
    }
}

#[test]
fn row_reductions_and_scans_match_the_cpu() {
    let x: Vec<f64> = vals(70, 9);
    for f in RowFn::ALL {
        let input: Vec<f64> = if matches!(f, RowFn::LogSum) { x.iter().map(|v| v.abs() + 0.1).collect() } else { x.clone() };
        let op = Op::ReduceRows { f };
        same(&format!("{f:?}"), &[([7, 5, 2, 1], input)], &move |c, s| c.op(op.clone(), &[s[0].clone()]).unwrap(), 1e-5);
    }
    let scans = [
        ScanFn::LogSoftmax,
        ScanFn::Hardmax,
        ScanFn::CumSum { exclusive: false, reverse: false },
        ScanFn::CumSum { exclusive: true, reverse: true },
        ScanFn::CumProd { exclusive: true, reverse: false },
        ScanFn::CumProd { exclusive: false, reverse: true },
    ];
    for f in scans {
        let op = Op::ScanRows { f };
        same(&format!("{f:?}"), &[([7, 5, 2, 1], vals(70, 10))], &move |c, s| c.op(op.clone(), &[s[0].clone()]).unwrap(), 1e-5);
    }
}
