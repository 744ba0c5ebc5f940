//! Arithmetic shared by the formats, written to give ggml's exact results:
//! C's `MAX`/`MIN` (which depend on argument order when a NaN is involved),
//! x86's float-to-integer conversion, the round-to-nearest-even trick of
//! `nearest_int`, and the scale searches of the K-quants.

use half::f16;

/// ggml's `GROUP_MAX_EPS`: groups whose largest magnitude is below this are zero.
pub const GROUP_MAX_EPS: f32 = 1e-15;

pub fn f32_to_f16_bits(v: f32) -> u16 {
    f16::from_f32(v).to_bits()
}

pub fn f16_bits_to_f32(b: u16) -> f32 {
    f16::from_bits(b).to_f32()
}

/// The `N` bytes at `b[o..o + N]`, or zeros where `b` is shorter (callers
/// read fields at fixed offsets of whole blocks, which are never short).
#[inline]
pub fn field<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    b.get(o..).and_then(|t| t.first_chunk::<N>()).copied().unwrap_or([0; N])
}

/// `v` written to `b[o..o + N]` (nothing where `b` is shorter).
#[inline]
pub fn put<const N: usize>(b: &mut [u8], o: usize, v: [u8; N]) {
    if let Some(d) = b.get_mut(o..).and_then(|t| t.first_chunk_mut::<N>()) {
        *d = v;
    }
}

/// The whole `N`-element blocks of `x` as arrays, in order (a shorter tail is
/// left out).
#[inline]
pub fn blocks<const N: usize, T>(x: &[T]) -> impl Iterator<Item = &[T; N]> {
    x.chunks_exact(N).filter_map(|c| c.try_into().ok())
}

/// [`blocks`] of a mutable slice.
#[inline]
pub fn blocks_mut<const N: usize, T>(x: &mut [T]) -> impl Iterator<Item = &mut [T; N]> {
    x.chunks_exact_mut(N).filter_map(|c| c.try_into().ok())
}

/// The `N`-value blocks of an importance matrix row, one per block of the
/// values (`None` for each when there is no matrix).
pub fn weight_blocks<const N: usize>(qw: Option<&[f32]>) -> impl Iterator<Item = Option<&[f32; N]>> {
    let (given, none) = match qw {
        Some(q) => (Some(blocks::<N, f32>(q).map(Some)), None),
        None => (None, Some(std::iter::repeat(None))),
    };
    given.into_iter().flatten().chain(none.into_iter().flatten())
}

/// The f16 stored at `b[o..o + 2]`, as f32.
#[inline]
pub fn rd_f16(b: &[u8], o: usize) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(field(b, o)))
}

#[inline]
pub fn wr_f16(b: &mut [u8], o: usize, v: f32) {
    put(b, o, f32_to_f16_bits(v).to_le_bytes());
}

/// `v` rounded through f16 (what a stored f16 scale reads back as).
#[inline]
pub fn via_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

#[inline]
pub fn rd_u16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(field(b, o))
}

#[inline]
pub fn rd_u32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(field(b, o))
}

/// C's `MAX(a, b)`: `a > b ? a : b`.
#[inline]
pub fn cmax(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// A float converted to a 32-bit integer as x86 does (truncation; NaN and
/// out-of-range values give `i32::MIN`), which is what C's float-to-integer
/// conversions compile to. Narrower C casts then keep the low bits.
#[inline]
pub fn cvtt(v: f32) -> i32 {
    if v.is_nan() || v >= 2147483648.0 || v < -2147483648.0 {
        i32::MIN
    } else {
        v as i32
    }
}

/// ggml's `nearest_int`: round to nearest, ties to even, through the bits of
/// `v + 1.5 * 2^23` (exact for |v| < 2^22; other values give what ggml gives).
#[inline]
pub fn nearest_int(v: f32) -> i32 {
    let b = (v + 12582912.0f32).to_bits();
    (b & 0x007f_ffff) as i32 - 0x0040_0000
}

/// C's `roundf` assigned to an integer.
#[inline]
pub fn roundf_int(v: f32) -> i32 {
    cvtt(v.round())
}

/// Index of the value of the sorted table `val` nearest to `x` (ggml's
/// `best_index_int8`); 0 for a table of fewer than two values.
// BOUNDS-FN: n >= 2 (checked first); the bisection keeps 0 <= ml < mu <= n - 1,
// so mav, mu - 1 and mu are below n.
pub fn best_index_int8(val: &[i8], x: f32) -> usize {
    let n = val.len();
    if n < 2 {
        return 0;
    }
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[n - 1] as f32 {
        return n - 1;
    }
    let (mut ml, mut mu) = (0usize, n - 1);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < (val[mu] as f32) - x {
        mu - 1
    } else {
        mu
    }
}

/// The largest magnitude and the value that has it (the first one on ties;
/// NaNs never win), as ggml's `if (ax > amax)` loops pick them.
pub fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

/// How `make_qx_quants` weighs each value when no weights are given.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rmse {
    /// Plain rounding of the scaled values, no search (ggml's rmse_type 0).
    None,
    /// Weights x^2 and a search over 18 nearby scales (rmse_type 1).
    Squares,
}

