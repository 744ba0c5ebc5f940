//! The kernel window of the 3-d layers (Convolution3D, Deconvolution3D,
//! their depthwise forms and Pooling3D) and the border helpers they share.
//! Axes are indexed w, h, d; each pad pair is (before, after): left/right,
//! top/bottom, front/behind.

use super::window::positive;
use crate::ncnn::par;
use crate::ncnn::{Mat, ParamDict};
use crate::ncnn_bail;

/// Pads per axis, before and after.
pub type Pads = [[usize; 2]; 3];

/// Where a layer keeps its window parameters.
pub struct Keys {
    pub kernel: [usize; 3],
    /// None: the layer has no dilation (pooling).
    pub dilation: Option<[usize; 3]>,
    pub stride: [usize; 3],
    /// left, right, top, bottom, front, behind.
    pub pads: [usize; 6],
}

/// The keys of the 3-d convolution and deconvolution layers.
pub const CONV_KEYS: Keys = Keys { kernel: [1, 11, 21], dilation: Some([2, 12, 22]), stride: [3, 13, 23], pads: [4, 15, 14, 16, 24, 17] };
/// The keys of Pooling3D.
pub const POOL_KEYS: Keys = Keys { kernel: [1, 11, 21], dilation: None, stride: [2, 12, 22], pads: [3, 14, 13, 15, 23, 16] };

#[derive(Clone, Debug)]
pub struct Window3 {
    pub k: [usize; 3],
    pub dil: [usize; 3],
    pub s: [usize; 3],
    /// Pads as given (-233 SAME_UPPER, -234 SAME_LOWER), per axis (before, after).
    pub pad: [[i32; 2]; 3],
}

const NAMES: [&str; 3] = ["w", "h", "d"];

impl Window3 {
    /// The window at `keys`, with ncnn's defaults: h and d take w's
    /// kernel, dilation and stride; the right, top and front pads the left
    /// one's, the bottom pad the top one's and the behind pad the front one's.
    // BOUNDS-FN: ids, v, out and NAMES have 3 entries (a < 3), keys.pads 6
    // (literals below 6).
    pub fn read(pd: &ParamDict, keys: &Keys, what: &str) -> anyhow::Result<Window3> {
        let axis = |ids: [usize; 3], def: i32, name: &str| -> anyhow::Result<[usize; 3]> {
            let w = pd.int(ids[0], def);
            let v = [w, pd.int(ids[1], w), pd.int(ids[2], w)];
            let mut out = [0; 3];
            for a in 0..3 {
                out[a] = positive(v[a], &format!("{what}: {name}_{}", NAMES[a]))?;
            }
            Ok(out)
        };
        let p = &keys.pads;
        let left = pd.int(p[0], 0);
        let top = pd.int(p[2], left);
        let front = pd.int(p[4], left);
        Ok(Window3 {
            k: axis(keys.kernel, 0, "kernel")?,
            dil: match keys.dilation {
                Some(ids) => axis(ids, 1, "dilation")?,
                None => [1; 3],
            },
            s: axis(keys.stride, 1, "stride")?,
            pad: [[left, pd.int(p[1], left)], [top, pd.int(p[3], top)], [front, pd.int(p[5], front)]],
        })
    }

    /// Kernel taps (kw * kh * kd).
    pub fn taps(&self) -> usize {
        self.k.iter().product()
    }

    /// The dilated kernel extent along axis `a`.
    // BOUNDS-FN: a is an axis below 3 at every caller (loops over 0..3, literals).
    pub fn extent(&self, a: usize) -> usize {
        self.dil[a] * (self.k[a] - 1) + 1
    }

    /// The pads as given, negatives read as none.
    pub fn explicit(&self) -> Pads {
        self.pad.map(|p| p.map(|v| v.max(0) as usize))
    }

    // BOUNDS-FN: each pad pair is a [i32; 2], indexed by 0 and 1.
    fn all(&self, v: i32) -> bool {
        self.pad.iter().all(|p| p[0] == v && p[1] == v)
    }

    /// SAME padding of extents `n`: the total per axis split with the
    /// smaller half before (upper) or after (lower). ncnn's 3-d layers
    /// split the depth as for SAME_UPPER in both modes.
    // BOUNDS-FN: n, out and the window arrays have 3 entries and a < 3.
    pub fn same(&self, n: [usize; 3], lower: bool) -> Pads {
        let mut out = [[0; 2]; 3];
        for a in 0..3 {
            let total = (self.extent(a) + (n[a].max(1) - 1) / self.s[a] * self.s[a]).saturating_sub(n[a]);
            let small = total / 2;
            out[a] = if lower && a < 2 { [total - small, small] } else { [small, total - small] };
        }
        out
    }

