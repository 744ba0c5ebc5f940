//! Interp: resize of 3-d blobs, nearest (1), bilinear (2) or bicubic (3).

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;

pub struct Interp {
    kind: i32,
    hs: f32,
    ws: f32,
    oh: usize,
    ow: usize,
    align: bool,
}

impl Interp {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Interp> {
        let kind = pd.int(0, 0);
        if !(1..=3).contains(&kind) {
            ncnn_bail!("Interp resize_type {kind} is not 1 (nearest), 2 (bilinear) or 3 (bicubic)");
        }
        if pd.int(5, 0) != 0 {
            ncnn_bail!("Interp with a dynamic target size (key 5) is not supported");
        }
        Ok(Interp {
            kind,
            hs: pd.float(1, 1.0),
            ws: pd.float(2, 1.0),
            oh: pd.int(3, 0).max(0) as usize,
            ow: pd.int(4, 0).max(0) as usize,
            align: pd.int(6, 0) != 0,
        })
    }

    /// Source taps and weights for each output position along one axis.
    fn taps(&self, n: usize, out: usize, scale_param: f32, fixed: bool) -> Vec<Vec<(usize, f32)>> {
        let clamp = |i: i64| i.clamp(0, n as i64 - 1) as usize;
        (0..out)
            .map(|o| match self.kind {
                1 => {
                    let s = if fixed {
                        n as f32 / out as f32
                    } else {
                        1.0 / scale_param
                    };
                    vec![(((o as f32 * s) as usize).min(n - 1), 1.0)]
                }
                _ => {
                    let scale = if self.align && out > 1 {
                        (n as f64 - 1.0) / (out as f64 - 1.0)
                    } else {
                        n as f64 / out as f64
                    };
                    let f = if self.align {
                        (o as f64 * scale) as f32
                    } else {
                        ((o as f64 + 0.5) * scale - 0.5) as f32
                    };
                    let s = f.floor();
                    let t = f - s;
                    let s = s as i64;
                    if self.kind == 2 {
                        if s < 0 {
                            vec![(0, 1.0)]
                        } else if s >= n as i64 - 1 {
                            vec![(n - 1, 1.0)]
                        } else {
                            vec![(s as usize, 1.0 - t), (s as usize + 1, t)]
                        }
                    } else {
                        let a = -0.75f32;
                        let x = t;
                        let c0 =
                            ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a;
                        let c1 = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
                        let c2 = ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
                        let c3 = 1.0 - c0 - c1 - c2;
                        vec![
                            (clamp(s - 1), c0),
                            (clamp(s), c1),
                            (clamp(s + 1), c2),
                            (clamp(s + 2), c3),
                        ]
                    }
                }
            })
            .collect()
    }
}

impl Layer for Interp {
    // BOUNDS-FN: taps clamps every source index below the extent it is given (w, h);
    // ty (so sy) has oh and tx (so sx) ow entries; o is one channel of oh rows
    // of ow; q < c channels.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Interp")?;
        if x.dims != 3 {
            ncnn_bail!("expects a 3-d input, got {}", x.describe());
        }
        let (w, h, c) = (x.w, x.h, x.c);
        let fixed = self.ow > 0 && self.oh > 0;
        let (ow, oh) = if fixed {
            (self.ow, self.oh)
        } else {
            ((w as f32 * self.ws) as usize, (h as f32 * self.hs) as usize)
        };
        if ow == 0 || oh == 0 || w == 0 || h == 0 {
            ncnn_bail!(
                "Interp output size {ow}x{oh} from {} is empty",
                x.describe()
            );
        }
        // The output size comes from the param's scales: checked before
        // anything of that size (taps, output) is made.
        let n = crate::base::alloc::product(&[ow, oh, c], "the Interp output")?;
        crate::base::alloc::check(n, 4, "the Interp output")?;
        crate::base::alloc::check(ow.saturating_add(oh), 64, "the Interp taps")?;
        let tx = self.taps(w, ow, self.ws, fixed);
        let ty = self.taps(h, oh, self.hs, fixed);
        // Every output value is written below.
        let mut out = Mat::for_overwrite_3d(ow, oh, c);
        if self.kind == 1 {
            // Nearest: a gather of source columns per row; a row that reads
            // the same source row as the one before it is a copy of it.
            let sx: Vec<usize> = tx.iter().map(|t| t.first().map_or(0, |v| v.0)).collect();
            let sy: Vec<usize> = ty.iter().map(|t| t.first().map_or(0, |v| v.0)).collect();
            par::chunks_mut(&mut out.data, ow * oh, |q, o| {
                let src = x.channel(q);
                for i in 0..oh {
                    if i > 0 && sy[i] == sy[i - 1] {
                        o.copy_within((i - 1) * ow..i * ow, i * ow);
                        continue;
                    }
                    let row = &src[sy[i] * w..(sy[i] + 1) * w];
                    for (d, &j) in o[i * ow..(i + 1) * ow].iter_mut().zip(&sx) {
                        *d = row[j];
                    }
                }
            });
            return Ok(vec![out]);
        }
        par::chunks_mut(&mut out.data, ow * oh, |q, o| {
                let src = x.channel(q);
                for (i, ry) in ty.iter().enumerate() {
                    for (j, rx) in tx.iter().enumerate() {
                        let mut s = 0.0f32;
                        for &(sy, wy) in ry {
                            let mut r = 0.0f32;
                            for &(sx, wx) in rx {
                                r += src[sy * w + sx] * wx;
                            }
                            s += r * wy;
                        }
                        o[i * ow + j] = s;
                    }
                }
            });
        Ok(vec![out])
    }
}
