//! Row-wise kernels: sums, means, argmax, softmax and normalisations.
//! Sums accumulate in f64.

use super::access::Src;
use super::par::{par_rows, par_rows_from, threshold, CpuPool, PAR_MIN, PAR_MIN_HEAVY};
use crate::base::float::Float;
use crate::op::attn::alibi_slope;
use rayon::prelude::*;

/// Values per chunk of [`sum`]: chunks are fixed, so the result does not
/// depend on the number of threads.
const SUM_CHUNK: usize = 1 << 16;

/// The sum of all values, in f64: chunks of [`SUM_CHUNK`] values summed in
/// 32 lanes (independent additions, so a streaming read at memory speed),
/// split across the pool, their sums added in order.
// BOUNDS-FN: the `Sum` rule (op/shape.rs) gives out one value; `..` is all of d.
pub fn sum<T: Float>(a: &Src<'_, T>, out: &mut [T], pool: &CpuPool) {
    let chunk_sum = lane_sum::<T>;
    let d = &a.d[..];
    let parts: Vec<f64> = if pool.n_threads > 1 && d.len() >= 2 * SUM_CHUNK {
        pool.install(|| d.par_chunks(SUM_CHUNK).map(chunk_sum).collect())
    } else {
        d.chunks(SUM_CHUNK).map(chunk_sum).collect()
    };
    out[0] = T::from_f64(parts.iter().sum::<f64>());
}

/// The sum of `c` in f64, in 32 lanes (independent additions, so that the
/// loop vectorises and streams at memory speed), the lanes added in order.
#[inline(always)]
fn lane_sum<T: Float>(c: &[T]) -> f64 {
    let mut acc = [0f64; 32];
    let lanes = c.chunks_exact(32);
    let rest: f64 = lanes.remainder().iter().map(|&x| x.to_f64()).sum();
    for v in lanes {
        for (s, &x) in acc.iter_mut().zip(v) {
            *s += x.to_f64();
        }
    }
    acc.iter().sum::<f64>() + rest
}

/// The largest value of `c` (NaN ignored unless all are NaN, as
/// `Float::max`), in 16 lanes so that the loop vectorises.
#[inline(always)]
fn lane_max<T: Float>(c: &[T]) -> T {
    let mut acc = [T::NEG_INFINITY; 16];
    let lanes = c.chunks_exact(16);
    let rest = lanes.remainder().iter().cloned().fold(T::NEG_INFINITY, T::max);
    for v in lanes {
        for (m, &x) in acc.iter_mut().zip(v) {
            *m = m.max(x);
        }
    }
    acc.iter().cloned().fold(rest, T::max)
}

/// out[r] = sum (or mean) of row r, of a source read with its own strides.
/// Each row is summed in order, one value after the other, whatever the
/// strides and the number of threads (so every split gives the same sums);
/// rows are split across the pool by the values they read.
// BOUNDS-FN: the `SumRows` / `Mean` rules give out one value per row of a
// (n1 n2 n3). a is read in place with its strides st, d covering its span
// (`gather_strided_in`), or gathered contiguous: every element (i0 < n0,
// i1 < n1, plane < n2 n3) lies in d. A run of len rows from r stays in one
// plane (i1 + len <= n1) and in the chunk (r + len <= end).
pub fn sum_rows<T: Float>(a: &Src<'_, T>, out: &mut [T], mean: bool, pool: &CpuPool) {
    let [n0, n1, n2, _] = a.ne;
    let st = a.st;
    let fin = |s: f64| T::from_f64(if mean { s / n0 as f64 } else { s });
    let body = |r0: usize, chunk: &mut [T]| {
        let mut r = r0;
        let end = r0 + chunk.len();
        // Runs of rows within one plane (i2, i3).
        while r < end {
            let (i1, plane) = (r % n1, r / n1);
            let len = (n1 - i1).min(end - r);
            let base = (plane % n2) * st[2] + (plane / n2) * st[3];
            let o = &mut chunk[r - r0..r - r0 + len];
            if st[0] == 1 {
                for (j, d) in o.iter_mut().enumerate() {
                    let b = base + (i1 + j) * st[1];
                    *d = fin(a.d[b..b + n0].iter().map(|&x| x.to_f64()).sum());
                }
            } else {
                // Rows that run across memory (a transposed view): the
                // run's sums are carried along at once, one element of each
                // row per step.
                let mut acc = vec![0f64; len];
                for i0 in 0..n0 {
                    let b = base + i0 * st[0] + i1 * st[1];
                    if st[1] == 1 {
                        for (s, &v) in acc.iter_mut().zip(&a.d[b..b + len]) {
                            *s += v.to_f64();
                        }
                    } else {
                        for (j, s) in acc.iter_mut().enumerate() {
                            *s += a.d[b + j * st[1]].to_f64();
                        }
                    }
                }
                for (d, &s) in o.iter_mut().zip(&acc) {
                    *d = fin(s);
                }
            }
            r += len;
        }
    };
    // A few rows that run across memory (a transposed view, as the bias
    // gradient [F, positions] of a convolution): their values share cache
    // lines, so rows split among threads would each read the whole source;
    // one pass reads it once.
    if st[0] != 1 && st[1] == 1 && out.len() <= 64 {
        body(0, out);
    } else {
        par_rows_by_work(pool, out, n0, body);
    }
}

