//! The backward rule of every op, over engine ops. A rule appends nodes to
//! the backward pass's graph: it reads the node's values (`xs`, `out`,
//! `saved`) and the gradient `g` of its output (itself a node of the same
//! graph) and returns the gradients of the inputs that need one, as nodes.
//! Nothing is computed here: the tape computes the whole pass at once.

use super::graph::GraphBuilder;
use super::nodes::*;
use super::op::{AgActivation, Axis, AgOp};
use super::value::EngineVal;
use crate::base::dtype::DType;
use crate::op::{Op as G, UnaryOp};
use crate::tensor::Context;
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::sync::Arc;

type T = Arc<ETensor>;

/// Gradients of the inputs of one node (None where `need[i]` is false);
/// `g` has the output's shape.
// BOUNDS-FN: `op.arity_ok(xs.len())` is checked first: xs.len() >= 1 for
// every op and each arm indexes `xs` and `res` (xs.len() entries) below its
// op's arity (2 for the binary ops and losses, 3 for linear, batch norm and
// conv2d); concatenation indexes by the position in `xs`. `saved` is read
// with checked access.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    b: &mut GraphBuilder,
    c: &Context,
    op: &AgOp,
    xs: &[EngineVal],
    out: &EngineVal,
    saved: &[EngineVal],
    g: &T,
    need: &[bool],
) -> Result<Vec<Option<T>>> {
    if !op.arity_ok(xs.len()) {
        bail!("internal: {} backward with {} inputs", op.r_name(), xs.len());
    }
    let missing = || anyhow::anyhow!("internal: {} backward without the values its forward saved", op.r_name());
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    let x = |b: &GraphBuilder, i: usize| cast(b, c, &xs[i].t);
    let shape = |i: usize| xs[i].shape();
    let gs = out.shape();
    let gt = g.clone();
    let mut res: Vec<Option<T>> = vec![None; xs.len()];
    match op {
        AgOp::MatMul | AgOp::Linear(_) => {
            let gz = match op {
                AgOp::Linear(a) if *a != AgActivation::None => act_grad(b, c, *a, &gt, &out.t)?,
                _ => gt,
            };
            // d a = gz %*% t(b) = out_prod(gz, b); d b = t(a) %*% gz = mul_mat(a, gz).
            // (Products read f16 or bf16 weights themselves.)
            if want(0) {
                res[0] = Some(c.op(G::OutProd, &[gz.clone(), xs[1].t.clone()])?);
            }
            if want(1) {
                res[1] = Some(c.op(G::MulMat, &[xs[0].t.clone(), gz.clone()])?);
            }
            if want(2) {
                res[2] = Some(row_sums(b, c, &gz, out.rows)?);
            }
        }
        AgOp::Add | AgOp::Sub => {
            if want(0) {
                let (r, cc) = shape(0);
                res[0] = Some(reduce_to(b, c, &gt, gs, r, cc)?);
            }
            if want(1) {
                let gb = if matches!(op, AgOp::Sub) { unary(c, UnaryOp::Neg, &gt)? } else { gt };
                let (r, cc) = shape(1);
                res[1] = Some(reduce_to(b, c, &gb, gs, r, cc)?);
            }
        }
        AgOp::Mul | AgOp::Div => {
            if want(0) {
                let gop = if matches!(op, AgOp::Mul) { G::Mul } else { G::Div };
                let (r, cc) = shape(0);
                res[0] = Some(reduce_to(b, c, &bin(c, gop, &gt, &x(b, 1)?)?, gs, r, cc)?);
            }
            if want(1) {
                let t = if matches!(op, AgOp::Mul) {
                    bin(c, G::Mul, &gt, &x(b, 0)?)?
                } else {
                    // d(a/b)/db = -(a/b)/b
                    let q = bin(c, G::Div, &bin(c, G::Mul, &gt, &out.t)?, &x(b, 1)?)?;
                    unary(c, UnaryOp::Neg, &q)?
                };
                let (r, cc) = shape(1);
                res[1] = Some(reduce_to(b, c, &t, gs, r, cc)?);
            }
        }
        AgOp::Scale(s) => res[0] = Some(scale(c, &gt, *s)?),
        // relu(x) > 0 exactly where x > 0: its output says where the gradient passes.
        AgOp::Relu => res[0] = Some(act_grad(b, c, AgActivation::Relu, &gt, &out.t)?),
        AgOp::Sigmoid => res[0] = Some(act_grad(b, c, AgActivation::Sigmoid, &gt, &out.t)?),
        AgOp::Tanh => res[0] = Some(act_grad(b, c, AgActivation::Tanh, &gt, &out.t)?),
        AgOp::Softmax => {
            let p = &out.t;
            let dot = col_sums(c, &bin(c, G::Mul, p, &gt)?)?;
            res[0] = Some(bin(c, G::Mul, p, &bin(c, G::Sub, &gt, &dot)?)?);
        }
        AgOp::Log => res[0] = Some(bin(c, G::Div, &gt, &x(b, 0)?)?),
        AgOp::Exp => res[0] = Some(bin(c, G::Mul, &gt, &out.t)?),
        AgOp::Pow(p) => {
            let xx = x(b, 0)?;
            let d = scale(c, &pow(b, c, &xx, shape(0), p - 1.0)?, *p)?;
            res[0] = Some(bin(c, G::Mul, &gt, &d)?);
        }
        AgOp::Clamp(lo, hi) => {
            // 1 where lo < x < hi, else 0.
            let xx = x(b, 0)?;
            let above = unary(c, UnaryOp::Step, &c.op(G::Add1, &[xx.clone(), b.scalar(c, -lo)?])?)?;
            let nx = unary(c, UnaryOp::Neg, &xx)?;
            let below = unary(c, UnaryOp::Step, &c.op(G::Add1, &[nx, b.scalar(c, *hi)?])?)?;
            res[0] = Some(bin(c, G::Mul, &gt, &bin(c, G::Mul, &above, &below)?)?);
        }
        AgOp::Sum(a) | AgOp::Mean(a) => {
            let (r, cc) = shape(0);
            let n = match (op, a) {
                (AgOp::Sum(_), _) => 1,
                (_, Axis::All) => r * cc,
                (_, Axis::Rows) => cc,
                (_, Axis::Cols) => r,
            };
            let t = expand(c, &gt, gs, r, cc)?;
            res[0] = Some(if n == 1 { contig(c, &t)? } else { scale(c, &t, 1.0 / n as f64)? });
        }
        AgOp::Reshape(..) => {
            let (r, cc) = shape(0);
            res[0] = Some(c.reshape(&contig(c, &gt)?, &[r, cc])?);
        }
        AgOp::Transpose => res[0] = Some(transpose(c, &gt)?),
        AgOp::MseLoss => {
            let n = xs[0].len() as f64;
            let d = scale(c, &bin(c, G::Mul, &bin(c, G::Sub, &x(b, 0)?, &x(b, 1)?)?, &gt)?, 2.0 / n)?;
            if want(1) {
                res[1] = Some(unary(c, UnaryOp::Neg, &d)?);
            }
            if want(0) {
                res[0] = Some(d);
            }
        }
        AgOp::CrossEntropyLoss => {
            let k = -1.0 / xs[0].cols as f64;
            let p = ce_clamp(c, &x(b, 0)?)?;
            if want(0) {
                let q = bin(c, G::Mul, &bin(c, G::Div, &x(b, 1)?, &p)?, &gt)?;
                res[0] = Some(scale(c, &q, k)?);
            }
            if want(1) {
                let q = bin(c, G::Mul, &unary(c, UnaryOp::Log, &p)?, &gt)?;
                res[1] = Some(scale(c, &q, k)?);
            }
        }
        AgOp::SoftmaxCrossEntropyLoss => {
            let n = xs[0].cols as f64;
            let back = G::CrossEntropyLossBack;
            if want(0) && b.supports(&back) {
                res[0] = Some(c.op(back, &[gt.clone(), x(b, 0)?, x(b, 1)?])?);
            }
            if (want(0) && res[0].is_none()) || want(1) {
                // The softmax of the forward where it kept it (else again).
                let p = &match saved.first() {
                    Some(p) => p.t.clone(),
                    None => softmax(c, &x(b, 0)?)?,
                };
                if want(0) && res[0].is_none() {
                    let t = x(b, 1)?;
                    let pt = bin(c, G::Mul, p, &col_sums(c, &t)?)?;
                    let q = bin(c, G::Mul, &bin(c, G::Sub, &pt, &t)?, &gt)?;
                    res[0] = Some(scale(c, &q, 1.0 / n)?);
                }
                if want(1) {
                    let q = bin(c, G::Mul, &unary(c, UnaryOp::Log, p)?, &gt)?;
                    res[1] = Some(scale(c, &q, -1.0 / n)?);
                }
            }
        }
        AgOp::BatchNorm { training, .. } => {
            let (f, n) = shape(0);
            let [xhat, std, ..] = saved else { return Err(missing()) };
            let (xhat, std) = (&xhat.t, &std.t);
            let gsum = row_sums(b, c, &gt, f)?;
            let gxh = row_sums(b, c, &bin(c, G::Mul, &gt, xhat)?, f)?;
            if want(0) {
                let s = bin(c, G::Div, &x(b, 1)?, std)?;
                let inner = if *training {
                    let k = 1.0 / n as f64;
                    let a = bin(c, G::Sub, &gt, &scale(c, &gsum, k)?)?;
                    bin(c, G::Sub, &a, &bin(c, G::Mul, xhat, &scale(c, &gxh, k)?)?)?
                } else {
                    gt
                };
                res[0] = Some(bin(c, G::Mul, &inner, &s)?);
            }
            if want(1) {
                res[1] = Some(gxh);
            }
            if want(2) {
                res[2] = Some(gsum);
            }
        }
        AgOp::Gather(idx, k) => {
            let (r, v) = shape(0);
            let g = if *k == 1 { gt } else { c.reshape(&contig(c, &gt)?, &[r, idx.len()])? };
            res[0] = Some(gather_grad(b, c, g, idx, r, v)?)
        }
        AgOp::Conv2d(geom, a) => {
            res = super::conv_rules::backward(b, c, geom, *a, xs, out, saved, &gt, [want(0), want(1), want(2)])?;
        }
        AgOp::MaxPool2d(geom) => {
            if want(0) {
                let packed = saved.first().ok_or_else(missing)?;
                res[0] = Some(super::pool_rules::backward(b, c, geom, &xs[0], packed, &gt)?);
            }
        }
        AgOp::SliceRows(from, to) => {
            let (r, cc) = shape(0);
            let mut t = gt;
            if *from > 0 {
                t = c.op(G::Concat { dim: 0 }, &[b.fill(c, *from, cc, 0.0)?, contig(c, &t)?])?;
            }
            if *to < r {
                t = c.op(G::Concat { dim: 0 }, &[contig(c, &t)?, b.fill(c, r - to, cc, 0.0)?])?;
            }
            res[0] = Some(t);
        }
        AgOp::ConcatRows => {
            let mut off = 0;
            for (i, m) in xs.iter().enumerate() {
                if want(i) {
                    let c = b.ctx()?;
                    res[i] = Some(rows_of(&c, &gt, off, off + m.rows, m.cols)?);
                }
                off += m.rows;
            }
        }
    }
    for (r, &n) in res.iter_mut().zip(need) {
        if !n {
            *r = None;
        }
    }
    Ok(res)
}

