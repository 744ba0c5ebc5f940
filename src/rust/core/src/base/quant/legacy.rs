//! The 32-value block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 and the
//! 128-value sign format Q1_0.
//!
//! Layouts (bytes, little-endian; `d`, `m`, `s` are f16):
//! Q4_0 `d qs[16]`; Q4_1 `d m qs[16]`; Q5_0 `d qh[4] qs[16]`;
//! Q5_1 `d m qh[4] qs[16]`; Q8_0 `d qs[32]` (i8); Q8_1 `d s qs[32]`;
//! Q1_0 `d qs[16]` (one sign bit per value). Nibble `j` of `qs` holds value
//! `j` (low) and value `j + 16` (high); `qh` bit `j` is bit 4 of value `j`.

use super::util::{
    blocks, blocks_mut, cmax, cvtt, field, imatrix_weights, make_qkx_quants, make_qx_quants, put, rd_f16, rd_u32, roundf_int, signed_absmax, sum_sq, wr_f16,
    Rmse, Search,
};

const QK: usize = 32;

fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

fn inv(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// `(int8_t)(v)` clamped above by `hi` and stored in a `uint8_t`, as ggml writes it.
fn q_i8_min(v: f32, hi: i32) -> u8 {
    ((cvtt(v) as i8) as i32).min(hi) as u8
}

/// The 16 bytes of a block's 4-bit values: value `j` low, `j + 16` high.
// BOUNDS-FN: `l` is [u8; 32] and j < 16, so j + 16 < 32.
fn pack_nibbles(l: &[u8; 32]) -> [u8; 16] {
    std::array::from_fn(|j| (l[j] & 0x0F) | (l[j + 16] << 4))
}

/// The `qh` and `qs` bytes of a block's 5-bit values.
// BOUNDS-FN: `l` is [u8; 32] and `qs` [u8; 16]; j < 16, so j + 16 < 32.
fn pack_5bit(l: &[u8; 32]) -> ([u8; 4], [u8; 16]) {
    let mut h = 0u32;
    let mut qs = [0u8; 16];
    for j in 0..16 {
        let (a, b) = (l[j], l[j + 16]);
        qs[j] = (a & 0x0F) | ((b & 0x0F) << 4);
        h |= (((a & 0x10) >> 4) as u32) << j;
        h |= (((b & 0x10) >> 4) as u32) << (j + 16);
    }
    (h.to_le_bytes(), qs)
}

pub fn q4_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK, _>(x).zip(blocks_mut::<18, _>(y)) {
        let d = signed_absmax(xb).1 / -8.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        let l = xb.map(|v| q_i8_min(v * id + 8.5, 15));
        put(yb, 2, pack_nibbles(&l));
    }
}

pub fn q4_1_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK, _>(x).zip(blocks_mut::<20, _>(y)) {
        let (min, max) = min_max(xb);
        let d = (max - min) / 15.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, min);
        let l = xb.map(|v| q_i8_min((v - min) * id + 0.5, 15));
        put(yb, 4, pack_nibbles(&l));
    }
}

pub fn q5_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK, _>(x).zip(blocks_mut::<22, _>(y)) {
        let d = signed_absmax(xb).1 / -16.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        let l = xb.map(|v| q_i8_min(v * id + 16.5, 31));
        let (qh, qs) = pack_5bit(&l);
        put(yb, 2, qh);
        put(yb, 6, qs);
    }
}

pub fn q5_1_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK, _>(x).zip(blocks_mut::<24, _>(y)) {
        let (min, max) = min_max(xb);
        let d = (max - min) / 31.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, min);
        let l = xb.map(|v| cvtt((v - min) * id + 0.5) as u8);
        let (qh, qs) = pack_5bit(&l);
        put(yb, 4, qh);
        put(yb, 8, qs);
    }
}

/// (d, quants) of a Q8 block: d = amax / 127, values rounded half away from zero.
fn q8_block(xb: &[f32], qs: &mut [u8]) -> f32 {
    let mut amax = 0f32;
    for &v in xb {
        amax = cmax(amax, v.abs());
    }
    let d = amax / 127.0;
    let id = inv(d);
    for (q, &v) in qs.iter_mut().zip(xb) {
        *q = roundf_int(v * id) as i8 as u8;
    }
    d
}

// BOUNDS-FN: `yb` is [u8; 34].
pub fn q8_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK, _>(x).zip(blocks_mut::<34, _>(y)) {
        let d = q8_block(xb, &mut yb[2..34]);
        wr_f16(yb, 0, d);
    }
}

// BOUNDS-FN: `yb` is [u8; 36].
pub fn q8_1_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK, _>(x).zip(blocks_mut::<36, _>(y)) {
        let d = q8_block(xb, &mut yb[4..36]);
        let sum: i32 = yb[4..36].iter().map(|&q| q as i8 as i32).sum();
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, sum as f32 * d);
    }
}

// BOUNDS-FN: `xb` is [f32; 128] and `yb` [u8; 18]; j < 128, so 2 + j / 8 < 18.
pub fn q1_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<128, _>(x).zip(blocks_mut::<18, _>(y)) {
        let mut sum_abs = 0f32;
        for &v in xb {
            sum_abs += v.abs();
        }
        wr_f16(yb, 0, sum_abs / 128.0);
        yb[2..].fill(0);
        for (j, &v) in xb.iter().enumerate() {
            if v >= 0.0 {
                yb[2 + j / 8] |= 1 << (j % 8);
            }
        }
    }
}

