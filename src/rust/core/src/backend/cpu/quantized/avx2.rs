//! AVX2 dot products of the common weight types with their 8-bit partner
//! activations: the integer block products of [`super::dot`] done 32 bytes
//! at a time (`maddubs` of unsigned by signed bytes, pairs summed to i32),
//! scaled and summed in eight f32 lanes. The sums are the same as the
//! portable kernels' up to the order of the f32 additions.

#![cfg(target_arch = "x86_64")]

use super::prep::Q8Prep;
use crate::base::quant::QK_K;
use core::arch::x86_64::*;

/// The f16 at `b[o..o + 2]` as f32 (F16C: exact, no branches).
// BOUNDS-FN: the callers pass o + 2 <= N: offsets 0 and 2 of the blocks of
// blocks::<X, Y> (18 bytes at least; 2 only in q4_1 and q5_1, 20 and 24) and
// 208 of q6_k's [u8; 210].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn h2f<const N: usize>(b: &[u8; N], o: usize) -> f32 {
    let h = u16::from_le_bytes([b[o], b[o + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

/// Loads 32 bytes of `b` from `o` (the callers' arrays hold them).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load32<const N: usize>(b: &[u8; N], o: usize) -> __m256i {
    if o + 32 > N {
        return _mm256_setzero_si256();
    }
    // SAFETY: bytes o..o + 32 lie inside `b` (checked above; every caller
    // passes offsets that fit, so the check folds away); unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(b.as_ptr().add(o) as *const __m256i) }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Eight i32 sums of four products of signed bytes each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    let p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// Eight i32 sums of four products of unsigned (x) by signed (y) bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_u8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
}

/// The 32 nibbles of 16 bytes at `o`: low nibbles (values 0..16) then high ones.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nibbles<const N: usize>(b: &[u8; N], o: usize) -> __m256i {
    if o + 16 > N {
        return _mm256_setzero_si256();
    }
    // SAFETY: bytes o..o + 16 lie inside `b` (checked above).
    let lo = unsafe { _mm_loadu_si128(b.as_ptr().add(o) as *const __m128i) };
    let both = _mm256_set_m128i(_mm_srli_epi16::<4>(lo), lo);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// Byte j = 0xFF where bit j of the u32 at `o` is set, else 0.
// BOUNDS-FN: the callers pass o + 4 <= N: q5_0 2 of [u8; 22], q5_1 4 of
// [u8; 24].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bits_to_bytes<const N: usize>(b: &[u8; N], o: usize) -> __m256i {
    let v = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(v as i32), spread);
    let others = _mm256_set1_epi64x(0x7FBF_DFEF_F7FB_FDFEu64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi8(-1))
}

/// Sum over blocks of `d * q` for `(d, q) = f(x block, y block)` (a scale and
/// eight lanes of integer sums), in two interleaved accumulators so that
/// consecutive blocks do not wait on each other.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn sum2<const X: usize, const Y: usize>(x: &[u8], y: &[u8], nb: usize, f: impl Fn(&[u8; X], &[u8; Y]) -> (f32, __m256i)) -> f32 {
    let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let step = |acc: __m256, (d, q): (f32, __m256i)| _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(q), acc);
    let mut it = blocks::<X, Y>(x, y, nb);
    loop {
        match (it.next(), it.next()) {
            (Some((x0, y0)), Some((x1, y1))) => {
                a0 = step(a0, f(x0, y0));
                a1 = step(a1, f(x1, y1));
            }
            (Some((x0, y0)), None) => {
                a0 = step(a0, f(x0, y0));
                break;
            }
            _ => break,
        }
    }
    hsum(_mm256_add_ps(a0, a1))
}

fn blocks<'a, const X: usize, const Y: usize>(x: &'a [u8], y: &'a [u8], nb: usize) -> impl Iterator<Item = (&'a [u8; X], &'a [u8; Y])> {
    x.chunks_exact(X).zip(y.chunks_exact(Y)).take(nb).filter_map(|(a, b)| Some((a.try_into().ok()?, b.try_into().ok()?)))
}

/// The f16 scales of Q4_0 blocks `8 * g .. 8 * g + 8` of `x` (18-byte blocks) as f32.
// BOUNDS-FN: the one caller, q4_0, checked `p.fits(x)` (x.len() >= 18 nb) and
// passes g < nb / 8: with b < 8, o + 1 < 18 (8 g + 8) <= 18 nb.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_0_scales(x: &[u8], g: usize) -> __m256 {
    let h = |b: usize| {
        let o = 18 * (8 * g + b);
        i16::from_le_bytes([x[o], x[o + 1]])
    };
    _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)))
}

