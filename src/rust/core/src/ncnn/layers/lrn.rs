//! LRN: local response normalization across channels (region 0) or within
//! a channel (region 1).

use crate::ncnn::layer::one;
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

impl Layer for Lrn {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "LRN")?;
        if x.dims != 3 {
            ncnn_bail!("expects a 3-d input, got {}", x.describe());
        }
        let (w, h, c) = (x.w, x.h, x.c);
        let n = w * h;
        let sq: Vec<f32> = x.data.iter().map(|v| v * v).collect();
        let mut out = x.clone();
        if self.region == 0 {
            let a = self.alpha / self.size as f32;
            let half = self.size / 2;
            for q in 0..c {
                let lo = q.saturating_sub(half);
                let hi = (q + self.size - half).min(c);
                for i in 0..n {
                    let mut s = 0.0f32;
                    for p in lo..hi {
                        s += sq[p * n + i];
                    }
                    out.data[q * n + i] = x.data[q * n + i] * (self.bias + a * s).powf(-self.beta);
                }
            }
        } else {
            let a = self.alpha / (self.size * self.size) as f32;
            let pad = (self.size / 2) as i64;
            for q in 0..c {
                let s2 = &sq[q * n..(q + 1) * n];
                for y in 0..h as i64 {
                    for xx in 0..w as i64 {
                        let mut s = 0.0f32;
                        for ky in 0..self.size as i64 {
                            let sy = y - pad + ky;
                            if sy < 0 || sy >= h as i64 {
                                continue;
                            }
                            for kx in 0..self.size as i64 {
                                let sx = xx - pad + kx;
                                if sx >= 0 && sx < w as i64 {
                                    s += s2[(sy as usize) * w + sx as usize];
                                }
                            }
                        }
                        let i = q * n + (y as usize) * w + xx as usize;
                        out.data[i] = x.data[i] * (self.bias + a * s).powf(-self.beta);
                    }
                }
            }
        }
        Ok(vec![out])
    }
}
