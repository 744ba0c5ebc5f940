//! Row-wise kernels: sums, means, argmax, softmax and normalisations.
//! Sums accumulate in f64.

use super::access::Src;
use super::par::{par_rows, Pool};
use crate::base::float::Float;
use crate::op::attn::alibi_slope;

pub fn sum<T: Float>(a: &Src<'_, T>, out: &mut [T]) {
    out[0] = T::from_f64(a.d.iter().map(|&x| x.to_f64()).sum::<f64>());
}

/// out[r] = sum (or mean) of row r.
pub fn sum_rows<T: Float>(a: &Src<'_, T>, out: &mut [T], mean: bool, pool: &Pool) {
    let n0 = a.ne[0];
    par_rows(pool, out, 1, |r0, chunk| {
        for (k, o) in chunk.iter_mut().enumerate() {
            let r = r0 + k;
            let s: f64 = a.d[r * n0..(r + 1) * n0].iter().map(|&x| x.to_f64()).sum();
            *o = T::from_f64(if mean { s / n0 as f64 } else { s });
        }
    });
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
    pool: &Pool,
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

/// (x - mean) / sqrt(var + eps) of each row, or x / sqrt(mean(x^2) + eps) for `rms`.
pub fn norm<T: Float>(a: &Src<'_, T>, eps: f32, rms: bool, out: &mut [T], pool: &Pool) {
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