/// Q4_0 weights against a prepared Q8_0 column: eight blocks a step, their
/// scales converted together; the nibbles taken unsigned (`maddubs` by the
/// activations), the offset of 8 subtracted per block from `p.c`.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q4_0(x: &[u8], p: &Q8Prep) -> f32 {
    let nb = p.nb;
    if !p.fits(x) {
        return f32::NAN;
    }
    let groups = nb / 8;
    let (mask, ones) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi16(1));
    let (mut a0, mut a1, mut corr) = (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
    for g in 0..groups {
        let dx = q4_0_scales(x, g);
        // SAFETY: p.d and p.c hold 8 * groups values at least (p.fits above).
        let (dy, c) = unsafe { (_mm256_loadu_ps(p.d.as_ptr().add(8 * g)), _mm256_loadu_ps(p.c.as_ptr().add(8 * g))) };
        let d8 = _mm256_mul_ps(dx, dy);
        corr = _mm256_fmadd_ps(dx, c, corr);
        for b in 0..8 {
            let blk = 8 * g + b;
            // SAFETY: block blk < nb: its 16 quant bytes lie inside x and its
            // 32 activations inside p.qs (p.fits above).
            let (q, y) = unsafe {
                (
                    _mm_loadu_si128(x.as_ptr().add(18 * blk + 2) as *const __m128i),
                    _mm256_loadu_si256(p.qs.as_ptr().add(32 * blk) as *const __m256i),
                )
            };
            let xu = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(q), q), mask);
            let i = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(xu, y), ones));
            let s = _mm256_permutevar8x32_ps(d8, _mm256_set1_epi32(b as i32));
            if b % 2 == 0 {
                a0 = _mm256_fmadd_ps(s, i, a0);
            } else {
                a1 = _mm256_fmadd_ps(s, i, a1);
            }
        }
    }
    hsum(_mm256_add_ps(a0, a1)) - hsum(corr) + p.q4_0_tail(x, 8 * groups)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q8_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    sum2::<34, 34>(x, y, nb, |xb, yb| {
        let d = h2f(xb, 0) * h2f(yb, 0);
        (d, dot_i8(load32(xb, 2), load32(yb, 2)))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q4_1(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut mins = 0f32;
    for (xb, yb) in blocks::<20, 36>(x, y, nb) {
        mins += h2f(xb, 2) * h2f(yb, 2);
    }
    mins + sum2::<20, 36>(x, y, nb, |xb, yb| {
        let d = h2f(xb, 0) * h2f(yb, 0);
        (d, dot_u8(nibbles(xb, 4), load32(yb, 4)))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q5_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    sum2::<22, 34>(x, y, nb, |xb, yb| {
        let d = h2f(xb, 0) * h2f(yb, 0);
        // Clear high bit: nibble - 16 (0xF0 | nibble as a signed byte); set: the nibble.
        let hi = _mm256_andnot_si256(bits_to_bytes(xb, 2), _mm256_set1_epi8(0xF0u8 as i8));
        let qx = _mm256_or_si256(nibbles(xb, 6), hi);
        (d, dot_i8(qx, load32(yb, 2)))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q5_1(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut mins = 0f32;
    for (xb, yb) in blocks::<24, 36>(x, y, nb) {
        mins += h2f(xb, 2) * h2f(yb, 2);
    }
    mins + sum2::<24, 36>(x, y, nb, |xb, yb| {
        let d = h2f(xb, 0) * h2f(yb, 0);
        let hi = _mm256_and_si256(bits_to_bytes(xb, 4), _mm256_set1_epi8(0x10));
        let qx = _mm256_or_si256(nibbles(xb, 8), hi);
        (d, dot_u8(qx, load32(yb, 4)))
    })
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn iq4_nl(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let t = _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    let table = _mm256_set_m128i(t, t);
    sum2::<18, 34>(x, y, nb, |xb, yb| {
        let d = h2f(xb, 0) * h2f(yb, 0);
        let qx = _mm256_shuffle_epi8(table, nibbles(xb, 2));
        (d, dot_i8(qx, load32(yb, 2)))
    })
}

/// The 6-bit scales and mins of a Q4_K / Q5_K block (bytes 4..16).
// BOUNDS-FN: the callers' blocks are [u8; 144] (q4_k) and [u8; 176] (q5_k);
// j < 8 (the arrays of 8), so s(i) reads 4 + i with i <= j + 4 < 12, below 16.
#[inline]
fn scales_k4<const N: usize>(b: &[u8; N]) -> ([i16; 8], [i32; 8]) {
    let s = |i: usize| b[4 + i];
    let sc = std::array::from_fn(|j| if j < 4 { (s(j) & 63) as i16 } else { ((s(j + 4) & 0xF) | ((s(j - 4) >> 6) << 4)) as i16 });
    let m = std::array::from_fn(|j| if j < 4 { (s(j + 4) & 63) as i32 } else { ((s(j + 4) >> 4) | ((s(j) >> 6) << 4)) as i32 });
    (sc, m)
}

fn h2f16(lo: u8, hi: u8) -> f32 {
    super::dot::h2f(lo, hi)
}

/// Group `g` of 64 of a Q4_K / Q5_K block (two sub-blocks of unsigned
/// values) times the activations, each sub-block's sums times its scale.
// BOUNDS-FN: `sc` is [i16; 8] and the callers' loops pass g < 4: 2 g + 1 < 8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_pair(lo: __m256i, hi: __m256i, yb: &[u8; 292], g: usize, sc: &[i16; 8]) -> __m256i {
    let plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(yb, 4 + 64 * g)), _mm256_set1_epi16(sc[2 * g]));
    let phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(yb, 36 + 64 * g)), _mm256_set1_epi16(sc[2 * g + 1]));
    _mm256_add_epi32(plo, phi)
}

/// dy and the mins term (dmin * dy * sum m_j * (sum of sub-block j's y)).
// BOUNDS-FN: yb is [u8; 292]: literals 0..4, and j < 8 so bs reads
// 261 + 2 (2 j + 1) <= 291; `m` is [i32; 8]; the callers' xb are [u8; 144]
// and [u8; 176] (literals 2, 3).
#[inline]
fn k4_mins<const N: usize>(xb: &[u8; N], yb: &[u8; 292], m: &[i32; 8]) -> (f32, f32) {
    let dy = f32::from_le_bytes([yb[0], yb[1], yb[2], yb[3]]);
    let bs = |j: usize| i16::from_le_bytes([yb[260 + 2 * j], yb[261 + 2 * j]]) as i32;
    let mut s = 0i32;
    for j in 0..8 {
        s += m[j] * (bs(2 * j) + bs(2 * j + 1));
    }
    (dy, dy * h2f16(xb[2], xb[3]) * s as f32)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q4_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (mut acc, mut mins) = (_mm256_setzero_ps(), 0f32);
    let mask = _mm256_set1_epi8(0x0F);
    for (xb, yb) in blocks::<144, 292>(x, y, nb) {
        let (sc, m) = scales_k4(xb);
        let (dy, mterm) = k4_mins(xb, yb, &m);
        mins += mterm;
        let mut sumi = _mm256_setzero_si256();
        for g in 0..4 {
            let q = load32(xb, 16 + 32 * g);
            let lo = _mm256_and_si256(q, mask);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), mask);
            sumi = _mm256_add_epi32(sumi, scaled_pair(lo, hi, yb, g, &sc));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * h2f(xb, 0)), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - mins
}

#[target_feature(enable = "avx2,fma,f16c")]
pub fn q5_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let (mut acc, mut mins) = (_mm256_setzero_ps(), 0f32);
    let (mask, one) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x01));
    for (xb, yb) in blocks::<176, 292>(x, y, nb) {
        let (sc, m) = scales_k4(xb);
        let (dy, mterm) = k4_mins(xb, yb, &m);
        mins += mterm;
        let mut hbits = load32(xb, 16);
        let mut sumi = _mm256_setzero_si256();
        for g in 0..4 {
            let q = load32(xb, 48 + 32 * g);
            let hlo = _mm256_slli_epi16::<4>(_mm256_and_si256(hbits, one));
            let hhi = _mm256_slli_epi16::<3>(_mm256_and_si256(hbits, _mm256_set1_epi8(0x02)));
            hbits = _mm256_srli_epi16::<2>(hbits);
            let lo = _mm256_or_si256(_mm256_and_si256(q, mask), hlo);
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q), mask), hhi);
            sumi = _mm256_add_epi32(sumi, scaled_pair(lo, hi, yb, g, &sc));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * h2f(xb, 0)), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - mins
}

