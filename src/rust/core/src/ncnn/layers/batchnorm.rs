//! BatchNorm at inference: y = slope * (x - mean) / sqrt(var + eps) + bias, per channel.

use crate::ncnn::layer::{channel_layout, one};
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct BatchNorm {
    channels: usize,
    eps: f32,
    a: Vec<f32>,
    b: Vec<f32>,
}

impl BatchNorm {
    pub fn new(pd: &ParamDict) -> anyhow::Result<BatchNorm> {
        let c = pd.int(0, 0);
        if c <= 0 {
            ncnn_bail!("BatchNorm channels must be positive, got {c}");
        }
        Ok(BatchNorm {
            channels: c as usize,
            eps: pd.float(1, 0.0),
            a: vec![],
            b: vec![],
        })
    }
}

impl Layer for BatchNorm {
    // BOUNDS-FN: slope, mean, var and bias are read with n values each and i < n.
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let n = self.channels;
        let slope = mb.raw(n, "batchnorm slope")?;
        let mean = mb.raw(n, "batchnorm mean")?;
        let var = mb.raw(n, "batchnorm variance")?;
        let bias = mb.raw(n, "batchnorm bias")?;
        self.a = (0..n)
            .map(|i| bias[i] - slope[i] * mean[i] / (var[i] + self.eps).sqrt())
            .collect();
        self.b = (0..n)
            .map(|i| slope[i] / (var[i] + self.eps).sqrt())
            .collect();
        Ok(())
    }

    // BOUNDS-FN: a and b hold channels values (load_model), c == channels (checked), q < c.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "BatchNorm")?;
        let (c, n) = channel_layout(&x);
        if c != self.channels {
            ncnn_bail!(
                "has {} channels but the input {} has {c}",
                self.channels,
                x.describe()
            );
        }
        crate::ncnn::par::chunks_mut(&mut x.data, n, |q, ch| {
            let (a, b) = (self.a[q], self.b[q]);
            crate::base::simd::wide(|| ch.iter_mut().for_each(|v| *v = b * *v + a));
        });
        Ok(vec![x])
    }
}
