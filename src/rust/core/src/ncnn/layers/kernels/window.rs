//! The kernel window shared by the convolution and deconvolution layers:
//! kernel, dilation and stride per axis and the four pads, read from
//! ncnn's keys with its defaults (a height takes the width's value, the
//! right and top pads the left one's, the bottom pad the top one's).

use crate::ncnn::ParamDict;
use crate::ncnn_bail;

#[derive(Clone, Debug)]
pub struct Window {
    pub kw: usize,
    pub kh: usize,
    pub dw: usize,
    pub dh: usize,
    pub sw: usize,
    pub sh: usize,
    /// Pads left, right, top, bottom (-233 SAME_UPPER, -234 SAME_LOWER).
    pub pl: i32,
    pub pr: i32,
    pub pt: i32,
    pub pb: i32,
}

/// `v` as a size, or an error naming `what` unless it is 1 to 65536.
pub fn positive(v: i32, what: &str) -> anyhow::Result<usize> {
    if v <= 0 || v > 1 << 16 {
        ncnn_bail!("{what} must be 1 to 65536, got {v}");
    }
    Ok(v as usize)
}

impl Window {
    /// Keys 1/11 kernel, 2/12 dilation, 3/13 stride, 4/15/14/16 pads.
    pub fn read(pd: &ParamDict) -> anyhow::Result<Window> {
        let (kw, dw, sw, pl) = (pd.int(1, 0), pd.int(2, 1), pd.int(3, 1), pd.int(4, 0));
        let pt = pd.int(14, pl);
        Ok(Window {
            kw: positive(kw, "kernel_w")?,
            kh: positive(pd.int(11, kw), "kernel_h")?,
            dw: positive(dw, "dilation_w")?,
            dh: positive(pd.int(12, dw), "dilation_h")?,
            sw: positive(sw, "stride_w")?,
            sh: positive(pd.int(13, sw), "stride_h")?,
            pl,
            pr: pd.int(15, pl),
            pt,
            pb: pd.int(16, pt),
        })
    }
}
