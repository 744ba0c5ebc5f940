//! CPU kernels of quantized weights: matrix products whose first operand is
//! quantized ([`matmul`], dot products in [`dot`] compiled per CPU in
//! [`dispatch`]) and row lookups (`get_rows`) that dequantize only the rows
//! picked. Other ops read quantized sources through the generic path, which
//! dequantizes them whole (see `access`).

mod avx2;
mod avx512;
mod avx512k;
mod dispatch;
mod dot;
mod matmul;
mod prep;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod speed;



use super::access::{self, Src};
use super::movement::for_each_pick;
use super::par::CpuPool;
use crate::backend::Node;
use crate::base::quant::{self, QType};
use crate::memory::BufferLocks;
use crate::op::Op;
use crate::tensor::DataRef;
use matmul::row_bytes;

/// Computes the node when it is a product or row lookup of quantized
/// weights (None: not such a node).
pub fn run(node: &Node, pool: &CpuPool) -> Option<crate::Result<()>> {
    let q = node.srcs.first()?.layout.dtype.quant()?;
    matches!(node.op, Op::MulMat | Op::GetRows).then(|| compute(node, q, pool))
}

fn compute(node: &Node, q: QType, pool: &CpuPool) -> crate::Result<()> {
    let dst = &node.dst;
    let (Some(a), Some(b)) = (node.srcs.first(), node.srcs.get(1)) else {
        anyhow::bail!("internal: {} takes two sources, the node has {}", node.op.name(), node.srcs.len());
    };
    let out = {
        let locks = BufferLocks::read(node.srcs.iter().map(|s| s.buf.as_ref()))?;
        let bytes = access::host(locks.mem(&a.buf)?, a)?;
        let bm = locks.mem(&b.buf)?;
        let mut out = access::alloc_f32(dst.layout.nelements())?;
        match node.op {
            Op::MulMat => matmul::mul_mat(q, a, bytes, &access::gather(bm, b)?, &mut out, pool)?,
            // Row indices in f64, where every i32 is exact.
            _ => get_rows(q, a, bytes, &access::gather::<f64>(bm, b)?, &mut out, dst.layout.ne4())?,
        }
        out
    };
    let mut g = dst.buf.write("the result")?;
    access::scatter(&mut g, dst, &out)
}

/// Rows of quantized `a` picked by `idx`, dequantized.
// BOUNDS-FN: `ne` is a [usize; 4] and a's ne, nb Dims, indexed by literals. The
// GetRows rule (op/shape.rs) made out [n0, ne[1], a.ne[2], a.ne[3]] (`out`
// holds its elements): `for_each_pick` checks r < a.ne[1] and walks
// i11 < a.ne[2], i12 < a.ne[3], d = n0 (i10 + ...) so d + n0 <= out.len();
// `compute` read `bytes` through access::host, which checked a's span lies in
// them, so the row at o spans o..o + rs (rs = row_bytes) inside them.
fn get_rows(q: QType, a: &DataRef, bytes: &[u8], idx: &Src<'_, f64>, out: &mut [f32], ne: [usize; 4]) -> crate::Result<()> {
    let rs = row_bytes(q, a)?;
    let (l, n0) = (&a.layout, a.layout.ne[0]);
    for_each_pick(idx, l.ne[1], ne, |r, i11, i12, d| {
        let o = a.offset + r * l.nb[1] + i11 * l.nb[2] + i12 * l.nb[3];
        quant::dequantize_row(q, &bytes[o..o + rs], &mut out[d..d + n0])
    })
}
