//! DeconvolutionDepthWise: grouped transposed convolution (group from key
//! 7); weights are [group][out per group][in per group][kh][kw]. The layer
//! is a Deconvolution that reads the group count.

use super::deconvolution::Deconvolution;
use crate::ncnn::ParamDict;

pub fn new(pd: &ParamDict) -> anyhow::Result<Deconvolution> {
    Deconvolution::with_groups(pd, true)
}
