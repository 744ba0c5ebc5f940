//! CopyTo: the first bottom with the second written over a region of it
//! (the region as Crop resolves it on the first bottom).

use super::kernels::roi::{copy_region, RoiParams};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct CopyTo {
    p: RoiParams,
}

impl CopyTo {
    pub fn new(pd: &ParamDict) -> anyhow::Result<CopyTo> {
        Ok(CopyTo { p: RoiParams::new(pd) })
    }
}

impl Layer for CopyTo {
    fn one_blob_only(&self) -> bool {
        false
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut it = bottoms.into_iter();
        let (Some(mut dst), Some(src), None) = (it.next(), it.next(), it.next()) else {
            ncnn_bail!("CopyTo takes two bottoms: the blob and the values to write into it");
        };
        let axes = dst.axes();
        let roi = self.p.resolve(&axes, "CopyTo")?;
        if roi.ext == axes {
            return Ok(vec![src]);
        }
        if src.total() != roi.ext.iter().product::<usize>() {
            ncnn_bail!(
                "CopyTo: the source {} does not have the {} values of the region (extents {:?}, outermost first)",
                src.describe(), roi.ext.iter().product::<usize>(), roi.ext
            );
        }
        copy_region(&src.data, &axes, &roi, &mut dst.data, true);
        Ok(vec![dst])
    }
}
