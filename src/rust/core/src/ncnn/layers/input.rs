//! Input: marks a graph input; its blob is set by the extractor.

use crate::ncnn::{Layer, Mat, Opt, ParamDict};

pub struct Input;

impl Input {
    pub fn new(_pd: &ParamDict) -> anyhow::Result<Input> {
        Ok(Input)
    }
}

impl Layer for Input {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        Ok(bottoms)
    }
}
