//! Elementwise layers without weights, each a function of one value with
//! its parameters: ReLU, Sigmoid, TanH, Swish, HardSigmoid, HardSwish, Clip,
//! AbsVal, BNLL, ELU, SELU, CELU, Mish, Softplus, GELU, Erf, Exp, Log, Power,
//! Threshold, Shrink.

use super::kernels::math;
use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::base::simd;

#[derive(Clone, Copy)]
pub enum ActKind {
    Relu,
    Sigmoid,
    Tanh,
    Swish,
    HardSigmoid,
    HardSwish,
    Clip,
    AbsVal,
    Bnll,
    Elu,
    Selu,
    Celu,
    Mish,
    Softplus,
    Gelu,
    Erf,
    Exp,
    Log,
    Power,
    Threshold,
    Shrink,
}

pub struct ActivationLayer {
    kind: ActKind,
    a: f32,
    b: f32,
    c: f32,
}

impl ActivationLayer {
    pub fn new(kind: ActKind, pd: &ParamDict) -> anyhow::Result<ActivationLayer> {
        use ActKind::*;
        let (a, b, c) = match kind {
            Relu => (pd.float(0, 0.0), 0.0, 0.0),
            HardSigmoid | HardSwish => (pd.float(0, 0.2), pd.float(1, 0.5), 0.0),
            Clip => (pd.float(0, f32::MIN), pd.float(1, f32::MAX), 0.0),
            Elu => (pd.float(0, 0.1), 0.0, 0.0),
            Selu => (pd.float(0, 1.673_263_2), pd.float(1, 1.050_701), 0.0),
            Celu => (pd.float(0, 1.0), 0.0, 0.0),
            Gelu => (pd.int(0, 0) as f32, 0.0, 0.0),
            // base, scale, shift
            Exp | Log => (pd.float(0, -1.0), pd.float(1, 1.0), pd.float(2, 0.0)),
            // power, scale, shift
            Power => (pd.float(0, 1.0), pd.float(1, 1.0), pd.float(2, 0.0)),
            Threshold => (pd.float(0, 0.0), 0.0, 0.0),
            // bias, lambd
            Shrink => (pd.float(0, 0.0), pd.float(1, 0.5), 0.0),
            _ => (0.0, 0.0, 0.0),
        };
        Ok(ActivationLayer { kind, a, b, c })
    }
}

/// `f` over every value, in chunks on the worker pool, compiled wide.
fn map(d: &mut [f32], f: impl Fn(f32) -> f32 + Sync + Send) {
    par::chunks_mut(d, 16384, |_, c| simd::wide(|| c.iter_mut().for_each(|x| *x = f(*x))));
}

/// `f` over every value, in chunks on the worker pool (for functions that
/// do not vectorise, or branch per value).
fn map_scalar(d: &mut [f32], f: impl Fn(f32) -> f32 + Sync + Send) {
    par::chunks_mut(d, 16384, |_, c| c.iter_mut().for_each(|x| *x = f(*x)));
}

impl Layer for ActivationLayer {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        use ActKind::*;
        let mut m = one(bottoms, "activation")?;
        m.int8 = false;
        let (a, b, c) = (self.a, self.b, self.c);
        let d: &mut [f32] = &mut m.data;
        match self.kind {
            // Not widened: for AVX2 the compiler turns "keep x unless
            // negative" into masked stores, several times slower.
            Relu => map_scalar(d, |x| if x < 0.0 { x * a } else { x }),
            Sigmoid => map(d, |x| 1.0 / (1.0 + math::exp(-x))),
            Tanh => map(d, |x| x.tanh()),
            Swish => map(d, |x| x / (1.0 + math::exp(-x))),
            HardSigmoid => map(d, |x| (x * a + b).clamp(0.0, 1.0)),
            HardSwish => map(d, |x| x * (x * a + b).clamp(0.0, 1.0)),
            Clip => map(d, |x| x.max(a).min(b)),
            AbsVal => map(d, |x| x.abs()),
            Bnll => map_scalar(d, |x| if x > 0.0 { x + (-x).exp().ln_1p() } else { x.exp().ln_1p() }),
            Elu => map_scalar(d, |x| if x < 0.0 { a * (x.exp() - 1.0) } else { x }),
            Selu => map_scalar(d, |x| if x < 0.0 { (x.exp() - 1.0) * a * b } else { x * b }),
            Celu => map_scalar(d, |x| if x < 0.0 { ((x / a).exp() - 1.0) * a } else { x }),
            Mish => map(d, |x| x * x.exp().ln_1p().tanh()),
            Softplus => map(d, |x| (1.0 + x.exp()).ln()),
            Gelu if a != 0.0 => map(d, |x| 0.5 * x * (1.0 + (0.797_884_56 * (x + 0.044_715 * x * x * x)).tanh())),
            Gelu => map_scalar(d, |x| 0.5 * x * math::erfc(-std::f32::consts::FRAC_1_SQRT_2 * x)),
            Erf => map_scalar(d, math::erf),
            Exp if a == -1.0 => map(d, |x| (c + x * b).exp()),
            Exp => map(d, |x| a.powf(c + x * b)),
            Log if a == -1.0 => map(d, |x| (c + x * b).ln()),
            Log => {
                let lb = a.ln();
                map(d, |x| (c + x * b).ln() / lb)
            }
            Power => map(d, |x| (c + x * b).powf(a)),
            Threshold => map(d, |x| if x > a { 1.0 } else { 0.0 }),
            Shrink => map_scalar(d, |x| {
                if x < -b {
                    x + a
                } else if x > b {
                    x - a
                } else {
                    0.0
                }
            }),
        }
        Ok(vec![m])
    }
}