    /// The borders of a convolution: explicit when any pad is positive,
    /// SAME when all six are -233 or -234, else none.
    pub fn conv_pads(&self, n: [usize; 3]) -> Pads {
        if self.pad.iter().flatten().any(|&v| v > 0) {
            self.explicit()
        } else if self.all(-233) || self.all(-234) {
            self.same(n, self.all(-234))
        } else {
            [[0; 2]; 3]
        }
    }

    /// Output extents of a window sliding over padded extents `n`, or an
    /// error when the kernel does not fit.
    // BOUNDS-FN: n, out and the window arrays have 3 entries: a < 3 and literals.
    pub fn slide(&self, n: [usize; 3], what: &str) -> anyhow::Result<[usize; 3]> {
        let mut out = [0; 3];
        for a in 0..3 {
            let e = self.extent(a);
            if n[a] < e {
                ncnn_bail!(
                    "{what}: the input is {}x{}x{} (w x h x d, padded), smaller than the {}x{}x{} kernel extent",
                    n[0], n[1], n[2], self.extent(0), self.extent(1), self.extent(2)
                );
            }
            out[a] = (n[a] - e) / self.s[a] + 1;
        }
        Ok(out)
    }
}

/// The extents (w, h, d) of a 4-d blob, or an error naming `what`.
pub fn extents(x: &Mat, channels: Option<usize>, what: &str) -> anyhow::Result<[usize; 3]> {
    if x.dims != 4 || channels.is_some_and(|c| c != x.c) || x.is_empty() {
        match channels {
            Some(c) => ncnn_bail!("{what} expects a 4-d blob (w, h, d, c) with {c} channels, got {}", x.describe()),
            None => ncnn_bail!("{what} expects a non-empty 4-d blob (w, h, d, c), got {}", x.describe()),
        }
    }
    Ok([x.w, x.h, x.d])
}

/// A zero-filled 4-d blob, or an error when it would be larger than 2^30
/// values (a size the parameters ask for, not one to allocate blindly).
// BOUNDS-FN: n is a [usize; 3] indexed by literals below 3.
pub fn new_volume(n: [usize; 3], c: usize, what: &str) -> anyhow::Result<Mat> {
    let size = n.iter().chain([c].iter()).try_fold(1usize, |a, &v| a.checked_mul(v)).filter(|&v| v <= 1 << 30);
    if size.is_none() || size == Some(0) {
        ncnn_bail!("{what}: an output of {}x{}x{} with {c} channels is empty or too large", n[0], n[1], n[2]);
    }
    Ok(Mat::new(4, n[0], n[1], n[2], c))
}

/// `x` inside borders `p` of `value` (shared, not copied, without borders).
// BOUNDS-FN: out has x.c channels (q < x.c) of the padded n extents: input
// row (z, y) lands at column p[0][0] of padded row (z + p[2][0], y + p[1][0]),
// inside them; the source rows are inside a channel of w * h * d.
pub fn border(x: &Mat, p: Pads, value: f32, what: &str) -> anyhow::Result<Mat> {
    if p == [[0; 2]; 3] {
        return Ok(x.clone());
    }
    let n = [x.w + p[0][0] + p[0][1], x.h + p[1][0] + p[1][1], x.d + p[2][0] + p[2][1]];
    let mut out = new_volume(n, x.c, what)?;
    let (w, h, d) = (x.w, x.h, x.d);
    par::chunks_mut(&mut out.data, n[0] * n[1] * n[2], |q, o| {
        o.fill(value);
        let src = x.channel(q);
        for z in 0..d {
            for y in 0..h {
                let at = ((z + p[2][0]) * n[1] + y + p[1][0]) * n[0] + p[0][0];
                o[at..at + w].copy_from_slice(&src[(z * h + y) * w..(z * h + y + 1) * w]);
            }
        }
    });
    Ok(out)
}

