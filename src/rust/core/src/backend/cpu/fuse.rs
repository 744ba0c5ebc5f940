//! Nodes the CPU backend computes as one. ggml's `conv_2d` is three nodes:
//! im2col (the unfolded patches, nine values per input value for a 3x3
//! kernel), its product with the flattened kernel, and the copy that puts
//! the channels in place. When nothing else reads the patches (no later node
//! of the graph, and they are not flagged as an output), the nodes run as
//! one blocked convolution (`conv_gemm`) that never stores the patches (nor
//! the product, when the copy is fused too under the same condition): same
//! values, without writing and reading back the patches.

use super::access::{end, overlap};
use crate::backend::Node;
use crate::base::dtype::DType;
use crate::layout::Layout;
use crate::op::conv::Conv;
use crate::op::Op;
use crate::tensor::{DataRef, Tensor};

/// If `nodes[i..]` start with a convolution's im2col and product (and the
/// copy that puts the channels in place) that may run as one convolution,
/// that node and the number of nodes it stands for. Forms: ggml's conv_2d
/// (copy of the product seen as [OW, OH, OC, N]); the ONNX import's (copy of
/// it seen as [OW OH, OC, N]; for one image, the product alone).
// BOUNDS-FN: n0 and n1 are read only once each is checked to have exactly two
// sources, n2 once it has one (the filter); ne is a Dims and nb4() a
// [usize; 4], indexed by literals below 4.
pub fn conv_2d(nodes: &[Node], i: usize) -> Option<(Node, usize)> {
    let [n0, n1] = nodes.get(i..i + 2)? else { return None };
    let Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d: true } = n0.op else { return None };
    if !matches!(n1.op, Op::MulMat) || n0.srcs.len() != 2 || n1.srcs.len() != 2 {
        return None;
    }
    let (kern, x, cols) = (&n0.srcs[0].layout, &n0.srcs[1], &n0.dst);
    let [kw, kh, ic, _] = kern.ne4();
    let [_, _, xc, nb] = x.layout.ne4();
    let [depth, ow, oh, cn] = cols.layout.ne4();
    let oc = n1.srcs[1].layout.ne[1];
    let rows = ow * oh * nb;
    let shapes = x.layout.dtype == DType::F32
        && x.layout.ne[4] == 1
        && xc == ic
        && cn == nb
        && depth == kw * kh * ic
        && f32_contig(cols, [depth, ow, oh, nb])
        && same_place(&n1.srcs[0], cols)
        && f32_contig(&n1.srcs[0], [depth, rows, 1, 1])
        && f32_contig(&n1.srcs[1], [depth, oc, 1, 1])
        && f32_contig(&n1.dst, [rows, oc, 1, 1]);
    let kept = |t: &Tensor| t.flags() & Tensor::OUTPUT != 0;
    if !shapes || kept(&n0.tensor) || read_later(nodes, i + 2, cols) {
        return None;
    }
    let k = &n1.srcs[1];
    let kernel = DataRef { buf: k.buf.clone(), offset: k.offset, layout: Layout::contiguous(DType::F32, [kw, kh, ic, oc]) };
    let node = |dst: &DataRef, tensor: &std::sync::Arc<Tensor>| Node {
        op: Op::Conv(Conv::Direct2d { s0, s1, p0, p1, d0, d1 }),
        srcs: vec![kernel.clone(), x.clone()],
        dst: DataRef { buf: dst.buf.clone(), offset: dst.offset, layout: Layout::contiguous(DType::F32, [ow, oh, oc, nb]) },
        tensor: tensor.clone(),
    };
    // The copy: its source is the product with image and channel swapped.
    let (pix, es) = (ow * oh, 4);
    if let Some(n2) = nodes.get(i + 2).filter(|n2| n2.srcs.len() == 1) {
        let v = &n2.srcs[0].layout;
        let swapped = (v.ne == [ow, oh, oc, nb, 1] && v.nb4() == [es, es * ow, es * rows, es * pix])
            || (v.ne == [pix, oc, nb, 1, 1] && v.nb4()[..3] == [es, es * rows, es * pix]);
        if matches!(n2.op, Op::Cont)
            && same_place(&n2.srcs[0], &n1.dst)
            && swapped
            && n2.dst.layout.dtype == DType::F32
            && n2.dst.layout.is_contiguous()
            && n2.dst.layout.nelements() == rows * oc
            && !kept(&n1.tensor)
            && !read_later(nodes, i + 3, &n1.dst)
        {
            return Some((node(&n2.dst, &n2.tensor), 3));
        }
    }
    // One image: the product is the convolution's result as it stands.
    (nb == 1).then(|| (node(&n1.dst, &n1.tensor), 2))
}

/// Whether `r` is a contiguous f32 tensor of sizes `ne`.
// BOUNDS-FN: ne is a [usize; 4] indexed by literals.
fn f32_contig(r: &DataRef, ne: [usize; 4]) -> bool {
    r.layout.dtype == DType::F32 && r.layout.is_contiguous() && r.layout.ne == [ne[0], ne[1], ne[2], ne[3], 1]
}

/// Whether `a` and `b` start at the same byte of the same buffer.
fn same_place(a: &DataRef, b: &DataRef) -> bool {
    a.buf.id() == b.buf.id() && a.offset == b.offset
}

/// Whether `a` (contiguous) holds every byte of `b`.
fn covers(a: &DataRef, b: &DataRef) -> bool {
    a.buf.id() == b.buf.id() && a.layout.is_contiguous() && a.offset <= b.offset && end(b) <= end(a)
}

/// Whether a node from `from` on reads `r`'s bytes before a node overwrites them.
fn read_later(nodes: &[Node], from: usize, r: &DataRef) -> bool {
    for n in nodes.iter().skip(from) {
        if n.srcs.iter().any(|s| overlap(s, r)) {
            return true;
        }
        if covers(&n.dst, r) {
            return false;
        }
    }
    false
}
