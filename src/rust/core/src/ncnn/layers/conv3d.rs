//! Convolution3D and ConvolutionDepthWise3D: convolution over a 4-d blob
//! (w, h, d, c) with kernel, dilation, stride and six pads per axis
//! (explicit, SAME_UPPER -233 or SAME_LOWER -234), a pad value, bias and
//! fused activation. Weights are [out][in per group][kd][kh][kw]. One
//! input and one output channel per group runs a direct kernel; other
//! groups multiply the weights with the unfolded input, a block of output
//! positions at a time.

use super::kernels::matmul::{matmul, MatView};
use super::kernels::volume::{self, VolConv};
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Conv3d {
    c: VolConv,
    pad_value: f32,
}

/// Values of the unfolded input per block (bounds its memory).
const BLOCK: usize = 1 << 20;

impl Conv3d {
    /// Convolution3D, or ConvolutionDepthWise3D (group from key 7) when `grouped`.
    pub fn new(pd: &ParamDict, grouped: bool) -> anyhow::Result<Conv3d> {
        let what = if grouped { "ConvolutionDepthWise3D" } else { "Convolution3D" };
        Ok(Conv3d { c: VolConv::read(pd, what, grouped)?, pad_value: pd.float(18, 0.0) })
    }
}

impl Layer for Conv3d {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.c.load(mb)
    }

    // Bounds: on and the window arrays are [_; 3] (literals); the weights hold
    // num_output * icg * maxk (checked) and channels g * icg + r / maxk < inch; an
    // output position's start plus any tap offset is inside the bordered channel
    // (slide fits the dilated window in it); tmp and cols hold ocg * nb, rows * nb.
    // BOUNDS-FN: every index is in range as said just above.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let c = &self.c;
        let (x, n, inch) = c.bottom(bottoms)?;
        let xp = volume::border(&x, c.win.conv_pads(n), self.pad_value, c.what)?;
        let on = c.win.slide([xp.w, xp.h, xp.d], c.what)?;
        let mut out = volume::new_volume(on, c.num_output, c.what)?;
        let outn = on.iter().product::<usize>();
        let (icg, ocg) = (inch / c.group, c.num_output / c.group);
        let offs = volume::tap_offsets(&c.win, xp.w, xp.h);
        if c.group == 0 || inch % c.group != 0 || c.weight.len() < c.num_output * icg * offs.len() {
            ncnn_bail!("{}: {} weights do not fit {} outputs of {inch} / {} inputs and {} taps", c.what, c.weight.len(), c.num_output, c.group, offs.len());
        }
        // Where output position (z, y, x) starts in a padded channel.
        let start = |i: usize| {
            let (ox, oy, oz) = (i % on[0], i / on[0] % on[1], i / (on[0] * on[1]));
            (oz * c.win.s[2] * xp.h + oy * c.win.s[1]) * xp.w + ox * c.win.s[0]
        };
        let maxk = offs.len();
        if icg == 1 && ocg == 1 {
            par::chunks_mut(&mut out.data, outn, |q, o| {
                let src = xp.channel(q);
                let k = &c.weight[q * maxk..(q + 1) * maxk];
                for (i, v) in o.iter_mut().enumerate() {
                    let s = &src[start(i)..];
                    *v = offs.iter().zip(k).map(|(&at, w)| s[at] * w).sum();
                }
            });
        } else {
            let rows = icg * maxk;
            let nb = (BLOCK / rows).clamp(64, outn.max(64)).min(outn);
            let mut cols = vec![0.0f32; rows * nb];
            let mut tmp = vec![0.0f32; ocg * nb];
            for g in 0..c.group {
                let wg = &c.weight[g * ocg * rows..(g + 1) * ocg * rows];
                for b0 in (0..outn).step_by(nb) {
                    let m = nb.min(outn - b0);
                    par::chunks_mut(&mut cols[..rows * m], m, |r, c| {
                        let src = xp.channel(g * icg + r / maxk);
                        let at = offs[r % maxk];
                        for (j, v) in c.iter_mut().enumerate() {
                            *v = src[start(b0 + j) + at];
                        }
                    });
                    matmul(MatView::rows(wg, rows), MatView::rows(&cols[..rows * m], m), &mut tmp[..ocg * m], ocg, rows, m);
                    for o in 0..ocg {
                        let dst = (g * ocg + o) * outn + b0;
                        out.data[dst..dst + m].copy_from_slice(&tmp[o * m..(o + 1) * m]);
                    }
                }
            }
        }
        par::chunks_mut(&mut out.data, outn, |p, o| {
            c.act.apply_bias(o, c.bias.get(p).copied().unwrap_or(0.0));
        });
        Ok(vec![out])
    }
}

#[cfg(test)]
#[path = "volume_tests.rs"]
mod tests;
