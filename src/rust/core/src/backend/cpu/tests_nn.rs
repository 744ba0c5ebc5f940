//! Kernel tests of the transformer, convolution, row and index ops against
//! direct formulas (rotation matrices, naive attention, loops over the
//! definitions), and of every backward op against central finite
//! differences of its forward op. In f64, with 1 and 2 threads.

use super::access::Src;
use super::driver::kernel;
use super::CpuPool;
use crate::op::attn::{back_offsets, Attn};
use crate::op::conv::Conv;
use crate::op::glu::{Glu, GluKind};
use crate::op::index::IndexOp;
use crate::op::rope::Rope;
use crate::op::rows::RowOp;
use crate::op::{shape, Op, PoolOp};
use crate::base::dtype::DType;
use crate::layout::Layout;
use std::borrow::Cow;

fn src(d: Vec<f64>, ne: [usize; 4]) -> Src<'static, f64> {
    assert_eq!(d.len(), ne.iter().product::<usize>());
    Src::new(Cow::Owned(d), ne)
}

/// Deterministic values in [-1, 1).
pub(super) fn vals(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// Runs `op` on sources of the given sizes and data (types from `dtypes`,
/// f64 when None), with 1 and 2 threads; the shape comes from the op's rule.
fn run(op: &Op, data: &[(Vec<f64>, [usize; 4], DType)]) -> (Vec<f64>, [usize; 4]) {
    let layouts: Vec<Layout> = data.iter().map(|(_, ne, t)| Layout::contiguous(*t, *ne)).collect();
    let out = shape::infer(op, &layouts).unwrap();
    let ne4 = out.ne4();
    let mut res = Vec::new();
    for threads in [1, 2] {
        let s: Vec<Src<'_, f64>> = data.iter().map(|(d, ne, _)| src(d.clone(), *ne)).collect();
        let mut o = vec![0f64; out.ne.iter().product()];
        kernel(op, &s, &mut o, ne4, &CpuPool::new(threads).unwrap()).unwrap();
        res.push(o);
    }
    assert_eq!(res[0], res[1], "1 and 2 threads differ for {}", op.name());
    (res.pop().unwrap(), ne4)
}

fn f(d: Vec<f64>, ne: [usize; 4]) -> (Vec<f64>, [usize; 4], DType) {
    (d, ne, DType::F64)
}

fn i32s(d: &[i64], ne: [usize; 4]) -> (Vec<f64>, [usize; 4], DType) {
    (d.iter().map(|&v| v as f64).collect(), ne, DType::I32)
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}[{i}]: got {g}, want {w}");
    }
}

/// sum_j dy_j d f_j / d x_i by central differences.
fn vjp(fwd: impl Fn(&[f64]) -> Vec<f64>, x: &[f64], dy: &[f64]) -> Vec<f64> {
    let h = 1e-6;
    (0..x.len())
        .map(|i| {
            let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
            xp[i] += h;
            xm[i] -= h;
            let (fp, fm) = (fwd(&xp), fwd(&xm));
            fp.iter().zip(&fm).zip(dy).map(|((p, m), g)| (p - m) / (2.0 * h) * g).sum()
        })
        .collect()
}

fn rope(n_dims: i32, mode: i32, forward: bool) -> Rope {
    Rope { forward, ..Rope::new(n_dims, mode) }
}

