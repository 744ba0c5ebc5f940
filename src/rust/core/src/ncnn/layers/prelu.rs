//! PReLU: negative values times a per-channel (or single) slope.

use crate::ncnn::layer::{channel_layout, one};
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct PRelu {
    n: usize,
    slope: Vec<f32>,
}

impl PRelu {
    pub fn new(pd: &ParamDict) -> anyhow::Result<PRelu> {
        let n = pd.int(0, 0);
        if n <= 0 {
            ncnn_bail!("PReLU num_slope must be positive, got {n}");
        }
        Ok(PRelu {
            n: n as usize,
            slope: vec![],
        })
    }
}

impl Layer for PRelu {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.slope = mb.raw(self.n, "prelu slopes")?;
        Ok(())
    }
    // BOUNDS-FN: load_model read n slopes; n is 1 or c (checked) and q < c.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "PReLU")?;
        let (c, n) = channel_layout(&x);
        if self.n != 1 && self.n != c {
            ncnn_bail!(
                "has {} slopes but the input {} has {c} channels",
                self.n,
                x.describe()
            );
        }
        for (q, ch) in x.data.chunks_mut(n).enumerate() {
            let s = if self.n == 1 {
                self.slope[0]
            } else {
                self.slope[q]
            };
            ch.iter_mut().for_each(|v| {
                if *v < 0.0 {
                    *v *= s
                }
            });
        }
        Ok(vec![x])
    }
}
