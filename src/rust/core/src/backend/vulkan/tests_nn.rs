//! The transformer, convolution, row and index ops on a real device
//! (skipped without one) against the CPU backend: the same graph built,
//! filled and computed on both, in f32 and with f16 sources, in place and not.

use crate::backend::Backend;
use crate::base::dtype::DType::{self, *};
use crate::graph::Graph;
use crate::memory::BufferTag;
use crate::op::attn::Attn;
use crate::op::conv::Conv;
use crate::op::glu::{Glu, GluKind};
use crate::op::index::IndexOp;
use crate::op::rope::{Rope, MODE_MROPE, MODE_NEOX, MODE_VISION};
use crate::op::rows::RowOp;
use crate::op::{Op, PoolOp, UnaryOp};
use crate::tensor::io::{get_values, set_values};
use crate::tensor::{Context, Tensor, TENSOR_OVERHEAD};
use std::sync::Arc;

type Built = (Vec<(Arc<Tensor>, Vec<f64>)>, Arc<Tensor>);

fn vals(n: usize, seed: u64) -> Vec<f64> {
    super::test_util::values(n, seed, -1.0, 1.0).iter().map(|&v| v as f64).collect()
}

/// The values of the graph `build` makes, computed on `backend`.
fn compute_on(backend: &Backend, build: &dyn Fn(&Context) -> crate::Result<Built>) -> Vec<f64> {
    let ctx = Context::new(256 * TENSOR_OVERHEAD, true).unwrap();
    let (inputs, out) = build(&ctx).unwrap();
    let _buf = ctx.alloc_tensors(backend, BufferTag::User).unwrap();
    for (t, v) in &inputs {
        set_values(t, v, 0).unwrap();
    }
    Graph::build(&out).unwrap().compute(backend).unwrap_or_else(|e| panic!("{}: {e:#}", backend.name()));
    get_values(&out, 0, None).unwrap()
}

/// The graph on Vulkan and on the CPU agree within `tol` (relative to 1 + |value|).
fn check(what: &str, tol: f64, build: &dyn Fn(&Context) -> crate::Result<Built>) {
    let vk = match Backend::vulkan(0) {
        Ok(b) => b,
        Err(e) => return eprintln!("skipping Vulkan test: {e:#}"),
    };
    let want = compute_on(&Backend::cpu(), build);
    let got = compute_on(&vk, build);
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs());
        assert!(ok, "{what}: element {i}: Vulkan {g}, CPU {w}");
    }
}

fn t(ctx: &Context, dt: DType, ne: &[usize], v: Vec<f64>) -> crate::Result<(Arc<Tensor>, Vec<f64>)> {
    Ok((ctx.new_tensor(dt, ne)?, v))
}

fn n(ne: &[usize]) -> usize {
    ne.iter().product()
}

fn unary_then(ctx: &Context, op: Op, srcs: Vec<(Arc<Tensor>, Vec<f64>)>, inplace: bool) -> crate::Result<Built> {
    let ts: Vec<Arc<Tensor>> = srcs.iter().map(|s| s.0.clone()).collect();
    let out = if inplace { ctx.op_inplace(op, &ts)? } else { ctx.op(op, &ts)? };
    Ok((srcs, out))
}

fn rope(n_dims: i32, mode: i32, forward: bool) -> Rope {
    let yarn = Rope { n_ctx_orig: 32, freq_scale: 0.5, ext_factor: 0.5, ..Rope::new(n_dims, mode) };
    Rope { sections: [2, 1, 1, 0], forward, ..yarn }
}

#[test]
fn rope_modes_on_vulkan() {
    for (mode, nd, ne0) in [(0, 6, 8), (MODE_NEOX, 8, 8), (MODE_MROPE, 8, 10), (MODE_VISION, 4, 8)] {
        for (forward, inplace, ff) in [(true, false, false), (false, false, true), (true, true, true)] {
            let per = if mode & MODE_MROPE != 0 { 4 } else { 1 };
            check(&format!("rope mode {mode} fwd {forward} inplace {inplace}"), 1e-4, &|c| {
                let mut s = vec![t(c, F32, &[ne0, 3, 5], vals(ne0 * 15, 1))?];
                s.push(t(c, I32, &[5 * per], (0..5 * per).map(|p| (p * 7 % 11) as f64).collect())?);
                if ff {
                    s.push(t(c, F32, &[ne0 / 2], (0..ne0 / 2).map(|k| 1.0 + k as f64).collect())?);
                }
                unary_then(c, Op::Rope(rope(nd as i32, mode, forward)), s, inplace)
            });
        }
    }
}

