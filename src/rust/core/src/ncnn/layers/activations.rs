//! Elementwise activations: ReLU, Sigmoid, TanH, Swish, HardSigmoid, HardSwish, Clip.

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn::par;

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
        let (kind, a, b) = (self.kind, self.a, self.b);
        let f = move |x: f32| -> f32 {
            match kind {
                ActKind::Relu => {
                    if x < 0.0 {
                        x * a
                    } else {
                        x
                    }
                }
                ActKind::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                ActKind::Tanh => x.tanh(),
                ActKind::Swish => x / (1.0 + (-x).exp()),
                ActKind::HardSigmoid => (x * a + b).clamp(0.0, 1.0),
                ActKind::HardSwish => x * (x * a + b).clamp(0.0, 1.0),
                ActKind::Clip => x.max(a).min(b),
            }
        };
        par::chunks_mut(&mut m.data, 4096, |_, c| c.iter_mut().for_each(|x| *x = f(*x)));
        Ok(vec![m])
    }
}