#[test]
fn rope_is_a_rotation_of_pairs() {
    // a [8, 2 heads, 3 tokens]; positions 0, 1, 5; 6 of 8 dims rotate
    let a = vals(48, 1);
    let pos = [0i64, 1, 5];
    for mode in [0, 2] {
        let op = Op::Rope(rope(6, mode, true));
        let (out, _) = run(&op, &[f(a.clone(), [8, 2, 3, 1]), i32s(&pos, [3, 1, 1, 1])]);
        for tok in 0..3 {
            for head in 0..2 {
                let base = (tok * 2 + head) * 8;
                for k in 0..3 {
                    let th = pos[tok] as f64 * 10000f64.powf(-2.0 * k as f64 / 6.0);
                    let (i, j) = if mode == 0 { (2 * k, 2 * k + 1) } else { (k, k + 3) };
                    // [c -s; s c] [x_i; x_j]
                    let (c, s) = (th.cos(), th.sin());
                    let (xi, xj) = (a[base + i], a[base + j]);
                    close(&[out[base + i], out[base + j]], &[c * xi - s * xj, s * xi + c * xj], 1e-12, "rope");
                }
                close(&out[base + 6..base + 8], &a[base + 6..base + 8], 0.0, "rope tail");
            }
        }
        // the backward pass is the transposed rotation: the gradient of the forward pass
        let dy = vals(48, 2);
        let back = Op::Rope(rope(6, mode, false));
        let (gx, _) = run(&back, &[f(dy.clone(), [8, 2, 3, 1]), i32s(&pos, [3, 1, 1, 1])]);
        let fwd = |x: &[f64]| run(&op, &[f(x.to_vec(), [8, 2, 3, 1]), i32s(&pos, [3, 1, 1, 1])]).0;
        close(&gx, &vjp(fwd, &a, &dy), 1e-7, "rope_back");
    }
}

#[test]
fn rope_frequency_factors_and_yarn() {
    let a = vals(16, 3);
    let ff = vec![1.0, 2.0, 4.0, 0.5];
    let op = Op::Rope(rope(8, 0, true));
    let (out, _) = run(&op, &[f(a.clone(), [8, 1, 2, 1]), i32s(&[2, 7], [2, 1, 1, 1]), (ff.clone(), [4, 1, 1, 1], DType::F32)]);
    let th = 7.0 * 10000f64.powf(-2.0 * 2.0 / 8.0) / ff[2];
    let (x0, x1) = (a[8 + 4], a[8 + 5]);
    close(&[out[12], out[13]], &[x0 * th.cos() - x1 * th.sin(), x0 * th.sin() + x1 * th.cos()], 1e-12, "ff");
    // YaRN: ext_factor 1 and freq_scale 0.5 scale the magnitude by 1 + 0.1 ln 2
    let y = Rope { ext_factor: 1.0, freq_scale: 0.5, n_ctx_orig: 64, ..rope(8, 0, true) };
    let (o2, _) = run(&Op::Rope(y), &[f(a.clone(), [8, 1, 2, 1]), i32s(&[0, 0], [2, 1, 1, 1])]);
    close(&o2[..2], &[a[0] * (1.0 + 0.1 * 2f64.ln()), a[1] * (1.0 + 0.1 * 2f64.ln())], 1e-6, "yarn");
}

