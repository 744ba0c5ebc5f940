//! Two-bit lattice formats: IQ2_XXS (`d qs[32]` as u32 pairs per 32 values:
//! four 8-bit grid indices, then four 7-bit sign codes and a 4-bit scale),
//! IQ2_XS (`d qs[32]` u16: 9-bit index and 7-bit sign code per 8 values,
//! `scales[8]` two 4-bit scales per 32 values) and IQ2_S (`d qs[32]
//! signs[32] qh[8] scales[8]`: 10-bit indices, 8 plain sign bits).
//! Every 8 values are a grid point times a scale (0.5 + s) * d / 4, signed.

use super::grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS};
use super::search::{make_positive, pack_scales4, Group, ScaleSearch};
use super::tables::{get, TableKind};
use super::util::{blocks, blocks_mut, cmax, make_qp_quants, nearest_int, put, rd_f16, rd_u16, rd_u32, sum_sq, weight_blocks, wr_f16, GROUP_MAX_EPS};
use super::types::QK_K;

const K_MAX_Q: i32 = 3;

/// The 4-bit block scale of a sub-block scale `s` relative to `id` = 1/d.
fn scale4(id: f32, s: f32) -> u8 {
    nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u8
}

/// The search of IQ2_XS and IQ2_S (sub-blocks of 16; steps of 0.1 around 5 / max).
const SEARCH16: ScaleSearch = ScaleSearch { dim: 8, bits: 2, kmax: K_MAX_Q, steps: -9..=9, step: 0.1, start_on: true, only_off: true, always: false };

// BOUNDS-FN: `xbl` and `qb` have 256 values and ib < 8, so 32 * ib + 32 <= 256;
// `q2` is [u32; 16] and `scales` [f32; 8], so 2 * ib + 1 < 16.
pub fn quantize_xxs(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let lat = get(TableKind::Iq2Xxs);
    for ((xbl, qbl), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<66, _>(y)) {
        yb.fill(0);
        let mut q2 = [0u32; 16];
        let mut scales = [0f32; 8];
        let mut max_scale = 0f32;
        let sigma2 = sum_sq(xbl) / QK_K as f32;
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let qb = &qbl[32 * ib..32 * ib + 32];
            let Group { w, waux, xval, signs: mut block_signs, max } = Group::new(xb, Some(qb), sigma2, |v| v * v, true);
            if max < GROUP_MAX_EPS {
                continue;
            }
            let mut lu = [0u8; 32];
            let mut scale = make_qp_quants(K_MAX_Q + 1, &xval, &mut lu, &w);
            let eff_max = scale * K_MAX_Q as f32;
            if eff_max <= 0.0 {
                continue;
            }
            let mut l = lu.map(|v| v as i8);
            // Steps of 0.1 around 5 / eff_max, every group requantized at the best scale.
            let search = ScaleSearch { dim: 8, bits: 2, kmax: K_MAX_Q, steps: -6..=6, step: 0.1, start_on: false, only_off: false, always: true };
            let (idx, s) = search.run(&lat, &xval, &w, &waux, eff_max, scale, &mut l);
            scale = s;
            make_positive(&mut scale, &mut block_signs, 127);
            // Four groups of 8: a grid index and a sign code each.
            for (k, (&g, &sg)) in idx.iter().zip(&block_signs).enumerate().take(4) {
                q2[2 * ib] |= (g as u32) << (8 * k);
                q2[2 * ib + 1] |= (sg as u32) << (7 * k);
            }
            scales[ib] = scale;
            max_scale = cmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        wr_f16(yb, 0, d);
        let id = 1.0 / d;
        for ib in 0..8 {
            q2[2 * ib + 1] |= (scale4(id, scales[ib]) as u32) << 28;
        }
        for (i, v) in q2.iter().enumerate() {
            put(yb, 2 + 4 * i, v.to_le_bytes());
        }
    }
}

// BOUNDS-FN: `xbl` and `qb` have 256 values and ib < 16, so 16 * ib + 16 <= 256;
// `q2` is [u16; 32] and k < 2, so 2 * ib + k < 32; `scales` is [f32; 16]; `yb`
// is [u8; 74].
pub fn quantize_xs(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let lat = get(TableKind::Iq2Xs);
    for ((xbl, qbl), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<74, _>(y)) {
        yb.fill(0);
        let mut q2 = [0u16; 32];
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let sigma2 = sum_sq(xbl) / QK_K as f32;
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let qb = &qbl[16 * ib..16 * ib + 16];
            let Group { w, waux, xval, signs: mut block_signs, max } = Group::new(xb, Some(qb), sigma2, |v| v * v, true);
            if max < GROUP_MAX_EPS {
                continue;
            }
            let mut l = [0i8; 16];
            let (idx, mut scale) = SEARCH16.run(&lat, &xval, &w, &waux, max, max / 5.0, &mut l);
            make_positive(&mut scale, &mut block_signs, 127);
            for (k, (&g, &sg)) in idx.iter().zip(&block_signs).enumerate().take(2) {
                q2[2 * ib + k] = g as u16 | ((sg as u16) << 9);
            }
            scales[ib] = scale;
            max_scale = cmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        wr_f16(yb, 0, d);
        let id = 1.0 / d;
        pack_scales4(id, &scales, &mut yb[66..66 + 8]);
        for (i, v) in q2.iter().enumerate() {
            put(yb, 2 + 2 * i, v.to_le_bytes());
        }
    }
}