/// Per-value weights of the importance-matrix quantizers: qw * sqrt(sigma2 + x^2),
/// sigma2 the mean square of the whole row.
fn row_weights(x: &[f32], qw: &[f32]) -> Vec<f32> {
    imatrix_weights(x, qw, sum_sq(x) / x.len() as f32).0
}

const QKX3: Search = Search { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false };

pub fn q4_0_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let mut l = [0i8; QK];
    for ((xb, wb), yb) in blocks::<QK, _>(x).zip(blocks::<QK, _>(&w)).zip(blocks_mut::<18, _>(y)) {
        let d = make_qx_quants(8, xb, &mut l, Rmse::Squares, Some(wb));
        wr_f16(yb, 0, d);
        put(yb, 2, pack_nibbles(&l.map(|v| v as u8)));
    }
}

pub fn q5_0_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let mut l = [0i8; QK];
    for ((xb, wb), yb) in blocks::<QK, _>(x).zip(blocks::<QK, _>(&w)).zip(blocks_mut::<22, _>(y)) {
        let d = make_qx_quants(16, xb, &mut l, Rmse::Squares, Some(wb));
        wr_f16(yb, 0, d);
        let (qh, qs) = pack_5bit(&l.map(|v| v as u8));
        put(yb, 2, qh);
        put(yb, 6, qs);
    }
}

pub fn q4_1_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let (mut l, mut laux) = ([0u8; QK], [0u8; QK]);
    for ((xb, wb), yb) in blocks::<QK, _>(x).zip(blocks::<QK, _>(&w)).zip(blocks_mut::<20, _>(y)) {
        let (d, the_min) = make_qkx_quants(15, xb, Some(wb), &mut l, &mut laux, QKX3, true);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, -the_min);
        put(yb, 4, pack_nibbles(&l));
    }
}

pub fn q5_1_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let (mut l, mut laux) = ([0u8; QK], [0u8; QK]);
    for ((xb, wb), yb) in blocks::<QK, _>(x).zip(blocks::<QK, _>(&w)).zip(blocks_mut::<24, _>(y)) {
        let (d, the_min) = make_qkx_quants(31, xb, Some(wb), &mut l, &mut laux, QKX3, true);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, -the_min);
        let (qh, qs) = pack_5bit(&l);
        put(yb, 4, qh);
        put(yb, 8, qs);
    }
}

// BOUNDS-FN: `b` is [u8; 18] and `yb` [f32; 32]; j < 16, so 2 + j < 18 and j + 16 < 32.
pub fn q4_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<18, _>(x).zip(blocks_mut::<QK, _>(y)) {
        let d = rd_f16(b, 0);
        for j in 0..16 {
            yb[j] = ((b[2 + j] & 0x0F) as i32 - 8) as f32 * d;
            yb[j + 16] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

// BOUNDS-FN: `b` is [u8; 20] and `yb` [f32; 32]; j < 16, so 4 + j < 20 and j + 16 < 32.
pub fn q4_1_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<20, _>(x).zip(blocks_mut::<QK, _>(y)) {
        let (d, m) = (rd_f16(b, 0), rd_f16(b, 2));
        for j in 0..16 {
            yb[j] = (b[4 + j] & 0x0F) as f32 * d + m;
            yb[j + 16] = (b[4 + j] >> 4) as f32 * d + m;
        }
    }
}

/// The 32 five-bit values of a Q5 block (`qh` then `qs`).
// BOUNDS-FN: `qs` is [u8; 16] and `v` [i32; 32]; j < 16, so j + 16 < 32.
fn unpack_5bit(qh: u32, qs: &[u8; 16]) -> [i32; 32] {
    let mut v = [0i32; 32];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        v[j] = ((qs[j] & 0x0F) as u32 | h0) as i32;
        v[j + 16] = ((qs[j] >> 4) as u32 | h1) as i32;
    }
    v
}

pub fn q5_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<22, _>(x).zip(blocks_mut::<QK, _>(y)) {
        let d = rd_f16(b, 0);
        let v = unpack_5bit(rd_u32(b, 2), &field(b, 6));
        for (o, &q) in yb.iter_mut().zip(&v) {
            *o = (q - 16) as f32 * d;
        }
    }
}

pub fn q5_1_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<24, _>(x).zip(blocks_mut::<QK, _>(y)) {
        let (d, m) = (rd_f16(b, 0), rd_f16(b, 2));
        let v = unpack_5bit(rd_u32(b, 4), &field(b, 8));
        for (o, &q) in yb.iter_mut().zip(&v) {
            *o = q as f32 * d + m;
        }
    }
}

pub fn q8_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<34, _>(x).zip(blocks_mut::<QK, _>(y)) {
        let d = rd_f16(b, 0);
        for (o, &q) in yb.iter_mut().zip(b.iter().skip(2)) {
            *o = (q as i8) as f32 * d;
        }
    }
}

pub fn q8_1_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<36, _>(x).zip(blocks_mut::<QK, _>(y)) {
        let d = rd_f16(b, 0);
        for (o, &q) in yb.iter_mut().zip(b.iter().skip(4)) {
            *o = (q as i8) as f32 * d;
        }
    }
}

// BOUNDS-FN: `b` is [u8; 18] and `yb` [f32; 128]; j < 128, so 2 + j / 8 < 18.
pub fn q1_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<18, _>(x).zip(blocks_mut::<128, _>(y)) {
        let d = rd_f16(b, 0);
        for (j, o) in yb.iter_mut().enumerate() {
            *o = if (b[2 + j / 8] >> (j % 8)) & 1 != 0 { d } else { -d };
        }
    }
}