/// ggml's `make_qx_quants`: symmetric quantization of `x` to integers in
/// [-nmax, nmax-1] (stored in `l` offset by nmax); returns the scale.
/// Values past the end of `l` or `qw` are left out.
// BOUNDS-FN: n is the least of the lengths of x, l and qw (when given), x is
// cut to it, and every index is below n.
pub fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8], rmse: Rmse, qw: Option<&[f32]>) -> f32 {
    let n = x.len().min(l.len()).min(qw.map_or(usize::MAX, <[f32]>::len));
    let x = &x[..n];
    let (amax, max) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = -nmaxf / max;
    let clamp = |v: i32| v.min(nmax - 1).max(-nmax);
    if rmse == Rmse::None {
        for i in 0..n {
            l[i] = (nmax + clamp(nearest_int(iscale * x[i]))) as i8;
        }
        return 1.0 / iscale;
    }
    let weight = |i: usize| match qw {
        Some(w) => w[i],
        None => x[i] * x[i],
    };
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..n {
        let li = clamp(nearest_int(iscale * x[i]));
        l[i] = (li + nmax) as i8;
        let w = weight(i);
        let lf = li as f32;
        sumlx += w * x[i] * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmaxf + 0.1f32 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for i in 0..n {
            let lf = clamp(nearest_int(iscale * x[i])) as f32;
            let w = weight(i);
            sumlx += w * x[i] * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                l[i] = (nmax + clamp(nearest_int(iscale * x[i]))) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` (with its iterative refinement when `do_rmse`).
/// Values past the end of `l` are left out.
// BOUNDS-FN: n is the lesser of the lengths of x and l, x is cut to it, and
// every index is below n.
pub fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8], do_rmse: bool) -> f32 {
    let n = x.len().min(l.len());
    let x = &x[..n];
    let (amax, max) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let clamp = |v: i32| v.min(nmax - 1).max(-nmax);
    if do_rmse {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for i in 0..n {
            let li = clamp(nearest_int(iscale * x[i]));
            l[i] = li as i8;
            let w = x[i] * x[i];
            sumlx += w * x[i] * li as f32;
            suml2 += w * li as f32 * li as f32;
        }
        let w: Vec<f32> = x.iter().map(|v| v * v).collect();
        let mut li: Vec<i32> = l[..n].iter().map(|&v| v as i32).collect();
        (sumlx, suml2) = refine(x, &w, &mut li, (sumlx, suml2), clamp, Refine::CheckAfter);
        for (d, v) in l.iter_mut().zip(li) {
            *d = (v + nmax) as i8;
        }
        return if suml2 > 0.0 { sumlx / suml2 } else { 0.0 };
    }
    for i in 0..n {
        l[i] = (clamp(nearest_int(iscale * x[i])) + nmax) as i8;
    }
    1.0 / iscale
}

/// Parameters of the asymmetric scale-and-min searches.
#[derive(Clone, Copy)]
pub struct Search {
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    pub use_mad: bool,
}

/// ggml's `make_qkx2_quants` (`weights` given) and `make_qkx3_quants`
/// (`weights` None means x^2): quantize `x` to [0, nmax] with a scale and a
/// min; returns (scale, -min). Values past the end of `weights`, `l` or
/// `laux` are left out; no values give (0, 0).
// BOUNDS-FN: n is the least of the lengths of x, weights (when given), l and
// laux, at least 1 (checked first); every index is below n.
pub fn make_qkx_quants(nmax: i32, x: &[f32], weights: Option<&[f32]>, l: &mut [u8], laux: &mut [u8], s: Search, qkx3: bool) -> (f32, f32) {
    let n = x.len().min(weights.map_or(usize::MAX, <[f32]>::len)).min(l.len()).min(laux.len());
    if n == 0 {
        return (0.0, 0.0);
    }
    let w = |i: usize| match weights {
        Some(w) => w[i],
        None => x[i] * x[i],
    };
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = w(0);
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let wi = w(i);
        sum_w += wi;
        sum_x += wi * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    // qkx2 tests max == min, qkx3 max <= min.
    if (qkx3 && max <= min) || (!qkx3 && max == min) {
        l[..n].fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let clamp = |v: i32| v.min(nmax).max(0);
    let err = |d: f32| if s.use_mad { d.abs() } else { d * d };
    let mut best_error = 0f32;
    for i in 0..n {
        let li = clamp(nearest_int(iscale * (x[i] - min)));
        l[i] = li as u8;
        let diff = scale * l[i] as f32 + min - x[i];
        best_error += w(i) * err(diff);
    }
    if s.nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=s.nstep {
        iscale = (s.rmin + s.rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            let li = clamp(nearest_int(iscale * (x[i] - min)));
            laux[i] = li as u8;
            let lf = li as f32;
            let wi = w(i);
            sum_l += wi * lf;
            sum_l2 += wi * lf * lf;
            sum_xl += wi * lf * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur = 0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur += w(i) * err(diff);
            }
            if cur < best_error {
                l[..n].copy_from_slice(&laux[..n]);
                best_error = cur;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Where the refinement of `make_q3_quants` / `make_qp_quants` requires the
/// reduced sum of squares to be positive.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Refine {
    /// After moving the level (make_q3_quants).
    CheckAfter,
    /// Before choosing a new level (make_qp_quants).
    CheckBefore,
}

/// Up to five passes that move each level `l[i]` to the one its value
/// prefers given all the others, when that raises sumlx^2 / suml2 (over
/// the values all three slices hold).
// BOUNDS-FN: every index is below n, the least of the three lengths.
fn refine(x: &[f32], w: &[f32], l: &mut [i32], sums: (f32, f32), clamp: impl Fn(i32) -> i32, when: Refine) -> (f32, f32) {
    let (mut sumlx, mut suml2) = sums;
    let n = x.len().min(w.len()).min(l.len());
    for _ in 0..5 {
        let mut changed = 0;
        for i in 0..n {
            let li = l[i] as f32;
            let mut slx = sumlx - w[i] * x[i] * li;
            let mut sl2 = suml2 - w[i] * li * li;
            let go = match when {
                Refine::CheckAfter => slx > 0.0,
                Refine::CheckBefore => slx > 0.0 && sl2 > 0.0,
            };
            if !go {
                continue;
            }
            let new_l = clamp(nearest_int(x[i] * sl2 / slx));
            if new_l != l[i] {
                slx += w[i] * x[i] * new_l as f32;
                sl2 += w[i] * new_l as f32 * new_l as f32;
                let ok = when == Refine::CheckBefore || sl2 > 0.0;
                if ok && slx * slx * suml2 > sumlx * sumlx * sl2 {
                    l[i] = new_l;
                    sumlx = slx;
                    suml2 = sl2;
                    changed += 1;
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    (sumlx, suml2)
}

/// ggml's `make_qp_quants`: non-negative `x` to [0, nmax] with weights `qw`
/// (values past the end of `l` or `qw` are left out).
// BOUNDS-FN: n is the least of the lengths of x, l and qw, x is cut to it,
// and every index is below n.
pub fn make_qp_quants(nmax: i32, x: &[f32], l: &mut [u8], qw: &[f32]) -> f32 {
    let n = x.len().min(l.len()).min(qw.len());
    let x = &x[..n];
    let mut max = 0f32;
    for &v in x {
        max = cmax(max, v);
    }
    if max < GROUP_MAX_EPS {
        l[..n].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / max;
    for i in 0..n {
        l[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0f32;
    for i in 0..n {
        let diff = x[i] - scale * l[i] as f32;
        best_mse += qw[i] * diff * diff;
    }
    for is in -4..=4 {
        if is == 0 {
            continue;
        }
        let iscale_is = (0.1f32 * is as f32 + nmaxf) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0f32;
        for i in 0..n {
            let li = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * li as f32;
            mse += qw[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).min(nmax);
        l[i] = li as u8;
        let w = qw[i];
        sumlx += w * x[i] * li as f32;
        suml2 += w * li as f32 * li as f32;
    }
    let mut li: Vec<i32> = l[..n].iter().map(|&v| v as i32).collect();
    (sumlx, suml2) = refine(x, qw, &mut li, (sumlx, suml2), |v| v.min(nmax), Refine::CheckBefore);
    for (d, v) in l.iter_mut().zip(li) {
        *d = v as u8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// Sum of squares, accumulated in order as ggml does.
pub fn sum_sq(x: &[f32]) -> f32 {
    let mut s = 0f32;
    for &v in x {
        s += v * v;
    }
    s
}

/// Importance-matrix weights qw * sqrt(sigma2 + x^2) of a group, and their sum.
pub fn imatrix_weights(x: &[f32], qw: &[f32], sigma2: f32) -> (Vec<f32>, f32) {
    let w: Vec<f32> = x.iter().zip(qw).map(|(&v, &q)| q * (sigma2 + v * v).sqrt()).collect();
    let mut sum = 0f32;
    for &v in &w {
        sum += v;
    }
    (w, sum)
}

/// ggml's `get_scale_min_k4` for each sub-block `j` of a Q4_K / Q5_K block:
/// the 6-bit scales and mins packed in its 12 bytes.
// BOUNDS-FN: `q` is [u8; 12] and j < 8, so j + 4 < 12 (and j - 4 >= 0 when j >= 4).
#[inline]
pub fn scales_mins_k4(q: &[u8; 12]) -> [(u8, u8); 8] {
    std::array::from_fn(|j| {
        if j < 4 {
            (q[j] & 63, q[j + 4] & 63)
        } else {
            ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
        }
    })
}
