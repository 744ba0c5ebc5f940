//! ExpandDims: inserts axes of extent 1 at the positions of the output
//! listed by the array 3 (outermost first from 0, negative from the end).

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct ExpandDims {
    axes: Vec<i32>,
}

impl ExpandDims {
    pub fn new(pd: &ParamDict) -> anyhow::Result<ExpandDims> {
        Ok(ExpandDims { axes: pd.ints(3) })
    }
}

impl Layer for ExpandDims {
    // BOUNDS-FN: new has odims entries and 0 <= p < odims is tested first.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "ExpandDims")?;
        if self.axes.is_empty() {
            return Ok(vec![x]);
        }
        let odims = x.dims + self.axes.len();
        if odims > 4 {
            ncnn_bail!("ExpandDims: {} new axes on {} give {odims} dimensions; a blob has at most 4", self.axes.len(), x.describe());
        }
        let mut new = vec![false; odims];
        for &a in &self.axes {
            let p = if a < 0 { a + odims as i32 } else { a };
            if !(0..odims as i32).contains(&p) || new[p as usize] {
                ncnn_bail!("ExpandDims: axis {a} is out of range or repeated for a {odims}-d output of {}", x.describe());
            }
            new[p as usize] = true;
        }
        let mut src = x.axes().into_iter();
        let out_axes: Vec<usize> = new.iter().map(|&n| if n { 1 } else { src.next().unwrap_or(1) }).collect();
        let int8 = x.int8;
        let mut out = Mat::from_axes(&out_axes, x.data)?;
        out.int8 = int8;
        Ok(vec![out])
    }
}
