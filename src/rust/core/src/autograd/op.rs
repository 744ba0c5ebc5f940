//! The differentiable operations: their names, parameters, arity and shape
//! rules (with the errors users see). Their forward definitions are in
//! `forward.rs`, their backward rules in `backward.rs`, both over engine ops.

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
    /// The engine's element-wise function of the activation.
    pub fn unary(self) -> Option<crate::op::UnaryOp> {
        use crate::op::UnaryOp;
        match self {
            Act::None => None,
            Act::Relu => Some(UnaryOp::Relu),
            Act::Sigmoid => Some(UnaryOp::Sigmoid),
            Act::Tanh => Some(UnaryOp::Tanh),
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
    /// Columns of the input picked by 0-based index (embedding lookup),
    /// every `k` consecutive picks stacked into one column of the result
    /// (`[rows * k, idx.len() / k]`: the patches of a convolution).
    Gather(Vec<usize>, usize),
    /// Rows `from..to` (0-based, end exclusive).
    SliceRows(usize, usize),
    ConcatRows,
    /// A 2-D convolution (`super::conv`) with its activation fused: inputs
    /// kernel, x and bias.
    Conv2d(super::conv::Conv2d, Act),
}

/// Cross-entropy's clamp of probabilities away from 0 and 1.
pub const CE_EPS: f64 = 1e-7;

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

fn act_code(code: f64, name: &str) -> Result<Act> {
    Ok(match code as i64 {
        0 => Act::None,
        1 => Act::Relu,
        2 => Act::Sigmoid,
        3 => Act::Tanh,
        other => bail!("{name}: unknown activation code {other}"),
    })
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
            "linear" => Op::Linear(act_code(param(p, 0, "ag_linear", "activation")?, "ag_linear")?),
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
            "gather" => {
                let idx = idx.ok_or_else(|| anyhow::anyhow!("gather needs indices"))?;
                let k = match p.first() {
                    Some(&v) => count(v, "ag_embedding", "k")?,
                    None => 1,
                };
                if k == 0 || idx.len() % k != 0 {
                    bail!("ag_embedding: {} indices do not make whole columns of {k}", idx.len());
                }
                Op::Gather(idx, k)
            }
            "slice_rows" => {
                let from = count(param(p, 0, "slice_rows", "from")?, "slice_rows", "from")?;
                let to = count(param(p, 1, "slice_rows", "to")?, "slice_rows", "to")?;
                Op::SliceRows(from, to)
            }
            "concat_rows" => Op::ConcatRows,
            "conv2d" => {
                let name = super::conv::NAME;
                let a = act_code(param(p, 0, name, "activation")?, name)?;
                Op::Conv2d(super::conv::Conv2d::parse(&p[1..])?, a)
            }
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
            Op::Gather(..) => "ag_embedding",
            Op::SliceRows(..) => "row slice",
            Op::ConcatRows => "row concatenation",
            Op::Conv2d(..) => super::conv::NAME,
        }
    }

    pub fn arity_ok(&self, n: usize) -> bool {
        match self {
            Op::MatMul | Op::Add | Op::Sub | Op::Mul | Op::Div => n == 2,
            Op::MseLoss | Op::CrossEntropyLoss | Op::SoftmaxCrossEntropyLoss => n == 2,
            Op::BatchNorm { training: true, .. } | Op::Linear(_) | Op::Conv2d(..) => n == 3,
            Op::BatchNorm { training: false, .. } => n == 5,
            Op::ConcatRows => n >= 1,
            _ => n == 1,
        }
    }
}

/// "3x4", for messages.
pub fn shape_str((r, c): (usize, usize)) -> String {
    format!("{r}x{c}")
}

/// The shape of an element-wise result between `a` and `b`: each dimension
/// equal, or 1 (recycled).
pub fn broadcast_shape(a: (usize, usize), b: (usize, usize), name: &str) -> Result<(usize, usize)> {
    let dim = |x: usize, y: usize| match (x, y) {
        _ if x == y => Some(x),
        (1, _) => Some(y),
        (_, 1) => Some(x),
        _ => None,
    };
    match (dim(a.0, b.0), dim(a.1, b.1)) {
        (Some(r), Some(c)) => Ok((r, c)),
        _ => bail!(
            "{name}: shapes {} and {} do not match; each dimension must be equal or 1 \
             (a [n, 1] column or a [1, m] row is recycled)",
            shape_str(a),
            shape_str(b)
        ),
    }
}

