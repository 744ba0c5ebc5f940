//! The forward definition of every op, over engine ops. Each rule appends
//! the op's nodes to a [`GraphBuilder`] and names the values its backward rule
//! reads (`saved`) and, for batch norm, the batch statistics returned to R;
//! [`forward`] computes them as one graph in the inputs' place. The input
//! shapes were checked by [`AgOp::check`] before.

use super::graph::GraphBuilder;
use super::nodes::*;
use super::op::{Axis, AgOp};
use super::value::{Place, EngineVal};
use crate::base::dtype::DType;
use crate::op::{Op as G, UnaryOp};
use crate::tensor::Context;
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::sync::Arc;

type T = Arc<ETensor>;

/// A forward: the output, the values kept for the backward rule, and
/// auxiliary numbers for R (downloaded; batch norm only).
pub struct Fwd {
    pub out: EngineVal,
    pub saved: Vec<EngineVal>,
    pub aux: Vec<f64>,
}

/// A rule's nodes: the output, saved values and the auxiliary result,
/// each with its shape.
struct Built {
    out: (T, usize, usize),
    saved: Vec<(T, usize, usize)>,
    aux: Option<(T, usize, usize)>,
}

fn built(t: T, rows: usize, cols: usize) -> Result<Built> {
    Ok(Built { out: (t, rows, cols), saved: Vec::new(), aux: None })
}

/// Runs `op` on `xs` (values in `place`), as one graph.
pub fn forward(op: &AgOp, xs: &[EngineVal], place: Place) -> Result<Fwd> {
    if !op.arity_ok(xs.len()) {
        bail!("{}: wrong number of inputs ({})", op.r_name(), xs.len());
    }
    let mut b = GraphBuilder::new(place)?;
    let c = b.ctx()?;
    let bt = build(&mut b, &c, op, xs)?;
    let mut all = vec![bt.out];
    let n_saved = bt.saved.len();
    all.extend(bt.saved);
    all.extend(bt.aux);
    let ts: Vec<T> = all.iter().map(|d| d.0.clone()).collect();
    let done = b.compute(&ts)?;
    let mut vals = done.into_iter().zip(&all).map(|(t, d)| EngineVal::new(t, d.1, d.2, place));
    let out = vals.next().ok_or_else(|| anyhow::anyhow!("internal: the forward graph returned no output"))?;
    let saved: Vec<EngineVal> = vals.by_ref().take(n_saved).collect();
    let aux = match vals.next() {
        Some(a) => a.download()?.data,
        None => Vec::new(),
    };
    Ok(Fwd { out, saved, aux })
}

