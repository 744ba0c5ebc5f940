//! int8 convolution on integer dot products (AVX-512 VNNI), without im2col.
//!
//! The quantized input is written once as bytes, offset by 128 (unsigned)
//! and bordered, channels interleaved in fours: `[c/4][h][w][4]`. A tap
//! (channel quad, ky, kx) of one output position is then four contiguous
//! bytes, broadcast to all lanes and multiplied with the int8 weights of 16
//! output channels by one `vpdpbusd`; a tile is 32 output channels by 8
//! output positions of one row, 16 int32 accumulators that stay in
//! registers over the whole reduction. The +128 offset adds
//! `128 * sum(weights)` to every sum, taken off before the sums (exact
//! int32) are stored as floats for the int8 epilogue.

use super::conv::ConvParams;
use super::gemm::SendPtr;
use crate::ncnn::layer::Activation;
use crate::ncnn::{par, Mat};
#[allow(unused_imports)]
use super::quant::finish_int8;

/// Output channels of a tile (two 16-lane registers).
const MB: usize = 32;
/// Output positions of a tile (consecutive columns of one output row).
const NB: usize = 8;

/// Convolution weights packed for [`Int8Conv::forward`]: per block of 32
/// output channels, `[c/4][ky][kx][32 channels][4 channels]` signed bytes.
#[derive(Clone, Debug, Default)]
pub struct Int8Conv {
    m: usize,
    c4: usize,
    w: Vec<i8>,
    /// Per output channel (padded to whole blocks): 128 * its weight sum.
    comp: Vec<i32>,
}