// BOUNDS-FN: `xbl` and `qb` have 256 values and ib < 16, so 16 * ib + 16 <= 256;
// `yb` is [u8; 82] and i8 = 2 * ib + k < 32, so 34 + i8 < 66 and 66 + i8 / 4 < 74;
// `scales` is [f32; 16].
pub fn quantize_s(x: &[f32], y: &mut [u8], qw: Option<&[f32]>) {
    let lat = get(TableKind::Iq2S);
    for ((xbl, qbl), yb) in blocks::<QK_K, _>(x).zip(weight_blocks::<QK_K>(qw)).zip(blocks_mut::<82, _>(y)) {
        yb.fill(0);
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK_K as f32;
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let qb = qbl.map(|q| &q[16 * ib..16 * ib + 16]);
            let Group { w, waux, xval, signs: mut block_signs, max } = Group::new(xb, qb, sigma2, |v| 0.25 * sigma2 + v * v, false);
            if max < 1e-8 {
                continue;
            }
            let mut l = [0i8; 16];
            let (idx, mut scale) = SEARCH16.run(&lat, &xval, &w, &waux, max, max / 5.0, &mut l);
            make_positive(&mut scale, &mut block_signs, 255);
            for (k, (&g, &sg)) in idx.iter().zip(&block_signs).enumerate().take(2) {
                let i8 = 2 * ib + k;
                yb[2 + i8] = g as u8;
                yb[66 + i8 / 4] |= ((g >> 8) << (2 * (i8 % 4))) as u8;
                yb[34 + i8] = sg;
            }
            scales[ib] = scale;
            max_scale = cmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        wr_f16(yb, 0, d * 0.9875);
        let id = 1.0 / d;
        pack_scales4(id, &scales, &mut yb[74..74 + 8]);
    }
}

/// Eight values of grid entry `g` (bytes) with sign bits `signs`, times `db`.
#[inline]
fn put8(o: &mut [f32], db: f32, g: u64, signs: u8) {
    for (j, v) in o.iter_mut().take(8).enumerate() {
        *v = db * ((g >> (8 * j)) & 0xFF) as f32 * if signs & (1 << j) != 0 { -1.0 } else { 1.0 };
    }
}

// BOUNDS-FN: `b` is [u8; 66] and `yb` [f32; 256]; ib < 8 and l < 4, so
// 32 * ib + 8 * l + 8 <= 256. IQ2XXS_GRID has 256 entries (8-bit fields) and
// KSIGNS_IQ2XS 128 (7-bit fields).
pub fn xxs_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<66, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let (a0, a1) = (rd_u32(b, 2 + 8 * ib), rd_u32(b, 6 + 8 * ib));
            let db = d * (0.5 + (a1 >> 28) as f32) * 0.25;
            for l in 0..4 {
                let g = IQ2XXS_GRID[((a0 >> (8 * l)) & 0xFF) as usize];
                let s = KSIGNS_IQ2XS[((a1 >> (7 * l)) & 127) as usize];
                put8(&mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8], db, g, s);
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 74] and `yb` [f32; 256]; ib < 8 and l < 4, so 66 + ib < 74,
// 32 * ib + 8 * l + 8 <= 256 and l / 2 < 2. IQ2XS_GRID has 512 entries (9-bit
// fields) and KSIGNS_IQ2XS 128 (the top 7 bits of a u16).
pub fn xs_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<74, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let sc = b[66 + ib];
            let db = [d * (0.5 + (sc & 0xF) as f32) * 0.25, d * (0.5 + (sc >> 4) as f32) * 0.25];
            for l in 0..4 {
                let q = rd_u16(b, 2 + 2 * (4 * ib + l));
                let g = IQ2XS_GRID[(q & 511) as usize];
                let s = KSIGNS_IQ2XS[(q >> 9) as usize];
                put8(&mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8], db[l / 2], g, s);
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 82] and `yb` [f32; 256]; ib < 8 and l < 4, so 74 + ib < 82,
// 34 + 4 * ib + l < 66, 32 * ib + 8 * l + 8 <= 256 and l / 2 < 2. IQ2S_GRID has
// 1024 entries and idx is a byte with two bits above it.
pub fn s_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<82, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let sc = b[74 + ib];
            let db = [d * (0.5 + (sc & 0xF) as f32) * 0.25, d * (0.5 + (sc >> 4) as f32) * 0.25];
            let qh = b[66 + ib] as usize;
            for l in 0..4 {
                let idx = b[2 + 4 * ib + l] as usize | ((qh << (8 - 2 * l)) & 0x300);
                let s = b[34 + 4 * ib + l];
                put8(&mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8], db[l / 2], IQ2S_GRID[idx], s);
            }
        }
    }
}
