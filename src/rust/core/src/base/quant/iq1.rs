//! 1.5- and 1.75-bit lattice formats over 8-value points of {-1, 0, 1}
//! shifted by +-1/8: IQ1_S (`d qs[32] qh[8]` (u16): per 32 values four
//! 11-bit indices, a 3-bit scale and the shift sign) and IQ1_M (`qs[32]
//! qh[16] scales[8]`: per 16 values two indices and shift signs, 3-bit
//! scales, the f16 super-block scale spread over the top nibbles of
//! `scales`).

use super::grids::IQ1S_GRID;
use super::tables::{get, TableKind, Lattice};
use super::util::{blocks, blocks_mut, cmax, f16_bits_to_f32, f32_to_f16_bits, nearest_int, put, rd_f16, rd_u16, sum_sq, weight_blocks, wr_f16};
use super::types::QK_K;

const DELTA: f32 = 0.125;
const X_P: [f32; 3] = [-1.0 + DELTA, DELTA, 1.0 + DELTA];
const X_M: [f32; 3] = [-1.0 - DELTA, -DELTA, 1.0 - DELTA];

/// The shift table entry of IQ1 grid coordinate `p` (2 * code + 1).
// BOUNDS-FN: the IQ1_S lattice is built over three values, so its coordinates
// are 2 * c + 1 with c < 3 and (p - 1) / 2 < 3 = xg.len().
#[inline]
fn shifted(xg: &[f32; 3], p: i8) -> f32 {
    xg[((p - 1) / 2) as usize]
}

/// ggml's `iq1_find_best_neighbour2`: the listed grid point nearest to `xval`
/// when code c stands for `scale * xg[c]`; its codes go to `l`.
fn best_neighbour(lat: &Lattice, entry: i32, xval: &[f32; 8], w: &[f32; 8], scale: f32, xg: &[f32; 3], l: &mut [i8; 8]) -> usize {
    let d2_of = |j: usize| {
        let mut d2 = 0f32;
        for ((&p, &xv), &wi) in lat.point(j).iter().zip(xval).zip(w) {
            let diff = scale * shifted(xg, p) - xv;
            d2 += wi * diff * diff;
        }
        d2
    };
    let mut best = None;
    let mut best_score = f32::MAX;
    let cands: Vec<usize> = lat.neighbours_of(entry).iter().map(|&j| j as usize).collect();
    for pass in [cands, (0..lat.grid.len() / 8).collect()] {
        for j in pass {
            let d2 = d2_of(j);
            if d2 < best_score {
                best_score = d2;
                best = Some(j);
            }
        }
        if best.is_some() {
            break;
        }
    }
    let g = best.unwrap_or(0);
    for (li, &p) in l.iter_mut().zip(lat.point(g)) {
        *li = (p - 1) / 2;
    }
    g
}

/// Grid index of the codes `l` of 8 values (or of the best neighbour, which
/// then replaces the codes); the flag tells whether it was on the grid.
fn index_of(lat: &Lattice, l: &mut [i8; 8], xb: &[f32; 8], w: &[f32; 8], scale: f32, xx: &[f32; 3]) -> (usize, bool) {
    let u: usize = l.iter().enumerate().map(|(j, &c)| (c as usize) << (2 * j)).sum();
    match lat.map.get(u) {
        Some(&e) if e >= 0 => (e as usize, true),
        Some(&e) => (best_neighbour(lat, e, xb, w, scale, xx, l), false),
        None => (0, false),
    }
}

/// Positions of the values sorted ascending (ggml sorts (value, index) pairs):
/// a permutation of 0..xb.len().
// BOUNDS-FN: a and b are taken from 0..xb.len().
fn sorted(xb: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..xb.len()).collect();
    idx.sort_by(|&a, &b| xb[a].partial_cmp(&xb[b]).unwrap_or(std::cmp::Ordering::Equal));
    idx
}

fn weights(xb: &[f32], qw: Option<&[f32]>, sigma2: f32) -> Vec<f32> {
    match qw {
        Some(q) => xb.iter().zip(q).map(|(&v, &q)| q * (sigma2 + v * v).sqrt()).collect(),
        None => xb.iter().map(|v| v * v).collect(),
    }
}

fn absmax(xb: &[f32]) -> f32 {
    xb.split_first().map_or(0.0, |(&first, rest)| rest.iter().fold(first.abs(), |max, &v| cmax(max, v.abs())))
}

