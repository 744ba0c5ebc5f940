//! Convolution: GEMM over shifted views of the padded input, explicit or SAME padding, dilation, bias and
//! fused activation. Weights are [out][in][kh][kw]. A 1-d input to a 1x1
//! kernel is an inner product. With int8_scale_term the input is quantized
//! with its scale (unless it already is int8), convolved with the int8
//! weights, and the sums scaled back per output channel (and requantized to
//! int8 when int8_scale_term > 100).

use super::kernels::conv::{conv_gemm, ConvParams};
use super::kernels::conv_int8::{self, Finish, Int8Conv};
use super::kernels::gemm::{Epi, PackedA};
use super::kernels::quant::{dequant_scales, finish_int8, quantize, Int8Scales};
use super::kernels::winograd::{self, Winograd};
use crate::ncnn::layer::{one, Activation};
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Convolution {
    p: ConvParams,
    packed: PackedA,
    /// The weights transformed for Winograd (3x3 stride 1), used instead
    /// of `packed`, which then stays empty.
    wino: Option<Winograd>,
    bias: Vec<f32>,
    int8: Option<Int8Scales>,
    /// The int8 weights packed for the integer dot-product kernel, where
    /// the CPU has it (then `packed` serves only 1-d inputs).
    i8conv: Option<Int8Conv>,
    /// Per output channel: the factor back from an int8 sum.
    dequant: Vec<f32>,
}

impl Convolution {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Convolution> {
        Ok(Convolution {
            p: ConvParams::new(pd, false)?,
            packed: PackedA::default(),
            wino: None,
            bias: vec![],
            int8: None,
            i8conv: None,
            dequant: vec![],
        })
    }
}

impl Layer for Convolution {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let (w, b, scales) = self.p.load_any(mb, self.p.num_output)?;
        let k = self.p.weight_data_size / self.p.num_output;
        let inch = self.p.in_channels();
        // int8 sums stay exact on the direct product, not through Winograd.
        if scales.is_none() && winograd::suits(&self.p, inch) {
            self.wino = Some(Winograd::new(&w, self.p.num_output, inch));
            self.packed = PackedA::default();
        } else {
            self.wino = None;
            self.packed = PackedA::new(&w, self.p.num_output, k);
        }
        self.i8conv = (scales.is_some() && conv_int8::available()).then(|| Int8Conv::new(&w, self.p.num_output, inch, self.p.kh, self.p.kw));
        self.bias = b;
        self.dequant = scales.as_ref().map(|s| dequant_scales(s.bottom, &s.weight)).unwrap_or_default();
        self.int8 = scales;
        Ok(())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Convolution")?;
        if x.dims == 1 {
            return Ok(vec![self.inner_product(&x)?]);
        }
        let (outw, outh, c) = self.out_shape(&x)?;
        let mut out = Mat::for_overwrite_3d(outw, outh, c);
        self.forward_into(&x, &mut out.data)?;
        out.int8 = self.int8.as_ref().is_some_and(|s| s.top.is_some());
        Ok(vec![out])
    }
}

impl Convolution {
    /// A 1x1 kernel over a 1-d blob of its input size: y = W x + b.
    fn inner_product(&self, x: &Mat) -> anyhow::Result<Mat> {
        let p = &self.p;
        let k = p.weight_data_size / p.num_output;
        if p.kw != 1 || p.kh != 1 || x.w != k {
            ncnn_bail!(
                "a 1-d input ({}) is taken only by a 1x1 kernel with {k} inputs per output (this one is {}x{})",
                x.describe(),
                p.kw,
                p.kh
            );
        }
        let input = match &self.int8 {
            Some(s) if !x.int8 => quantize(&x.data, s.bottom),
            _ => x.data.to_vec(),
        };
        let mut out = Mat::new_1d(p.num_output);
        self.packed.gemv(&input, &mut out.data);
        match &self.int8 {
            Some(s) => {
                let top = s.top;
                finish_int8(&mut out.data, 1, &self.dequant, &self.bias, &p.act, top, true);
                out.int8 = top.is_some();
            }
            None => {
                for (o, v) in out.data.iter_mut().enumerate() {
                    *v = p.act.apply1(*v + self.bias.get(o).copied().unwrap_or(0.0));
                }
            }
        }
        Ok(out)
    }

    /// Whether the output is int8 (requantized), which a fused Concat
    /// would not carry.
    pub fn int8_output(&self) -> bool {
        self.int8.as_ref().is_some_and(|s| s.top.is_some())
    }

    /// (w, h, channels) of the output for input `x`, or why `x` does not fit.
    pub fn out_shape(&self, x: &Mat) -> anyhow::Result<(usize, usize, usize)> {
        let p = &self.p;
        let inch = p.in_channels();
        if x.dims != 3 || x.c != inch {
            ncnn_bail!(
                "expects a 3-d input with {inch} channels, got a blob of shape {}",
                x.describe()
            );
        }
        let (t, b, l, r) = p.pads(x.w, x.h);
        let (outw, outh) = p.out_size_wh(x.w + l + r, x.h + t + b)?;
        Ok((outw, outh, p.num_output))
    }

    /// The output for input `x` written to the first values of `out`
    /// (channel after channel, as `out_shape` gives).
    // BOUNDS-FN: out holds num_output * n values (checked).
    pub fn forward_into(&self, x: &Mat, out: &mut [f32]) -> anyhow::Result<()> {
        let (outw, outh, _) = self.out_shape(x)?;
        let p = &self.p;
        if out.len() < p.num_output * outw * outh {
            ncnn_bail!("Convolution: the output buffer holds {} values, not {}", out.len(), p.num_output * outw * outh);
        }
        if let (Some(s), Some(k)) = (&self.int8, &self.i8conv) {
            let (t, b, l, r) = p.pads(x.w, x.h);
            let fin = Finish { dequant: &self.dequant, bias: &self.bias, act: &p.act, top: s.top };
            if !k.forward(x, s.bottom, p, t, l, x.h + t + b, x.w + l + r, out, outw, outh, Some(fin)) {
                finish_int8(&mut out[..p.num_output * outw * outh], outw * outh, &self.dequant, &self.bias, &p.act, s.top, true);
            }
            return Ok(());
        }
        if let Some(s) = &self.int8 {
            let q;
            let xq = if x.int8 {
                x
            } else {
                q = Mat { data: quantize(&x.data, s.bottom).into(), int8: true, ..x.clone() };
                &q
            };
            let none = Activation::default();
            let ep = Epi { bias: &[], act: &none };
            let n = outw * outh;
            conv_gemm(xq, p, 0, p.in_channels(), &self.packed, out, outw, outh, &ep);
            finish_int8(&mut out[..p.num_output * n], n, &self.dequant, &self.bias, &p.act, s.top, true);
            return Ok(());
        }
        if let Some(wg) = &self.wino {
            let (t, _, l, _) = p.pads(x.w, x.h);
            wg.forward(x, t, l, p.pad_value, &self.bias, &p.act, out, outw, outh);
            return Ok(());
        }
        let ep = Epi { bias: &self.bias, act: &p.act };
        conv_gemm(x, p, 0, p.in_channels(), &self.packed, out, outw, outh, &ep);
        Ok(())
    }
}
