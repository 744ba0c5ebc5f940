//! int8 quantization as ncnn does it: round half away from zero, clamp to
//! -127..127; the values stay in f32 (whole numbers), so the products of
//! int8 layers run on the f32 kernels and sum exactly while below 2^24.

/// ncnn's float2int8 (round half away from zero, clamp to +-127), as a
/// float; NaN stays NaN. Written with truncation, which vectorises (the
/// library's `round` is a call per value).
#[inline]
pub fn float2int8(v: f32) -> f32 {
    let a = v.abs();
    let r = a.trunc();
    let r = if a - r >= 0.5 { r + 1.0 } else { r };
    let q = r.min(127.0).copysign(v);
    if v.is_nan() {
        v
    } else {
        q
    }
}

/// `x * scale` quantized, into a new vector.
pub fn quantize(x: &[f32], scale: f32) -> Vec<f32> {
    let mut out = crate::ncnn::mat::take_vec(x.len());
    crate::base::simd::wide(|| out.extend(x.iter().map(|v| float2int8(v * scale))));
    out
}

/// Quantize rows of `w` (row r scaled by `scales[r]`) in place.
pub fn quantize_rows(w: &mut [f32], scales: &[f32]) {
    if scales.is_empty() {
        return;
    }
    let per = w.len() / scales.len();
    for (row, &s) in w.chunks_mut(per.max(1)).zip(scales) {
        row.iter_mut().for_each(|v| *v = float2int8(*v * s));
    }
}

/// The factor that turns an int32 sum back into a float for output `p`:
/// 1 / (input scale * weight scale), 0 where the weight scale is 0.
pub fn dequant_scales(bottom: f32, weights: &[f32]) -> Vec<f32> {
    weights.iter().map(|&w| if w == 0.0 { 0.0 } else { 1.0 / (bottom * w) }).collect()
}

/// As [`dequant_scales`], but with the reciprocal approximated by the
/// CPU's reciprocal instruction where it has one (x86 RCPSS, 12 bits):
/// ncnn's x86 int8 depthwise convolution scales its sums that way when the
/// channels come in packs of 8 or 16, so the same CPU gives the same outputs.
pub fn dequant_scales_approx(bottom: f32, weights: &[f32]) -> Vec<f32> {
    weights.iter().map(|&w| if w == 0.0 { 0.0 } else { approx_recip(bottom * w) }).collect()
}

#[cfg(target_arch = "x86_64")]
fn approx_recip(x: f32) -> f32 {
    use std::arch::x86_64::{_mm_cvtss_f32, _mm_rcp_ss, _mm_set_ss};
    // SAFETY: SSE is part of the x86-64 baseline.
    unsafe { _mm_cvtss_f32(_mm_rcp_ss(_mm_set_ss(x))) }
}

#[cfg(not(target_arch = "x86_64"))]
fn approx_recip(x: f32) -> f32 {
    1.0 / x
}

/// The int8 scales an int8 layer reads after its weights and bias.
#[derive(Clone, Debug, Default)]
pub struct Int8Scales {
    pub weight: Vec<f32>,
    pub bottom: f32,
    /// Requantize the output with this scale (int8_scale_term > 100).
    pub top: Option<f32>,
}

impl Int8Scales {
    pub fn load(mb: &mut crate::ncnn::ModelBin, n_weight: usize, term: i32, what: &str) -> anyhow::Result<Int8Scales> {
        let weight = mb.raw(n_weight, &format!("{what} int8 weight scales"))?;
        let bottom = mb.raw(1, &format!("{what} int8 input scale"))?[0];
        let top = if term > 100 { Some(mb.raw(1, &format!("{what} int8 output scale"))?[0]) } else { None };
        Ok(Int8Scales { weight, bottom, top })
    }
}

/// The int8 epilogue over rows of an output (row r is output channel r,
/// `n` values each): `act(v * dequant + bias)`, requantized with the output
/// scale when there is one. With `fused` the multiply-add rounds once (as
/// ncnn's x86 kernels do for most layers), else twice.
pub fn finish_int8(out: &mut [f32], n: usize, dequant: &[f32], bias: &[f32], act: &crate::ncnn::layer::Activation, top: Option<f32>, fused: bool) {
    let p = |i: usize, d: f32| act.params.get(i).copied().unwrap_or(d);
    match act.kind {
        0 => finish_rows(out, n, dequant, bias, top, fused, |v| v),
        1 => finish_rows(out, n, dequant, bias, top, fused, |v| v.max(0.0)),
        2 => {
            let s = p(0, 0.0);
            finish_rows(out, n, dequant, bias, top, fused, move |v| if v < 0.0 { v * s } else { v })
        }
        3 => {
            let (lo, hi) = (p(0, f32::NEG_INFINITY), p(1, f32::INFINITY));
            finish_rows(out, n, dequant, bias, top, fused, move |v| v.max(lo).min(hi))
        }
        _ => finish_rows(out, n, dequant, bias, top, fused, |v| act.apply1(v)),
    }
}

/// [`finish_int8`] with the activation `g` inlined into the loops.
fn finish_rows(out: &mut [f32], n: usize, dequant: &[f32], bias: &[f32], top: Option<f32>, fused: bool, g: impl Fn(f32) -> f32 + Sync + Send + Copy) {
    crate::ncnn::par::chunks_mut(out, n.max(1), |r, row| {
        let (d, b) = (dequant.get(r).copied().unwrap_or(0.0), bias.get(r).copied().unwrap_or(0.0));
        let f = |v: f32| if fused { v.mul_add(d, b) } else { v * d + b };
        crate::base::simd::wide(|| match top {
            Some(t) => row.iter_mut().for_each(|v| *v = float2int8(g(f(*v)) * t)),
            None => row.iter_mut().for_each(|v| *v = g(f(*v))),
        })
    });
}

/// The `rows` x `cols` matrix `v` quantized as ncnn's dynamic int8 products
/// do, row-major: with `fixed` scales (values already int8: copied as they
/// are, one scale per row or one for all), else `127 / absmax` per row
/// (`per_row`) or over the whole matrix, 1 where the values are all zero.
/// Returns the whole numbers and the scales (one per row, or one).
pub fn quantize_view(v: &super::matmul::MatView, rows: usize, cols: usize, per_row: bool, fixed: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
    let at = |r: usize, c: usize| v.data.get(r * v.rs + c * v.cs).copied().unwrap_or(0.0);
    let mut q = crate::ncnn::mat::take_vec(rows * cols);
    if let Some(s) = fixed {
        q.extend((0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))).map(|(r, c)| at(r, c)));
        return (q, s.to_vec());
    }
    let absmax = |r0: usize, r1: usize| (r0..r1).flat_map(|r| (0..cols).map(move |c| (r, c))).fold(0.0f32, |m, (r, c)| m.max(at(r, c).abs()));
    let scale = |m: f32| if m == 0.0 { 1.0 } else { 127.0 / m };
    let scales: Vec<f32> = if per_row { (0..rows).map(|r| scale(absmax(r, r + 1))).collect() } else { vec![scale(absmax(0, rows))] };
    for r in 0..rows {
        let s = if per_row { scales.get(r).copied().unwrap_or(1.0) } else { scales.first().copied().unwrap_or(1.0) };
        q.extend((0..cols).map(|c| float2int8(at(r, c) * s)));
    }
    (q, scales)
}
