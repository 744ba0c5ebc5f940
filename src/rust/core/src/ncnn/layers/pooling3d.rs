//! Pooling3D: max or average over a 4-d blob (w, h, d, c): global (to one
//! value per channel), adaptive (to out_w/h/d, -233 keeping an extent), or
//! over kernel windows with pad modes 0 (full: tail pads so that the last
//! window fits), 1 (valid), 2 (SAME_UPPER) and 3 (SAME_LOWER). An average
//! counts padding when count_include_pad is set, and in the SAME modes.

use super::kernels::window::positive;
use super::kernels::volume::{self, Pads, Window3, POOL_KEYS};
use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Pooling3d {
    max: bool,
    /// None for a global or adaptive pooling, which has no window.
    win: Option<Window3>,
    global: bool,
    pad_mode: i32,
    include_pad: bool,
    adaptive: bool,
    out: [i32; 3],
}

const WHAT: &str = "Pooling3D";

impl Pooling3d {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Pooling3d> {
        let kind = pd.int(0, 0);
        if kind != 0 && kind != 1 {
            ncnn_bail!("{WHAT}: pooling_type {kind} is not 0 (max) or 1 (average)");
        }
        let global = pd.int(4, 0) != 0;
        let adaptive = pd.int(7, 0) != 0;
        let pad_mode = pd.int(5, 0);
        if !(0..=3).contains(&pad_mode) {
            ncnn_bail!("{WHAT}: pad_mode {pad_mode} is not 0 (full), 1 (valid), 2 (SAME_UPPER) or 3 (SAME_LOWER)");
        }
        let ow = pd.int(8, 0);
        let out = [ow, pd.int(18, ow), pd.int(28, ow)];
        if adaptive && !global {
            for v in out {
                if v != -233 {
                    positive(v, &format!("{WHAT}: adaptive output size (keys 8, 18, 28; -233 keeps the input's)"))?;
                }
            }
        }
        let win = if global || adaptive { None } else { Some(Window3::read(pd, &POOL_KEYS, WHAT)?) };
        if let Some(w) = &win {
            if w.pad.iter().flatten().any(|&v| v < 0) {
                ncnn_bail!("{WHAT}: pads must not be negative, got {:?} (SAME padding is pad_mode 2 or 3)", w.pad);
            }
        }
        Ok(Pooling3d { max: kind == 0, win, global, pad_mode, include_pad: pd.int(6, 0) != 0, adaptive, out })
    }

    /// Max or mean of `src` (a channel of extents `n`) over the box
    /// `lo..hi` per axis; `count` divides the sum (an average of no
    /// values, a window wholly in the tail pads, is NaN, as in ncnn).
    // BOUNDS-FN: lo, hi and n are [usize; 3] (literals); callers pass lo <= hi <= n
    // per axis of a channel of n[0] * n[1] * n[2] values.
    fn reduce(&self, src: &[f32], n: [usize; 3], lo: [usize; 3], hi: [usize; 3], count: usize) -> f32 {
        let mut acc = if self.max { f32::NEG_INFINITY } else { 0.0 };
        for z in lo[2]..hi[2] {
            for y in lo[1]..hi[1] {
                let row = &src[(z * n[1] + y) * n[0] + lo[0]..(z * n[1] + y) * n[0] + hi[0]];
                acc = if self.max { row.iter().fold(acc, |m, v| m.max(*v)) } else { acc + row.iter().sum::<f32>() };
            }
        }
        if self.max {
            acc
        } else {
            acc / count as f32
        }
    }

    // BOUNDS-FN: on, n and self.out are [_; 3] (a < 3, literals); new_volume refuses
    // an empty output, so on[a] >= 1 and each span ends within n[a]; q < x.c.
    fn adaptive(&self, x: &Mat, n: [usize; 3]) -> anyhow::Result<Mat> {
        let mut on = [0; 3];
        for a in 0..3 {
            on[a] = if self.out[a] == -233 { n[a] } else { self.out[a] as usize };
        }
        if on == n {
            return Ok(x.clone());
        }
        let mut out = volume::new_volume(on, x.c, WHAT)?;
        let span = |i: usize, a: usize| (i * n[a] / on[a], ((i + 1) * n[a]).div_ceil(on[a]));
        par::chunks_mut(&mut out.data, on.iter().product(), |q, o| {
            let src = x.channel(q);
            for (i, v) in o.iter_mut().enumerate() {
                let (x0, x1) = span(i % on[0], 0);
                let (y0, y1) = span(i / on[0] % on[1], 1);
                let (z0, z1) = span(i / (on[0] * on[1]), 2);
                *v = self.reduce(src, n, [x0, y0, z0], [x1, y1, z1], (x1 - x0) * (y1 - y0) * (z1 - z0));
            }
        });
        Ok(out)
    }

