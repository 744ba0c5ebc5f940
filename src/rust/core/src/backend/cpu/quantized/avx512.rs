//! AVX-512 (VNNI) dot products of Q8_0 weights with Q8_0 activations, two
//! blocks per 64-byte register: `vpdpbusd` sums four products of unsigned
//! by signed bytes into each i32 lane in one instruction (1.4x the AVX2
//! kernel in cache). An odd last block goes through the AVX2 kernel. Q4_0
//! against a prepared Q8_0 column (`super::prep`): two blocks per register,
//! eight scales converted together.

#![cfg(target_arch = "x86_64")]

use super::prep::Q8Prep;
use core::arch::x86_64::*;

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn h2f(b: &[u8], o: usize) -> f32 {
    let h = u16::from_le_bytes([b[o], b[o + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

/// 32 bytes of `b` at `o` (checked).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn load32(b: &[u8], o: usize) -> __m256i {
    let s = &b[o..o + 32];
    // SAFETY: `s` is 32 bytes long (bounds-checked above); unaligned loads are allowed.
    unsafe { _mm256_loadu_si256(s.as_ptr() as *const __m256i) }
}

/// Two 256-bit halves as one register (`lo` in lanes 0..7).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// Eight lanes of `d0` then eight of `d1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn scales(d0: f32, d1: f32) -> __m512 {
    let lo = _mm256_castps_pd(_mm256_set1_ps(d0));
    let hi = _mm256_castps_pd(_mm256_set1_ps(d1));
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi))
}

/// Sum over pairs of blocks (`xs` and `ys` bytes each) of `d * q` for
/// `(d, q) = pair(two x blocks, two y blocks)`, in two interleaved
/// accumulators so that consecutive pairs do not wait on each other.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn sum_pairs(x: &[u8], y: &[u8], pairs: usize, xs: usize, ys: usize, pair: impl Fn(&[u8], &[u8]) -> (__m512, __m512i)) -> f32 {
    let (mut a0, mut a1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for p in 0..pairs {
        let (d, i) = pair(&x[2 * xs * p..2 * xs * (p + 1)], &y[2 * ys * p..2 * ys * (p + 1)]);
        if p % 2 == 0 {
            a0 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(i), a0);
        } else {
            a1 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(i), a1);
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(a0, a1))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q8_0(x: &[u8], y: &[u8], nb: usize) -> f32 {
    let pairs = nb / 2;
    let s = sum_pairs(x, y, pairs, 34, 34, |xb, yb| {
        let (qx, qy) = (join(load32(xb, 2), load32(xb, 36)), join(load32(yb, 2), load32(yb, 36)));
        // |x| (unsigned) times y with x's sign, as vpdpbusd needs an unsigned
        // operand (our activations never hold -128, so negating them is exact)
        let neg = _mm512_movepi8_mask(qx);
        let sy = _mm512_mask_sub_epi8(qy, neg, _mm512_setzero_si512(), qy);
        let i = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(qx), sy);
        (scales(h2f(xb, 0) * h2f(yb, 0), h2f(xb, 34) * h2f(yb, 34)), i)
    });
    if nb % 2 == 1 {
        return s + super::avx2::q8_0(&x[68 * pairs..], &y[68 * pairs..], 1);
    }
    s
}

/// Q4_0 weights against a prepared Q8_0 column: per pair of blocks, the
/// nibbles spread to [low 0, high 0, low 1, high 1] (unsigned, 0..15) meet
/// 64 contiguous activations in one `vpdpbusd`; the offset of 8 is taken
/// off per block from `p.c`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q4_0(x: &[u8], p: &Q8Prep) -> f32 {
    let nb = p.nb;
    if !p.fits(x) {
        return f32::NAN;
    }
    let groups = nb / 8;
    let mask = _mm512_set1_epi8(0x0F);
    // 64-bit lanes [q0, q0, q1, q1] of a register holding [q0, q1]
    let spread = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
    let halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    let (mut a0, mut a1, mut corr) = (_mm512_setzero_ps(), _mm512_setzero_ps(), _mm256_setzero_ps());
    for g in 0..groups {
        let dx = super::avx2::q4_0_scales(x, g);
        // SAFETY: p.d and p.c hold 8 * groups values at least (p.fits above).
        let (dy, c) = unsafe { (_mm256_loadu_ps(p.d.as_ptr().add(8 * g)), _mm256_loadu_ps(p.c.as_ptr().add(8 * g))) };
        let d8 = _mm512_castps256_ps512(_mm256_mul_ps(dx, dy));
        corr = _mm256_fmadd_ps(dx, c, corr);
        for pr in 0..4 {
            let b = 8 * g + 2 * pr;
            // SAFETY: blocks b and b + 1 are < nb: their quant bytes lie inside
            // x and their 64 activations inside p.qs (p.fits above).
            let (q0, q1, y) = unsafe {
                (
                    _mm_loadu_si128(x.as_ptr().add(18 * b + 2) as *const __m128i),
                    _mm_loadu_si128(x.as_ptr().add(18 * b + 20) as *const __m128i),
                    _mm512_loadu_si512(p.qs.as_ptr().add(32 * b) as *const _),
                )
            };
            let t = _mm512_permutexvar_epi64(spread, _mm512_castsi256_si512(_mm256_set_m128i(q1, q0)));
            let xu = _mm512_and_si512(_mm512_mask_srli_epi16::<4>(t, 0xFF00_FF00, t), mask);
            let i = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), xu, y));
            let s = _mm512_permutexvar_ps(_mm512_add_epi32(halves, _mm512_set1_epi32(2 * pr as i32)), d8);
            if pr % 2 == 0 {
                a0 = _mm512_fmadd_ps(s, i, a0);
            } else {
                a1 = _mm512_fmadd_ps(s, i, a1);
            }
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) - super::avx2::hsum(corr) + p.q4_0_tail(x, 8 * groups)
}
