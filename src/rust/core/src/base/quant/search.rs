//! Nearest-grid-point searches of the IQ2 and IQ3 quantizers.

use super::tables::Lattice;
use super::util::{blocks, blocks_mut, cmax, nearest_int};

/// ggml's `iq2_find_best_neighbour` / `iq3_find_best_neighbour`: among the
/// grid points `cands`, the one nearest to `xval` at `scale` in the weighted
/// distance; writes its codes into `l` and returns its index.
pub fn best_of(lat: &Lattice, cands: impl Iterator<Item = usize>, xval: &[f32], w: &[f32], scale: f32, l: &mut [i8]) -> usize {
    let mut best_d2 = f32::MAX;
    let mut best = None;
    for j in cands {
        let mut d2 = 0f32;
        for ((&p, &xv), &wi) in lat.point(j).iter().zip(xval).zip(w) {
            let diff = scale * p as f32 - xv;
            d2 += wi * diff * diff;
        }
        if d2 < best_d2 {
            best_d2 = d2;
            best = Some(j);
        }
    }
    // Distances that are all NaN leave no choice; the first point is as good as any.
    let best = best.unwrap_or(0);
    for (li, &p) in l.iter_mut().zip(lat.point(best)) {
        *li = (p - 1) / 2;
    }
    best
}

/// The grid index of the point with codes `key`, or, off the grid, of its
/// best listed neighbour (then `l` receives that neighbour's codes). Keys
/// outside the table (codes that do not fit) search the whole grid.
pub fn index_or_neighbour(lat: &Lattice, key: usize, xval: &[f32], w: &[f32], scale: f32, l: &mut [i8]) -> (usize, bool) {
    match lat.map.get(key) {
        Some(&e) if e >= 0 => (e as usize, true),
        Some(&e) => {
            let cands = lat.neighbours_of(e).iter().map(|&j| j as usize);
            (best_of(lat, cands, xval, w, scale, l), false)
        }
        None => (best_of(lat, 0..lat.grid.len() / lat.dim, xval, w, scale, l), false),
    }
}

/// The key of codes `l` (`bits` each).
pub fn key(l: &[i8], bits: u32) -> usize {
    l.iter().enumerate().map(|(i, &v)| ((v as u8 as usize) & 0xFF) << (bits as usize * i)).sum()
}

