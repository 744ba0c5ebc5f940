//! Host kernels shared by the forward and backward rules: recycling
//! (broadcast) of element-wise operands, column-wise softmax, R's power, and
//! batch normalisation.

use super::mat::Mat;
use super::ops::{column, Fwd};
use anyhow::{bail, Result};

/// Shape of a broadcast between `a` and `b`: each dimension equal, or 1.
pub fn broadcast_shape(a: &Mat, b: &Mat, name: &str) -> Result<(usize, usize)> {
    let dim = |x: usize, y: usize| -> Option<usize> {
        if x == y {
            Some(x)
        } else if x == 1 {
            Some(y)
        } else if y == 1 {
            Some(x)
        } else {
            None
        }
    };
    match (dim(a.rows, b.rows), dim(a.cols, b.cols)) {
        (Some(r), Some(c)) => Ok((r, c)),
        _ => bail!(
            "{name}: shapes {} and {} do not match; each dimension must be equal or 1 \
             (a [n, 1] column or a [1, m] row is recycled)",
            a.shape_str(),
            b.shape_str()
        ),
    }
}

/// Index of element (i, j) of `m` when it is recycled to a larger shape.
#[inline]
pub fn bidx(m: &Mat, i: usize, j: usize) -> usize {
    (if m.rows == 1 { 0 } else { i }) + (if m.cols == 1 { 0 } else { j }) * m.rows
}

/// `f(a, b)` element-wise with recycling to shape `(r, c)`.
pub fn broadcast(a: &Mat, b: &Mat, r: usize, c: usize, f: impl Fn(f64, f64) -> f64 + Sync) -> Mat {
    if a.rows == r && a.cols == c && b.rows == r && b.cols == c {
        return a.zip(b, f);
    }
    // The result can be much larger than either input ([n, 1] + [1, m]).
    let mut out = crate::base::alloc::or_unwind(crate::base::alloc::try_with_capacity(r.saturating_mul(c), "an autograd matrix"));
    if a.rows == r && a.cols == c && b.cols == 1 && b.rows == r {
        // The common bias case: a [r, c] matrix and a [r, 1] column.
        for j in 0..c {
            for (x, y) in a.col(j).iter().zip(&b.data) {
                out.push(f(*x, *y));
            }
        }
    } else {
        for j in 0..c {
            for i in 0..r {
                out.push(f(a.data[bidx(a, i, j)], b.data[bidx(b, i, j)]));
            }
        }
    }
    Mat { rows: r, cols: c, data: out }
}

/// Column-wise softmax.
pub fn softmax_cols(x: &Mat) -> Mat {
    let mut out = x.clone();
    for j in 0..x.cols {
        let col = &mut out.data[j * x.rows..(j + 1) * x.rows];
        let mx = col.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let mut s = 0.0;
        for v in col.iter_mut() {
            *v = (*v - mx).exp();
            s += *v;
        }
        for v in col.iter_mut() {
            *v /= s;
        }
    }
    out
}

/// Column-wise log-sum-exp, one value per column.
pub fn logsumexp_cols(x: &Mat) -> Vec<f64> {
    (0..x.cols)
        .map(|j| {
            let col = x.col(j);
            let mx = col.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            mx + col.iter().map(|v| (v - mx).exp()).sum::<f64>().ln()
        })
        .collect()
}

/// `x ^ p` as R computes it (R_pow: exact special cases, else libm's pow).
pub fn r_pow(x: f64, p: f64) -> f64 {
    if x == 1.0 || p == 0.0 {
        1.0
    } else if p == 2.0 {
        x * x
    } else {
        x.powf(p)
    }
}

pub(super) fn batch_norm_fwd(x: &[&Mat], eps: f64, training: bool) -> Result<Fwd> {
    let (m, gamma, beta) = (x[0], x[1], x[2]);
    let f = m.rows;
    column(gamma, f, "ag_batch_norm", "gamma")?;
    column(beta, f, "ag_batch_norm", "beta")?;
    let n = m.cols as f64;
    let (mu, var): (Vec<f64>, Vec<f64>) = if training {
        if m.cols == 0 {
            bail!("ag_batch_norm: the batch is empty");
        }
        let mu: Vec<f64> = m.row_sums().data.iter().map(|s| s / n).collect();
        let mut var = vec![0.0; f];
        for j in 0..m.cols {
            for (i, v) in m.col(j).iter().enumerate() {
                let d = v - mu[i];
                var[i] += d * d;
            }
        }
        var.iter_mut().for_each(|v| *v /= n);
        (mu, var)
    } else {
        column(x[3], f, "ag_batch_norm", "running_mean")?;
        column(x[4], f, "ag_batch_norm", "running_var")?;
        (x[3].data.clone(), x[4].data.clone())
    };
    let std: Vec<f64> = var.iter().map(|v| (v + eps).sqrt()).collect();
    let mut xhat = m.clone();
    let mut out = m.clone();
    for j in 0..m.cols {
        for i in 0..f {
            let k = i + j * f;
            let h = (m.data[k] - mu[i]) / std[i];
            xhat.data[k] = h;
            out.data[k] = gamma.data[i] * h + beta.data[i];
        }
    }
    let mut aux = mu;
    aux.extend_from_slice(&var);
    Ok(Fwd { out, saved: vec![xhat, Mat { rows: f, cols: 1, data: std }], aux })
}
