//! LRN: local response normalization across channels (region 0) or within
//! a channel (region 1).

use super::kernels::math;
use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Lrn {
    region: i32,
    size: usize,
    alpha: f32,
    beta: f32,
    bias: f32,
}

impl Lrn {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Lrn> {
        let size = pd.int(1, 5);
        if size <= 0 {
            ncnn_bail!("LRN local_size must be positive, got {size}");
        }
        Ok(Lrn {
            region: pd.int(0, 0),
            size: size as usize,
            alpha: pd.float(2, 1.0),
            beta: pd.float(3, 0.75),
            bias: pd.float(4, 1.0),
        })
    }
}

impl Lrn {
    /// x * (bias + a s)^-beta over a run of values and their window sums
    /// `s`; vectorised when the base is sure to be positive.
    fn scale(&self, x: &[f32], s: &[f32], a: f32, o: &mut [f32]) {
        let (bias, nb) = (self.bias, -self.beta);
        if bias > 0.0 && a >= 0.0 {
            crate::base::simd::wide(|| {
                for ((o, x), s) in o.iter_mut().zip(x).zip(s) {
                    *o = x * math::pow(bias + a * s, nb);
                }
            });
        } else {
            for ((o, x), s) in o.iter_mut().zip(x).zip(s) {
                *o = x * (bias + a * s).powf(nb);
            }
        }
    }
}

impl Layer for Lrn {
    // BOUNDS-FN: x is 3-d (checked): sq and out hold c planes of n = w * h; p < hi <= c,
    // q < c; sy < h and sx < w are tested before each read, y < h and xx < w.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "LRN")?;
        if x.dims != 3 {
            ncnn_bail!("expects a 3-d input, got {}", x.describe());
        }
        let (w, h, c) = (x.w, x.h, x.c);
        let n = w * h;
        let mut sq = vec![0.0f32; x.total()];
        crate::base::simd::wide(|| sq.iter_mut().zip(x.data.iter()).for_each(|(s, v)| *s = v * v));
        let mut out = Mat::for_overwrite_3d(w, h, c);
        if self.region == 0 {
            let a = self.alpha / self.size as f32;
            let half = self.size / 2;
            par::chunks_mut(&mut out.data, n, |q, o| {
                let lo = q.saturating_sub(half);
                let hi = (q + self.size - half).min(c);
                // The sum of squares over the window of channels.
                let mut s = vec![0.0f32; n];
                crate::base::simd::wide(|| {
                    for p in lo..hi {
                        s.iter_mut().zip(&sq[p * n..(p + 1) * n]).for_each(|(s, v)| *s += v);
                    }
                });
                self.scale(x.channel(q), &s, a, o);
            });
        } else {
            let a = self.alpha / (self.size * self.size) as f32;
            let pad = (self.size / 2) as i64;
            par::chunks_mut(&mut out.data, n, |q, o| {
                let s2 = &sq[q * n..(q + 1) * n];
                let mut s = vec![0.0f32; n];
                for y in 0..h as i64 {
                    for xx in 0..w as i64 {
                        let mut acc = 0.0f32;
                        for ky in 0..self.size as i64 {
                            let sy = y - pad + ky;
                            if sy < 0 || sy >= h as i64 {
                                continue;
                            }
                            for kx in 0..self.size as i64 {
                                let sx = xx - pad + kx;
                                if sx >= 0 && sx < w as i64 {
                                    acc += s2[(sy as usize) * w + sx as usize];
                                }
                            }
                        }
                        s[(y as usize) * w + xx as usize] = acc;
                    }
                }
                self.scale(x.channel(q), &s, a, o);
            });
        }
        Ok(vec![out])
    }
}
