//! Flip: reverses the blob along the axes of the array 0 (outermost first
//! from 0, negative from the end).

use crate::ncnn::layer::{one, resolve_axis};
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};

pub struct Flip {
    axes: Vec<i32>,
}

impl Flip {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Flip> {
        Ok(Flip { axes: pd.ints(0) })
    }
}

impl Layer for Flip {
    // BOUNDS-FN: flip and stride have axes.len() >= 1 entries (resolve_axis gives one
    // below it, i + 1 < len); src is the offset of a row of inner values inside
    // the product of axes = x.total().
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Flip")?;
        let axes = x.axes();
        let mut flip = vec![false; axes.len()];
        for &a in &self.axes {
            flip[resolve_axis(a, axes.len(), "Flip")?] = true;
        }
        if !flip.iter().any(|&f| f) {
            return Ok(vec![x]);
        }
        // strides of the outermost-first axes
        let mut stride = vec![1usize; axes.len()];
        for i in (0..axes.len().saturating_sub(1)).rev() {
            stride[i] = stride[i + 1] * axes[i + 1];
        }
        let inner = *axes.last().unwrap_or(&1);
        let flip_inner = *flip.last().unwrap_or(&false);
        let mut out = take_vec(x.total());
        let rows = x.total() / inner.max(1);
        for r in 0..rows {
            // the source row of output row r: each flipped outer axis reversed
            let mut src = 0;
            let mut rest = r;
            for i in (0..axes.len() - 1).rev() {
                let k = rest % axes[i];
                rest /= axes[i];
                src += if flip[i] { axes[i] - 1 - k } else { k } * stride[i];
            }
            let row = &x.data[src..src + inner];
            if flip_inner {
                out.extend(row.iter().rev());
            } else {
                out.extend_from_slice(row);
            }
        }
        let mut m = Mat::from_axes(&axes, out)?;
        m.int8 = x.int8;
        Ok(vec![m])
    }
}
