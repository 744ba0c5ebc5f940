//! A convolution with its bias and activation in one node
//! ([`Op::ConvAct`](super::Op::ConvAct); CPU backend only, elsewhere graph
//! builders add the bias and apply the activation as nodes of their own):
//! srcs [kernel, input] or [kernel, input, bias `[OC]`], the convolution's
//! result `[OW, OH, OC, N]` with `bias[c]` added to channel `c`, then the
//! activation.

use super::conv::Conv;
use super::rules::{float, sh, src, Out};
use crate::layout::Layout;
use anyhow::ensure;

/// The result of `conv` with a bias over its output channels (`s[2]`, when given).
// BOUNDS-FN: Out::ne is a [usize; 4] indexed by the literal 2; sources through src().
pub fn infer(conv: &Conv, s: &[Layout]) -> crate::Result<Out> {
    ensure!(matches!(conv, Conv::Direct2d { .. } | Conv::Depthwise2d { .. }), "CONV_ACT: {} is not a 2-D convolution", conv.name());
    let out = conv.infer(s.get(..2).unwrap_or(s))?;
    if s.len() > 2 {
        let b = src(s, 2)?;
        float(b, "the bias")?;
        ensure!(b.nelements() == out.ne[2], "CONV_ACT: the bias ({}) must hold one value per output channel ({})", sh(b), out.ne[2]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn the_bias_holds_one_value_per_channel() {
        let conv = Conv::Direct2d { s0: 1, s1: 1, p0: 1, p1: 1, d0: 1, d1: 1 };
        let l = |ne: [usize; 4]| Layout::contiguous(DType::F32, ne);
        let (k, x) = (l([3, 3, 2, 4]), l([5, 6, 2, 1]));
        assert_eq!(infer(&conv, &[k, x]).unwrap().ne, [5, 6, 4, 1]);
        assert_eq!(infer(&conv, &[k, x, l([4, 1, 1, 1])]).unwrap().ne, [5, 6, 4, 1]);
        assert!(infer(&conv, &[k, x, l([3, 1, 1, 1])]).unwrap_err().to_string().contains("one value per output channel"));
        assert!(infer(&Conv::Transpose2d { stride: 2 }, &[k, x]).is_err());
    }
}