/// Codes 0/1/2 of the values split at sorted positions `i1` and `i2`; a
/// negative scale is made positive by mirroring the codes (returns whether).
fn split_codes(idx: &[usize], i1: usize, i2: usize, scale: &mut f32, l: &mut [i8]) -> bool {
    for (j, &i) in idx.iter().enumerate() {
        if let Some(c) = l.get_mut(i) {
            *c = if j < i1 {
                0
            } else if j < i2 {
                1
            } else {
                2
            };
        }
    }
    if *scale >= 0.0 {
        return false;
    }
    for v in l.iter_mut() {
        *v = 2 - *v;
    }
    *scale = -*scale;
    true
}

/// The scale that fits the chosen grid points best (ggml's rescoring when
/// some group was moved off its codes); `xx(k)` is group k's shift table.
fn rescore<'a>(lat: &Lattice, index: &[usize], xx: impl Fn(usize) -> &'a [f32; 3], xb: &[f32], w: &[f32], scale: f32) -> f32 {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for ((k, &g), (xg, wg)) in index.iter().enumerate().zip(blocks::<8, _>(xb).zip(blocks::<8, _>(w))) {
        for ((&p, &xv), &wi) in lat.point(g).iter().zip(xg).zip(wg) {
            let q = shifted(xx(k), p);
            sumqx += wi * q * xv;
            sumq2 += wi * q * q;
        }
    }
    if sumqx > 0.0 && sumq2 > 0.0 {
        sumqx / sumq2
    } else {
        scale
    }
}

/// The grid indices of the four (IQ1_S) or two (IQ1_M) groups of 8 of the
/// codes `l`, and whether all were on the grid; `xx(k)` is group k's shift table.
fn group_indices<'a, const G: usize>(lat: &Lattice, l: &mut [i8], xb: &[f32], w: &[f32], scale: f32, xx: impl Fn(usize) -> &'a [f32; 3]) -> ([usize; G], bool) {
    let mut index = [0usize; G];
    let mut all_on = true;
    let groups = blocks_mut::<8, _>(l).zip(blocks::<8, _>(xb)).zip(blocks::<8, _>(w));
    for (k, (dst, ((lg, xg), wg))) in index.iter_mut().zip(groups).enumerate() {
        let (g, on) = index_of(lat, lg, xg, wg, scale, xx(k));
        all_on &= on;
        *dst = g;
    }
    (index, all_on)
}

// BOUNDS-FN: `xbl` and `qb` have 256 values and `yb` is [u8; 50]; ib < 8, so
// 32 * ib + 32 <= 256 and 2 + 4 * ib + k < 34 (k < 4); `scales`, `shifts` are
// [_; 8] and `index` [usize; 4]. `idx` is a permutation of 0..32 (sorted() of
// the 32 values, which `w` also has), so i < 32 and j + 1 <= 32 in `sumx` and
// `sumw` ([f32; 33]), as are i1, i2 <= 32; `xx` has 3 entries.
pub fn quantize_s(x: &[f32], y: &mut [u8], qw: &[f32]) {
    let lat = get(TableKind::Iq1S);
    for ((xbl, qb), yb) in blocks::<QK_K, _>(x).zip(blocks::<QK_K, _>(qw)).zip(blocks_mut::<50, _>(y)) {
        yb.fill(0);
        let sigma2 = 2.0 * sum_sq(xbl) / QK_K as f32;
        let (mut scales, mut shifts) = ([0f32; 8], [1i8; 8]);
        let mut max_scale = 0f32;
        for ib in 0..8 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let w = weights(xb, Some(&qb[32 * ib..32 * ib + 32]), sigma2);
            let max = absmax(xb);
            if max < 1e-12 {
                continue;
            }
            let idx = sorted(xb);
            let (mut sumx, mut sumw) = ([0f32; 33], [0f32; 33]);
            for (j, &i) in idx.iter().enumerate() {
                sumx[j + 1] = sumx[j] + w[i] * xb[i];
                sumw[j + 1] = sumw[j] + w[i];
            }
            let mut best_score = -f32::MAX;
            let mut scale = max;
            let mut best: Option<(usize, usize, i8)> = None;
            for i1 in 0..=32 {
                for i2 in i1..=32 {
                    for (xx, shift) in [(&X_P, 1i8), (&X_M, -1)] {
                        let sumqx = (sumx[i1] - sumx[0]) * xx[0] + (sumx[i2] - sumx[i1]) * xx[1] + (sumx[32] - sumx[i2]) * xx[2];
                        let sumq2 = (sumw[i1] - sumw[0]) * xx[0] * xx[0]
                            + (sumw[i2] - sumw[i1]) * xx[1] * xx[1]
                            + (sumw[32] - sumw[i2]) * xx[2] * xx[2];
                        if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                            scale = sumqx / sumq2;
                            best_score = scale * sumqx;
                            best = Some((i1, i2, shift));
                        }
                    }
                }
            }
            let Some((i1, i2, mut shift)) = best else { continue };
            let mut l = [0i8; 32];
            if split_codes(&idx, i1, i2, &mut scale, &mut l) {
                shift = -shift;
            }
            let xx = if shift == 1 { &X_P } else { &X_M };
            let (index, all_on) = group_indices::<4>(&lat, &mut l, xb, &w, scale, |_| xx);
            if !all_on {
                scale = rescore(&lat, &index, |_| xx, xb, &w, scale);
            }
            let mut h = 0u16;
            for k in 0..4 {
                yb[2 + 4 * ib + k] = index[k] as u8;
                h |= ((index[k] >> 8) << (3 * k)) as u16;
            }
            put(yb, 34 + 2 * ib, h.to_le_bytes());
            scales[ib] = scale;
            shifts[ib] = shift;
            max_scale = cmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 15.0;
        wr_f16(yb, 0, d * 1.125);
        let id = 1.0 / d;
        for ib in 0..8 {
            let mut l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7) as u16;
            if shifts[ib] == -1 {
                l |= 8;
            }
            let h = rd_u16(yb, 34 + 2 * ib) | (l << 12);
            put(yb, 34 + 2 * ib, h.to_le_bytes());
        }
    }
}

