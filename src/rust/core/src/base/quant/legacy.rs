//! The 32-value block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 and the
//! 128-value sign format Q1_0.
//!
//! Layouts (bytes, little-endian; `d`, `m`, `s` are f16):
//! Q4_0 `d qs[16]`; Q4_1 `d m qs[16]`; Q5_0 `d qh[4] qs[16]`;
//! Q5_1 `d m qh[4] qs[16]`; Q8_0 `d qs[32]` (i8); Q8_1 `d s qs[32]`;
//! Q1_0 `d qs[16]` (one sign bit per value). Nibble `j` of `qs` holds value
//! `j` (low) and value `j + 16` (high); `qh` bit `j` is bit 4 of value `j`.

use super::util::{cmax, cvtt, imatrix_weights, make_qkx_quants, make_qx_quants, rd_f16, rd_u32, roundf_int, signed_absmax, sum_sq, wr_f16, Rmse, Search};

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

fn pack_nibbles(l: &[u8], qs: &mut [u8]) {
    for j in 0..16 {
        qs[j] = (l[j] & 0x0F) | (l[j + 16] << 4);
    }
}

fn pack_5bit(l: &[u8], qh: &mut [u8], qs: &mut [u8]) {
    let mut h = 0u32;
    for j in 0..16 {
        let (a, b) = (l[j], l[j + 16]);
        qs[j] = (a & 0x0F) | ((b & 0x0F) << 4);
        h |= (((a & 0x10) >> 4) as u32) << j;
        h |= (((b & 0x10) >> 4) as u32) << (j + 16);
    }
    qh.copy_from_slice(&h.to_le_bytes());
}

pub fn q4_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.chunks_exact_mut(18)) {
        let d = signed_absmax(xb).1 / -8.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        let l: Vec<u8> = xb.iter().map(|&v| q_i8_min(v * id + 8.5, 15)).collect();
        pack_nibbles(&l, &mut yb[2..18]);
    }
}

pub fn q4_1_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.chunks_exact_mut(20)) {
        let (min, max) = min_max(xb);
        let d = (max - min) / 15.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, min);
        let l: Vec<u8> = xb.iter().map(|&v| q_i8_min((v - min) * id + 0.5, 15)).collect();
        pack_nibbles(&l, &mut yb[4..20]);
    }
}

pub fn q5_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.chunks_exact_mut(22)) {
        let d = signed_absmax(xb).1 / -16.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        let l: Vec<u8> = xb.iter().map(|&v| q_i8_min(v * id + 16.5, 31)).collect();
        let (qh, qs) = yb[2..].split_at_mut(4);
        pack_5bit(&l, qh, qs);
    }
}

pub fn q5_1_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.chunks_exact_mut(24)) {
        let (min, max) = min_max(xb);
        let d = (max - min) / 31.0;
        let id = inv(d);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, min);
        let l: Vec<u8> = xb.iter().map(|&v| cvtt((v - min) * id + 0.5) as u8).collect();
        let (qh, qs) = yb[4..].split_at_mut(4);
        pack_5bit(&l, qh, qs);
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

pub fn q8_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.chunks_exact_mut(34)) {
        let d = q8_block(xb, &mut yb[2..34]);
        wr_f16(yb, 0, d);
    }
}

pub fn q8_1_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(QK).zip(y.chunks_exact_mut(36)) {
        let d = q8_block(xb, &mut yb[4..36]);
        let sum: i32 = yb[4..36].iter().map(|&q| q as i8 as i32).sum();
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, sum as f32 * d);
    }
}

pub fn q1_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(128).zip(y.chunks_exact_mut(18)) {
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
    for ((xb, wb), yb) in x.chunks_exact(QK).zip(w.chunks_exact(QK)).zip(y.chunks_exact_mut(18)) {
        let d = make_qx_quants(8, xb, &mut l, Rmse::Squares, Some(wb));
        wr_f16(yb, 0, d);
        let lu: Vec<u8> = l.iter().map(|&v| v as u8).collect();
        pack_nibbles(&lu, &mut yb[2..18]);
    }
}

pub fn q5_0_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let mut l = [0i8; QK];
    for ((xb, wb), yb) in x.chunks_exact(QK).zip(w.chunks_exact(QK)).zip(y.chunks_exact_mut(22)) {
        let d = make_qx_quants(16, xb, &mut l, Rmse::Squares, Some(wb));
        wr_f16(yb, 0, d);
        let lu: Vec<u8> = l.iter().map(|&v| v as u8).collect();
        let (qh, qs) = yb[2..].split_at_mut(4);
        pack_5bit(&lu, qh, qs);
    }
}

pub fn q4_1_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let (mut l, mut laux) = ([0u8; QK], [0u8; QK]);
    for ((xb, wb), yb) in x.chunks_exact(QK).zip(w.chunks_exact(QK)).zip(y.chunks_exact_mut(20)) {
        let (d, the_min) = make_qkx_quants(15, xb, Some(wb), &mut l, &mut laux, QKX3, true);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, -the_min);
        pack_nibbles(&l, &mut yb[4..20]);
    }
}

pub fn q5_1_weighted(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let w = row_weights(x, qw);
    let (mut l, mut laux) = ([0u8; QK], [0u8; QK]);
    for ((xb, wb), yb) in x.chunks_exact(QK).zip(w.chunks_exact(QK)).zip(y.chunks_exact_mut(24)) {
        let (d, the_min) = make_qkx_quants(31, xb, Some(wb), &mut l, &mut laux, QKX3, true);
        wr_f16(yb, 0, d);
        wr_f16(yb, 2, -the_min);
        let (qh, qs) = yb[4..].split_at_mut(4);
        pack_5bit(&l, qh, qs);
    }
}

pub fn q4_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(18).zip(y.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for j in 0..16 {
            yb[j] = ((b[2 + j] & 0x0F) as i32 - 8) as f32 * d;
            yb[j + 16] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

pub fn q4_1_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(20).zip(y.chunks_exact_mut(QK)) {
        let (d, m) = (rd_f16(b, 0), rd_f16(b, 2));
        for j in 0..16 {
            yb[j] = (b[4 + j] & 0x0F) as f32 * d + m;
            yb[j + 16] = (b[4 + j] >> 4) as f32 * d + m;
        }
    }
}

/// The 32 five-bit values of a Q5 block (`qh` then `qs`).
fn unpack_5bit(qh: u32, qs: &[u8]) -> [i32; 32] {
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
    for (b, yb) in x.chunks_exact(22).zip(y.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        let v = unpack_5bit(rd_u32(b, 2), &b[6..22]);
        for j in 0..QK {
            yb[j] = (v[j] - 16) as f32 * d;
        }
    }
}

pub fn q5_1_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(24).zip(y.chunks_exact_mut(QK)) {
        let (d, m) = (rd_f16(b, 0), rd_f16(b, 2));
        let v = unpack_5bit(rd_u32(b, 4), &b[8..24]);
        for j in 0..QK {
            yb[j] = v[j] as f32 * d + m;
        }
    }
}

pub fn q8_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(34).zip(y.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for j in 0..QK {
            yb[j] = (b[2 + j] as i8) as f32 * d;
        }
    }
}

pub fn q8_1_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(36).zip(y.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for j in 0..QK {
            yb[j] = (b[4 + j] as i8) as f32 * d;
        }
    }
}

pub fn q1_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(18).zip(y.chunks_exact_mut(128)) {
        let d = rd_f16(b, 0);
        for (j, o) in yb.iter_mut().enumerate() {
            *o = if (b[2 + j / 8] >> (j % 8)) & 1 != 0 { d } else { -d };
        }
    }
}
