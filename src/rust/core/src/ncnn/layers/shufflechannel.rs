//! ShuffleChannel: channels viewed as (group, c/group) are transposed.

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct ShuffleChannel {
    group: usize,
    reverse: bool,
}

impl ShuffleChannel {
    pub fn new(pd: &ParamDict) -> anyhow::Result<ShuffleChannel> {
        let g = pd.int(0, 1);
        if g <= 0 {
            ncnn_bail!("ShuffleChannel group must be positive, got {g}");
        }
        Ok(ShuffleChannel {
            group: g as usize,
            reverse: pd.int(1, 0) != 0,
        })
    }
}

impl Layer for ShuffleChannel {
    // BOUNDS-FN: src = i * per + j and dst = j * g + i are below g * per = c channels
    // of n values (c divides by the group: checked).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "ShuffleChannel")?;
        if x.dims != 3 || x.c % self.group != 0 {
            ncnn_bail!(
                "expects a 3-d input whose channels divide by group {}, got {}",
                self.group,
                x.describe()
            );
        }
        let c = x.c;
        let g = if self.reverse {
            c / self.group
        } else {
            self.group
        };
        let per = c / g;
        let n = x.cstep();
        let mut out = x.clone();
        for i in 0..g {
            for j in 0..per {
                let src = i * per + j;
                let dst = j * g + i;
                out.data[dst * n..(dst + 1) * n].copy_from_slice(&x.data[src * n..(src + 1) * n]);
            }
        }
        Ok(vec![out])
    }
}
