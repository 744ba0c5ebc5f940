//! The per-node driver of the CPU kernels.
//!
//! Each node is computed in one compute type: f64 when the result or a
//! source is an f64 tensor, else f32 (the kernels are generic over
//! [`Float`](crate::base::float::Float), one compiled copy per type). The
//! driver locks the sources' buffers for reading and gets every source in the
//! compute type (contiguous, read in place when it already is; other types
//! and strided sources are converted once; the products read strided sources
//! in place). When the result is contiguous, of the compute type and no
//! source's bytes overlap its bytes (they may share its buffer), the kernel
//! writes straight into it; otherwise into a vector that is then written in
//! the result's type and strides.

use super::access::{self, Src};
use super::matmul::GemmFloat;
use super::par::CpuPool;
use super::{attn, col2im, conv, conv_direct, elementwise, glu, index, movement, mul_mat_id, pool_argmax, reduce, rope, rows};
use crate::backend::node::{self, Node};
use crate::tensor::DataRef;
use crate::base::dtype::DType;
use crate::memory::BufferLocks;
use crate::op::rows::RowOp;
use crate::op::Op;
use anyhow::ensure;

/// Compute one node on the CPU.
// BOUNDS-FN: ne is a Dims indexed by the literal 4; srcs[0] is read after
// `enough_srcs` checked that the node has the sources its op's rule asks (a
// copy has at least one).
pub fn run(node: &Node, pool: &CpuPool) -> crate::Result<()> {
    enough_srcs(&node.op, node.srcs.len())?;
    // A fifth dimension: the kernels compute one slice of it at a time
    // (copies and the total sum walk all five dimensions themselves).
    let five = node.dst.layout.ne[4] > 1 || node.srcs.iter().any(|s| s.layout.ne[4] > 1);
    if five && !matches!(node.op, Op::Dup | Op::Cont | Op::Cpy | Op::Sum) {
        let srcs: Vec<_> = node.srcs.iter().map(|s| s.layout).collect();
        ensure!(
            node::sliceable(&node.op, &srcs, &node.dst.layout),
            "{}: {} does not compute tensors of five dimensions",
            node.tensor.describe(),
            node.op.name()
        );
        return node::slices(node).iter().try_for_each(|n| run(n, pool));
    }
    if node.op.is_in_place() {
        return super::optstep::run(node, pool);
    }
    // Products and row lookups of quantized weights have kernels of their own.
    if let Some(done) = super::quantized::run(node, pool) {
        return done;
    }
    let dst = &node.dst;
    // Same-type copies move bytes, so i32 and f16 values stay exact.
    if matches!(node.op, Op::Dup | Op::Cont | Op::Cpy) && node.srcs[0].layout.dtype == dst.layout.dtype {
        if super::movement::copy_direct(&node.srcs[0], dst, pool)? {
            return Ok(());
        }
        let bytes = {
            let g = node.srcs[0].buf.read("the source")?;
            access::gather_bytes(&g, &node.srcs[0])?
        };
        let mut g = dst.buf.write("the result")?;
        return access::scatter_bytes(&mut g, dst, &bytes);
    }
    let wide = dst.layout.dtype == DType::F64
        || node.srcs.iter().any(|s| s.layout.dtype == DType::F64)
        || exact_counts(&node.op);
    if wide {
        run_as::<f64>(node, pool)
    } else {
        run_as::<f32>(node, pool)
    }
}

/// An internal error unless `n` sources are at least the number the rule of
/// `op` takes (op/shape.rs, `arity`): the kernels index them. `cpy` and
/// `repeat` have two, of which they read one.
fn enough_srcs(op: &Op, n: usize) -> crate::Result<()> {
    let lo = crate::op::shape::arity(op).0;
    ensure!(n >= lo, "internal: {} has {n} source tensor(s), its rule takes at least {lo}", op.name());
    Ok(())
}

/// Ops whose integer results must be exact beyond f32's 2^24: computed in f64.
fn exact_counts(op: &Op) -> bool {
    matches!(op, Op::Rows(RowOp::CountEqual))
}

/// Whether source `i` of `op` may be read with its own strides.
fn strided_operand(op: &Op, i: usize) -> bool {
    match op {
        Op::MulMat | Op::OutProd | Op::Linear { .. } => i < 2,
        Op::SumRows | Op::Mean => true,
        _ => false,
    }
}

