//! Split: every top shares its bottom's data (copied only when a consumer writes).

use crate::ncnn::{Layer, Mat, Opt, ParamDict};

pub struct SplitLayer;

impl SplitLayer {
    pub fn new(_pd: &ParamDict) -> anyhow::Result<SplitLayer> {
        Ok(SplitLayer)
    }
}

impl Layer for SplitLayer {
    fn one_blob_only(&self) -> bool {
        false
    }
    fn forward(&self, bottoms: Vec<Mat>, ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let m = crate::ncnn::layer::one(bottoms, "Split")?;
        Ok(vec![m; ntop])
    }
}
