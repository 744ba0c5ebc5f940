//! Gated linear units: `act(x) * g` over the halves of each row.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::glu::{Glu, GluKind};
use crate::op::UnaryOp;

/// `act(x) * g` of the GLU `g` in the compute type.
#[inline(always)]
pub fn apply<F: Float>(glu: &Glu, x: F, g: F) -> F {
    let act = match glu.kind {
        GluKind::Reglu => UnaryOp::Relu,
        GluKind::Geglu => UnaryOp::Gelu,
        GluKind::Swiglu => UnaryOp::Silu,
        GluKind::GegluErf => UnaryOp::GeluErf,
        GluKind::GegluQuick => UnaryOp::GeluQuick,
        GluKind::SwigluOai => {
            // x limited above by `limit`, g to [-limit, limit]
            let lim = F::from_f32(glu.limit);
            let x = x.min(lim);
            let g = g.clamp(-lim, lim);
            return x / (F::ONE + (-F::from_f32(glu.alpha) * x).exp()) * (g + F::ONE);
        }
    };
    act.apply(x) * g
}

/// The one-tensor form: x and g are the halves of each row of `a`.
// BOUNDS-FN: `Glu::infer` (op/glu.rs) shaped the node: a (contiguous, as the
// driver gathers it) has rows of 2n, out the same rows of n; par_rows hands
// out whole rows of out from row r0, so row r0 + k exists in a, and
// xo + i, go + i < 2n for i < n.
pub fn glu_halves<T: Float>(g: &Glu, a: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    let n = a.ne[0] / 2;
    let (xo, go) = if g.swapped { (n, 0) } else { (0, n) };
    par_rows(pool, out, n, |r0, chunk| {
        for (k, row) in chunk.chunks_mut(n.max(1)).enumerate() {
            let src = &a.d[(r0 + k) * 2 * n..(r0 + k + 1) * 2 * n];
            for (i, o) in row.iter_mut().enumerate() {
                *o = apply(g, src[xo + i], src[go + i]);
            }
        }
    });
}
