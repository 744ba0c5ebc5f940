//! A graph node as a backend sees it: the op, and for every source and the
//! result the buffer, byte offset and layout (views already resolved to their
//! base buffer, offset and strides).

use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::{DataRef, Tensor};
use std::sync::Arc;

/// One node as a backend sees it.
#[derive(Debug, Clone)]
pub struct Node {
    pub op: Op,
    pub srcs: Vec<DataRef>,
    pub dst: DataRef,
    /// The tensor computed, for messages.
    pub tensor: Arc<Tensor>,
}

/// Whether any of the layouts has a fifth dimension above 1.
// BOUNDS-FN: ne is [usize; 5], indexed by the constant 4.
pub fn is_five_d(srcs: &[Layout], dst: &Layout) -> bool {
    srcs.iter().chain(std::iter::once(dst)).any(|l| l.ne[4] > 1)
}

/// Whether a node over five dimensions can be computed as one node of four
/// dimensions per slice of the fifth: each source's fifth size divides the
/// result's (a source of size 1 there is read by every slice), and copies
/// keep the shape. `concat` along the fifth dimension copies each slice from
/// the source it comes from. The op's shape rule has already refused the ops
/// that have no meaning slice by slice.
// BOUNDS-FN: ne is [usize; 5], indexed by the constant 4; srcs 0 and 1 after srcs.len() == 2.
pub fn sliceable(op: &Op, srcs: &[Layout], dst: &Layout) -> bool {
    let n4 = dst.ne[4];
    match op {
        Op::Concat { dim: 4 } => srcs.len() == 2 && srcs[0].ne[4] + srcs[1].ne[4] == n4,
        Op::Sum => false,
        Op::Dup | Op::Cont | Op::Cpy => srcs.iter().all(|s| s.ne == dst.ne),
        _ => !op.is_view() && srcs.iter().all(|s| s.ne[4] > 0 && n4 % s.ne[4] == 0),
    }
}

/// Slice `i` of the fifth dimension of `r`, as a tensor of four dimensions.
fn slice(r: &DataRef, i: usize) -> DataRef {
    let (layout, off) = r.layout.slice4(i);
    DataRef { buf: r.buf.clone(), offset: r.offset + off, layout }
}

/// The nodes of four dimensions that compute `node` slice by slice of its
/// fifth dimension (see [`sliceable`]).
// BOUNDS-FN: both callers (the CPU driver and the Vulkan compute) pass only
// nodes `sliceable` accepted: a fifth-dimension concat has two sources, and
// every source's ne[4] is above 0 (ne is [usize; 5]).
pub fn slices(node: &Node) -> Vec<Node> {
    (0..node.dst.layout.ne[4])
        .map(|i| {
            let dst = slice(&node.dst, i);
            let (op, srcs) = match node.op {
                Op::Concat { dim: 4 } => {
                    let na = node.srcs[0].layout.ne[4];
                    let src = if i < na { slice(&node.srcs[0], i) } else { slice(&node.srcs[1], i - na) };
                    (Op::Cont, vec![src])
                }
                _ => (node.op.clone(), node.srcs.iter().map(|s| slice(s, i % s.layout.ne[4])).collect()),
            };
            Node { op, srcs, dst, tensor: node.tensor.clone() }
        })
        .collect()
}
