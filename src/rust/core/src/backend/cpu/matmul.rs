//! The products of f32 tensors (`matrixmultiply`'s sgemm), split across the
//! backend's threads on disjoint blocks of the result, and the [`Gemm`]
//! trait through which the driver reaches the products of each compute
//! type. Operands are read with their own strides, so a transposed view
//! needs no copy.
//!
//! ggml's `mul_mat(a[K,M], b[K,N]) -> [M,N]`: with ne0 fastest, a holds M rows of
//! length K, b holds N rows of length K and the result N rows of length M, so
//! in row-major terms `C (N x M) = B (N x K) * A^T (K x M)`.

use super::access::Src;
use super::par::{par_rows, Pool};
use crate::base::float::Float;
use crate::op::UnaryOp;
use rayon::prelude::*;

/// A compute type with the products: f32 through `matrixmultiply`'s sgemm
/// (below), f64 through the tuned kernel of `dgemm` (`matmul_f64`).
pub trait Gemm: Float {
    /// ggml's `mul_mat(a[K,M], b[K,N]) -> [M,N]`.
    fn mul_mat(a: &Src<'_, Self>, b: &Src<'_, Self>, out: &mut [Self], pool: &Pool);
    /// ggml's `out_prod(a[M,K], b[N,K]) -> [M,N]`.
    fn out_prod(a: &Src<'_, Self>, b: &Src<'_, Self>, out: &mut [Self], pool: &Pool);
    /// `act(mul_mat(a, b) + c)` for 2-D a and b, `c` one value per row of
    /// the result ([`Op::Linear`](crate::op::Op::Linear)).
    fn linear(a: &Src<'_, Self>, b: &Src<'_, Self>, c: &[Self], act: Option<UnaryOp>, out: &mut [Self], pool: &Pool);
}

impl Gemm for f32 {
    fn mul_mat(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &Pool) {
        mul_mat(a, b, out, pool)
    }
    fn out_prod(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &Pool) {
        out_prod(a, b, out, pool)
    }
    fn linear(a: &Src<'_, f32>, b: &Src<'_, f32>, c: &[f32], act: Option<UnaryOp>, out: &mut [f32], pool: &Pool) {
        mul_mat(a, b, out, pool);
        let m = a.ne[1];
        par_rows(pool, out, m, |_, cols| {
            for col in cols.chunks_mut(m.max(1)) {
                bias_act(col, c, act);
            }
        });
    }
}

/// `col[i] = act(col[i] + bias[i])`: one loop per kind, so that each vectorises.
#[inline]
pub(super) fn bias_act<T: Float>(col: &mut [T], bias: &[T], act: Option<UnaryOp>) {
    fn each<T: Float>(col: &mut [T], bias: &[T], f: impl Fn(T) -> T) {
        for (v, b) in col.iter_mut().zip(bias) {
            *v = f(*v + *b);
        }
    }
    match act {
        None => each(col, bias, |z| z),
        Some(UnaryOp::Relu) => each(col, bias, |z| UnaryOp::Relu.apply(z)),
        Some(u) => each(col, bias, |z| u.apply(z)),
    }
}

/// Row-major strides of one operand.
#[derive(Clone, Copy)]
struct Mat<'a> {
    d: &'a [f32],
    rs: usize,
    cs: usize,
}

/// Multiply-adds of one sgemm call at most, when a product is split for
/// Ctrl-C (about a quarter second on one core)...
const SLAB_WORK: usize = 1 << 31;
/// ... in whole multiples of this depth (sgemm's own blocking of k).
const SLAB_DEPTH: usize = 256;

