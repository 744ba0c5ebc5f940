//! Whole recurrent layers as one node (CPU backend only; elsewhere graph
//! builders unroll the sequence into per-step products and gates).
//!
//! [`RecurrentOp::Lstm`]: srcs [xw `[4h, T]`, rt `[h, 4h]`, h0 `[h]`, c0 `[h]`]
//! -> `[h, T + 2]`. `xw` holds each step's input projection with both
//! biases added, gates in ONNX order (input, output, forget, cell); `rt`
//! the recurrent weights by columns within each gate: value `i` of column
//! `q h + k` is the weight of hidden value `k` in value `i` of gate `q`. Column `t`
//! of the result is the hidden state after step `t`, the last two columns
//! the final hidden and cell states. With `reverse` the steps run from
//! `T - 1` down to 0 (column `t` is still step `t`'s state).

use super::rules::{f32_or_f64, float, sh, src, Out};
use crate::layout::Layout;
use anyhow::ensure;

/// A whole recurrent layer; `A` is the type of its activations (the op
/// set's `UnaryOp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecurrentOp<A> {
    /// An LSTM layer over one sequence: `acts` are the gate activation
    /// (input, output, forget), the cell candidate's and the output's.
    Lstm { acts: [A; 3], reverse: bool },
}

impl<A> RecurrentOp<A> {
    pub fn name(&self) -> &'static str {
        match self {
            RecurrentOp::Lstm { .. } => "LSTM",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            RecurrentOp::Lstm { .. } => (4, 4),
        }
    }

    // BOUNDS-FN: ne is a Dims ([usize; 5]) indexed by the literals 0 and 1; sources
    // through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let (xw, r, h0, c0) = (src(s, 0)?, src(s, 1)?, src(s, 2)?, src(s, 3)?);
        for (l, what) in [(xw, "the input projection"), (r, "the recurrent weights"), (h0, "the initial hidden state"), (c0, "the initial cell state")] {
            float(l, what)?;
        }
        let h = r.ne[0];
        ensure!(
            h > 0 && r.ne[1] == 4 * h && r.nelements() == 4 * h * h,
            "LSTM: the recurrent weights ({}) must be [h, 4h]",
            sh(r)
        );
        ensure!(
            xw.ne[0] == 4 * h && xw.nelements() == xw.ne[0] * xw.ne[1],
            "LSTM: the input projection ({}) must be [4h, steps] with h = {h}",
            sh(xw)
        );
        ensure!(
            h0.nelements() == h && c0.nelements() == h,
            "LSTM: the initial states ({} and {}) must hold h = {h} values",
            sh(h0),
            sh(c0)
        );
        Ok(Out { dtype: f32_or_f64(&[xw, r, h0, c0]), ne: [h, xw.ne[1] + 2, 1, 1] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn shapes_and_errors() {
        let op = RecurrentOp::Lstm { acts: [(); 3], reverse: false };
        let l = |ne: [usize; 4]| Layout::contiguous(DType::F32, ne);
        let ok = [l([12, 5, 1, 1]), l([3, 12, 1, 1]), l([3, 1, 1, 1]), l([3, 1, 1, 1])];
        assert_eq!(op.infer(&ok).unwrap().ne, [3, 7, 1, 1]);
        let bad_r = [l([12, 5, 1, 1]), l([3, 11, 1, 1]), l([3, 1, 1, 1]), l([3, 1, 1, 1])];
        assert!(op.infer(&bad_r).unwrap_err().to_string().contains("[h, 4h]"));
        let bad_x = [l([10, 5, 1, 1]), l([3, 12, 1, 1]), l([3, 1, 1, 1]), l([3, 1, 1, 1])];
        assert!(op.infer(&bad_x).unwrap_err().to_string().contains("input projection"));
        let bad_h = [l([12, 5, 1, 1]), l([3, 12, 1, 1]), l([4, 1, 1, 1]), l([3, 1, 1, 1])];
        assert!(op.infer(&bad_h).unwrap_err().to_string().contains("initial states"));
        assert!(op.infer(&ok[..3]).is_err());
    }
}