// BOUNDS-FN: `run` checked the sources (`enough_srcs`): cpy and repeat have two.
fn run_as<T: GemmFloat>(node: &Node, pool: &CpuPool) -> crate::Result<()> {
    let dst = &node.dst;
    // `cpy` reads its first source only: the second is the destination;
    // `repeat` takes only the sizes of its second (they are the result's).
    let reads = if matches!(node.op, Op::Cpy | Op::Repeat) { &node.srcs[..1] } else { &node.srcs[..] };
    let direct = dst.layout.dtype == T::DTYPE && dst.layout.is_contiguous() && !reads.iter().any(|s| access::overlap(s, dst));
    if direct {
        if reads.iter().any(|s| s.buf.id() == dst.buf.id()) {
            if shared_buffer::<T>(node, reads, pool)? {
                return Ok(());
            }
        } else {
            let locks = BufferLocks::read(reads.iter().map(|s| s.buf.as_ref()))?;
            let spans = reads.iter().map(|s| Ok((access::host(locks.mem(&s.buf)?, s)?, s.offset))).collect::<crate::Result<Vec<_>>>()?;
            let mut g = dst.buf.write("the result")?;
            if let Some(out) = access::dst_slice::<T>(&mut g, dst)? {
                return compute(node, reads, &spans, out, pool);
            }
        }
    }
    // The result overlaps a source (or is strided, of another type or
    // misaligned): computed aside, then written.
    let out = {
        let locks = BufferLocks::read(reads.iter().map(|s| s.buf.as_ref()))?;
        let spans = reads.iter().map(|s| Ok((access::host(locks.mem(&s.buf)?, s)?, s.offset))).collect::<crate::Result<Vec<_>>>()?;
        let mut out = access::alloc::<T>(dst.layout.nelements())?;
        compute(node, reads, &spans, &mut out, pool)?;
        out
    };
    let mut g = dst.buf.write("the result")?;
    access::scatter(&mut g, dst, &out)
}

/// Computes the node straight into its result when some sources live in
/// the result's buffer but none of their bytes overlap the result's (a
/// graph allocator's buffer, views of one tensor): the result's bytes and
/// those sources' are disjoint slices of the one locked buffer. False
/// (nothing done) when the result is not aligned for `T`.
fn shared_buffer<T: GemmFloat>(node: &Node, reads: &[DataRef], pool: &CpuPool) -> crate::Result<bool> {
    let dst = &node.dst;
    let same = |s: &DataRef| s.buf.id() == dst.buf.id();
    let others = BufferLocks::read(reads.iter().filter(|s| !same(s)).map(|s| s.buf.as_ref()))?;
    let mut w = dst.buf.write("the result")?;
    let bytes = access::host_mut(&mut w, dst)?;
    let len = bytes.len();
    let base = bytes.as_mut_ptr();
    // SAFETY: the result's span lies in `bytes` (checked by `host_mut`),
    // and `bytes` stays borrowed (through `w`) for the whole function.
    let out = unsafe { std::slice::from_raw_parts_mut(base.add(dst.offset), dst.layout.span_bytes()) };
    let Some(out) = access::span_slice::<T>(out) else { return Ok(false) };
    let mut spans = Vec::with_capacity(reads.len());
    for s in reads {
        spans.push(if same(s) {
            let span = s.layout.span_bytes();
            ensure!(s.offset.checked_add(span).is_some_and(|e| e <= len), "a source (offset {}, {span} bytes) lies outside {}", s.offset, s.buf.describe());
            // SAFETY: the source's span lies in `bytes` (checked here) and
            // does not overlap the result's (the caller's `overlap` test),
            // so this shared slice never aliases `out`; sources may overlap
            // each other, all of them only read.
            (unsafe { std::slice::from_raw_parts(base.add(s.offset) as *const u8, span) }, 0)
        } else {
            (access::host(others.mem(&s.buf)?, s)?, s.offset)
        });
    }
    compute(node, reads, &spans, out, pool)?;
    Ok(true)
}

/// Gets the sources `reads`, each at byte `spans[i].1` of the bytes
/// `spans[i].0`, in the compute type, and computes the node into `out`.
// BOUNDS-FN: srcs gets one source per read; srcs[0] is read with reads[1].
fn compute<T: GemmFloat>(node: &Node, reads: &[DataRef], spans: &[(&[u8], usize)], out: &mut [T], pool: &CpuPool) -> crate::Result<()> {
    let mut srcs: Vec<Src<'_, T>> = Vec::with_capacity(reads.len());
    for (i, (s, &(b, off))) in reads.iter().zip(spans).enumerate() {
        srcs.push(if strided_operand(&node.op, i) { access::gather_strided_in(b, off, &s.layout)? } else { access::gather_in(b, off, &s.layout)? });
    }
    let ne = node.dst.layout.ne4();
    match (&node.op, reads.get(1), spans.get(1)) {
        // Row indices are read in f64, where every i32 is exact (in f32 an
        // index above 2^24 would round to another row).
        (Op::GetRows, Some(ix), Some(&(b, off))) => {
            let ix = access::gather_in::<f64>(b, off, &ix.layout)?;
            movement::get_rows(&srcs[0], &ix, out, ne)
        }
        _ => kernel(&node.op, &srcs, out, ne, pool),
    }
}

