//! The differentiable operations: their names, arity, shape rules and
//! forward kernels on the host. Backward rules are in `backward.rs`.

use super::mat::{gemm, gemm_post, Mat};
pub use super::kernels::{bidx, broadcast, broadcast_shape, logsumexp_cols, r_pow, softmax_cols};
use super::kernels::batch_norm_fwd;
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
    let d = p.first().copied().unwrap_or(0.0);
    if d == 0.0 {
        Ok(Axis::All)
    } else if d == 1.0 {
        Ok(Axis::Rows)
    } else if d == 2.0 {
        Ok(Axis::Cols)
    } else {
        bail!("`dim` must be NULL, 1 (per row) or 2 (per column), not {d}")
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

    pub(crate) fn arity_ok(&self, n: usize) -> bool {
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

pub(super) fn column(m: &Mat, rows: usize, name: &str, what: &str) -> Result<()> {
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
            // Bias and activation on each block of the product as it is done.
            let (act, bias) = (*act, &b.data);
            // One loop per activation, so that each vectorises.
            fn each(col: &mut [f64], bias: &[f64], f: impl Fn(f64) -> f64) {
                for (v, bi) in col.iter_mut().zip(bias) {
                    *v = f(*v + bi);
                }
            }
            let post = |i0: usize, _j: usize, col: &mut [f64]| match act {
                Act::None => each(col, &bias[i0..], |z| z),
                Act::Relu => each(col, &bias[i0..], |z| Act::Relu.apply(z)),
                _ => each(col, &bias[i0..], |z| act.apply(z)),
            };
            fwd(gemm_post(w, false, xx, false, &post).map_err(|e| anyhow::anyhow!("{name}: {e}"))?)
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
        Op::Relu => fwd(x[0].map(|v| Act::Relu.apply(v))),
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
                .map(|(p, t)| t * p.clamp(CE_EPS, 1.0 - CE_EPS).ln())
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
