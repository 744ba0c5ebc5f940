//! The optimizer steps (`AdamStep`, `SgdStep`): one pass over a weight, its
//! gradient and its moments, updating the weight and the moments in place.
//! The element loop is compiled for AVX where the CPU has it (four square
//! roots and divisions per instruction in f64; the same operations, so the
//! same results), and large tensors are split over the pool's threads.

use super::access;
use super::par::CpuPool;
use crate::backend::Node;
use crate::base::dtype::DType;
use crate::base::float::Float;
use crate::memory::BufferLocks;
use crate::op::Op;
use anyhow::{bail, ensure};
use rayon::prelude::*;

/// Elements per parallel chunk of an update.
const CHUNK: usize = 1 << 14;

/// Computes an optimizer-step node (in place).
pub fn run(node: &Node, pool: &CpuPool) -> crate::Result<()> {
    match node.dst.layout.dtype {
        DType::F64 => run_as::<f64>(node, pool),
        DType::F32 => run_as::<f32>(node, pool),
        other => bail!("{}: the weight must be an f32 or f64 tensor, not {}", node.op.name(), other.name()),
    }
}

fn run_as<T: Float>(node: &Node, pool: &CpuPool) -> crate::Result<()> {
    let s = &node.srcs;
    let grad = s.get(1).ok_or_else(|| anyhow::anyhow!("internal: {} has no gradient operand", node.op.name()))?;
    // The weight (the node's memory) and its moments are written, each in
    // its own buffer; the gradient is read.
    let written: Vec<_> = std::iter::once(&node.dst).chain(s.iter().skip(2)).collect();
    for (i, a) in written.iter().enumerate() {
        ensure!(
            grad.buf.id() != a.buf.id() && written.iter().take(i).all(|b| b.buf.id() != a.buf.id()),
            "internal: {}'s weight, moments and gradient must be in separate buffers",
            node.op.name()
        );
    }
    let locks = BufferLocks::read(std::iter::once(grad.buf.as_ref()))?;
    let g = access::gather::<T>(locks.mem(&grad.buf)?, grad)?;
    let mut guards = Vec::with_capacity(written.len());
    for r in &written {
        guards.push(r.buf.write("an optimizer operand")?);
    }
    let mut slices = Vec::with_capacity(written.len());
    for (gd, r) in guards.iter_mut().zip(&written) {
        match access::dst_slice::<T>(gd, r)? {
            Some(d) => slices.push(d),
            None => bail!("internal: {}'s operands must be contiguous and of the weight's type", node.op.name()),
        }
    }
    let mut it = slices.into_iter();
    let name = node.op.name();
    let missing = |what: &str| anyhow::anyhow!("internal: {name} has no {what} operand");
    let w = it.next().ok_or_else(|| missing("weight"))?;
    match node.op {
        Op::AdamStep { beta1, beta2, eps, decay, step, inv_c2 } => {
            let (m, v) = (it.next().ok_or_else(|| missing("first moment"))?, it.next().ok_or_else(|| missing("second moment"))?);
            let p = [beta1, beta2, eps, decay, step, inv_c2].map(T::from_f64);
            split(pool, w, &g.d, m, v, |w, g, m, v| adam(w, g, m, v, p));
        }
        Op::SgdStep { lr, momentum } => {
            let (lr, mo) = (T::from_f64(lr), T::from_f64(momentum));
            match it.next() {
                Some(m) => split(pool, w, &g.d, m, &mut [], |w, g, m, _| {
                    for ((w, g), m) in w.iter_mut().zip(g).zip(m.iter_mut()) {
                        *m = mo * *m + *g;
                        *w -= lr * *m;
                    }
                }),
                None => split(pool, w, &g.d, &mut [], &mut [], |w, g, _, _| {
                    for (w, g) in w.iter_mut().zip(g) {
                        *w -= lr * *g;
                    }
                }),
            }
        }
        _ => bail!("internal: {} is not an optimizer step", node.op.name()),
    }
    Ok(())
}

/// `f` on the whole of `w`, `g`, `m`, `v` (`m`, `v` empty or of `w`'s
/// length), in chunks over the pool's threads when large.
fn split<T: Float>(pool: &CpuPool, w: &mut [T], g: &[T], m: &mut [T], v: &mut [T], f: impl Fn(&mut [T], &[T], &mut [T], &mut [T]) + Sync) {
    if w.len() < 4 * CHUNK || pool.n_threads <= 1 {
        return f(w, g, m, v);
    }
    let n = w.len().div_ceil(CHUNK);
    let (ms, vs) = (chunks(m, n), chunks(v, n));
    pool.install(|| {
        w.par_chunks_mut(CHUNK)
            .zip(g.par_chunks(CHUNK))
            .zip(ms)
            .zip(vs)
            .for_each(|(((w, g), m), v)| f(w, g, m, v));
    });
}

/// `x` in `n` chunks (`n` empty ones when `x` is empty).
fn chunks<T>(x: &mut [T], n: usize) -> Vec<&mut [T]> {
    if x.is_empty() {
        (0..n).map(|_| Default::default()).collect()
    } else {
        x.chunks_mut(CHUNK).collect()
    }
}

/// One Adam step of a chunk: bias corrections as factors, one division
/// (and one square root) per element.
fn adam<T: Float>(w: &mut [T], g: &[T], m: &mut [T], v: &mut [T], p: [T; 6]) {
    let [beta1, beta2, eps, decay, step, inv_c2] = p;
    let (one_b1, one_b2) = (T::ONE - beta1, T::ONE - beta2);
    crate::base::simd::wide(|| {
        if decay != T::ONE {
            w.iter_mut().for_each(|x| *x *= decay);
        }
        for (((w, g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
            *m = beta1 * *m + one_b1 * *g;
            *v = beta2 * *v + one_b2 * *g * *g;
            *w -= step * *m / ((*v * inv_c2).sqrt() + eps);
        }
    });
}