/// softmax(scale q.k + slope mask) v with the score matrix written out.
fn naive_attention(q: &[f64], k: &[f64], v: &[f64], mask: Option<&[f64]>, dims: [usize; 6], scale: f64, softcap: f64) -> Vec<f64> {
    let [d, n, h, m, hk, dv] = dims;
    let mut out = vec![0.0; dv * h * n];
    for ih in 0..h {
        let kh = ih / (h / hk);
        for iq in 0..n {
            let mut s: Vec<f64> = (0..m)
                .map(|im| {
                    let mut x: f64 = (0..d).map(|t| q[t + d * (iq + n * ih)] * k[t + d * (im + m * kh)]).sum::<f64>() * scale;
                    if softcap > 0.0 {
                        x = softcap * (x / softcap).tanh();
                    }
                    x + mask.map_or(0.0, |mk| mk[im + m * iq])
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter_mut().map(|x| {
                *x = (*x - mx).exp();
                *x
            }).sum();
            for t in 0..dv {
                out[t + dv * (ih + h * iq)] = (0..m).map(|im| s[im] / z * v[t + dv * (im + m * kh)]).sum();
            }
        }
    }
    out
}

#[test]
fn flash_attention_matches_naive_attention() {
    let (d, n, h, m, hk, dv) = (4, 3, 4, 5, 2, 3);
    let (q, k, v) = (vals(d * n * h, 4), vals(d * m * hk, 5), vals(dv * m * hk, 6));
    let mask: Vec<f64> = (0..m * n).map(|i| if i % 4 == 3 { f64::NEG_INFINITY } else { 0.1 * i as f64 }).collect();
    for softcap in [0.0, 2.0] {
        let op = Op::Attn(Attn::FlashExt { scale: 0.7, max_bias: 0.0, softcap: softcap as f32 });
        let srcs = [f(q.clone(), [d, n, h, 1]), f(k.clone(), [d, m, hk, 1]), f(v.clone(), [dv, m, hk, 1]), f(mask.clone(), [m, n, 1, 1])];
        let (out, ne) = run(&op, &srcs);
        assert_eq!(ne, [dv, h, n, 1]);
        let want = naive_attention(&q, &k, &v, Some(&mask), [d, n, h, m, hk, dv], 0.7f32 as f64, softcap);
        close(&out, &want, 1e-12, "flash_attn_ext");
    }
}

#[test]
fn flash_attention_back_is_the_gradient() {
    let (d, n, h, m) = (4, 3, 2, 3);
    let (q, k, v) = (vals(d * n * h, 7), vals(d * m * h, 8), vals(d * m * h, 9));
    let g = vals(d * h * n, 10);
    let causal: Vec<f64> = (0..m * n).map(|i| if i % m > i / m { f64::NEG_INFINITY } else { 0.0 }).collect();
    let scale = 1.0 / (d as f64).sqrt();
    let srcs = [f(q.clone(), [d, n, h, 1]), f(k.clone(), [d, m, h, 1]), f(v.clone(), [d, m, h, 1]), f(g.clone(), [d, h, n, 1])];
    let (out, _) = run(&Op::Attn(Attn::FlashBack { masked: true }), &srcs);
    let o = back_offsets(q.len(), k.len(), v.len());
    let dims = [d, n, h, m, h, d];
    let gq = vjp(|x| naive_attention(x, &k, &v, Some(&causal), dims, scale, 0.0), &q, &g);
    let gk = vjp(|x| naive_attention(&q, x, &v, Some(&causal), dims, scale, 0.0), &k, &g);
    let gv = vjp(|x| naive_attention(&q, &k, x, Some(&causal), dims, scale, 0.0), &v, &g);
    close(&out[o[0]..o[0] + q.len()], &gq, 1e-6, "dq");
    close(&out[o[1]..o[1] + k.len()], &gk, 1e-6, "dk");
    close(&out[o[2]..o[2] + v.len()], &gv, 1e-6, "dv");
}

/// act(x) * g written out per kind.
fn glu_ref(kind: GluKind, x: f64, g: f64, alpha: f64, limit: f64) -> f64 {
    let gelu = |z: f64| 0.5 * z * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (z + 0.044715 * z * z * z)).tanh());
    let sig = |z: f64| 1.0 / (1.0 + (-z).exp());
    match kind {
        GluKind::Reglu => x.max(0.0) * g,
        GluKind::Geglu => gelu(x) * g,
        GluKind::Swiglu => x * sig(x) * g,
        GluKind::GegluErf => 0.5 * x * (1.0 + libm::erf(x / 2f64.sqrt())) * g,
        GluKind::GegluQuick => x * sig(1.702 * x) * g,
        GluKind::SwigluOai => {
            let xc = x.min(limit);
            xc * sig(alpha * xc) * (g.clamp(-limit, limit) + 1.0)
        }
    }
}

