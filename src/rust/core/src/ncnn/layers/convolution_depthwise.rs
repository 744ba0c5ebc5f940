//! ConvolutionDepthWise: grouped convolution. One input channel per group
//! runs a direct loop; larger groups use the convolution GEMM per group.

use super::conv_common::{conv_gemm, finish, ConvParams};
use super::gemm::PackedA;
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
}

impl ConvolutionDepthWise {
    pub fn new(pd: &ParamDict) -> anyhow::Result<ConvolutionDepthWise> {
        Ok(ConvolutionDepthWise {
            p: ConvParams::new(pd, true)?,
            weight: vec![],
            packed: vec![],
            bias: vec![],
        })
    }
}

impl Layer for ConvolutionDepthWise {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        (self.weight, self.bias) = self.p.load(mb)?;
        let p = &self.p;
        let g = p.group;
        let ocg = p.num_output / g;
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
        let p = &self.p;
        let inch = p.in_channels();
        if x.dims != 3 || x.c != inch || inch % p.group != 0 {
            ncnn_bail!(
                "expects a 3-d input with {inch} channels (divisible by group {}), got a blob of shape {}",
                p.group,
                x.describe()
            );
        }
        let xp = p.pad(&x);
        let (outw, outh) = p.out_size(&xp)?;
        let n = outw * outh;
        let g = p.group;
        let (icg, ocg) = (inch / g, p.num_output / g);
        let kk = p.kh * p.kw;
        let mut out = Mat::new_3d(outw, outh, p.num_output);
        if icg == 1 && ocg == 1 {
            let w = &self.weight;
            let cs = xp.cstep();
            let fast = avx2();
            par::chunks_mut(&mut out.data, n, |q, o| {
                let src = &xp.data[q * cs..(q + 1) * cs];
                let k = &w[q * kk..(q + 1) * kk];
                if fast {
                    // SAFETY: the CPU supports AVX2 and FMA (checked above).
                    unsafe { dw_channel_avx2(src, xp.w, k, p, o, outw, outh) }
                } else {
                    dw_channel(src, xp.w, k, p, o, outw, outh)
                }
            });
        } else {
            for gi in 0..g {
                conv_gemm(
                    &xp,
                    p,
                    gi * icg,
                    icg,
                    &self.packed[gi],
                    &mut out.data[gi * ocg * n..(gi + 1) * ocg * n],
                    outw,
                    outh,
                );
            }
        }
        finish(&mut out.data, n, &self.bias, &p.act);
        Ok(vec![out])
    }
}

fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One channel of a depthwise convolution: for each kernel tap, a whole
/// output row gets the tap times a (strided) input row.
#[inline(always)]
fn dw_channel(
    src: &[f32],
    w: usize,
    k: &[f32],
    p: &ConvParams,
    o: &mut [f32],
    outw: usize,
    outh: usize,
) {
    // Columns split into stride phases, so every tap reads a contiguous run.
    let sw = p.sw;
    let wq = (w + sw - 1) / sw;
    let h = src.len() / w;
    let phased;
    let (plane, pw): (&[f32], usize) = if sw == 1 {
        (src, w)
    } else {
        let mut v = vec![0.0f32; sw * h * wq];
        for px in 0..sw {
            for y in 0..h {
                let row = &src[y * w + px..(y + 1) * w];
                let dst = &mut v[(px * h + y) * wq..(px * h + y + 1) * wq];
                dst.iter_mut()
                    .zip(row.iter().step_by(sw))
                    .for_each(|(d, s)| *d = *s);
            }
        }
        phased = v;
        (&phased, wq)
    };
    for oy in 0..outh {
        let orow = &mut o[oy * outw..(oy + 1) * outw];
        orow.iter_mut().for_each(|v| *v = 0.0);
        for ky in 0..p.kh {
            let y = oy * p.sh + ky * p.dh;
            for kx in 0..p.kw {
                let t = k[ky * p.kw + kx];
                let tx = kx * p.dw;
                let start = ((tx % sw) * h + y) * pw + tx / sw;
                let r = &plane[start..start + outw];
                orow.iter_mut().zip(r).for_each(|(a, v)| *a += t * v);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dw_channel_avx2(
    src: &[f32],
    w: usize,
    k: &[f32],
    p: &ConvParams,
    o: &mut [f32],
    outw: usize,
    outh: usize,
) {
    dw_channel(src, w, k, p, o, outw, outh)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn dw_channel_avx2(
    src: &[f32],
    w: usize,
    k: &[f32],
    p: &ConvParams,
    o: &mut [f32],
    outw: usize,
    outh: usize,
) {
    dw_channel(src, w, k, p, o, outw, outh)
}