/// Whether this CPU runs the kernel (AVX-512 F, BW, DQ, VL and VNNI).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static YES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *YES.get_or_init(|| {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512dq")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl Int8Conv {
    /// Pack `w` ([m][inch][kh][kw], whole numbers in -127..127).
    // BOUNDS-FN: w holds m * inch * kh * kw values (asserted); the packed
    // index runs below blocks * c4 * kk * MB * 4 = the vector's length.
    pub fn new(w: &[f32], m: usize, inch: usize, kh: usize, kw: usize) -> Int8Conv {
        let kk = kh * kw;
        assert!(w.len() >= m * inch * kk, "Int8Conv: fewer weights than the shape");
        let c4 = inch.div_ceil(4);
        let blocks = m.div_ceil(MB);
        let mut pw = vec![0i8; blocks * c4 * kk * MB * 4];
        let mut comp = vec![0i32; blocks * MB];
        for o in 0..m {
            let (b, lane) = (o / MB, o % MB);
            for c in 0..inch {
                for t in 0..kk {
                    let v = w[(o * inch + c) * kk + t] as i32;
                    comp[o] += 128 * v;
                    pw[(((b * c4 + c / 4) * kk + t) * MB + lane) * 4 + c % 4] = v as i8;
                }
            }
        }
        Int8Conv { m, c4, w: pw, comp }
    }

    /// The int32 sums of the convolution of `x` (int8 values as whole
    /// floats when `x.int8`, else quantized here with `scale`), as floats,
    /// into `out` ([m][outh][outw]); `t`, `l` are the top and left borders,
    /// `ph`, `pw` the bordered height and width.
    // BOUNDS-FN: out holds m * outw * outh values (asserted); the input
    // buffer holds every byte a tile reads (its slack covers the columns
    // of the last tile past the end of the last row).
    ///
    /// With `fin` (dequantization factors and bias per output channel, the
    /// activation, the output scale) the tiles also finish the sums as
    /// [`finish_int8`] does, when the activation is one they apply
    /// (then returns true); else the sums are left to the caller.
    #[allow(clippy::too_many_arguments)]
    // BOUNDS-FN: buf is grown to at least c4 * plane + slack just before it is sliced.
    pub fn forward(&self, x: &Mat, scale: f32, p: &ConvParams, t: usize, l: usize, ph: usize, pw: usize, out: &mut [f32], outw: usize, outh: usize, fin: Option<Finish>) -> bool {
        let n = outw * outh;
        assert!(out.len() >= self.m * n, "Int8Conv: output buffer too small");
        assert!(x.c <= self.c4 * 4 && ph >= x.h + t && pw >= x.w + l, "Int8Conv: input does not fit");
        let fused = fin.as_ref().is_some_and(|f| matches!(f.act.kind, 0..=3));
        if n == 0 || self.m == 0 {
            return fused;
        }
        let plane = ph * pw * 4;
        let slack = (NB * p.sw + p.kw * p.dw + 16) * 4;
        let pad = (super::quant::float2int8(p.pad_value) as i32 + 128) as u8;
        INPUT.with(|cell| {
            let mut buf = cell.borrow_mut();
            if buf.len() < self.c4 * plane + slack {
                buf.resize(self.c4 * plane + slack, 0);
            }
            fill_input(x, scale, t, l, ph, pw, pad, &mut buf[..self.c4 * plane]);
            buf[self.c4 * plane..self.c4 * plane + slack].fill(pad);
            self.tiles(&buf[..self.c4 * plane + slack], p, pw, plane, outw, outh, fin.filter(|_| fused), out);
        });
        fused
    }

    /// Every tile of the output over the prepared input bytes `buf`.
    // BOUNDS-FN: the weights hold blocks * c4 * kk * MB * 4 bytes (new);
    // the tiles' reads stay in buf (forward sized it) and their writes in
    // out (asserted by forward).
    #[allow(clippy::too_many_arguments)]
    fn tiles(&self, buf: &[u8], p: &ConvParams, pw: usize, plane: usize, outw: usize, outh: usize, fin: Option<Finish>, out: &mut [f32]) {
        let n = outw * outh;
        let kk = p.kh * p.kw;
        let blocks = self.m.div_ceil(MB);
        // Tasks: a block of output channels over a run of output rows.
        let tiles_per_row = outw.div_ceil(NB);
        let work = self.c4 * kk * MB * NB * tiles_per_row;
        let rows = if par::threads() > 1 { (outh.div_ceil(3 * par::threads())).max((1 << 16) / work.max(1)).clamp(1, outh) } else { outh };
        let groups = outh.div_ceil(rows);
        let dst = SendPtr(out.as_mut_ptr());
        let g = Geometry { c4: self.c4, kh: p.kh, kw: p.kw, plane, row: pw * 4, dh: p.dh * pw * 4, dw: p.dw * 4, sw: p.sw * 4, n };
        par::range(blocks * groups, |task| {
            let (b, gi) = (task / groups, task % groups);
            let (y0, y1) = (gi * rows, ((gi + 1) * rows).min(outh));
            let m0 = b * MB;
            let valid = (self.m - m0).min(MB);
            let wb = &self.w[b * self.c4 * kk * MB * 4..(b + 1) * self.c4 * kk * MB * 4];
            let e = self.tile_epi(m0, fin.as_ref());
            for y in y0..y1 {
                for x0 in (0..outw).step_by(NB) {
                    let cols = (outw - x0).min(NB);
                    let at = (y * p.sh) * g.row + x0 * g.sw;
                    // SAFETY: the CPU has the kernel's features (checked by
                    // the caller through `available`); every byte read lies
                    // in `buf` (its slack), and channels m0..m0 + valid of
                    // row y, columns x0..x0 + cols are this task's alone and
                    // inside `out` (checked above).
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        tile(wb.as_ptr(), buf.as_ptr().add(at), &g, &e, dst.at(m0 * n + y * outw + x0), valid, cols)
                    };
                }
            }
        });
    }

    /// The epilogue of the block of channels from `m0`.
    // BOUNDS-FN: comp holds whole blocks (m0 + MB <= its length); the
    // finishing slices are read with `get`.
    fn tile_epi(&self, m0: usize, fin: Option<&Finish>) -> TileEpi {
        let at = |v: &[f32], i: usize| v.get(m0 + i).copied().unwrap_or(0.0);
        let mut comp = [0i32; MB];
        comp.copy_from_slice(&self.comp[m0..m0 + MB]);
        let (dequant, bias) = match fin {
            Some(f) => (std::array::from_fn(|i| at(f.dequant, i)), std::array::from_fn(|i| at(f.bias, i))),
            None => ([0.0; MB], [0.0; MB]),
        };
        let act = fin.map(|f| (f.act.kind, f.act.params.clone())).unwrap_or_default();
        let param = |i: usize| act.1.get(i).copied();
        TileEpi {
            comp,
            dequant,
            bias,
            fused: fin.is_some(),
            kind: act.0,
            lo: param(0).unwrap_or(f32::NEG_INFINITY),
            hi: param(1).unwrap_or(f32::INFINITY),
            slope: param(0).unwrap_or(0.0),
            top: fin.and_then(|f| f.top),
        }
    }
}