#[test]
fn glu_family_and_silu_back() {
    let a = vals(12, 11);
    for kind in GluKind::ALL {
        for swapped in [false, true] {
            let g = Glu { kind, swapped, alpha: 1.5, limit: 0.5 };
            let (out, ne) = run(&Op::Glu(g), &[f(a.clone(), [6, 2, 1, 1])]);
            assert_eq!(ne, [3, 2, 1, 1]);
            for r in 0..2 {
                for i in 0..3 {
                    let (x, gt) = (a[r * 6 + i], a[r * 6 + 3 + i]);
                    let (x, gt) = if swapped { (gt, x) } else { (x, gt) };
                    close(&[out[r * 3 + i]], &[glu_ref(kind, x, gt, 1.5, 0.5)], 1e-12, kind.name());
                }
            }
        }
    }
    // the split form and the activation values against direct formulas
    let (x, gt) = (vals(5, 12), vals(5, 13));
    let g = Glu { kind: GluKind::GegluErf, swapped: false, alpha: 0.0, limit: 0.0 };
    let (out, _) = run(&Op::Glu(g), &[f(x.clone(), [5, 1, 1, 1]), f(gt.clone(), [5, 1, 1, 1])]);
    let erf = |v: f64| libm::erf(v);
    let want: Vec<f64> = x.iter().zip(&gt).map(|(u, w)| 0.5 * u * (1.0 + erf(u / 2f64.sqrt())) * w).collect();
    close(&out, &want, 1e-15, "geglu_erf_split");
    let dy = vals(5, 14);
    let (gx, _) = run(&Op::SiluBack, &[f(dy.clone(), [5, 1, 1, 1]), f(x.clone(), [5, 1, 1, 1])]);
    let silu = |v: &[f64]| v.iter().map(|t| t / (1.0 + (-t).exp())).collect::<Vec<_>>();
    close(&gx, &vjp(silu, &x, &dy), 1e-8, "silu_back");
}

#[test]
fn norm_and_softmax_gradients() {
    let x = vals(12, 15);
    let dy = vals(12, 16);
    let ne = [4, 3, 1, 1];
    let fwd = |op: Op| move |v: &[f64]| run(&op, &[f(v.to_vec(), ne)]).0;
    let (g, _) = run(&Op::Rows(RowOp::RmsNormBack { eps: 1e-3 }), &[f(dy.clone(), ne), f(x.clone(), ne)]);
    close(&g, &vjp(fwd(Op::RmsNorm { eps: 1e-3 }), &x, &dy), 1e-7, "rms_norm_back");
    let sm = Op::SoftMax { scale: 0.5, max_bias: 0.0 };
    let y = run(&sm, &[f(x.clone(), ne)]).0;
    let (g, _) = run(&Op::Rows(RowOp::SoftMaxBack { scale: 0.5, max_bias: 0.0 }), &[f(dy.clone(), ne), f(y, ne)]);
    close(&g, &vjp(fwd(sm), &x, &dy), 1e-7, "soft_max_ext_back");
    // l2 and group norms against their definitions
    let (l2, _) = run(&Op::Rows(RowOp::L2Norm { eps: 1e-12 }), &[f(x.clone(), ne)]);
    for r in 0..3 {
        let n: f64 = x[r * 4..r * 4 + 4].iter().map(|v| v * v).sum::<f64>().sqrt();
        close(&l2[r * 4..r * 4 + 4], &x[r * 4..r * 4 + 4].iter().map(|v| v / n).collect::<Vec<_>>(), 1e-15, "l2");
    }
    let gx = vals(2 * 2 * 5 * 2, 17);
    let (gn, _) = run(&Op::Rows(RowOp::GroupNorm { groups: 2, eps: 0.0 }), &[f(gx.clone(), [2, 2, 5, 2])]);
    // 5 channels in groups of 3 and 2
    for b in 0..2 {
        for (c0, c1) in [(0, 3), (3, 5)] {
            let r = (b * 5 + c0) * 4..(b * 5 + c1) * 4;
            let seg = &gx[r.clone()];
            let mean = seg.iter().sum::<f64>() / seg.len() as f64;
            let sd = (seg.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / seg.len() as f64).sqrt();
            close(&gn[r], &seg.iter().map(|v| (v - mean) / sd).collect::<Vec<_>>(), 1e-12, "group_norm");
        }
    }
}

#[test]
fn gathers_and_their_gradients() {
    let a = vals(12, 18);
    let idx = [2i64, 0, 2];
    let gr = Op::GetRows;
    let fwd = |v: &[f64]| run(&gr, &[f(v.to_vec(), [3, 4, 1, 1]), i32s(&idx, [3, 1, 1, 1])]).0;
    let dy = vals(9, 19);
    let (g, ne) = run(&Op::Index(IndexOp::GetRowsBack), &[f(dy.clone(), [3, 3, 1, 1]), i32s(&idx, [3, 1, 1, 1]), f(a.clone(), [3, 4, 1, 1])]);
    assert_eq!(ne, [3, 4, 1, 1]);
    close(&g, &vjp(fwd, &a, &dy), 1e-8, "get_rows_back");
    let b = vals(6, 20);
    let rep = |v: &[f64]| run(&Op::Repeat, &[f(v.to_vec(), [3, 2, 1, 1]), f(vec![0.0; 24], [6, 2, 2, 1])]).0;
    let dy = vals(24, 21);
    let (g, _) = run(&Op::Index(IndexOp::RepeatBack), &[f(dy.clone(), [6, 2, 2, 1]), f(b.clone(), [3, 2, 1, 1])]);
    close(&g, &vjp(rep, &b, &dy), 1e-8, "repeat_back");
}

