//! The convolution GEMM: out[m][y][x] = act(bias[m] + sum_k A[m][k] * B_k(y, x))
//! where B_k(y, x) = base[offs[k] + y * rs + x]. With shifted offsets into a
//! padded input (or into its stride phases), B is the im2col matrix of a
//! convolution without building it. A (the weights) is packed once into
//! blocks of MR rows; bias and the common activations are applied while the
//! result is still in registers.

use super::simd;
use crate::ncnn::layer::Activation;
use crate::ncnn::par;

pub const MR: usize = 4;
pub const NR: usize = 16;
/// Output columns per task (a task is a run of whole output rows).
const TASK_COLS: usize = 2048;

/// Weights packed as [m / MR][k][MR] (the last block zero-padded).
#[derive(Clone, Debug, Default)]
pub struct PackedA {
    pub m: usize,
    pub k: usize,
    data: Vec<f32>,
}

impl PackedA {
    /// Pack a row-major m x k matrix.
    pub fn new(a: &[f32], m: usize, k: usize) -> PackedA {
        let blocks = (m + MR - 1) / MR;
        let mut data = vec![0.0f32; blocks * k * MR];
        for b in 0..blocks {
            for kk in 0..k {
                for r in 0..MR {
                    let row = b * MR + r;
                    if row < m {
                        data[(b * k + kk) * MR + r] = a[row * k + kk];
                    }
                }
            }
        }
        PackedA { m, k, data }
    }
    fn block(&self, b: usize) -> &[f32] {
        &self.data[b * self.k * MR..(b + 1) * self.k * MR]
    }
}

/// The B operand: row k, output position (y, x) is `base[offs[k] + y * rs + x]`.
pub struct BView<'a> {
    pub base: &'a [f32],
    pub offs: &'a [usize],
    pub rs: usize,
}

/// What happens to each result: `act(x + bias[row])` (no bias when empty).
#[derive(Clone, Copy)]
pub struct Epi<'a> {
    pub bias: &'a [f32],
    pub act: &'a Activation,
}

impl Epi<'_> {
    fn bias4(&self, r0: usize) -> [f32; MR] {
        let mut b = [0.0; MR];
        for (i, v) in b.iter_mut().enumerate() {
            *v = self.bias.get(r0 + i).copied().unwrap_or(0.0);
        }
        b
    }
    /// (lower, upper) bounds when the activation is a clamp (ReLU, Clip).
    fn clamp(&self) -> Option<(f32, f32)> {
        match self.act.kind {
            1 => Some((0.0, f32::INFINITY)),
            3 => Some((self.act.params[0], self.act.params[1])),
            _ => None,
        }
    }
    /// Whether the activation still has to run after bias and clamp.
    fn post(&self) -> bool {
        !matches!(self.act.kind, 0 | 1 | 3)
    }
}

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Compute all `a.m` output channels over an `outw` x `outh` grid into `out`
/// (channel r at `out[r * outw * outh..]`), threaded over runs of output rows.
pub fn conv_gemm(a: &PackedA, b: &BView, outw: usize, outh: usize, out: &mut [f32], ep: &Epi) {
    conv_gemm_with(a, b, outw, outh, out, ep, simd::avx2_fma())
}

