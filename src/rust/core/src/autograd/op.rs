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
pub enum AgActivation {
    None,
    Relu,
    Sigmoid,
    Tanh,
}

impl AgActivation {
    /// The engine's element-wise function of the activation.
    pub fn unary(self) -> Option<crate::op::UnaryOp> {
        use crate::op::UnaryOp;
        match self {
            AgActivation::None => None,
            AgActivation::Relu => Some(UnaryOp::Relu),
            AgActivation::Sigmoid => Some(UnaryOp::Sigmoid),
            AgActivation::Tanh => Some(UnaryOp::Tanh),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum AgOp {
    MatMul,
    /// `act(W %*% x + b)`: inputs W `[out, in]`, x `[in, n]`, b `[out, 1]`.
    Linear(AgActivation),
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
    Conv2d(super::conv::Conv2d, AgActivation),
    /// 2-D max pooling ("valid" windows) of a batch of channels-first
    /// images (`crate::op::max_pool`): `[C, OW OH N]` from any matrix of
    /// `C W H N` values.
    MaxPool2d(crate::op::max_pool::PoolGeom),
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

fn act_code(code: f64, name: &str) -> Result<AgActivation> {
    Ok(match code as i64 {
        0 => AgActivation::None,
        1 => AgActivation::Relu,
        2 => AgActivation::Sigmoid,
        3 => AgActivation::Tanh,
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

const POOL_NAME: &str = "ggml_layer_max_pooling_2d";

/// A max pooling's geometry from R's parameters: C, W, H, KW, KH and the
/// strides along the width and the height.
// BOUNDS-FN: p.len() == 7 (checked first); `n` is called with literals 0..=6.
fn pool_geom(p: &[f64]) -> Result<crate::op::max_pool::PoolGeom> {
    if p.len() != 7 {
        bail!("{POOL_NAME}: expected 7 pooling parameters, got {}", p.len());
    }
    let n = |i: usize, what: &str| -> Result<usize> {
        let v = p[i];
        if !(v.is_finite() && v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64) {
            bail!("{POOL_NAME}: `{what}` must be a whole number >= 1, not {v}");
        }
        Ok(v as usize)
    };
    let g = crate::op::max_pool::PoolGeom {
        c: n(0, "channels")?,
        w: n(1, "width")?,
        h: n(2, "height")?,
        kw: n(3, "pool width")?,
        kh: n(4, "pool height")?,
        sw: n(5, "stride")?,
        sh: n(6, "stride")?,
    };
    g.out_size().map_err(|e| anyhow::anyhow!("{POOL_NAME}: {e}"))?;
    Ok(g)
}

impl AgOp {
    /// The op called `name` (the R function's name without `ag_`), with its
    /// numeric parameters `p` and, for `gather`, 0-based indices.
    pub fn parse(name: &str, p: &[f64], idx: Option<Vec<usize>>) -> Result<AgOp> {
        Ok(match name {
            "matmul" => AgOp::MatMul,
            "linear" => AgOp::Linear(act_code(param(p, 0, "ag_linear", "activation")?, "ag_linear")?),
            "add" => AgOp::Add,
            "sub" => AgOp::Sub,
            "mul" => AgOp::Mul,
            "div" => AgOp::Div,
            "scale" => AgOp::Scale(param(p, 0, "ag_scale", "scalar")?),
            "relu" => AgOp::Relu,
            "sigmoid" => AgOp::Sigmoid,
            "tanh" => AgOp::Tanh,
            "softmax" => AgOp::Softmax,
            "log" => AgOp::Log,
            "exp" => AgOp::Exp,
            "pow" => AgOp::Pow(param(p, 0, "ag_pow", "p")?),
            "clamp" => {
                let (lo, hi) = (param(p, 0, "ag_clamp", "lo")?, param(p, 1, "ag_clamp", "hi")?);
                if lo > hi {
                    bail!("ag_clamp: `lo` ({lo}) must not be greater than `hi` ({hi})");
                }
                AgOp::Clamp(lo, hi)
            }
            "sum" => AgOp::Sum(axis(p)?),
            "mean" => AgOp::Mean(axis(p)?),
            "reshape" => AgOp::Reshape(
                count(param(p, 0, "ag_reshape", "nrow")?, "ag_reshape", "nrow")?,
                count(param(p, 1, "ag_reshape", "ncol")?, "ag_reshape", "ncol")?,
            ),
            "transpose" => AgOp::Transpose,
            "mse_loss" => AgOp::MseLoss,
            "cross_entropy_loss" => AgOp::CrossEntropyLoss,
            "softmax_cross_entropy_loss" => AgOp::SoftmaxCrossEntropyLoss,
            "batch_norm" => AgOp::BatchNorm {
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
                AgOp::Gather(idx, k)
            }
            "slice_rows" => {
                let from = count(param(p, 0, "slice_rows", "from")?, "slice_rows", "from")?;
                let to = count(param(p, 1, "slice_rows", "to")?, "slice_rows", "to")?;
                AgOp::SliceRows(from, to)
            }
            "concat_rows" => AgOp::ConcatRows,
            "conv2d" => {
                let name = super::conv::NAME;
                let a = act_code(param(p, 0, name, "activation")?, name)?;
                // BOUNDS: `param(p, 0, ..)` above returned, so p.len() >= 1.
                AgOp::Conv2d(super::conv::Conv2d::parse(&p[1..])?, a)
            }
            "max_pool2d" => AgOp::MaxPool2d(pool_geom(p)?),
            other => bail!("unknown autograd operation '{other}'"),
        })
    }

    /// The R function users call, for messages.
    pub fn r_name(&self) -> &'static str {
        match self {
            AgOp::MatMul => "ag_matmul",
            AgOp::Linear(_) => "ag_linear",
            AgOp::Add => "ag_add",
            AgOp::Sub => "ag_sub",
            AgOp::Mul => "ag_mul",
            AgOp::Div => "ag_div",
            AgOp::Scale(_) => "ag_scale",
            AgOp::Relu => "ag_relu",
            AgOp::Sigmoid => "ag_sigmoid",
            AgOp::Tanh => "ag_tanh",
            AgOp::Softmax => "ag_softmax",
            AgOp::Log => "ag_log",
            AgOp::Exp => "ag_exp",
            AgOp::Pow(_) => "ag_pow",
            AgOp::Clamp(..) => "ag_clamp",
            AgOp::Sum(_) => "ag_sum",
            AgOp::Mean(_) => "ag_mean",
            AgOp::Reshape(..) => "ag_reshape",
            AgOp::Transpose => "ag_transpose",
            AgOp::MseLoss => "ag_mse_loss",
            AgOp::CrossEntropyLoss => "ag_cross_entropy_loss",
            AgOp::SoftmaxCrossEntropyLoss => "ag_softmax_cross_entropy_loss",
            AgOp::BatchNorm { .. } => "ag_batch_norm",
            AgOp::Gather(..) => "ag_embedding",
            AgOp::SliceRows(..) => "row slice",
            AgOp::ConcatRows => "row concatenation",
            AgOp::Conv2d(..) => super::conv::NAME,
            AgOp::MaxPool2d(_) => POOL_NAME,
        }
    }

    pub fn arity_ok(&self, n: usize) -> bool {
        match self {
            AgOp::MatMul | AgOp::Add | AgOp::Sub | AgOp::Mul | AgOp::Div => n == 2,
            AgOp::MseLoss | AgOp::CrossEntropyLoss | AgOp::SoftmaxCrossEntropyLoss => n == 2,
            AgOp::BatchNorm { training: true, .. } | AgOp::Linear(_) | AgOp::Conv2d(..) => n == 3,
            AgOp::BatchNorm { training: false, .. } => n == 5,
            AgOp::ConcatRows => n >= 1,
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

impl AgOp {
    /// The shape of the result of the op on inputs of shapes `x`, or the
    /// error that names the op and the shapes.
    // BOUNDS-FN: `arity_ok(x.len())` is checked first: x.len() is at least 1
    // for every op, and each arm indexes below its op's arity (2 for the
    // binary ops and losses, 3 for linear, 3 or 5 for batch norm).
    pub fn check(&self, x: &[(usize, usize)]) -> Result<(usize, usize)> {
        let name = self.r_name();
        if !self.arity_ok(x.len()) {
            bail!("{name}: wrong number of inputs ({})", x.len());
        }
        let x0 = x[0];
        Ok(match self {
            AgOp::MatMul => {
                conformable(x0, x[1], name)?;
                (x0.0, x[1].1)
            }
            AgOp::Linear(_) => {
                column(x[2], x0.0, name, "b")?;
                conformable(x0, x[1], name)?;
                (x0.0, x[1].1)
            }
            AgOp::Add | AgOp::Sub | AgOp::Mul | AgOp::Div => broadcast_shape(x0, x[1], name)?,
            AgOp::Scale(_) | AgOp::Relu | AgOp::Sigmoid | AgOp::Tanh | AgOp::Softmax | AgOp::Log | AgOp::Exp => x0,
            AgOp::Pow(_) | AgOp::Clamp(..) => x0,
            AgOp::Sum(Axis::All) | AgOp::Mean(Axis::All) => (1, 1),
            AgOp::Sum(Axis::Rows) | AgOp::Mean(Axis::Rows) => (x0.0, 1),
            AgOp::Sum(Axis::Cols) | AgOp::Mean(Axis::Cols) => (1, x0.1),
            AgOp::Reshape(r, c) => {
                let n = x0.0 * x0.1;
                if r.checked_mul(*c) != Some(n) {
                    bail!(
                        "ag_reshape: cannot reshape {} ({n} values) to {r}x{c}; the number of values must stay the same",
                        shape_str(x0)
                    );
                }
                (*r, *c)
            }
            AgOp::Transpose => (x0.1, x0.0),
            AgOp::MseLoss | AgOp::CrossEntropyLoss => {
                same_shape(x0, x[1], name, ("pred", "target"))?;
                (1, 1)
            }
            AgOp::SoftmaxCrossEntropyLoss => {
                same_shape(x0, x[1], name, ("logits", "target"))?;
                (1, 1)
            }
            AgOp::BatchNorm { training, .. } => {
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
            AgOp::Gather(idx, per) => {
                if let Some(k) = idx.iter().find(|&&k| k >= x0.1) {
                    bail!(
                        "ag_embedding: index {k} is out of range; indices are 0-based and must be below the vocabulary size {}",
                        x0.1
                    );
                }
                (x0.0 * per, idx.len() / per)
            }
            AgOp::SliceRows(from, to) => {
                if from >= to || *to > x0.0 {
                    bail!("row slice {}..{} is outside a matrix with {} rows", from + 1, to, x0.0);
                }
                (to - from, x0.1)
            }
            AgOp::ConcatRows => {
                let cols = x0.1;
                if let Some(bad) = x.iter().find(|m| m.1 != cols) {
                    bail!("row concatenation: all pieces need {cols} columns, one is {}", shape_str(*bad));
                }
                (x.iter().map(|m| m.0).sum(), cols)
            }
            AgOp::Conv2d(g, _) => g.check(x)?,
            AgOp::MaxPool2d(g) => {
                let (ow, oh) = g.out_size().map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
                let len = x0.0 * x0.1;
                if len == 0 || len % g.sample() != 0 {
                    bail!(
                        "{name}: the input is {} ({len} values), not a whole batch of images of {}x{}x{} (height x width x channels)",
                        shape_str(x0),
                        g.h,
                        g.w,
                        g.c
                    );
                }
                (g.c, ow * oh * (len / g.sample()))
            }
        })
    }
}
