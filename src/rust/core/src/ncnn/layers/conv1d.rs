//! The 1-d convolution family (Convolution1D, ConvolutionDepthWise1D,
//! Deconvolution1D, DeconvolutionDepthWise1D, Pooling1D) as their 2-d
//! layers over a blob of one row per channel: a 2-d input (w, h = channels)
//! runs as w x 1 x h, with the kernel, stride, dilation and padding of the
//! height fixed at 1 and 0, and the output comes back as (w, channels).
//! Weights are those of the 2-d layer with a kernel height of 1.

use crate::ncnn::param::ParamValue;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

#[derive(Clone, Copy)]
pub enum Conv1dKind {
    Conv,
    ConvDepthWise,
    Deconv,
    DeconvDepthWise,
    Pool,
}

pub struct OneD {
    inner: crate::ncnn::layer::Builtin,
    what: &'static str,
}

/// The 2-d parameters of a 1-d layer's.
fn as_2d(pd: &ParamDict, kind: Conv1dKind) -> ParamDict {
    let mut p = pd.clone();
    let mut set = |id: usize, v: i32| {
        if let Some(slot) = p.values.get_mut(id) {
            *slot = ParamValue::Int(v);
        }
    };
    match kind {
        Conv1dKind::Pool => {
            // kernel_h, stride_h, pad_top, pad_bottom, out_h
            for (id, v) in [(11, 1), (12, 1), (13, 0), (15, 0), (18, 1)] {
                set(id, v);
            }
        }
        _ => {
            let pl = pd.int(4, 0);
            let pad_h = if pl < 0 { pl } else { 0 };
            // kernel_h, dilation_h, stride_h, pad_top, pad_bottom
            for (id, v) in [(11, 1), (12, 1), (13, 1), (14, pad_h), (16, pad_h)] {
                set(id, v);
            }
            if matches!(kind, Conv1dKind::Deconv | Conv1dKind::DeconvDepthWise) {
                // output_pad_bottom, output_h (a requested width keeps the one row)
                let ow = pd.int(20, 0);
                set(19, 0);
                set(21, if ow > 0 { 1 } else { 0 });
            }
        }
    }
    p
}

impl OneD {
    pub fn new(pd: &ParamDict, kind: Conv1dKind) -> anyhow::Result<OneD> {
        use super::{convolution, convolution_depthwise, deconvolution, pooling};
        let p = as_2d(pd, kind);
        let (inner, what): (crate::ncnn::layer::Builtin, _) = match kind {
            Conv1dKind::Conv => {
                if pd.int(8, 0) != 0 {
                    ncnn_bail!("Convolution1D has no int8 weights (int8_scale_term {})", pd.int(8, 0));
                }
                (Box::new(convolution::Convolution::new(&p)?), "Convolution1D")
            }
            Conv1dKind::ConvDepthWise => (Box::new(convolution_depthwise::ConvolutionDepthWise::new(&p)?), "ConvolutionDepthWise1D"),
            Conv1dKind::Deconv => (Box::new(deconvolution::Deconvolution::new(&p)?), "Deconvolution1D"),
            Conv1dKind::DeconvDepthWise => (Box::new(deconvolution::Deconvolution::with_groups(&p, true)?), "DeconvolutionDepthWise1D"),
            Conv1dKind::Pool => (Box::new(pooling::Pooling::new(&p)?), "Pooling1D"),
        };
        Ok(OneD { inner, what })
    }
}

impl Layer for OneD {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.inner.load_model(mb)
    }

    fn create_pipeline(&mut self, opt: &Opt) -> anyhow::Result<()> {
        self.inner.create_pipeline(opt)
    }

    fn destroy_pipeline(&mut self, opt: &Opt) {
        self.inner.destroy_pipeline(opt)
    }

    fn forward(&self, bottoms: Vec<Mat>, ntop: usize, opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = crate::ncnn::layer::one(bottoms, self.what)?;
        if x.dims != 2 {
            ncnn_bail!("{} takes a 2-d blob (w, channels), got {}", self.what, x.describe());
        }
        let (w, c) = (x.w, x.h);
        let x3 = Mat::from_shape(&[w, 1, c], x.data)?;
        let mut out = self.inner.forward(vec![x3], ntop, opt)?;
        let y = out.pop().unwrap_or_default();
        let y = match y.dims {
            3 if y.h == 1 => Mat::from_shape(&[y.w, y.c], y.data)?,
            _ => y, // a global pooling's 1-d result
        };
        Ok(vec![y])
    }
}
