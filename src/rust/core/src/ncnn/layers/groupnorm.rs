//! GroupNorm and InstanceNorm: the channels split into groups, each group
//! normalised over all its values to mean 0 and variance 1 (variance + eps
//! under the root), then scaled and shifted per channel when affine.
//! InstanceNorm is the case of one channel per group.

use crate::ncnn::layer::{channel_layout, one};
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct GroupNorm {
    /// Channels per group (0: one group of every channel, fixed at run time).
    group: usize,
    channels: usize,
    eps: f32,
    affine: bool,
    gamma: Vec<f32>,
    beta: Vec<f32>,
    what: &'static str,
}

impl GroupNorm {
    pub fn new(pd: &ParamDict) -> anyhow::Result<GroupNorm> {
        let (group, channels) = (pd.int(0, 1), pd.int(1, 0));
        if group <= 0 || channels <= 0 || channels % group != 0 {
            ncnn_bail!("GroupNorm needs a positive group count that divides the channels, got group {group} and channels {channels}");
        }
        Ok(GroupNorm { group: group as usize, channels: channels as usize, eps: pd.float(2, 0.001), affine: pd.int(3, 1) != 0, gamma: vec![], beta: vec![], what: "GroupNorm" })
    }

    pub fn instance(pd: &ParamDict) -> anyhow::Result<GroupNorm> {
        let channels = pd.int(0, 0);
        if channels <= 0 {
            ncnn_bail!("InstanceNorm channels must be positive, got {channels}");
        }
        let c = channels as usize;
        Ok(GroupNorm { group: c, channels: c, eps: pd.float(1, 0.001), affine: pd.int(2, 1) != 0, gamma: vec![], beta: vec![], what: "InstanceNorm" })
    }
}

/// Normalise one group (`per` channels of `size` values each) in place.
fn norm_group(v: &mut [f32], size: usize, eps: f32, gamma: &[f32], beta: &[f32]) {
    let n = v.len() as f32;
    let mean = v.iter().sum::<f32>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let r = 1.0 / (var + eps).sqrt();
    for (q, ch) in v.chunks_mut(size).enumerate() {
        let a = gamma.get(q).map_or(r, |g| g * r);
        let b = beta.get(q).copied().unwrap_or(0.0) - mean * a;
        ch.iter_mut().for_each(|x| *x = *x * a + b);
    }
}

impl Layer for GroupNorm {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        if self.affine {
            self.gamma = mb.raw(self.channels, "gamma")?;
            self.beta = mb.raw(self.channels, "beta")?;
        }
        Ok(())
    }

    // BOUNDS-FN: gamma and beta are empty or hold channels = group * per values
    // (load_model); group divides channels (new), so group i < group.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, self.what)?;
        if self.what == "InstanceNorm" && x.dims < 3 {
            ncnn_bail!("InstanceNorm takes a 3-d or 4-d blob, got {}", x.describe());
        }
        let (c, size) = channel_layout(&x);
        if c != self.channels {
            ncnn_bail!("{} has {} channels but the input {} has {c}", self.what, self.channels, x.describe());
        }
        let per = self.channels / self.group;
        let (eps, g, b) = (self.eps, &self.gamma[..], &self.beta[..]);
        x.int8 = false;
        par::chunks_mut(&mut x.data, per * size, |i, v| {
            let r = i * per..(i + 1) * per;
            let (gg, bb) = if g.is_empty() { (&g[..], &b[..]) } else { (&g[r.clone()], &b[r]) };
            norm_group(v, size, eps, gg, bb)
        });
        Ok(vec![x])
    }
}