#[test]
fn index_ops_by_definition() {
    let a: Vec<f64> = (1..=5).map(|v| v as f64).collect();
    let (r, _) = run(&Op::Index(IndexOp::Roll { shift: [1, 0, 0, 0] }), &[f(a.clone(), [5, 1, 1, 1])]);
    assert_eq!(r, vec![5.0, 1.0, 2.0, 3.0, 4.0]);
    let (r, _) = run(&Op::Index(IndexOp::Roll { shift: [-1, 0, 0, 0] }), &[f(a.clone(), [5, 1, 1, 1])]);
    assert_eq!(r, vec![2.0, 3.0, 4.0, 5.0, 1.0]);
    let (r, _) = run(&Op::Index(IndexOp::PadReflect1d { p0: 2, p1: 2 }), &[f(a[..4].to_vec(), [4, 1, 1, 1])]);
    assert_eq!(r, vec![3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 2.0]);
    let (r, _) = run(&Op::Index(IndexOp::Diag), &[f(a[..3].to_vec(), [3, 1, 1, 1])]);
    assert_eq!(r, vec![1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0]);
    let (r, _) = run(&Op::Index(IndexOp::DiagMaskZero { n_past: 0 }), &[f(vec![1.0; 9], [3, 3, 1, 1])]);
    assert_eq!(r, vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
    let (r, _) = run(&Op::Index(IndexOp::Arange { start: 2.0, stop: 10.0, step: 2.0 }), &[]);
    assert_eq!(r, vec![2.0, 4.0, 6.0, 8.0]);
    // windows: a 5 x 3 map in 2 x 2 windows and back
    let m: Vec<f64> = (0..30).map(|v| v as f64).collect();
    let (w, ne) = run(&Op::Index(IndexOp::WinPart { w: 2 }), &[f(m.clone(), [2, 5, 3, 1])]);
    assert_eq!(ne, [2, 2, 2, 6]);
    // window 2 (third along x) holds columns 4, 5 of rows 0, 1: column 5 is padding
    assert_eq!(&w[2 * 8..2 * 8 + 8], &[8.0, 9.0, 0.0, 0.0, 18.0, 19.0, 0.0, 0.0]);
    let (u, _) = run(&Op::Index(IndexOp::WinUnpart { w0: 5, h0: 3, w: 2 }), &[f(w, ne)]);
    assert_eq!(u, m);
    // set: b into the 2 x 2 block at (1, 1) of a 4 x 3 a
    let (s, _) = run(&Op::Index(IndexOp::Set { nb: [4, 12, 12], offset: 5 }), &[f(vec![0.0; 12], [4, 3, 1, 1]), f(vec![1.0, 2.0, 3.0, 4.0], [2, 2, 1, 1])]);
    assert_eq!(s, vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0]);
    // timestep embedding: cos then sin of t max_period^(-j / half)
    let (t, ne) = run(&Op::Index(IndexOp::TimestepEmbedding { dim: 5, max_period: 100 }), &[f(vec![3.0], [1, 1, 1, 1])]);
    assert_eq!(ne, [6, 1, 1, 1]);
    let fr = 100f64.powf(-0.5);
    close(&t, &[3f64.cos(), (3.0 * fr).cos(), 3f64.sin(), (3.0 * fr).sin(), 0.0, 0.0], 1e-14, "timestep");
}

