//! AVX-512 (BW, VNNI) dot products of Q4_K weights with a Q8_K column laid
//! out for them ([`Q8KWin`]), several rows a pass sharing each loaded block
//! of activations. Per row and block: the twelve bytes of 6-bit scales and
//! mins unpacked four at a time in general registers, the 128 bytes of
//! nibbles read as two 64-byte registers and masked, `maddubs` of the
//! nibbles by the activations (pairs summed to i16) and `vpdpwssd` of those
//! by each sub-block's scale (spread to its words by one in-lane shuffle)
//! into one i32 accumulator; the mins' term from the column's sub-block sums.

#![cfg(target_arch = "x86_64")]

use super::prep::Q8KWin;
use core::arch::x86_64::*;

/// `pshufb` indices that spread scale `a` over the words of 128-bit lanes
/// 0 and 1 and scale `b` over lanes 2 and 3 (high bytes zeroed).
// BOUNDS-FN: i < 32, so 2 i < 64 inside the [u8; 64] `v`.
const fn spread(a: u8, b: u8) -> [u8; 64] {
    let mut v = [0x80u8; 64];
    let mut i = 0;
    while i < 32 {
        v[2 * i] = if i < 16 { a } else { b };
        i += 1;
    }
    v
}

/// The scales of the four nibble registers: A low (sub-blocks 0, 2), A high
/// (1, 3), B low (4, 6), B high (5, 7).
const SPREAD: [[u8; 64]; 4] = [spread(0, 2), spread(1, 3), spread(4, 6), spread(5, 7)];

/// The eight 6-bit scales and the eight mins of a Q4_K block from its
/// twelve bytes `s`, one byte each, four at a time: scales and mins 0..3
/// are the low six bits of bytes 0..3 and 4..7; 4..7 take their low four
/// bits from the nibbles of bytes 8..11 and their top two from the top two
/// bits of bytes 0..3 (scales) and 4..7 (mins).
// BOUNDS-FN: `s` is [u8; 12] and w takes i < 3: 4 i + 3 <= 11.
#[inline(always)]
pub fn k4_scales(s: &[u8; 12]) -> (u64, u64) {
    let w = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (a, b, c) = (w(0), w(1), w(2));
    let (six, four, two) = (0x3F3F_3F3Fu32, 0x0F0F_0F0Fu32, 0x0303_0303u32);
    let sc_hi = (c & four) | ((a >> 6) & two) << 4;
    let m_hi = ((c >> 4) & four) | ((b >> 6) & two) << 4;
    (u64::from(a & six) | u64::from(sc_hi) << 32, u64::from(b & six) | u64::from(m_hi) << 32)
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn hsum128(v: __m128) -> f32 {
    let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// The integer sum of one Q4_K block `xb` (144 bytes) against a column
/// block's activations `ys`, each sub-block's products times its scale
/// (`s4`: the block's scales in every 128-bit lane, spread by `idx`), in
/// 16 i32 lanes.
// BOUNDS-FN: nib, ys and idx are arrays of 4, indexed by h < 4.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn block_sum(xb: &[u8], ys: &[__m512i; 4], idx: &[__m512i; 4], s4: __m512i) -> __m512i {
    let mask = _mm512_set1_epi8(0x0F);
    let xb: &[u8; 144] = match xb.try_into() {
        Ok(b) => b,
        Err(_) => return _mm512_setzero_si512(),
    };
    // SAFETY: bytes 16..80 and 80..144 lie inside xb (144 bytes).
    let (qa, qb) = unsafe { (_mm512_loadu_si512(xb.as_ptr().add(16) as *const _), _mm512_loadu_si512(xb.as_ptr().add(80) as *const _)) };
    let nib = [
        _mm512_and_si512(qa, mask),
        _mm512_and_si512(_mm512_srli_epi16::<4>(qa), mask),
        _mm512_and_si512(qb, mask),
        _mm512_and_si512(_mm512_srli_epi16::<4>(qb), mask),
    ];
    let mut s = _mm512_setzero_si512();
    for h in 0..4 {
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(nib[h], ys[h]), _mm512_shuffle_epi8(s4, idx[h]));
    }
    s
}

/// `R` Q4_K rows against the column `p`.
// BOUNDS-FN: x, acc and accm are arrays of R, r < R; p.fits(x[r]) (checked
// first) gives x[r].len() >= 144 p.blocks.len() and b < p.blocks.len(), so
// x[r][144 b..144 b + 144] is in x[r]; xb is those 144 bytes (4..16, 0..4).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q4_k_rows<const R: usize>(x: [&[u8]; R], p: &Q8KWin) -> [f32; R] {
    if !x.iter().all(|r| p.fits(r)) {
        return [f32::NAN; R];
    }
    // SAFETY: each SPREAD entry is 64 bytes.
    let idx = SPREAD.map(|s| unsafe { _mm512_loadu_si512(s.as_ptr() as *const _) });
    let (mut acc, mut accm) = ([_mm512_setzero_ps(); R], [_mm_setzero_ps(); R]);
    for (b, yb) in p.blocks.iter().enumerate() {
        // SAFETY: each row of yb.y is 64 bytes, msum 16.
        let (ys, msum) = unsafe { (yb.y.map(|v| _mm512_loadu_si512(v.as_ptr() as *const _)), _mm_loadu_si128(yb.msum.as_ptr() as *const _)) };
        let dy = _mm_set1_ps(yb.d);
        for r in 0..R {
            let xb = &x[r][144 * b..144 * b + 144];
            let (sc, m) = k4_scales(xb[4..16].try_into().unwrap_or(&[0; 12]));
            let sv = _mm_set_epi64x(m as i64, sc as i64);
            let s4 = _mm512_broadcast_i32x4(sv);
            let s = block_sum(xb, &ys, &idx, s4);
            // [d * dy, dmin * dy, 0, 0]
            let dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from_le_bytes([xb[0], xb[1], xb[2], xb[3]]))), dy);
            acc[r] = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(s), acc[r]);
            let mi = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128::<8>(sv)), msum);
            accm[r] = _mm_fmadd_ps(_mm_shuffle_ps::<0x55>(dd, dd), _mm_cvtepi32_ps(mi), accm[r]);
        }
    }
    std::array::from_fn(|r| _mm512_reduce_add_ps(acc[r]) - hsum128(accm[r]))
}

