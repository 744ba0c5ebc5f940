//! ConvolutionDepthWise: grouped convolution. One input channel per group
//! runs the direct depthwise kernel; larger groups use the convolution GEMM
//! per group.

use super::kernels::conv::{conv_gemm, Border, ConvParams};
use super::kernels::depthwise::dw_channel;
use super::kernels::gemm::{Epi, PackedA};
use crate::simd;
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;

pub struct ConvolutionDepthWise {
    p: ConvParams,
    weight: Vec<f32>,
    /// Per-group packed weights (groups with several input channels).
    packed: Vec<PackedA>,
    bias: Vec<f32>,
}

impl ConvolutionDepthWise {
    pub fn new(pd: &ParamDict) -> anyhow::Result<ConvolutionDepthWise> {
        Ok(ConvolutionDepthWise {
            p: ConvParams::new(pd, true)?,
            weight: vec![],
            packed: vec![],
            bias: vec![],
        })
    }
}

impl Layer for ConvolutionDepthWise {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        (self.weight, self.bias) = self.p.load(mb)?;
        let p = &self.p;
        let g = p.group;
        let ocg = p.num_output / g;
        let per = p.weight_data_size / g;
        if ocg > 1 || per / ocg.max(1) > p.kh * p.kw {
            self.packed = (0..g)
                .map(|gi| PackedA::new(&self.weight[gi * per..(gi + 1) * per], ocg, per / ocg))
                .collect();
        }
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
        let (t, b, l, r) = p.pads(x.w, x.h);
        let (outw, outh) = p.out_size_wh(x.w + l + r, x.h + t + b)?;
        let n = outw * outh;
        let g = p.group;
        let (icg, ocg) = (inch / g, p.num_output / g);
        let mut out = Mat::for_overwrite_3d(outw, outh, p.num_output);
        if icg == 1 && ocg == 1 {
            let kk = p.kh * p.kw;
            let fast = simd::avx2_fma();
            let pad = Border { t, b, l, r, value: p.pad_value };
            par::chunks_mut(&mut out.data, n, |q, o| {
                let bias = self.bias.get(q).copied().unwrap_or(0.0);
                let k = &self.weight[q * kk..(q + 1) * kk];
                dw_channel(x.channel(q), x.w, x.h, pad, k, bias, p, o, outw, fast);
            });
        } else {
            for gi in 0..g {
                let bias = if self.bias.is_empty() {
                    &[][..]
                } else {
                    &self.bias[gi * ocg..(gi + 1) * ocg]
                };
                let ep = Epi { bias, act: &p.act };
                conv_gemm(
                    &x,
                    p,
                    gi * icg,
                    icg,
                    &self.packed[gi],
                    &mut out.data[gi * ocg * n..(gi + 1) * ocg * n],
                    outw,
                    outh,
                    &ep,
                );
            }
        }
        Ok(vec![out])
    }
}
