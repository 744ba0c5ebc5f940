//! LayerNorm: every run of `affine_size` values along the innermost axes
//! (a row, or a whole plane or channel when affine_size covers it) is
//! normalised to mean 0 and variance 1 (variance + eps under the root), then
//! scaled by gamma and shifted by beta elementwise when affine.

use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct LayerNorm {
    affine_size: usize,
    eps: f32,
    affine: bool,
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

impl LayerNorm {
    pub fn new(pd: &ParamDict) -> anyhow::Result<LayerNorm> {
        let n = pd.int(0, 0);
        if n <= 0 {
            ncnn_bail!("LayerNorm affine_size must be positive, got {n}");
        }
        Ok(LayerNorm { affine_size: n as usize, eps: pd.float(1, 0.001), affine: pd.int(2, 1) != 0, gamma: vec![], beta: vec![] })
    }
}

/// Normalise one run in place: mean and variance in f32 as ncnn sums them.
pub fn normalize(v: &mut [f32], eps: f32, gamma: &[f32], beta: &[f32]) {
    let n = v.len() as f32;
    let mean = v.iter().sum::<f32>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let a = 1.0 / (var + eps).sqrt();
    let b = -mean * a;
    if gamma.is_empty() {
        v.iter_mut().for_each(|x| *x = *x * a + b);
    } else {
        for ((x, g), be) in v.iter_mut().zip(gamma).zip(beta) {
            *x = (*x * a + b) * g + be;
        }
    }
}

impl Layer for LayerNorm {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        if self.affine {
            self.gamma = mb.raw(self.affine_size, "layer norm gamma")?;
            self.beta = mb.raw(self.affine_size, "layer norm beta")?;
        }
        Ok(())
    }

    // BOUNDS-FN: whole-range slices ([..]).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "LayerNorm")?;
        // The run: the innermost axes whose product is affine_size.
        let shape = x.shape();
        let mut run = 1;
        let fits = shape.iter().any(|&e| {
            run *= e;
            run == self.affine_size
        });
        if !fits {
            ncnn_bail!("affine_size {} is not the product of the innermost extents of {}", self.affine_size, x.describe());
        }
        let (eps, g, b) = (self.eps, &self.gamma[..], &self.beta[..]);
        x.int8 = false;
        par::chunks_mut(&mut x.data, self.affine_size, |_, v| normalize(v, eps, g, b));
        Ok(vec![x])
    }
}