/// Computes `op` on `s` into `out` (every element written) of sizes `ne`.
// BOUNDS-FN: s holds at least the sources the op's rule takes (checked first;
// cpy and repeat pass the one they read), and each arm reads below that
// number; s[1].d[0] of add1: its rule (op/shape.rs) gives b exactly one
// element, gathered contiguous.
pub(super) fn kernel<T: GemmFloat>(op: &Op, s: &[Src<'_, T>], out: &mut [T], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    let reads_one = matches!(op, Op::Cpy | Op::Repeat) && !s.is_empty();
    if !reads_one {
        enough_srcs(op, s.len())?;
    }
    match op {
        Op::None | Op::Reshape | Op::View | Op::Transpose | Op::Permute { .. } => {
            anyhow::bail!("internal: {} has no kernel", op.name())
        }
        Op::AdamStep { .. } | Op::SgdStep { .. } => anyhow::bail!("internal: {} runs in place", op.name()),
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
            let k = T::from_f64(*k);
            elementwise::map(&s[0], out, pool, move |x| x * k)
        }
        Op::Unary(u) => elementwise::unary(*u, &s[0], out, pool),
        Op::LeakyRelu { slope } => {
            let k = T::from_f32(*slope);
            elementwise::map(&s[0], out, pool, move |x| if x > T::ZERO { x } else { k * x })
        }
        Op::Clamp { min, max } => {
            let (lo, hi) = (T::from_f64(*min), T::from_f64(*max));
            elementwise::map(&s[0], out, pool, move |x| x.max(lo).min(hi))
        }
        Op::MulMat => T::mul_mat(&s[0], &s[1], out, pool),
        Op::OutProd => T::out_prod(&s[0], &s[1], out, pool),
        Op::Linear { act } => T::linear(&s[0], &s[1], &s[2].d, *act, out, pool),
        Op::Sum => reduce::sum(&s[0], out, pool),
        Op::SumRows => reduce::sum_rows(&s[0], out, false, pool),
        Op::Mean => reduce::sum_rows(&s[0], out, true, pool),
        Op::Argmax => reduce::argmax(&s[0], out),
        Op::SoftMax { scale, max_bias } => reduce::soft_max(&s[0], s.get(1), *scale, *max_bias, out, pool),
        Op::UnaryBack { u } => elementwise::unary_back(*u, &s[0], &s[1], out, pool),
        Op::CrossEntropyLoss => reduce::cross_entropy(&s[0], &s[1], out),
        Op::CrossEntropyLossBack => reduce::cross_entropy_back(&s[0], &s[1], &s[2], out, pool),
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
        Op::Im2ColBack { s0, s1, p0, p1, d0, d1, kw, kh, .. } => {
            col2im::im2col_back(&s[0], [*s0, *s1, *p0, *p1, *d0, *d1, *kw, *kh], out, ne, pool)
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
        | Op::PadEx { .. } => T::extended(op, s, out, ne, pool)?,
        Op::Glu(g) => match s.get(1) {
            Some(b) => elementwise::zip(&s[0], b, out, pool, |x, y| glu::apply(g, x, y)),
            None => glu::glu_halves(g, &s[0], out, pool),
        },
        Op::SiluBack => elementwise::zip(&s[0], &s[1], out, pool, crate::op::glu::silu_back),
        Op::Rope(r) => rope::rope(r, &s[0], &s[1], s.get(2), out, pool),
        Op::Attn(crate::op::attn::Attn::FlashExt { scale, max_bias, softcap }) => {
            attn::flash_attn_ext(&s[0], &s[1], &s[2], s.get(3), *scale, *max_bias, *softcap, out, pool)
        }
        Op::Attn(crate::op::attn::Attn::FlashBack { masked }) => {
            attn::flash_attn_back(&s[0], &s[1], &s[2], &s[3], *masked, out)?
        }
        Op::Conv(c) => conv_direct::run(c, s, out, ne, pool)?,
        Op::Rows(r) => rows::run(r, s, out, pool),
        Op::Index(i) => index::run(i, s, out, ne, pool)?,
        Op::MaxPool(m) => pool_argmax::run(m, s, out, pool),
        Op::Recurrent(r) => super::lstm::run(r, s, out, pool)?,
        Op::ConvAct { conv, act } => super::conv_act::run(conv, *act, s, out, ne, pool)?,
        Op::ConvCl(c) => super::conv_cl::run(c, s, out, ne, pool)?,
        Op::MulMatId => mul_mat_id::mul_mat_id(&s[0], &s[1], &s[2], out, ne, pool)?,
    }
    Ok(())
}
