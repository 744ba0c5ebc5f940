//! Pooling: max or average, global, adaptive, pad modes 0 (full/ceil),
//! 1 (valid), 2 (SAME_UPPER), 3 (SAME_LOWER).

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;
use super::kernels::pool_rows;
use crate::base::simd;

pub struct Pooling {
    kind: i32,
    kw: usize,
    kh: usize,
    sw: usize,
    sh: usize,
    pl: usize,
    pr: usize,
    pt: usize,
    pb: usize,
    global: bool,
    pad_mode: i32,
    include_pad: bool,
    adaptive: bool,
    out_w: usize,
    out_h: usize,
}

impl Pooling {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Pooling> {
        let nn = |v: i32, what: &str| -> anyhow::Result<usize> {
            if v < 0 {
                ncnn_bail!("{what} must not be negative, got {v}");
            }
            Ok(v as usize)
        };
        let kw = pd.int(1, 0);
        let sw = pd.int(2, 1);
        let pl = pd.int(3, 0);
        let pt = pd.int(13, pl);
        let out_w = pd.int(8, 0);
        let p = Pooling {
            kind: pd.int(0, 0),
            kw: nn(kw, "kernel_w")?,
            kh: nn(pd.int(11, kw), "kernel_h")?,
            sw: nn(sw, "stride_w")?,
            sh: nn(pd.int(12, sw), "stride_h")?,
            pl: nn(pl, "pad_left")?,
            pr: nn(pd.int(14, pl), "pad_right")?,
            pt: nn(pt, "pad_top")?,
            pb: nn(pd.int(15, pt), "pad_bottom")?,
            global: pd.int(4, 0) != 0,
            pad_mode: pd.int(5, 0),
            include_pad: pd.int(6, 0) != 0,
            adaptive: pd.int(7, 0) != 0,
            out_w: nn(out_w, "out_w")?,
            out_h: nn(pd.int(18, out_w), "out_h")?,
        };
        if p.kind != 0 && p.kind != 1 {
            ncnn_bail!("pooling_type {} is not 0 (max) or 1 (average)", p.kind);
        }
        if !p.global && !p.adaptive && (p.kw == 0 || p.kh == 0 || p.sw == 0 || p.sh == 0) {
            ncnn_bail!(
                "kernel and stride must be positive (kernel {}x{}, stride {}x{})",
                p.kw,
                p.kh,
                p.sw,
                p.sh
            );
        }
        if !(0..=3).contains(&p.pad_mode) {
            ncnn_bail!("pad_mode {} is not 0 to 3", p.pad_mode);
        }
        Ok(p)
    }

    // BOUNDS-FN: callers pass rows y0..y1 <= h and columns x0..x1 <= w of a plane of
    // w * h values (global: the whole plane; adaptive: ceil((i + 1) * n / out) <= n).
    fn reduce(
        &self,
        x: &[f32],
        w: usize,
        y0: usize,
        y1: usize,
        x0: usize,
        x1: usize,
        div: usize,
    ) -> f32 {
        // Eight partial results, so the loop vectorises.
        let mut acc = [if self.kind == 0 { f32::NEG_INFINITY } else { 0.0 }; 8];
        for y in y0..y1 {
            let row = &x[y * w + x0..y * w + x1];
            let mut it = row.chunks_exact(8);
            for c in &mut it {
                for (a, v) in acc.iter_mut().zip(c) {
                    *a = if self.kind == 0 { a.max(*v) } else { *a + v };
                }
            }
            for (a, v) in acc.iter_mut().zip(it.remainder()) {
                *a = if self.kind == 0 { a.max(*v) } else { *a + v };
            }
        }
        if self.kind == 0 {
            acc.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v))
        } else {
            acc.iter().sum::<f32>() / div.max(1) as f32
        }
    }
}

impl Layer for Pooling {
    // BOUNDS-FN: out chunks of 1 (o[0]) and planes of ow * oh (i < oh, j < ow).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Pooling")?;
        if x.dims != 3 {
            ncnn_bail!("expects a 3-d input (w, h, c), got shape {}", x.describe());
        }
        let (w, h, c) = (x.w, x.h, x.c);
        if self.global {
            let mut out = Mat::new_1d(c);
            par::chunks_mut(&mut out.data, 1, |q, o| {
                o[0] = self.reduce(x.channel(q), w, 0, h, 0, w, w * h);
            });
            return Ok(vec![out]);
        }
        if self.adaptive {
            let (ow, oh) = (
                if self.out_w == 0 { w } else { self.out_w },
                if self.out_h == 0 { h } else { self.out_h },
            );
            let mut out = Mat::new_3d(ow, oh, c);
            par::chunks_mut(&mut out.data, ow * oh, |q, o| {
                    let src = x.channel(q);
                    for i in 0..oh {
                        let (y0, y1) = (i * h / oh, ((i + 1) * h + oh - 1) / oh);
                        for j in 0..ow {
                            let (x0, x1) = (j * w / ow, ((j + 1) * w + ow - 1) / ow);
                            o[i * ow + j] =
                                self.reduce(src, w, y0, y1, x0, x1, (y1 - y0) * (x1 - x0));
                        }
                    }
                });
            return Ok(vec![out]);
        }
        Ok(vec![self.windowed(&x, simd::avx2_fma())?])
    }
}

