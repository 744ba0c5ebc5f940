//! K-quants of 2 and 3 bits: Q2_K and Q3_K (256-value super-blocks of 16
//! sub-blocks of 16 values).
//!
//! Q2_K: `scales[16] qs[64] d dmin` (scale low nibble, min high nibble; value
//! `l` of sub-block `j` is `d*sc*l - dmin*m`). Q3_K: `hmask[32] qs[64]
//! scales[12] d` (6-bit signed scales: low nibbles in bytes 0..8, high bit
//! pairs in bytes 8..12; the high bit of a value is set in `hmask` when the
//! value is >= 0). Two-bit values are packed four per byte: byte `l` of a
//! 128-value half holds values `l, l+32, l+64, l+96`.

use super::util::{
    blocks, blocks_mut, field, imatrix_weights, make_q3_quants, make_qkx_quants, make_qp_quants, make_qx_quants, nearest_int, put, rd_f16, sum_sq, via_f16,
    wr_f16, Rmse, Search,
};
use super::types::QK_K;

const Q2_SIZE: usize = 84;
const Q3_SIZE: usize = 110;

/// Two-bit values `l[0..256]` as their 64 bytes.
// BOUNDS-FN: `l` has 256 entries and `qs` 64; j is 0 or 128 and i < 32, so
// j / 4 + i < 64 and j + i + 96 < 256.
fn pack_2bit(l: &[u8; QK_K]) -> [u8; 64] {
    let mut qs = [0u8; 64];
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] = l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
    qs
}

/// Values of sub-block `j` requantized with its stored scale and min.
// BOUNDS-FN: `x` and `l` have 256 entries and `scales` 16; j, ii < 16, so
// 16 * j + ii < 256.
fn requant_q2(x: &[f32; QK_K], l: &mut [u8; QK_K], scales: &[u8; 16], d_all: f32, m_all: f32) {
    for j in 0..16 {
        let d = d_all * (scales[j] & 0xF) as f32;
        if d == 0.0 {
            continue;
        }
        let m = m_all * (scales[j] >> 4) as f32;
        for ii in 0..16 {
            l[16 * j + ii] = nearest_int((x[16 * j + ii] + m) / d).clamp(0, 3) as u8;
        }
    }
}

// BOUNDS-FN: `xb` and `l` have 256 entries, `scales`, `mins` and `sc` 16, and
// j < 16, so 16 * j + 16 <= 256.
pub fn q2_k_ref(x: &[f32], y: &mut [u8]) {
    let search = Search { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: true };
    let (mut l, mut laux) = ([0u8; QK_K], [0u8; 16]);
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<Q2_SIZE, _>(y)) {
        let (mut scales, mut mins) = ([0f32; 16], [0f32; 16]);
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..16 {
            let xs = &xb[16 * j..16 * j + 16];
            let w: Vec<f32> = xs.iter().map(|v| v.abs()).collect();
            let (s, m) = make_qkx_quants(3, xs, Some(&w), &mut l[16 * j..16 * j + 16], &mut laux, search, false);
            scales[j] = s;
            mins[j] = m;
            if s > max_scale {
                max_scale = s;
            }
            if m > max_min {
                max_min = m;
            }
        }
        let mut sc = [0u8; 16];
        if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for j in 0..16 {
                sc[j] = nearest_int(iscale * scales[j]) as u8;
            }
            wr_f16(yb, 80, max_scale / 15.0);
        } else {
            wr_f16(yb, 80, 0.0);
        }
        if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for j in 0..16 {
                sc[j] |= (nearest_int(iscale * mins[j]) << 4) as u8;
            }
            wr_f16(yb, 82, max_min / 15.0);
        } else {
            wr_f16(yb, 82, 0.0);
        }
        put(yb, 0, sc);
        requant_q2(xb, &mut l, &sc, rd_f16(yb, 80), rd_f16(yb, 82));
        put(yb, 16, pack_2bit(&l));
    }
}

