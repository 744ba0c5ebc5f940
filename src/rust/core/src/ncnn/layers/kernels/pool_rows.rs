//! Row kernels of window pooling: the reduction of a window's input rows
//! into one row (one pass), and the windows of width 2 or 3 at stride 1 or 2
//! across that row. The AVX2 versions are chosen at run time; the portable
//! ones give the same results.

use std::ops::Range;

/// The larger of `a` and `v`, keeping `a` when `v` is NaN (one max
/// instruction on x86).
#[inline(always)]
pub fn max(a: f32, v: f32) -> f32 {
    if v > a {
        v
    } else {
        a
    }
}

/// Extra values a row buffer needs past its last column, for the wide loads
/// of [`windows`].
pub const SLACK: usize = 16;

/// `acc[x]` = the maximum (or sum) over rows `ys` of the plane `src`
/// (rows of `acc.len()`) of `row[x]`, in one pass for up to three rows;
/// -inf (or 0) when there are no rows.
pub fn reduce_rows(src: &[f32], ys: Range<usize>, acc: &mut [f32], is_max: bool, fast: bool) {
    assert!(ys.end.saturating_mul(acc.len()) <= src.len(), "reduce_rows: rows past the plane");
    if fast {
        // SAFETY: `fast` is set only when the CPU has AVX2.
        unsafe { reduce_rows_avx2(src, ys, acc, is_max) }
    } else {
        reduce_rows_in(src, ys, acc, is_max)
    }
}

/// # Safety
/// The CPU must have AVX2.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
unsafe fn reduce_rows_avx2(src: &[f32], ys: Range<usize>, acc: &mut [f32], is_max: bool) {
    reduce_rows_in(src, ys, acc, is_max)
}

// BOUNDS-FN: reduce_rows asserts rows ys lie in src (rows of w = acc.len());
// r0, r1, r2 are rows of w and x < w.
#[inline(always)]
fn reduce_rows_in(src: &[f32], ys: Range<usize>, acc: &mut [f32], is_max: bool) {
    let w = acc.len();
    let row = |y: usize| &src[y * w..(y + 1) * w];
    let op = |a: f32, v: f32| if is_max { max(a, v) } else { a + v };
    match ys.len() {
        0 => acc.fill(if is_max { f32::NEG_INFINITY } else { 0.0 }),
        1 => acc.copy_from_slice(row(ys.start)),
        n => {
            let (r0, r1) = (row(ys.start), row(ys.start + 1));
            if n >= 3 {
                let r2 = row(ys.start + 2);
                for x in 0..w {
                    acc[x] = op(op(r0[x], r1[x]), r2[x]);
                }
            } else {
                for x in 0..w {
                    acc[x] = op(r0[x], r1[x]);
                }
            }
            // Further rows (f32::max here: with `max` the compiler makes
            // "keep a unless v is larger" masked stores, which are slow).
            for y in ys.start + 3..ys.end {
                for (a, v) in acc.iter_mut().zip(row(y)) {
                    *a = if is_max { a.max(*v) } else { *a + v };
                }
            }
        }
    }
}

/// `out[j]` = the maximum (or sum divided by `div`) of `a[j*sw..j*sw+kw]`,
/// for kernel widths 2 and 3 and strides 1 and 2; false (nothing written)
/// for other shapes. `a` must hold [`SLACK`] values past the last window.
pub fn windows(a: &[f32], out: &mut [f32], kw: usize, sw: usize, is_max: bool, div: f32, fast: bool) -> bool {
    if !(2..=3).contains(&kw) || !(1..=2).contains(&sw) {
        return false;
    }
    let n = out.len();
    if n == 0 {
        return true;
    }
    assert!(a.len() >= (n - 1) * sw + kw + SLACK, "pooling row buffer too short");
    if fast {
        // SAFETY: `fast` is set only when the CPU has AVX2; the length was checked.
        unsafe { windows_avx2(a, out, kw, sw, is_max, div) }
    } else {
        windows_in::<false>(a, out, kw, sw, is_max, div)
    }
    true
}

/// # Safety
/// The CPU must have AVX2, and `a` must hold SLACK values past the last window.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
unsafe fn windows_avx2(a: &[f32], out: &mut [f32], kw: usize, sw: usize, is_max: bool, div: f32) {
    windows_in::<true>(a, out, kw, sw, is_max, div)
}

