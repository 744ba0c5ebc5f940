//! Direct convolutions and 1-D pooling (ggml's CONV_TRANSPOSE_1D,
//! CONV_TRANSPOSE_2D, CONV_2D_DW, CONV_2D and POOL_1D). srcs [kernel,
//! input] (pool_1d: [input]). Layouts are ggml's, width fastest:
//!
//! - transpose_1d: kernel `[K, Cout, Cin]`, input `[L, Cin, N]` ->
//!   `[(L - 1) s0 - 2 p0 + d0 (K - 1) + 1, Cout, N]`
//! - transpose_2d (padding 0): kernel `[KW, KH, Cout, Cin]`, input
//!   `[W, H, Cin, N]` -> `[(W - 1) s + KW, (H - 1) s + KH, Cout, N]`
//! - depthwise_2d: kernel `[KW, KH, 1, C]`, input `[W, H, C, N]` -> `[OW, OH, C, N]`
//! - direct_2d: kernel `[KW, KH, Cin, Cout]`, input `[W, H, Cin, N]` -> `[OW, OH, Cout, N]`
//!
//! with `OW = (W + 2 p0 - d0 (KW - 1) - 1) / s0 + 1`.

use super::rules::{f32_or_f64, float, out_size, sh, src, Out};
use crate::layout::Layout;
use anyhow::ensure;

/// Pooling kind of `pool_1d` and `pool_2d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolOp {
    Max,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Conv {
    Transpose1d { s0: i32, p0: i32, d0: i32 },
    Transpose2d { stride: i32 },
    Depthwise2d { s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32 },
    Direct2d { s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32 },
    /// Windows along the first dimension; padded positions are skipped, the
    /// average divides by the full window.
    Pool1d { op: PoolOp, k0: i32, s0: i32, p0: i32 },
}