// BOUNDS-FN: `xb`, `qb` and `l` have 256 entries, `scales`, `mins`, `sw`, `ls`,
// `lm` and `sc` 16, and j < 16, so 16 * j + 16 <= 256.
pub fn q2_k_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let search = Search { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false };
    let (mut l, mut laux) = ([0u8; QK_K], [0u8; 16]);
    let (mut ls, mut lm) = ([0u8; 16], [0u8; 16]);
    for ((xb, qb), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<Q2_SIZE, _>(y)) {
        let sumx2 = sum_sq(xb);
        let sigma2 = sumx2 / QK_K as f32;
        let (mut scales, mut mins, mut sw) = ([0f32; 16], [0f32; 16], [0f32; 16]);
        for j in 0..16 {
            let xs = &xb[16 * j..16 * j + 16];
            let (w, sumw) = imatrix_weights(xs, &qb[16 * j..16 * j + 16], sigma2);
            sw[j] = sumw;
            let (s, m) = make_qkx_quants(3, xs, Some(&w), &mut l[16 * j..16 * j + 16], &mut laux, search, true);
            scales[j] = s;
            mins[j] = m;
        }
        let dm = make_qp_quants(15, &scales, &mut ls, &sw);
        let mm = make_qp_quants(15, &mins, &mut lm, &sw);
        wr_f16(yb, 80, dm);
        wr_f16(yb, 82, mm);
        let sc: [u8; 16] = std::array::from_fn(|j| ls[j] | (lm[j] << 4));
        put(yb, 0, sc);
        requant_q2(xb, &mut l, &sc, via_f16(dm), via_f16(mm));
        put(yb, 16, pack_2bit(&l));
    }
}

// BOUNDS-FN: `b` is [u8; 84] and `yb` [f32; 256]; n < 2, so 16 + 32 * n + 32 <= 80,
// and `q` has 32 bytes with i + 16 * half < 32; `is` counts 2 * 4 * 2 = 16 scales
// and `o` 16 * 16 = 256 values.
pub fn q2_k_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<Q2_SIZE, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let (d, min) = (rd_f16(b, 80), rd_f16(b, 82));
        let mut o = 0;
        let mut is = 0;
        for n in 0..2 {
            let q = &b[16 + 32 * n..16 + 32 * n + 32];
            for shift in [0, 2, 4, 6] {
                for half in 0..2 {
                    let sc = b[is];
                    is += 1;
                    let (dl, ml) = (d * (sc & 0xF) as f32, min * (sc >> 4) as f32);
                    for i in 0..16 {
                        yb[o] = dl * ((q[i + 16 * half] >> shift) & 3) as f32 - ml;
                        o += 1;
                    }
                }
            }
        }
    }
}

/// Signed 6-bit scales of a Q3_K block, `l + 32` each, as its 12 bytes.
// BOUNDS-FN: `ls` is [i32; 16] and `s` [u8; 12]; j < 16, so j - 8 < 8 where
// j >= 8 and j % 4 + 8 < 12.
fn pack_q3_scales(ls: &[i32; 16]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..16 {
        let l = ls[j];
        if j < 8 {
            s[j] = (l & 0xF) as u8;
        } else {
            s[j - 8] |= ((l & 0xF) << 4) as u8;
        }
        s[j % 4 + 8] |= ((l >> 4) << (2 * (j / 4))) as u8;
    }
    s
}

