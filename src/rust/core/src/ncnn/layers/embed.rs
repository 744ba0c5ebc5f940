//! Embed: looks up a row of `num_output` weights for every index of a 1-d
//! blob (the w first values; indices below 0 or past input_dim clamp to the
//! ends; a fractional index rounds to the nearest), plus a bias when
//! 2=bias_term. int8 weights (18=int8_scale_term) are divided by their scale.

use crate::ncnn::mat::take_vec;
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Embed {
    num_output: usize,
    input_dim: usize,
    bias_term: bool,
    int8: bool,
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl Embed {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Embed> {
        let (n, d, size) = (pd.int(0, 0), pd.int(1, 0), pd.int(3, 0));
        if n <= 0 || d <= 0 || size as i64 != n as i64 * d as i64 {
            ncnn_bail!("Embed needs num_output (0) and input_dim (1) positive and weight_data_size (3) their product, got {n}, {d} and {size}");
        }
        Ok(Embed { num_output: n as usize, input_dim: d as usize, bias_term: pd.int(2, 0) != 0, int8: pd.int(18, 0) != 0, weight: vec![], bias: vec![] })
    }
}

impl Layer for Embed {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let n = self.num_output * self.input_dim;
        let w = mb.tagged_any(n, "embedding weights")?;
        if w.stored == crate::ncnn::modelbin::Stored::Int8 && !self.int8 {
            ncnn_bail!("embedding weights are stored as int8 but int8_scale_term (18) is 0");
        }
        self.weight = w.data;
        if self.bias_term {
            self.bias = mb.raw(self.num_output, "embedding bias")?;
        }
        if self.int8 {
            let s = mb.raw(1, "embedding int8 scale")?[0];
            if !(s.is_finite() && s != 0.0) {
                ncnn_bail!("embedding int8 scale must be finite and non-zero, got {s}");
            }
            let d = 1.0 / s;
            self.weight.iter_mut().for_each(|v| *v *= d);
        }
        Ok(())
    }

    // BOUNDS-FN: x.w <= x.total(); load_model read input_dim rows of n weights
    // (input_dim >= 1, checked in new) and i <= input_dim - 1.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Embed")?;
        let (words, n) = (x.w, self.num_output);
        let mut out = take_vec(words * n);
        for &v in &x.data[..words] {
            if v.is_nan() {
                ncnn_bail!("Embed: an index is NaN");
            }
            let i = (v.round().max(0.0) as usize).min(self.input_dim - 1);
            let row = &self.weight[i * n..(i + 1) * n];
            if self.bias.is_empty() {
                out.extend_from_slice(row);
            } else {
                out.extend(row.iter().zip(&self.bias).map(|(a, b)| a + b));
            }
        }
        Ok(vec![Mat::from_shape(&[n, words], out)?])
    }
}
