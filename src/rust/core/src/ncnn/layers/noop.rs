//! Noop: its tops are its first bottoms, unchanged.

use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Noop;

impl Noop {
    pub fn new(_pd: &ParamDict) -> anyhow::Result<Noop> {
        Ok(Noop)
    }
}

impl Layer for Noop {
    fn one_blob_only(&self) -> bool {
        false
    }

    fn forward(&self, mut bottoms: Vec<Mat>, ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if ntop > bottoms.len() {
            ncnn_bail!("Noop has {} bottoms but {ntop} tops; it passes bottoms through, so it needs at least as many", bottoms.len());
        }
        bottoms.truncate(ntop);
        Ok(bottoms)
    }
}
