//! The differentiable operations: their names, arity, shape rules and
//! forward kernels on the host. Backward rules are in `backward.rs`.

use super::mat::{gemm, Mat};
use anyhow::{bail, Result};

/// Which dimension a reduction removes: `Rows` keeps one value per row
/// (R's `rowSums`, `dim = 1`), `Cols` one per column (`colSums`, `dim = 2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    All,
    Rows,
    Cols,
}

/// Activation fused into a dense layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    None,
    Relu,
    Sigmoid,
    Tanh,
}

impl Act {
    pub fn apply(self, z: f64) -> f64 {
        match self {
            Act::None => z,
            Act::Relu => {
                if z > 0.0 || z.is_nan() {
                    z
                } else {
                    0.0
                }
            }
            Act::Sigmoid => 1.0 / (1.0 + (-z).exp()),
            Act::Tanh => z.tanh(),
        }
    }
    /// Derivative of the activation, from its output `y`.
    pub fn grad_from_out(self, y: f64) -> f64 {
        match self {
            Act::None => 1.0,
            Act::Relu => {
                if y > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Act::Sigmoid => y * (1.0 - y),
            Act::Tanh => 1.0 - y * y,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    MatMul,
    /// `act(W %*% x + b)`: inputs W `[out, in]`, x `[in, n]`, b `[out, 1]`.
    Linear(Act),
    Add,
    Sub,
    Mul,
    Div,
    Scale(f64),
    Relu,
    Sigmoid,
    Tanh,
    Softmax,
    Log,
    Exp,
    Pow(f64),
    Clamp(f64, f64),
    Sum(Axis),
    Mean(Axis),
    Reshape(usize, usize),
    Transpose,
    MseLoss,
    CrossEntropyLoss,
    SoftmaxCrossEntropyLoss,
    /// Inputs x, gamma, beta (and, in eval mode, running mean and variance).
    BatchNorm { eps: f64, training: bool },
    /// Columns of the input picked by 0-based index (embedding lookup).
    Gather(Vec<usize>),
    /// Rows `from..to` (0-based, end exclusive).
    SliceRows(usize, usize),
    ConcatRows,
}

/// Cross-entropy's clamp of probabilities away from 0 and 1.
pub const CE_EPS: f64 = 1e-7;

/// The result of a forward kernel: the output, values kept for the backward
/// rule, and auxiliary numbers returned to R (batch norm's batch statistics).
pub struct Fwd {
    pub out: Mat,
    pub saved: Vec<Mat>,
    pub aux: Vec<f64>,
}

fn fwd(out: Mat) -> Result<Fwd> {
    Ok(Fwd { out, saved: Vec::new(), aux: Vec::new() })
}

fn axis(p: &[f64]) -> Result<Axis> {
    match p.first().copied() {
        None => Ok(Axis::All),
        Some(d) if d == 0.0 => Ok(Axis::All),
        Some(d) if d == 1.0 => Ok(Axis::Rows),
        Some(d) if d == 2.0 => Ok(Axis::Cols),
        Some(d) => bail!("`dim` must be NULL, 1 (per row) or 2 (per column), not {d}"),
    }
}

fn param(p: &[f64], i: usize, name: &str, what: &str) -> Result<f64> {
    p.get(i).copied().ok_or_else(|| anyhow::anyhow!("{name}: missing parameter `{what}`"))
}

fn count(v: f64, name: &str, what: &str) -> Result<usize> {
    if !(v.is_finite() && v >= 0.0 && v.fract() == 0.0) {
        bail!("{name}: `{what}` must be a non-negative whole number, not {v}");
    }
    Ok(v as usize)
}

impl Op {
    /// The op called `name` (the R function's name without `ag_`), with its
    /// numeric parameters `p` and, for `gather`, 0-based indices.
    pub fn parse(name: &str, p: &[f64], idx: Option<Vec<usize>>) -> Result<Op> {
        Ok(match name {
            "matmul" => Op::MatMul,
            "linear" => Op::Linear(match param(p, 0, "ag_linear", "activation")? as i64 {
                0 => Act::None,
                1 => Act::Relu,
                2 => Act::Sigmoid,
                3 => Act::Tanh,
                other => bail!("ag_linear: unknown activation code {other}"),
            }),
            "add" => Op::Add,
            "sub" => Op::Sub,
            "mul" => Op::Mul,
            "div" => Op::Div,
            "scale" => Op::Scale(param(p, 0, "ag_scale", "scalar")?),
            "relu" => Op::Relu,
            "sigmoid" => Op::Sigmoid,
            "tanh" => Op::Tanh,
            "softmax" => Op::Softmax,
            "log" => Op::Log,
            "exp" => Op::Exp,
            "pow" => Op::Pow(param(p, 0, "ag_pow", "p")?),
            "clamp" => {
                let (lo, hi) = (param(p, 0, "ag_clamp", "lo")?, param(p, 1, "ag_clamp", "hi")?);
                if lo > hi {
                    bail!("ag_clamp: `lo` ({lo}) must not be greater than `hi` ({hi})");
                }
                Op::Clamp(lo, hi)
            }
            "sum" => Op::Sum(axis(p)?),
            "mean" => Op::Mean(axis(p)?),
            "reshape" => Op::Reshape(
                count(param(p, 0, "ag_reshape", "nrow")?, "ag_reshape", "nrow")?,
                count(param(p, 1, "ag_reshape", "ncol")?, "ag_reshape", "ncol")?,
            ),
            "transpose" => Op::Transpose,
            "mse_loss" => Op::MseLoss,
            "cross_entropy_loss" => Op::CrossEntropyLoss,
            "softmax_cross_entropy_loss" => Op::SoftmaxCrossEntropyLoss,
            "batch_norm" => Op::BatchNorm {
                eps: param(p, 0, "ag_batch_norm", "eps")?,
                training: param(p, 1, "ag_batch_norm", "training")? != 0.0,
            },
            "gather" => Op::Gather(idx.ok_or_else(|| anyhow::anyhow!("gather needs indices"))?),
            "slice_rows" => {
                let from = count(param(p, 0, "slice_rows", "from")?, "slice_rows", "from")?;
                let to = count(param(p, 1, "slice_rows", "to")?, "slice_rows", "to")?;
                Op::SliceRows(from, to)
            }
            "concat_rows" => Op::ConcatRows,
            other => bail!("unknown autograd operation '{other}'"),
        })
    }

    /// The R function users call, for messages.
    pub fn r_name(&self) -> &'static str {
        match self {
            Op::MatMul => "ag_matmul",
            Op::Linear(_) => "ag_linear",
            Op::Add => "ag_add",
            Op::Sub => "ag_sub",
            Op::Mul => "ag_mul",
            Op::Div => "ag_div",
            Op::Scale(_) => "ag_scale",
            Op::Relu => "ag_relu",
            Op::Sigmoid => "ag_sigmoid",
            Op::Tanh => "ag_tanh",
            Op::Softmax => "ag_softmax",
            Op::Log => "ag_log",
            Op::Exp => "ag_exp",
            Op::Pow(_) => "ag_pow",
            Op::Clamp(..) => "ag_clamp",
            Op::Sum(_) => "ag_sum",
            Op::Mean(_) => "ag_mean",
            Op::Reshape(..) => "ag_reshape",
            Op::Transpose => "ag_transpose",
            Op::MseLoss => "ag_mse_loss",
            Op::CrossEntropyLoss => "ag_cross_entropy_loss",
            Op::SoftmaxCrossEntropyLoss => "ag_softmax_cross_entropy_loss",
            Op::BatchNorm { .. } => "ag_batch_norm",
            Op::Gather(_) => "ag_embedding",
            Op::SliceRows(..) => "row slice",
            Op::ConcatRows => "row concatenation",
        }
    }

    fn arity_ok(&self, n: usize) -> bool {
        match self {
            Op::MatMul | Op::Add | Op::Sub | Op::Mul | Op::Div => n == 2,
            Op::MseLoss | Op::CrossEntropyLoss | Op::SoftmaxCrossEntropyLoss => n == 2,
            Op::BatchNorm { training: true, .. } | Op::Linear(_) => n == 3,
            Op::BatchNorm { training: false, .. } => n == 5,
            Op::ConcatRows => n >= 1,
            _ => n == 1,
        }
    }
}

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
    let mut out = Vec::with_capacity(r * c);
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

fn same_shape(a: &Mat, b: &Mat, name: &str, what: (&str, &str)) -> Result<()> {
    if !a.same_shape(b) {
        bail!(
            "{name}: `{}` is {} but `{}` is {}; they must have the same shape",
            what.0,
            a.shape_str(),
            what.1,
            b.shape_str()
        );
    }
    Ok(())
}

fn column(m: &Mat, rows: usize, name: &str, what: &str) -> Result<()> {
    if m.rows != rows || m.cols != 1 {
        bail!("{name}: `{what}` must be {rows}x1, not {}", m.shape_str());
    }
    Ok(())
}

/// Runs `op` forward on the host.
pub fn forward(op: &Op, x: &[&Mat]) -> Result<Fwd> {
    let name = op.r_name();
    if !op.arity_ok(x.len()) {
        bail!("{name}: wrong number of inputs ({})", x.len());
    }
    match op {
        Op::MatMul => fwd(gemm(x[0], false, x[1], false).map_err(|e| anyhow::anyhow!("{name}: {e}"))?),
        Op::Linear(act) => {
            let (w, xx, b) = (x[0], x[1], x[2]);
            column(b, w.rows, name, "b")?;
            let mut z = gemm(w, false, xx, false).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            let act = *act;
            for j in 0..z.cols {
                for (v, bi) in z.data[j * z.rows..(j + 1) * z.rows].iter_mut().zip(&b.data) {
                    *v = act.apply(*v + bi);
                }
            }
            fwd(z)
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let (r, c) = broadcast_shape(x[0], x[1], name)?;
            let out = match op {
                Op::Add => broadcast(x[0], x[1], r, c, |a, b| a + b),
                Op::Sub => broadcast(x[0], x[1], r, c, |a, b| a - b),
                Op::Mul => broadcast(x[0], x[1], r, c, |a, b| a * b),
                _ => broadcast(x[0], x[1], r, c, |a, b| a / b),
            };
            fwd(out)
        }
        Op::Scale(s) => {
            let s = *s;
            fwd(x[0].map(|v| v * s))
        }
        Op::Relu => fwd(x[0].map(|v| if v > 0.0 { v } else if v.is_nan() { v } else { 0.0 })),
        Op::Sigmoid => fwd(x[0].map(|v| 1.0 / (1.0 + (-v).exp()))),
        Op::Tanh => fwd(x[0].map(f64::tanh)),
        Op::Softmax => fwd(softmax_cols(x[0])),
        Op::Log => fwd(x[0].map(f64::ln)),
        Op::Exp => fwd(x[0].map(f64::exp)),
        Op::Pow(p) => {
            let p = *p;
            fwd(x[0].map(|v| r_pow(v, p)))
        }
        Op::Clamp(lo, hi) => {
            let (lo, hi) = (*lo, *hi);
            fwd(x[0].map(|v| v.max(lo).min(hi)))
        }
        Op::Sum(a) | Op::Mean(a) => {
            let m = x[0];
            let mean = matches!(op, Op::Mean(_));
            let mut out = match a {
                Axis::All => Mat::scalar(m.sum()),
                Axis::Rows => m.row_sums(),
                Axis::Cols => m.col_sums(),
            };
            if mean {
                let n = match a {
                    Axis::All => m.len(),
                    Axis::Rows => m.cols,
                    Axis::Cols => m.rows,
                } as f64;
                out.data.iter_mut().for_each(|v| *v /= n);
            }
            fwd(out)
        }
        Op::Reshape(r, c) => {
            if r.checked_mul(*c) != Some(x[0].len()) {
                bail!(
                    "ag_reshape: cannot reshape {} ({} values) to {r}x{c}; the number of values must stay the same",
                    x[0].shape_str(),
                    x[0].len()
                );
            }
            fwd(Mat { rows: *r, cols: *c, data: x[0].data.clone() })
        }
        Op::Transpose => fwd(x[0].transpose()),
        Op::MseLoss => {
            same_shape(x[0], x[1], name, ("pred", "target"))?;
            let n = x[0].len() as f64;
            let s: f64 = x[0].data.iter().zip(&x[1].data).map(|(p, t)| (p - t) * (p - t)).sum();
            fwd(Mat::scalar(s / n))
        }
        Op::CrossEntropyLoss => {
            same_shape(x[0], x[1], name, ("pred", "target"))?;
            let n = x[0].cols as f64;
            let s: f64 = x[0]
                .data
                .iter()
                .zip(&x[1].data)
                .map(|(p, t)| t * p.min(1.0 - CE_EPS).max(CE_EPS).ln())
                .sum();
            fwd(Mat::scalar(-s / n))
        }
        Op::SoftmaxCrossEntropyLoss => {
            same_shape(x[0], x[1], name, ("logits", "target"))?;
            let (l, t) = (x[0], x[1]);
            let lse = logsumexp_cols(l);
            let mut s = 0.0;
            for (j, lj) in lse.iter().enumerate() {
                for (lv, tv) in l.col(j).iter().zip(t.col(j)) {
                    s += tv * (lv - lj);
                }
            }
            Ok(Fwd { out: Mat::scalar(-s / l.cols as f64), saved: vec![softmax_cols(l)], aux: Vec::new() })
        }
        Op::BatchNorm { eps, training } => batch_norm_fwd(x, *eps, *training),
        Op::Gather(idx) => {
            let w = x[0];
            let mut data = Vec::with_capacity(w.rows * idx.len());
            for &k in idx {
                if k >= w.cols {
                    bail!(
                        "ag_embedding: index {k} is out of range; indices are 0-based and must be below the vocabulary size {}",
                        w.cols
                    );
                }
                data.extend_from_slice(w.col(k));
            }
            fwd(Mat { rows: w.rows, cols: idx.len(), data })
        }
        Op::SliceRows(from, to) => {
            let m = x[0];
            if from >= to || *to > m.rows {
                bail!("row slice {}..{} is outside a matrix with {} rows", from + 1, to, m.rows);
            }
            let mut data = Vec::with_capacity((to - from) * m.cols);
            for j in 0..m.cols {
                data.extend_from_slice(&m.col(j)[*from..*to]);
            }
            fwd(Mat { rows: to - from, cols: m.cols, data })
        }
        Op::ConcatRows => {
            let cols = x[0].cols;
            if let Some(bad) = x.iter().find(|m| m.cols != cols) {
                bail!("row concatenation: all pieces need {cols} columns, one is {}", bad.shape_str());
            }
            let rows: usize = x.iter().map(|m| m.rows).sum();
            let mut data = Vec::with_capacity(rows * cols);
            for j in 0..cols {
                for m in x {
                    data.extend_from_slice(m.col(j));
                }
            }
            fwd(Mat { rows, cols, data })
        }
    }
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

fn batch_norm_fwd(x: &[&Mat], eps: f64, training: bool) -> Result<Fwd> {
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