/// How an int8 convolution finishes its sums (see [`finish_int8`]).
pub struct Finish<'a> {
    pub dequant: &'a [f32],
    pub bias: &'a [f32],
    pub act: &'a Activation,
    pub top: Option<f32>,
}

thread_local! {
    /// The quantized, bordered input of the convolution being run on this
    /// thread (kept for the next one: no allocation per inference).
    static INPUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Byte strides of the bordered input and the output's plane size.
struct Geometry {
    c4: usize,
    kh: usize,
    kw: usize,
    plane: usize,
    row: usize,
    dh: usize,
    dw: usize,
    sw: usize,
    n: usize,
}

/// Quantize (or take as they are, when `x.int8`) and border `x` into `buf`
/// as `[c/4][ph][pw][4]` unsigned bytes (value + 128), `pad` in the border
/// and in the channels past `x.c`.
// BOUNDS-FN: buf holds c4 * ph * pw * 4 bytes (its chunks are one quad
// plane each), rows t + y < ph and columns l + w <= pw (asserted by the caller).
#[allow(clippy::too_many_arguments)]
fn fill_input(x: &Mat, scale: f32, t: usize, l: usize, ph: usize, pw: usize, pad: u8, buf: &mut [u8]) {
    let plane = ph * pw * 4;
    let (w, h) = (x.w, x.h);
    let scale = if x.int8 { 1.0 } else { scale };
    par::chunks_mut(buf, plane, |cq, dst| {
        dst.fill(pad);
        let srcs: [Option<&[f32]>; 4] = std::array::from_fn(|k| (cq * 4 + k < x.c).then(|| x.channel(cq * 4 + k)));
        for y in 0..h {
            let row = &mut dst[((t + y) * pw + l) * 4..((t + y) * pw + l + w) * 4];
            let src: [Option<&[f32]>; 4] = std::array::from_fn(|k| srcs[k].map(|c| &c[y * w..(y + 1) * w]));
            // SAFETY: the caller checked the CPU's features (`available`);
            // each source row holds w values and `row` 4 * w bytes.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                fill_row(&src, w, scale, pad, row.as_mut_ptr())
            };
        }
    });
}

/// One bordered row: `w` positions of four channels (a missing one is
/// `pad`), quantized with `scale`, offset by 128 and interleaved into `dst`.
///
/// # Safety
/// AVX-512 F and BW; each present source holds `w` values, `dst` 4 * w bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn fill_row(src: &[Option<&[f32]>; 4], w: usize, scale: f32, pad: u8, dst: *mut u8) {
    use std::arch::x86_64::*;
    let (s, off, padv) = (_mm512_set1_ps(scale), _mm512_set1_epi32(128), _mm512_set1_epi32(pad as i32));
    for x0 in (0..w).step_by(16) {
        let mask: __mmask16 = if w - x0 >= 16 { 0xffff } else { (1u16 << (w - x0)) - 1 };
        let mut word = _mm512_setzero_si512();
        for (k, c) in src.iter().enumerate() {
            let q = match c {
                Some(c) => {
                    let v = _mm512_maskz_loadu_ps(mask, c.as_ptr().add(x0));
                    _mm512_add_epi32(_mm512_cvtps_epi32(quant_ps(_mm512_mul_ps(v, s))), off)
                }
                None => padv,
            };
            word = _mm512_or_si512(word, _mm512_sllv_epi32(q, _mm512_set1_epi32(8 * k as i32)));
        }
        _mm512_mask_storeu_epi32(dst.add(x0 * 4) as *mut i32, mask, word);
    }
}