#[test]
fn relative_positions_match_the_reference() {
    // ggml's test-rel-pos: rel-pos tables of two 3 x 3 sources, added to ones
    let t1: Vec<f64> = (0..9).map(|v| v as f64).collect();
    let t2: Vec<f64> = (1..10).map(|v| v as f64).collect();
    let rp = Op::Index(IndexOp::GetRelPos { qh: 2, kh: 2 });
    let (rw, ne) = run(&rp, &[f(t1, [3, 3, 1, 1])]);
    let (rh, _) = run(&rp, &[f(t2, [3, 3, 1, 1])]);
    assert_eq!(ne, [3, 2, 2, 1]);
    let (out, _) = run(&Op::Index(IndexOp::AddRelPos), &[f(vec![1.0; 36], [9, 4, 1, 1]), f(rw, ne), f(rh, ne)]);
    let want = [
        8.0, 9.0, 10.0, 9.0, 10.0, 11.0, 10.0, 11.0, 12.0, 2.0, 3.0, 4.0, 3.0, 4.0, 5.0, 4.0, 5.0, 6.0, 14.0, 15.0, 16.0, 15.0,
        16.0, 17.0, 16.0, 17.0, 18.0, 8.0, 9.0, 10.0, 9.0, 10.0, 11.0, 10.0, 11.0, 12.0,
    ];
    assert_eq!(out, want);
}

#[test]
fn sorting_counting_and_experts() {
    let a = vec![3.0, 1.0, 4.0, 1.0, 5.0, 10.0, 30.0, 20.0, 40.0, 0.0];
    let (r, _) = run(&Op::Rows(RowOp::Argsort { desc: false }), &[f(a.clone(), [5, 2, 1, 1])]);
    assert_eq!(r, vec![1.0, 3.0, 0.0, 2.0, 4.0, 4.0, 0.0, 2.0, 1.0, 3.0]);
    let (r, _) = run(&Op::Rows(RowOp::Argsort { desc: true }), &[f(a.clone(), [5, 2, 1, 1])]);
    assert_eq!(r, vec![4.0, 2.0, 0.0, 1.0, 3.0, 3.0, 1.0, 2.0, 0.0, 4.0]);
    let (r, _) = run(&Op::Rows(RowOp::TopK { k: 2 }), &[f(a.clone(), [5, 2, 1, 1])]);
    assert_eq!(r, vec![4.0, 2.0, 3.0, 1.0]);
    let b = vec![3.0, 2.0, 4.0, 0.0, 5.0, 10.0, 30.0, 21.0, 40.0, 0.0];
    let (r, _) = run(&Op::Rows(RowOp::CountEqual), &[f(a.clone(), [10, 1, 1, 1]), f(b, [10, 1, 1, 1])]);
    assert_eq!(r, vec![7.0]);
    // mixture of experts: 3 experts [K 4, M 2]; 2 slots of 2 tokens
    let w = vals(4 * 2 * 3, 22);
    let x = vals(4 * 2 * 2, 23);
    let ids = [2i64, 0, 1, 1];
    let (out, ne) = run(&Op::MulMatId, &[f(w.clone(), [4, 2, 3, 1]), f(x.clone(), [4, 2, 2, 1]), i32s(&ids, [2, 2, 1, 1])]);
    assert_eq!(ne, [2, 2, 2, 1]);
    for t in 0..2 {
        for i in 0..2 {
            let e = ids[i + 2 * t] as usize;
            for m in 0..2 {
                let want: f64 = (0..4).map(|k| w[k + 4 * (m + 2 * e)] * x[k + 4 * (i + 2 * t)]).sum();
                close(&[out[m + 2 * (i + 2 * t)]], &[want], 1e-15, "mul_mat_id");
            }
        }
    }
}