fn conv_gemm_with(
    a: &PackedA,
    b: &BView,
    outw: usize,
    outh: usize,
    out: &mut [f32],
    ep: &Epi,
    fast: bool,
) {
    let n = outw * outh;
    assert_eq!(b.offs.len(), a.k);
    assert!(out.len() >= a.m * n, "convolution output buffer too small");
    if n == 0 || a.m == 0 {
        return;
    }
    let maxoff = b.offs.iter().copied().max().unwrap_or(0);
    // Last element a (y, x) read touches, for the bounds of full-width tiles.
    let need = |y: usize, x: usize| maxoff + y * b.rs + x;
    assert!(need(outh - 1, outw) <= b.base.len(), "B rows out of bounds");
    let threads = par::threads();
    let mut rows = ((TASK_COLS + outw - 1) / outw).max(1);
    if threads > 1 {
        rows = rows.min((outh + 3 * threads - 1) / (3 * threads)).max(1);
    }
    let tasks = (outh + rows - 1) / rows;
    let cp = SendPtr(out.as_mut_ptr());
    let blocks = (a.m + MR - 1) / MR;
    let clamp = ep.clamp();
    par::range(tasks, |t| {
        let cp = cp;
        let mut tmp = [[0.0f32; NR]; MR];
        for y in t * rows..((t + 1) * rows).min(outh) {
            let mut x = 0;
            while x < outw {
                let w = (outw - x).min(NR);
                // A full-width tile may read past the row (into the next
                // row or the padding) as long as it stays inside base.
                let full = fast && need(y, x + NR) <= b.base.len();
                for bl in 0..blocks {
                    let r0 = bl * MR;
                    let nrows = (a.m - r0).min(MR);
                    let bias = ep.bias4(r0);
                    let col = y * b.rs + x;
                    // SAFETY: rows r0..r0+nrows, columns y*outw+x.. +w of each
                    // output channel belong to this task alone and are in
                    // bounds (checked above); B reads are bounded by `need`.
                    unsafe {
                        let dst = cp.0.add(r0 * n + y * outw + x);
                        if full && w == NR {
                            kernel_avx2(a.block(bl), b.base.as_ptr(), b.offs, col, dst, n, nrows, bias, clamp);
                        } else if full {
                            let tp = tmp.as_mut_ptr() as *mut f32;
                            kernel_avx2(a.block(bl), b.base.as_ptr(), b.offs, col, tp, NR, MR, bias, clamp);
                            copy_tile(&tmp, dst, n, nrows, w);
                        } else {
                            kernel_generic(a.block(bl), b.base, b.offs, col, w, &mut tmp, bias, clamp);
                            copy_tile(&tmp, dst, n, nrows, w);
                        }
                        if ep.post() {
                            for r in 0..nrows {
                                ep.act.apply(std::slice::from_raw_parts_mut(dst.add(r * n), w));
                            }
                        }
                    }
                }
                x += w;
            }
        }
    });
}

/// # Safety
/// `dst` must be valid for `rows` rows of stride `ldc` and `w` columns.
unsafe fn copy_tile(tmp: &[[f32; NR]; MR], dst: *mut f32, ldc: usize, rows: usize, w: usize) {
    for (r, t) in tmp.iter().enumerate().take(rows) {
        std::ptr::copy_nonoverlapping(t.as_ptr(), dst.add(r * ldc), w);
    }
}

#[allow(clippy::too_many_arguments)]
fn kernel_generic(
    ab: &[f32],
    base: &[f32],
    offs: &[usize],
    col: usize,
    w: usize,
    acc: &mut [[f32; NR]; MR],
    bias: [f32; MR],
    clamp: Option<(f32, f32)>,
) {
    for (r, row) in acc.iter_mut().enumerate() {
        row.iter_mut().for_each(|v| *v = bias[r]);
    }
    for (kk, &o) in offs.iter().enumerate() {
        let mut brow = [0.0f32; NR];
        brow[..w].copy_from_slice(&base[o + col..o + col + w]);
        let a = &ab[kk * MR..kk * MR + MR];
        for r in 0..MR {
            for (x, bv) in acc[r].iter_mut().zip(&brow) {
                *x += a[r] * bv;
            }
        }
    }
    if let Some((lo, hi)) = clamp {
        for row in acc.iter_mut() {
            row.iter_mut().for_each(|v| *v = v.max(lo).min(hi));
        }
    }
}