/// ncnn's float2int8 on 16 lanes: rounded half away from zero and clamped
/// to +-127 (as whole floats).
///
/// # Safety
/// AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn quant_ps(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let a = _mm512_abs_ps(x);
    let r = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(a);
    let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_sub_ps(a, r), _mm512_set1_ps(0.5));
    let r = _mm512_min_ps(_mm512_mask_add_ps(r, up, r, _mm512_set1_ps(1.0)), _mm512_set1_ps(127.0));
    let sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN));
    _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign))
}

/// The int8 epilogue one tile applies in registers: per output channel
/// (32, padded) the sums' offset, dequantization factor and bias, then the
/// activation (none, ReLU, leaky ReLU or clip) and the requantization.
pub struct TileEpi {
    comp: [i32; MB],
    dequant: [f32; MB],
    bias: [f32; MB],
    /// 0: the plain sums (the caller finishes them), 1: fused.
    fused: bool,
    kind: i32,
    lo: f32,
    hi: f32,
    slope: f32,
    top: Option<f32>,
}

/// One tile: 32 output channels (weights `w`) by 8 output positions whose
/// first tap reads `src`, finished as `e` says, to `out` (channel r's
/// position j at `out[r * n + j]`) for the first `valid` channels and
/// `cols` positions.
///
/// # Safety
/// The CPU has AVX-512 F, BW, DQ, VL and VNNI; `w` holds `c4 * kh * kw * 128`
/// bytes; every tap of the 8 positions is readable from `src`; `out` is
/// writable where stated.
// BOUNDS-FN: acc, vals and tmp hold NB rows of 2 registers / MB floats,
// indexed by j < NB, r < valid <= MB; e's arrays hold MB values (16 + 16).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
unsafe fn tile(w: *const i8, src: *const u8, g: &Geometry, e: &TileEpi, out: *mut f32, valid: usize, cols: usize) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_si512(); 2]; NB];
    let mut wp = w;
    for cq in 0..g.c4 {
        for ky in 0..g.kh {
            let rp = src.add(cq * g.plane + ky * g.dh);
            for kx in 0..g.kw {
                let p = rp.add(kx * g.dw);
                let w0 = _mm512_loadu_si512(wp as *const _);
                let w1 = _mm512_loadu_si512(wp.add(64) as *const _);
                wp = wp.add(128);
                for (j, a) in acc.iter_mut().enumerate() {
                    let b = _mm512_set1_epi32((p.add(j * g.sw) as *const i32).read_unaligned());
                    a[0] = _mm512_dpbusd_epi32(a[0], b, w0);
                    a[1] = _mm512_dpbusd_epi32(a[1], b, w1);
                }
            }
        }
    }
    for hh in 0..2 {
        let c = _mm512_loadu_si512(e.comp.as_ptr().add(16 * hh) as *const _);
        let d = _mm512_loadu_ps(e.dequant.as_ptr().add(16 * hh));
        let b = _mm512_loadu_ps(e.bias.as_ptr().add(16 * hh));
        let mut v = [_mm512_setzero_ps(); NB];
        for (j, vj) in v.iter_mut().enumerate() {
            let mut x = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[j][hh], c));
            if e.fused {
                x = _mm512_fmadd_ps(x, d, b);
                x = match e.kind {
                    1 => _mm512_max_ps(x, _mm512_setzero_ps()),
                    2 => {
                        let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
                        _mm512_mask_mul_ps(x, neg, x, _mm512_set1_ps(e.slope))
                    }
                    3 => _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(e.lo)), _mm512_set1_ps(e.hi)),
                    _ => x,
                };
                if let Some(t) = e.top {
                    x = quant_ps(_mm512_mul_ps(x, _mm512_set1_ps(t)));
                }
            }
            *vj = x;
        }
        if valid > 16 * hh {
            store_transposed(&v, out.add(16 * hh * g.n), g.n, valid - 16 * hh, cols);
        }
    }
}