/// The shift tables of the two groups of 8 of an IQ1_M sub-block with shift code `k`.
fn m_shift(k: usize, group: usize) -> &'static [f32; 3] {
    let plus = if group == 0 { k < 2 } else { k % 2 == 0 };
    if plus {
        &X_P
    } else {
        &X_M
    }
}

// BOUNDS-FN: `xbl` and `qb` have 256 values and `yb` is [u8; 56]; ib < 16, so
// 16 * ib + 16 <= 256, 2 * ib + 1 < 32, 32 + ib < 48 and ib / 4 < 4 (`sc` is
// [u16; 4]); `scales`, `shifts` are [_; 16] and `index` [usize; 2]. `idx` is a
// permutation of 0..16 (sorted() of the 16 values, which `w` also has), so
// i < 16; `xs` has 2 entries (k < 4), `t` 3 (c < 3) and `sumqx`, `sumq2` 4. A
// shift code is k < 4 or 3 - k, within MASKS.
pub fn quantize_m(x: &[f32], y: &mut [u8], qw: Option<&[f32]>) {
    const MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
    let lat = get(TableKind::Iq1S);
    for ((xbl, qb), yb) in blocks::<QK_K, _>(x).zip(weight_blocks::<QK_K>(qw)).zip(blocks_mut::<56, _>(y)) {
        yb.fill(0);
        let sigma2 = 2.0 * sum_sq(xbl) / QK_K as f32;
        let (mut scales, mut shifts) = ([0f32; 16], [0usize; 16]);
        let mut max_scale = 0f32;
        let qw_of = |ib: usize| qb.map(|q| &q[16 * ib..16 * ib + 16]);
        for ib in 0..16 {
            let xb = &xbl[16 * ib..16 * ib + 16];
            let w = weights(xb, qw_of(ib), sigma2);
            let max = absmax(xb);
            if max < 1e-7 {
                continue;
            }
            let idx = sorted(xb);
            let xs = [&X_P, &X_M];
            let mut best_score = -f32::MAX;
            let mut scale = max;
            let mut best: Option<(usize, usize, usize)> = None;
            for i1 in 0..=16 {
                for i2 in i1..=16 {
                    let (mut sumqx, mut sumq2) = ([0f32; 4], [0f32; 4]);
                    for (j, &i) in idx.iter().enumerate() {
                        let c = if j < i1 {
                            0
                        } else if j < i2 {
                            1
                        } else {
                            2
                        };
                        // Shift code k: bit 1 picks the first group's table, bit 0 the second's.
                        for k in 0..4 {
                            let t = if i < 8 { xs[k / 2] } else { xs[k % 2] };
                            sumqx[k] += w[i] * t[c] * xb[i];
                            sumq2[k] += w[i] * t[c] * t[c];
                        }
                    }
                    for k in 0..4 {
                        if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            best = Some((i1, i2, k));
                        }
                    }
                }
            }
            let Some((i1, i2, mut best_k)) = best else { continue };
            let mut l = [0i8; 16];
            if split_codes(&idx, i1, i2, &mut scale, &mut l) {
                best_k = 3 - best_k;
            }
            let (index, all_on) = group_indices::<2>(&lat, &mut l, xb, &w, scale, |k| m_shift(best_k, k));
            if !all_on {
                scale = rescore(&lat, &index, |k| m_shift(best_k, k), xb, &w, scale);
            }
            yb[2 * ib] = index[0] as u8;
            yb[2 * ib + 1] = index[1] as u8;
            yb[32 + ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            shifts[ib] = best_k;
            max_scale = cmax(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let mut sc = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for ib in 0..16 {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
            sc[ib / 4] |= (l << (3 * (ib % 4))) as u16;
            yb[32 + ib] |= MASKS[shifts[ib]];
            let xb = &xbl[16 * ib..16 * ib + 16];
            let w = weights(xb, qw_of(ib), sigma2);
            for (k, (xg, wg)) in blocks::<8, _>(xb).zip(blocks::<8, _>(&w)).enumerate().take(2) {
                let xx = m_shift(shifts[ib], k);
                let g = yb[2 * ib + k] as usize + (((yb[32 + ib] as usize) << (8 - 4 * k)) & 0x700);
                for ((&p, &xv), &wi) in lat.point(g).iter().zip(xg).zip(wg) {
                    let q = shifted(xx, p) * (2 * l + 1) as f32;
                    sumqx += wi * q * xv;
                    sumq2 += wi * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = f32_to_f16_bits(d * 1.1125);
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
        for (i, v) in sc.iter().enumerate() {
            put(yb, 48 + 2 * i, v.to_le_bytes());
        }
    }
}

/// Eight values of IQ1 grid entry `g` (bytes -1/0/1) shifted by `delta`, times `dl`.
#[inline]
fn put8(o: &mut [f32], dl: f32, g: u64, delta: f32) {
    for (j, v) in o.iter_mut().take(8).enumerate() {
        *v = dl * (((g >> (8 * j)) as u8 as i8) as f32 + delta);
    }
}

// BOUNDS-FN: `b` is [u8; 50] and `yb` [f32; 256]; ib < 8 and l < 4, so
// 2 + 4 * ib + l < 34 and 32 * ib + 8 * l + 8 <= 256. IQ1S_GRID has 2048 entries:
// a byte and three bits above it.
pub fn s_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<50, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let qh = rd_u16(b, 34 + 2 * ib) as usize;
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 != 0 { -DELTA } else { DELTA };
            for l in 0..4 {
                let g = IQ1S_GRID[b[2 + 4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8)];
                put8(&mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8], dl, g, delta);
            }
        }
    }
}

// BOUNDS-FN: `b` is [u8; 56] and `yb` [f32; 256]; ib < 8 and l < 4, so ib / 2 < 4
// (`sc` is [u16; 4]), 4 * ib + 4 <= 32 (`qs` has 4 bytes), 33 + 2 * ib < 48 and
// 32 * ib + 8 * l + 8 <= 256; `qh`, `idx` and `delta` are arrays of 2, 4 and 4.
// IQ1S_GRID has 2048 entries: a byte and three bits (0x700) above it.
pub fn m_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<56, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let sc: [u16; 4] = std::array::from_fn(|i| rd_u16(b, 48 + 2 * i));
        let bits = (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        let d = f16_bits_to_f32(bits);
        for ib in 0..8 {
            let s = sc[ib / 2] as usize;
            let dl1 = d * (2 * ((s >> (6 * (ib % 2))) & 7) + 1) as f32;
            let dl2 = d * (2 * ((s >> (6 * (ib % 2) + 3)) & 7) + 1) as f32;
            let qs = &b[4 * ib..4 * ib + 4];
            let qh = [b[32 + 2 * ib] as usize, b[33 + 2 * ib] as usize];
            let idx = [
                qs[0] as usize | ((qh[0] << 8) & 0x700),
                qs[1] as usize | ((qh[0] << 4) & 0x700),
                qs[2] as usize | ((qh[1] << 8) & 0x700),
                qs[3] as usize | ((qh[1] << 4) & 0x700),
            ];
            let dsign = |m: usize| if m != 0 { -DELTA } else { DELTA };
            let delta = [dsign(qh[0] & 0x08), dsign(qh[0] & 0x80), dsign(qh[1] & 0x08), dsign(qh[1] & 0x80)];
            for l in 0..4 {
                let dl = if l < 2 { dl1 } else { dl2 };
                put8(&mut yb[32 * ib + 8 * l..32 * ib + 8 * l + 8], dl, IQ1S_GRID[idx[l]], delta[l]);
            }
        }
    }
}