/// Magnitudes of a group of 8 and its sign bits; with `even`, the sign of
/// the least important value is flipped when needed so that the number of
/// negative signs is even (IQ2_XXS, IQ2_XS, IQ3_XXS store 7 sign bits).
// BOUNDS-FN: the slices are [f32; 8] and i, imin < 8.
pub fn signs8(xb: &[f32; 8], w: &[f32; 8], xval: &mut [f32; 8], even: bool) -> u8 {
    let (mut nflip, mut s) = (0, 0u8);
    for i in 0..8 {
        if xb[i] >= 0.0 {
            xval[i] = xb[i];
        } else {
            xval[i] = -xb[i];
            nflip += 1;
            s |= 1 << i;
        }
    }
    if even && nflip % 2 == 1 {
        let mut imin = 0;
        let mut min = w[0] * xb[0] * xb[0];
        for i in 1..8 {
            let ax = w[i] * xb[i] * xb[i];
            if ax < min {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1 << imin;
    }
    if even {
        s & 127
    } else {
        s
    }
}

/// sum w * x * q and sum w * q^2 with q = 2*l + 1.
pub fn sums(xval: &[f32], w: &[f32], l: &[i8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for ((&x, &wi), &li) in xval.iter().zip(w).zip(l) {
        let q = (2 * li as i32 + 1) as f32;
        sumqx += wi * x * q;
        sumq2 += wi * q * q;
    }
    (sumqx, sumq2)
}

/// Codes of `xval` at inverse scale `id` (coordinate 2*code + 1), clamped to [0, kmax - 1].
pub fn codes(xval: &[f32], id: f32, kmax: i32, l: &mut [i8]) {
    for (li, &v) in l.iter_mut().zip(xval) {
        *li = nearest_int(0.5 * (id * v - 1.0)).clamp(0, kmax - 1) as i8;
    }
}

/// One group of values as the IQ2 / IQ3 quantizers see it.
pub struct Group {
    pub w: Vec<f32>,
    /// Square roots of the weights (the neighbour searches use these).
    pub waux: Vec<f32>,
    /// Magnitudes (after the parity flip of `signs8`).
    pub xval: Vec<f32>,
    /// Sign bits of each 8 values.
    pub signs: Vec<u8>,
    pub max: f32,
}

impl Group {
    /// Weights `qw * sqrt(sigma2 + x^2)` with an importance matrix, else
    /// `plain(x)`; `even` as in [`signs8`].
    pub fn new(xb: &[f32], qw: Option<&[f32]>, sigma2: f32, plain: impl Fn(f32) -> f32, even: bool) -> Group {
        let w: Vec<f32> = match qw {
            Some(q) => xb.iter().zip(q).map(|(&v, &q)| q * (sigma2 + v * v).sqrt()).collect(),
            None => xb.iter().map(|&v| plain(v)).collect(),
        };
        let waux = w.iter().map(|v| v.sqrt()).collect();
        let mut xval = vec![0f32; xb.len()];
        let signs = blocks::<8, _>(xb)
            .zip(blocks::<8, _>(&w))
            .zip(blocks_mut::<8, _>(&mut xval))
            .map(|((xg, wg), vg)| signs8(xg, wg, vg, even))
            .collect();
        let max = xval.split_first().map_or(0.0, |(&first, rest)| rest.iter().fold(first, |m, &v| cmax(m, v)));
        Group { w, waux, xval, signs, max }
    }
}

/// The scale search of the IQ2 / IQ3 quantizers: try the inverse scales
/// `(2 kmax - 1 + step * is) / max`, put each group of `dim` codes on the grid
/// (best neighbour when off it), keep the scale that best fits the values,
/// then requantize at that scale the groups it leaves off the grid.
pub struct ScaleSearch {
    pub dim: usize,
    pub bits: u32,
    pub kmax: i32,
    pub steps: std::ops::RangeInclusive<i32>,
    pub step: f32,
    /// Whether the groups count as on the grid before a scale is accepted.
    pub start_on: bool,
    /// Requantize only the groups off the grid (else all of them).
    pub only_off: bool,
    /// Requantize whenever the scale is positive, even with every group on the grid.
    pub always: bool,
}

impl ScaleSearch {
    /// Returns each group's grid index and the scale; `l` holds the codes
    /// (its initial contents stand when no scale is accepted). Works on the
    /// values all four slices hold, in whole groups of `dim`.
    // BOUNDS-FN: n is the least of the four lengths and the slices (and `laux`)
    // are cut to it; k < ng = n / dim, so dim * k + dim <= n; `on` and `on_aux`
    // have ng entries.
    pub fn run(&self, lat: &Lattice, xval: &[f32], w: &[f32], waux: &[f32], max: f32, scale0: f32, l: &mut [i8]) -> (Vec<usize>, f32) {
        let dim = self.dim;
        let n = xval.len().min(w.len()).min(waux.len()).min(l.len());
        let ng = n.checked_div(dim).unwrap_or(0);
        let (xval, w, waux, l) = (&xval[..n], &w[..n], &waux[..n], &mut l[..n]);
        let mut laux = vec![0i8; n];
        let mut best = 0f32;
        let mut scale = scale0;
        let mut on = vec![self.start_on; ng];
        for is in self.steps.clone() {
            let id = ((2 * self.kmax - 1) as f32 + is as f32 * self.step) / max;
            let this_scale = 1.0 / id;
            let mut on_aux = vec![true; ng];
            for k in 0..ng {
                let r = dim * k..dim * k + dim;
                codes(&xval[r.clone()], id, self.kmax, &mut laux[r.clone()]);
                let u = key(&laux[r.clone()], self.bits);
                on_aux[k] = index_or_neighbour(lat, u, &xval[r.clone()], &waux[r.clone()], this_scale, &mut laux[r]).1;
            }
            let (sumqx, sumq2) = sums(xval, w, &laux);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                l.copy_from_slice(&laux);
                on = on_aux;
            }
        }
        if (self.always || on.iter().any(|&o| !o)) && scale > 0.0 {
            let id = 1.0 / scale;
            for k in 0..ng {
                if self.only_off && on[k] {
                    continue;
                }
                let r = dim * k..dim * k + dim;
                let mut lk = vec![0i8; dim];
                codes(&xval[r.clone()], id, self.kmax, &mut lk);
                let u = key(&lk, self.bits);
                let (g, _) = index_or_neighbour(lat, u, &xval[r.clone()], &waux[r.clone()], scale, &mut l[r.clone()]);
                for (li, &p) in l[r].iter_mut().zip(lat.point(g)) {
                    *li = (p - 1) / 2;
                }
            }
            let (sumqx, sumq2) = sums(xval, w, l);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        let idx = (0..ng)
            .map(|k| {
                let r = dim * k..dim * k + dim;
                let u = key(&l[r.clone()], self.bits);
                index_or_neighbour(lat, u, &xval[r.clone()], &waux[r.clone()], scale.abs(), &mut l[r]).0
            })
            .collect();
        (idx, scale)
    }
}

/// A negative scale made positive by flipping the group's signs (`mask`
/// 127 for the 7-bit sign codes, 255 for plain sign bytes).
pub fn make_positive(scale: &mut f32, signs: &mut [u8], mask: u8) {
    if *scale < 0.0 {
        *scale = -*scale;
        for s in signs.iter_mut() {
            *s = !*s & mask;
        }
    }
}

/// Sub-block scales as 4-bit codes `round((s / d - 1) / 2)` (`id` = 1/d), two per byte.
pub fn pack_scales4(id: f32, scales: &[f32], out: &mut [u8]) {
    out.fill(0);
    for (i, &s) in scales.iter().enumerate() {
        let l = nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u8;
        if let Some(o) = out.get_mut(i / 2) {
            *o |= l << (4 * (i % 2));
        }
    }
}