impl Conv {
    pub fn name(&self) -> &'static str {
        match self {
            Conv::Transpose1d { .. } => "CONV_TRANSPOSE_1D",
            Conv::Transpose2d { .. } => "CONV_TRANSPOSE_2D",
            Conv::Depthwise2d { .. } => "CONV_2D_DW",
            Conv::Direct2d { .. } => "CONV_2D",
            Conv::Pool1d { .. } => "POOL_1D",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            Conv::Pool1d { .. } => (1, 1),
            _ => (2, 2),
        }
    }

    // BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4;
    // sources through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let k = src(s, 0)?;
        float(k, if matches!(self, Conv::Pool1d { .. }) { "a" } else { "the kernel a" })?;
        let dtype = f32_or_f64(s.iter().collect::<Vec<_>>().as_slice());
        match *self {
            Conv::Pool1d { k0, s0, p0, .. } => {
                ensure!(k0 > 0 && s0 > 0 && p0 >= 0, "pool_1d: k0 and s0 must be positive and p0 >= 0 (got {k0}, {s0}, {p0})");
                ensure!(
                    p0 < k0,
                    "pool_1d: the padding ({p0}) must be smaller than the window ({k0}), or windows would hold no values"
                );
                let ow = out_size("pool_1d", k.ne[0], k0 as usize, s0, p0 as i64, 1)?;
                Ok(Out { dtype, ne: [ow, k.ne[1], k.ne[2], k.ne[3]] })
            }
            Conv::Transpose1d { s0, p0, d0 } => {
                let b = src(s, 1)?;
                float(b, "the input b")?;
                ensure!(s0 > 0 && d0 > 0 && p0 >= 0, "conv_transpose_1d: stride and dilation must be positive and padding >= 0");
                ensure!(
                    k.ne[2] == b.ne[1] && k.ne[3] == 1 && b.ne[3] == 1,
                    "conv_transpose_1d: the kernel ({}, [K, Cout, Cin]) and the input ({}, [L, Cin, N]) need the \
                     same number of input channels",
                    sh(k),
                    sh(b)
                );
                let full = (b.ne[0] as i64 - 1) * s0 as i64 + d0 as i64 * (k.ne[0] as i64 - 1) + 1;
                let n = full - 2 * p0 as i64;
                ensure!(n > 0, "conv_transpose_1d: the padding {p0} leaves no output of {full} values");
                Ok(Out { dtype, ne: [n as usize, k.ne[1], b.ne[2], 1] })
            }
            Conv::Transpose2d { stride } => {
                let b = src(s, 1)?;
                float(b, "the input b")?;
                ensure!(stride > 0, "conv_transpose_2d_p0: the stride must be positive, not {stride}");
                ensure!(
                    k.ne[3] == b.ne[2],
                    "conv_transpose_2d_p0: the kernel ({}, [KW, KH, Cout, Cin]) and the input ({}, [W, H, Cin, N]) \
                     need the same number of input channels",
                    sh(k),
                    sh(b)
                );
                ensure!(
                    b.ne[0] > 0 && b.ne[1] > 0,
                    "conv_transpose_2d_p0: the input ({}) needs a width and a height of at least 1",
                    sh(b)
                );
                let st = stride as usize;
                let side = |n: usize, kn: usize| (n - 1).checked_mul(st).and_then(|v| v.checked_add(kn));
                let (Some(w), Some(h)) = (side(b.ne[0], k.ne[0]), side(b.ne[1], k.ne[1])) else {
                    anyhow::bail!("conv_transpose_2d_p0: the output of input {} at stride {stride} is too large", sh(b));
                };
                Ok(Out { dtype, ne: [w, h, k.ne[2], b.ne[3]] })
            }
            Conv::Depthwise2d { s0, s1, p0, p1, d0, d1 } | Conv::Direct2d { s0, s1, p0, p1, d0, d1 } => {
                let b = src(s, 1)?;
                float(b, "the input b")?;
                let dw = matches!(self, Conv::Depthwise2d { .. });
                let what = if dw { "conv_2d_dw" } else { "conv_2d_direct" };
                ensure!(p0 >= 0 && p1 >= 0, "{what}: paddings must be >= 0 (got {p0}, {p1})");
                if dw {
                    ensure!(
                        k.ne[2] == 1 && k.ne[3] == b.ne[2],
                        "conv_2d_dw: the kernel ({}) must be [KW, KH, 1, C] with C the input's channels ({})",
                        sh(k),
                        sh(b)
                    );
                } else {
                    ensure!(
                        k.ne[2] == b.ne[2],
                        "conv_2d_direct: the kernel ({}, [KW, KH, Cin, Cout]) and the input ({}, [W, H, Cin, N]) \
                         need the same number of input channels",
                        sh(k),
                        sh(b)
                    );
                }
                let ow = out_size(what, b.ne[0], k.ne[0], s0, p0 as i64, d0)?;
                let oh = out_size(what, b.ne[1], k.ne[1], s1, p1 as i64, d1)?;
                let c = if dw { b.ne[2] } else { k.ne[3] };
                Ok(Out { dtype, ne: [ow, oh, c, b.ne[3]] })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn conv_shapes() {
        let l = |ne| Layout::contiguous(DType::F32, ne);
        let t1 = Conv::Transpose1d { s0: 2, p0: 0, d0: 1 };
        assert_eq!(t1.infer(&[l([2, 3, 2, 1]), l([3, 2, 1, 1])]).unwrap().ne, [6, 3, 1, 1]);
        let t2 = Conv::Transpose2d { stride: 3 };
        assert_eq!(t2.infer(&[l([2, 2, 3, 2]), l([3, 2, 2, 1])]).unwrap().ne, [8, 5, 3, 1]);
        let dw = Conv::Depthwise2d { s0: 2, s1: 2, p0: 1, p1: 1, d0: 1, d1: 1 };
        assert_eq!(dw.infer(&[l([3, 3, 1, 42]), l([8, 6, 42, 2])]).unwrap().ne, [4, 3, 42, 2]);
        assert!(dw.infer(&[l([3, 3, 1, 4]), l([8, 6, 42, 2])]).is_err());
        let p = Conv::Pool1d { op: PoolOp::Max, k0: 2, s0: 2, p0: 0 };
        assert_eq!(p.infer(&[l([8, 3, 1, 1])]).unwrap().ne, [4, 3, 1, 1]);
    }
}
