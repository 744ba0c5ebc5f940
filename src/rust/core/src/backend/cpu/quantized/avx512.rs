//! AVX-512 (VNNI) dot products of Q8_0 weights with Q8_0 activations, two
//! blocks per 64-byte register: `vpdpbusd` sums four products of unsigned
//! by signed bytes into each i32 lane in one instruction (1.4x the AVX2
//! kernel in cache), one row a time (the fallback) or several rows a pass
//! against a column laid out in pairs of blocks (`super::prep::Q8Pairs`).
//! An odd last block goes through the AVX2 kernel (one row) or a scalar
//! sum (several). Q4_0 against a windowed Q8_0 column
//! (`super::prep::Q4Win`): three blocks per register, read as they lie,
//! several rows a pass.

#![cfg(target_arch = "x86_64")]

use super::prep::{Q4Win, Q8Pairs, WIN_BYTES};
use core::arch::x86_64::*;

// BOUNDS-FN: the callers pass o + 2 <= b.len(): q8_0's pieces of a pair of
// blocks are 68 bytes (sum_pairs, xs = ys = 34) and read at 0 and 34,
// q8_0_rows's last block is 34 bytes (`get`) and read at 0.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn h2f(b: &[u8], o: usize) -> f32 {
    let h = u16::from_le_bytes([b[o], b[o + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

/// 32 bytes of `b` at `o` (checked).
// BOUNDS-FN: the one caller, q8_0, passes o = 2 and o = 36 on 68-byte pieces
// (sum_pairs, xs = ys = 34): 36 + 32 = 68.
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

/// Asks for the cache line holding byte `at` of `x`'s allocation to be
/// fetched into the caches (the weights `ahead` bytes past the ones in use).
/// Into every level (T0): the hints that stop at L2 or L3 (T1, T2) were no
/// faster and the non-temporal one (NTA) slower (the ignored test `speed`).
#[inline(always)]
pub fn prefetch(x: &[u8], at: usize) {
    // SAFETY: a prefetch is a hint that reads nothing architecturally and
    // never faults, whatever the address (one past the weights included);
    // the pointer is formed with wrapping arithmetic and never dereferenced.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(x.as_ptr().wrapping_add(at) as *const i8) }
}

/// Sum over pairs of blocks (`xs` and `ys` bytes each) of `d * q` for
/// `(d, q) = pair(two x blocks, two y blocks)`, in two interleaved
/// accumulators so that consecutive pairs do not wait on each other; the
/// weights `ahead` bytes on are prefetched (0: none).
// BOUNDS-FN: the one caller, q8_0, checked x.len() and y.len() >= 34 nb and
// passes pairs = nb / 2, xs = ys = 34: p < pairs, so 68 (p + 1) <= 34 nb.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn sum_pairs(x: &[u8], y: &[u8], pairs: usize, xs: usize, ys: usize, ahead: usize, pair: impl Fn(&[u8], &[u8]) -> (__m512, __m512i)) -> f32 {
    let (mut a0, mut a1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for p in 0..pairs {
        if ahead > 0 {
            prefetch(x, 2 * xs * p + ahead);
            prefetch(x, 2 * xs * p + ahead + 63);
        }
        let (d, i) = pair(&x[2 * xs * p..2 * xs * (p + 1)], &y[2 * ys * p..2 * ys * (p + 1)]);
        if p % 2 == 0 {
            a0 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(i), a0);
        } else {
            a1 = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(i), a1);
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(a0, a1))
}

// BOUNDS-FN: x and y hold 34 nb bytes (checked first), so 68 pairs <= 34 nb.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q8_0(x: &[u8], y: &[u8], nb: usize, ahead: usize) -> f32 {
    // The rows' loop gives x 34 nb bytes; y is the caller's column, which
    // may be short (then Q8Pairs::new gave None and this kernel runs).
    if !nb.checked_mul(34).is_some_and(|n| x.len() >= n && y.len() >= n) {
        return f32::NAN;
    }
    let pairs = nb / 2;
    let s = sum_pairs(x, y, pairs, 34, 34, ahead, |xb, yb| {
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

/// For row `r` of a pass, the lanes of its two blocks' scales among the
/// eight converted together (lanes 2 r and 2 r + 1), eight lanes each.
const PAIR_LANES: [[i32; 16]; 4] = {
    let mut t = [[0i32; 16]; 4];
    let mut r = 0;
    while r < 4 {
        let mut l = 0;
        while l < 16 {
            // BOUNDS: r < 4 and l < 16 (the loops), t is [[i32; 16]; 4].
            t[r][l] = (2 * r + l / 8) as i32;
            l += 1;
        }
        r += 1;
    }
    t
};

/// `R` (at most 4) Q8_0 rows against a Q8_0 column laid out in pairs of
/// blocks ([`Q8Pairs`]): per pair, the column's quants and scales are
/// loaded once for all the rows, each row's 64 quants are read as two
/// 32-byte loads, and the rows' 2 R scales are converted by one
/// `vcvtph2ps` and moved to their lanes by `vpermps`. The weights are taken
/// as |x| (unsigned) times y with x's sign, which is exact for every byte
/// (|-128| = 128 unsigned; the activations never hold -128).
// BOUNDS-FN: x, lanes, acc and out are arrays of R and r < R; R <= 4 (checked
// first) for the [u32; 4] `h` and PAIR_LANES ([[i32; 16]; 4]); `b` of the
// last block is 34 bytes (`get`), so b[2..] is its 32 quants.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q8_0_rows<const R: usize>(x: [&[u8]; R], p: &Q8Pairs, ahead: usize) -> [f32; R] {
    if R > 4 || !x.iter().all(|r| p.fits(r)) {
        return [f32::NAN; R];
    }
    // SAFETY: PAIR_LANES rows are 64 bytes; R <= 4 (checked above).
    let lanes: [__m512i; R] = std::array::from_fn(|r| unsafe { _mm512_loadu_si512(PAIR_LANES[r].as_ptr() as *const _) });
    let zero = _mm512_setzero_si512();
    let mut acc = [_mm512_setzero_ps(); R];
    for (q, (yq, dq)) in p.y.iter().zip(&p.d).enumerate() {
        let o = 68 * q;
        if ahead > 0 {
            for r in x {
                prefetch(r, o + ahead);
                prefetch(r, o + ahead + 63);
            }
        }
        // SAFETY: yq and dq are 64 bytes each.
        let (y, dy) = unsafe { (_mm512_loadu_si512(yq.as_ptr() as *const _), _mm512_loadu_ps(dq.as_ptr())) };
        let mut h = [0u32; 4];
        for r in 0..R {
            // SAFETY: bytes o .. o + 68 of x[r] lie in its first 34 nb
            // bytes (q < nb / 2; p.fits): the two blocks' scales at o and
            // o + 34 are read unaligned.
            let (s0, s1) = unsafe {
                let b = x[r].as_ptr().add(o);
                ((b as *const u16).read_unaligned(), (b.add(34) as *const u16).read_unaligned())
            };
            h[r] = u32::from(u16::from_le(s0)) | (u32::from(u16::from_le(s1)) << 16);
        }
        let dx = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_set_epi32(h[3] as i32, h[2] as i32, h[1] as i32, h[0] as i32)));
        for r in 0..R {
            // SAFETY: as above, bytes o + 2 .. o + 34 and o + 36 .. o + 68 lie in x[r].
            let qx = unsafe {
                let b = x[r].as_ptr().add(o);
                join(_mm256_loadu_si256(b.add(2) as *const __m256i), _mm256_loadu_si256(b.add(36) as *const __m256i))
            };
            let sy = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(qx), zero, y);
            let i = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(qx), sy);
            let d = _mm512_mul_ps(_mm512_permutexvar_ps(lanes[r], dx), dy);
            acc[r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(i), acc[r]);
        }
    }
    let mut out = acc.map(|a| _mm512_reduce_add_ps(a));
    if let Some((dy, yq)) = &p.last {
        let o = 34 * (p.nb - 1);
        for (r, s) in out.iter_mut().enumerate() {
            let Some(b) = x[r].get(o..o + 34) else { return [f32::NAN; R] };
            let dx = h2f(b, 0);
            let i: i32 = b[2..].iter().zip(yq).map(|(&w, &a)| i32::from(w as i8) * i32::from(a)).sum();
            *s += dx * dy * i as f32;
        }
    }
    out
}

