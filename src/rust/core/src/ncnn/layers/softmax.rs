//! Softmax along one axis (ncnn axis numbering: outermost first).

use crate::ncnn::layer::{one, resolve_axis, split_at_axis};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Softmax {
    axis: i32,
}

impl Softmax {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Softmax> {
        let axis = pd.int(0, 0);
        if axis != 0 && pd.int(1, 0) == 0 {
            ncnn_bail!("softmax with axis {axis} needs fixbug0 (key 1) = 1; the param is too old, regenerate it with a current converter");
        }
        Ok(Softmax { axis })
    }
}

/// Softmax over `n` values at stride `inner` starting at `base`.
pub fn softmax_axis(data: &mut [f32], axes: &[usize], a: usize) {
    let (outer, n, inner) = split_at_axis(axes, a);
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let mut m = f32::NEG_INFINITY;
            for k in 0..n {
                m = m.max(data[base + k * inner]);
            }
            let mut s = 0.0f32;
            for k in 0..n {
                let e = (data[base + k * inner] - m).exp();
                data[base + k * inner] = e;
                s += e;
            }
            for k in 0..n {
                data[base + k * inner] /= s;
            }
        }
    }
}

impl Layer for Softmax {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "Softmax")?;
        let a = resolve_axis(self.axis, x.dims, "Softmax")?;
        let axes = x.axes();
        softmax_axis(&mut x.data, &axes, a);
        Ok(vec![x])
    }
}