/// `x` with borders `p` cut off; an error when nothing would be left.
// BOUNDS-FN: p, full and n have 3 entries (a < 3); out has x.c channels;
// the kept rows start at p[a][0] with n[a] + p[a][0] < full[a] (checked).
pub fn cut(x: Mat, p: Pads, what: &str) -> anyhow::Result<Mat> {
    if p == [[0; 2]; 3] {
        return Ok(x);
    }
    let full = [x.w, x.h, x.d];
    let mut n = [0; 3];
    for a in 0..3 {
        if p[a][0] + p[a][1] >= full[a] {
            ncnn_bail!(
                "{what}: padding {:?} (before, after per w, h, d) cuts away the whole {}x{}x{} output",
                p, full[0], full[1], full[2]
            );
        }
        n[a] = full[a] - p[a][0] - p[a][1];
    }
    let mut out = Mat::new(4, n[0], n[1], n[2], x.c);
    par::chunks_mut(&mut out.data, n[0] * n[1] * n[2], |q, o| {
        let src = x.channel(q);
        for z in 0..n[2] {
            for y in 0..n[1] {
                let at = ((z + p[2][0]) * full[1] + y + p[1][0]) * full[0] + p[0][0];
                let to = (z * n[1] + y) * n[0];
                o[to..to + n[0]].copy_from_slice(&src[at..at + n[0]]);
            }
        }
    });
    Ok(out)
}

/// Offsets of the kernel taps (d, h, w order, w fastest) in a plane of
/// `w` x `h` per depth.
// BOUNDS-FN: the window arrays have 3 entries, indexed by literals below 3.
pub fn tap_offsets(win: &Window3, w: usize, h: usize) -> Vec<usize> {
    let mut v = Vec::with_capacity(win.taps());
    for kz in 0..win.k[2] {
        for ky in 0..win.k[1] {
            for kx in 0..win.k[0] {
                v.push((kz * win.dil[2] * h + ky * win.dil[1]) * w + kx * win.dil[0]);
            }
        }
    }
    v
}

/// The parameters and weights the 3-d convolutions and deconvolutions
/// share: num_output (key 0), the window, bias_term (5),
/// weight_data_size (6), group (7, the depthwise forms) and the fused
/// activation (9, 10).
pub struct VolConv {
    pub what: &'static str,
    pub num_output: usize,
    pub win: Window3,
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub group: usize,
    pub act: crate::ncnn::layer::Activation,
    /// [out][in per group][kd][kh][kw].
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

impl VolConv {
    /// The layer `what`'s parameters; the group count is read when `grouped`.
    pub fn read(pd: &ParamDict, what: &'static str, grouped: bool) -> anyhow::Result<VolConv> {
        let count = |v: i32, key: &str| positive(v, &format!("{what}: {key}"));
        let num_output = count(pd.int(0, 0), "num_output")?;
        let win = Window3::read(pd, &CONV_KEYS, what)?;
        let group = if grouped { count(pd.int(7, 1), "group")? } else { 1 };
        let wds = pd.int(6, 0);
        let per = num_output.checked_mul(win.taps()).unwrap_or(0);
        if wds <= 0 || per == 0 || wds as usize % per != 0 {
            ncnn_bail!(
                "{what}: weight_data_size {wds} is not a positive multiple of num_output*kernel_w*kernel_h*kernel_d ({num_output} x {})",
                win.taps()
            );
        }
        if num_output % group != 0 {
            ncnn_bail!("{what}: num_output {num_output} is not divisible by group {group}");
        }
        Ok(VolConv {
            what,
            num_output,
            win,
            bias_term: pd.int(5, 0) != 0,
            weight_data_size: wds as usize,
            group,
            act: crate::ncnn::layer::Activation::from_params(pd, 9, 10)?,
            weight: vec![],
            bias: vec![],
        })
    }

    /// Input channels the weights expect.
    pub fn in_channels(&self) -> usize {
        self.weight_data_size / (self.num_output * self.win.taps()) * self.group
    }

    /// The one bottom blob, checked against the weights: (blob, its
    /// extents w, h, d, input channels).
    pub fn bottom(&self, bottoms: Vec<Mat>) -> anyhow::Result<(Mat, [usize; 3], usize)> {
        let x = crate::ncnn::layer::one(bottoms, self.what)?;
        let inch = self.in_channels();
        let n = extents(&x, Some(inch), self.what)?;
        Ok((x, n, inch))
    }

    /// Read the weights (fp32, fp16 or int8-tagged) and the bias.
    pub fn load(&mut self, mb: &mut crate::ncnn::ModelBin) -> anyhow::Result<()> {
        self.weight = mb.tagged(self.weight_data_size, "weights")?;
        self.bias = if self.bias_term { mb.raw(self.num_output, "bias")? } else { vec![] };
        Ok(())
    }
}
