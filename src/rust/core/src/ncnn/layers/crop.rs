//! Crop: a region of the bottom, by offsets and extents (`-233` = the rest,
//! tail offsets 6/7/15/8), by numpy-style starts / ends / axes (9/10/11), or
//! with two bottoms the extents of the second (at the given offsets).

use super::kernels::roi::{copy_region, Roi, RoiParams};
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Crop {
    p: RoiParams,
}

impl Crop {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Crop> {
        Ok(Crop { p: RoiParams::new(pd) })
    }

    /// The region the extents of `reference` give.
    // BOUNDS-FN: o is a [i32; 4] (literals); a Mat has 1 to 4 axes, so offs, roi and
    // axes have axes.len() entries, k < axes.len() and k - skip < raxes.len().
    fn like(&self, x: &Mat, reference: &Mat) -> anyhow::Result<Roi> {
        let axes = x.axes();
        let raxes = reference.axes();
        let o = self.p.offsets();
        // w h d c offsets onto outermost-first axes.
        let offs: Vec<i32> = match axes.len() {
            1 => vec![o[0]],
            2 => vec![o[1], o[0]],
            3 => vec![o[3], o[1], o[0]],
            _ => vec![o[3], o[2], o[1], o[0]],
        };
        let mut roi = Roi { off: vec![0; axes.len()], ext: axes.clone() };
        // The reference's innermost axes line up with the bottom's.
        let skip = axes.len().saturating_sub(raxes.len());
        for k in skip..axes.len() {
            let e = raxes[k - skip];
            if e > axes[k] {
                ncnn_bail!("reference blob {} is larger than the bottom {}", reference.describe(), x.describe());
            }
            roi.ext[k] = e;
            if offs[k] < 0 {
                ncnn_bail!("Crop with a reference blob needs offsets of 0 or more, got {}", offs[k]);
            }
            roi.off[k] = offs[k] as usize;
            if roi.off[k] + e > axes[k] {
                ncnn_bail!("offset {} with the reference's extent {e} runs past the bottom's {}", roi.off[k], axes[k]);
            }
        }
        Ok(roi)
    }
}

impl Layer for Crop {
    fn one_blob_only(&self) -> bool {
        false
    }

    // BOUNDS-FN: bottoms[0] and [1] in the arm for two bottoms.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let (x, roi) = match bottoms.len() {
            1 => {
                let x = bottoms.into_iter().next().unwrap_or_default();
                let roi = self.p.resolve(&x.axes(), "Crop")?;
                (x, roi)
            }
            2 if !self.p.numpy() => {
                let roi = self.like(&bottoms[0], &bottoms[1])?;
                (bottoms.into_iter().next().unwrap_or_default(), roi)
            }
            n => ncnn_bail!("Crop takes one bottom (or two: the blob and a reference for the extents), got {n}"),
        };
        let axes = x.axes();
        if roi.ext == axes {
            return Ok(vec![x]);
        }
        let n: usize = roi.ext.iter().product();
        let mut data = take_vec(n);
        data.resize(n, 0.0);
        copy_region(&x.data, &axes, &roi, &mut data, false);
        let mut out = Mat::from_axes(&roi.ext, data)?;
        out.int8 = x.int8;
        Ok(vec![out])
    }
}
