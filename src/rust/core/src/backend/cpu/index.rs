//! Kernels that place values by index: roll, reflection padding, windows,
//! relative positions, diagonals, the gradients of get_rows and repeat,
//! set, arange and timestep embeddings.

use super::access::Src;
use super::movement::fill;
use super::par::CpuPool;
use crate::base::float::Float;
use crate::op::index::{cubic_weights, reflect, source_pos, IndexOp};
use anyhow::ensure;

// BOUNDS-FN: `IndexOp::arity` and `IndexOp::infer` (op/index.rs) shaped the
// node (sources gathered contiguous; `fill` walks out's sizes ne, and only
// calls f when out has elements, so no size below is 0 there):
// timestep: out [d, N], t has N values; roll: i mod a's size; pad_reflect:
// p0, p1 < n keep `reflect` in 0..n; win_part: sx, sy tested, a is
// [C, W, H, 1]; win_unpart: a is [C, w, w, nx ny], x < w0, y < h0 give a window
// below nx ny; get_rel_pos: a is [C, 2 kh - 1] and kh - k - 1 + q <= 2 kh - 2;
// add_rel_pos: a [K K, Q1 Q2, B], pw and ph [K, Q1, Q2, B]; diag: a [n, 1, c, d];
// get_rows_back: g [C, k] with k = idx's count, each row r < ne[1] tested;
// repeat_back: j takes every coordinate modulo out's (positive) sizes;
// interpolate: px clamps to a's sizes; set: the rule checked that the last
// element b reaches lies in a (= out).
pub fn run<T: Float>(op: &IndexOp, s: &[Src<'_, T>], out: &mut [T], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    match *op {
        IndexOp::Arange { start, step, .. } => {
            let (a, d) = (T::from_f32(start), T::from_f32(step));
            for (i, o) in out.iter_mut().enumerate() {
                *o = a + T::from_f64(i as f64) * d;
            }
        }
        IndexOp::TimestepEmbedding { dim, max_period } => {
            let t = &s[0];
            let half = (dim / 2) as usize;
            let lp = T::from_f64((max_period as f64).ln());
            fill(pool, out, ne, |i0, i1, _, _| {
                if i0 >= 2 * half {
                    return T::ZERO;
                }
                let j = i0 % half.max(1);
                let freq = (-lp * T::from_f64(j as f64) / T::from_f64(half as f64)).exp();
                let arg = t.d[i1] * freq;
                if i0 < half {
                    arg.cos()
                } else {
                    arg.sin()
                }
            });
        }
        IndexOp::Roll { shift } => {
            let a = &s[0];
            let src = |i: usize, d: usize| {
                let n = a.ne[d] as i64;
                (i as i64 - shift[d] as i64).rem_euclid(n) as usize
            };
            fill(pool, out, ne, |i0, i1, i2, i3| a.at(src(i0, 0), src(i1, 1), src(i2, 2), src(i3, 3)));
        }
        IndexOp::PadReflect1d { p0, .. } => {
            let a = &s[0];
            let n = a.ne[0] as i64;
            fill(pool, out, ne, |i0, i1, i2, i3| a.at(reflect(i0 as i64, p0 as i64, n), i1, i2, i3));
        }
        IndexOp::WinPart { w } => {
            let a = &s[0];
            let w = w as usize;
            let (nx, _) = IndexOp::windows(w, a.ne[1], a.ne[2]);
            fill(pool, out, ne, |c, x, y, win| {
                let (sx, sy) = ((win % nx) * w + x, (win / nx) * w + y);
                if sx < a.ne[1] && sy < a.ne[2] {
                    a.at(c, sx, sy, 0)
                } else {
                    T::ZERO
                }
            });
        }
        IndexOp::WinUnpart { w0, h0, w } => {
            let a = &s[0];
            let w = w as usize;
            let (nx, _) = IndexOp::windows(w, w0 as usize, h0 as usize);
            fill(pool, out, ne, |c, x, y, _| a.at(c, x % w, y % w, (y / w) * nx + x / w));
        }
        IndexOp::GetRelPos { kh, .. } => {
            let a = &s[0];
            let kh = kh as usize;
            fill(pool, out, ne, |c, k, q, _| a.at(c, kh - k - 1 + q, 0, 0));
        }
        IndexOp::AddRelPos => {
            let (a, pw, ph) = (&s[0], &s[1], &s[2]);
            let (k, q1) = (pw.ne[0], pw.ne[1]);
            fill(pool, out, ne, |e, r, b, _| {
                let (i1, i2) = (r % q1, r / q1);
                a.at(e, r, b, 0) + ph.at(e / k, i1, i2, b) + pw.at(e % k, i1, i2, b)
            });
        }
        IndexOp::Diag => {
            let a = &s[0];
            fill(pool, out, ne, |i, j, c, d| if i == j { a.at(i, 0, c, d) } else { T::ZERO });
        }
        IndexOp::DiagMaskZero { n_past } => {
            let a = &s[0];
            fill(pool, out, ne, |i0, i1, i2, i3| {
                if i0 as i64 > n_past as i64 + i1 as i64 {
                    T::ZERO
                } else {
                    a.at(i0, i1, i2, i3)
                }
            });
        }
        IndexOp::GetRowsBack => {
            let (g, idx) = (&s[0], &s[1]);
            let n0 = ne[0];
            out.iter_mut().for_each(|o| *o = T::ZERO);
            for (i, r) in idx.d.iter().enumerate() {
                let r = r.to_f64();
                ensure!(
                    r >= 0.0 && (r as usize) < ne[1],
                    "get_rows_back: row index {r} is out of range: the result has {} rows (indices start at 0)",
                    ne[1]
                );
                let dst = &mut out[r as usize * n0..(r as usize + 1) * n0];
                for (o, v) in dst.iter_mut().zip(&g.d[i * n0..(i + 1) * n0]) {
                    *o += *v;
                }
            }
        }
        IndexOp::RepeatBack => {
            let a = &s[0];
            let [n0, n1, n2, _] = a.ne;
            out.iter_mut().for_each(|o| *o = T::ZERO);
            for (i, v) in a.d.iter().enumerate() {
                let (i0, i1, i2, i3) = (i % n0, (i / n0) % n1, (i / (n0 * n1)) % n2, i / (n0 * n1 * n2));
                let j = (i0 % ne[0]) + ne[0] * ((i1 % ne[1]) + ne[1] * ((i2 % ne[2]) + ne[2] * (i3 % ne[3])));
                out[j] += *v;
            }
        }
        IndexOp::Interpolate { factor, bicubic } => {
            let a = &s[0];
            let f = factor as f64;
            let (w, h) = (a.ne[0] as i64, a.ne[1] as i64);
            let clamp = |v: i64, n: i64| v.clamp(0, n - 1) as usize;
            fill(pool, out, ne, |i0, i1, i2, i3| {
                let (x, y) = (source_pos(i0, f), source_pos(i1, f));
                let (x0, y0) = (x.floor(), y.floor());
                let (tx, ty) = (x - x0, y - y0);
                let (x0, y0) = (x0 as i64, y0 as i64);
                let px = |xi: i64, yi: i64| a.at(clamp(xi, w), clamp(yi, h), i2, i3).to_f64();
                let v = if bicubic {
                    let (wx, wy) = (cubic_weights(tx), cubic_weights(ty));
                    let mut acc = 0.0;
                    for (j, wyj) in wy.iter().enumerate() {
                        for (i, wxi) in wx.iter().enumerate() {
                            acc += wyj * wxi * px(x0 - 1 + i as i64, y0 - 1 + j as i64);
                        }
                    }
                    acc
                } else {
                    let (tx, ty) = (tx.clamp(0.0, 1.0), ty.clamp(0.0, 1.0));
                    px(x0, y0) * (1.0 - tx) * (1.0 - ty)
                        + px(x0 + 1, y0) * tx * (1.0 - ty)
                        + px(x0, y0 + 1) * (1.0 - tx) * ty
                        + px(x0 + 1, y0 + 1) * tx * ty
                };
                T::from_f64(v)
            });
        }
        IndexOp::Set { nb, offset } => {
            let (a, b) = (&s[0], &s[1]);
            out.copy_from_slice(&a.d);
            let [b0, b1, b2, _] = b.ne;
            for (i, v) in b.d.iter().enumerate() {
                let (j0, j1, j2, j3) = (i % b0, (i / b0) % b1, (i / (b0 * b1)) % b2, i / (b0 * b1 * b2));
                out[offset + j0 + j1 * nb[0] + j2 * nb[1] + j3 * nb[2]] = *v;
            }
        }
    }
    Ok(())
}
