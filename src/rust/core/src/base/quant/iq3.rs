//! Three-bit lattice formats over 4-value grid points: IQ3_XXS (`d qs[64]
//! scales_and_signs[32]`: 8-bit indices, per 32 values a u32 of four 7-bit
//! sign codes and a 4-bit scale) and IQ3_S (`d qs[64] qh[8] signs[32]
//! scales[4]`: 9-bit indices, plain sign bits, 4-bit scales per 32 values).

use super::grids::{IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use super::search::{make_positive, Group, ScaleSearch};
use super::tables::{get, TableKind};
use super::util::{blocks, blocks_mut, cmax, nearest_int, put, rd_f16, rd_u32, sum_sq, weight_blocks, wr_f16};
use super::types::QK_K;

const K_MAX_Q: i32 = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    Xxs,
    S,
}

/// ggml's IQ3 scale searches: steps of 0.2 around 15 / max; IQ3_XXS tries
/// 31 scales and requantizes only the groups left off the grid, IQ3_S tries
/// 19 and requantizes every group when any is off.
fn search(kind: Grid) -> ScaleSearch {
    let xxs = kind == Grid::Xxs;
    let steps = if xxs { -15..=15 } else { -9..=9 };
    ScaleSearch { dim: 4, bits: 3, kmax: K_MAX_Q, steps, step: 0.2, start_on: xxs, only_off: xxs, always: false }
}

// BOUNDS-FN: `xbl` and `qb` have 256 values and ib < 8, so 32 * ib + 32 <= 256;
// `scales` is [f32; 8]. `yb` is a chunks_exact(size) block: for Xxs 98 bytes,
// written at 2 + 8 * ib + k < 66 (k < 8) and 66 + 4 * ib + 4 <= 98; for S 110,
// written at 2 + 8 * ib + k < 66, 66 + ib < 74, 74 + 4 * ib + 4 <= 106 and
// 106 + ib / 2 < 110 (ib + 1 < 8 in the step-2 loop).
pub fn quantize(kind: Grid, x: &[f32], y: &mut [u8], qw: Option<&[f32]>) {
    let size = if kind == Grid::Xxs { 98 } else { 110 };
    let lat = get(if kind == Grid::Xxs { TableKind::Iq3Xxs } else { TableKind::Iq3S });
    for ((xbl, qbl), yb) in blocks::<QK_K, _>(x).zip(weight_blocks::<QK_K>(qw)).zip(y.chunks_exact_mut(size)) {
        yb.fill(0);
        let mut scales = [0f32; 8];
        let mut max_scale = 0f32;
        let sigma2 = 2.0 * sum_sq(xbl) / QK_K as f32;
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let qb = qbl.map(|q| &q[32 * ib..32 * ib + 32]);
            let Group { w, waux, xval, signs: mut block_signs, max } = Group::new(xb, qb, sigma2, |v| v * v, kind == Grid::Xxs);
            let empty = if kind == Grid::Xxs { max < 1e-8 } else { max == 0.0 };
            if empty {
                continue;
            }
            let mut l = [0i8; 32];
            let (idx, mut scale) = search(kind).run(&lat, &xval, &w, &waux, max, max / (2 * K_MAX_Q - 1) as f32, &mut l);
            make_positive(&mut scale, &mut block_signs, if kind == Grid::Xxs { 127 } else { 255 });
            match kind {
                // Eight groups of 4 (a grid index each) and four sign bytes.
                Grid::Xxs => {
                    for (k, &g) in idx.iter().enumerate().take(8) {
                        yb[2 + 8 * ib + k] = g as u8;
                    }
                    let ss = block_signs.iter().take(4).enumerate().fold(0u32, |ss, (k, &sg)| ss | (sg as u32) << (7 * k));
                    put(yb, 66 + 4 * ib, ss.to_le_bytes());
                }
                Grid::S => {
                    for (k, &g) in idx.iter().enumerate().take(8) {
                        yb[2 + 8 * ib + k] = g as u8;
                        yb[66 + ib] |= ((g >> 8) << k) as u8;
                    }
                    for (d, &sg) in yb[74 + 4 * ib..78 + 4 * ib].iter_mut().zip(&block_signs) {
                        *d = sg;
                    }
                }
            }
            scales[ib] = scale;
            max_scale = cmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            if kind == Grid::Xxs {
                yb.fill(0);
            }
            continue;
        }
        let d = max_scale / 31.0;
        let id = 1.0 / d;
        let l4 = |s: f32| nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u32;
        match kind {
            Grid::Xxs => {
                wr_f16(yb, 0, d * 1.0125);
                for ib in 0..8 {
                    let ss = rd_u32(yb, 66 + 4 * ib) | (l4(scales[ib]) << 28);
                    put(yb, 66 + 4 * ib, ss.to_le_bytes());
                }
            }
            Grid::S => {
                wr_f16(yb, 0, d * 1.033);
                for ib in (0..8).step_by(2) {
                    yb[106 + ib / 2] = (l4(scales[ib]) | (l4(scales[ib + 1]) << 4)) as u8;
                }
            }
        }
    }
}

