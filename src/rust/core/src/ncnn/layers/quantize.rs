//! Quantize, Dequantize and Requantize: the conversions between floats,
//! int8 and int32 sums, with one scale (and bias) for the whole blob or one
//! per row of a 2-d blob, per channel of a 3-d one (a 1-d blob takes the
//! first of each, as the real ncnn does). int8 values stay whole numbers in f32 (marked int8 for the layers
//! that take them as they are); int32 inputs are read as their values.

use super::kernels::quant::float2int8;
use crate::ncnn::layer::{one, Activation};
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum QuantizeKind {
    Quantize,
    Dequantize,
    Requantize,
}

pub struct Quant {
    kind: QuantizeKind,
    /// Sizes of the scale (in), scale out and bias arrays.
    sizes: [usize; 3],
    scale_in: Vec<f32>,
    scale_out: Vec<f32>,
    bias: Vec<f32>,
    act: Activation,
}

impl Quant {
    // BOUNDS-FN: sizes is a [usize; 3] indexed by literals below 3.
    pub fn new(pd: &ParamDict, kind: QuantizeKind) -> anyhow::Result<Quant> {
        let get = |id: usize, def: i32| -> anyhow::Result<usize> {
            let v = pd.int(id, def);
            if v < 0 {
                ncnn_bail!("a scale or bias data size must not be negative, got {v} for key {id}");
            }
            Ok(v as usize)
        };
        let (sizes, act) = match kind {
            QuantizeKind::Quantize => ([get(0, 1)?, 0, 0], Activation::default()),
            QuantizeKind::Dequantize => ([get(0, 1)?, 0, get(1, 0)?], Activation::default()),
            QuantizeKind::Requantize => ([get(0, 1)?, get(1, 1)?, get(2, 0)?], Activation::from_params(pd, 3, 4)?),
        };
        if sizes[0] == 0 || (kind == QuantizeKind::Requantize && sizes[1] == 0) {
            ncnn_bail!("scale_data_size must be positive");
        }
        Ok(Quant { kind, sizes, scale_in: vec![], scale_out: vec![], bias: vec![], act })
    }
}

/// The value of a per-unit table for unit `i` (one value: every unit).
#[inline]
fn pick(v: &[f32], i: usize) -> f32 {
    match v.len() {
        0 => 0.0,
        1 => v.first().copied().unwrap_or(0.0),
        _ => v.get(i).copied().unwrap_or(0.0),
    }
}

impl Layer for Quant {
    // BOUNDS-FN: sizes is a [usize; 3] indexed by literals below 3.
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.scale_in = mb.raw(self.sizes[0], "quantization scales")?;
        if self.kind == QuantizeKind::Requantize {
            self.scale_out = mb.raw(self.sizes[1], "requantization output scales")?;
        }
        if self.sizes[2] > 0 {
            self.bias = mb.raw(self.sizes[2], "quantization bias")?;
        }
        Ok(())
    }

    // BOUNDS-FN: sizes is a [usize; 3] indexed by literals below 3.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let what = match self.kind {
            QuantizeKind::Quantize => "Quantize",
            QuantizeKind::Dequantize => "Dequantize",
            QuantizeKind::Requantize => "Requantize",
        };
        let mut x = one(bottoms, what)?;
        // the units the tables run over, and the values per unit
        // (a 1-d blob is one unit: the real ncnn applies the first scale and
        // bias to all its elements, whatever the table sizes)
        let (units, per) = match x.dims {
            1 => (1, x.w),
            2 => (x.h, x.w),
            _ => (x.c, x.cstep()),
        };
        for (t, n) in [(&self.scale_in, self.sizes[0]), (&self.scale_out, self.sizes[1]), (&self.bias, self.sizes[2])] {
            if n > 1 && x.dims > 1 && t.len() != units {
                ncnn_bail!("{what} has {n} scale or bias values, but the input {} has {units} units (elements, rows or channels)", x.describe());
            }
        }
        for (i, run) in x.data.chunks_mut(per.max(1)).enumerate() {
            let (s, b) = (pick(&self.scale_in, i), pick(&self.bias, i));
            match self.kind {
                QuantizeKind::Quantize => run.iter_mut().for_each(|v| *v = float2int8(*v * s)),
                QuantizeKind::Dequantize => run.iter_mut().for_each(|v| *v = *v * s + b),
                QuantizeKind::Requantize => {
                    let so = pick(&self.scale_out, i);
                    run.iter_mut().for_each(|v| *v = float2int8(self.act.apply1(*v * s + b) * so));
                }
            }
        }
        x.int8 = self.kind != QuantizeKind::Dequantize;
        Ok(vec![x])
    }
}
