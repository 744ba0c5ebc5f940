//! Rows of a matrix times one vector, y = W x, on the calling thread: the
//! weights stream through once (the product is memory bound), four rows at
//! a time against the same loaded x. Weights are f32, or i8 (int8 layers: a
//! quarter of the bytes to read). The threaded matrix-vector products of the
//! CPU backend and of ncnn split their rows and call [`rows`] per part.

use crate::base::simd;

/// Row-major weights of `k` columns.
#[derive(Clone, Copy)]
pub enum WeightRows<'a> {
    F32(&'a [f32]),
    I8(&'a [i8]),
}

impl WeightRows<'_> {
    pub fn len(&self) -> usize {
        match self {
            WeightRows::F32(w) => w.len(),
            WeightRows::I8(w) => w.len(),
        }
    }
}

/// y[i] = sum_c w[(r0 + i) * k + c] * x[c] for every value of y.
pub fn rows(w: WeightRows, x: &[f32], k: usize, r0: usize, y: &mut [f32]) {
    assert!(w.len() >= (r0 + y.len()) * k && x.len() >= k, "matrix-vector operands too small");
    if simd::avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA; rows r0..r0+y.len() of w and k
        // values of x are in bounds (checked above).
        unsafe { rows_avx2(w, x, k, r0, y) }
    } else {
        rows_portable(w, x, k, r0, y)
    }
}

// BOUNDS-FN: rows asserts w holds (r0 + y.len()) * k values and x k.
fn rows_portable(w: WeightRows, x: &[f32], k: usize, r0: usize, y: &mut [f32]) {
    for (i, v) in y.iter_mut().enumerate() {
        let o = (r0 + i) * k;
        *v = match w {
            WeightRows::F32(w) => w[o..o + k].iter().zip(x).map(|(a, b)| a * b).sum(),
            WeightRows::I8(w) => w[o..o + k].iter().zip(x).map(|(a, b)| *a as f32 * b).sum(),
        };
    }
}

/// # Safety
/// The CPU must have AVX2 and FMA; rows r0.. of `w` hold `k` values each
/// for every value of `y`, and `x` holds `k`.
// BOUNDS-FN: rows asserts w holds (r0 + y.len()) * k values and x k:
// columns below k, y[i + j] with i + 3 < y.len().
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(w: WeightRows, x: &[f32], k: usize, r0: usize, y: &mut [f32]) {
    use std::arch::x86_64::*;
    /// Eight weights of row `r` from column `c`, as floats.
    ///
    /// # Safety
    /// `at..at + 8` must be inside `w`.
    #[inline(always)]
    unsafe fn load8(w: WeightRows, at: usize) -> __m256 {
        match w {
            WeightRows::F32(w) => _mm256_loadu_ps(w.as_ptr().add(at)),
            WeightRows::I8(w) => {
                let b = _mm_loadl_epi64(w.as_ptr().add(at) as *const __m128i);
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b))
            }
        }
    }
    /// # Safety
    /// Needs AVX (the caller's target features).
    #[inline(always)]
    unsafe fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }
    let tail_dot = |o: usize, c0: usize| -> f32 {
        match w {
            WeightRows::F32(w) => (c0..k).map(|c| w[o + c] * x[c]).sum(),
            WeightRows::I8(w) => (c0..k).map(|c| w[o + c] as f32 * x[c]).sum(),
        }
    };
    let k8 = k / 8 * 8;
    let xp = x.as_ptr();
    let mut i = 0;
    while i + 4 <= y.len() {
        let o = [(r0 + i) * k, (r0 + i + 1) * k, (r0 + i + 2) * k, (r0 + i + 3) * k];
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut c = 0;
        while c < k8 {
            let xv = _mm256_loadu_ps(xp.add(c));
            for (a, &oo) in acc.iter_mut().zip(&o) {
                *a = _mm256_fmadd_ps(load8(w, oo + c), xv, *a);
            }
            c += 8;
        }
        for (j, a) in acc.iter().enumerate() {
            y[i + j] = hsum(*a) + tail_dot(o[j], k8);
        }
        i += 4;
    }
    while i < y.len() {
        let o = (r0 + i) * k;
        let mut acc = _mm256_setzero_ps();
        let mut c = 0;
        while c < k8 {
            acc = _mm256_fmadd_ps(load8(w, o + c), _mm256_loadu_ps(xp.add(c)), acc);
            c += 8;
        }
        y[i] = hsum(acc) + tail_dot(o, k8);
        i += 1;
    }
}

/// # Safety
/// None beyond `rows_portable`'s (never chosen off x86-64).
#[cfg(not(target_arch = "x86_64"))]
unsafe fn rows_avx2(w: WeightRows, x: &[f32], k: usize, r0: usize, y: &mut [f32]) {
    rows_portable(w, x, k, r0, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_sums_for_f32_and_i8_weights_on_both_paths() {
        for (m, k) in [(1usize, 1usize), (5, 7), (9, 33), (130, 1027)] {
            let wf: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.25).collect();
            let wi: Vec<i8> = (0..m * k).map(|i| (i * 7 % 255) as i32 as i8).collect();
            let x: Vec<f32> = (0..k).map(|i| (i as f32 * 0.37).sin()).collect();
            for fast in [false, true] {
                for (w, wsum) in [(WeightRows::F32(&wf), &wf.iter().map(|v| *v as f64).collect::<Vec<_>>()), (WeightRows::I8(&wi), &wi.iter().map(|v| *v as f64).collect())] {
                    let mut y = vec![0.0f32; m];
                    if fast {
                        rows(w, &x, k, 0, &mut y);
                    } else {
                        simd::portable(|| rows(w, &x, k, 0, &mut y));
                    }
                    for (o, v) in y.iter().enumerate() {
                        let want: f64 = (0..k).map(|c| wsum[o * k + c] * x[c] as f64).sum();
                        assert!((*v as f64 - want).abs() < 1e-3 * (1.0 + want.abs()), "m={m} k={k} row {o}: {v} vs {want}");
                    }
                }
            }
        }
    }
}