#[test]
fn convolutions_match_their_sums() {
    // ggml's test-conv-transpose: input 0.., kernel 0.., strides 1 to 3
    let t: Vec<f64> = (0..6).map(|v| v as f64).collect();
    let k: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let c1 = |s0| Op::Conv(Conv::Transpose1d { s0, p0: 0, d0: 1 });
    let (r, _) = run(&c1(1), &[f(k.clone(), [2, 3, 2, 1]), f(t.clone(), [3, 2, 1, 1])]);
    assert_eq!(r, vec![18.0, 45.0, 59.0, 37.0, 24.0, 61.0, 83.0, 51.0, 30.0, 77.0, 107.0, 65.0]);
    let (r, _) = run(&c1(3), &[f(k.clone(), [2, 3, 2, 1]), f(t.clone(), [3, 2, 1, 1])]);
    assert_eq!(&r[..8], &[18.0, 21.0, 0.0, 24.0, 29.0, 0.0, 30.0, 37.0]);
    let t2: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let k2: Vec<f64> = (0..24).map(|v| v as f64).collect();
    let (r, ne) = run(&Op::Conv(Conv::Transpose2d { stride: 1 }), &[f(k2, [2, 2, 3, 2]), f(t2, [3, 2, 2, 1])]);
    assert_eq!(ne, [4, 3, 3, 1]);
    assert_eq!(&r[..12], &[72.0, 162.0, 188.0, 106.0, 192.0, 430.0, 490.0, 274.0, 132.0, 292.0, 326.0, 180.0]);
    // depthwise and full 2-D convolutions against the direct sums
    let (w, h, c, n) = (6, 7, 3, 2);
    let x = vals(w * h * c * n, 24);
    let kd = vals(3 * 3 * c, 25);
    let p = [2, 1, 1, 0, 1, 2];
    let dw = Op::Conv(Conv::Depthwise2d { s0: p[0], s1: p[1], p0: p[2], p1: p[3], d0: p[4], d1: p[5] });
    let (r, ne) = run(&dw, &[f(kd.clone(), [3, 3, 1, c]), f(x.clone(), [w, h, c, n])]);
    let kf = vals(3 * 3 * c * 4, 26);
    let full = Op::Conv(Conv::Direct2d { s0: p[0], s1: p[1], p0: p[2], p1: p[3], d0: p[4], d1: p[5] });
    let (rf, nef) = run(&full, &[f(kf.clone(), [3, 3, c, 4]), f(x.clone(), [w, h, c, n])]);
    let at = |xx: i64, yy: i64, ch: usize, b: usize| {
        if xx < 0 || yy < 0 || xx >= w as i64 || yy >= h as i64 {
            0.0
        } else {
            x[xx as usize + w * (yy as usize + h * (ch + c * b))]
        }
    };
    let (ow, oh) = (ne[0], ne[1]);
    assert_eq!([ow, oh, nef[2]], [3, 3, 4]);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let sx = |kx: usize| (ox * p[0] as usize) as i64 + (kx * p[4] as usize) as i64 - p[2] as i64;
                let sy = |ky: usize| (oy * p[1] as usize) as i64 + (ky * p[5] as usize) as i64 - p[3] as i64;
                for ch in 0..c {
                    let want: f64 = (0..9).map(|t| at(sx(t % 3), sy(t / 3), ch, b) * kd[t + 9 * ch]).sum();
                    close(&[r[ox + ow * (oy + oh * (ch + c * b))]], &[want], 1e-14, "conv_2d_dw");
                }
                for oc in 0..4 {
                    let want: f64 = (0..9 * c).map(|t| at(sx(t % 3), sy((t / 3) % 3), t / 9, b) * kf[t + 9 * c * oc]).sum();
                    close(&[rf[ox + ow * (oy + oh * (oc + 4 * b))]], &[want], 1e-13, "conv_2d_direct");
                }
            }
        }
    }
    let pa = vec![1.0, 3.0, 2.0, 4.0, 5.0, 2.0, 8.0, 1.0];
    let (r, _) = run(&Op::Conv(Conv::Pool1d { op: PoolOp::Max, k0: 2, s0: 2, p0: 0 }), &[f(pa.clone(), [8, 1, 1, 1])]);
    assert_eq!(r, vec![3.0, 4.0, 5.0, 8.0]);
    let (r, _) = run(&Op::Conv(Conv::Pool1d { op: PoolOp::Avg, k0: 3, s0: 2, p0: 1 }), &[f(pa, [8, 1, 1, 1])]);
    close(&r, &[4.0 / 3.0, 3.0, 11.0 / 3.0, 11.0 / 3.0], 1e-15, "avg pool_1d");
}
