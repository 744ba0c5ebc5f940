//! AVX-512 (VNNI) dot products of Q8_0 weights with Q8_0 activations, two
//! blocks per 64-byte register: `vpdpbusd` sums four products of unsigned
//! by signed bytes into each i32 lane in one instruction (1.4x the AVX2
//! kernel in cache). An odd last block goes through the AVX2 kernel. A Q4_0
//! kernel built the same way (unsigned nibbles, eight times the activations'
//! sum taken off) measured 10% slower than AVX2's, so Q4_0 stays on AVX2.

#![cfg(target_arch = "x86_64")]

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
