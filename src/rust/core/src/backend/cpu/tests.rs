//! Kernel tests on small hand-checked inputs, with 1 and 2 threads.

use super::access::Src;
use super::driver::kernel;
use super::CpuPool;
use crate::op::Op;
use crate::op::{PoolOp, UnaryOp};
use std::borrow::Cow;

fn src(d: Vec<f32>, ne: [usize; 4]) -> Src<'static> {
    assert_eq!(d.len(), ne.iter().product::<usize>());
    Src::new(Cow::Owned(d), ne)
}

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

fn run_k(op: Op, s: &[Src<'_>], ne: [usize; 4]) -> Vec<f32> {
    let mut outs = Vec::new();
    for threads in [1, 2] {
        let pool = CpuPool::new(threads).unwrap();
        let mut out = vec![0f32; ne.iter().product()];
        kernel(&op, s, &mut out, ne, &pool).unwrap();
        outs.push(out);
    }
    assert_eq!(outs[0], outs[1], "1 and 2 threads differ for {}", op.name());
    outs.pop().unwrap()
}

#[test]
fn binary_broadcasts_rows_and_planes() {
    let a = src(seq(12), [2, 3, 2, 1]);
    let b = src(vec![10.0, 20.0, 100.0, 200.0], [2, 1, 2, 1]);
    let out = run_k(Op::Add, &[a, b], [2, 3, 2, 1]);
    assert_eq!(&out[..6], &[10.0, 21.0, 12.0, 23.0, 14.0, 25.0]);
    assert_eq!(&out[6..8], &[106.0, 207.0]);
}

#[test]
fn large_maps_split_across_threads() {
    let n = 300_007;
    let a = src((0..n).map(|i| (i % 7) as f32 - 3.0).collect(), [n, 1, 1, 1]);
    let out = run_k(Op::Unary(UnaryOp::Relu), &[a], [n, 1, 1, 1]);
    assert!(out.iter().enumerate().all(|(i, &v)| v == ((i % 7) as f32 - 3.0).max(0.0)));
}

#[test]
fn mul_mat_small_and_vector() {
    // a [K=2, M=3], b [K=2, N=1]: r[m] = a[0,m]*b0 + a[1,m]*b1.
    let a = src(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3, 1, 1]);
    let b = src(vec![1.0, 10.0], [2, 1, 1, 1]);
    assert_eq!(run_k(Op::MulMat, &[a, b], [3, 1, 1, 1]), vec![21.0, 43.0, 65.0]);
    // K = 1: mul_mat and out_prod both give the outer product.
    let a = src(vec![1.0, 2.0], [1, 2, 1, 1]);
    let b = src(vec![3.0, 4.0, 5.0], [1, 3, 1, 1]);
    let a2 = src(vec![1.0, 2.0], [2, 1, 1, 1]);
    let b2 = src(vec![3.0, 4.0, 5.0], [3, 1, 1, 1]);
    assert_eq!(run_k(Op::OutProd, &[a2, b2], [2, 3, 1, 1]), vec![3.0, 6.0, 4.0, 8.0, 5.0, 10.0]);
    assert_eq!(run_k(Op::MulMat, &[a, b], [2, 3, 1, 1]), vec![3.0, 6.0, 4.0, 8.0, 5.0, 10.0]);
}

#[test]
fn softmax_norm_and_sums() {
    let a = src(vec![0.0, 0.0, 1.0, 1.0], [2, 2, 1, 1]);
    assert_eq!(run_k(Op::SoftMax { scale: 1.0, max_bias: 0.0 }, &[a], [2, 2, 1, 1]), vec![0.5; 4]);
    let a = src(vec![1.0, 3.0], [2, 1, 1, 1]);
    let out = run_k(Op::Norm { eps: 0.0 }, &[a], [2, 1, 1, 1]);
    assert!((out[0] + 1.0).abs() < 1e-6 && (out[1] - 1.0).abs() < 1e-6);
    let a = src(seq(6), [3, 2, 1, 1]);
    assert_eq!(run_k(Op::SumRows, &[a], [1, 2, 1, 1]), vec![3.0, 12.0]);
    let a = src(vec![1.0, 5.0, 5.0, 0.0, -1.0, -2.0], [3, 2, 1, 1]);
    assert_eq!(run_k(Op::Argmax, &[a], [2, 1, 1, 1]), vec![1.0, 0.0]);
}