fn same_shape(a: (usize, usize), b: (usize, usize), name: &str, what: (&str, &str)) -> Result<()> {
    if a != b {
        bail!(
            "{name}: `{}` is {} but `{}` is {}; they must have the same shape",
            what.0,
            shape_str(a),
            what.1,
            shape_str(b)
        );
    }
    Ok(())
}

fn column(m: (usize, usize), rows: usize, name: &str, what: &str) -> Result<()> {
    if m != (rows, 1) {
        bail!("{name}: `{what}` must be {rows}x1, not {}", shape_str(m));
    }
    Ok(())
}

fn conformable(a: (usize, usize), b: (usize, usize), name: &str) -> Result<()> {
    if a.1 != b.0 {
        bail!(
            "{name}: non-conformable matrices: {} %*% {} (the columns of the left must equal the rows of the right)",
            shape_str(a),
            shape_str(b)
        );
    }
    Ok(())
}

impl Op {
    /// The shape of the result of the op on inputs of shapes `x`, or the
    /// error that names the op and the shapes.
    pub fn check(&self, x: &[(usize, usize)]) -> Result<(usize, usize)> {
        let name = self.r_name();
        if !self.arity_ok(x.len()) {
            bail!("{name}: wrong number of inputs ({})", x.len());
        }
        let x0 = x[0];
        Ok(match self {
            Op::MatMul => {
                conformable(x0, x[1], name)?;
                (x0.0, x[1].1)
            }
            Op::Linear(_) => {
                column(x[2], x0.0, name, "b")?;
                conformable(x0, x[1], name)?;
                (x0.0, x[1].1)
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => broadcast_shape(x0, x[1], name)?,
            Op::Scale(_) | Op::Relu | Op::Sigmoid | Op::Tanh | Op::Softmax | Op::Log | Op::Exp => x0,
            Op::Pow(_) | Op::Clamp(..) => x0,
            Op::Sum(Axis::All) | Op::Mean(Axis::All) => (1, 1),
            Op::Sum(Axis::Rows) | Op::Mean(Axis::Rows) => (x0.0, 1),
            Op::Sum(Axis::Cols) | Op::Mean(Axis::Cols) => (1, x0.1),
            Op::Reshape(r, c) => {
                let n = x0.0 * x0.1;
                if r.checked_mul(*c) != Some(n) {
                    bail!(
                        "ag_reshape: cannot reshape {} ({n} values) to {r}x{c}; the number of values must stay the same",
                        shape_str(x0)
                    );
                }
                (*r, *c)
            }
            Op::Transpose => (x0.1, x0.0),
            Op::MseLoss | Op::CrossEntropyLoss => {
                same_shape(x0, x[1], name, ("pred", "target"))?;
                (1, 1)
            }
            Op::SoftmaxCrossEntropyLoss => {
                same_shape(x0, x[1], name, ("logits", "target"))?;
                (1, 1)
            }
            Op::BatchNorm { training, .. } => {
                let f = x0.0;
                column(x[1], f, name, "gamma")?;
                column(x[2], f, name, "beta")?;
                if *training {
                    if x0.1 == 0 {
                        bail!("ag_batch_norm: the batch is empty");
                    }
                } else {
                    column(x[3], f, name, "running_mean")?;
                    column(x[4], f, name, "running_var")?;
                }
                x0
            }
            Op::Gather(idx, per) => {
                if let Some(k) = idx.iter().find(|&&k| k >= x0.1) {
                    bail!(
                        "ag_embedding: index {k} is out of range; indices are 0-based and must be below the vocabulary size {}",
                        x0.1
                    );
                }
                (x0.0 * per, idx.len() / per)
            }
            Op::SliceRows(from, to) => {
                if from >= to || *to > x0.0 {
                    bail!("row slice {}..{} is outside a matrix with {} rows", from + 1, to, x0.0);
                }
                (to - from, x0.1)
            }
            Op::ConcatRows => {
                let cols = x0.1;
                if let Some(bad) = x.iter().find(|m| m.1 != cols) {
                    bail!("row concatenation: all pieces need {cols} columns, one is {}", shape_str(*bad));
                }
                (x.iter().map(|m| m.0).sum(), cols)
            }
            Op::Conv2d(g, _) => g.check(x)?,
        })
    }
}