/// Store 8 registers (register j: 16 channels at position j) as 16 rows
/// of 8 positions (row r at `out + r * n`), the first `rows` rows and
/// `cols` positions of each.
///
/// # Safety
/// AVX-512 F, DQ and VL; `out` writable where stated.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
// BOUNDS-FN: v, t and u have NB = 8 entries; every index is below 8 (i < 8 in t, h < 2 and i < 4 in u and the loop).
unsafe fn store_transposed(v: &[std::arch::x86_64::__m512; NB], out: *mut f32, n: usize, rows: usize, cols: usize) {
    use std::arch::x86_64::*;
    let pd = _mm512_castps_pd;
    let ps = _mm512_castpd_ps;
    let t: [__m512; 8] = std::array::from_fn(|i| {
        let (a, b) = (v[2 * (i / 2)], v[2 * (i / 2) + 1]);
        if i % 2 == 0 { _mm512_unpacklo_ps(a, b) } else { _mm512_unpackhi_ps(a, b) }
    });
    // u[i] (i < 4): positions 0..4 of channel 4L + i in 128-bit lane L;
    // u[4 + i]: positions 4..8.
    let u: [__m512; 8] = std::array::from_fn(|k| {
        let (h, i) = (k / 4, k % 4);
        let (a, b) = (t[4 * h + i / 2], t[4 * h + 2 + i / 2]);
        if i % 2 == 0 { ps(_mm512_unpacklo_pd(pd(a), pd(b))) } else { ps(_mm512_unpackhi_pd(pd(a), pd(b))) }
    });
    let mask: __mmask8 = if cols >= 8 { 0xff } else { (1u8 << cols) - 1 };
    for i in 0..4 {
        let lo = _mm512_shuffle_f32x4::<0x44>(u[i], u[4 + i]);
        let hi = _mm512_shuffle_f32x4::<0xEE>(u[i], u[4 + i]);
        // Channels i and 4 + i, then 8 + i and 12 + i.
        for (q, x) in [(0, _mm512_shuffle_f32x4::<0xD8>(lo, lo)), (8, _mm512_shuffle_f32x4::<0xD8>(hi, hi))] {
            let (r0, r1) = (q + i, q + 4 + i);
            if r0 < rows {
                _mm256_mask_storeu_ps(out.add(r0 * n), mask, _mm512_castps512_ps256(x));
            }
            if r1 < rows {
                _mm256_mask_storeu_ps(out.add(r1 * n), mask, _mm512_extractf32x8_ps::<1>(x));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_sums_match_direct_sums_over_borders_strides_and_dilations() {
        if !available() {
            return;
        }
        // (extra param keys, input w, h, c, num_output, kernel)
        for (keys, w, h, c, m, k) in [
            ("1=3 4=1", 13, 9, 3, 5, 3),
            ("1=3 3=2 13=3 4=1 14=2 15=0 16=2 18=-3", 16, 12, 6, 40, 3),
            ("1=3 3=3 2=2 4=-233", 17, 10, 9, 33, 3),
            ("1=1", 21, 5, 8, 64, 1),
            ("1=1 3=2", 12, 12, 4, 6, 1),
            ("1=5 3=2 4=1", 11, 7, 2, 16, 5),
            ("1=3 4=1", 70, 60, 12, 96, 3),
        ] {
            let text = format!("7767517\n1 1\nConvolution c 0 1 x 0={m} 5=1 6={} {keys}\n", m * c * k * k);
            let spec = crate::ncnn::param::parse_text(&text).unwrap();
            let p = ConvParams::new(&spec.layers[0].params, false).unwrap();
            let vals: Vec<f32> = (0..w * h * c).map(|i| ((i * 37 % 255) as f32) - 127.0).collect();
            let mut x = Mat::from_shape(&[w, h, c], vals).unwrap();
            x.int8 = true;
            let wt: Vec<f32> = (0..m * c * k * k).map(|i| ((i * 53 % 255) as f32) - 127.0).collect();
            let (t, b, l, r) = p.pads(w, h);
            let (ph, pw) = (h + t + b, w + l + r);
            let (outw, outh) = p.out_size_wh(pw, ph).unwrap();
            let xp = p.pad(&x);
            let kern = Int8Conv::new(&wt, m, c, k, k);
            for sequential in [true, false] {
                let mut got = vec![f32::NAN; m * outw * outh];
                let mut run = || {
                    kern.forward(&x, 1.0, &p, t, l, ph, pw, &mut got, outw, outh, None);
                };
                if sequential {
                    crate::ncnn::par::run_sequential(run);
                } else {
                    run();
                }
                for o in 0..m {
                    for y in 0..outh {
                        for xx in 0..outw {
                            let mut s = 0i64;
                            for ci in 0..c {
                                for ky in 0..k {
                                    for kx in 0..k {
                                        let v = xp.channel(ci)[(y * p.sh + ky * p.dh) * pw + xx * p.sw + kx * p.dw];
                                        s += v as i64 * wt[((o * c + ci) * k + ky) * k + kx] as i64;
                                    }
                                }
                            }
                            let g = got[(o * outh + y) * outw + xx];
                            assert_eq!(g, s as f32, "{keys}: channel {o} at ({xx}, {y})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fused_epilogue_matches_finish_int8() {
        if !available() {
            return;
        }
        // (activation keys, output scale)
        for (act, top) in [("", None), ("9=1", Some(3.7f32)), ("9=2 -23310=1,0.1", None), ("9=3 -23310=2,-0.5,0.7", Some(100.0)), ("9=4", Some(2.0))] {
            let (w, h, c, m) = (9, 5, 5, 37);
            let text = format!("7767517\n1 1\nConvolution c 0 1 x 0={m} 1=3 4=1 5=1 6={} 8=1 {act}\n", m * c * 9);
            let spec = crate::ncnn::param::parse_text(&text).unwrap();
            let p = ConvParams::new(&spec.layers[0].params, false).unwrap();
            // Inputs that quantize onto halves and past the clamp.
            let x = Mat::from_shape(&[w, h, c], (0..w * h * c).map(|i| ((i * 37 % 301) as f32) * 0.5 - 75.25).collect::<Vec<_>>()).unwrap();
            let wt: Vec<f32> = (0..m * c * 9).map(|i| ((i * 53 % 255) as f32) - 127.0).collect();
            let dequant: Vec<f32> = (0..m).map(|i| 1e-4 * (i + 1) as f32).collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.05 - 0.9).collect();
            let kern = Int8Conv::new(&wt, m, c, 3, 3);
            let (outw, outh) = (w, h);
            let scale = 2.0;
            let mut plain = vec![0.0; m * w * h];
            kern.forward(&x, scale, &p, 1, 1, h + 2, w + 2, &mut plain, outw, outh, None);
            finish_int8(&mut plain, w * h, &dequant, &bias, &p.act, top, true);
            let mut got = vec![0.0; m * w * h];
            let fused = kern.forward(&x, scale, &p, 1, 1, h + 2, w + 2, &mut got, outw, outh, Some(Finish { dequant: &dequant, bias: &bias, act: &p.act, top }));
            if !fused {
                finish_int8(&mut got, w * h, &dequant, &bias, &p.act, top, true);
            }
            assert_eq!(fused, p.act.kind <= 3, "{act}");
            assert_eq!(got, plain, "{act}");
            // The input quantized as the scalar float2int8 does: the plain
            // sums equal those of the quantized input taken as int8.
            let mut xq = Mat::from_shape(&[w, h, c], x.data.iter().map(|v| super::super::quant::float2int8(v * scale)).collect::<Vec<_>>()).unwrap();
            xq.int8 = true;
            let (mut a, mut b) = (vec![0.0; m * w * h], vec![0.0; m * w * h]);
            kern.forward(&x, scale, &p, 1, 1, h + 2, w + 2, &mut a, outw, outh, None);
            kern.forward(&xq, 0.0, &p, 1, 1, h + 2, w + 2, &mut b, outw, outh, None);
            assert_eq!(a, b);
        }
    }
}
