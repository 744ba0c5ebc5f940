//! Sliding-window kernels on planar images [W, H, C, N]: the depthwise
//! 2-D convolution and 2-D max / average pooling. Each output row (one
//! y of one channel of one image) is built by whole-row passes, one per
//! kernel tap: the tap's in-bounds span of x is found once, then the pass
//! is a plain loop over that span (contiguous for stride 1, so it
//! vectorises), with no bounds test per element. The taps are taken in the
//! same order as a per-element window sum, so the results equal it exactly.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::PoolOp;

/// The output positions x in [lo, hi) whose input position x s + off lies
/// in [0, iw), for `ow` outputs.
fn span(off: i64, s: i64, iw: i64, ow: usize) -> (usize, usize) {
    // smallest x with x s + off >= 0, and one past the largest with x s + off < iw
    let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
    let hi = if iw - off <= 0 { 0 } else { (iw - off + s - 1) / s };
    let (lo, hi) = (lo.min(ow as i64) as usize, hi.min(ow as i64) as usize);
    (lo, hi.max(lo))
}

/// `o[x] = f(o[x], row[x s + off])` for the x of `o` in `[lo, hi)`.
// BOUNDS-FN: (lo, hi) comes from `span` for `row.len()` and `o.len()`: hi <= ow
// = o.len(), and every x in [lo, hi) has 0 <= x s + off < iw = row.len(), so
// start >= 0 and start + len = hi + off <= iw for s = 1.
#[inline(always)]
fn pass<T: Float>(o: &mut [T], row: &[T], off: i64, s: usize, (lo, hi): (usize, usize), f: impl Fn(T, T) -> T) {
    if lo >= hi {
        return;
    }
    let start = (lo as i64 * s as i64 + off) as usize;
    let o = &mut o[lo..hi];
    if s == 1 {
        let len = o.len();
        for (v, &x) in o.iter_mut().zip(&row[start..start + len]) {
            *v = f(*v, x);
        }
    } else {
        for (v, &x) in o.iter_mut().zip(row[start..].iter().step_by(s)) {
            *v = f(*v, x);
        }
    }
}

/// One kernel per channel: out[x, y, c, n] = sum over (ky, kx) of
/// b[x s0 + kx d0 - p0, y s1 + ky d1 - p1, c, n] a[kx, ky, 0, c]
/// (positions outside b add nothing); `p` is [s0, s1, p0, p1, d0, d1].
// BOUNDS-FN: `Conv::infer` (op/conv.rs) shaped the node: a is [kw, kh, 1, C],
// b [iw, ih, C, N] (both contiguous), out [ow, oh, C, N] with s0 > 0; row r
// of out (par_rows: whole rows) has y < oh, c < C, n < N, so the plane of b
// and the kernel of a exist; 0 <= sy < ih is tested; kx < kw = spans.len().
pub fn depthwise_2d<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, p: [i32; 6], out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let [s0, s1, p0, p1, d0, d1] = p.map(|v| v as i64);
    let (kw, kh) = (a.ne[0], a.ne[1]);
    let (iw, ih) = (b.ne[0], b.ne[1]);
    let (ow, oh, ch) = (ne[0], ne[1], ne[2]);
    let spans: Vec<(usize, usize)> = (0..kw).map(|kx| span(kx as i64 * d0 - p0, s0, iw as i64, ow)).collect();
    par_rows(pool, out, ow, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ow.max(1)).enumerate() {
            let r = r0 + j;
            let (y, c, n) = (r % oh, (r / oh) % ch, r / (oh * ch));
            orow.fill(T::ZERO);
            let plane = &b.d[(n * ch + c) * iw * ih..(n * ch + c + 1) * iw * ih];
            let k = &a.d[c * kw * kh..(c + 1) * kw * kh];
            for ky in 0..kh {
                let sy = y as i64 * s1 + ky as i64 * d1 - p1;
                if sy < 0 || sy >= ih as i64 {
                    continue;
                }
                let row = &plane[sy as usize * iw..(sy as usize + 1) * iw];
                for kx in 0..kw {
                    let w = k[ky * kw + kx];
                    pass(orow, row, kx as i64 * d0 - p0, s0 as usize, spans[kx], |o, x| o + x * w);
                }
            }
        }
    });
}

/// Max or average over windows; `kp` is [k0, k1, s0, s1], `pad` [p0, p1].
/// Windows skip padded positions; the average divides by the full window
/// size, and a window wholly in the padding gives the most negative finite
/// value (max) or 0 (average).
// BOUNDS-FN: the `Pool2d` rule (op/shape.rs) shaped the node: a is
// [iw, ih, C, N] (contiguous), out [ow, oh, C, N] with k0, s0 > 0; row r of out
// (par_rows: whole rows) has y < oh and plane < C N; 0 <= iy < ih is tested;
// kx < k0 = spans.len(); a pair `p` of `chunks_exact(2)` is indexed below 2.
pub fn pool_2d<T: Float>(a: &Src<'_, T>, op: PoolOp, kp: [i32; 4], pad: [f32; 2], out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let [k0, k1, s0, s1] = kp.map(|v| v as i64);
    let (p0, p1) = (pad[0] as i64, pad[1] as i64);
    let (iw, ih) = (a.ne[0], a.ne[1]);
    let (ow, oh) = (ne[0], ne[1]);
    let spans: Vec<(usize, usize)> = (0..k0).map(|kx| span(kx - p0, s0, iw as i64, ow)).collect();
    let div = T::from_f64((k0 * k1) as f64);
    let pairs = op == PoolOp::Max && k0 == 2 && s0 == 2 && p0 == 0 && 2 * ow <= iw;
    par_rows(pool, out, ow, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ow.max(1)).enumerate() {
            let r = r0 + j;
            let (y, plane) = (r % oh, r / oh);
            let img = &a.d[plane * iw * ih..(plane + 1) * iw * ih];
            orow.fill(match op {
                PoolOp::Max => T::MIN,
                PoolOp::Avg => T::ZERO,
            });
            for ky in 0..k1 {
                let iy = y as i64 * s1 - p1 + ky;
                if iy < 0 || iy >= ih as i64 {
                    continue;
                }
                let row = &img[iy as usize * iw..(iy as usize + 1) * iw];
                if pairs {
                    // 2-wide windows of stride 2 inside the row: one pass
                    // over its pairs, the taps in the same order.
                    for (o, p) in orow.iter_mut().zip(row.chunks_exact(2)) {
                        *o = o.max(p[0]).max(p[1]);
                    }
                    continue;
                }
                for kx in 0..k0 {
                    let (off, sp) = (kx - p0, spans[kx as usize]);
                    match op {
                        PoolOp::Max => pass(orow, row, off, s0 as usize, sp, |o, x| o.max(x)),
                        PoolOp::Avg => pass(orow, row, off, s0 as usize, sp, |o, x| o + x),
                    }
                }
            }
            if op == PoolOp::Avg {
                orow.iter_mut().for_each(|v| *v /= div);
            }
        }
    });
}
