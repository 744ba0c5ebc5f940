//! Elementwise activations: ReLU, Sigmoid, TanH, Swish, HardSigmoid, HardSwish, Clip.

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn::par;
use crate::simd;

#[derive(Clone, Copy)]
pub enum ActKind {
    Relu,
    Sigmoid,
    Tanh,
    Swish,
    HardSigmoid,
    HardSwish,
    Clip,
}

pub struct Act {
    kind: ActKind,
    a: f32,
    b: f32,
}

impl Act {
    pub fn new(kind: ActKind, pd: &ParamDict) -> anyhow::Result<Act> {
        let (a, b) = match kind {
            ActKind::Relu => (pd.float(0, 0.0), 0.0),
            ActKind::HardSigmoid | ActKind::HardSwish => (pd.float(0, 0.2), pd.float(1, 0.5)),
            ActKind::Clip => (pd.float(0, f32::MIN), pd.float(1, f32::MAX)),
            _ => (0.0, 0.0),
        };
        Ok(Act { kind, a, b })
    }
}

impl Layer for Act {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut m = one(bottoms, "activation")?;
        let (a, b) = (self.a, self.b);
        // One loop per kind, so that each vectorises.
        fn map(d: &mut [f32], f: impl Fn(f32) -> f32 + Sync + Send) {
            par::chunks_mut(d, 16384, |_, c| simd::wide(|| c.iter_mut().for_each(|x| *x = f(*x))));
        }
        let d: &mut [f32] = &mut m.data;
        match self.kind {
            // Not widened: for AVX2 the compiler turns "keep x unless
            // negative" into masked stores, several times slower.
            ActKind::Relu => par::chunks_mut(d, 16384, |_, c| {
                c.iter_mut().for_each(|x| *x = if *x < 0.0 { *x * a } else { *x })
            }),
            ActKind::Sigmoid => map(d, |x| 1.0 / (1.0 + (-x).exp())),
            ActKind::Tanh => map(d, |x| x.tanh()),
            ActKind::Swish => map(d, |x| x / (1.0 + (-x).exp())),
            ActKind::HardSigmoid => map(d, |x| (x * a + b).clamp(0.0, 1.0)),
            ActKind::HardSwish => map(d, |x| x * (x * a + b).clamp(0.0, 1.0)),
            ActKind::Clip => map(d, |x| x.max(a).min(b)),
        }
        Ok(vec![m])
    }
}
