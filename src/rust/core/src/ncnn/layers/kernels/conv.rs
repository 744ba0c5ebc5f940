//! Shared parts of Convolution and ConvolutionDepthWise: parameters,
//! padding, the convolution GEMM driver and a threaded GEMM.

use crate::ncnn::layer::Activation;
use super::window::Window;
use super::gemm::{conv_gemm as conv_gemm_rows, conv_gemm_band, task_rows, BView, SendPtr, Epi, PackedA};
use super::quant::{quantize_rows, Int8Scales};
use crate::ncnn::modelbin::{Stored, Weights};
use crate::ncnn::{Mat, ModelBin, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;

#[derive(Clone, Debug)]
pub struct ConvParams {
    pub num_output: usize,
    /// Kernel, dilation, stride and pads (read through `Deref`).
    pub win: Window,
    pub pad_value: f32,
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub group: usize,
    pub act: Activation,
    /// int8_scale_term: 0 fp32, else int8 (above 100: int8 output).
    pub int8_term: i32,
}

pub use super::window::positive;

impl std::ops::Deref for ConvParams {
    type Target = Window;
    fn deref(&self) -> &Window {
        &self.win
    }
}

impl std::ops::DerefMut for ConvParams {
    fn deref_mut(&mut self) -> &mut Window {
        &mut self.win
    }
}

impl ConvParams {
    pub fn new(pd: &ParamDict, depthwise: bool) -> anyhow::Result<ConvParams> {
        if pd.int(19, 0) != 0 {
            ncnn_bail!("dynamic convolution weights (key 19) are not supported");
        }
        let p = ConvParams {
            num_output: positive(pd.int(0, 0), "num_output")?,
            win: Window::read(pd)?,
            pad_value: pd.float(18, 0.0),
            bias_term: pd.int(5, 0) != 0,
            weight_data_size: pd.int(6, 0).max(0) as usize,
            group: if depthwise {
                positive(pd.int(7, 1), "group")?
            } else {
                1
            },
            act: Activation::from_params(pd, 9, 10)?,
            int8_term: pd.int(8, 0),
        };
        let per = p
            .num_output
            .checked_mul(p.kw)
            .and_then(|v| v.checked_mul(p.kh))
            .unwrap_or(0);
        if per == 0 || p.weight_data_size == 0 || p.weight_data_size % per != 0 {
            ncnn_bail!(
                "weight_data_size {} is not a positive multiple of num_output*kernel_w*kernel_h ({} x {} x {})",
                p.weight_data_size,
                p.num_output,
                p.kw,
                p.kh
            );
        }
        if p.num_output % p.group != 0 {
            ncnn_bail!(
                "num_output {} is not divisible by group {}",
                p.num_output,
                p.group
            );
        }
        Ok(p)
    }

    /// Input channels the weights expect.
    pub fn in_channels(&self) -> usize {
        self.weight_data_size / (self.num_output * self.kw * self.kh) * self.group
    }

    pub fn load(&self, mb: &mut ModelBin) -> anyhow::Result<(Vec<f32>, Vec<f32>)> {
        let (w, b, _) = self.load_any(mb, 0)?;
        Ok((w, b))
    }

    /// Weights, bias and, for an int8 layer, its scales (`scale_rows`
    /// weight scales: one per output, or per group), the weights then as
    /// int8 values (quantized here when they are stored as floats).
    pub fn load_any(&self, mb: &mut ModelBin, scale_rows: usize) -> anyhow::Result<(Vec<f32>, Vec<f32>, Option<Int8Scales>)> {
        let w = if self.int8_term != 0 {
            mb.tagged_any(self.weight_data_size, "convolution weights")?
        } else {
            Weights { data: mb.tagged(self.weight_data_size, "convolution weights")?, stored: Stored::F32 }
        };
        let b = if self.bias_term { mb.raw(self.num_output, "convolution bias")? } else { vec![] };
        let mut data = w.data;
        let scales = if self.int8_term != 0 {
            let s = Int8Scales::load(mb, scale_rows, self.int8_term, "convolution")?;
            if w.stored != Stored::Int8 {
                quantize_rows(&mut data, &s.weight);
            }
            Some(s)
        } else {
            None
        };
        Ok((data, b, scales))
    }

    /// (top, bottom, left, right) borders for a `w` x `h` input as the
    /// parameters ask: explicit, SAME_UPPER (-233) or SAME_LOWER (-234).
    pub fn pads(&self, w: usize, h: usize) -> (usize, usize, usize, usize) {
        let (pl, pr, pt, pb) = (self.pl, self.pr, self.pt, self.pb);
        if pl > 0 || pr > 0 || pt > 0 || pb > 0 {
            let z = |v: i32| v.max(0) as usize;
            return (z(pt), z(pb), z(pl), z(pr));
        }
        let same = |v: i32| pl == v && pr == v && pt == v && pb == v;
        if (same(-233) || same(-234)) && w > 0 && h > 0 {
            let ext_w = self.dw * (self.kw - 1) + 1;
            let ext_h = self.dh * (self.kh - 1) + 1;
            let wpad = ((ext_w + (w - 1) / self.sw * self.sw) as i64 - w as i64).max(0) as usize;
            let hpad = ((ext_h + (h - 1) / self.sh * self.sh) as i64 - h as i64).max(0) as usize;
            let (small_h, small_w) = (hpad / 2, wpad / 2);
            return if same(-233) {
                (small_h, hpad - small_h, small_w, wpad - small_w)
            } else {
                (hpad - small_h, small_h, wpad - small_w, small_w)
            };
        }
        (0, 0, 0, 0)
    }

    /// The input padded as the parameters ask (shared, not copied, when no
    /// border is needed).
    pub fn pad(&self, m: &Mat) -> Mat {
        match self.pads(m.w, m.h) {
            (0, 0, 0, 0) => m.clone(),
            (t, b, l, r) => border(m, t, b, l, r, self.pad_value),
        }
    }

    /// Output size for a padded input of `w` x `h`, or an error when the
    /// kernel does not fit.
    pub fn out_size_wh(&self, w: usize, h: usize) -> anyhow::Result<(usize, usize)> {
        let ext_w = self.dw * (self.kw - 1) + 1;
        let ext_h = self.dh * (self.kh - 1) + 1;
        if w < ext_w || h < ext_h {
            ncnn_bail!(
                "input of {}x{} (w x h, after padding) is smaller than the {}x{} kernel extent",
                w,
                h,
                ext_w,
                ext_h
            );
        }
        Ok(((w - ext_w) / self.sw + 1, (h - ext_h) / self.sh + 1))
    }
}

/// Borders around an input plane: top, bottom, left, right and their value.
#[derive(Clone, Copy, Debug, Default)]
pub struct Border {
    pub t: usize,
    pub b: usize,
    pub l: usize,
    pub r: usize,
    pub value: f32,
}

/// (phase width, padded height) of the stride phases of a bordered plane.
pub fn phase_dims(w: usize, h: usize, pad: Border, sw: usize) -> (usize, usize) {
    let (ww, hh) = (w + pad.l + pad.r, h + pad.t + pad.b);
    ((ww + sw - 1) / sw, hh)
}

/// Write the bordered plane split into `sw` column phases (phase `px` holds
/// padded columns px, px + sw, ...) to `out`, as [px][row][column]; every
/// value of the `sw * phase_dims()` product is written.
// Bounds: out holds sw * hh * wq values (asserted on entry), cut into sw
// planes of hh rows of wq (so spans[px] with px < sw); every written run of a
// row ends within wq: c0 + n = ceil((w + l - px) / sw) <= wq (x0 + l is px
// modulo sw), l / 2, c_even + pairs and c_odd + pairs are at most
// ceil((w + l) / 2) <= wq and (w - 1 + l) / 2 < wq; source rows are chunks
// of exactly w values (s[0], s[w - 1] with w >= 2, s[lead..] with lead <= 1),
// and s.get(x0..) where x0 (below sw) may pass w.
// BOUNDS-FN: every index is in range as said just above.
pub fn phase_plane(src: &[f32], w: usize, h: usize, pad: Border, sw: usize, out: &mut [f32]) {
    let (wq, hh) = phase_dims(w, h, pad, sw);
    assert!(sw >= 1 && out.len() >= sw * hh * wq, "phase_plane: output buffer too small");
    let v = pad.value;
    let out = &mut out[..sw * hh * wq];
    // Phase px: first source column x0 with (x0 + l) % sw == px, where it
    // lands, and how many source columns it takes.
    let spans: Vec<(usize, usize, usize)> = (0..sw)
        .map(|px| {
            let x0 = (px + sw - pad.l % sw) % sw;
            let n = if x0 < w { (w - x0 + sw - 1) / sw } else { 0 };
            (x0, (x0 + pad.l) / sw, n)
        })
        .collect();
    for (px, plane) in out.chunks_mut(hh * wq).enumerate() {
        let (_, c0, n) = spans[px];
        plane[..pad.t * wq].fill(v);
        plane[(pad.t + h) * wq..].fill(v);
        for row in plane[pad.t * wq..(pad.t + h) * wq].chunks_mut(wq) {
            row[..c0].fill(v);
            row[c0 + n..].fill(v);
        }
    }
    if sw == 1 {
        for (y, s) in src.chunks_exact(w.max(1)).take(h).enumerate() {
            let at = (y + pad.t) * wq + pad.l;
            out[at..at + w].copy_from_slice(s);
        }
    } else if sw == 2 && w >= 2 {
        // Both phases in one pass over pairs of columns (vectorises).
        let (ev, od) = out.split_at_mut(hh * wq);
        let od = &mut od[..hh * wq];
        let lead = pad.l % 2; // an odd left border puts column 0 in phase 1
        let pairs = (w - lead) / 2;
        let (c_even, c_odd) = ((lead + pad.l) / 2, (lead + pad.l + 1) / 2);
        for (y, s) in src.chunks_exact(w).take(h).enumerate() {
            let r = (y + pad.t) * wq;
            if lead == 1 {
                od[r + pad.l / 2] = s[0];
            }
            let e = &mut ev[r + c_even..r + c_even + pairs];
            let o = &mut od[r + c_odd..r + c_odd + pairs];
            for ((e, o), p) in e.iter_mut().zip(o.iter_mut()).zip(s[lead..].chunks_exact(2)) {
                *e = p[0];
                *o = p[1];
            }
            if (w - lead) % 2 == 1 {
                // The last column: padded index w - 1 + l is even.
                ev[r + (w - 1 + pad.l) / 2] = s[w - 1];
            }
        }
    } else {
        for (px, &(x0, c0, n)) in spans.iter().enumerate() {
            for (y, s) in src.chunks_exact(w.max(1)).take(h).enumerate() {
                let at = (px * hh + y + pad.t) * wq + c0;
                out[at..at + n].iter_mut().zip(s.get(x0..).unwrap_or(&[]).iter().step_by(sw)).for_each(|(d, v)| *d = *v);
            }
        }
    }
}

/// Copy `m` (3-d) into a larger blob with constant borders, writing every
/// value once.
// BOUNDS-FN: out has planes = d * c planes of w * h = (m.w + left + right) *
// (m.h + top + bottom) values, so plane q < planes of m holds m.w * m.h
// values of m.data (a Mat's data is w * h * d * c); top * w and
// (top + m.h) * w are within a plane, and each row of w has left + m.w + right.
pub fn border(m: &Mat, top: usize, bottom: usize, left: usize, right: usize, v: f32) -> Mat {
    let (w, h) = (m.w + left + right, m.h + top + bottom);
    let planes = m.d * m.c;
    let mut out = Mat::for_overwrite_3d(w, h, planes);
    (out.dims, out.d, out.c) = (m.dims.max(2), m.d, m.c);
    par::chunks_mut(&mut out.data, w * h, |q, o| {
        let src = &m.data[q * m.w * m.h..(q + 1) * m.w * m.h];
        o[..top * w].fill(v);
        o[(top + m.h) * w..].fill(v);
        for (row, s) in o[top * w..(top + m.h) * w].chunks_mut(w.max(1)).zip(src.chunks(m.w.max(1))) {
            row[..left].fill(v);
            row[left..left + m.w].copy_from_slice(s);
            row[left + m.w..].fill(v);
        }
    });
    out
}

/// Convolve channels `c0..c0+nc` of the input `x` (bordered as the
/// parameters ask) with packed weights (rows = output channels, columns =
/// (c, ky, kx)) into `out` (rows x outh*outw), adding bias and applying the
/// activation on the way.
// BOUNDS-FN: channels c0 + nc <= x.c (asserted on entry); the band's source rows
// s0..s1 are clamped to x.h, so channel(c0 + c)[s0 * w..s1 * w] is inside the
// channel; buf is grown to nc * plane before it is sliced.
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm(
    x: &Mat,
    p: &ConvParams,
    c0: usize,
    nc: usize,
    a: &PackedA,
    out: &mut [f32],
    outw: usize,
    outh: usize,
    ep: &Epi,
) {
    assert!(c0 + nc <= x.c, "conv_gemm: channels past the input");
    let kk = p.kh * p.kw;
    let (t, _, l, r) = p.pads(x.w, x.h);
    // A bordered copy of the whole input that fits in cache serves as well
    // as bands of it.
    if padded_whole(x, p) {
        conv_gemm_padded(&p.pad(x), p, c0..c0 + nc, a, out, (outw, outh), ep);
        return;
    }
    if kk == 1 && p.pads(x.w, x.h) == (0, 0, 0, 0) {
        // A strided 1x1 kernel reads every sw-th column of every sh-th row:
        // those pixels gathered into a plane of the output's size make it
        // a 1x1 convolution of stride 1 (one long row, no phase planes).
        let xs = subsample(x, c0..c0 + nc, p.sw, p.sh, (outw, outh));
        let mut p1 = p.clone();
        (p1.sw, p1.sh) = (1, 1);
        conv_gemm_padded(&xs, &p1, 0..nc, a, out, (outw, outh), ep);
        return;
    }
    // Strided or large: in bands of output rows, each task borders (and
    // splits into column phases) just the input rows of its band, which
    // stay in cache, after which every tap is a shifted view of one phase,
    // and output rows step by sh rows of it.
    let n = outw * outh;
    assert!(out.len() >= a.m * n, "convolution output buffer too small");
    if n == 0 || a.m == 0 {
        return;
    }
    let (w, sw) = (x.w, p.sw);
    let ext_h = p.dh * (p.kh - 1) + 1;
    let rows = task_rows(a.m * a.k * n, outw, outh);
    let dst = SendPtr(out.as_mut_ptr());
    par::range((outh + rows - 1) / rows, |task| {
        let (y0, y1) = (task * rows, ((task + 1) * rows).min(outh));
        // Padded rows p0..p1 of the band: border rows, then source rows s0..s1.
        let (p0, p1) = (y0 * p.sh, (y1 - 1) * p.sh + ext_h);
        let (s0, s1) = (p0.saturating_sub(t).min(x.h), p1.saturating_sub(t).min(x.h));
        let top = p1.min(t).saturating_sub(p0);
        let pad = Border { t: top, b: p1 - p0 - top - (s1 - s0), l, r, value: p.pad_value };
        let (wq, hh) = phase_dims(w, s1 - s0, pad, sw);
        let plane = sw * hh * wq;
        BAND.with(|cell| {
            let mut buf = cell.borrow_mut();
            if buf.len() < nc * plane {
                buf.resize(nc * plane, 0.0);
            }
            for (c, ph) in buf[..nc * plane].chunks_mut(plane).enumerate() {
                phase_plane(&x.channel(c0 + c)[s0 * w..s1 * w], w, s1 - s0, pad, sw, ph);
            }
            let offs: Vec<usize> = (0..nc * kk)
                .map(|i| {
                    let (c, ky, kx) = (i / kk, (i / p.kw) % p.kh, i % p.kw);
                    let (ty, tx) = (ky * p.dh, kx * p.dw);
                    c * plane + ((tx % sw) * hh + ty) * wq + tx / sw
                })
                .collect();
            let bv = BView { base: &buf[..nc * plane], offs: &offs, rs: p.sh * wq };
            // SAFETY: rows y0..y1 of every output channel are this task's
            // alone, and inside `out` (checked above).
            unsafe { conv_gemm_band(a, &bv, outw, y1 - y0, n, dst.at(y0 * outw), ep) };
        });
    });
}

/// Whether `conv_gemm` convolves `x` through one bordered copy of the
/// whole input (`conv_gemm_padded`): stride 1, and no border or a bordered
/// copy that fits in cache.
pub fn padded_whole(x: &Mat, p: &ConvParams) -> bool {
    let (t, b, l, r) = p.pads(x.w, x.h);
    let small = (t, b, l, r) == (0, 0, 0, 0) || x.c * (x.w + l + r) * (x.h + t + b) <= WHOLE_COPY;
    p.sw == 1 && p.sh == 1 && small
}

/// The stride-1 convolution of channels `c0..c0+nc` of `xp`, the input
/// already bordered as the parameters ask (`p.pad`): row k of the im2col
/// matrix is a shifted view of the bordered plane. Grouped convolutions
/// border their input once for all groups.
// BOUNDS-FN: the channels end at or before xp.c (asserted); every offset plus the last column
// read (outw - 1 + (kw - 1) * dw <= xp.w - 1, outh likewise) stays in the
// channel, as the output size was computed from the bordered extents.
pub fn conv_gemm_padded(
    xp: &Mat,
    p: &ConvParams,
    chans: std::ops::Range<usize>,
    a: &PackedA,
    out: &mut [f32],
    (outw, outh): (usize, usize),
    ep: &Epi,
) {
    let (c0, nc) = (chans.start, chans.len());
    assert!(chans.end <= xp.c, "conv_gemm_padded: channels past the input");
    let kk = p.kh * p.kw;
    let wp = xp.w;
    let cs = xp.cstep();
    let offs: Vec<usize> = (0..nc * kk)
        .map(|i| {
            let (c, ky, kx) = (i / kk, (i / p.kw) % p.kh, i % p.kw);
            (c0 + c) * cs + ky * p.dh * wp + kx * p.dw
        })
        .collect();
    let bv = BView { base: &xp.data, offs: &offs, rs: wp };
    if kk == 1 && wp == outw {
        // A 1x1 kernel over unpadded rows: the plane is one long row,
        // tiled without a partial tile at the end of every row.
        conv_gemm_rows(a, &bv, outw * outh, 1, out, ep);
    } else {
        conv_gemm_rows(a, &bv, outw, outh, out, ep);
    }
}

/// Pixels (x * sw, y * sh) for x < outw, y < outh of channels `chans` of
/// `x`, as a blob of outw x outh x chans.len().
// BOUNDS-FN: (outw - 1) * sw < x.w and (outh - 1) * sh < x.h (the output size
// of a 1x1 kernel without borders), so every read is inside its channel.
fn subsample(x: &Mat, chans: std::ops::Range<usize>, sw: usize, sh: usize, (outw, outh): (usize, usize)) -> Mat {
    let c0 = chans.start;
    let mut out = Mat::for_overwrite_3d(outw, outh, chans.len());
    par::chunks_mut(&mut out.data, outw * outh, |c, o| {
        let src = x.channel(c0 + c);
        for (y, row) in o.chunks_exact_mut(outw.max(1)).enumerate() {
            let s = &src[y * sh * x.w..];
            for (i, v) in row.iter_mut().enumerate() {
                *v = s[i * sw];
            }
        }
    });
    out
}

/// Values of the largest bordered input of a stride-1 convolution copied
/// whole (256 KiB).
const WHOLE_COPY: usize = 64 << 10;

thread_local! {
    /// The bordered, phase-split input rows of the band being convolved.
    static BAND: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Add per-row bias and apply the fused activation to an (rows x n) output.
pub fn finish(out: &mut [f32], n: usize, bias: &[f32], act: &Activation) {
    par::chunks_mut(out, n, |r, row| {
        act.apply_bias(row, bias.get(r).copied().unwrap_or(0.0));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::layer::Activation;

    /// Direct convolution of a bordered input, for reference.
    fn naive(x: &Mat, p: &ConvParams, wt: &[f32], bias: &[f32]) -> Vec<f32> {
        let xp = p.pad(x);
        let (outw, outh) = p.out_size_wh(xp.w, xp.h).unwrap();
        let mut out = vec![0.0f32; p.num_output * outw * outh];
        for o in 0..p.num_output {
            for y in 0..outh {
                for xx in 0..outw {
                    let mut s = bias[o];
                    for c in 0..x.c {
                        for ky in 0..p.kh {
                            for kx in 0..p.kw {
                                let v = xp.channel(c)[(y * p.sh + ky * p.dh) * xp.w + xx * p.sw + kx * p.dw];
                                s += v * wt[((o * x.c + c) * p.kh + ky) * p.kw + kx];
                            }
                        }
                    }
                    out[(o * outh + y) * outw + xx] = p.act.apply1(s);
                }
            }
        }
        out
    }

    #[test]
    fn strided_padded_and_dilated_convolutions_match_direct_sums() {
        // (extra param keys, input w, h, c, num_output, kernel)
        for (keys, w, h, c, m, k) in [
            ("3=2 4=1", 13, 9, 3, 5, 3),
            ("3=2 13=3 4=1 14=2 15=0 16=2 18=0.5", 16, 12, 2, 7, 3),
            ("3=3 2=2 4=-233", 17, 10, 2, 4, 3),
            ("3=2 4=-234 9=1", 12, 12, 4, 6, 1),
            ("3=2 4=1 9=3 -23310=2,-0.5,0.5", 11, 7, 2, 16, 5),
            // Outputs of several bands of rows (on one thread and on more).
            ("3=2 4=1 13=2 16=3", 41, 300, 2, 6, 3),
            ("4=1 14=2 16=0", 70, 300, 4, 6, 3),
            ("3=2 2=2 4=2 14=1 13=1", 40, 161, 3, 6, 3),
            // 1x1 kernels of stride 1: the plane as one long row, split
            // into runs of columns (with an activation after the product).
            ("9=1", 13, 9, 5, 7, 1),
            ("4=1 9=4", 70, 300, 4, 6, 1),
            ("14=2 16=1 9=3 -23310=2,-0.5,0.5", 33, 41, 8, 13, 1),
            // Strided 1x1 kernels without borders: a gathered plane.
            ("3=2 9=1", 14, 14, 6, 9, 1),
            ("3=3 13=2", 17, 11, 5, 7, 1),
        ] {
            let text = format!(
                "7767517\n1 1\nConvolution c 0 1 x 0={m} 1={k} 5=1 6={} {keys}\n",
                m * c * k * k
            );
            let spec = crate::ncnn::param::parse_text(&text).unwrap();
            let p = ConvParams::new(&spec.layers[0].params, false).unwrap();
            let x = Mat::from_shape(&[w, h, c], (0..w * h * c).map(|i| ((i * 7 % 11) as f32) * 0.3 - 1.5).collect::<Vec<_>>()).unwrap();
            let wt: Vec<f32> = (0..m * c * k * k).map(|i| ((i * 5 % 9) as f32) * 0.2 - 0.8).collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.1).collect();
            let want = naive(&x, &p, &wt, &bias);
            let (t, b, l, r) = p.pads(w, h);
            let (outw, outh) = p.out_size_wh(w + l + r, h + t + b).unwrap();
            let a = PackedA::new(&wt, m, c * k * k);
            let act: &Activation = &p.act;
            for sequential in [true, false] {
                let mut got = vec![f32::NAN; m * outw * outh];
                let mut run = || conv_gemm(&x, &p, 0, c, &a, &mut got, outw, outh, &Epi { bias: &bias, act });
                if sequential {
                    crate::ncnn::par::run_sequential(run);
                } else {
                    run();
                }
                for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                    assert!((g - e).abs() < 1e-4, "{keys} (sequential {sequential}): at {i}: {g} vs {e}");
                }
            }
        }
    }
}
