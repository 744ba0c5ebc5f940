//! The convolution GEMM: C[m x n] = A[m x k] * B[k x n] where row `k` of B is
//! `base[offs[k]..offs[k] + n]`. With shifted offsets into a padded input,
//! B is the im2col matrix of a stride-1 convolution without building it.
//! A (the weights) is packed once into blocks of MR rows.

use crate::ncnn::par;

pub const MR: usize = 4;
pub const NR: usize = 16;
/// Columns per task: keeps a task's slice of B in cache.
const NC: usize = 256;

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

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// A new m x n matrix A * B (every element written by the GEMM, so the
/// buffer is never zero-filled first).
pub fn gemm_new(a: &PackedA, base: &[f32], offs: &[usize], n: usize) -> Vec<f32> {
    let len = a.m * n;
    let mut c: Vec<f32> = crate::ncnn::mat::take_vec(len);
    // SAFETY: gemm_raw writes all m*n elements before the length is set.
    unsafe {
        gemm_raw(a, base, offs, n, c.as_mut_ptr(), len, n);
        c.set_len(len);
    }
    c
}

/// c (m rows of stride `ldc`, n columns) = A * B.
pub fn gemm(a: &PackedA, base: &[f32], offs: &[usize], n: usize, c: &mut [f32], ldc: usize) {
    // SAFETY: c is a valid, exclusively borrowed buffer of c.len() elements.
    unsafe { gemm_raw(a, base, offs, n, c.as_mut_ptr(), c.len(), ldc) }
}

/// # Safety
/// `c` must be valid for writes of `clen` elements.
unsafe fn gemm_raw(
    a: &PackedA,
    base: &[f32],
    offs: &[usize],
    n: usize,
    c: *mut f32,
    clen: usize,
    ldc: usize,
) {
    assert_eq!(offs.len(), a.k);
    assert!(clen >= (a.m.max(1) - 1) * ldc + n);
    if n > 0 {
        let maxoff = offs.iter().copied().max().unwrap_or(0);
        assert!(maxoff + n <= base.len(), "B rows out of bounds");
    }
    let cp = SendPtr(c);
    let chunks = (n + NC - 1) / NC;
    let fast = has_avx2_fma();
    par::range(chunks, |ci| {
        let cp = cp;
        let n0 = ci * NC;
        let n1 = (n0 + NC).min(n);
        let blocks = (a.m + MR - 1) / MR;
        for b in 0..blocks {
            let ab = a.block(b);
            let rows = (a.m - b * MR).min(MR);
            let mut j = n0;
            while j < n1 {
                let w = (n1 - j).min(NR);
                // SAFETY: rows b*MR..b*MR+rows and columns j..j+w of c are
                // in bounds (checked above) and owned by this task alone.
                unsafe {
                    let cptr = cp.0.add(b * MR * ldc + j);
                    if fast && w == NR {
                        kernel_avx2(ab, base.as_ptr(), offs, j, cptr, ldc, rows);
                    } else {
                        kernel_generic(ab, base, offs, j, w, cptr, ldc, rows);
                    }
                }
                j += w;
            }
        }
    });
}

fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

unsafe fn kernel_generic(
    ab: &[f32],
    base: &[f32],
    offs: &[usize],
    j: usize,
    w: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
) {
    let mut acc = [[0.0f32; NR]; MR];
    for (kk, &o) in offs.iter().enumerate() {
        let brow = &base[o + j..o + j + w];
        let a = &ab[kk * MR..kk * MR + MR];
        for r in 0..MR {
            for (x, bv) in acc[r][..w].iter_mut().zip(brow) {
                *x += a[r] * bv;
            }
        }
    }
    for r in 0..rows {
        for x in 0..w {
            *c.add(r * ldc + x) = acc[r][x];
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2(
    ab: &[f32],
    base: *const f32,
    offs: &[usize],
    j: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
) {
    use std::arch::x86_64::*;
    let mut c00 = _mm256_setzero_ps();
    let mut c01 = _mm256_setzero_ps();
    let mut c10 = _mm256_setzero_ps();
    let mut c11 = _mm256_setzero_ps();
    let mut c20 = _mm256_setzero_ps();
    let mut c21 = _mm256_setzero_ps();
    let mut c30 = _mm256_setzero_ps();
    let mut c31 = _mm256_setzero_ps();
    let ap = ab.as_ptr();
    for (kk, &o) in offs.iter().enumerate() {
        let bp = base.add(o + j);
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
    let out = [[c00, c01], [c10, c11], [c20, c21], [c30, c31]];
    for (r, v) in out.iter().enumerate().take(rows) {
        _mm256_storeu_ps(c.add(r * ldc), v[0]);
        _mm256_storeu_ps(c.add(r * ldc + 8), v[1]);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_avx2(
    ab: &[f32],
    base: *const f32,
    offs: &[usize],
    j: usize,
    c: *mut f32,
    ldc: usize,
    rows: usize,
) {
    let _ = (ab, base, offs, j, c, ldc, rows);
    unreachable!()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_naive_product() {
        for (m, k, n) in [(1, 1, 1), (5, 7, 33), (16, 27, 300), (3, 2, 16)] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 7) as f32) - 3.0).collect();
            let b: Vec<f32> = (0..k * n + 5)
                .map(|i| ((i * 5 % 11) as f32) * 0.5)
                .collect();
            let offs: Vec<usize> = (0..k).map(|r| r * n + r % 3).collect();
            let pa = PackedA::new(&a, m, k);
            let mut c = vec![0.0f32; m * n];
            gemm(&pa, &b, &offs, n, &mut c, n);
            for i in 0..m {
                for j in 0..n {
                    let s: f32 = (0..k).map(|r| a[i * k + r] * b[offs[r] + j]).sum();
                    assert!((c[i * n + j] - s).abs() < 1e-3, "{m}x{k}x{n} at {i},{j}");
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// Manual throughput check: `cargo test --release gemm_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn gemm_speed() {
        let (m, c, w, h) = (32usize, 32usize, 114usize, 114usize);
        let k = c * 9;
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32).collect();
        let x: Vec<f32> = (0..c * w * h).map(|i| (i % 5) as f32).collect();
        let offs: Vec<usize> = (0..k).map(|r| (r / 9) * w * h + ((r / 3) % 3) * w + r % 3).collect();
        let n = 111 * w + 112;
        let pa = PackedA::new(&a, m, k);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let reps = 10;
            for _ in 0..reps {
                pool.install(|| gemm_new(&pa, &x, &offs, n));
            }
            let s = t.elapsed().as_secs_f64() / reps as f64;
            println!("{:.2} ms, {:.1} GFLOP/s", s * 1e3, 2.0 * (m * k * n) as f64 / s / 1e9);
        }
    }
}
