//! Convolution: GEMM over shifted views of the padded input, explicit or SAME padding, dilation, bias and
//! fused activation. Weights are [out][in][kh][kw].

use super::kernels::conv::{conv_gemm, ConvParams};
use super::kernels::gemm::{Epi, PackedA};
use super::kernels::winograd::{self, Winograd};
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Convolution {
    p: ConvParams,
    packed: PackedA,
    /// The weights transformed for Winograd (3x3 stride 1), used instead
    /// of `packed`, which then stays empty.
    wino: Option<Winograd>,
    bias: Vec<f32>,
}

impl Convolution {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Convolution> {
        Ok(Convolution {
            p: ConvParams::new(pd, false)?,
            packed: PackedA::default(),
            wino: None,
            bias: vec![],
        })
    }
}

impl Layer for Convolution {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let (w, b) = self.p.load(mb)?;
        let k = self.p.weight_data_size / self.p.num_output;
        let inch = self.p.in_channels();
        if winograd::suits(&self.p, inch) {
            self.wino = Some(Winograd::new(&w, self.p.num_output, inch));
            self.packed = PackedA::default();
        } else {
            self.wino = None;
            self.packed = PackedA::new(&w, self.p.num_output, k);
        }
        self.bias = b;
        Ok(())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Convolution")?;
        let (outw, outh, c) = self.out_shape(&x)?;
        let mut out = Mat::for_overwrite_3d(outw, outh, c);
        self.forward_into(&x, &mut out.data)?;
        Ok(vec![out])
    }
}

impl Convolution {
    /// (w, h, channels) of the output for input `x`, or why `x` does not fit.
    pub fn out_shape(&self, x: &Mat) -> anyhow::Result<(usize, usize, usize)> {
        let p = &self.p;
        let inch = p.in_channels();
        if x.dims != 3 || x.c != inch {
            ncnn_bail!(
                "expects a 3-d input with {inch} channels, got a blob of shape {}",
                x.describe()
            );
        }
        let (t, b, l, r) = p.pads(x.w, x.h);
        let (outw, outh) = p.out_size_wh(x.w + l + r, x.h + t + b)?;
        Ok((outw, outh, p.num_output))
    }

    /// The output for input `x` written to the first values of `out`
    /// (channel after channel, as `out_shape` gives).
    pub fn forward_into(&self, x: &Mat, out: &mut [f32]) -> anyhow::Result<()> {
        let (outw, outh, _) = self.out_shape(x)?;
        let p = &self.p;
        if let Some(wg) = &self.wino {
            let (t, _, l, _) = p.pads(x.w, x.h);
            wg.forward(x, t, l, p.pad_value, &self.bias, &p.act, out, outw, outh);
            return Ok(());
        }
        let ep = Epi { bias: &self.bias, act: &p.act };
        conv_gemm(x, p, 0, p.in_channels(), &self.packed, out, outw, outh, &ep);
        Ok(())
    }
}
