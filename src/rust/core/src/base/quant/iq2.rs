//! Two-bit lattice formats: IQ2_XXS (`d qs[32]` as u32 pairs per 32 values:
//! four 8-bit grid indices, then four 7-bit sign codes and a 4-bit scale),
//! IQ2_XS (`d qs[32]` u16: 9-bit index and 7-bit sign code per 8 values,
//! `scales[8]` two 4-bit scales per 32 values) and IQ2_S (`d qs[32]
//! signs[32] qh[8] scales[8]`: 10-bit indices, 8 plain sign bits).
//! Every 8 values are a grid point times a scale (0.5 + s) * d / 4, signed.

use super::grids::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS};
use super::search::{make_positive, pack_scales4, Group, ScaleSearch};
use super::tables::{get, TableKind};
use super::util::{cmax, make_qp_quants, nearest_int, rd_f16, rd_u16, rd_u32, sum_sq, wr_f16, GROUP_MAX_EPS};
use super::types::QK_K;

const K_MAX_Q: i32 = 3;

/// The 4-bit block scale of a sub-block scale `s` relative to `id` = 1/d.
fn scale4(id: f32, s: f32) -> u8 {
    nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u8
}

/// The search of IQ2_XS and IQ2_S (sub-blocks of 16; steps of 0.1 around 5 / max).
const SEARCH16: ScaleSearch = ScaleSearch { dim: 8, bits: 2, kmax: K_MAX_Q, steps: -9..=9, step: 0.1, start_on: true, only_off: true, always: false };

pub fn quantize_xxs(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let lat = get(TableKind::Iq2Xxs);
    for (ibl, (xbl, yb)) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(66)).enumerate() {
        yb.fill(0);
        let mut q2 = [0u32; 16];
        let mut scales = [0f32; 8];
        let mut max_scale = 0f32;
        let sigma2 = sum_sq(xbl) / QK_K as f32;
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let qb = &qw[QK_K * ibl + 32 * ib..QK_K * ibl + 32 * ib + 32];
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
            let mut l: [i8; 32] = std::array::from_fn(|i| lu[i] as i8);
            // Steps of 0.1 around 5 / eff_max, every group requantized at the best scale.
            let search = ScaleSearch { dim: 8, bits: 2, kmax: K_MAX_Q, steps: -6..=6, step: 0.1, start_on: false, only_off: false, always: true };
            let (idx, s) = search.run(&lat, &xval, &w, &waux, eff_max, scale, &mut l);
            scale = s;
            make_positive(&mut scale, &mut block_signs, 127);
            for k in 0..4 {
                q2[2 * ib] |= (idx[k] as u32) << (8 * k);
                q2[2 * ib + 1] |= (block_signs[k] as u32) << (7 * k);
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
            yb[2 + 4 * i..6 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
    }
}

pub fn quantize_xs(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let lat = get(TableKind::Iq2Xs);
    for (ibl, (xbl, yb)) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(74)).enumerate() {
        yb.fill(0);
        let mut q2 = [0u16; 32];
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let sigma2 = sum_sq(xbl) / QK_K as f32;
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let qb = &qw[QK_K * ibl + 16 * ib..QK_K * ibl + 16 * ib + 16];
            let Group { w, waux, xval, signs: mut block_signs, max } = Group::new(xb, Some(qb), sigma2, |v| v * v, true);
            if max < GROUP_MAX_EPS {
                continue;
            }
            let mut l = [0i8; 16];
            let (idx, mut scale) = SEARCH16.run(&lat, &xval, &w, &waux, max, max / 5.0, &mut l);
            make_positive(&mut scale, &mut block_signs, 127);
            for k in 0..2 {
                q2[2 * ib + k] = idx[k] as u16 | ((block_signs[k] as u16) << 9);
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
            yb[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_le_bytes());
        }
    }
}

pub fn quantize_s(x: &[f32], y: &mut [u8], qw: Option<&[f32]>) {
    let lat = get(TableKind::Iq2S);
    for (ibl, (xbl, yb)) in x.chunks_exact(QK_K).zip(y.chunks_exact_mut(82)).enumerate() {
        yb.fill(0);
        let mut scales = [0f32; 16];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK_K as f32;
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let qb = qw.map(|q| &q[QK_K * ibl + 16 * ib..QK_K * ibl + 16 * ib + 16]);
            let Group { w, waux, xval, signs: mut block_signs, max } = Group::new(xb, qb, sigma2, |v| 0.25 * sigma2 + v * v, false);
            if max < 1e-8 {
                continue;
            }
            let mut l = [0i8; 16];
            let (idx, mut scale) = SEARCH16.run(&lat, &xval, &w, &waux, max, max / 5.0, &mut l);
            make_positive(&mut scale, &mut block_signs, 255);
            for k in 0..2 {
                let i8 = 2 * ib + k;
                yb[2 + i8] = idx[k] as u8;
                yb[66 + i8 / 4] |= ((idx[k] >> 8) << (2 * (i8 % 4))) as u8;
                yb[34 + i8] = block_signs[k];
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
    for j in 0..8 {
        o[j] = db * ((g >> (8 * j)) & 0xFF) as f32 * if signs & (1 << j) != 0 { -1.0 } else { 1.0 };
    }
}

pub fn xxs_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(66).zip(y.chunks_exact_mut(QK_K)) {
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

pub fn xs_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(74).zip(y.chunks_exact_mut(QK_K)) {
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

pub fn s_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in x.chunks_exact(82).zip(y.chunks_exact_mut(QK_K)) {
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
