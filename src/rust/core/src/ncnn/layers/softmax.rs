//! Softmax along one axis (ncnn axis numbering: outermost first).

use crate::ncnn::layer::{one, resolve_axis, split_at_axis};
use crate::ncnn::par;
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

/// Softmax over axis `a` of a blob with extents `axes` (outermost first):
/// runs of `n` values at stride `inner`, processed `inner` at a time.
// BOUNDS-FN: data holds the product of axes, so blocks are whole multiples of
// inner (n >= 1 here).
pub fn softmax_axis(data: &mut [f32], axes: &[usize], a: usize) {
    let (_, n, inner) = split_at_axis(axes, a);
    if inner == 1 {
        return softmax_rows(data, n);
    }
    if n == 0 {
        return;
    }
    par::chunks_mut(data, n * inner, |_, block| {
        let mut m = block[..inner].to_vec();
        for row in block.chunks(inner).skip(1) {
            m.iter_mut().zip(row).for_each(|(m, v)| *m = m.max(*v));
        }
        let mut s = vec![0.0f32; inner];
        for row in block.chunks_mut(inner) {
            crate::base::simd::wide(|| {
                for ((v, m), s) in row.iter_mut().zip(&m).zip(s.iter_mut()) {
                    *v = (*v - m).exp();
                    *s += *v;
                }
            });
        }
        for row in block.chunks_mut(inner) {
            row.iter_mut().zip(&s).for_each(|(v, s)| *v /= s);
        }
    });
}

/// Softmax of every contiguous run of `n` values.
pub fn softmax_rows(data: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    par::chunks_mut(data, n, |_, row| {
        let m = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let mut s = 0.0f32;
        for v in row.iter_mut() {
            *v = (*v - m).exp();
            s += *v;
        }
        row.iter_mut().for_each(|v| *v /= s);
    });
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