#[test]
fn attention_on_vulkan() {
    let (d, nq, h, m, hk) = (8, 5, 4, 6, 2);
    for (softcap, max_bias, mask) in [(0.0, 0.0, false), (3.0, 0.0, true), (0.0, 4.0, true)] {
        check(&format!("flash_attn_ext softcap {softcap} alibi {max_bias}"), 1e-4, &|c| {
            let mut s = vec![
                t(c, F32, &[d, nq, h], vals(d * nq * h, 2))?,
                t(c, F16, &[d, m, hk], vals(d * m * hk, 3))?,
                t(c, F16, &[d, m, hk], vals(d * m * hk, 4))?,
            ];
            if mask {
                let mv = (0..m * nq).map(|i| if i % 5 == 4 { f64::NEG_INFINITY } else { 0.1 * (i % 3) as f64 }).collect();
                s.push(t(c, F16, &[m, nq], mv)?);
            }
            unary_then(c, Op::Attn(Attn::FlashExt { scale: 0.35, max_bias, softcap }), s, false)
        });
    }
    for masked in [false, true] {
        check(&format!("flash_attn_back masked {masked}"), 1e-4, &|c| {
            let s = vec![
                t(c, F32, &[4, 3, 2], vals(24, 5))?,
                t(c, F32, &[4, 4, 1], vals(16, 6))?,
                t(c, F32, &[3, 4, 1], vals(12, 7))?,
                t(c, F32, &[3, 2, 3], vals(18, 8))?,
            ];
            unary_then(c, Op::Attn(Attn::FlashBack { masked }), s, false)
        });
    }
}

#[test]
fn glu_unary_and_gradients_on_vulkan() {
    for kind in GluKind::ALL {
        let g = Glu { kind, swapped: kind == GluKind::Geglu, alpha: 1.702, limit: 0.7 };
        check(&format!("glu {}", kind.name()), 1e-5, &|c| unary_then(c, Op::Glu(g), vec![t(c, F32, &[8, 3], vals(24, 9))?], false));
        check(&format!("glu split {}", kind.name()), 1e-5, &|c| {
            unary_then(c, Op::Glu(g), vec![t(c, F32, &[5, 3], vals(15, 10))?, t(c, F16, &[5, 3], vals(15, 11))?], true)
        });
    }
    for u in [UnaryOp::Sgn, UnaryOp::Ceil, UnaryOp::Floor, UnaryOp::Round, UnaryOp::Softplus, UnaryOp::GeluErf, UnaryOp::GeluQuick] {
        check(&format!("{u:?} in place"), 1e-5, &|c| {
            let v: Vec<f64> = vals(20, 12).iter().map(|x| x * 3.0).chain([2.5, -2.5, 0.0]).collect();
            unary_then(c, Op::Unary(u), vec![t(c, F32, &[23], v)?], true)
        });
    }
    check("silu_back", 1e-5, &|c| unary_then(c, Op::SiluBack, vec![t(c, F32, &[7, 2], vals(14, 13))?, t(c, F32, &[7, 2], vals(14, 14))?], false));
    for (op, inplace) in [
        (Op::Rows(RowOp::L2Norm { eps: 1e-6 }), true),
        (Op::Rows(RowOp::GroupNorm { groups: 2, eps: 1e-5 }), false),
        (Op::Rows(RowOp::RmsNormBack { eps: 1e-5 }), false),
        (Op::Rows(RowOp::SoftMaxBack { scale: 0.5, max_bias: 0.0 }), true),
        (Op::Norm { eps: 1e-5 }, true),
        (Op::SoftMax { scale: 1.0, max_bias: 0.0 }, true),
    ] {
        let two = matches!(op, Op::Rows(RowOp::RmsNormBack { .. } | RowOp::SoftMaxBack { .. }));
        check(&format!("{} inplace {inplace}", op.name()), 1e-4, &|c| {
            let mut s = vec![t(c, F32, &[6, 2, 5, 2], vals(120, 15))?];
            if two {
                s.push(t(c, F32, &[6, 2, 5, 2], vals(120, 16))?);
            }
            unary_then(c, op.clone(), s, inplace)
        });
    }
}

#[test]
fn sorting_and_counting_on_vulkan() {
    let v: Vec<f64> = vals(40, 17).iter().map(|x| (x * 4.0).round()).collect();
    for op in [Op::Rows(RowOp::Argsort { desc: false }), Op::Rows(RowOp::Argsort { desc: true }), Op::Rows(RowOp::TopK { k: 3 })] {
        check(op.name(), 0.0, &|c| unary_then(c, op.clone(), vec![t(c, F32, &[10, 4], v.clone())?], false));
    }
    let b: Vec<f64> = (0..1000).map(|i| ((i * 7) % 13) as f64).collect();
    let a: Vec<f64> = (0..1000).map(|i| ((i * 5) % 13) as f64).collect();
    check("count_equal", 0.0, &|c| unary_then(c, Op::Rows(RowOp::CountEqual), vec![t(c, I32, &[1000], a.clone())?, t(c, I32, &[1000], b.clone())?], false));
}

