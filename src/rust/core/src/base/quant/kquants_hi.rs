//! K-quants of 4, 5, 6 and 8 bits: Q4_K, Q5_K (8 sub-blocks of 32 values,
//! 6-bit scales and mins), Q6_K (16 sub-blocks of 16, 8-bit scales) and Q8_K
//! (the activation format of the K-quant dot products).
//!
//! Q4_K: `d dmin scales[12] qs[128]`; Q5_K: `d dmin scales[12] qh[32]
//! qs[128]`; Q6_K: `ql[128] qh[64] scales[16] d`; Q8_K: `d (f32) qs[256]
//! bsums[16] (i16)`. In Q4_K/Q5_K byte `l` of each 32-byte group holds value
//! `l` of an even sub-block (low nibble) and of the next one (high nibble).

use super::util::{
    blocks, blocks_mut, field, imatrix_weights, make_qkx_quants, make_qp_quants, make_qx_quants, nearest_int, put, rd_f16, scales_mins_k4, signed_absmax,
    sum_sq, weight_blocks, wr_f16, Rmse, Search, GROUP_MAX_EPS,
};
use super::types::QK_K;

const Q4_SIZE: usize = 144;
const Q5_SIZE: usize = 176;
const Q6_SIZE: usize = 210;
const Q8_SIZE: usize = 292;

/// Eight 6-bit (scale, min) pairs as their 12 bytes.
// BOUNDS-FN: `ls`, `lm` are [u8; 8] and `s` [u8; 12]; j < 8, so j + 4 < 12 and
// j - 4 >= 0 where j >= 4.
fn pack_scales_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..8 {
        let (a, b) = (ls[j], lm[j]);
        if j < 4 {
            s[j] = a;
            s[j + 4] = b;
        } else {
            s[j + 4] = (a & 0xF) | ((b & 0xF) << 4);
            s[j - 4] |= (a >> 4) << 6;
            s[j] |= (b >> 4) << 6;
        }
    }
    s
}

/// The scale and min searches of Q4_K / Q5_K without an importance matrix:
/// per sub-block (scale, min), stored as 6-bit fractions of the largest in
/// the first 16 bytes of `yb`.
// BOUNDS-FN: `xb` and `l` have QK_K = 256 entries and j < 8, so 32 * j + 32 <= 256;
// `scales` and `mins` are [f32; 8].
fn ref_scales(xb: &[f32; QK_K], nmax: i32, search: Search, l: &mut [u8; QK_K], yb: &mut [u8]) {
    let mut laux = [0u8; 32];
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        let xs = &xb[32 * j..32 * j + 32];
        let av_x = (sum_sq(xs) / 32.0).sqrt();
        let w: Vec<f32> = xs.iter().map(|v| av_x + v.abs()).collect();
        let (s, m) = make_qkx_quants(nmax, xs, Some(&w), &mut l[32 * j..32 * j + 32], &mut laux, search, false);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let ls: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_scale * scales[j]) as u8).min(63));
    let lm: [u8; 8] = std::array::from_fn(|j| (nearest_int(inv_min * mins[j]) as u8).min(63));
    put(yb, 4, pack_scales_k4(&ls, &lm));
    wr_f16(yb, 0, max_scale / 63.0);
    wr_f16(yb, 2, max_min / 63.0);
}