/// The word of a window that holds the scale of each 4-byte lane's block
/// (words 0, 9 and 18: bytes 0, 18 and 36), for `vpermw`; lanes 14 and 15
/// (past the third block) are masked off.
const DX_WORDS: [i16; 32] = [0, 0, 0, 0, 0, 9, 9, 9, 9, 18, 18, 18, 18, 18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// One window of a Q4_0 row (`v`, the 64 bytes from the window's start)
/// against window `w` of the column, added to `acc`: per lane
/// `dx * (dy * i - c)`, with `i` the lane's integer sum.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn q4_0_window(v: __m512i, p: &Q4Win, w: usize, idx: __m512i, acc: __m512) -> __m512 {
    let mask = _mm512_set1_epi8(0x0F);
    // SAFETY: w < p.lo.len() == p.hi.len() == p.d.len() == p.c.len() (the
    // callers' loops and p.fits); each entry is 64 bytes.
    let (yl, yh, dy, c) = unsafe {
        (
            _mm512_loadu_si512(p.lo.as_ptr().add(w) as *const _),
            _mm512_loadu_si512(p.hi.as_ptr().add(w) as *const _),
            _mm512_loadu_ps(p.d.as_ptr().add(w) as *const f32),
            _mm512_loadu_ps(p.c.as_ptr().add(w) as *const f32),
        )
    };
    let lo = _mm512_and_si512(v, mask);
    let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask);
    let i = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, yl), hi, yh);
    let dx = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_maskz_permutexvar_epi16(0x3FFF, idx, v)));
    _mm512_fmadd_ps(dx, _mm512_fmsub_ps(_mm512_cvtepi32_ps(i), dy, c), acc)
}

