//! Row-wise kernels: sums, means, argmax, softmax and normalisations.
//! Sums accumulate in f64.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::attn::alibi_slope;
use rayon::prelude::*;

/// Values per chunk of [`sum`]: chunks are fixed, so the result does not
/// depend on the number of threads.
const SUM_CHUNK: usize = 1 << 16;

/// The sum of all values, in f64: chunks of [`SUM_CHUNK`] values summed in
/// 32 lanes (independent additions, so a streaming read at memory speed),
/// split across the pool, their sums added in order.
pub fn sum<T: Float>(a: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    let chunk_sum = |c: &[T]| -> f64 {
        let mut acc = [0f64; 32];
        let lanes = c.chunks_exact(32);
        let rest: f64 = lanes.remainder().iter().map(|&x| x.to_f64()).sum();
        for v in lanes {
            for (s, &x) in acc.iter_mut().zip(v) {
                *s += x.to_f64();
            }
        }
        acc.iter().sum::<f64>() + rest
    };
    let d = &a.d[..];
    let parts: Vec<f64> = if pool.n_threads > 1 && d.len() >= 2 * SUM_CHUNK {
        pool.install(|| d.par_chunks(SUM_CHUNK).map(chunk_sum).collect())
    } else {
        d.chunks(SUM_CHUNK).map(chunk_sum).collect()
    };
    out[0] = T::from_f64(parts.iter().sum::<f64>());
}

/// out[r] = sum (or mean) of row r, of a source read with its own strides.
pub fn sum_rows<T: Float>(a: &Src<'_, T>, out: &mut [T], mean: bool, pool: &CpuPool) {
    let [n0, n1, n2, n3] = a.ne;
    let st = a.st;
    let fin = |s: f64| T::from_f64(if mean { s / n0 as f64 } else { s });
    if st[0] == 1 {
        par_rows(pool, out, 1, |r0, chunk| {
            for (k, o) in chunk.iter_mut().enumerate() {
                let r = r0 + k;
                let (i1, i2, i3) = (r % n1, (r / n1) % n2, r / (n1 * n2));
                let base = i1 * st[1] + i2 * st[2] + i3 * st[3];
                *o = fin(a.d[base..base + n0].iter().map(|&x| x.to_f64()).sum());
            }
        });
        return;
    }
    // Rows that run across memory (a transposed view): every row's sum is
    // carried along at once, one element of each row per step, in the same
    // order as above.
    let mut acc = vec![0f64; n1];
    for i3 in 0..n3 {
        for i2 in 0..n2 {
            acc.fill(0.0);
            for i0 in 0..n0 {
                let base = i0 * st[0] + i2 * st[2] + i3 * st[3];
                if st[1] == 1 {
                    for (s, &v) in acc.iter_mut().zip(&a.d[base..base + n1]) {
                        *s += v.to_f64();
                    }
                } else {
                    for (i1, s) in acc.iter_mut().enumerate() {
                        *s += a.d[base + i1 * st[1]].to_f64();
                    }
                }
            }
            let o = (i2 + n2 * i3) * n1;
            for (d, &s) in out[o..o + n1].iter_mut().zip(&acc) {
                *d = fin(s);
            }
        }
    }
}

/// Index of the largest value of each row (the first one on ties).
pub fn argmax<T: Float>(a: &Src<'_, T>, out: &mut [T]) {
    let n0 = a.ne[0];
    for (r, o) in out.iter_mut().enumerate() {
        let row = &a.d[r * n0..(r + 1) * n0];
        let mut best = 0;
        for (i, &v) in row.iter().enumerate() {
            if v > row[best] {
                best = i;
            }
        }
        *o = T::from_f64(best as f64);
    }
}