#[test]
fn movement_kernels() {
    let a = src(seq(4), [2, 2, 1, 1]);
    let out = run_k(Op::Pad { p: [1, 0, 0, 0] }, &[a], [3, 2, 1, 1]);
    assert_eq!(out, vec![0.0, 1.0, 0.0, 2.0, 3.0, 0.0]);
    let a = src(vec![1.0, 2.0], [2, 1, 1, 1]);
    assert_eq!(run_k(Op::Upscale { factor: 2 }, &[a], [4, 2, 1, 1]), vec![1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
    let a = src(vec![1.0; 9], [3, 3, 1, 1]);
    let out = run_k(Op::DiagMaskInf { n_past: 0 }, &[a], [3, 3, 1, 1]);
    assert_eq!(out.iter().filter(|v| v.is_infinite()).count(), 3);
    let a = src(seq(6), [2, 3, 1, 1]);
    let idx = src(vec![2.0, 0.0], [2, 1, 1, 1]);
    assert_eq!(run_k(Op::GetRows, &[a, idx], [2, 2, 1, 1]), vec![4.0, 5.0, 0.0, 1.0]);
}

#[test]
fn get_rows_out_of_range_is_an_error() {
    let a = src(seq(6), [2, 3, 1, 1]);
    let idx = src(vec![3.0], [1, 1, 1, 1]);
    let mut out = vec![0f32; 2];
    let e = kernel(&Op::GetRows, &[a, idx], &mut out, [2, 1, 1, 1], &CpuPool::new(1).unwrap()).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

#[test]
fn im2col_and_pool() {
    // 3x1 input, kernel 2x1, stride 1, no padding -> 2 patches of 2.
    let k = src(vec![0.0; 2], [2, 1, 1, 1]);
    let x = src(vec![1.0, 2.0, 3.0], [3, 1, 1, 1]);
    let op = Op::Im2Col { s0: 1, s1: 1, p0: 0, p1: 0, d0: 1, d1: 1, is_2d: true };
    assert_eq!(run_k(op, &[k, x], [2, 2, 1, 1]), vec![1.0, 2.0, 2.0, 3.0]);
    let a = src(vec![1.0, 4.0, 2.0, 3.0], [2, 2, 1, 1]);
    let p = |op| Op::Pool2d { op, k0: 2, k1: 2, s0: 2, s1: 2, p0: 0.0, p1: 0.0 };
    assert_eq!(run_k(p(PoolOp::Max), &[src(vec![1.0, 4.0, 2.0, 3.0], [2, 2, 1, 1])], [1, 1, 1, 1]), vec![4.0]);
    assert_eq!(run_k(p(PoolOp::Avg), &[a], [1, 1, 1, 1]), vec![2.5]);
}

/// Values that are not exact in f32: f64 results must keep them.
fn vals(n: usize, seed: usize) -> Vec<f64> {
    (0..n).map(|i| (((i + seed) * 7919 % 1009) as f64 - 504.0) / 97.0 + 1e-9 * i as f64).collect()
}

/// `act(a^T b + c)` by plain sums: a [K, M], b [K, N] (column-major), c [M].
fn linear_ref(a: &[f64], b: &[f64], c: &[f64], k: usize, m: usize, n: usize, act: Option<UnaryOp>) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            let s: f64 = (0..k).map(|p| a[p + i * k] * b[p + j * k]).sum::<f64>() + c[i];
            out[i + j * m] = act.map_or(s, |u| u.apply(s));
        }
    }
    out
}