/// `R` Q4_0 rows against a windowed Q8_0 column ([`Q4Win`]), the rows
/// sharing each window of activations loaded: per row and window one
/// 64-byte load of the row as it lies in memory, its nibbles masked, two
/// `vpdpbusd`, the weights' scales moved to their blocks' lanes by one
/// `vpermw` and converted together. The windows near the row's end are
/// read with masked loads (nothing past the row).
// BOUNDS-FN: x and acc are arrays of R, indexed by r < R.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q4_0_rows<const R: usize>(x: [&[u8]; R], p: &Q4Win, ahead: usize) -> [f32; R] {
    if !x.iter().all(|r| p.fits(r)) {
        return [f32::NAN; R];
    }
    let len = 18 * p.nb;
    let wins = p.lo.len();
    // windows whose 64 bytes all lie inside the row
    let full = if len >= 64 { ((len - 64) / WIN_BYTES + 1).min(wins) } else { 0 };
    // SAFETY: DX_WORDS is 64 bytes.
    let idx = unsafe { _mm512_loadu_si512(DX_WORDS.as_ptr() as *const _) };
    let mut acc = [_mm512_setzero_ps(); R];
    for w in 0..full {
        if ahead > 0 {
            for r in x {
                prefetch(r, WIN_BYTES * w + ahead);
            }
        }
        for r in 0..R {
            // SAFETY: 54 w + 64 <= len <= x[r].len() (w < full; p.fits).
            let v = unsafe { _mm512_loadu_si512(x[r].as_ptr().add(WIN_BYTES * w) as *const _) };
            acc[r] = q4_0_window(v, p, w, idx, acc[r]);
        }
    }
    for w in full..wins {
        // 0 < len - 54 w < 64: w < wins = ceil(nb / 3), and the window is not full
        let n = len - WIN_BYTES * w;
        let k: __mmask64 = (1u64 << n) - 1;
        for r in 0..R {
            // SAFETY: only the n bytes from 54 w, which lie inside x[r]
            // (p.fits), are read: masked-off bytes are not accessed.
            let v = unsafe { _mm512_maskz_loadu_epi8(k, x[r].as_ptr().add(WIN_BYTES * w) as *const i8) };
            acc[r] = q4_0_window(v, p, w, idx, acc[r]);
        }
    }
    acc.map(|a| _mm512_reduce_add_ps(a))
}
