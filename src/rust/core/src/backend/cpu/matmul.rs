//! Matrix products with `matrixmultiply`'s sgemm, split across the backend's
//! threads on disjoint blocks of the result.
//!
//! ggml's `mul_mat(a[K,M], b[K,N]) -> [M,N]`: with ne0 fastest, a holds M rows of
//! length K, b holds N rows of length K and the result N rows of length M, so
//! in row-major terms `C (N x M) = B (N x K) * A^T (K x M)`.

use super::access::Src;
use super::par::Pool;
use rayon::prelude::*;

/// Row-major strides of one sgemm operand.
#[derive(Clone, Copy)]
struct Mat<'a> {
    d: &'a [f32],
    rs: isize,
    cs: isize,
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
        let a_last = (row0 + rows - 1) as isize * a.rs + (k as isize - 1) * a.cs;
        let b_last = (k as isize - 1) * b.rs + (n as isize - 1) * b.cs;
        assert!(a_last < a.d.len() as isize && b_last < b.d.len() as isize, "gemm operand bounds");
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
                    a.d.as_ptr().offset(row0 as isize * a.rs + k0 as isize * a.cs),
                    a.rs,
                    a.cs,
                    b.d.as_ptr().offset(k0 as isize * b.rs),
                    b.rs,
                    b.cs,
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
/// `prod(a_slice, b_slice, c_slice)` computes one 2-D slice.
fn batched(
    a: &Src<'_>,
    b: &Src<'_>,
    out: &mut [f32],
    slice_out: usize,
    mut prod: impl FnMut(&[f32], &[f32], &mut [f32]),
) {
    let (sa, sb) = (a.ne[0] * a.ne[1], b.ne[0] * b.ne[1]);
    let (r2, r3) = (b.ne[2] / a.ne[2], b.ne[3] / a.ne[3]);
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            let ia = (i2 / r2) + a.ne[2] * (i3 / r3);
            let ib = i2 + b.ne[2] * i3;
            prod(
                &a.d[ia * sa..(ia + 1) * sa],
                &b.d[ib * sb..(ib + 1) * sb],
                &mut out[ib * slice_out..(ib + 1) * slice_out],
            );
        }
    }
}

/// Dot product of two equal-length slices (eight accumulators, so the
/// compiler vectorises it).
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (p, q) in xc.zip(yc) {
        for i in 0..8 {
            acc[i] += p[i] * q[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (p, q) in xr.iter().zip(yr) {
        s += p * q;
    }
    s
}

/// A matrix-vector product: out[i] = rows[i] . v, rows of length `v.len()`
/// (sgemm would pack the whole matrix for one column).
fn gemv(pool: &Pool, rows: &[f32], v: &[f32], out: &mut [f32]) {
    let k = v.len();
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let run = |r0: usize, o: &mut [f32]| {
        for (i, x) in o.iter_mut().enumerate() {
            let r = r0 + i;
            *x = dot(&rows[r * k..(r + 1) * k], v);
        }
    };
    if pool.n_threads <= 1 || out.len() * k < (1 << 16) || out.len() < 2 {
        run(0, out);
        return;
    }
    let per = out.len().div_ceil(pool.n_threads);
    pool.install(|| out.par_chunks_mut(per).enumerate().for_each(|(i, o)| run(i * per, o)));
}

pub fn mul_mat(a: &Src<'_>, b: &Src<'_>, out: &mut [f32], pool: &Pool) {
    let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    batched(a, b, out, m * n, |sa, sb, c| {
        if n == 1 {
            // One column of b: each result is a row of a times it.
            gemv(pool, sa, &sb[..k], c);
        } else if m == 1 {
            gemv(pool, sb, &sa[..k], c);
        } else if n >= m.min(4 * pool.n_threads) {
            // C (N x M) = B (N x K) * A^T (K x M), split over N.
            let bm = Mat { d: sb, rs: k as isize, cs: 1 };
            let am = Mat { d: sa, rs: 1, cs: k as isize };
            gemm(pool, n, k, m, bm, am, c);
        } else {
            // Few columns: C^T (M x N) = A (M x K) * B^T (K x N), split over M.
            let mut ct = vec![0f32; m * n];
            let am = Mat { d: sa, rs: k as isize, cs: 1 };
            let bm = Mat { d: sb, rs: 1, cs: k as isize };
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
pub fn out_prod(a: &Src<'_>, b: &Src<'_>, out: &mut [f32], pool: &Pool) {
    let (m, k, n) = (a.ne[0], a.ne[1], b.ne[0]);
    batched(a, b, out, m * n, |sa, sb, c| {
        // Row-major: a is K x M, b is K x N; C (N x M) = B^T (N x K) * A (K x M).
        let bm = Mat { d: sb, rs: 1, cs: n as isize };
        let am = Mat { d: sa, rs: m as isize, cs: 1 };
        gemm(pool, n, k, m, bm, am, c);
    });
}