/// The scales and mins of one block of four rows, unpacked together from
/// `h`, whose 128-bit lane r holds the first 16 bytes of row r's block
/// (dwords: the f16 pair d, dmin, then the twelve bytes of scales as
/// dwords a, b, c): lane r of the result holds row r's eight scales then
/// its eight mins, one byte each (as [`k4_scales`] computes them).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
fn k4_scales4(h: __m512i) -> __m512i {
    let (six, four, two) = (0x3F3F_3F3F, 0x0F0F_0F0F, 0x0303_0303);
    // dwords [a, c, b, c >> 4], masked: [scales 0..3, low bits of scales
    // 4..7, mins 0..3, low bits of mins 4..7]
    let t = _mm512_srlv_epi32(_mm512_shuffle_epi32::<0b11_10_11_01>(h), _mm512_set4_epi32(4, 0, 0, 0));
    let lo = _mm512_and_si512(t, _mm512_set4_epi32(four, six, four, six));
    // the top two bits of a (for scales 4..7) and b (mins 4..7)
    let top = _mm512_srli_epi32::<6>(_mm512_shuffle_epi32::<0b10_10_01_01>(h));
    let hi = _mm512_slli_epi32::<4>(_mm512_and_si512(top, _mm512_set4_epi32(two, 0, two, 0)));
    _mm512_or_si512(lo, hi)
}

/// Four Q4_K rows against the column `p`, their scales, mins and block
/// scales unpacked and converted together (one register for the four).
// BOUNDS-FN: x, xb, acc and mins are arrays of 4, indexed by r < 4 and the
// literals 0..3; p.fits(r) (checked first) gives r.len() >= 144
// p.blocks.len() and b < p.blocks.len(), so r[144 b..144 b + 144] is in r.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma,f16c")]
pub fn q4_k_rows4(x: [&[u8]; 4], p: &Q8KWin, ahead: usize) -> [f32; 4] {
    if !x.iter().all(|r| p.fits(r)) {
        return [f32::NAN; 4];
    }
    // SAFETY: each SPREAD entry is 64 bytes.
    let idx = SPREAD.map(|s| unsafe { _mm512_loadu_si512(s.as_ptr() as *const _) });
    // dword 0 of each lane (the rows' f16 pairs), and the lanes of each row's dmin
    let pairs = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    let dmins = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
    let (mut acc, mut accm) = ([_mm512_setzero_ps(); 4], _mm512_setzero_ps());
    for (b, yb) in p.blocks.iter().enumerate() {
        if ahead > 0 {
            for r in x {
                for l in [0, 64, 128] {
                    super::avx512::prefetch(r, 144 * b + ahead + l);
                }
            }
        }
        let xb = x.map(|r| &r[144 * b..144 * b + 144]);
        // SAFETY: each row of yb.y is 64 bytes, msum 16; each xb is 144
        // bytes, so its first 16 and bytes 16..144 are inside it.
        let (ys, msum, h) = unsafe {
            let head = |r: usize| _mm_loadu_si128(xb[r].as_ptr() as *const __m128i);
            let h = _mm512_inserti32x4::<3>(
                _mm512_inserti32x4::<2>(_mm512_inserti32x4::<1>(_mm512_castsi128_si512(head(0)), head(1)), head(2)),
                head(3),
            );
            (yb.y.map(|v| _mm512_loadu_si512(v.as_ptr() as *const _)), _mm_loadu_si128(yb.msum.as_ptr() as *const _), h)
        };
        let sv = k4_scales4(h);
        // [d0, dmin0, d1, dmin1, ...] * dy
        let dd = _mm512_castps256_ps512(_mm256_mul_ps(
            _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(pairs, h))),
            _mm256_set1_ps(yb.d),
        ));
        // the mins of the four rows against the column's sub-block sums
        let mi = _mm512_madd_epi16(_mm512_unpackhi_epi8(sv, _mm512_setzero_si512()), _mm512_broadcast_i32x4(msum));
        accm = _mm512_fmadd_ps(_mm512_permutexvar_ps(dmins, dd), _mm512_cvtepi32_ps(mi), accm);
        macro_rules! row {
            ($r:literal) => {{
                let s4 = _mm512_shuffle_i32x4::<{ $r * 0x55 }>(sv, sv);
                let s = block_sum(xb[$r], &ys, &idx, s4);
                let d = _mm512_permutexvar_ps(_mm512_set1_epi32(2 * $r), dd);
                acc[$r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(s), acc[$r]);
            }};
        }
        row!(0);
        row!(1);
        row!(2);
        row!(3);
    }
    let mins = [
        hsum128(_mm512_extractf32x4_ps::<0>(accm)),
        hsum128(_mm512_extractf32x4_ps::<1>(accm)),
        hsum128(_mm512_extractf32x4_ps::<2>(accm)),
        hsum128(_mm512_extractf32x4_ps::<3>(accm)),
    ];
    std::array::from_fn(|r| _mm512_reduce_add_ps(acc[r]) - mins[r])
}