// BOUNDS-FN: `forward`, the only caller, checked `op.arity_ok(xs.len())`:
// xs.len() >= 1 for every op, and each arm indexes below its op's arity
// (2 for the binary ops and losses, 3 for linear and conv2d).
fn build(b: &mut GraphBuilder, c: &Context, op: &AgOp, xs: &[EngineVal]) -> Result<Built> {
    let x0 = &xs[0];
    let (r0, c0) = x0.shape();
    let x = |b: &GraphBuilder, i: usize| cast(b, c, &xs[i].t);
    match op {
        AgOp::MatMul => built(matmul(b, c, &x(b, 0)?, &x(b, 1)?)?, r0, xs[1].cols),
        AgOp::Linear(a) => {
            let (w, xx, bias) = (x(b, 0)?, x(b, 1)?, x(b, 2)?);
            built(linear(b, c, &w, &xx, &bias, *a)?, r0, xs[1].cols)
        }
        AgOp::Add | AgOp::Sub | AgOp::Mul | AgOp::Div => {
            let (r, cc) = super::op::broadcast_shape(x0.shape(), xs[1].shape(), op.r_name())?;
            let g = match op {
                AgOp::Add => G::Add,
                AgOp::Sub => G::Sub,
                AgOp::Mul => G::Mul,
                _ => G::Div,
            };
            let a = expand(c, &x(b, 0)?, (r0, c0), r, cc)?;
            built(bin(c, g, &a, &x(b, 1)?)?, r, cc)
        }
        AgOp::Scale(s) => built(scale(c, &x(b, 0)?, *s)?, r0, c0),
        AgOp::Relu | AgOp::Sigmoid | AgOp::Tanh | AgOp::Exp | AgOp::Log => {
            let u = match op {
                AgOp::Relu => UnaryOp::Relu,
                AgOp::Sigmoid => UnaryOp::Sigmoid,
                AgOp::Tanh => UnaryOp::Tanh,
                AgOp::Exp => UnaryOp::Exp,
                _ => UnaryOp::Log,
            };
            built(unary(c, u, &x(b, 0)?)?, r0, c0)
        }
        AgOp::Softmax => built(softmax(c, &x(b, 0)?)?, r0, c0),
        AgOp::Pow(p) => {
            let xx = x(b, 0)?;
            built(pow(b, c, &xx, (r0, c0), *p)?, r0, c0)
        }
        AgOp::Clamp(lo, hi) => built(c.op(G::Clamp { min: *lo, max: *hi }, &[x(b, 0)?])?, r0, c0),
        AgOp::Sum(a) | AgOp::Mean(a) => {
            let xx = x(b, 0)?;
            let (t, r, cc, n) = match a {
                Axis::All => (total(c, &xx)?, 1, 1, x0.len()),
                Axis::Rows => (row_sums(b, c, &xx, r0)?, r0, 1, c0),
                Axis::Cols => (col_sums(c, &xx)?, 1, c0, r0),
            };
            let t = if matches!(op, AgOp::Mean(_)) { scale(c, &t, 1.0 / n as f64)? } else { t };
            built(contig(c, &t)?, r, cc)
        }
        AgOp::Reshape(r, cc) => {
            let v = c.reshape(&contig(c, &x(b, 0)?)?, &[*r, *cc])?;
            built(c.op(G::Cont, &[v])?, *r, *cc)
        }
        AgOp::Transpose => built(transpose(c, &x(b, 0)?)?, c0, r0),
        AgOp::MseLoss => {
            let d = bin(c, G::Sub, &x(b, 0)?, &x(b, 1)?)?;
            let s = total(c, &unary(c, UnaryOp::Sqr, &d)?)?;
            built(scale(c, &s, 1.0 / x0.len() as f64)?, 1, 1)
        }
        AgOp::CrossEntropyLoss => {
            let lp = unary(c, UnaryOp::Log, &ce_clamp(c, &x(b, 0)?)?)?;
            let s = total(c, &bin(c, G::Mul, &x(b, 1)?, &lp)?)?;
            built(scale(c, &s, -1.0 / c0 as f64)?, 1, 1)
        }
        AgOp::SoftmaxCrossEntropyLoss => {
            let (l, t) = (x(b, 0)?, x(b, 1)?);
            if b.supports(&G::CrossEntropyLoss) {
                return built(c.reshape(&c.op(G::CrossEntropyLoss, &[l, t])?, &[1, 1])?, 1, 1);
            }
            let p = softmax(c, &l)?;
            // log-sum-exp per column from the softmax: lse = l_i - log p_i for
            // every i; the p-weighted mean keeps it exact where p is tiny.
            let lp = unary(c, UnaryOp::Log, &c.op(G::Clamp { min: 1e-30, max: 1.0 }, std::slice::from_ref(&p))?)?;
            // loss = sum_j tsum_j lse_j - sum(t * l), over n; with lse_j as the
            // p-weighted sum over column j, one sum of all elements does it.
            let plse = bin(c, G::Mul, &p, &bin(c, G::Sub, &l, &lp)?)?;
            let a = bin(c, G::Mul, &plse, &col_sums(c, &t)?)?;
            let d = bin(c, G::Sub, &a, &bin(c, G::Mul, &t, &l)?)?;
            let loss = scale(c, &total(c, &d)?, 1.0 / c0 as f64)?;
            Ok(Built { out: (loss, 1, 1), saved: vec![(p, r0, c0)], aux: None })
        }
        AgOp::BatchNorm { eps, training } => batch_norm(b, c, xs, *eps, *training),
        AgOp::Gather(idx, k) => {
            let ix = b.data(c, Some(DType::I32), &[idx.len()], idx.iter().map(|&k| k as f64).collect())?;
            let t = c.op(G::GetRows, &[x(b, 0)?, ix])?;
            // Stacking k picks per column is a view of the picks: no copy.
            let t = if *k == 1 { t } else { c.reshape(&t, &[r0 * k, idx.len() / k])? };
            built(t, r0 * k, idx.len() / k)
        }
        AgOp::Conv2d(g, a) => {
            let (out, saved) = super::conv_rules::forward(b, c, g, *a, xs)?;
            let (rows, cols) = g.check(&[xs[0].shape(), xs[1].shape(), xs[2].shape()])?;
            Ok(Built { out: (out, rows, cols), saved, aux: None })
        }
        AgOp::MaxPool2d(g) => {
            let (out, saved) = super::pool_rules::forward(b, c, g, x0)?;
            let (rows, cols) = op.check(&[x0.shape()])?;
            Ok(Built { out: (out, rows, cols), saved, aux: None })
        }
        AgOp::SliceRows(from, to) => built(rows_of(c, &x(b, 0)?, *from, *to, c0)?, to - from, c0),
        AgOp::ConcatRows => {
            let mut t = x(b, 0)?;
            for d in &xs[1..] {
                // Many pieces may need more than one context's room.
                let c = b.ctx()?;
                t = c.op(G::Concat { dim: 0 }, &[t, cast(b, &c, &d.t)?])?;
            }
            built(t, xs.iter().map(|d| d.rows).sum(), c0)
        }
    }
}

// BOUNDS-FN: called by `build` for batch norm, whose arity (checked by
// `forward`) is 3 in training and 5 otherwise; xs[3] and xs[4] are read
// only when not training.
fn batch_norm(b: &mut GraphBuilder, c: &Context, xs: &[EngineVal], eps: f64, training: bool) -> Result<Built> {
    let (f, n) = xs[0].shape();
    let x = cast(b, c, &xs[0].t)?;
    let (mu, var) = if training {
        let mu = scale(c, &row_sums(b, c, &x, f)?, 1.0 / n as f64)?;
        let d = bin(c, G::Sub, &x, &mu)?;
        let var = scale(c, &row_sums(b, c, &unary(c, UnaryOp::Sqr, &d)?, f)?, 1.0 / n as f64)?;
        (mu, var)
    } else {
        (cast(b, c, &xs[3].t)?, cast(b, c, &xs[4].t)?)
    };
    let e = b.scalar(c, eps)?;
    let std = unary(c, UnaryOp::Sqrt, &c.op(G::Add1, &[var.clone(), e])?)?;
    let xhat = bin(c, G::Div, &bin(c, G::Sub, &x, &mu)?, &std)?;
    let out = bin(c, G::Mul, &xhat, &cast(b, c, &xs[1].t)?)?;
    let out = bin(c, G::Add, &out, &cast(b, c, &xs[2].t)?)?;
    let aux = if training {
        let mv = c.op(G::Concat { dim: 0 }, &[contig(c, &mu)?, contig(c, &var)?])?;
        Some((mv, 2 * f, 1))
    } else {
        None
    };
    Ok(Built { out: (out, f, n), saved: vec![(xhat, f, n), (contig(c, &std)?, f, 1)], aux })
}
