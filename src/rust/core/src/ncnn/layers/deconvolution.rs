//! Deconvolution: the transposed convolution (stride, dilation, output padding, padding or a requested output size cut off the result), bias and fused activation. Weights are [out][in][kh][kw].

use super::kernels::deconv::DeconvParams;
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};

pub struct Deconvolution {
    p: DeconvParams,
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl Deconvolution {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Deconvolution> {
        Self::with_groups(pd, false)
    }

    /// With `grouped`, the group count is read from key 7 (DeconvolutionDepthWise).
    pub fn with_groups(pd: &ParamDict, grouped: bool) -> anyhow::Result<Deconvolution> {
        Ok(Deconvolution { p: DeconvParams::new(pd, grouped)?, weight: vec![], bias: vec![] })
    }
}

impl Layer for Deconvolution {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        (self.weight, self.bias) = self.p.load(mb)?;
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "deconvolution")?;
        Ok(vec![self.p.forward(&x, &self.weight, &self.bias)?])
    }
}
