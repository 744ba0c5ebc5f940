//! ConvolutionDepthWise: grouped convolution. One input channel per group
//! runs a direct loop; larger groups use im2col + GEMM per group.

use super::conv_common::{finish, gemm, im2col, ConvParams};
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;
use rayon::prelude::*;

pub struct ConvolutionDepthWise {
    p: ConvParams,
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl ConvolutionDepthWise {
    pub fn new(pd: &ParamDict) -> anyhow::Result<ConvolutionDepthWise> {
        Ok(ConvolutionDepthWise { p: ConvParams::new(pd, true)?, weight: vec![], bias: vec![] })
    }
}

impl Layer for ConvolutionDepthWise {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        (self.weight, self.bias) = self.p.load(mb)?;
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "ConvolutionDepthWise")?;
        let p = &self.p;
        let inch = p.in_channels();
        if x.dims != 3 || x.c != inch || inch % p.group != 0 {
            ncnn_bail!(
                "expects a 3-d input with {inch} channels (divisible by group {}), got a blob of shape {}",
                p.group,
                x.describe()
            );
        }
        let xp = p.pad(&x);
        let (outw, outh) = p.out_size(&xp)?;
        let n = outw * outh;
        let g = p.group;
        let (icg, ocg) = (inch / g, p.num_output / g);
        let kk = p.kh * p.kw;
        let mut out = Mat::new_3d(outw, outh, p.num_output);
        if icg == 1 && ocg == 1 {
            let w = &self.weight;
            let cs = xp.cstep();
            out.data.par_chunks_mut(n).enumerate().for_each(|(q, o)| {
                let src = &xp.data[q * cs..(q + 1) * cs];
                let k = &w[q * kk..(q + 1) * kk];
                for oy in 0..outh {
                    for ox in 0..outw {
                        let mut s = 0.0f32;
                        for ky in 0..p.kh {
                            let row = &src[(oy * p.sh + ky * p.dh) * xp.w + ox * p.sw..];
                            for kx in 0..p.kw {
                                s += row[kx * p.dw] * k[ky * p.kw + kx];
                            }
                        }
                        o[oy * outw + ox] = s;
                    }
                }
            });
        } else {
            for gi in 0..g {
                let col = im2col(&xp, p, gi * icg, icg, outw, outh);
                let wk = icg * kk;
                let wg = &self.weight[gi * ocg * wk..(gi + 1) * ocg * wk];
                gemm(wg, &col, &mut out.data[gi * ocg * n..(gi + 1) * ocg * n], ocg, wk, n);
            }
        }
        finish(&mut out.data, n, &self.bias, &p.act);
        Ok(vec![out])
    }
}
