//! Transposed convolution shared by Deconvolution and
//! DeconvolutionDepthWise: parameters, and per output channel a product of
//! its kernel taps with the input channels (one GEMM) scattered into the
//! output, which is then cut to the padding or the requested size.

use super::window::{positive, Window};
use super::matmul::{matmul, MatView};
use crate::ncnn::layer::Activation;
use crate::ncnn::par;
use crate::ncnn::{Mat, ModelBin, ParamDict};
use crate::ncnn_bail;

#[derive(Clone, Debug)]
pub struct DeconvParams {
    pub num_output: usize,
    /// Kernel, dilation, stride and pads (read through `Deref`).
    pub win: Window,
    pub out_pad_r: usize,
    pub out_pad_b: usize,
    pub output_w: i32,
    pub output_h: i32,
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub group: usize,
    pub act: Activation,
}

impl std::ops::Deref for DeconvParams {
    type Target = Window;
    fn deref(&self) -> &Window {
        &self.win
    }
}

impl DeconvParams {
    pub fn new(pd: &ParamDict, grouped: bool) -> anyhow::Result<DeconvParams> {
        if pd.int(28, 0) != 0 {
            ncnn_bail!("dynamic deconvolution weights (key 28) are not supported");
        }
        let opr = pd.int(18, 0);
        let ow = pd.int(20, 0);
        let p = DeconvParams {
            num_output: positive(pd.int(0, 0), "num_output")?,
            win: Window::read(pd)?,
            out_pad_r: opr.max(0) as usize,
            out_pad_b: pd.int(19, opr).max(0) as usize,
            output_w: ow,
            output_h: pd.int(21, ow),
            bias_term: pd.int(5, 0) != 0,
            weight_data_size: pd.int(6, 0).max(0) as usize,
            group: if grouped { positive(pd.int(7, 1), "group")? } else { 1 },
            act: Activation::from_params(pd, 9, 10)?,
        };
        let per = p.num_output * p.kw * p.kh;
        if p.weight_data_size == 0 || p.weight_data_size % per != 0 || p.num_output % p.group != 0 {
            ncnn_bail!(
                "weight_data_size {} is not a positive multiple of num_output*kernel_w*kernel_h ({}), or num_output is not divisible by group {}",
                p.weight_data_size,
                per,
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
        let w = mb.tagged(self.weight_data_size, "deconvolution weights")?;
        let b = if self.bias_term { mb.raw(self.num_output, "deconvolution bias")? } else { vec![] };
        Ok((w, b))
    }

    /// The transposed convolution of `x` with weights `w` (per output
    /// channel [in per group][kh][kw]) and `bias`, cut as the parameters say.
    // Bounds: x has inch = icg * group channels of hw values (checked on
    // entry) and w at least num_output * icg * maxk values (checked), so group
    // gi = p / ocg < group and output channel p < num_output slice inside
    // them; cols holds maxk rows of hw; a tap lands at row i * sh + ky * dh <=
    // (x.h - 1) * sh + (kh - 1) * dh < outh and column kx * dw + j * sw <
    // outw; the cut keeps t + ch <= outh rows and l + cw <= outw columns.
    // BOUNDS-FN: every index is in range as said just above.
    pub fn forward(&self, x: &Mat, w: &[f32], bias: &[f32]) -> anyhow::Result<Mat> {
        let inch = self.in_channels();
        if x.dims != 3 || x.c != inch {
            ncnn_bail!("expects a 3-d input with {inch} channels, got a blob of shape {}", x.describe());
        }
        if self.group == 0 || w.len() < self.num_output * (inch / self.group) * self.kw * self.kh {
            ncnn_bail!("has {} weights for {} outputs of {inch} / {} inputs and a {}x{} kernel", w.len(), self.num_output, self.group, self.kw, self.kh);
        }
        let (ext_w, ext_h) = (self.dw * (self.kw - 1) + 1, self.dh * (self.kh - 1) + 1);
        let outw = (x.w.max(1) - 1) * self.sw + ext_w + self.out_pad_r;
        let outh = (x.h.max(1) - 1) * self.sh + ext_h + self.out_pad_b;
        let size = outw.checked_mul(outh).and_then(|v| v.checked_mul(self.num_output)).filter(|&v| v <= 1 << 30);
        if size.is_none() || x.w == 0 || x.h == 0 {
            ncnn_bail!("a {}x{} output of {} channels from {} is empty or too large", outw, outh, self.num_output, x.describe());
        }
        let cut = self.cut(outw, outh)?;
        let mut full = Mat::new_3d(outw, outh, self.num_output);
        let (icg, ocg) = (inch / self.group, self.num_output / self.group);
        let (hw, maxk) = (x.w * x.h, self.kw * self.kh);
        par::chunks_mut(&mut full.data, outw * outh, |p, o| {
            let gi = p / ocg.max(1);
            let b = bias.get(p).copied().unwrap_or(0.0);
            o.iter_mut().for_each(|v| *v = b);
            let src = &x.data[gi * icg * hw..(gi + 1) * icg * hw];
            let wp = &w[p * icg * maxk..(p + 1) * icg * maxk];
            // cols[k][i * w + j] = sum_q W[p][q][k] * x[q][i][j]
            let mut cols = vec![0.0f32; maxk * hw];
            crate::ncnn::par::run_sequential(|| {
                matmul(MatView { data: wp, rs: 1, cs: maxk }, MatView::rows(src, hw), &mut cols, maxk, icg, hw)
            });
            for ky in 0..self.kh {
                for kx in 0..self.kw {
                    let c = &cols[(ky * self.kw + kx) * hw..(ky * self.kw + kx + 1) * hw];
                    for i in 0..x.h {
                        let row = (i * self.sh + ky * self.dh) * outw + kx * self.dw;
                        let dst = &mut o[row..];
                        for (j, v) in c[i * x.w..(i + 1) * x.w].iter().enumerate() {
                            dst[j * self.sw] += v;
                        }
                    }
                }
            }
            self.act.apply(o);
        });
        let (t, bo, l, r) = cut;
        if (t, bo, l, r) == (0, 0, 0, 0) {
            return Ok(full);
        }
        let (cw, ch) = (outw - l - r, outh - t - bo);
        let mut out = Mat::new_3d(cw, ch, self.num_output);
        par::chunks_mut(&mut out.data, cw * ch, |p, o| {
            let src = &full.data[p * outw * outh..(p + 1) * outw * outh];
            for (y, row) in o.chunks_mut(cw).enumerate() {
                row.copy_from_slice(&src[(y + t) * outw + l..(y + t) * outw + l + cw]);
            }
        });
        Ok(out)
    }

    /// (top, bottom, left, right) cut off the full output.
    fn cut(&self, outw: usize, outh: usize) -> anyhow::Result<(usize, usize, usize, usize)> {
        let pads = [self.pt, self.pb, self.pl, self.pr];
        let (t, b, l, r) = if pads.iter().any(|&v| v > 0) {
            let z = |v: i32| v.max(0) as usize;
            (z(self.pt), z(self.pb), z(self.pl), z(self.pr))
        } else if self.output_w > 0 && self.output_h > 0 {
            let (ow, oh) = (self.output_w as usize, self.output_h as usize);
            if ow > outw || oh > outh {
                ncnn_bail!("output size {ow}x{oh} is larger than the {outw}x{outh} the deconvolution makes");
            }
            let (wc, hc) = (outw - ow, outh - oh);
            if pads.contains(&-233) {
                (hc / 2, hc - hc / 2, wc / 2, wc - wc / 2)
            } else if pads.contains(&-234) {
                (hc - hc / 2, hc / 2, wc - wc / 2, wc / 2)
            } else {
                ncnn_bail!("output_w/output_h (keys 20, 21) need SAME padding (-233 or -234) to say where to cut");
            }
        } else {
            (0, 0, 0, 0)
        };
        if t + b >= outh || l + r >= outw {
            ncnn_bail!("padding {t},{b},{l},{r} (top, bottom, left, right) cuts away the whole {outw}x{outh} output");
        }
        Ok((t, b, l, r))
    }
}
