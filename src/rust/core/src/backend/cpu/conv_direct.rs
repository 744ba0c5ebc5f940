//! Direct convolutions (transposed 1-D and 2-D, depthwise and full 2-D)
//! and 1-D pooling. The full 2-D convolution runs as blocked products
//! (`conv_gemm`), the depthwise one as row passes (`window`).

use super::access::Src;
use super::matmul::GemmFloat;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::conv::Conv;
use crate::op::PoolOp;

/// Computes `c` on srcs [kernel, input] (pool_1d: [input]) into `out` of sizes `ne`.
pub fn run<T: GemmFloat>(c: &Conv, s: &[Src<'_, T>], out: &mut [T], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    // The node has the op's arity (`Conv::arity`, checked when it was made).
    let src = |i: usize| s.get(i).ok_or_else(|| anyhow::anyhow!("internal: {} without its source {i}", c.name()));
    match *c {
        Conv::Pool1d { op, k0, s0, p0 } => pool_1d(src(0)?, op, [k0, s0, p0], out, ne, pool),
        Conv::Transpose1d { s0, p0, d0 } => transpose_1d(src(0)?, src(1)?, [s0, p0, d0], out, ne, pool),
        Conv::Transpose2d { stride } => transpose_2d(src(0)?, src(1)?, stride as usize, out, ne, pool),
        Conv::Depthwise2d { s0, s1, p0, p1, d0, d1 } => super::window::depthwise_2d(src(0)?, src(1)?, [s0, s1, p0, p1, d0, d1], out, ne, pool),
        Conv::Direct2d { s0, s1, p0, p1, d0, d1 } => T::conv_2d(src(0)?, src(1)?, [s0, s1, p0, p1, d0, d1], out, ne, pool)?,
    }
    Ok(())
}

/// Max or average over windows of the first dimension.
// BOUNDS-FN: `ne` and `a.ne` are [usize; 4] indexed by literals. `Conv::infer`
// made `out` [OW, a.ne[1], a.ne[2], a.ne[3]], so row r of `out` is row r of
// the contiguous `a` (n values each); a window reads t in max(0, start)..
// min(n, start + k0), inside the row.
fn pool_1d<T: Float>(a: &Src<'_, T>, op: PoolOp, p: [i32; 3], out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let [k0, s0, p0] = p.map(|v| v as i64);
    let (n, ow) = (a.ne[0] as i64, ne[0]);
    par_rows(pool, out, ow, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ow.max(1)).enumerate() {
            let x = &a.d[(r0 + j) * n as usize..(r0 + j + 1) * n as usize];
            for (i, o) in orow.iter_mut().enumerate() {
                let start = i as i64 * s0 - p0;
                let win = (start.max(0)..(start + k0).min(n)).map(|t| x[t as usize]);
                *o = match op {
                    PoolOp::Max => win.fold(T::MIN, T::max),
                    PoolOp::Avg => win.fold(T::ZERO, |acc, v| acc + v) / T::from_f64(k0 as f64),
                };
            }
        }
    });
}

/// out[o, oc, n] = sum over (l, k) with l s0 + k d0 - p0 = o of b[l, ic, n] a[k, oc, ic].
// BOUNDS-FN: `ne`, `a.ne` and `b.ne` are [usize; 4] indexed by literals (the
// values go through `Src::at`).
fn transpose_1d<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, p: [i32; 3], out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let [s0, p0, d0] = p.map(|v| v as i64);
    let (kw, cin, len) = (a.ne[0], a.ne[2], b.ne[0] as i64);
    let (ol, cout) = (ne[0], ne[1]);
    par_rows(pool, out, ol, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ol.max(1)).enumerate() {
            let r = r0 + j;
            let (oc, n) = (r % cout, r / cout);
            for (o, v) in orow.iter_mut().enumerate() {
                let mut acc = T::ZERO;
                for k in 0..kw {
                    let t = o as i64 + p0 - k as i64 * d0;
                    if t < 0 || t % s0 != 0 || t / s0 >= len {
                        continue;
                    }
                    let l = (t / s0) as usize;
                    for ic in 0..cin {
                        acc += b.at(l, ic, n, 0) * a.at(k, oc, ic, 0);
                    }
                }
                *v = acc;
            }
        }
    });
}

/// out[x, y, oc, n] = sum of b[ix, iy, ic, n] a[kx, ky, oc, ic] over ix s + kx = x, iy s + ky = y.
// BOUNDS-FN: `ne`, `a.ne` and `b.ne` are [usize; 4] indexed by literals (the
// values go through `Src::at`).
fn transpose_2d<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, st: usize, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let (kw, kh, cin) = (a.ne[0], a.ne[1], a.ne[3]);
    let (iw, ih) = (b.ne[0], b.ne[1]);
    let (ow, oh, cout) = (ne[0], ne[1], ne[2]);
    par_rows(pool, out, ow, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ow.max(1)).enumerate() {
            let r = r0 + j;
            let (y, oc, n) = (r % oh, (r / oh) % cout, r / (oh * cout));
            for (x, v) in orow.iter_mut().enumerate() {
                let mut acc = T::ZERO;
                for ky in 0..kh.min(y + 1) {
                    if (y - ky) % st != 0 || (y - ky) / st >= ih {
                        continue;
                    }
                    let iy = (y - ky) / st;
                    for kx in 0..kw.min(x + 1) {
                        if (x - kx) % st != 0 || (x - kx) / st >= iw {
                            continue;
                        }
                        let ix = (x - kx) / st;
                        for ic in 0..cin {
                            acc += b.at(ix, iy, ic, n) * a.at(kx, ky, oc, ic);
                        }
                    }
                }
                *v = acc;
            }
        }
    });
}
