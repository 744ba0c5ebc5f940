//! Squeeze: drops axes of extent 1. Either the flags 0=w, 1=h, 11=d, 2=c
//! name the axes, or the array 3 lists them (outermost first from 0,
//! negative from the end); a named axis whose extent is not 1 stays. A blob
//! squeezed of every axis is 1-d with one value.

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};

pub struct Squeeze {
    /// Flags by name (w, h, d, c).
    flags: [bool; 4],
    axes: Vec<i32>,
}

impl Squeeze {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Squeeze> {
        let f = |id| pd.int(id, 0) != 0;
        Ok(Squeeze { flags: [f(0), f(1), f(11), f(2)], axes: pd.ints(3) })
    }

    /// Whether each axis of a blob with these outermost-first `names` is named.
    // BOUNDS-FN: v has names.len() = dims entries and 0 <= a < dims is tested.
    fn named(&self, names: &[usize]) -> Vec<bool> {
        let dims = names.len() as i32;
        if self.axes.is_empty() {
            return names.iter().map(|&n| self.flags.get(n).copied().unwrap_or(false)).collect();
        }
        let mut v = vec![false; names.len()];
        for &a in &self.axes {
            let a = if a < 0 { a + dims } else { a };
            if (0..dims).contains(&a) {
                v[a as usize] = true;
            }
        }
        v
    }
}

/// Names (0 w, 1 h, 2 d, 3 c) of a blob's axes, outermost first.
pub fn axis_names(dims: usize) -> &'static [usize] {
    match dims {
        1 => &[0],
        2 => &[1, 0],
        3 => &[3, 1, 0],
        _ => &[3, 2, 1, 0],
    }
}

impl Layer for Squeeze {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Squeeze")?;
        let axes = x.axes();
        let named = self.named(axis_names(x.dims));
        let mut kept: Vec<usize> = axes.iter().zip(&named).filter(|(&e, &n)| !(n && e == 1)).map(|(&e, _)| e).collect();
        if kept.is_empty() {
            kept.push(1);
        }
        let int8 = x.int8;
        let mut out = Mat::from_axes(&kept, x.data)?;
        out.int8 = int8;
        Ok(vec![out])
    }
}