/// Runs `f(first_row, rows)` over chunks of `out`'s rows, each row costing
/// `work` values read, in parallel on `pool` when the whole is large
/// (by the values read, not the rows written: a few long rows split too).
fn par_rows_by_work<T: Send>(pool: &CpuPool, out: &mut [T], work: usize, f: impl Fn(usize, &mut [T]) + Sync + Send) {
    let rows = out.len();
    if pool.n_threads <= 1 || rows < 2 || rows.saturating_mul(work) < PAR_MIN {
        f(0, out);
        return;
    }
    // Enough chunks to balance the threads, none much under PAR_MIN / 8 values.
    let per = rows.div_ceil(4 * pool.n_threads).max((PAR_MIN / 8).div_ceil(work.max(1))).min(rows);
    pool.install(|| {
        out.par_chunks_mut(per).enumerate().for_each(|(c, chunk)| {
            if !crate::base::cancel::requested() {
                f(c * per, chunk)
            }
        })
    });
}

/// Index of the largest value of each row (the first one on ties).
// BOUNDS-FN: the `Argmax` rule: a is a matrix (contiguous) and out holds one
// value per row; best is 0 or an index of the row, read only when it has one.
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
// BOUNDS-FN: the `SoftMax` rule (op/shape.rs): out has a's shape; the mask
// (contiguous) has a's row length, at least a's rows (i1 < n1 <= m.ne[1]) and
// third and fourth sizes that divide a's (so above 0: mr < its rows).
// par_rows hands out whole rows of n0.
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
    // Each row's max, exponentials and their sum as loops of their own,
    // compiled wide: each vectorises (one loop with an f64 sum in order
    // would not).
    let rows = |r0: usize, chunk: &mut [T]| {
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
            let mx = lane_max(orow);
            for o in orow.iter_mut() {
                *o = (*o - mx).exp();
            }
            let inv = T::from_f64(1.0 / lane_sum(orow));
            for o in orow.iter_mut() {
                *o *= inv;
            }
        }
    };
    par_rows_from(pool, out, n0, threshold(PAR_MIN_HEAVY), |r0, chunk| crate::base::vmath::wide(|| rows(r0, chunk)));
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
// BOUNDS-FN: the `CrossEntropyLoss` rule gives out one value.
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
// BOUNDS-FN: the `CrossEntropyLossBack` rule: g has one value, a, t and out
// one shape (rows of n0 when n0 > 0; else all empty); par_rows hands out
// whole rows.
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
// BOUNDS-FN: the `Norm` / `RmsNorm` rules keep a's shape in out; par_rows
// hands out whole rows of n0.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    /// Sums and means of rows split across threads equal the one-thread
    /// sums exactly and a plain f64 sum of each row: a few long rows (split
    /// although the result is small), many short rows over planes, and a
    /// transposed view whose rows run across memory.
    #[test]
    fn split_row_sums_match_the_serial_ones() {
        let vals: Vec<f32> = (0..1_200_000u32).map(|i| ((i.wrapping_mul(2_654_435_761) >> 9) % 2001) as f32 / 37.0 - 27.0).collect();
        let cases = [
            ([200_000, 3, 2, 1], [1, 200_000, 600_000, 1_200_000]),
            ([50, 400, 6, 10], [1, 50, 20_000, 120_000]),
            // a [1000 x 1200] block transposed: row r reads every 1200th value
            ([1000, 1200, 1, 1], [1200, 1, 1_200_000, 1_200_000]),
        ];
        for (ne, st) in cases {
            let a = Src { d: Cow::Borrowed(&vals[..]), ne, st };
            let rows = ne[1] * ne[2] * ne[3];
            let want: Vec<f32> = (0..rows)
                .map(|r| {
                    let (i1, i2, i3) = (r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2]));
                    (0..ne[0]).map(|i0| vals[i0 * st[0] + i1 * st[1] + i2 * st[2] + i3 * st[3]] as f64).sum::<f64>() as f32
                })
                .collect();
            for mean in [false, true] {
                let mut outs = Vec::new();
                for threads in [1, 2, 3] {
                    let pool = CpuPool::new(threads).unwrap();
                    let mut out = vec![0f32; rows];
                    sum_rows(&a, &mut out, mean, &pool);
                    outs.push(out);
                }
                assert!(outs.iter().all(|o| o == &outs[0]), "{ne:?}: thread counts differ");
                if !mean {
                    assert_eq!(outs[0], want, "{ne:?}");
                } else {
                    assert!(outs[0].iter().zip(&want).all(|(m, w)| (m * ne[0] as f32 - w).abs() <= 1e-3 * w.abs().max(1.0)));
                }
            }
        }
    }
}
