//! Four-bit non-linear formats IQ4_NL (`d qs[16]`, 32 values) and IQ4_XS
//! (`d scales_h (u16) scales_l[4] qs[128]`, 256 values in 8 groups of 32
//! with 6-bit signed scales). Codes index the non-uniform table `KVALUES`.

use super::util::{best_index_int8, blocks, blocks_mut, nearest_int, put, rd_f16, rd_u16, signed_absmax, sum_sq, weight_blocks, wr_f16, GROUP_MAX_EPS};
use super::types::QK_K;

pub const KVALUES: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// Where one super-block of an IQ4 type goes.
struct Out<'a> {
    d: &'a mut [u8],
    qs: &'a mut [u8],
    /// IQ4_XS only: the high and low parts of the group scales.
    scales: Option<(&'a mut [u8], &'a mut [u8])>,
}

/// ggml's `quantize_row_iq4_nl_impl` for one super-block of `x.len()` values
/// in groups of 32; `ntry` > 0 searches 2 * ntry + 1 scales per group.
/// `l` keeps its contents between calls, as in ggml. Writes nothing unless
/// `x` is at least one whole group and `l`, `qw`, `qs` (and the scales) hold
/// all of its values.
// BOUNDS-FN: the lengths are checked on entry: nb >= 1 groups of 32 in `x`,
// `l` and `qw`, 16 * nb bytes of `qs`, (nb + 1) / 2 of `sl`; ib < nb, j < 32
// (16 in `qs`) and `scales` has nb entries. KVALUES has 16 entries and
// best_index_int8 returns an index of it.
fn superblock(x: &[f32], out: Out<'_>, qw: Option<&[f32]>, ntry: i32, l: &mut [u8]) {
    let nb = x.len() / 32;
    let n = 32 * nb;
    let fits = nb > 0
        && l.len() >= n
        && out.qs.len() >= 16 * nb
        && qw.is_none_or(|q| q.len() >= n)
        && out.scales.as_ref().is_none_or(|(_, sl)| sl.len() >= nb.div_ceil(2));
    if !fits {
        return;
    }
    let sigma2 = sum_sq(x) * (2.0 / n as f32);
    out.qs.fill(0);
    wr_f16(out.d, 0, 0.0);
    let mut scales = vec![0f32; nb];
    let (mut max_scale, mut amax_scale) = (0f32, 0f32);
    let v0 = KVALUES[0] as f32;
    for ib in 0..nb {
        let xb = &x[32 * ib..32 * ib + 32];
        let w: Vec<f32> = match qw {
            Some(q) => (0..32).map(|j| q[32 * ib + j] * (sigma2 + xb[j] * xb[j]).sqrt()).collect(),
            None => xb.iter().map(|v| v * v).collect(),
        };
        let (amax, max) = signed_absmax(xb);
        if amax < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
        let mut id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for j in 0..32 {
            let li = best_index_int8(&KVALUES, id * xb[j]);
            l[32 * ib + j] = li as u8;
            let q = KVALUES[li] as f32;
            sumqx += w[j] * q * xb[j];
            sumq2 += w[j] * q * q;
        }
        d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        let mut best = d * sumqx;
        for itry in -ntry..=ntry {
            id = (itry as f32 + v0) / max;
            sumqx = 0.0;
            sumq2 = 0.0;
            for j in 0..32 {
                let q = KVALUES[best_index_int8(&KVALUES, id * xb[j])] as f32;
                sumqx += w[j] * q * xb[j];
                sumq2 += w[j] * q * q;
            }
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    if let Some((sh, sl)) = out.scales {
        sh.fill(0);
        let mut h = 0u16;
        let d = -max_scale / 32.0;
        wr_f16(out.d, 0, d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for ib in 0..nb {
            let li = nearest_int(id * scales[ib]).clamp(-32, 31);
            let dl = d * li as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for j in 0..32 {
                l[32 * ib + j] = best_index_int8(&KVALUES, idl * x[32 * ib + j]) as u8;
            }
            let lu = (li + 32) as u8;
            if ib % 2 == 0 {
                sl[ib / 2] = lu & 0xF;
            } else {
                sl[ib / 2] |= (lu & 0xF) << 4;
            }
            h |= ((lu >> 4) as u16) << (2 * (ib % 8));
        }
        put(sh, 0, h.to_le_bytes());
    } else {
        wr_f16(out.d, 0, scales[0]);
        if ntry > 0 {
            let id = if scales[0] != 0.0 { 1.0 / scales[0] } else { 0.0 };
            for j in 0..n {
                l[j] = best_index_int8(&KVALUES, id * x[j]) as u8;
            }
        }
    }
    for i in 0..n / 32 {
        for j in 0..16 {
            out.qs[16 * i + j] = l[32 * i + j] | (l[32 * i + 16 + j] << 4);
        }
    }
}

pub fn iq4_nl(x: &[f32], y: &mut [u8], qw: Option<&[f32]>, ntry: i32) {
    let mut l = [0u8; 32];
    for ((xb, yb), w) in blocks::<32, _>(x).zip(blocks_mut::<18, _>(y)).zip(weight_blocks::<32>(qw)) {
        let (d, qs) = yb.split_at_mut(2);
        superblock(xb, Out { d, qs, scales: None }, w.map(|w| w.as_slice()), ntry, &mut l);
    }
}

pub fn iq4_xs(x: &[f32], y: &mut [u8], qw: Option<&[f32]>) {
    let mut l = [0u8; QK_K];
    for ((xb, yb), w) in blocks::<QK_K, _>(x).zip(blocks_mut::<136, _>(y)).zip(weight_blocks::<QK_K>(qw)) {
        let (d, rest) = yb.split_at_mut(2);
        let (sh, rest) = rest.split_at_mut(2);
        let (sl, qs) = rest.split_at_mut(4);
        superblock(xb, Out { d, qs, scales: Some((sh, sl)) }, w.map(|w| w.as_slice()), 7, &mut l);
    }
}

// BOUNDS-FN: `b` is [u8; 18] and `yb` [f32; 32]; j < 16, so 2 + j < 18 and
// j + 16 < 32; KVALUES has 16 entries and the codes are 4-bit fields.
pub fn iq4_nl_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<18, _>(x).zip(blocks_mut::<32, _>(y)) {
        let d = rd_f16(b, 0);
        for j in 0..16 {
            yb[j] = d * KVALUES[(b[2 + j] & 0xF) as usize] as f32;
            yb[j + 16] = d * KVALUES[(b[2 + j] >> 4) as usize] as f32;
        }
    }
}

// BOUNDS-FN: `b` is [u8; 136] and `yb` [f32; 256]; ib < 8, so 4 + ib / 2 < 8,
// 24 + 16 * ib <= 136 and 32 * ib + 32 <= 256; `qs` has 16 bytes, `o` 32 values
// and j < 16; KVALUES has 16 entries and the codes are 4-bit fields.
pub fn iq4_xs_deq(x: &[u8], y: &mut [f32]) {
    for (b, yb) in blocks::<136, _>(x).zip(blocks_mut::<QK_K, _>(y)) {
        let d = rd_f16(b, 0);
        let sh = rd_u16(b, 2);
        for ib in 0..8 {
            let ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) as i32 | ((((sh >> (2 * ib)) & 3) as i32) << 4);
            let dl = d * (ls - 32) as f32;
            let qs = &b[8 + 16 * ib..24 + 16 * ib];
            let o = &mut yb[32 * ib..32 * ib + 32];
            for j in 0..16 {
                o[j] = dl * KVALUES[(qs[j] & 0xF) as usize] as f32;
                o[j + 16] = dl * KVALUES[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}
