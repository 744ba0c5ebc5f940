//! ConvolutionDepthWise: grouped convolution. One input channel per group
//! runs the direct depthwise kernel; larger groups use the convolution GEMM
//! per group. With int8_scale_term the input is quantized with its scale
//! (unless already int8), the weights are int8 with one scale per group,
//! and the sums are scaled back (requantized when int8_scale_term > 100).

use super::kernels::conv::{conv_gemm, conv_gemm_padded, padded_whole, Border, ConvParams};
use super::kernels::depthwise::dw_channel;
use super::kernels::depthwise_pack::{self, dw16, Extents, LANES};
use super::kernels::gemm::{Epi, PackedA};
use super::kernels::quant::{dequant_scales, dequant_scales_approx, finish_int8, quantize, Int8Scales};
use crate::ncnn::layer::Activation;
use crate::base::simd;
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;

pub struct ConvolutionDepthWise {
    p: ConvParams,
    weight: Vec<f32>,
    /// Per-group packed weights (groups with several input channels).
    packed: Vec<PackedA>,
    bias: Vec<f32>,
    int8: Option<Int8Scales>,
    /// Per output channel: the factor back from an int8 sum.
    dequant: Vec<f32>,
}

impl ConvolutionDepthWise {
    pub fn new(pd: &ParamDict) -> anyhow::Result<ConvolutionDepthWise> {
        Ok(ConvolutionDepthWise {
            p: ConvParams::new(pd, true)?,
            weight: vec![],
            packed: vec![],
            bias: vec![],
            int8: None,
            dequant: vec![],
        })
    }
}

impl Layer for ConvolutionDepthWise {
    // BOUNDS-FN: load_any reads weight_data_size weights (per * g of them) and one
    // weight scale per group: o / ocg < g.
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let scales;
        (self.weight, self.bias, scales) = self.p.load_any(mb, self.p.group)?;
        let p = &self.p;
        let g = p.group;
        let ocg = p.num_output / g;
        if let Some(s) = &scales {
            // One weight scale per group, for each of its outputs.
            // ncnn's x86 kernels for channels in packs of 8 or 16 use an
            // approximate reciprocal and round the scaling and the bias
            // apart; the others divide exactly and round once.
            let per_group = if self.approx() { dequant_scales_approx(s.bottom, &s.weight) } else { dequant_scales(s.bottom, &s.weight) };
            self.dequant = (0..p.num_output).map(|o| per_group[o / ocg]).collect();
        }
        self.int8 = scales;
        let per = p.weight_data_size / g;
        if ocg > 1 || per / ocg.max(1) > p.kh * p.kw {
            self.packed = (0..g)
                .map(|gi| PackedA::new(&self.weight[gi * per..(gi + 1) * per], ocg, per / ocg))
                .collect();
        }
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "ConvolutionDepthWise")?;
        let Some(s) = &self.int8 else {
            return Ok(vec![self.run(&x, &self.p, &self.bias)?]);
        };
        let xq = if x.int8 { x } else { Mat { data: quantize(&x.data, s.bottom).into(), int8: true, ..x } };
        // The plain sums, then the int8 epilogue.
        let raw = ConvParams { act: Activation::default(), ..self.p.clone() };
        let mut out = self.run(&xq, &raw, &[])?;
        let n = out.w * out.h;
        finish_int8(&mut out.data, n, &self.dequant, &self.bias, &self.p.act, s.top, !self.approx());
        out.int8 = s.top.is_some();
        Ok(vec![out])
    }
}

/// Output planes narrower than this run 16 channels at a time on AVX-512
/// (`depthwise_pack`).
const PACK_BELOW: usize = 16;

impl ConvolutionDepthWise {
    /// Whether the int8 sums are scaled as ncnn's packed kernels do.
    fn approx(&self) -> bool {
        self.p.num_output % 8 == 0
    }

    /// The convolution of `x` with parameters `p` (the layer's, or without
    /// activation) and `bias` (empty: none).
    // Bounds: with icg = ocg = 1 the weights are kk per channel q < inch =
    // num_output; a bias has num_output values; otherwise (ocg > 1 or icg * kk >
    // kk) load_model packed one matrix per group gi < g; out holds g * ocg * n.
    // A full chunk of 16 output channels q0..q0 + 16 <= num_output = inch
    // reads those 16 input planes, kernels and biases.
    // BOUNDS-FN: every index is in range as said just above.
    fn run(&self, x: &Mat, p: &ConvParams, bias: &[f32]) -> anyhow::Result<Mat> {
        let inch = p.in_channels();
        if x.dims != 3 || x.c != inch || inch % p.group != 0 {
            ncnn_bail!(
                "expects a 3-d input with {inch} channels (divisible by group {}), got a blob of shape {}",
                p.group,
                x.describe()
            );
        }
        let (t, b, l, r) = p.pads(x.w, x.h);
        let (outw, outh) = p.out_size_wh(x.w + l + r, x.h + t + b)?;
        let n = outw * outh;
        let g = p.group;
        let (icg, ocg) = (inch / g, p.num_output / g);
        let mut out = Mat::for_overwrite_3d(outw, outh, p.num_output);
        if icg == 1 && ocg == 1 {
            let kk = p.kh * p.kw;
            let fast = simd::avx2_fma();
            let pad = Border { t, b, l, r, value: p.pad_value };
            let one = |q: usize, o: &mut [f32]| {
                let bias = bias.get(q).copied().unwrap_or(0.0);
                let k = &self.weight[q * kk..(q + 1) * kk];
                dw_channel(x.channel(q), x.w, x.h, pad, k, bias, p, o, outw, fast);
            };
            if fast && outw < PACK_BELOW && inch >= LANES && depthwise_pack::available() {
                // Narrow planes: 16 channels at a time, interleaved (the
                // channels past the last 16 one at a time).
                let (plane, post) = (x.w * x.h, !matches!(p.act.kind, 0 | 1 | 3));
                let e = Extents { w: x.w, h: x.h, outw, outh };
                par::chunks_mut(&mut out.data, LANES * n, |gi, o| {
                    let q0 = gi * LANES;
                    if o.len() == LANES * n {
                        let b = if bias.is_empty() { &[][..] } else { &bias[q0..q0 + LANES] };
                        let src = &x.data[q0 * plane..(q0 + LANES) * plane];
                        dw16(src, e, pad, &self.weight[q0 * kk..(q0 + LANES) * kk], b, p, o);
                        if post {
                            p.act.apply(o);
                        }
                    } else {
                        for (j, oc) in o.chunks_mut(n).enumerate() {
                            one(q0 + j, oc);
                        }
                    }
                });
            } else {
                par::chunks_mut(&mut out.data, n, one);
            }
        } else {
            // Stride 1: the input is bordered once for all groups. The
            // groups run in parallel (each product is small).
            let xp = if padded_whole(x, p) { Some(p.pad(x)) } else { None };
            par::chunks_mut(&mut out.data, ocg * n, |gi, o| {
                let bias = if bias.is_empty() { &[][..] } else { &bias[gi * ocg..(gi + 1) * ocg] };
                let ep = Epi { bias, act: &p.act };
                let a = &self.packed[gi];
                match &xp {
                    Some(xp) => conv_gemm_padded(xp, p, gi * icg..(gi + 1) * icg, a, o, (outw, outh), &ep),
                    None => conv_gemm(x, p, gi * icg, icg, a, o, outw, outh, &ep),
                }
            });
        }
        Ok(out)
    }
}
