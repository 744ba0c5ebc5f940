//! Four-bit float formats: MXFP4 (32 E2M1 values and a shared power-of-two
//! E8M0 exponent: `e qs[16]`) and NVFP4 (64 values in four groups of 16,
//! each with an unsigned E4M3 scale: `d[4] qs[32]`). E2M1 codes index
//! `KVALUES` (twice the E2M1 value; the scales carry the factor 1/2).

use super::util::{blocks, blocks_mut, cvtt};

pub const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the value of an E8M0 exponent byte (ggml's `GGML_E8M0_TO_FP32_HALF`).
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { ((e - 1) as u32) << 23 };
    f32::from_bits(bits)
}

/// An unsigned E4M3 byte as a scale (half its value; 0 and 0x7F read as 0).
pub fn ue4m3_to_f32(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0xF) as i32;
    let man = (x & 0x7) as f32;
    let raw = if exp == 0 { man * 2f32.powi(-9) } else { (1.0 + man / 8.0) * 2f32.powi(exp - 7) };
    raw * 0.5
}

/// ggml's `ggml_fp32_to_ue4m3`: round half up, saturating at 0x7E.
pub fn f32_to_ue4m3(x: f32) -> u8 {
    if !(x > 0.0) {
        return 0;
    }
    let x = if x > 448.0 { 448.0 } else { x };
    let bits = x.to_bits();
    let fp32_exp = ((bits >> 23) & 0xFF) as i32 - 127;
    let fp32_man = ((bits >> 20) & 0x7) as i32;
    let mut exp = fp32_exp + 7;
    if exp <= 0 {
        let man = cvtt(x * 512.0 + 0.5).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7E;
    }
    let mut man = fp32_man + ((bits >> 19) & 1) as i32;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7E;
        }
    }
    ((exp << 3) | man) as u8
}

/// The E2M1 code whose value times `e` is nearest to `x` (the first on ties).
fn best_index(x: f32, e: f32) -> u8 {
    let mut best = 0;
    // BOUNDS: KVALUES is [i8; 16].
    let mut best_err = (KVALUES[0] as f32 * e - x).abs();
    for (i, &k) in KVALUES.iter().enumerate().skip(1) {
        let err = (k as f32 * e - x).abs();
        if err < best_err {
            best = i;
            best_err = err;
        }
    }
    best as u8
}

// BOUNDS-FN: `xb` is [f32; 32] and `yb` [u8; 17]; j < 16, so j + 16 < 32 and 1 + j < 17.
pub fn mxfp4_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<32, _>(x).zip(blocks_mut::<17, _>(y)) {
        let mut amax = 0f32;
        for &v in xb {
            if amax < v.abs() {
                amax = v.abs();
            }
        }
        let e = if amax > 0.0 { cvtt(amax.log2().floor() - 2.0 + 127.0) as u8 } else { 0 };
        let d = e8m0_half(e);
        yb[0] = e;
        for j in 0..16 {
            yb[1 + j] = best_index(xb[j], d) | (best_index(xb[j + 16], d) << 4);
        }
    }
}

// BOUNDS-FN: `xb` is [f32; 64] and `yb` [u8; 36]; s < 4 and j < 8, so
// 16 * s + 16 <= 64, `xs` has 16 values with j + 8 < 16, and 4 + 8 * s + j < 36.
pub fn nvfp4_ref(x: &[f32], y: &mut [u8]) {
    for (xb, yb) in blocks::<64, _>(x).zip(blocks_mut::<36, _>(y)) {
        for s in 0..4 {
            let xs = &xb[16 * s..16 * s + 16];
            let mut amax = 0f32;
            for &v in xs {
                if amax < v.abs() {
                    amax = v.abs();
                }
            }
            let ue = f32_to_ue4m3(amax / 6.0);
            yb[s] = ue;
            let d = ue4m3_to_f32(ue);
            for j in 0..8 {
                yb[4 + 8 * s + j] = best_index(xs[j], d) | (best_index(xs[j + 8], d) << 4);
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 17] and `yb` [f32; 32]; j < 16, so 1 + j < 17 and
// j + 16 < 32; KVALUES has 16 entries and the codes are 4-bit fields.
pub fn mxfp4_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<17, _>(x).zip(blocks_mut::<32, _>(y)) {
        let d = e8m0_half(b[0]);
        for j in 0..16 {
            yb[j] = KVALUES[(b[1 + j] & 0x0F) as usize] as f32 * d;
            yb[j + 16] = KVALUES[(b[1 + j] >> 4) as usize] as f32 * d;
        }
    }
}

// BOUNDS-FN: `b` is [u8; 36] and `yb` [f32; 64]; s < 4 and j < 8, so
// 4 + 8 * s + j < 36, 16 * s + 16 <= 64 and j + 8 < 16 in `o`; KVALUES has 16
// entries and the codes are 4-bit fields.
pub fn nvfp4_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<36, _>(x).zip(blocks_mut::<64, _>(y)) {
        for s in 0..4 {
            let d = ue4m3_to_f32(b[s]);
            let o = &mut yb[16 * s..16 * s + 16];
            for j in 0..8 {
                let q = b[4 + 8 * s + j];
                o[j] = KVALUES[(q & 0x0F) as usize] as f32 * d;
                o[j + 8] = KVALUES[(q >> 4) as usize] as f32 * d;
            }
        }
    }
}
