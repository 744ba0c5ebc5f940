//! Ternary formats TQ1_0 and TQ2_0 (values -1, 0, 1 times a block scale).
//!
//! TQ1_0: `qs[48] qh[4] d`: five trits per byte in `qs` (values `m + 32n`
//! of the first 160, then `m + 16n` of the next 80), four per byte in `qh`
//! (the last 16), each byte stored as ceil(v * 256 / 243) so that the top
//! trit is read by multiplying by 3 and keeping the high byte.
//! TQ2_0: `qs[64] d`: two bits per value, byte `m` of each 32-byte group
//! holding values `m, m+32, m+64, m+96` of its 128.

use super::util::{blocks, blocks_mut, cmax, rd_f16, wr_f16};
use super::types::QK_K;

/// C's `lroundf(v)` kept as an `int`: NaN and infinities give 0, as on x86.
fn lround_c(v: f32) -> i32 {
    if v.is_finite() {
        v.round() as i64 as i32
    } else {
        0
    }
}

fn absmax(x: &[f32]) -> f32 {
    let mut amax = 0f32;
    for &v in x {
        amax = cmax(amax, v.abs());
    }
    amax
}

/// The trits of `vals` (each -1, 0 or 1 after scaling by `id`) packed base 3,
/// first value most significant, then scaled to a byte.
fn pack_trits(vals: impl Iterator<Item = f32>, id: f32, extra_shift: bool) -> u8 {
    let mut q = 0u8;
    for v in vals {
        let xi = lround_c(v * id) + 1;
        q = q.wrapping_mul(3).wrapping_add(xi as u8);
    }
    if extra_shift {
        q = q.wrapping_mul(3);
    }
    ((q as u16 * 256 + 242) / 243) as u8
}

// BOUNDS-FN: `xb` is [f32; 256] and `yb` [u8; 54]: m + 32 * n <= 31 + 128 < 256;
// `x1` has 96 values and m + 16 * n <= 15 + 64; `x2` has 16 and j + 4 * m <= 15;
// the bytes written are below 32 + 16 + 4 = 52.
pub fn tq1_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<54, _>(y)) {
        let d = absmax(xb);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        wr_f16(yb, 52, d);
        for m in 0..32 {
            yb[m] = pack_trits((0..5).map(|n| xb[m + 32 * n]), id, false);
        }
        let x1 = &xb[160..];
        for m in 0..16 {
            yb[32 + m] = pack_trits((0..5).map(|n| x1[m + 16 * n]), id, false);
        }
        let x2 = &xb[240..];
        for j in 0..4 {
            yb[48 + j] = pack_trits((0..4).map(|m| x2[j + 4 * m]), id, true);
        }
    }
}

// BOUNDS-FN: `xb` is [f32; 256] and `yb` [u8; 66]; g < 2, so `xg` has at least
// 128 values and m + 32 * n <= 31 + 96; 32 * g + m < 64.
pub fn tq2_0_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<QK_K, _>(x).zip(blocks_mut::<66, _>(y)) {
        let d = absmax(xb);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        wr_f16(yb, 64, d);
        for g in 0..2 {
            let xg = &xb[128 * g..];
            for m in 0..32 {
                let mut q = 0u8;
                for n in 0..4 {
                    let xi = lround_c(xg[m + 32 * n] * id) + 1;
                    q = q.wrapping_add(((xi & 3) << (2 * n)) as u8);
                }
                yb[32 * g + m] = q;
            }
        }
    }
}

/// Trit `n` (0 = most significant) of a stored byte, as -1, 0 or 1.
#[inline]
fn trit(b: u8, pow3: u8) -> f32 {
    let q = b.wrapping_mul(pow3);
    (((q as u16 * 3) >> 8) as i32 - 1) as f32
}

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

// BOUNDS-FN: `b` is [u8; 54] and `yb` [f32; 256]: start + m < 48 and 48 + j < 52;
// `o` counts (32 + 16) * 5 + 4 * 4 = 256 values; POW3 has 5 entries.
pub fn tq1_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<54, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 52);
        let mut o = 0;
        for (start, width) in [(0usize, 32usize), (32, 16)] {
            for &p in &POW3 {
                for m in 0..width {
                    yb[o] = trit(b[start + m], p) * d;
                    o += 1;
                }
            }
        }
        for &p in &POW3[..4] {
            for j in 0..4 {
                yb[o] = trit(b[48 + j], p) * d;
                o += 1;
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 66] and `yb` [f32; 256]: 32 * g + m < 64, and `o` counts
// 2 * 4 * 32 = 256 values.
pub fn tq2_0_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<66, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 64);
        let mut o = 0;
        for g in 0..2 {
            for l in 0..4 {
                for m in 0..32 {
                    let q = (b[32 * g + m] >> (2 * l)) & 3;
                    yb[o] = (q as i32 - 1) as f32 * d;
                    o += 1;
                }
            }
        }
    }
}