/// The gradient [rows, v] of a gather of columns `idx` of a [rows, v]
/// matrix, from `g` [rows, idx.len()]: column j sums the columns of `g`
/// that read column j. When no column is read more than `m` times with
/// `m * rows < idx.len()` (the taps of a convolution's patches), it is the
/// sum of `m` gathers of `g` with a zero column appended (memory m * rows * v);
/// otherwise `g %*% t(onehot)` (memory v * idx.len()).
// BOUNDS-FN: every i in `idx` is < v (checked by the first loop); `oh`
// holds v n values and k < n; seen[i] < hits[i] <= m where `inv` (m v
// values) is written, and j < m.
fn gather_grad(b: &mut GraphBuilder, c: &Context, g: T, idx: &[usize], rows: usize, v: usize) -> Result<T> {
    let mut hits = vec![0usize; v];
    for &i in idx {
        let Some(h) = hits.get_mut(i) else {
            bail!("ag_embedding: index {i} is out of range; indices are 0-based and must be below the vocabulary size {v}")
        };
        *h += 1;
    }
    let m = hits.iter().copied().max().unwrap_or(0);
    let n = idx.len();
    if m == 0 {
        return b.fill(c, rows, v, 0.0);
    }
    if m.saturating_mul(rows) >= n {
        let mut oh = zeros_checked(v.saturating_mul(n))?;
        for (k, &i) in idx.iter().enumerate() {
            oh[i + k * v] = 1.0;
        }
        let oh = b.data(c, None, &[v, n], oh)?;
        return c.op(G::OutProd, &[g, oh]);
    }
    // inv[j][col] = the j-th position reading `col`, or n (the zero column).
    let mut inv = zeros_checked(m.saturating_mul(v))?;
    inv.iter_mut().for_each(|x| *x = n as f64);
    let mut seen = vec![0usize; v];
    for (k, &i) in idx.iter().enumerate() {
        inv[seen[i] * v + i] = k as f64;
        seen[i] += 1;
    }
    let zero = b.fill(c, rows, 1, 0.0)?;
    let ge = c.op(G::Concat { dim: 1 }, &[contig(c, &g)?, zero])?;
    let mut acc: Option<T> = None;
    for j in 0..m {
        let ix = b.data(c, Some(DType::I32), &[v], inv[j * v..(j + 1) * v].to_vec())?;
        let part = c.op(G::GetRows, &[ge.clone(), ix])?;
        acc = Some(match acc {
            None => part,
            Some(a) => bin(c, G::Add, &a, &part)?,
        });
    }
    acc.ok_or_else(|| anyhow::anyhow!("internal: a gather gradient with no positions"))
}

/// A zeroed vector of `len` values, or an error (not an abort) when the
/// memory cannot be had.
fn zeros_checked(len: usize) -> Result<Vec<f64>> {
    crate::base::alloc::try_vec(len, 0.0, "the gradient of an embedding lookup")
}
