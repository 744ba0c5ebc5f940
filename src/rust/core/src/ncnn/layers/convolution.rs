//! Convolution: im2col + GEMM, explicit or SAME padding, dilation, bias and
//! fused activation. Weights are [out][in][kh][kw].

use super::conv_common::{finish, gemm, im2col, ConvParams};
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Convolution {
    p: ConvParams,
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl Convolution {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Convolution> {
        Ok(Convolution { p: ConvParams::new(pd, false)?, weight: vec![], bias: vec![] })
    }
}

impl Layer for Convolution {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        (self.weight, self.bias) = self.p.load(mb)?;
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Convolution")?;
        let p = &self.p;
        let inch = p.in_channels();
        if x.dims != 3 || x.c != inch {
            ncnn_bail!("expects a 3-d input with {inch} channels, got a blob of shape {}", x.describe());
        }
        let xp = p.pad(&x);
        let (outw, outh) = p.out_size(&xp)?;
        let n = outw * outh;
        let k = inch * p.kh * p.kw;
        let mut out = Mat::new_3d(outw, outh, p.num_output);
        if p.kw == 1 && p.kh == 1 && p.sw == 1 && p.sh == 1 {
            gemm(&self.weight, &xp.data, &mut out.data, p.num_output, k, n);
        } else {
            let col = im2col(&xp, p, 0, inch, outw, outh);
            gemm(&self.weight, &col, &mut out.data, p.num_output, k, n);
        }
        finish(&mut out.data, n, &self.bias, &p.act);
        Ok(vec![out])
    }
}