    /// (borders of the padded input, of which the tail pads of mode 0).
    // BOUNDS-FN: p, tail, all, n and the window arrays are [_; 3] (pairs [_; 2]), a < 3.
    fn pads(&self, win: &Window3, n: [usize; 3]) -> (Pads, [usize; 3]) {
        let mut tail = [0; 3];
        let p = match self.pad_mode {
            0 | 1 => win.explicit(),
            m => win.same(n, m == 3),
        };
        if self.pad_mode == 0 {
            for a in 0..3 {
                let total = n[a] + p[a][0] + p[a][1];
                if total >= win.k[a] && (total - win.k[a]) % win.s[a] != 0 {
                    tail[a] = win.s[a] - (total - win.k[a]) % win.s[a];
                }
            }
        }
        let mut all = p;
        for a in 0..3 {
            all[a][1] += tail[a];
        }
        (all, tail)
    }

    // BOUNDS-FN: pn, on, pos, lo, hi, region, given and tail are [_; 3] (pairs [_; 2]),
    // a < 3; lo and hi are clamped into region, within pn; q < x.c.
    fn windowed(&self, win: &Window3, x: &Mat, n: [usize; 3]) -> anyhow::Result<Mat> {
        let (p, tail) = self.pads(win, n);
        let fill = if self.max { f32::NEG_INFINITY } else { 0.0 };
        let xp = volume::border(x, p, fill, WHAT)?;
        let pn = [xp.w, xp.h, xp.d];
        let on = win.slide(pn, WHAT)?;
        let mut out = volume::new_volume(on, x.c, WHAT)?;
        // An average without padding counts the taps inside the region of
        // the input and its explicit pads (ncnn's rule: in the SAME modes
        // the given pads, which are zero there, so padding counts).
        let given = win.explicit();
        let inside = |a: usize| {
            if self.include_pad || self.max {
                (0, pn[a])
            } else {
                (given[a][0], pn[a] - (given[a][1] + tail[a]).min(pn[a]))
            }
        };
        let region = [inside(0), inside(1), inside(2)];
        let maxk = win.taps();
        par::chunks_mut(&mut out.data, on.iter().product(), |q, o| {
            let src = xp.channel(q);
            for (i, v) in o.iter_mut().enumerate() {
                let pos = [i % on[0], i / on[0] % on[1], i / (on[0] * on[1])];
                let (mut lo, mut hi) = ([0; 3], [0; 3]);
                for a in 0..3 {
                    let b = pos[a] * win.s[a];
                    lo[a] = b.clamp(region[a].0, region[a].1.max(region[a].0));
                    hi[a] = (b + win.k[a]).clamp(lo[a], region[a].1.max(lo[a]));
                }
                let count = if self.include_pad { maxk } else { (0..3).map(|a| hi[a] - lo[a]).product() };
                *v = self.reduce(src, pn, lo, hi, count);
            }
        });
        Ok(out)
    }
}

impl Layer for Pooling3d {
    // BOUNDS-FN: out chunks of 1 value (o[0]).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, WHAT)?;
        let n = volume::extents(&x, None, WHAT)?;
        if self.global {
            let mut out = Mat::new_1d(x.c);
            let size = x.cstep();
            par::chunks_mut(&mut out.data, 1, |q, o| o[0] = self.reduce(x.channel(q), [size, 1, 1], [0; 3], [size, 1, 1], size));
            return Ok(vec![out]);
        }
        if self.adaptive {
            return Ok(vec![self.adaptive(&x, n)?]);
        }
        match &self.win {
            Some(win) => Ok(vec![self.windowed(win, &x, n)?]),
            None => ncnn_bail!("{WHAT}: no kernel window"),
        }
    }
}
