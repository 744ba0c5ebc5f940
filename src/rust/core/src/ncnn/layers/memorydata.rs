//! MemoryData: a constant blob read from the weights (extents w, h, d, c;
//! its dimensions are those given, from w up).

use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct MemoryData {
    shape: Vec<usize>,
    data: Mat,
}

impl MemoryData {
    pub fn new(pd: &ParamDict) -> anyhow::Result<MemoryData> {
        let (w, h, d, c) = (pd.int(0, 0), pd.int(1, 0), pd.int(11, 0), pd.int(2, 0));
        if [w, h, d, c].iter().any(|&v| v < 0) {
            ncnn_bail!("MemoryData extents must not be negative, got w={w} h={h} d={d} c={c}");
        }
        let u = |v: i32| v as usize;
        let shape = if c != 0 && d != 0 {
            vec![u(w), u(h), u(d), u(c)]
        } else if c != 0 {
            vec![u(w), u(h), u(c)]
        } else if h != 0 {
            vec![u(w), u(h)]
        } else {
            vec![u(w).max(1)]
        };
        let n = shape.iter().try_fold(1usize, |a, &v| a.checked_mul(v));
        if n.is_none_or(|n| n > 1 << 30) {
            ncnn_bail!("MemoryData of extents {shape:?} is too large");
        }
        Ok(MemoryData { shape, data: Mat::default() })
    }
}

impl Layer for MemoryData {
    fn one_blob_only(&self) -> bool {
        false
    }

    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let n = self.shape.iter().product();
        let v = mb.raw(n, "memory data")?;
        self.data = Mat::from_shape(&self.shape, v)?;
        Ok(())
    }

    fn forward(&self, _bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        Ok(vec![self.data.clone()])
    }
}