/// A 4 x 16 tile: bias + sum over k, clamped, stored to `rows` rows of `c`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2(
    ab: &[f32],
    base: *const f32,
    offs: &[usize],
    col: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    bias: [f32; MR],
    clamp: Option<(f32, f32)>,
) {
    use std::arch::x86_64::*;
    let mut c00 = _mm256_set1_ps(bias[0]);
    let mut c01 = c00;
    let mut c10 = _mm256_set1_ps(bias[1]);
    let mut c11 = c10;
    let mut c20 = _mm256_set1_ps(bias[2]);
    let mut c21 = c20;
    let mut c30 = _mm256_set1_ps(bias[3]);
    let mut c31 = c30;
    let ap = ab.as_ptr();
    for (kk, &o) in offs.iter().enumerate() {
        let bp = base.add(o + col);
        let b0 = _mm256_loadu_ps(bp);
        let b1 = _mm256_loadu_ps(bp.add(8));
        let a = ap.add(kk * MR);
        let a0 = _mm256_broadcast_ss(&*a);
        c00 = _mm256_fmadd_ps(a0, b0, c00);
        c01 = _mm256_fmadd_ps(a0, b1, c01);
        let a1 = _mm256_broadcast_ss(&*a.add(1));
        c10 = _mm256_fmadd_ps(a1, b0, c10);
        c11 = _mm256_fmadd_ps(a1, b1, c11);
        let a2 = _mm256_broadcast_ss(&*a.add(2));
        c20 = _mm256_fmadd_ps(a2, b0, c20);
        c21 = _mm256_fmadd_ps(a2, b1, c21);
        let a3 = _mm256_broadcast_ss(&*a.add(3));
        c30 = _mm256_fmadd_ps(a3, b0, c30);
        c31 = _mm256_fmadd_ps(a3, b1, c31);
    }
    let mut out = [[c00, c01], [c10, c11], [c20, c21], [c30, c31]];
    if let Some((lo, hi)) = clamp {
        let (l, h) = (_mm256_set1_ps(lo), _mm256_set1_ps(hi));
        for v in out.iter_mut().flatten() {
            // max(v, lo) first: a NaN becomes lo, as with f32::max.
            *v = _mm256_min_ps(_mm256_max_ps(*v, l), h);
        }
    }
    for (r, v) in out.iter().enumerate().take(rows) {
        _mm256_storeu_ps(c.add(r * ldc), v[0]);
        _mm256_storeu_ps(c.add(r * ldc + 8), v[1]);
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2(
    _ab: &[f32],
    _base: *const f32,
    _offs: &[usize],
    _col: usize,
    _c: *mut f32,
    _ldc: usize,
    _rows: usize,
    _bias: [f32; MR],
    _clamp: Option<(f32, f32)>,
) {
    unreachable!("AVX2 kernels run only on x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(
        a: &[f32],
        m: usize,
        b: &BView,
        outw: usize,
        outh: usize,
        ep: &Epi,
    ) -> Vec<f32> {
        let k = b.offs.len();
        let mut out = vec![0.0f32; m * outw * outh];
        for r in 0..m {
            for y in 0..outh {
                for x in 0..outw {
                    let s: f32 = (0..k)
                        .map(|i| a[r * k + i] * b.base[b.offs[i] + y * b.rs + x])
                        .sum();
                    out[(r * outh + y) * outw + x] =
                        ep.act.apply1(s + ep.bias.get(r).copied().unwrap_or(0.0));
                }
            }
        }
        out
    }

    #[test]
    fn matches_naive_product_on_both_paths() {
        let acts = [
            Activation { kind: 0, params: vec![] },
            Activation { kind: 1, params: vec![] },
            Activation { kind: 3, params: vec![-0.5, 2.0] },
            Activation { kind: 6, params: vec![0.2, 0.5] },
        ];
        // (m, k, rs, outw, outh): partial tiles, rows wider than outw, one column.
        for (ci, &(m, k, rs, outw, outh)) in [
            (1, 1, 1, 1, 1),
            (5, 7, 40, 33, 3),
            (16, 27, 300, 300, 1),
            (3, 2, 20, 16, 4),
            (9, 12, 35, 31, 7),
        ]
        .iter()
        .enumerate()
        {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 7) as f32) - 3.0).collect();
            let offs: Vec<usize> = (0..k).map(|r| r * 3 + r % 2).collect();
            let len = offs.iter().max().unwrap() + (outh - 1) * rs + outw;
            let base: Vec<f32> = (0..len).map(|i| ((i * 5 % 11) as f32) * 0.25 - 1.0).collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.1 - 0.2).collect();
            let b = BView { base: &base, offs: &offs, rs };
            let act = &acts[ci % acts.len()];
            let ep = Epi { bias: if ci % 2 == 0 { &bias } else { &[] }, act };
            let want = naive(&a, m, &b, outw, outh, &ep);
            let pa = PackedA::new(&a, m, k);
            for fast in [false, simd::avx2_fma()] {
                let mut got = vec![f32::NAN; m * outw * outh];
                conv_gemm_with(&pa, &b, outw, outh, &mut got, &ep, fast);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!((g - w).abs() < 1e-3, "case {ci} fast={fast} at {i}: {g} vs {w}");
                }
            }
        }
    }
}