#[test]
fn convolutions_on_vulkan() {
    let p = (2, 1, 1, 0, 1, 2);
    check("conv_2d_dw", 1e-5, &|c| {
        let s = vec![t(c, F16, &[3, 3, 1, 4], vals(36, 18))?, t(c, F32, &[7, 8, 4, 2], vals(448, 19))?];
        unary_then(c, Op::Conv(Conv::Depthwise2d { s0: p.0, s1: p.1, p0: p.2, p1: p.3, d0: p.4, d1: p.5 }), s, false)
    });
    check("conv_2d_direct", 1e-5, &|c| {
        let s = vec![t(c, F32, &[3, 2, 4, 5], vals(120, 20))?, t(c, F32, &[7, 8, 4, 2], vals(448, 21))?];
        unary_then(c, Op::Conv(Conv::Direct2d { s0: p.0, s1: p.1, p0: p.2, p1: p.3, d0: p.4, d1: p.5 }), s, false)
    });
    check("conv_transpose_1d", 1e-5, &|c| {
        let s = vec![t(c, F16, &[3, 2, 4], vals(24, 22))?, t(c, F32, &[5, 4, 2], vals(40, 23))?];
        unary_then(c, Op::Conv(Conv::Transpose1d { s0: 2, p0: 1, d0: 2 }), s, false)
    });
    check("conv_transpose_2d_p0", 1e-5, &|c| {
        let s = vec![t(c, F16, &[2, 3, 3, 2], vals(36, 24))?, t(c, F32, &[3, 4, 2, 2], vals(48, 25))?];
        unary_then(c, Op::Conv(Conv::Transpose2d { stride: 2 }), s, false)
    });
    for op in [PoolOp::Max, PoolOp::Avg] {
        check("pool_1d", 1e-6, &|c| unary_then(c, Op::Conv(Conv::Pool1d { op, k0: 3, s0: 2, p0: 1 }), vec![t(c, F32, &[9, 3], vals(27, 26))?], false));
    }
    check("mul_mat_id", 1e-5, &|c| {
        let s = vec![
            t(c, F32, &[6, 4, 3], vals(72, 27))?,
            t(c, F32, &[6, 2, 3], vals(36, 28))?,
            t(c, I32, &[4, 3], vec![2.0, 0.0, 1.0, 1.0, 0.0, 0.0, 2.0, 1.0, 1.0, 2.0, 0.0, 2.0])?,
        ];
        unary_then(c, Op::MulMatId, s, false)
    });
}

#[test]
fn index_ops_on_vulkan() {
    let ops = [
        (Op::Index(IndexOp::Roll { shift: [2, -1, 1, 0] }), [6, 3, 2, 1]),
        (Op::Index(IndexOp::PadReflect1d { p0: 2, p1: 3 }), [6, 3, 2, 1]),
        (Op::Index(IndexOp::WinPart { w: 2 }), [3, 5, 3, 1]),
        (Op::Index(IndexOp::GetRelPos { qh: 3, kh: 3 }), [4, 5, 1, 1]),
        (Op::Index(IndexOp::Diag), [5, 1, 2, 1]),
        (Op::Index(IndexOp::DiagMaskZero { n_past: 1 }), [5, 4, 2, 1]),
        (Op::Index(IndexOp::TimestepEmbedding { dim: 7, max_period: 100 }), [4, 1, 1, 1]),
        (Op::Index(IndexOp::Interpolate { factor: 3, bicubic: false }), [3, 4, 2, 1]),
        (Op::Index(IndexOp::Interpolate { factor: 2, bicubic: true }), [4, 3, 2, 1]),
    ];
    for (op, ne) in ops {
        check(op.name(), 1e-5, &|c| unary_then(c, op.clone(), vec![t(c, F32, &ne, vals(n(&ne), 29))?], false));
    }
    check("win_unpart", 0.0, &|c| unary_then(c, Op::Index(IndexOp::WinUnpart { w0: 5, h0: 3, w: 2 }), vec![t(c, F32, &[3, 2, 2, 6], vals(72, 30))?], false));
    check("arange", 0.0, &|c| Ok((vec![], c.op(Op::Index(IndexOp::Arange { start: -1.0, stop: 3.0, step: 0.25 }), &[])?)));
    check("add_rel_pos in place", 1e-6, &|c| {
        let s = vec![t(c, F32, &[9, 4, 2], vals(72, 31))?, t(c, F32, &[3, 2, 2, 2], vals(24, 32))?, t(c, F32, &[3, 2, 2, 2], vals(24, 33))?];
        unary_then(c, Op::Index(IndexOp::AddRelPos), s, true)
    });
    check("get_rows_back", 1e-6, &|c| {
        let s = vec![t(c, F32, &[3, 4], vals(12, 34))?, t(c, I32, &[4], vec![2.0, 0.0, 2.0, 4.0])?, t(c, F32, &[3, 5], vec![0.0; 15])?];
        unary_then(c, Op::Index(IndexOp::GetRowsBack), s, false)
    });
    check("repeat_back", 1e-6, &|c| {
        let s = vec![t(c, F32, &[6, 4, 2], vals(48, 35))?, t(c, F32, &[3, 2, 1], vec![0.0; 6])?];
        unary_then(c, Op::Index(IndexOp::RepeatBack), s, false)
    });
    for inplace in [false, true] {
        check(&format!("set inplace {inplace}"), 0.0, &|c| {
            let (a, b) = (c.new_tensor(F32, &[4, 3])?, c.new_tensor(F32, &[2, 2])?);
            let out = c.set(&a, &b, [16, 48, 48], 20, inplace)?;
            Ok((vec![(a, vals(12, 36)), (b, vec![1.0, 2.0, 3.0, 4.0])], out))
        });
    }
}
