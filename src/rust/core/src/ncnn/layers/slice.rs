//! Slice: splits a blob along an axis by sizes (-233: an equal share of the
//! rest) or by end indices.

use crate::ncnn::layer::{one, resolve_axis, split_at_axis};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Slice {
    slices: Vec<i32>,
    axis: i32,
    indices: Vec<i32>,
}

impl Slice {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Slice> {
        Ok(Slice {
            slices: pd.ints(0),
            axis: pd.int(1, 0),
            indices: pd.ints(2),
        })
    }
}

impl Layer for Slice {
    fn one_blob_only(&self) -> bool {
        false
    }
    // BOUNDS-FN: a < dims (resolve_axis); i < indices.len() is tested; the sizes are
    // increasing ends within n (checked), so off + s <= n along the axis.
    fn forward(&self, bottoms: Vec<Mat>, ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Slice")?;
        let a = resolve_axis(self.axis, x.dims, "Slice")?;
        let axes = x.axes();
        let n = axes[a] as i64;
        let mut sizes = Vec::with_capacity(ntop);
        if !self.indices.is_empty() {
            let mut start = 0i64;
            for i in 0..ntop {
                let end = if i < self.indices.len() {
                    let v = self.indices[i] as i64;
                    if v < 0 {
                        v + n
                    } else {
                        v.min(n)
                    }
                } else {
                    n
                };
                if end < start {
                    ncnn_bail!(
                        "Slice indices {:?} are not increasing within extent {n}",
                        self.indices
                    );
                }
                sizes.push((end - start) as usize);
                start = end;
            }
        } else {
            if self.slices.len() != ntop {
                ncnn_bail!(
                    "Slice has {} slice sizes for {} tops",
                    self.slices.len(),
                    ntop
                );
            }
            let mut used = 0i64;
            for (i, &s) in self.slices.iter().enumerate() {
                let s = if s == -233 {
                    (n - used) / (ntop - i) as i64
                } else {
                    s as i64
                };
                if s < 0 || used + s > n {
                    ncnn_bail!(
                        "Slice sizes {:?} do not fit extent {n} of axis {}",
                        self.slices,
                        self.axis
                    );
                }
                sizes.push(s as usize);
                used += s;
            }
        }
        let (outer, _, inner) = split_at_axis(&axes, a);
        let mut tops = Vec::with_capacity(ntop);
        let mut off = 0;
        for &s in &sizes {
            let mut data = crate::ncnn::mat::take_vec(outer * s * inner);
            for o in 0..outer {
                let base = (o * axes[a] + off) * inner;
                data.extend_from_slice(&x.data[base..base + s * inner]);
            }
            let mut ax = axes.clone();
            ax[a] = s;
            tops.push(Mat::from_axes(&ax, data)?);
            off += s;
        }
        Ok(tops)
    }
}
