//! PixelShuffle (depth to space) by `upscale_factor` r: output channel p,
//! row i * r + sh, column j * r + sw comes from input channel
//! p * r * r + sh * r + sw (mode 0) or (sh * r + sw) * outc + p (mode 1).

use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct PixelShuffle {
    r: usize,
    mode: i32,
}

impl PixelShuffle {
    pub fn new(pd: &ParamDict) -> anyhow::Result<PixelShuffle> {
        let r = pd.int(0, 1);
        if r <= 0 || r > 1024 {
            ncnn_bail!("PixelShuffle upscale_factor must be 1 to 1024, got {r}");
        }
        Ok(PixelShuffle { r: r as usize, mode: pd.int(1, 0) })
    }
}

/// Input channel of output channel `p`, sub-row `sh`, sub-column `sw`.
pub fn source_channel(mode: i32, r: usize, outc: usize, p: usize, sh: usize, sw: usize) -> usize {
    if mode == 0 {
        p * r * r + sh * r + sw
    } else {
        (sh * r + sw) * outc + p
    }
}

impl Layer for PixelShuffle {
    // BOUNDS-FN: out planes are oh = h * r rows of ow = w * r: row i * r + sh < oh,
    // column j * r + sw < ow; src is a channel of h rows of w.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "PixelShuffle")?;
        let r = self.r;
        if x.dims != 3 || x.c % (r * r) != 0 {
            ncnn_bail!("expects a 3-d blob whose channels divide by {} (upscale_factor squared), got {}", r * r, x.describe());
        }
        let (w, h, outc) = (x.w, x.h, x.c / (r * r));
        let (ow, oh) = (w * r, h * r);
        let mut out = Mat::for_overwrite_3d(ow, oh, outc);
        let mode = self.mode;
        par::chunks_mut(&mut out.data, ow * oh, |p, o| {
            for sh in 0..r {
                for sw in 0..r {
                    let src = x.channel(source_channel(mode, r, outc, p, sh, sw));
                    for i in 0..h {
                        let row = &mut o[(i * r + sh) * ow..(i * r + sh + 1) * ow];
                        for (j, v) in src[i * w..(i + 1) * w].iter().enumerate() {
                            row[j * r + sw] = *v;
                        }
                    }
                }
            }
        });
        Ok(vec![out])
    }
}
