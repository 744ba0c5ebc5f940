//! Gated linear units (ggml's GLU ops): `act(x) * g`, where x and g are the
//! two halves of each row of one tensor, or two tensors of one shape (the
//! split forms), and the gradient of SiLU.

use super::rules::{float, sh, src, Out};
use crate::base::float::Float;
use crate::layout::Layout;
use anyhow::{bail, ensure};

/// The activation of a GLU, numbered as ggml's `GGML_GLU_OP_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GluKind {
    Reglu,
    Geglu,
    Swiglu,
    /// gpt-oss's clamped SwiGLU: x limited above by `limit`, g to
    /// [-limit, limit], `x * sigmoid(alpha x) * (g + 1)`.
    SwigluOai,
    GegluErf,
    GegluQuick,
}

impl GluKind {
    pub const ALL: [GluKind; 6] =
        [GluKind::Reglu, GluKind::Geglu, GluKind::Swiglu, GluKind::SwigluOai, GluKind::GegluErf, GluKind::GegluQuick];

    /// ggml's code (`GGML_GLU_OP_*`).
    pub fn code(self) -> u32 {
        GluKind::ALL.iter().position(|&k| k == self).unwrap_or(0) as u32
    }

    pub fn from_code(c: i64) -> crate::Result<GluKind> {
        match usize::try_from(c).ok().and_then(|i| GluKind::ALL.get(i)) {
            Some(k) => Ok(*k),
            None => bail!(
                "`op` must be a GLU code: GGML_GLU_OP_REGLU (0), GEGLU (1), SWIGLU (2), SWIGLU_OAI (3), \
                 GEGLU_ERF (4) or GEGLU_QUICK (5), not {c}"
            ),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GluKind::Reglu => "reglu",
            GluKind::Geglu => "geglu",
            GluKind::Swiglu => "swiglu",
            GluKind::SwigluOai => "swiglu_oai",
            GluKind::GegluErf => "geglu_erf",
            GluKind::GegluQuick => "geglu_quick",
        }
    }
}

/// A GLU. srcs [a] (halves of each row; `swapped` gates with the first
/// half) or [x, g] (the split form; `swapped` is ignored).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Glu {
    pub kind: GluKind,
    pub swapped: bool,
    /// SwigluOai only: the sigmoid's slope and the clamp.
    pub alpha: f32,
    pub limit: f32,
}

impl Glu {
    // BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4;
    // sources through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let a = src(s, 0)?;
        float(a, "a")?;
        match s.get(1) {
            None => {
                ensure!(
                    a.ne[0] % 2 == 0,
                    "{}: the rows of a ({}) must have an even length, to split into values and gates",
                    self.kind.name(),
                    sh(a)
                );
                let mut ne = a.ne4();
                ne[0] /= 2;
                Ok(Out { dtype: a.dtype, ne })
            }
            Some(b) => {
                float(b, "b")?;
                ensure!(
                    a.ne == b.ne,
                    "{}_split: a ({}) and the gates b ({}) must have the same shape",
                    self.kind.name(),
                    sh(a),
                    sh(b)
                );
                Ok(Out { dtype: a.dtype, ne: a.ne4() })
            }
        }
    }
}

/// dSiLU: `dy * s(x) * (1 + x (1 - s(x)))` with s the sigmoid.
#[inline(always)]
pub fn silu_back<F: Float>(dy: F, x: F) -> F {
    let s = F::ONE / (F::ONE + (-x).exp());
    dy * s * (F::ONE + x * (F::ONE - s))
}

/// srcs [dy, x] of one shape.
pub fn infer_silu_back(s: &[Layout]) -> crate::Result<Out> {
    let (dy, x) = (src(s, 0)?, src(s, 1)?);
    float(dy, "the gradient a")?;
    float(x, "the input b")?;
    ensure!(
        dy.ne == x.ne,
        "silu_back: the gradient ({}) and the input ({}) must have the same shape",
        sh(dy),
        sh(x)
    );
    Ok(Out { dtype: dy.dtype, ne: dy.ne4() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glu_shapes_and_codes() {
        let g = Glu { kind: GluKind::Geglu, swapped: false, alpha: 1.702, limit: 7.0 };
        let l = Layout::contiguous(crate::base::dtype::DType::F32, [6, 2, 1, 1]);
        assert_eq!(g.infer(&[l]).unwrap().ne, [3, 2, 1, 1]);
        let odd = Layout::contiguous(crate::base::dtype::DType::F32, [5, 2, 1, 1]);
        assert!(g.infer(&[odd]).unwrap_err().to_string().contains("even"));
        assert!(g.infer(&[l, odd]).unwrap_err().to_string().contains("same shape"));
        assert_eq!(GluKind::from_code(5).unwrap(), GluKind::GegluQuick);
        assert_eq!(GluKind::SwigluOai.code(), 3);
        assert!(GluKind::from_code(6).is_err());
        // dSiLU by a central difference
        let silu = |x: f64| x / (1.0 + (-x).exp());
        let (x, h) = (0.7f64, 1e-6);
        assert!((silu_back(1.0, x) - (silu(x + h) - silu(x - h)) / (2.0 * h)).abs() < 1e-8);
    }
}
