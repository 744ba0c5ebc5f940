//! Bias: adds one learned value per channel (0=bias_data_size).

use crate::ncnn::layer::{channel_layout, one};
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Bias {
    size: usize,
    bias: Vec<f32>,
}

impl Bias {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Bias> {
        let n = pd.int(0, 0);
        if n <= 0 {
            ncnn_bail!("Bias bias_data_size must be positive, got {n}");
        }
        Ok(Bias { size: n as usize, bias: vec![] })
    }
}

impl Layer for Bias {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.bias = mb.raw(self.size, "bias data")?;
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "Bias")?;
        let (c, n) = channel_layout(&x);
        if c != self.size {
            ncnn_bail!("Bias has {} values but the input {} has {c} channels", self.size, x.describe());
        }
        x.int8 = false;
        for (ch, &b) in x.data.chunks_mut(n).zip(&self.bias) {
            crate::base::simd::wide(|| ch.iter_mut().for_each(|v| *v += b));
        }
        Ok(vec![x])
    }
}
