//! Scale: per-channel multiply (weights, or a second bottom when
//! scale_data_size is -233) and optional bias.

use crate::ncnn::layer::channel_layout;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Scale {
    size: i32,
    bias_term: bool,
    scale: Vec<f32>,
    bias: Vec<f32>,
}

impl Scale {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Scale> {
        let size = pd.int(0, 0);
        if size <= 0 && size != -233 {
            ncnn_bail!("Scale scale_data_size must be positive or -233, got {size}");
        }
        Ok(Scale {
            size,
            bias_term: pd.int(1, 0) != 0,
            scale: vec![],
            bias: vec![],
        })
    }
}

impl Layer for Scale {
    fn one_blob_only(&self) -> bool {
        self.size != -233
    }
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        if self.size > 0 {
            self.scale = mb.raw(self.size as usize, "scale data")?;
            if self.bias_term {
                self.bias = mb.raw(self.size as usize, "scale bias")?;
            }
        } else if self.bias_term {
            ncnn_bail!(
                "Scale with a second input (scale_data_size -233) and a bias is not supported"
            );
        }
        Ok(())
    }

    // BOUNDS-FN: scale has c values (checked) and q < c.
    fn forward(&self, mut bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let scale = if self.size == -233 {
            if bottoms.len() != 2 {
                ncnn_bail!(
                    "Scale with scale_data_size -233 needs two bottoms, got {}",
                    bottoms.len()
                );
            }
            // INVARIANT: two bottoms, checked just above.
            bottoms.pop().unwrap().data.into_vec()
        } else {
            if bottoms.len() != 1 {
                ncnn_bail!("Scale takes one bottom, got {}", bottoms.len());
            }
            self.scale.clone()
        };
        // INVARIANT: one bottom is left in either branch above (2 - 1, or 1).
        let mut x = bottoms.pop().unwrap();
        let (c, n) = channel_layout(&x);
        if c != scale.len() {
            ncnn_bail!(
                "has {} scale values but the input {} has {c} channels",
                scale.len(),
                x.describe()
            );
        }
        for (q, ch) in x.data.chunks_mut(n).enumerate() {
            let s = scale[q];
            let b = self.bias.get(q).copied().unwrap_or(0.0);
            crate::base::simd::wide(|| ch.iter_mut().for_each(|v| *v = *v * s + b));
        }
        Ok(vec![x])
    }
}