/// The same with an importance matrix: weighted searches, then the scales
/// and mins quantized together by `make_qp_quants`.
// BOUNDS-FN: `xb`, `qb` and `l` have QK_K = 256 entries and j < 8, so
// 32 * j + 32 <= 256; `sw` is [f32; 8].
fn weighted_scales(xb: &[f32; QK_K], qb: &[f32; QK_K], nmax: i32, l: &mut [u8; QK_K], yb: &mut [u8]) {
    let search = Search { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false };
    let mut laux = [0u8; 32];
    let sum_x2 = sum_sq(xb);
    let sigma2 = 2.0 * sum_x2 / QK_K as f32;
    let (mut scales, mut mins, mut sw) = ([0f32; 8], [0f32; 8], [0f32; 8]);
    for j in 0..8 {
        let xs = &xb[32 * j..32 * j + 32];
        let (w, sumw) = imatrix_weights(xs, &qb[32 * j..32 * j + 32], sigma2);
        sw[j] = sumw;
        let (s, m) = make_qkx_quants(nmax, xs, Some(&w), &mut l[32 * j..32 * j + 32], &mut laux, search, true);
        scales[j] = s;
        mins[j] = m;
    }
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    let d_block = make_qp_quants(63, &scales, &mut ls, &sw);
    let m_block = make_qp_quants(63, &mins, &mut lm, &sw);
    put(yb, 4, pack_scales_k4(&ls, &lm));
    wr_f16(yb, 0, d_block);
    wr_f16(yb, 2, m_block);
}

/// Values requantized with the stored 6-bit scales and mins (the first 16
/// bytes of `yb`).
// BOUNDS-FN: `xb` and `l` have QK_K = 256 entries, j < 8 and ii < 32, so
// 32 * j + ii < 256.
fn requant_k4(xb: &[f32; QK_K], nmax: i32, l: &mut [u8; QK_K], yb: &[u8]) {
    let (d_all, m_all) = (rd_f16(yb, 0), rd_f16(yb, 2));
    for (j, &(sc, m)) in scales_mins_k4(&field(yb, 4)).iter().enumerate() {
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = m_all * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((xb[32 * j + ii] + dm) / d).clamp(0, nmax) as u8;
        }
    }
}

/// The 128 `qs` bytes of Q4_K.
// BOUNDS-FN: `l` has 256 entries and `qs` 128; g < 4, j = 64 * g and i < 32, so
// 32 * g + i < 128 and j + i + 32 < 256.
fn pack_q4(l: &[u8; QK_K]) -> [u8; 128] {
    let mut qs = [0u8; 128];
    for (g, j) in (0..QK_K).step_by(64).enumerate() {
        for i in 0..32 {
            qs[32 * g + i] = l[j + i] | (l[j + i + 32] << 4);
        }
    }
    qs
}

/// The 32 `qh` and 128 `ql` bytes of Q5_K.
// BOUNDS-FN: `l` has 256 entries, `qh` 32 and `ql` 128; g < 4, n = 64 * g and
// j < 32, so 32 * g + j < 128 and n + j + 32 < 256.
fn pack_q5(l: &[u8; QK_K]) -> ([u8; 32], [u8; 128]) {
    let (mut qh, mut ql) = ([0u8; 32], [0u8; 128]);
    let (mut m1, mut m2) = (1u8, 2u8);
    for (g, n) in (0..QK_K).step_by(64).enumerate() {
        for j in 0..32 {
            let mut l1 = l[n + j];
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= m1;
            }
            let mut l2 = l[n + j + 32];
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[32 * g + j] = l1 | (l2 << 4);
        }
        m1 = m1.wrapping_shl(2);
        m2 = m2.wrapping_shl(2);
    }
    (qh, ql)
}

fn q4_search() -> Search {
    Search { rmin: -1.0, rdelta: 0.1, nstep: 20, use_mad: false }
}

pub fn q4_k_ref(x: &[f32], y: &mut [u8]) {
    let mut l = [0u8; QK_K];
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<Q4_SIZE, _>(y)) {
        ref_scales(xb, 15, q4_search(), &mut l, yb);
        requant_k4(xb, 15, &mut l, yb);
        put(yb, 16, pack_q4(&l));
    }
}

pub fn q4_k_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let mut l = [0u8; QK_K];
    for ((xb, qb), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<Q4_SIZE, _>(y)) {
        weighted_scales(xb, qb, 15, &mut l, yb);
        requant_k4(xb, 15, &mut l, yb);
        put(yb, 16, pack_q4(&l));
    }
}