/// The 16 scales (-32..31) of a Q3_K block's 12 scale bytes.
// BOUNDS-FN: `s` is [u8; 12] and j < 16, so j - 8 < 8 where j >= 8 and 8 + j % 4 < 12.
fn q3_scales(s: &[u8; 12]) -> [i32; 16] {
    std::array::from_fn(|j| {
        let lo = if j < 8 { s[j] & 0xF } else { s[j - 8] >> 4 };
        (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i32 - 32
    })
}

/// Requantize with the stored scales, split off the high bits into `hmask`
/// and pack the rest.
// BOUNDS-FN: `xb` and `l` have 256 entries, j, ii < 16, so 16 * j + ii < 256;
// `hmask` is the first 32 bytes of the block and m < QK_K / 8 = 32.
fn finish_q3(xb: &[f32; QK_K], l: &mut [i8; QK_K], yb: &mut [u8; Q3_SIZE]) {
    let d_all = rd_f16(yb, 108);
    for (j, &sc) in q3_scales(&field(yb, 96)).iter().enumerate() {
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(xb[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
        }
    }
    let hmask = &mut yb[..32];
    hmask.fill(0);
    let (mut m, mut hm) = (0usize, 1u8);
    for v in l.iter_mut() {
        if *v > 3 {
            hmask[m] |= hm;
            *v -= 4;
        }
        m += 1;
        if m == QK_K / 8 {
            m = 0;
            hm = hm.wrapping_shl(1);
        }
    }
    put(yb, 32, pack_2bit(&l.map(|v| v as u8)));
}

// BOUNDS-FN: `xb` and `l` have 256 entries, `scales` and `ls` 16, and j < 16,
// so 16 * j + 16 <= 256.
pub fn q3_k_ref(x: &[f32], y: &mut [u8]) {
    let mut l = [0i8; QK_K];
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<Q3_SIZE, _>(y)) {
        let mut scales = [0f32; 16];
        let (mut max_scale, mut amax) = (0f32, 0f32);
        for j in 0..16 {
            scales[j] = make_q3_quants(4, &xb[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16], true);
            let s = scales[j].abs();
            if s > amax {
                amax = s;
                max_scale = scales[j];
            }
        }
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            let mut ls = [0i32; 16];
            for j in 0..16 {
                let v = nearest_int(iscale * scales[j]) as i8 as i32;
                ls[j] = v.min(31).max(-32) + 32;
            }
            put(yb, 96, pack_q3_scales(&ls));
            wr_f16(yb, 108, 1.0 / iscale);
        } else {
            put(yb, 96, [0u8; 12]);
            wr_f16(yb, 108, 0.0);
        }
        finish_q3(xb, &mut l, yb);
    }
}

// BOUNDS-FN: `xb`, `qb` and `l` have 256 entries, `scales`, `sw` and `ls8` 16,
// and j < 16, so 16 * j + 16 <= 256.
pub fn q3_k_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let mut l = [0i8; QK_K];
    let mut ls8 = [0i8; 16];
    for ((xb, qb), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<Q3_SIZE, _>(y)) {
        let sumx2 = sum_sq(xb);
        let sigma2 = 2.0 * sumx2 / QK_K as f32;
        let (mut scales, mut sw) = ([0f32; 16], [0f32; 16]);
        for j in 0..16 {
            let xs = &xb[16 * j..16 * j + 16];
            let (w, sumw) = imatrix_weights(xs, &qb[16 * j..16 * j + 16], sigma2);
            sw[j] = sumw;
            scales[j] = make_qx_quants(4, xs, &mut l[16 * j..16 * j + 16], Rmse::Squares, Some(&w));
        }
        let d_block = make_qx_quants(32, &scales, &mut ls8, Rmse::Squares, Some(&sw));
        let ls: [i32; 16] = ls8.map(|v| v as i32);
        put(yb, 96, pack_q3_scales(&ls));
        wr_f16(yb, 108, d_block);
        finish_q3(xb, &mut l, yb);
    }
}

// BOUNDS-FN: `b` is [u8; 110] and `yb` [f32; 256]; n < 2, so 64 + 32 * n <= 96;
// `hm` and `q` have 32 bytes and k = i + 16 * half < 32; `is` counts
// 2 * 4 * 2 = 16 scales and `o` 16 * 16 = 256 values.
pub fn q3_k_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<Q3_SIZE, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d_all = rd_f16(b, 108);
        let scales = q3_scales(&field(b, 96));
        let hm = &b[0..32];
        let mut m = 1u8;
        let (mut o, mut is) = (0, 0);
        for n in 0..2 {
            let q = &b[32 + 32 * n..64 + 32 * n];
            for shift in [0, 2, 4, 6] {
                for half in 0..2 {
                    let dl = d_all * scales[is] as f32;
                    is += 1;
                    for i in 0..16 {
                        let k = i + 16 * half;
                        let hi = if hm[k] & m != 0 { 0 } else { 4 };
                        yb[o] = dl * (((q[k] >> shift) & 3) as i32 - hi) as f32;
                        o += 1;
                    }
                }
                m = m.wrapping_shl(1);
            }
        }
    }
}