#[test]
fn linear_adds_the_bias_and_activation_in_f64_and_f32() {
    // Small (one thread's product) and large (split over the pool) shapes.
    for (k, m, n) in [(3, 2, 4), (100, 150, 120), (70, 9, 300)] {
        let (a, b, c) = (vals(k * m, 1), vals(k * n, 2), vals(m, 3));
        for act in [None, Some(UnaryOp::Relu), Some(UnaryOp::Tanh), Some(UnaryOp::Sigmoid)] {
            let want = linear_ref(&a, &b, &c, k, m, n, act);
            let op = Op::Linear { act };
            for threads in [1, 2] {
                let pool = CpuPool::new(threads).unwrap();
                let d = |v: &[f64], ne| Src::new(Cow::Owned(v.to_vec()), ne);
                let s64 = [d(&a, [k, m, 1, 1]), d(&b, [k, n, 1, 1]), d(&c, [m, 1, 1, 1])];
                let mut out = vec![f64::NAN; m * n];
                kernel(&op, &s64, &mut out, [m, n, 1, 1], &pool).unwrap();
                for (g, w) in out.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "f64 {k}x{m}x{n} {act:?}: {g} vs {w}");
                }
                let f = |v: &[f64], ne| Src::new(Cow::Owned(v.iter().map(|&x| x as f32).collect()), ne);
                let s32 = [f(&a, [k, m, 1, 1]), f(&b, [k, n, 1, 1]), f(&c, [m, 1, 1, 1])];
                let mut out = vec![f32::NAN; m * n];
                kernel(&op, &s32, &mut out, [m, n, 1, 1], &pool).unwrap();
                for (g, w) in out.iter().zip(&want) {
                    assert!((*g as f64 - w).abs() <= 1e-3 * (1.0 + w.abs()), "f32 {k}x{m}x{n} {act:?}: {g} vs {w}");
                }
            }
        }
    }
}

#[test]
fn f64_products_read_strided_operands_in_place() {
    // a^T as a strided view of a's transpose: element (p, i) at i + p * m.
    let (k, m, n) = (130, 70, 90);
    let (a, b) = (vals(k * m, 4), vals(k * n, 5));
    let want = linear_ref(&a, &b, &vec![0.0; m], k, m, n, None);
    let mut at = vec![0.0; k * m];
    for i in 0..m {
        for p in 0..k {
            at[i + p * m] = a[p + i * k];
        }
    }
    let sa = Src { d: Cow::Borrowed(&at[..]), ne: [k, m, 1, 1], st: [m, 1, k * m, k * m] };
    let sb = Src::new(Cow::Borrowed(&b[..]), [k, n, 1, 1]);
    for threads in [1, 2] {
        let pool = CpuPool::new(threads).unwrap();
        let mut out = vec![0.0; m * n];
        let srcs = [Src { d: sa.d.clone(), ..sa }, Src::new(sb.d.clone(), sb.ne)];
        kernel(&Op::MulMat, &srcs, &mut out, [m, n, 1, 1], &pool).unwrap();
        for (g, w) in out.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "mul_mat: {g} vs {w}");
        }
        // out_prod(a^T [M, K], b^T [N, K]) is the same product.
        let sa2 = Src { d: Cow::Borrowed(&a[..]), ne: [m, k, 1, 1], st: [k, 1, k * m, k * m] };
        let sb2 = Src { d: Cow::Borrowed(&b[..]), ne: [n, k, 1, 1], st: [k, 1, k * n, k * n] };
        let mut out = vec![0.0; m * n];
        kernel(&Op::OutProd, &[sa2, sb2], &mut out, [m, n, 1, 1], &pool).unwrap();
        for (g, w) in out.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "out_prod: {g} vs {w}");
        }
    }
}
