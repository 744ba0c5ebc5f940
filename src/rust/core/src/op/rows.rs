//! Row-wise ops (ggml's L2_NORM, GROUP_NORM, RMS_NORM_BACK,
//! SOFT_MAX_BACK, ARGSORT, TOP_K, COUNT_EQUAL): each reads whole rows (or
//! groups of planes) to produce its result.

use super::rules::{f32_or_f64, float, sh, src, Out};
use crate::base::dtype::DType;
use crate::layout::Layout;
use anyhow::ensure;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowOp {
    /// srcs [a]: x / max(||x||, eps) per row.
    L2Norm { eps: f32 },
    /// srcs [a]: (x - mean) / sqrt(var + eps) over each group of
    /// ceil(ne2 / groups) planes (dimension 3) of each batch.
    GroupNorm { groups: i32, eps: f32 },
    /// srcs [dy, x]: the gradient of rms_norm(x, eps).
    RmsNormBack { eps: f32 },
    /// srcs [dy, y]: the gradient of soft_max_ext(a, scale) given its result
    /// y: scale * y * (dy - sum(y dy)) per row (the mask has no gradient).
    SoftMaxBack { scale: f32, max_bias: f32 },
    /// srcs [a] -> i32 indices that sort each row (stable).
    Argsort { desc: bool },
    /// srcs [a] -> i32 indices of the `k` largest values of each row, largest first.
    TopK { k: i32 },
    /// srcs [a, b] -> i32 [1]: the number of equal elements.
    CountEqual,
}

impl RowOp {
    pub fn name(&self) -> &'static str {
        match self {
            RowOp::L2Norm { .. } => "L2_NORM",
            RowOp::GroupNorm { .. } => "GROUP_NORM",
            RowOp::RmsNormBack { .. } => "RMS_NORM_BACK",
            RowOp::SoftMaxBack { .. } => "SOFT_MAX_BACK",
            RowOp::Argsort { .. } => "ARGSORT",
            RowOp::TopK { .. } => "TOP_K",
            RowOp::CountEqual => "COUNT_EQUAL",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            RowOp::RmsNormBack { .. } | RowOp::SoftMaxBack { .. } | RowOp::CountEqual => (2, 2),
            _ => (1, 1),
        }
    }

    // BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4;
    // sources through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let a = src(s, 0)?;
        match *self {
            RowOp::L2Norm { .. } => {
                float(a, "a")?;
                Ok(Out { dtype: a.dtype, ne: a.ne4() })
            }
            RowOp::GroupNorm { groups, .. } => {
                float(a, "a")?;
                ensure!(groups > 0, "group_norm: `n_groups` must be positive, not {groups}");
                Ok(Out { dtype: a.dtype, ne: a.ne4() })
            }
            RowOp::RmsNormBack { .. } | RowOp::SoftMaxBack { .. } => {
                let b = src(s, 1)?;
                float(a, "the gradient a")?;
                float(b, "b")?;
                ensure!(
                    a.ne == b.ne,
                    "{}: the gradient a ({}) and b ({}) must have the same shape",
                    self.name().to_lowercase(),
                    sh(a),
                    sh(b)
                );
                Ok(Out { dtype: f32_or_f64(&[a, b]), ne: a.ne4() })
            }
            RowOp::Argsort { .. } => {
                float(a, "a")?;
                Ok(Out { dtype: DType::I32, ne: a.ne4() })
            }
            RowOp::TopK { k } => {
                float(a, "a")?;
                ensure!(
                    k > 0 && k as usize <= a.ne[0],
                    "top_k: `k` must be between 1 and the row length of a ({}), not {k}",
                    sh(a)
                );
                let mut ne = a.ne4();
                ne[0] = k as usize;
                Ok(Out { dtype: DType::I32, ne })
            }
            RowOp::CountEqual => {
                let b = src(s, 1)?;
                ensure!(
                    a.ne == b.ne,
                    "count_equal: a ({}) and b ({}) must have the same shape",
                    sh(a),
                    sh(b)
                );
                Ok(Out { dtype: DType::I32, ne: [1, 1, 1, 1] })
            }
        }
    }
}

/// Planes per group of group_norm: ceil(ne2 / groups), as ggml.
pub fn group_size(ne2: usize, groups: i32) -> usize {
    ne2.div_ceil(groups.max(1) as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_shapes() {
        let l = |ne| Layout::contiguous(DType::F32, ne);
        assert_eq!(RowOp::TopK { k: 3 }.infer(&[l([6, 2, 1, 1])]).unwrap().ne, [3, 2, 1, 1]);
        assert!(RowOp::TopK { k: 7 }.infer(&[l([6, 2, 1, 1])]).is_err());
        assert_eq!(RowOp::Argsort { desc: true }.infer(&[l([6, 2, 1, 1])]).unwrap().dtype, DType::I32);
        let i = Layout::contiguous(DType::I32, [10, 1, 1, 1]);
        assert_eq!(RowOp::CountEqual.infer(&[i, i]).unwrap().ne, [1, 1, 1, 1]);
        assert_eq!(group_size(5, 2), 3);
        assert_eq!(group_size(1, 2), 1);
    }
}
