//! Concat: joins bottoms along an axis (outermost first; negative from the end).

use crate::ncnn::layer::{resolve_axis, split_at_axis};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Concat {
    axis: i32,
}

impl Concat {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Concat> {
        Ok(Concat { axis: pd.int(0, 0) })
    }

    /// Whether the blobs are joined along channels when they are 3-d.
    pub fn joins_channels(&self) -> bool {
        self.axis == 0 || self.axis == -3
    }
}

impl Layer for Concat {
    fn one_blob_only(&self) -> bool {
        false
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
    // BOUNDS-FN: bottoms is not empty (checked); a < dims (resolve_axis) and every
    // bottom has dims axes (checked); block o of a bottom is n values of its outer x n.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if bottoms.is_empty() {
            ncnn_bail!("Concat needs at least one bottom blob");
        }
        let dims = bottoms[0].dims;
        let a = resolve_axis(self.axis, dims, "Concat")?;
        let base = bottoms[0].axes();
        let mut total = 0;
        for b in &bottoms {
            let ax = b.axes();
            let ok = b.dims == dims
                && ax
                    .iter()
                    .zip(&base)
                    .enumerate()
                    .all(|(i, (x, y))| i == a || x == y);
            if !ok {
                ncnn_bail!(
                    "cannot concatenate blobs of shapes {} and {} along axis {}",
                    bottoms[0].describe(),
                    b.describe(),
                    self.axis
                );
            }
            total += ax[a];
        }
        let mut out_axes = base.clone();
        out_axes[a] = total;
        let (outer, _, inner) = split_at_axis(&out_axes, a);
        let mut data = crate::ncnn::mat::take_vec(out_axes.iter().product());
        for o in 0..outer {
            for b in &bottoms {
                let n = b.axes()[a] * inner;
                data.extend_from_slice(&b.data[o * n..(o + 1) * n]);
            }
        }
        Ok(vec![Mat::from_axes(&out_axes, data)?])
    }
}
