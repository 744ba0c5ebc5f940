//! GridSample: samples a 3-d blob at the points of a grid of normalised
//! coordinates (-1 .. 1 across the width and height), as PyTorch's
//! grid_sample: 0=sample_type (1 bilinear, 2 nearest, 3 bicubic),
//! 1=padding_mode (1 zeros, 2 border, 3 reflection), 2=align_corner. The
//! grid is (2, out_w, out_h) with an (x, y) pair per point, or with
//! 3=permute_fusion (out_w, out_h, 2), all x first.

use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct GridSample {
    kind: i32,
    padding: i32,
    align: bool,
    permuted: bool,
}

impl GridSample {
    pub fn new(pd: &ParamDict) -> anyhow::Result<GridSample> {
        let g = GridSample { kind: pd.int(0, 1), padding: pd.int(1, 1), align: pd.int(2, 0) != 0, permuted: pd.int(3, 0) != 0 };
        if !(1..=3).contains(&g.kind) || !(1..=3).contains(&g.padding) {
            ncnn_bail!("GridSample sample_type and padding_mode are 1 to 3, got {} and {}", g.kind, g.padding);
        }
        Ok(g)
    }

    /// The pixel coordinate of a normalised one over `n` pixels.
    fn unnormalize(&self, v: f32, n: usize) -> f32 {
        let n = n as f32;
        if self.align {
            (v + 1.0) / 2.0 * (n - 1.0)
        } else {
            ((v + 1.0) * n - 1.0) / 2.0
        }
    }

    /// A coordinate moved inside the image by the padding mode (zeros
    /// leaves it as it is).
    fn pad(&self, x: f32, n: usize) -> f32 {
        let hi = n as f32 - 1.0;
        match self.padding {
            2 => x.clamp(0.0, hi),
            3 => {
                let (lo2, hi2) = if self.align { (0.0, 2.0 * hi) } else { (-1.0, 2.0 * n as f32 - 1.0) };
                let r = if lo2 == hi2 {
                    0.0
                } else {
                    let (min, span) = (lo2 / 2.0, (hi2 - lo2) / 2.0);
                    let x = (x - min).abs();
                    let extra = x % span;
                    let flips = (x / span).floor() as i64;
                    if flips % 2 == 0 { extra + min } else { span - extra + min }
                };
                r.clamp(0.0, hi)
            }
            _ => x,
        }
    }
}

fn cubic(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let c1 = |x: f32| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let c2 = |x: f32| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [c2(t + 1.0), c1(t), c1(1.0 - t), c2(2.0 - t)]
}

impl Layer for GridSample {
    fn one_blob_only(&self) -> bool {
        false
    }

    // BOUNDS-FN: two 3-d bottoms (checked); the grid holds plane = ow * oh (x, y)
    // pairs (its pair axis is 2: checked); at() tests 0 <= xi < w, 0 <= yi < h and
    // q < x.c; out has x.c planes.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if bottoms.len() != 2 {
            ncnn_bail!("GridSample takes a blob and a grid, got {} bottoms", bottoms.len());
        }
        let (x, g) = (&bottoms[0], &bottoms[1]);
        if x.dims != 3 || g.dims != 3 {
            ncnn_bail!("GridSample samples a 3-d blob on a 3-d grid, got {} and {}", x.describe(), g.describe());
        }
        let (ow, oh) = if self.permuted { (g.w, g.h) } else { (g.h, g.c) };
        if (self.permuted && g.c != 2) || (!self.permuted && g.w != 2) {
            ncnn_bail!("GridSample: the grid {} does not hold an (x, y) pair per point", g.describe());
        }
        let (w, h) = (x.w, x.h);
        let mut out = Mat::new_3d(ow, oh, x.c);
        let plane = ow * oh;
        for p in 0..plane {
            let (gx, gy) = if self.permuted { (g.data[p], g.data[plane + p]) } else { (g.data[2 * p], g.data[2 * p + 1]) };
            let (ux, uy) = (self.unnormalize(gx, w), self.unnormalize(gy, h));
            // value of channel q at integer pixel (xi, yi), zero outside
            let at = |q: usize, xi: i64, yi: i64| -> f32 {
                if xi < 0 || yi < 0 || xi >= w as i64 || yi >= h as i64 {
                    0.0
                } else {
                    x.data[(q * h + yi as usize) * w + xi as usize]
                }
            };
            for q in 0..x.c {
                let v = match self.kind {
                    1 => {
                        let (px, py) = (self.pad(ux, w), self.pad(uy, h));
                        let (x0, y0) = (px.floor(), py.floor());
                        let (tx, ty) = (px - x0, py - y0);
                        let (x0, y0) = (x0 as i64, y0 as i64);
                        let top = at(q, x0, y0) * (1.0 - tx) + at(q, x0 + 1, y0) * tx;
                        let bottom = at(q, x0, y0 + 1) * (1.0 - tx) + at(q, x0 + 1, y0 + 1) * tx;
                        top * (1.0 - ty) + bottom * ty
                    }
                    2 => {
                        let (px, py) = (self.pad(ux, w), self.pad(uy, h));
                        at(q, px.round_ties_even() as i64, py.round_ties_even() as i64)
                    }
                    _ => {
                        let (x0, y0) = (ux.floor(), uy.floor());
                        let (wx, wy) = (cubic(ux - x0), cubic(uy - y0));
                        let mut s = 0.0;
                        for (j, wyj) in wy.iter().enumerate() {
                            let yy = self.pad(y0 - 1.0 + j as f32, h);
                            let mut r = 0.0;
                            for (i, wxi) in wx.iter().enumerate() {
                                let xx = self.pad(x0 - 1.0 + i as f32, w);
                                r += wxi * at(q, xx as i64, yy as i64);
                            }
                            s += wyj * r;
                        }
                        s
                    }
                };
                out.data[q * plane + p] = v;
            }
        }
        Ok(vec![out])
    }
}