#[inline(always)]
fn windows_in<const AVX: bool>(a: &[f32], out: &mut [f32], kw: usize, sw: usize, is_max: bool, div: f32) {
    match (kw, sw, is_max) {
        (2, 1, true) => step1::<2, true>(a, out, div),
        (3, 1, true) => step1::<3, true>(a, out, div),
        (2, 1, false) => step1::<2, false>(a, out, div),
        (3, 1, false) => step1::<3, false>(a, out, div),
        (2, _, true) => step2::<AVX, 2, true>(a, out, div),
        (3, _, true) => step2::<AVX, 3, true>(a, out, div),
        (2, _, false) => step2::<AVX, 2, false>(a, out, div),
        _ => step2::<AVX, 3, false>(a, out, div),
    }
}

/// One window starting at `w[0]` (its first K values).
// BOUNDS-FN: w holds K values (K is 2 or 3; w[2] only when K is 3).
#[inline(always)]
fn one<const K: usize, const MAX: bool>(w: &[f32], div: f32) -> f32 {
    if MAX {
        let m = max(w[0], w[1]);
        if K == 3 {
            max(m, w[2])
        } else {
            m
        }
    } else {
        let s = w[0] + w[1];
        (if K == 3 { s + w[2] } else { s }) / div
    }
}

/// Stride 1: shifted slices, which the compiler vectorises.
// BOUNDS-FN: windows asserts a holds n + kw - 1 + SLACK >= n + 2 values; j < n.
#[inline(always)]
fn step1<const K: usize, const MAX: bool>(a: &[f32], out: &mut [f32], div: f32) {
    let n = out.len();
    let (a0, a1, a2) = (&a[..n], &a[1..n + 1], &a[2..n + 2]);
    for j in 0..n {
        out[j] = one::<K, MAX>(&[a0[j], a1[j], a2[j]], div);
    }
}

/// Stride 2: with AVX2, eight outputs at a time from the even and odd
/// columns of sixteen loaded values; otherwise one at a time.
// BOUNDS-FN: windows asserts a holds (n - 1) * 2 + K + SLACK values: 2j + K <= that.
#[inline(always)]
fn step2<const AVX: bool, const K: usize, const MAX: bool>(a: &[f32], out: &mut [f32], div: f32) {
    #[allow(unused_mut)]
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if AVX {
        // SAFETY: only reached from the AVX2 entry point; loads stay
        // within `a`, which holds SLACK values past the last window.
        unsafe { j = step2_x8::<K, MAX>(a, out, div) };
    }
    for (j, o) in out.iter_mut().enumerate().skip(j) {
        *o = one::<K, MAX>(&a[2 * j..2 * j + K], div);
    }
}

/// The outputs 0..8m of [`step2`] with AVX2; returns 8m.
///
/// # Safety
/// The CPU must have AVX2, and `a` must hold SLACK values past the last window.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn step2_x8<const K: usize, const MAX: bool>(a: &[f32], out: &mut [f32], div: f32) -> usize {
    use std::arch::x86_64::*;
    let n = out.len() / 8 * 8;
    debug_assert!(n == 0 || a.len() >= 2 * n + 2);
    let (p, q) = (a.as_ptr(), out.as_mut_ptr());
    let d = _mm256_set1_ps(div);
    // v > a ? v : a, as `max` does.
    let op = |a: __m256, v: __m256| if MAX { _mm256_max_ps(v, a) } else { _mm256_add_ps(a, v) };
    let mut j = 0;
    while j < n {
        let s = p.add(2 * j);
        let (v0, v1) = (_mm256_loadu_ps(s), _mm256_loadu_ps(s.add(8)));
        // Lanes in the order 0 1 4 5 2 3 6 7 of the outputs, fixed below.
        let even = _mm256_shuffle_ps::<0x88>(v0, v1);
        let odd = _mm256_shuffle_ps::<0xDD>(v0, v1);
        let mut r = op(even, odd);
        if K == 3 {
            let (u0, u1) = (_mm256_loadu_ps(s.add(2)), _mm256_loadu_ps(s.add(10)));
            r = op(r, _mm256_shuffle_ps::<0x88>(u0, u1));
        }
        if !MAX {
            r = _mm256_div_ps(r, d);
        }
        let r = _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(r)));
        _mm256_storeu_ps(q.add(j), r);
        j += 8;
    }
    n
}
