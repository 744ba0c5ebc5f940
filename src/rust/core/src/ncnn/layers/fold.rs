//! Unfold (im2col) and Fold (col2im): Unfold turns each kernel window of a
//! 3-d blob into a column (rows: channel, kernel row, kernel column;
//! columns: window positions row-major), padding with 18=pad_value; Fold
//! sums such columns back into a 20=output_w x 21=output_h image. Kernel,
//! dilation, stride and padding keys are Convolution's.

use super::kernels::window::positive;
use crate::ncnn::layer::one;
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct FoldLayer {
    fold: bool,
    k: [usize; 2],
    d: [usize; 2],
    s: [usize; 2],
    /// left, right, top, bottom
    pad: [usize; 4],
    pad_value: f32,
    out: [usize; 2],
}

impl FoldLayer {
    // BOUNDS-FN: out is a [usize; 2] indexed by literals.
    pub fn new(pd: &ParamDict, fold: bool) -> anyhow::Result<FoldLayer> {
        let kw = pd.int(1, 0);
        let dw = pd.int(2, 1);
        let sw = pd.int(3, 1);
        let pl = pd.int(4, 0);
        let pt = pd.int(14, pl);
        let nn = |v: i32, what: &str| -> anyhow::Result<usize> {
            if v < 0 {
                ncnn_bail!("{what} must not be negative, got {v}");
            }
            Ok(v as usize)
        };
        let ow = pd.int(20, 0);
        let l = FoldLayer {
            fold,
            k: [positive(kw, "kernel_w")?, positive(pd.int(11, kw), "kernel_h")?],
            d: [positive(dw, "dilation_w")?, positive(pd.int(12, dw), "dilation_h")?],
            s: [positive(sw, "stride_w")?, positive(pd.int(13, sw), "stride_h")?],
            pad: [nn(pl, "pad_left")?, nn(pd.int(15, pl), "pad_right")?, nn(pt, "pad_top")?, nn(pd.int(16, pt), "pad_bottom")?],
            pad_value: pd.float(18, 0.0),
            out: [nn(ow, "output_w")?, nn(pd.int(21, ow), "output_h")?],
        };
        if fold && (l.out[0] == 0 || l.out[1] == 0) {
            ncnn_bail!("Fold needs output_w (20) and output_h (21)");
        }
        Ok(l)
    }

    /// Window positions across and down an image of `w` x `h`.
    // BOUNDS-FN: k, d, s are [usize; 2] and pad a [usize; 4], indexed by literals.
    fn grid(&self, w: usize, h: usize) -> anyhow::Result<(usize, usize)> {
        let ext = |i: usize| self.d[i] * (self.k[i] - 1) + 1;
        let (pw, ph) = (w + self.pad[0] + self.pad[1], h + self.pad[2] + self.pad[3]);
        if pw < ext(0) || ph < ext(1) {
            ncnn_bail!("the {}x{} kernel (dilated) does not fit the padded {pw}x{ph} image", self.k[0], self.k[1]);
        }
        Ok(((pw - ext(0)) / self.s[0] + 1, (ph - ext(1)) / self.s[1] + 1))
    }

    /// For every (row of the columns, window) the image offset, or None in the padding.
    // BOUNDS-FN: k, d, s are [usize; 2] and pad a [usize; 4], indexed by literals.
    fn for_each(&self, w: usize, h: usize, c: usize, gw: usize, gh: usize, mut f: impl FnMut(usize, Option<usize>)) {
        let (kw, kh) = (self.k[0], self.k[1]);
        let mut i = 0;
        for q in 0..c {
            for ky in 0..kh {
                for kx in 0..kw {
                    for oy in 0..gh {
                        let y = (oy * self.s[1] + ky * self.d[1]) as isize - self.pad[2] as isize;
                        for ox in 0..gw {
                            let x = (ox * self.s[0] + kx * self.d[0]) as isize - self.pad[0] as isize;
                            let inside = x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h;
                            f(i, inside.then(|| (q * h + y as usize) * w + x as usize));
                            i += 1;
                        }
                    }
                }
            }
        }
    }
}

impl Layer for FoldLayer {
    // BOUNDS-FN: for_each gives offsets inside w x h x c (tested) and counts i below
    // c * maxk * gw * gh = x.total() (Fold's shape is checked).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let what = if self.fold { "Fold" } else { "Unfold" };
        let x = one(bottoms, what)?;
        let maxk = self.k[0] * self.k[1];
        if self.fold {
            let [w, h] = self.out;
            let (gw, gh) = self.grid(w, h)?;
            if x.dims != 2 || x.w != gw * gh || x.h % maxk != 0 {
                ncnn_bail!("Fold into {w}x{h} takes a 2-d blob of {} columns and a multiple of {maxk} rows, got {}", gw * gh, x.describe());
            }
            let c = x.h / maxk;
            let mut out = Mat::new_3d(w, h, c);
            self.for_each(w, h, c, gw, gh, |i, at| {
                if let Some(at) = at {
                    out.data[at] += x.data[i];
                }
            });
            Ok(vec![out])
        } else {
            if x.dims != 3 {
                ncnn_bail!("Unfold takes a 3-d blob, got {}", x.describe());
            }
            let (gw, gh) = self.grid(x.w, x.h)?;
            let n = crate::base::alloc::product(&[gw, gh, maxk, x.c], "an Unfold output")?;
            let mut out = take_vec(n);
            self.for_each(x.w, x.h, x.c, gw, gh, |_, at| out.push(at.map_or(self.pad_value, |a| x.data[a])));
            Ok(vec![Mat::from_shape(&[gw * gh, maxk * x.c], out)?])
        }
    }
}