pub fn q5_k_ref(x: &[f32], y: &mut [u8]) {
    let search = Search { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: false };
    let mut l = [0u8; QK_K];
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<Q5_SIZE, _>(y)) {
        ref_scales(xb, 31, search, &mut l, yb);
        requant_k4(xb, 31, &mut l, yb);
        let (qh, ql) = pack_q5(&l);
        put(yb, 16, qh);
        put(yb, 48, ql);
    }
}

pub fn q5_k_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let mut l = [0u8; QK_K];
    for ((xb, qb), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<Q5_SIZE, _>(y)) {
        weighted_scales(xb, qb, 31, &mut l, yb);
        requant_k4(xb, 31, &mut l, yb);
        let (qh, ql) = pack_q5(&l);
        put(yb, 16, qh);
        put(yb, 48, ql);
    }
}

// BOUNDS-FN: `b` is [u8; 144] and `yb` [f32; 256]; g < 4, so 48 + 32 * g <= 144,
// 64 * g + 64 <= 256 and 2 * g + 1 < 8; `q` has 32 bytes, `o` 64 values and i < 32.
pub fn q4_k_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<Q4_SIZE, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let (d, min) = (rd_f16(b, 0), rd_f16(b, 2));
        let sm = scales_mins_k4(&field(b, 4));
        for g in 0..4 {
            let q = &b[16 + 32 * g..48 + 32 * g];
            let ((s1, m1), (s2, m2)) = (sm[2 * g], sm[2 * g + 1]);
            let (d1, m1, d2, m2) = (d * s1 as f32, min * m1 as f32, d * s2 as f32, min * m2 as f32);
            let o = &mut yb[64 * g..64 * g + 64];
            for i in 0..32 {
                o[i] = d1 * (q[i] & 0xF) as f32 - m1;
                o[i + 32] = d2 * (q[i] >> 4) as f32 - m2;
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 176] and `yb` [f32; 256]; g < 4, so 80 + 32 * g <= 176,
// 64 * g + 64 <= 256 and 2 * g + 1 < 8; `qh` and `ql` have 32 bytes, `o` 64
// values and i < 32.
pub fn q5_k_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<Q5_SIZE, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let (d, min) = (rd_f16(b, 0), rd_f16(b, 2));
        let sm = scales_mins_k4(&field(b, 4));
        let qh = &b[16..48];
        let (mut u1, mut u2) = (1u8, 2u8);
        for g in 0..4 {
            let ql = &b[48 + 32 * g..80 + 32 * g];
            let ((s1, m1), (s2, m2)) = (sm[2 * g], sm[2 * g + 1]);
            let (d1, m1, d2, m2) = (d * s1 as f32, min * m1 as f32, d * s2 as f32, min * m2 as f32);
            let o = &mut yb[64 * g..64 * g + 64];
            for i in 0..32 {
                let h1 = if qh[i] & u1 != 0 { 16 } else { 0 };
                let h2 = if qh[i] & u2 != 0 { 16 } else { 0 };
                o[i] = d1 * ((ql[i] & 0xF) + h1) as f32 - m1;
                o[i + 32] = d2 * ((ql[i] >> 4) + h2) as f32 - m2;
            }
            u1 = u1.wrapping_shl(2);
            u2 = u2.wrapping_shl(2);
        }
    }
}

