//! Flatten: any blob to 1-d (channel-major order).

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};

pub struct Flatten;

impl Flatten {
    pub fn new(_pd: &ParamDict) -> anyhow::Result<Flatten> {
        Ok(Flatten)
    }
}

impl Layer for Flatten {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Flatten")?;
        let n = x.total();
        Ok(vec![Mat::from_shape(&[n], x.data)?])
    }
}
