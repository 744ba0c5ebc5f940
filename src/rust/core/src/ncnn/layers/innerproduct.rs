//! InnerProduct: y = W x + b with fused activation. The input is flattened
//! channel-major; a 2-d input whose rows match the weights is a batch of
//! rows (2-d output). With int8_scale_term the input is quantized with its
//! scale, multiplied by int8 weights (stored so, or quantized at load with
//! the per-output scales) and the sums scaled back.

use super::kernels::conv::finish;
use super::kernels::gemv::{gemv, WeightRows};
use super::kernels::matmul::{matmul, MatView};
use super::kernels::quant::{dequant_scales, finish_int8, quantize, quantize_rows, Int8Scales};
use crate::ncnn::layer::{one, Activation};
use crate::ncnn::modelbin::Stored;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct InnerProduct {
    num_output: usize,
    bias_term: bool,
    weight_data_size: usize,
    int8_term: i32,
    act: Activation,
    weight: Vec<f32>,
    /// The int8 weights as bytes, for the one-input product (a quarter of
    /// the memory traffic); `weight` is then empty until a batch needs it.
    weight_i8: Vec<i8>,
    bias: Vec<f32>,
    int8: Option<Int8Scales>,
    /// Per output: the factor back from an int8 sum.
    dequant: Vec<f32>,
}

impl InnerProduct {
    pub fn new(pd: &ParamDict) -> anyhow::Result<InnerProduct> {
        let n = pd.int(0, 0);
        let wds = pd.int(2, 0);
        if n <= 0 || wds <= 0 || wds % n != 0 {
            ncnn_bail!("num_output ({n}) and weight_data_size ({wds}) must be positive, the second a multiple of the first");
        }
        Ok(InnerProduct {
            num_output: n as usize,
            bias_term: pd.int(1, 0) != 0,
            weight_data_size: wds as usize,
            int8_term: pd.int(8, 0),
            act: Activation::from_params(pd, 9, 10)?,
            weight: vec![],
            weight_i8: vec![],
            bias: vec![],
            int8: None,
            dequant: vec![],
        })
    }

    /// A layer from weights already in memory (Convolution on a 1-d blob).
    pub fn with_weights(num_output: usize, weight: Vec<f32>, bias: Vec<f32>, act: Activation, int8: Option<Int8Scales>) -> InnerProduct {
        let dequant = int8.as_ref().map(|s| dequant_scales(s.bottom, &s.weight)).unwrap_or_default();
        InnerProduct {
            num_output,
            bias_term: !bias.is_empty(),
            weight_data_size: weight.len(),
            int8_term: if int8.is_some() { 1 } else { 0 },
            act,
            weight,
            weight_i8: vec![],
            bias,
            int8,
            dequant,
        }
    }

    /// Inputs per output.
    pub fn num_input(&self) -> usize {
        self.weight_data_size / self.num_output
    }

    /// The output for input `x` (its values; int8 inputs as they are).
    // BOUNDS-FN: the indexes are whole-range slices ([..]).
    pub fn apply(&self, x: &Mat) -> anyhow::Result<Mat> {
        let k = self.num_input();
        let input: std::borrow::Cow<[f32]> = match &self.int8 {
            Some(s) if !x.int8 => std::borrow::Cow::Owned(quantize(&x.data, s.bottom)),
            _ => std::borrow::Cow::Borrowed(&x.data[..]),
        };
        let rows = if x.dims == 2 && x.w == k {
            x.h
        } else if x.total() == k {
            0
        } else {
            ncnn_bail!("expects {k} input values, got a blob of shape {} ({} values)", x.describe(), x.total());
        };
        let mut out = if rows > 0 { Mat::new_2d(self.num_output, rows) } else { Mat::new_1d(self.num_output) };
        let n = self.num_output;
        if rows > 0 {
            // out[r][o] = sum_i x[r][i] * W[o][i]
            let widened: Vec<f32>;
            let w = if self.weight_i8.is_empty() {
                &self.weight[..]
            } else {
                widened = self.weight_i8.iter().map(|&v| v as f32).collect();
                &widened[..]
            };
            matmul(MatView::rows(&input, k), MatView::transposed(w, k), &mut out.data, rows, k, n);
        } else if self.weight_i8.is_empty() {
            gemv(WeightRows::F32(&self.weight), &input, k, &mut out.data);
        } else {
            gemv(WeightRows::I8(&self.weight_i8), &input, k, &mut out.data);
        }
        if self.int8.is_some() {
            for row in out.data.chunks_mut(n) {
                // One output per "row" of the epilogue.
                finish_int8(row, 1, &self.dequant, &self.bias, &self.act, None, true);
            }
        } else if rows > 0 {
            for row in out.data.chunks_mut(n) {
                for (o, v) in row.iter_mut().enumerate() {
                    *v = self.act.apply1(*v + self.bias.get(o).copied().unwrap_or(0.0));
                }
            }
        } else {
            finish(&mut out.data, 1, &self.bias, &self.act);
        }
        Ok(out)
    }
}

impl Layer for InnerProduct {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let w = if self.int8_term != 0 {
            mb.tagged_any(self.weight_data_size, "inner product weights")?
        } else {
            crate::ncnn::modelbin::Weights { data: mb.tagged(self.weight_data_size, "inner product weights")?, stored: Stored::F32 }
        };
        self.weight = w.data;
        self.bias = if self.bias_term { mb.raw(self.num_output, "inner product bias")? } else { vec![] };
        if self.int8_term != 0 {
            let s = Int8Scales::load(mb, self.num_output, self.int8_term, "inner product")?;
            if w.stored != Stored::Int8 {
                quantize_rows(&mut self.weight, &s.weight);
            }
            self.dequant = dequant_scales(s.bottom, &s.weight);
            self.int8 = Some(s);
            // whole numbers -127..127 after quantization
            self.weight_i8 = self.weight.iter().map(|&v| v as i8).collect();
            self.weight = Vec::new();
        }
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "InnerProduct")?;
        Ok(vec![self.apply(&x)?])
    }
}
