//! Reorg (space to depth) by `stride` s, the inverse of PixelShuffle: output
//! channel q holds input rows i * s + sh, columns j * s + sw of channel p,
//! with q = p * s * s + sh * s + sw (mode 0) or (sh * s + sw) * c + p (mode 1).

use super::pixelshuffle::source_channel;
use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Reorg {
    s: usize,
    mode: i32,
}

impl Reorg {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Reorg> {
        let s = pd.int(0, 1);
        if s <= 0 || s > 1024 {
            ncnn_bail!("Reorg stride must be 1 to 1024, got {s}");
        }
        Ok(Reorg { s: s as usize, mode: pd.int(1, 0) })
    }
}

impl Layer for Reorg {
    // BOUNDS-FN: source_channel maps p < c, sh, sw < s below c * s * s = from.len(),
    // q < c * s * s; rows i * s + sh < h and columns j * s + sw < w (w, h divide by s).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Reorg")?;
        let s = self.s;
        if x.dims != 3 || x.w % s != 0 || x.h % s != 0 {
            ncnn_bail!("expects a 3-d blob whose width and height divide by the stride {s}, got {}", x.describe());
        }
        let (ow, oh, c) = (x.w / s, x.h / s, x.c);
        let mut out = Mat::for_overwrite_3d(ow, oh, c * s * s);
        let (mode, w) = (self.mode, x.w);
        // Output channel q: find (p, sh, sw) with source_channel(..) == q.
        let mut from = vec![(0, 0, 0); c * s * s];
        for p in 0..c {
            for sh in 0..s {
                for sw in 0..s {
                    from[source_channel(mode, s, c, p, sh, sw)] = (p, sh, sw);
                }
            }
        }
        par::chunks_mut(&mut out.data, ow * oh, |q, o| {
            let (p, sh, sw) = from[q];
            let src = x.channel(p);
            for i in 0..oh {
                let row = &src[(i * s + sh) * w..];
                for (j, v) in o[i * ow..(i + 1) * ow].iter_mut().enumerate() {
                    *v = row[j * s + sw];
                }
            }
        });
        Ok(vec![out])
    }
}
