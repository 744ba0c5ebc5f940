//! Normalize: divides by the L2 norm across space (0=across_spatial: each
//! channel, or the whole blob with across_channel too) or across channels
//! (4=across_channel alone: each position over the channels), then scales
//! per channel (or by one shared value, 1=channel_shared). 9=eps_mode puts
//! eps inside the root (0, caffe), as a floor of the norm (1, pytorch) or
//! as a floor of the squared sum (2, tensorflow).

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Normalize {
    across_spatial: bool,
    across_channel: bool,
    channel_shared: bool,
    eps: f32,
    eps_mode: i32,
    size: usize,
    scale: Vec<f32>,
}

impl Normalize {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Normalize> {
        let size = pd.int(3, 0);
        if size <= 0 {
            ncnn_bail!("Normalize scale_data_size must be positive, got {size}");
        }
        let eps_mode = pd.int(9, 0);
        if !(0..=2).contains(&eps_mode) {
            ncnn_bail!("Normalize eps_mode must be 0 (caffe), 1 (pytorch) or 2 (tensorflow), got {eps_mode}");
        }
        Ok(Normalize {
            across_spatial: pd.int(0, 0) != 0,
            across_channel: pd.int(4, 1) != 0,
            channel_shared: pd.int(1, 0) != 0,
            eps: pd.float(2, 0.0001),
            eps_mode,
            size: size as usize,
            scale: vec![],
        })
    }

    /// The inverse norm of a squared sum.
    fn inv(&self, ssum: f32) -> f32 {
        match self.eps_mode {
            0 => 1.0 / (ssum + self.eps).sqrt(),
            1 => 1.0 / ssum.sqrt().max(self.eps),
            _ => 1.0 / ssum.max(self.eps).sqrt(),
        }
    }
}

impl Layer for Normalize {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.scale = mb.raw(self.size, "normalize scale")?;
        Ok(())
    }

    // BOUNDS-FN: scale holds 1 (shared) or c values (checked) and q < c.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "Normalize")?;
        let (c, size) = (x.c, x.w * x.h * x.d);
        let need = if self.channel_shared { 1 } else { c };
        if self.scale.len() < need {
            ncnn_bail!("Normalize has {} scale values but the input {} has {c} channels", self.scale.len(), x.describe());
        }
        let sc = |q: usize| if self.channel_shared { self.scale[0] } else { self.scale[q] };
        x.int8 = false;
        let sq = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        match (self.across_spatial, self.across_channel) {
            (true, true) => {
                let a = self.inv(x.data.chunks(size).map(sq).sum());
                for (q, ch) in x.data.chunks_mut(size).enumerate() {
                    let s = a * sc(q);
                    ch.iter_mut().for_each(|v| *v *= s);
                }
            }
            (true, false) => {
                for (q, ch) in x.data.chunks_mut(size).enumerate() {
                    let s = self.inv(sq(ch)) * sc(q);
                    ch.iter_mut().for_each(|v| *v *= s);
                }
            }
            (false, true) => {
                let mut ssum = vec![0.0f32; size];
                for ch in x.data.chunks(size) {
                    ssum.iter_mut().zip(ch).for_each(|(s, v)| *s += v * v);
                }
                let inv: Vec<f32> = ssum.iter().map(|&s| self.inv(s)).collect();
                for (q, ch) in x.data.chunks_mut(size).enumerate() {
                    let s = sc(q);
                    ch.iter_mut().zip(&inv).for_each(|(v, a)| *v *= a * s);
                }
            }
            (false, false) => {}
        }
        Ok(vec![x])
    }
}
