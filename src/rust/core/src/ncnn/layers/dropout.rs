//! Dropout at inference: multiplies by `scale` (key 0, default 1).

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};

pub struct Dropout {
    scale: f32,
}

impl Dropout {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Dropout> {
        Ok(Dropout {
            scale: pd.float(0, 1.0),
        })
    }
}

impl Layer for Dropout {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut m = one(bottoms, "Dropout")?;
        if self.scale != 1.0 {
            m.data.iter_mut().for_each(|x| *x *= self.scale);
        }
        Ok(vec![m])
    }
}
