//! Deconvolution3D and DeconvolutionDepthWise3D: the transposed
//! convolution over a 4-d blob (w, h, d, c) with kernel, dilation, stride,
//! output padding (keys 18, 19, 20), bias and fused activation; the result
//! is cut by the pads or, with SAME padding (-233 / -234), to a requested
//! output size (keys 25, 26, 27). Weights are [out][in per group][kd][kh][kw].
//! Per output channel, its kernel taps times the input channels (one
//! product, a block of input depths at a time) are added into the output.

use super::kernels::matmul::{matmul, MatView};
use super::kernels::volume::{self, Pads, VolConv};
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Deconv3d {
    c: VolConv,
    out_pad: [usize; 3],
    out_size: [i32; 3],
}

/// Values of one channel's tap products per block.
const BLOCK: usize = 1 << 18;

impl Deconv3d {
    /// Deconvolution3D, or DeconvolutionDepthWise3D (group from key 7) when `grouped`.
    pub fn new(pd: &ParamDict, grouped: bool) -> anyhow::Result<Deconv3d> {
        let what = if grouped { "DeconvolutionDepthWise3D" } else { "Deconvolution3D" };
        let c = VolConv::read(pd, what, grouped)?;
        let opr = pd.int(18, 0);
        let op = [opr, pd.int(19, opr), pd.int(20, opr)];
        if let Some(v) = op.iter().find(|&&v| !(0..=1 << 16).contains(&v)) {
            ncnn_bail!("{what}: output padding must be 0 to 65536, got {v}");
        }
        let ow = pd.int(25, 0);
        Ok(Deconv3d { c, out_pad: op.map(|v| v as usize), out_size: [ow, pd.int(26, ow), pd.int(27, ow)] })
    }

    /// The borders cut off the full output of extents `full`.
    // BOUNDS-FN: p, full and out_size are [_; 3] (pairs [_; 2]), a < 3.
    fn cut(&self, full: [usize; 3]) -> anyhow::Result<Pads> {
        let pads = self.c.win.pad.iter().flatten().copied().collect::<Vec<i32>>();
        if pads.iter().any(|&v| v > 0) {
            return Ok(self.c.win.explicit());
        }
        if self.out_size.iter().all(|&v| v > 0) {
            let mut p = [[0; 2]; 3];
            let lower = if pads.contains(&-233) {
                false
            } else if pads.contains(&-234) {
                true
            } else {
                ncnn_bail!("{}: output_w/h/d (keys 25, 26, 27) need SAME padding (-233 or -234) to say where to cut", self.c.what);
            };
            for a in 0..3 {
                let want = self.out_size[a] as usize;
                if want > full[a] {
                    ncnn_bail!(
                        "{}: output size {:?} (w, h, d) is larger than the {:?} the deconvolution makes",
                        self.c.what, self.out_size, full
                    );
                }
                let c = full[a] - want;
                p[a] = if lower { [c - c / 2, c / 2] } else { [c / 2, c - c / 2] };
            }
            return Ok(p);
        }
        Ok([[0; 2]; 3])
    }
}

impl Layer for Deconv3d {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.c.load(mb)
    }

    // Bounds: n, full, k, s, dil, out_pad are [_; 3] (a < 3, literals); x holds inch =
    // icg * group channels and the weights num_output * icg * maxk (checked), so
    // group g = p / ocg and output p slice inside them; cols holds maxk * zb *
    // plane; a tap lands at depth (z0 + zi) * s + kz * dil < full[2], row and
    // column likewise inside the full output plane.
    // BOUNDS-FN: every index is in range as said just above.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let c = &self.c;
        let (x, n, inch) = c.bottom(bottoms)?;
        let mut full = [0; 3];
        for a in 0..3 {
            full[a] = (n[a] - 1).saturating_mul(c.win.s[a]).saturating_add(c.win.extent(a) + self.out_pad[a]);
        }
        let cut = self.cut(full)?;
        let mut out = volume::new_volume(full, c.num_output, c.what)?;
        let (icg, ocg) = (inch / c.group, c.num_output / c.group);
        let plane = n[0] * n[1];
        let hw = full[0] * full[1];
        let maxk = c.win.taps();
        if c.group == 0 || inch % c.group != 0 || ocg == 0 || c.weight.len() < c.num_output * icg * maxk || x.total() < inch * plane * n[2] {
            ncnn_bail!("{}: {} weights and the input {} do not fit {} outputs of {inch} / {} inputs and {maxk} taps", c.what, c.weight.len(), x.describe(), c.num_output, c.group);
        }
        let (k, s, dil) = (c.win.k, c.win.s, c.win.dil);
        // Input depths per block.
        let zb = (BLOCK / (maxk * plane).max(1)).clamp(1, n[2]);
        par::chunks_mut(&mut out.data, hw * full[2], |p, o| {
            o.fill(c.bias.get(p).copied().unwrap_or(0.0));
            let g = p / ocg;
            let src = &x.data[g * icg * plane * n[2]..(g + 1) * icg * plane * n[2]];
            let wp = &c.weight[p * icg * maxk..(p + 1) * icg * maxk];
            let mut cols = vec![0.0f32; maxk * zb * plane];
            for z0 in (0..n[2]).step_by(zb) {
                let m = zb.min(n[2] - z0) * plane;
                // cols[tap][position] = sum over input channels q of W[p][q][tap] * x[q][position]
                let b = MatView { data: &src[z0 * plane..], rs: plane * n[2], cs: 1 };
                par::run_sequential(|| matmul(MatView { data: wp, rs: 1, cs: maxk }, b, &mut cols[..maxk * m], maxk, icg, m));
                for (t, c) in cols[..maxk * m].chunks(m).enumerate() {
                    let (kx, ky, kz) = (t % k[0], t / k[0] % k[1], t / (k[0] * k[1]));
                    for (zi, cz) in c.chunks(plane).enumerate() {
                        let oz = (z0 + zi) * s[2] + kz * dil[2];
                        for (yi, row) in cz.chunks(n[0]).enumerate() {
                            let at = oz * hw + (yi * s[1] + ky * dil[1]) * full[0] + kx * dil[0];
                            let dst = &mut o[at..];
                            for (xi, v) in row.iter().enumerate() {
                                dst[xi * s[0]] += v;
                            }
                        }
                    }
                }
            }
            c.act.apply(o);
        });
        Ok(vec![volume::cut(out, cut, c.what)?])
    }
}