// BOUNDS-FN: xb is [u8; 210], yb [u8; 292] (blocks::<210, 292>): n < 2, t < 4
// index the arrays of 4 `hs` and `lows`, and 193 + 8 n + 2 t <= 207.
#[target_feature(enable = "avx2,fma,f16c")]
pub fn q6_k(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let (mask, three, m32) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(0x03), _mm256_set1_epi8(32));
    for (xb, yb) in blocks::<210, 292>(x, y, nb) {
        let dy = f32::from_le_bytes([yb[0], yb[1], yb[2], yb[3]]);
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let (l0, l1, h) = (load32(xb, 64 * n), load32(xb, 64 * n + 32), load32(xb, 128 + 32 * n));
            let hs = [
                h,
                _mm256_srli_epi16::<2>(h),
                _mm256_srli_epi16::<4>(h),
                _mm256_srli_epi16::<6>(h),
            ];
            let lows = [
                _mm256_and_si256(l0, mask),
                _mm256_and_si256(l1, mask),
                _mm256_and_si256(_mm256_srli_epi16::<4>(l0), mask),
                _mm256_and_si256(_mm256_srli_epi16::<4>(l1), mask),
            ];
            for t in 0..4 {
                let q = _mm256_or_si256(lows[t], _mm256_slli_epi16::<4>(_mm256_and_si256(hs[t], three)));
                let yv = load32(yb, 4 + 128 * n + 32 * t);
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, yv), _mm256_maddubs_epi16(m32, yv));
                let (sa, sb) = (xb[192 + 8 * n + 2 * t] as i8 as i16, xb[193 + 8 * n + 2 * t] as i8 as i16);
                let scale = _mm256_set_m128i(_mm_set1_epi16(sb), _mm_set1_epi16(sa));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * h2f(xb, 208)), _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc)
}

/// Marks the super-block size these kernels assume.
const _: () = assert!(QK_K == 256);