// BOUNDS-FN: `xb`, `qw` and `l` have 256 entries and `yb` is [u8; 210]; ib, j < 16,
// so 16 * ib + 16 <= 256 and 192 + ib < 208. In the packing `ql` has 128 bytes
// and `qh` 64; g < 2, j = 128 * g, i < 32 and k <= 96, so 64 * g + i + 32 < 128,
// 32 * g + i < 64 and j + i + k < 256.
fn q6_block(xb: &[f32; QK_K], qw: Option<&[f32; QK_K]>, yb: &mut [u8; Q6_SIZE]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0f32; 16];
    let (mut max_scale, mut max_abs) = (0f32, 0f32);
    for ib in 0..16 {
        let w = qw.map(|q| &q[16 * ib..16 * ib + 16]);
        let s = make_qx_quants(32, &xb[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16], Rmse::Squares, w);
        scales[ib] = s;
        if s.abs() > max_abs {
            max_abs = s.abs();
            max_scale = s;
        }
    }
    if max_abs < GROUP_MAX_EPS {
        yb.fill(0);
        return;
    }
    let iscale = -128.0 / max_scale;
    wr_f16(yb, 208, 1.0 / iscale);
    for ib in 0..16 {
        yb[192 + ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
    }
    let d_all = rd_f16(yb, 208);
    for j in 0..16 {
        let d = d_all * (yb[192 + j] as i8) as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(xb[16 * j + ii] / d).clamp(-32, 31) + 32) as i8;
        }
    }
    let (ql, rest) = yb.split_at_mut(128);
    let qh = &mut rest[..64];
    for (g, j) in (0..QK_K).step_by(128).enumerate() {
        for i in 0..32 {
            let v = |k: usize| l[j + i + k] as u8;
            ql[64 * g + i] = (v(0) & 0xF) | ((v(64) & 0xF) << 4);
            ql[64 * g + i + 32] = (v(32) & 0xF) | ((v(96) & 0xF) << 4);
            qh[32 * g + i] = (v(0) >> 4) | ((v(32) >> 4) << 2) | ((v(64) >> 4) << 4) | ((v(96) >> 4) << 6);
        }
    }
}

pub fn q6_k_ref(x: &[f32], y: &mut [u8]) {
    q6_k(x, y, None)
}

pub fn q6_k_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    q6_k(x, y, Some(qw))
}

fn q6_k(x: &[f32], y: &mut [u8], qw: Option<&[f32]>) {
    for ((xb, yb), qb) in blocks::<QK_K, _>(x).zip(blocks_mut::<Q6_SIZE, _>(y)).zip(weight_blocks::<QK_K>(qw)) {
        q6_block(xb, qb, yb);
    }
}

// BOUNDS-FN: `b` is [u8; 210] and `yb` [f32; 256]; g < 2, so 64 * g + 64 <= 128,
// 160 + 32 * g <= 192, 200 + 8 * g <= 208 and 128 * g + 128 <= 256. `ql` has 64
// bytes, `qh` 32, `sc` 8 and `o` 128 values; i < 32, is <= 1 and k <= 6.
pub fn q6_k_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<Q6_SIZE, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 208);
        for g in 0..2 {
            let ql = &b[64 * g..64 * g + 64];
            let qh = &b[128 + 32 * g..160 + 32 * g];
            let sc = &b[192 + 8 * g..200 + 8 * g];
            let o = &mut yb[128 * g..128 * g + 128];
            for i in 0..32 {
                let is = i / 16;
                let q1 = ((ql[i] & 0xF) | ((qh[i] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[i + 32] & 0xF) | (((qh[i] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4)) as i32 - 32;
                let s = |k: usize| (sc[is + k] as i8) as f32;
                o[i] = d * s(0) * q1 as f32;
                o[i + 32] = d * s(2) * q2 as f32;
                o[i + 64] = d * s(4) * q3 as f32;
                o[i + 96] = d * s(6) * q4 as f32;
            }
        }
    }
}

// BOUNDS-FN: `yb` is [u8; 292]; j < 16, so 20 + 16 * j <= 260.
pub fn q8_k_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<Q8_SIZE, _>(y)) {
        let (amax, max) = signed_absmax(xb);
        if amax == 0.0 {
            yb.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in yb[4..260].iter_mut().zip(xb) {
            *q = nearest_int(iscale * v).min(127) as i8 as u8;
        }
        for j in 0..16 {
            let sum: i32 = yb[4 + 16 * j..20 + 16 * j].iter().map(|&q| q as i8 as i32).sum();
            put(yb, 260 + 2 * j, (sum as i16).to_le_bytes());
        }
        put(yb, 0, (1.0 / iscale).to_le_bytes());
    }
}

pub fn q8_k_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<Q8_SIZE, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = f32::from_le_bytes(field(b, 0));
        for (o, &q) in yb.iter_mut().zip(b.iter().skip(4)) {
            *o = d * (q as i8) as f32;
        }
    }
}
