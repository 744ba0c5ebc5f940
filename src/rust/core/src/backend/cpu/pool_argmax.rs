//! Max pooling that keeps the tap of each maximum, and its gradient, the
//! scatter of the output's gradient to those taps (`op::max_pool`). One
//! sample per task; within a window position the channels are contiguous,
//! so every tap is one pass over `C` values.

use super::access::Src;
use super::par::{par_rows, CpuPool, PAR_MIN};
use crate::base::float::Float;
use crate::op::max_pool::{MaxPool, PoolGeom};
use rayon::prelude::*;

// BOUNDS-FN: `MaxPool::arity` gives the forward one source, the gradient two.
pub fn run<T: Float>(op: &MaxPool, s: &[Src<'_, T>], out: &mut [T], pool: &CpuPool) {
    match op {
        MaxPool::Forward(g) => forward(g, &s[0].d, out, pool),
        MaxPool::Back(g) => back(g, &s[0].d, &s[1].d, out, pool),
    }
}

/// Whether `v` replaces the window's maximum `best` so far: larger, or the
/// first NaN (ties keep the first tap).
#[inline(always)]
fn beats<T: Float>(v: T, best: T) -> bool {
    v > best || (v.is_nan() && !best.is_nan())
}

/// The maxima of one sample `x` into `vals` and their taps into `taps`.
// BOUNDS-FN: `forward` passes one sample of `g.sample()` values and `vals`,
// `taps` of c ow oh values; `g.out_size()` made ow, oh with (ow - 1) sw + kw <= w
// and (oh - 1) sh + kh <= h, so o + c <= c ow oh, xi < w, y < h and the row
// of c values at c (xi + w y) lies in the sample.
fn forward_sample<T: Float>(g: &PoolGeom, ow: usize, oh: usize, x: &[T], vals: &mut [T], taps: &mut [T]) {
    let c = g.c;
    for oy in 0..oh {
        for ox in 0..ow {
            let o = c * (ox + ow * oy);
            let (v, t) = (&mut vals[o..o + c], &mut taps[o..o + c]);
            for ky in 0..g.kh {
                let y = oy * g.sh + ky;
                for kx in 0..g.kw {
                    let xi = ox * g.sw + kx;
                    let row = &x[c * (xi + g.w * y)..][..c];
                    let tap = kx + g.kw * ky;
                    if tap == 0 {
                        v.copy_from_slice(row);
                        t.fill(T::ZERO);
                        continue;
                    }
                    let tv = T::from_f64(tap as f64);
                    // Selects, not branches: the loop compiles to vector blends.
                    for ((b, ti), &r) in v.iter_mut().zip(t.iter_mut()).zip(row) {
                        let take = beats(r, *b);
                        *b = if take { r } else { *b };
                        *ti = if take { tv } else { *ti };
                    }
                }
            }
        }
    }
}

// BOUNDS-FN: `MaxPool::infer` (op/max_pool.rs) shaped the node: x holds N
// samples and out [P, 2] with P = per N, so chunk i < N of per values has
// sample i in x.
fn forward<T: Float>(g: &PoolGeom, x: &[T], out: &mut [T], pool: &CpuPool) {
    let Ok((ow, oh)) = g.out_size() else { return };
    let per = g.c * ow * oh;
    let p = out.len() / 2;
    let (vals, taps) = out.split_at_mut(p);
    let n = p / per.max(1);
    let one = |i: usize, v: &mut [T], t: &mut [T]| forward_sample(g, ow, oh, &x[i * g.sample()..][..g.sample()], v, t);
    if pool.n_threads <= 1 || x.len() < PAR_MIN || n < 2 {
        for (i, (v, t)) in vals.chunks_mut(per).zip(taps.chunks_mut(per)).enumerate() {
            one(i, v, t);
        }
        return;
    }
    pool.install(|| {
        vals.par_chunks_mut(per).zip(taps.par_chunks_mut(per)).enumerate().for_each(|(i, (v, t))| {
            if !crate::base::cancel::requested() {
                one(i, v, t)
            }
        })
    });
}

/// The gradient `gr` (`P` values) of the maxima scattered to their taps,
/// read from the forward's result `arg` (`[P, 2]`), into `out` `[C W H, N]`.
// BOUNDS-FN: `MaxPool::infer` shaped the node: gr has P = per N values, arg
// 2 P, out N samples; par_rows hands out whole samples n < N, so gr and the
// taps have per values at n per, and o + ch < per (see `forward_sample`).
// A tap is kx + kw ky < kw kh as the forward wrote it; a value that is not
// one and points outside the sample is skipped (get_mut).
fn back<T: Float>(g: &PoolGeom, gr: &[T], arg: &[T], out: &mut [T], pool: &CpuPool) {
    let Ok((ow, oh)) = g.out_size() else { return };
    let per = g.c * ow * oh;
    let taps = &arg[gr.len()..];
    let c = g.c;
    par_rows(pool, out, g.sample(), |n0, chunk| {
        for (j, dst) in chunk.chunks_mut(g.sample().max(1)).enumerate() {
            let n = n0 + j;
            dst.fill(T::ZERO);
            let (gs, ts) = (&gr[n * per..][..per], &taps[n * per..][..per]);
            for oy in 0..oh {
                for ox in 0..ow {
                    let o = c * (ox + ow * oy);
                    for ch in 0..c {
                        let tap = ts[o + ch].to_f64() as usize;
                        let (kx, ky) = (tap % g.kw, tap / g.kw);
                        let (xi, y) = (ox * g.sw + kx, oy * g.sh + ky);
                        if let Some(d) = dst.get_mut(ch + c * (xi + g.w * y)) {
                            *d += gs[o + ch];
                        }
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxima_taps_and_scatter() {
        // One channel, 3x4 (h x w), 2x2 windows, stride 1 along the width, 2 along the height.
        let g = PoolGeom { c: 1, w: 4, h: 3, kw: 2, kh: 2, sw: 1, sh: 2 };
        let x: Vec<f64> = vec![1., 5., 5., 0., 2., 2., 7., 3., 9., 9., 9., 9.];
        let mut out = vec![0.0; 6];
        forward(&g, &x, &mut out, &CpuPool::single());
        // windows (x 0..2, y 0..2), (1..3), (2..4): maxima 5 (tap 1), 7 (tap 3), 7 (tap 2)
        assert_eq!(out, vec![5., 7., 7., 1., 3., 2.]);
        let mut dx = vec![0.0; 12];
        back(&g, &[1., 10., 100.], &out, &mut dx, &CpuPool::single());
        assert_eq!(dx, vec![0., 1., 0., 0., 0., 0., 110., 0., 0., 0., 0., 0.]);
        // Ties keep the first tap; a NaN wins.
        let g1 = PoolGeom { c: 2, w: 2, h: 1, kw: 2, kh: 1, sw: 1, sh: 1 };
        let mut o = vec![0.0; 4];
        forward(&g1, &[3., 1., 3., f64::NAN], &mut o, &CpuPool::single());
        assert_eq!((o[0], o[2], o[3]), (3., 0., 1.));
        assert!(o[1].is_nan());
    }

    /// A tap that no forward wrote (past the window and the sample) is
    /// skipped, not written past the gradient's end.
    #[test]
    fn a_tap_past_the_sample_is_skipped() {
        let g = PoolGeom { c: 1, w: 4, h: 3, kw: 2, kh: 2, sw: 1, sh: 2 };
        let arg = [0., 0., 0., 1e6, 3., 1e9];
        let mut dx = vec![0.0; 12];
        back(&g, &[1., 10., 100.], &arg, &mut dx, &CpuPool::single());
        assert_eq!(dx, vec![0., 0., 0., 0., 0., 0., 10., 0., 0., 0., 0., 0.]);
    }
}
