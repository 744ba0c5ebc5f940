//! Row-wise kernels: L2 and group norms, the gradients of rms_norm and
//! soft_max, sorting, top-k and counting. Sums accumulate in f64.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::rows::{group_size, RowOp};
use std::cmp::Ordering;

// BOUNDS-FN: `RowOp::arity` and `RowOp::infer` (op/rows.rs) shaped the node:
// s[1] exists for the two-source ops, of a's shape; out has a's rows of n0
// (top_k: rows of k <= n0; count_equal: one value); sources are contiguous.
// par_rows hands out whole rows of out from row r0, so row r of out is row r
// of a (and y).
pub fn run<T: Float>(op: &RowOp, s: &[Src<'_, T>], out: &mut [T], pool: &CpuPool) {
    let a = &s[0];
    let n0 = a.ne[0];
    match *op {
        RowOp::L2Norm { eps } => each_row(a, out, n0, pool, |x, o| {
            let ss: f64 = x.iter().map(|&v| v.to_f64() * v.to_f64()).sum();
            let sc = T::from_f64(1.0 / ss.sqrt().max(eps as f64));
            for (o, &v) in o.iter_mut().zip(x) {
                *o = v * sc;
            }
        }),
        RowOp::GroupNorm { groups, eps } => group_norm(a, groups, eps, out),
        RowOp::RmsNormBack { eps } => rms_norm_back(a, &s[1], eps, out, pool),
        RowOp::SoftMaxBack { scale, .. } => {
            let y = &s[1];
            let sc = T::from_f32(scale);
            par_rows(pool, out, n0, |r0, chunk| {
                for (k, o) in chunk.chunks_mut(n0.max(1)).enumerate() {
                    let r = r0 + k;
                    let (dy, yr) = (&a.d[r * n0..(r + 1) * n0], &y.d[r * n0..(r + 1) * n0]);
                    let dot: f64 = dy.iter().zip(yr).map(|(g, v)| g.to_f64() * v.to_f64()).sum();
                    let dot = T::from_f64(dot);
                    for ((o, &g), &v) in o.iter_mut().zip(dy).zip(yr) {
                        *o = sc * v * (g - dot);
                    }
                }
            });
        }
        RowOp::Argsort { desc } => each_row(a, out, n0, pool, |x, o| {
            for (j, i) in sorted(x, desc).into_iter().enumerate() {
                o[j] = T::from_f64(i as f64);
            }
        }),
        RowOp::TopK { k } => {
            let k = k as usize;
            par_rows(pool, out, k, |r0, chunk| {
                for (j, o) in chunk.chunks_mut(k.max(1)).enumerate() {
                    let r = r0 + j;
                    let idx = sorted(&a.d[r * n0..(r + 1) * n0], true);
                    for (o, i) in o.iter_mut().zip(idx) {
                        *o = T::from_f64(i as f64);
                    }
                }
            });
        }
        RowOp::CountEqual => {
            let b = &s[1];
            let n = a.d.iter().zip(b.d.iter()).filter(|(x, y)| x == y).count();
            out[0] = T::from_f64(n as f64);
        }
    }
}

/// f(row of a, row of out) for each row.
// BOUNDS-FN: out has a's rows of n0 (see `run`); par_rows hands out whole
// rows from row r0.
fn each_row<T: Float>(a: &Src<'_, T>, out: &mut [T], n0: usize, pool: &CpuPool, f: impl Fn(&[T], &mut [T]) + Sync + Send) {
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, o) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            f(&a.d[r * n0..(r + 1) * n0], o);
        }
    });
}

/// The indices that sort `x` (stable; NaN last).
// BOUNDS-FN: idx holds 0..x.len().
fn sorted<T: Float>(x: &[T], desc: bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    let key = |i: &usize| x[*i];
    idx.sort_by(|i, j| {
        let (a, b) = (key(i), key(j));
        match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => {
                let o = a.partial_cmp(&b).unwrap_or(Ordering::Equal);
                if desc {
                    o.reverse()
                } else {
                    o
                }
            }
        }
    });
    idx
}

/// dx = r (dy - x r^2 sum(x dy) / n), r = 1 / sqrt(mean(x^2) + eps).
// BOUNDS-FN: dy, x and out share one shape (`RowOp::infer`); par_rows hands
// out whole rows of n0 from row r0.
fn rms_norm_back<T: Float>(dy: &Src<'_, T>, x: &Src<'_, T>, eps: f32, out: &mut [T], pool: &CpuPool) {
    let n0 = dy.ne[0];
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, o) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let (g, xr) = (&dy.d[r * n0..(r + 1) * n0], &x.d[r * n0..(r + 1) * n0]);
            let n = n0 as f64;
            let ms = xr.iter().map(|&v| v.to_f64() * v.to_f64()).sum::<f64>() / n;
            let xg: f64 = xr.iter().zip(g).map(|(a, b)| a.to_f64() * b.to_f64()).sum();
            let rr = 1.0 / (ms + eps as f64).sqrt();
            let c = rr * rr * xg / n;
            for ((o, &gv), &xv) in o.iter_mut().zip(g).zip(xr) {
                *o = T::from_f64(rr * (gv.to_f64() - xv.to_f64() * c));
            }
        }
    });
}

/// Normalises each group of planes of each batch.
// BOUNDS-FN: out has a's shape (`RowOp::infer`), both contiguous; c0 < c1 <=
// n2 and i3 < n3, so each range lies in the n3 n2 planes.
fn group_norm<T: Float>(a: &Src<'_, T>, groups: i32, eps: f32, out: &mut [T]) {
    let [n0, n1, n2, n3] = a.ne;
    let plane = n0 * n1;
    let per = group_size(n2, groups);
    for i3 in 0..n3 {
        let mut c0 = 0;
        while c0 < n2 {
            let c1 = (c0 + per).min(n2);
            let range = (i3 * n2 + c0) * plane..(i3 * n2 + c1) * plane;
            let x = &a.d[range.clone()];
            let n = x.len() as f64;
            let mean = x.iter().map(|v| v.to_f64()).sum::<f64>() / n;
            let var = x.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
            let sc = 1.0 / (var + eps as f64).sqrt();
            for (o, v) in out[range].iter_mut().zip(x) {
                *o = T::from_f64((v.to_f64() - mean) * sc);
            }
            c0 = c1;
        }
    }
}
