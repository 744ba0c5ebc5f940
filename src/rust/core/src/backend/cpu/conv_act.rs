//! A convolution, its bias and its activation as one node
//! ([`Op::ConvAct`](crate::op::Op::ConvAct)): the convolution writes the
//! result, then one pass over each channel's plane, while it is still in
//! the cache, adds the bias and applies the activation (instead of a node
//! each, every one reading and writing the whole result).

use super::access::Src;
use super::matmul::GemmFloat;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::conv::Conv;
use crate::op::UnaryOp;

/// Computes the node on srcs [kernel, input] or [kernel, input, bias] into
/// `out` of sizes `ne` (`[OW, OH, OC, N]`).
// BOUNDS-FN: the shape rule gave 2 or 3 sources and a bias of ne[2] values;
// ne is a [usize; 4]; channel (r0 + k) % oc < oc.
pub fn run<T: GemmFloat>(conv: &Conv, act: Option<UnaryOp>, s: &[Src<'_, T>], out: &mut [T], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    super::conv_direct::run(conv, s.get(..2).unwrap_or(s), out, ne, pool)?;
    let bias = s.get(2).map(|b| &b.d[..]);
    let (plane, oc) = (ne[0] * ne[1], ne[2].max(1));
    if plane == 0 || (bias.is_none() && act.is_none()) {
        return Ok(());
    }
    crate::base::simd::wide(|| {
        par_rows(pool, out, plane, |r0, chunk| {
            for (k, row) in chunk.chunks_mut(plane).enumerate() {
                let b = bias.map_or(T::ZERO, |b| b[(r0 + k) % oc]);
                finish(act, b, row);
            }
        })
    });
    Ok(())
}

/// `act(v + b)` for every value of `row`, one loop per common activation.
fn finish<T: Float>(act: Option<UnaryOp>, b: T, row: &mut [T]) {
    match act {
        None => row.iter_mut().for_each(|v| *v = *v + b),
        Some(UnaryOp::Relu) => row.iter_mut().for_each(|v| *v = (*v + b).max(T::ZERO)),
        Some(UnaryOp::Sigmoid) => row.iter_mut().for_each(|v| *v = UnaryOp::Sigmoid.apply(*v + b)),
        Some(UnaryOp::Tanh) => row.iter_mut().for_each(|v| *v = UnaryOp::Tanh.apply(*v + b)),
        Some(u) => row.iter_mut().for_each(|v| *v = u.apply(*v + b)),
    }
}
