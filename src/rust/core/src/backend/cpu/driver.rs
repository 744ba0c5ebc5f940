//! The per-node driver of the CPU kernels.
//!
//! For each node the driver locks the sources' buffers for reading, gets every
//! source as contiguous f32 (in place when it already is; f16/bf16/i32 and
//! strided sources are converted once), runs the kernel into a result vector,
//! and writes that into the destination in its type and strides.

use super::access::{self, Src};
use super::par::Pool;
use super::{conv, elementwise, extended, matmul, movement, reduce};
use crate::backend::Node;
use crate::memory::BufferLocks;
use crate::op::Op;
use anyhow::ensure;

/// Compute one node on the CPU.
pub fn run(node: &Node, pool: &Pool) -> crate::Result<()> {
    // Products and row lookups of quantized weights have kernels of their own.
    if let Some(done) = super::quantized::run(node, pool) {
        return done;
    }
    let dst = &node.dst;
    // Same-type copies move bytes, so i32 and f16 values stay exact.
    if matches!(node.op, Op::Dup | Op::Cont | Op::Cpy) && node.srcs[0].layout.dtype == dst.layout.dtype {
        let bytes = {
            let g = node.srcs[0].buf.read("the source")?;
            access::gather_bytes(&g, &node.srcs[0])?
        };
        let mut g = dst.buf.write("the result")?;
        return access::scatter_bytes(&mut g, dst, &bytes);
    }
    let out = {
        let locks = BufferLocks::read(node.srcs.iter().map(|s| s.buf.as_ref()))?;
        let mut srcs: Vec<Src<'_>> = Vec::with_capacity(node.srcs.len());
        for s in &node.srcs {
            srcs.push(access::gather(locks.mem(&s.buf)?, s)?);
        }
        let mut out = access::alloc_f32(dst.layout.nelements())?;
        kernel(&node.op, &srcs, &mut out, dst.layout.ne, pool)?;
        out
    };
    let mut g = dst.buf.write("the result")?;
    access::scatter(&mut g, dst, &out)
}

pub(super) fn kernel(op: &Op, s: &[Src<'_>], out: &mut [f32], ne: [usize; 4], pool: &Pool) -> crate::Result<()> {
    match op {
        Op::None | Op::Reshape | Op::View | Op::Transpose | Op::Permute { .. } => {
            anyhow::bail!("internal: {} has no kernel", op.name())
        }
        Op::Dup | Op::Cont | Op::Cpy => {
            ensure!(s[0].d.len() == out.len(), "cpy: {} values into {} elements", s[0].d.len(), out.len());
            out.copy_from_slice(&s[0].d);
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise::binary(op, &s[0], &s[1], out, pool),
        Op::Add1 => {
            let b = s[1].d[0];
            elementwise::map(&s[0], out, pool, move |x| x + b)
        }
        Op::Scale { s: k } => {
            let k = *k;
            elementwise::map(&s[0], out, pool, move |x| x * k)
        }
        Op::Unary(u) => {
            let u = *u;
            elementwise::map(&s[0], out, pool, move |x| u.apply(x))
        }
        Op::LeakyRelu { slope } => {
            let k = *slope;
            elementwise::map(&s[0], out, pool, move |x| if x > 0.0 { x } else { k * x })
        }
        Op::Clamp { min, max } => {
            let (lo, hi) = (*min, *max);
            elementwise::map(&s[0], out, pool, move |x| x.max(lo).min(hi))
        }
        Op::MulMat => matmul::mul_mat(&s[0], &s[1], out, pool),
        Op::OutProd => matmul::out_prod(&s[0], &s[1], out, pool),
        Op::Sum => reduce::sum(&s[0], out),
        Op::SumRows => reduce::sum_rows(&s[0], out, false, pool),
        Op::Mean => reduce::sum_rows(&s[0], out, true, pool),
        Op::Argmax => reduce::argmax(&s[0], out),
        Op::SoftMax { scale, max_bias } => reduce::soft_max(&s[0], s.get(1), *scale, *max_bias, out, pool),
        Op::Norm { eps } => reduce::norm(&s[0], *eps, false, out, pool),
        Op::RmsNorm { eps } => reduce::norm(&s[0], *eps, true, out, pool),
        Op::Repeat => movement::repeat(&s[0], out, ne, pool),
        Op::Concat { dim } => movement::concat(&s[0], &s[1], *dim, out, ne, pool),
        Op::GetRows => movement::get_rows(&s[0], &s[1], out, ne)?,
        Op::DiagMaskInf { n_past } => movement::diag_mask_inf(&s[0], *n_past, out, pool),
        Op::Pad { .. } => movement::pad(&s[0], out, ne, pool),
        Op::Upscale { factor } => movement::upscale(&s[0], *factor as usize, out, ne, pool),
        Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d } => {
            conv::im2col(&s[0], &s[1], [*s0, *s1, *p0, *p1, *d0, *d1], *is_2d, out, ne, pool)
        }
        Op::Pool2d { op, k0, k1, s0, s1, p0, p1 } => {
            conv::pool_2d(&s[0], *op, [*k0, *k1, *s0, *s1], [*p0, *p1], out, ne, pool)
        }
        Op::Map { .. }
        | Op::Binary { .. }
        | Op::ReduceRows { .. }
        | Op::ScanRows { .. }
        | Op::GatherAxis { .. }
        | Op::ScatterFlat { .. }
        | Op::PadEx { .. } => extended::kernel(op, s, out, ne, pool)?,
    }
    Ok(())
}