impl Pooling {
    /// Pooling over kernel windows (not global or adaptive) of a 3-d `x`,
    /// on the AVX2 row kernels when `fast`.
    // Bounds: spans clamp each window's rows and columns into the input; the `full`
    // columns' windows lie inside the input, so first + kw - 1 + (len - 1) * sw < w,
    // and acc has w + SLACK values (windows asserts its own need); q < x.c.
    // BOUNDS-FN: every index is in range as said just above.
    pub(crate) fn windowed(&self, x: &Mat, fast: bool) -> anyhow::Result<Mat> {
        let (w, h) = (x.w, x.h);
        let (kw, kh, sw, sh) = (self.kw, self.kh, self.sw, self.sh);
        // Padding of the (virtual) bordered input: pads plus tail pads.
        let (mut pl, mut pr, mut pt, mut pb) = (self.pl, self.pr, self.pt, self.pb);
        let (mut tail_w, mut tail_h) = (0, 0);
        match self.pad_mode {
            0 => {
                let ww = w + pl + pr;
                let hh = h + pt + pb;
                if ww >= kw && (ww - kw) % sw != 0 {
                    tail_w = sw - (ww - kw) % sw;
                }
                if hh >= kh && (hh - kh) % sh != 0 {
                    tail_h = sh - (hh - kh) % sh;
                }
            }
            1 => {}
            _ => {
                let wpad = (kw + (w - 1) / sw * sw) as i64 - w as i64;
                let hpad = (kh + (h - 1) / sh * sh) as i64 - h as i64;
                let (wpad, hpad) = (wpad.max(0) as usize, hpad.max(0) as usize);
                if self.pad_mode == 2 {
                    (pl, pr, pt, pb) = (wpad / 2, wpad - wpad / 2, hpad / 2, hpad - hpad / 2);
                } else {
                    (pl, pr, pt, pb) = (wpad - wpad / 2, wpad / 2, hpad - hpad / 2, hpad / 2);
                }
            }
        }
        let ww = w + pl + pr + tail_w;
        let hh = h + pt + pb + tail_h;
        if ww < kw || hh < kh {
            ncnn_bail!(
                "input {}x{} (w x h, padded) is smaller than the {}x{} kernel",
                ww,
                hh,
                kw,
                kh
            );
        }
        let (ow, oh) = ((ww - kw) / sw + 1, (hh - kh) / sh + 1);
        // Every value is written below.
        let mut out = Mat::for_overwrite_3d(ow, oh, x.c);
        // SAME padding counts towards the average like explicit padding with count_include_pad.
        let include_pad = self.include_pad || self.pad_mode >= 2;
        let is_max = self.kind == 0;
        // Rows/columns of each window inside the input, and the averaging counts.
        let span = |i: usize,
                    s: usize,
                    k: usize,
                    p0: usize,
                    n: usize,
                    p1: usize|
         -> (usize, usize, usize) {
            let (b0, b1) = (i * s, i * s + k);
            let lo = b0.max(p0).min(p0 + n) - p0;
            let hi = b1.max(p0).min(p0 + n) - p0;
            let cnt = if include_pad {
                b1.min(p0 + n + p1) - b0.min(p0 + n + p1)
            } else {
                hi - lo
            };
            (lo, hi, cnt)
        };
        let rows: Vec<(usize, usize, usize)> =
            (0..oh).map(|i| span(i, sh, kh, pt, h, pb)).collect();
        let cols: Vec<(usize, usize, usize)> =
            (0..ow).map(|j| span(j, sw, kw, pl, w, pr)).collect();
        let init = if is_max { f32::NEG_INFINITY } else { 0.0 };
        // Output columns whose window lies wholly inside the input.
        let full = {
            let inside = |j: usize| j * sw >= pl && j * sw + kw <= pl + w;
            let j0 = (0..ow).find(|&j| inside(j)).unwrap_or(ow);
            let j1 = (j0..ow).find(|&j| !inside(j)).unwrap_or(ow);
            j0..j1
        };
        par::chunks_mut(&mut out.data, ow * oh, |q, o| {
            let src = x.channel(q);
            // The window's rows reduced to one, with room for the row
            // kernel's wide loads.
            let mut acc = vec![init; w + pool_rows::SLACK];
            let mut hm = Vec::new();
            for (i, &(y0, y1, cy)) in rows.iter().enumerate() {
                pool_rows::reduce_rows(src, y0..y1, &mut acc[..w], is_max, fast);
                let orow = &mut o[i * ow..(i + 1) * ow];
                // Whole windows in one go where a row kernel fits.
                let mut done = false;
                if !full.is_empty() {
                    let first = full.start * sw - pl;
                    let div = (cy * kw).max(1) as f32;
                    let dst = &mut orow[full.clone()];
                    done = pool_rows::windows(&acc[first..], dst, kw, sw, is_max, div, fast);
                    if !done && is_max {
                        // The running maximum over kw neighbours at
                        // stride 1, then every sw-th of it.
                        let span = (full.len() - 1) * sw + 1;
                        hm.resize(span, init);
                        hm.copy_from_slice(&acc[first..first + span]);
                        for kx in 1..kw {
                            let a = &acc[first + kx..first + kx + span];
                            hm.iter_mut().zip(a).for_each(|(m, v)| *m = pool_rows::max(*m, *v));
                        }
                        for (m, v) in dst.iter_mut().zip(hm.iter().step_by(sw)) {
                            *m = *v;
                        }
                        done = true;
                    }
                }
                // The remaining columns, one window at a time.
                let rest = if done {
                    (0..full.start).chain(full.end..ow)
                } else {
                    (0..ow).chain(0..0)
                };
                for j in rest {
                    let (x0, x1, cx) = cols[j];
                    let win = &acc[x0..x1];
                    orow[j] = if is_max {
                        win.iter().fold(f32::NEG_INFINITY, |m, v| m.max(*v))
                    } else if win.is_empty() || y1 == y0 {
                        0.0
                    } else {
                        win.iter().sum::<f32>() / (cy * cx).max(1) as f32
                    };
                }
            }
        });
        Ok(out)
    }
}

#[cfg(test)]
#[path = "pooling_tests.rs"]
mod tests;
