//! The layer interface shared by builtin and custom layers, run options, and
//! helpers used by several layers (fused activations, axis arithmetic).

use crate::ncnn::{Mat, ModelBin, ParamDict};
use std::sync::Arc;

/// Options of one forward pass.
#[derive(Clone, Default)]
pub struct Opt {
    /// The pool builtin layers run in (None: the caller's thread only).
    pub pool: Option<Arc<rayon::ThreadPool>>,
    pub num_threads: usize,
}

/// A layer: builtin, or custom (made by a registered factory).
pub trait Layer {
    /// True when the layer maps one bottom blob to one top blob.
    fn one_blob_only(&self) -> bool {
        true
    }
    /// Read this layer's parameters (custom layers; builtin ones read them
    /// when they are made).
    fn load_param(&mut self, _pd: &ParamDict) -> anyhow::Result<()> {
        Ok(())
    }
    /// Read this layer's weights, in order.
    fn load_model(&mut self, _mb: &mut ModelBin) -> anyhow::Result<()> {
        Ok(())
    }
    /// Prepare for inference, after every layer has read its weights.
    fn create_pipeline(&mut self, _opt: &Opt) -> anyhow::Result<()> {
        Ok(())
    }
    /// Undo `create_pipeline`, before the layer is destroyed or its weights
    /// are read again.
    fn destroy_pipeline(&mut self, _opt: &Opt) {}
    /// The concrete layer, for factories that need it back on destruction.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// Compute the tops from the bottoms.
    fn forward(&self, bottoms: Vec<Mat>, ntop: usize, opt: &Opt) -> anyhow::Result<Vec<Mat>>;
}

/// A builtin layer: may run on worker threads.
pub type Builtin = Box<dyn Layer + Send + Sync>;

/// Fused activation (`activation_type` 0..6 and its parameters).
#[derive(Clone, Debug, Default)]
pub struct Activation {
    pub kind: i32,
    pub params: Vec<f32>,
}

impl Activation {
    pub fn from_params(
        pd: &ParamDict,
        type_id: usize,
        params_id: usize,
    ) -> anyhow::Result<Activation> {
        let kind = pd.int(type_id, 0);
        let params = pd.floats(params_id);
        let need = match kind {
            0 | 1 | 4 | 5 => 0,
            2 => 1,
            3 | 6 => 2,
            _ => {
                crate::ncnn_bail!("activation_type {kind} is not one of 0 (none) to 6 (hardswish)")
            }
        };
        if params.len() < need && kind != 2 {
            crate::ncnn_bail!(
                "activation_type {kind} needs {need} activation_params, got {}",
                params.len()
            );
        }
        Ok(Activation { kind, params })
    }

    /// The first two activation_params (clip bounds, hard-sigmoid alpha and
    /// beta); `new` requires both for the kinds that read them.
    #[inline]
    fn pair(&self) -> (f32, f32) {
        match *self.params.as_slice() {
            [a, b, ..] => (a, b),
            [a] => (a, 0.0),
            [] => (0.0, 0.0),
        }
    }

    #[inline]
    pub fn apply1(&self, x: f32) -> f32 {
        match self.kind {
            1 => x.max(0.0),
            2 => {
                let s = self.params.first().copied().unwrap_or(0.0);
                if x < 0.0 {
                    x * s
                } else {
                    x
                }
            }
            3 => {
                let (lo, hi) = self.pair();
                x.max(lo).min(hi)
            }
            4 => 1.0 / (1.0 + (-x).exp()),
            5 => x * (x.exp().ln_1p()).tanh(),
            6 => {
                let (a, b) = self.pair();
                let lower = -b / a;
                let upper = 1.0 / a + lower;
                if x < lower {
                    0.0
                } else if x > upper {
                    x
                } else {
                    x * (x * a + b)
                }
            }
            _ => x,
        }
    }

    pub fn apply(&self, xs: &mut [f32]) {
        self.apply_bias(xs, 0.0)
    }

    /// `x = act(x + bias)` over a run of values (one loop per kind, so the
    /// common kinds vectorise).
    pub fn apply_bias(&self, xs: &mut [f32], bias: f32) {
        crate::base::simd::wide(|| self.apply_bias_in(xs, bias))
    }

    #[inline(always)]
    fn apply_bias_in(&self, xs: &mut [f32], bias: f32) {
        match self.kind {
            0 => {
                if bias != 0.0 {
                    xs.iter_mut().for_each(|x| *x += bias)
                }
            }
            1 => xs.iter_mut().for_each(|x| *x = (*x + bias).max(0.0)),
            2 => {
                let s = self.params.first().copied().unwrap_or(0.0);
                xs.iter_mut().for_each(|x| {
                    let v = *x + bias;
                    *x = if v < 0.0 { v * s } else { v }
                })
            }
            3 => {
                let (lo, hi) = self.pair();
                xs.iter_mut().for_each(|x| *x = (*x + bias).max(lo).min(hi))
            }
            4 => xs.iter_mut().for_each(|x| *x = 1.0 / (1.0 + crate::ncnn::layers::kernels::math::exp(-(*x + bias)))),
            6 => {
                let (a, b) = self.pair();
                let lower = -b / a;
                let upper = 1.0 / a + lower;
                xs.iter_mut().for_each(|x| {
                    let v = *x + bias;
                    let y = v * (v * a + b);
                    *x = if v < lower {
                        0.0
                    } else if v > upper {
                        v
                    } else {
                        y
                    }
                })
            }
            _ => xs.iter_mut().for_each(|x| *x = self.apply1(*x + bias)),
        }
    }
}

/// Resolve an ncnn axis (negative counts from the end) for a blob with `dims` axes.
pub fn resolve_axis(axis: i32, dims: usize, what: &str) -> anyhow::Result<usize> {
    let a = if axis < 0 { axis + dims as i32 } else { axis };
    if a < 0 || a as usize >= dims {
        crate::ncnn_bail!("{what}: axis {axis} is out of range for a blob with {dims} dimensions");
    }
    Ok(a as usize)
}

/// (outer, n, inner) sizes around axis `a` of outermost-first extents.
pub fn split_at_axis(axes: &[usize], a: usize) -> (usize, usize, usize) {
    let outer: usize = axes.iter().take(a).product();
    let inner: usize = axes.iter().skip(a + 1).product();
    (outer, axes.get(a).copied().unwrap_or(1), inner)
}

/// The bottom of a one-blob layer.
pub fn one(bottoms: Vec<Mat>, what: &str) -> anyhow::Result<Mat> {
    let n = bottoms.len();
    match <[Mat; 1]>::try_from(bottoms) {
        Ok([x]) => Ok(x),
        Err(_) => crate::ncnn_bail!("{what} takes exactly one bottom blob, got {n}"),
    }
}

/// Per-"channel" layout used by BatchNorm, Scale, PReLU, Bias: (channels, elements per channel).
pub fn channel_layout(m: &Mat) -> (usize, usize) {
    match m.dims {
        1 => (m.w, 1),
        2 => (m.h, m.w),
        _ => (m.c, m.cstep()),
    }
}