/// C (m x n, row-major, contiguous rows of n) = A (m x k) * B (k x n), rows of C
/// split across the pool.
fn gemm(pool: &Pool, m: usize, k: usize, n: usize, a: Mat<'_>, b: Mat<'_>, c: &mut [f32]) {
    debug_assert_eq!(c.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }
    // A large block is summed over slabs of k (whole multiples of sgemm's
    // own depth blocking, so nothing is packed twice), so that a requested
    // stop (Ctrl-C) is seen between slabs, within a fraction of a second.
    let run = |row0: usize, c_rows: &mut [f32]| {
        let rows = c_rows.len() / n;
        if k == 0 {
            c_rows.fill(0.0);
            return;
        }
        let a_last = (row0 + rows - 1) * a.rs + (k - 1) * a.cs;
        let b_last = (k - 1) * b.rs + (n - 1) * b.cs;
        assert!(a_last < a.d.len() && b_last < b.d.len(), "gemm operand bounds");
        let depth = (SLAB_WORK / rows.saturating_mul(n).max(1)).max(1).div_ceil(SLAB_DEPTH) * SLAB_DEPTH;
        let mut k0 = 0;
        while k0 < k {
            if crate::base::cancel::requested() {
                return;
            }
            let kk = depth.min(k - k0);
            // SAFETY: every element sgemm reads lies within `a.d` / `b.d`
            // (checked above: strides are non-negative, the last element of
            // the whole product is in bounds, and this slab's columns of A and
            // rows of B are within it), and it writes exactly the `rows x n`
            // elements of `c_rows`.
            unsafe {
                matrixmultiply::sgemm(
                    rows,
                    kk,
                    n,
                    1.0,
                    a.d.as_ptr().add(row0 * a.rs + k0 * a.cs),
                    a.rs as isize,
                    a.cs as isize,
                    b.d.as_ptr().add(k0 * b.rs),
                    b.rs as isize,
                    b.cs as isize,
                    if k0 == 0 { 0.0 } else { 1.0 },
                    c_rows.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            k0 += kk;
        }
    };
    let work = m * n * k;
    if pool.n_threads <= 1 || work < (1 << 18) || m < 2 {
        run(0, c);
        return;
    }
    // One block per thread: each sgemm call packs the shared operand again, so
    // more blocks cost packing work (measured slower on 2 cores).
    let per = m.div_ceil(pool.n_threads).div_ceil(8) * 8;
    pool.install(|| {
        c.par_chunks_mut(per.max(1) * n).enumerate().for_each(|(i, chunk)| run(i * per, chunk));
    });
}

/// Batched product with ggml's broadcasting of a over b's dimensions 2 and 3.
/// `prod(a_slice, b_slice, c_slice)` computes one 2-D slice; the operand
/// slices start at the slice's first element and keep the source's strides.
pub(super) fn batched<'s, T: Float>(
    a: &'s Src<'_, T>,
    b: &'s Src<'_, T>,
    out: &mut [T],
    slice_out: usize,
    mut prod: impl FnMut(&'s [T], &'s [T], &mut [T]),
) {
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            let ia = (i2 / r2) * a.st[2] + (i3 / r3) * a.st[3];
            let ib = i2 * b.st[2] + i3 * b.st[3];
            let io = i2 + b.ne[2] * i3;
            prod(&a.d[ia..], &b.d[ib..], &mut out[io * slice_out..(io + 1) * slice_out]);
        }
    }
}

fn mul_mat(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &Pool) {
    let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    if m * n == 0 {
        return;
    }
    let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
    batched(a, b, out, m * n, |sa, sb, c| {
        if n >= m.min(4 * pool.n_threads) {
            // C (N x M) = B (N x K) * A^T (K x M), split over N.
            let bm = Mat { d: sb, rs: b1, cs: b0 };
            let am = Mat { d: sa, rs: a0, cs: a1 };
            gemm(pool, n, k, m, bm, am, c);
        } else {
            // Few columns: C^T (M x N) = A (M x K) * B^T (K x N), split over M.
            let mut ct = vec![0f32; m * n];
            let am = Mat { d: sa, rs: a1, cs: a0 };
            let bm = Mat { d: sb, rs: b0, cs: b1 };
            gemm(pool, m, k, n, am, bm, &mut ct);
            for j in 0..n {
                for i in 0..m {
                    c[j * m + i] = ct[i * n + j];
                }
            }
        }
    });
}

/// out[m, n] = sum_k a[m, k] * b[n, k] for a [M,K], b [N,K].
fn out_prod(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &Pool) {
    let (m, k, n) = (a.ne[0], a.ne[1], b.ne[0]);
    if m * n == 0 {
        return;
    }
    let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
    batched(a, b, out, m * n, |sa, sb, c| {
        // Row-major: a is K x M, b is K x N; C (N x M) = B^T (N x K) * A (K x M).
        let bm = Mat { d: sb, rs: b0, cs: b1 };
        let am = Mat { d: sa, rs: a1, cs: a0 };
        gemm(pool, n, k, m, bm, am, c);
    });
}