/// softmax(a * scale + slope * mask) of each row.
pub fn soft_max<T: Float>(
    a: &Src<'_, T>,
    mask: Option<&Src<'_, T>>,
    scale: f32,
    max_bias: f32,
    out: &mut [T],
    pool: &CpuPool,
) {
    let [n0, n1, n2, _] = a.ne;
    let scale = T::from_f32(scale);
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let (i1, i2, i3) = (r % n1, (r / n1) % n2, r / (n1 * n2));
            let x = &a.d[r * n0..(r + 1) * n0];
            let slope = T::from_f32(alibi_slope(i2, n2, max_bias));
            match mask {
                Some(m) => {
                    let mr = i1 + m.ne[1] * ((i2 % m.ne[2]) + m.ne[2] * (i3 % m.ne[3]));
                    let mrow = &m.d[mr * m.ne[0]..(mr + 1) * m.ne[0]];
                    for ((o, &v), &mv) in orow.iter_mut().zip(x).zip(mrow) {
                        *o = v * scale + slope * mv;
                    }
                }
                None => {
                    for (o, &v) in orow.iter_mut().zip(x) {
                        *o = v * scale;
                    }
                }
            }
            let mx = orow.iter().cloned().fold(T::NEG_INFINITY, T::max);
            let mut s = 0f64;
            for o in orow.iter_mut() {
                *o = (*o - mx).exp();
                s += o.to_f64();
            }
            let inv = T::from_f64(1.0 / s);
            for o in orow.iter_mut() {
                *o *= inv;
            }
        }
    });
}

/// Per row of `a`: its log-sum-exp (in f64), and `sum(t)`, `sum(t * a)`.
#[inline]
fn ce_row<T: Float>(a: &[T], t: &[T]) -> (f64, f64, f64) {
    let mx = a.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v.to_f64()));
    let s: f64 = a.iter().map(|&v| (v.to_f64() - mx).exp()).sum();
    let (ts, ta) = t.iter().zip(a).fold((0.0, 0.0), |(ts, ta), (&tv, &av)| (ts + tv.to_f64(), ta + tv.to_f64() * av.to_f64()));
    (mx + s.ln(), ts, ta)
}

/// -sum(t * log_softmax(a)) over every row of `a`, divided by the rows.
pub fn cross_entropy<T: Float>(a: &Src<'_, T>, t: &Src<'_, T>, out: &mut [T]) {
    let n0 = a.ne[0].max(1);
    let rows = a.d.len() / n0;
    let mut loss = 0.0;
    for (ar, tr) in a.d.chunks(n0).zip(t.d.chunks(n0)) {
        let (lse, ts, ta) = ce_row(ar, tr);
        loss += ts * lse - ta;
    }
    out[0] = T::from_f64(loss / rows as f64);
}

/// The gradient of [`cross_entropy`] with respect to `a`, scaled by the
/// loss gradient `g`: per row, (softmax(a) * sum(t) - t) * g / rows.
pub fn cross_entropy_back<T: Float>(g: &Src<'_, T>, a: &Src<'_, T>, t: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    let n0 = a.ne[0].max(1);
    let k = g.d[0].to_f64() / (a.d.len() / n0) as f64;
    par_rows(pool, out, n0, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(n0).enumerate() {
            let r = r0 + j;
            let (ar, tr) = (&a.d[r * n0..(r + 1) * n0], &t.d[r * n0..(r + 1) * n0]);
            // The row's softmax, exp(a - max) / sum, its exponentials kept in `orow`.
            let mx = ar.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v.to_f64()));
            let mut s = 0.0;
            for (o, &av) in orow.iter_mut().zip(ar) {
                let e = (av.to_f64() - mx).exp();
                s += e;
                *o = T::from_f64(e);
            }
            let ts: f64 = tr.iter().map(|v| v.to_f64()).sum();
            for (o, &tv) in orow.iter_mut().zip(tr) {
                *o = T::from_f64((o.to_f64() / s * ts - tv.to_f64()) * k);
            }
        }
    });
}

/// (x - mean) / sqrt(var + eps) of each row, or x / sqrt(mean(x^2) + eps) for `rms`.
pub fn norm<T: Float>(a: &Src<'_, T>, eps: f32, rms: bool, out: &mut [T], pool: &CpuPool) {
    let n0 = a.ne[0];
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let x = &a.d[r * n0..(r + 1) * n0];
            let n = n0 as f64;
            if rms {
                let ms = x.iter().map(|&v| v.to_f64() * v.to_f64()).sum::<f64>() / n;
                let sc = T::from_f64(1.0 / (ms + eps as f64).sqrt());
                for (o, &v) in orow.iter_mut().zip(x) {
                    *o = v * sc;
                }
            } else {
                let mean = x.iter().map(|&v| v.to_f64()).sum::<f64>() / n;
                let var = x.iter().map(|&v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
                let sc = 1.0 / (var + eps as f64).sqrt();
                for (o, &v) in orow.iter_mut().zip(x) {
                    *o = T::from_f64((v.to_f64() - mean) * sc);
                }
            }
        }
    });
}