/// Four values of a grid entry with sign bits `s` (bit `j + shift`), times `db`.
#[inline]
fn put4(o: &mut [f32], db: f32, g: u32, s: u8, shift: usize) {
    for (j, v) in o.iter_mut().take(4).enumerate() {
        let sign = if s & (1 << (j + shift)) != 0 { -1.0 } else { 1.0 };
        *v = db * ((g >> (8 * j)) & 0xFF) as f32 * sign;
    }
}

// BOUNDS-FN: `b` is [u8; 98] and `yb` [f32; 256]; ib < 8 and l < 4, so
// 10 + 8 * ib <= 66 (`qs` has 8 bytes, 2 * l + 1 < 8) and 32 * ib + 8 * l + 8 <= 256
// (`o` has 8 values). IQ3XXS_GRID has 256 entries (byte indices) and
// KSIGNS_IQ2XS 128 (7-bit fields).
pub fn xxs_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<98, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let aux = rd_u32(b, 66 + 4 * ib);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            let qs = &b[2 + 8 * ib..10 + 8 * ib];
            for l in 0..4 {
                let s = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let o = &mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8];
                put4(&mut o[..4], db, IQ3XXS_GRID[qs[2 * l] as usize], s, 0);
                put4(&mut o[4..], db, IQ3XXS_GRID[qs[2 * l + 1] as usize], s, 4);
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 110] and `yb` [f32; 256]; ib < 8 and l < 4, so
// 106 + ib / 2 < 110, 66 + ib < 74, 10 + 8 * ib <= 66 (`qs` has 8 bytes,
// 2 * l + 1 < 8), 74 + 4 * ib + l < 106 and 32 * ib + 8 * l + 8 <= 256 (`o` has
// 8 values). IQ3S_GRID has 512 entries: a byte and bit 8.
pub fn s_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<110, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let sc = b[106 + ib / 2];
            let s4 = if ib % 2 == 0 { sc & 0xF } else { sc >> 4 };
            let db = d * (1 + 2 * s4 as i32) as f32;
            let qh = b[66 + ib] as usize;
            let qs = &b[2 + 8 * ib..10 + 8 * ib];
            for l in 0..4 {
                let s = b[74 + 4 * ib + l];
                let g1 = IQ3S_GRID[qs[2 * l] as usize | ((qh << (8 - 2 * l)) & 256)];
                let g2 = IQ3S_GRID[qs[2 * l + 1] as usize | ((qh << (7 - 2 * l)) & 256)];
                let o = &mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8];
                put4(&mut o[..4], db, g1, s, 0);
                put4(&mut o[4..], db, g2, s, 4);
            }
        }
    }
}
