//! Shared parts of Convolution and ConvolutionDepthWise: parameters,
//! padding, the convolution GEMM driver and a threaded GEMM.

use crate::ncnn::layer::Activation;
use super::gemm::{conv_gemm as conv_gemm_rows, BView, Epi, PackedA};
use crate::ncnn::mat::{take_vec, Buf};
use crate::ncnn::{Mat, ModelBin, ParamDict};
use crate::ncnn_bail;
use crate::ncnn::par;

#[derive(Clone, Debug)]
pub struct ConvParams {
    pub num_output: usize,
    pub kw: usize,
    pub kh: usize,
    pub dw: usize,
    pub dh: usize,
    pub sw: usize,
    pub sh: usize,
    pub pl: i32,
    pub pr: i32,
    pub pt: i32,
    pub pb: i32,
    pub pad_value: f32,
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub group: usize,
    pub act: Activation,
}

fn positive(v: i32, what: &str) -> anyhow::Result<usize> {
    if v <= 0 {
        ncnn_bail!("{what} must be positive, got {v}");
    }
    Ok(v as usize)
}

impl ConvParams {
    pub fn new(pd: &ParamDict, depthwise: bool) -> anyhow::Result<ConvParams> {
        let kw = pd.int(1, 0);
        let dw = pd.int(2, 1);
        let sw = pd.int(3, 1);
        let pl = pd.int(4, 0);
        let pr = pd.int(15, pl);
        let pt = pd.int(14, pl);
        if pd.int(8, 0) != 0 {
            ncnn_bail!("int8 convolution (int8_scale_term) is not supported yet; export the model with fp32 or fp16 weights");
        }
        if pd.int(19, 0) != 0 {
            ncnn_bail!("dynamic convolution weights (key 19) are not supported");
        }
        let p = ConvParams {
            num_output: positive(pd.int(0, 0), "num_output")?,
            kw: positive(kw, "kernel_w")?,
            kh: positive(pd.int(11, kw), "kernel_h")?,
            dw: positive(dw, "dilation_w")?,
            dh: positive(pd.int(12, dw), "dilation_h")?,
            sw: positive(sw, "stride_w")?,
            sh: positive(pd.int(13, sw), "stride_h")?,
            pl,
            pr,
            pt,
            pb: pd.int(16, pt),
            pad_value: pd.float(18, 0.0),
            bias_term: pd.int(5, 0) != 0,
            weight_data_size: pd.int(6, 0).max(0) as usize,
            group: if depthwise {
                positive(pd.int(7, 1), "group")?
            } else {
                1
            },
            act: Activation::from_params(pd, 9, 10)?,
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
        let w = mb.tagged(self.weight_data_size, "convolution weights")?;
        let b = if self.bias_term {
            mb.raw(self.num_output, "convolution bias")?
        } else {
            vec![]
        };
        Ok((w, b))
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

    /// Output size for a padded input, or an error when the kernel does not fit.
    pub fn out_size(&self, m: &Mat) -> anyhow::Result<(usize, usize)> {
        self.out_size_wh(m.w, m.h)
    }

    /// Output size for a padded input of `w` x `h`.
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

/// Copy `m` (3-d) into a larger blob with constant borders, writing every
/// value once.
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

/// Convolve channels `c0..c0+nc` of the padded input `xp` with packed weights
/// (rows = output channels, columns = (c, ky, kx)) into `out` (rows x
/// outh*outw), adding bias and applying the activation on the way.
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm(
    xp: &Mat,
    p: &ConvParams,
    c0: usize,
    nc: usize,
    a: &PackedA,
    out: &mut [f32],
    outw: usize,
    outh: usize,
    ep: &Epi,
) {
    let kk = p.kh * p.kw;
    if p.sw == 1 && p.sh == 1 {
        // Row k of the im2col matrix is a shifted view of the padded plane.
        let wp = xp.w;
        let cs = xp.cstep();
        let offs: Vec<usize> = (0..nc * kk)
            .map(|r| {
                let (c, ky, kx) = (r / kk, (r / p.kw) % p.kh, r % p.kw);
                (c0 + c) * cs + ky * p.dh * wp + kx * p.dw
            })
            .collect();
        let b = BView { base: &xp.data, offs: &offs, rs: wp };
        conv_gemm_rows(a, &b, outw, outh, out, ep);
        return;
    }
    // Strided: split the padded input into its stride phases (only those
    // some kernel tap reads), after which every tap is again a shifted view
    // of one phase plane.
    let (sh, sw) = (p.sh, p.sw);
    let (hq, wq) = ((xp.h + sh - 1) / sh, (xp.w + sw - 1) / sw);
    let plane = hq * wq;
    let tap_phase = |r: usize| {
        let (ky, kx) = ((r / p.kw) % p.kh, r % p.kw);
        let (ty, tx) = (ky * p.dh, kx * p.dw);
        ((ty % sh) * sw + tx % sw, (ty / sh) * wq + tx / sw)
    };
    let mut slot = vec![usize::MAX; sh * sw];
    let mut used = Vec::new();
    for r in 0..kk {
        let ph = tap_phase(r).0;
        if slot[ph] == usize::MAX {
            slot[ph] = used.len();
            used.push(ph);
        }
    }
    let mut buf = take_vec(used.len() * nc * plane);
    buf.resize(used.len() * nc * plane, 0.0);
    par::chunks_mut(&mut buf, plane, |i, dst| {
        let (phase, c) = (used[i / nc], i % nc);
        let (py, px) = (phase / sw, phase % sw);
        let src = xp.channel(c0 + c);
        for (y, drow) in dst.chunks_mut(wq).enumerate() {
            let sy = y * sh + py;
            if sy >= xp.h {
                break;
            }
            let row = &src[sy * xp.w + px.min(xp.w)..(sy + 1) * xp.w];
            drow.iter_mut().zip(row.iter().step_by(sw)).for_each(|(d, s)| *d = *s);
        }
    });
    let offs: Vec<usize> = (0..nc * kk)
        .map(|r| {
            let (ph, off) = tap_phase(r % kk);
            (slot[ph] * nc + r / kk) * plane + off
        })
        .collect();
    let ph = Buf::from(buf);
    let b = BView { base: &ph, offs: &offs, rs: wq };
    conv_gemm_rows(a, &b, outw, outh, out, ep);
}

/// c[m x n] = a[m x k] * b[k x n], threaded over rows of c.
pub fn gemm(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    if m == 0 || n == 0 {
        return;
    }
    let threads = par::threads();
    let rows = ((m + threads - 1) / threads).max(1);
    par::chunks_mut(c, rows * n, |i, cc| {
        let r0 = i * rows;
        let mr = cc.len() / n;
        unsafe {
            matrixmultiply::sgemm(
                mr,
                k,
                n,
                1.0,
                a[r0 * k..].as_ptr(),
                k as isize,
                1,
                b.as_ptr(),
                n as isize,
                1,
                0.0,
                cc.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    });
}

/// Add per-row bias and apply the fused activation to an (rows x n) output.
pub fn finish(out: &mut [f32], n: usize, bias: &[f32], act: &Activation) {
    par::chunks_mut(out, n, |r, row| {
        act.apply_bias(row, bias.get(r).copied().unwrap_or(0.0));
    });
}
