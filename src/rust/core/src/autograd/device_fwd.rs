//! Forward graphs of every op on the device. Each rule appends the op's
//! nodes to a [`Builder`] and names the values its backward rule reads
//! (`saved`) and, for batch norm, the batch statistics returned to R.
//!
//! A rule answers `None` when the input shapes do not fit the op: the tape
//! then runs the host kernel, whose error names the shapes.

use super::device::*;
use super::ops::{Axis, Op, CE_EPS};
use crate::tensor::Context;
use crate::base::dtype::DType;
use crate::op::{Op as G, UnaryOp};
use crate::tensor::Tensor as ETensor;
use anyhow::Result;
use std::sync::Arc;

type T = Arc<ETensor>;

/// A forward on the device: the output, the values kept for the backward
/// rule, and auxiliary numbers for R (downloaded; batch norm only).
pub struct DevFwd {
    pub out: Dev,
    pub saved: Vec<Dev>,
    pub aux: Vec<f64>,
}

struct Built {
    out: Dev,
    saved: Vec<Dev>,
    aux: Option<Dev>,
}

fn built(t: T, rows: usize, cols: usize) -> Result<Option<Built>> {
    Ok(Some(Built { out: Dev::new(t, rows, cols), saved: Vec::new(), aux: None }))
}

/// The shape of a recycled element-wise result: each dimension equal or 1.
pub fn broadcast_dims(a: &Dev, b: &Dev) -> Option<(usize, usize)> {
    let dim = |x: usize, y: usize| match (x, y) {
        _ if x == y => Some(x),
        (1, _) => Some(y),
        (_, 1) => Some(x),
        _ => None,
    };
    Some((dim(a.rows, b.rows)?, dim(a.cols, b.cols)?))
}

/// Runs `op` on device values; `None` when the shapes need the host path.
pub fn forward(op: &Op, xs: &[Dev]) -> Option<Result<DevFwd>> {
    if !op.arity_ok(xs.len()) {
        return None;
    }
    let mut b = Builder::new();
    let r = (|| {
        let c = b.ctx()?;
        build(&mut b, &c, op, xs)
    })();
    let bt = match r {
        Ok(Some(bt)) => bt,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        let mut all = vec![bt.out.clone()];
        all.extend(bt.saved.iter().cloned());
        all.extend(bt.aux.iter().cloned());
        let ts: Vec<T> = all.iter().map(|d| d.t.clone()).collect();
        let done = b.compute(&ts)?;
        let mut devs = done.into_iter().zip(&all).map(|(t, d)| Dev::new(t, d.rows, d.cols));
        let out = devs.next().expect("the output");
        let saved: Vec<Dev> = devs.by_ref().take(bt.saved.len()).collect();
        let aux = match devs.next() {
            Some(a) => a.download()?.data,
            None => Vec::new(),
        };
        Ok(DevFwd { out, saved, aux })
    })())
}

fn build(b: &mut Builder, c: &Context, op: &Op, xs: &[Dev]) -> Result<Option<Built>> {
    let x0 = &xs[0];
    let (r0, c0) = (x0.rows, x0.cols);
    let x = |i: usize| f32_of(c, &xs[i].t);
    match op {
        Op::MatMul => {
            if x0.cols != xs[1].rows {
                return Ok(None);
            }
            built(matmul(c, &x0.t, &xs[1].t)?, r0, xs[1].cols)
        }
        Op::Linear(a) => {
            let (w, xx, bias) = (x0, &xs[1], &xs[2]);
            if w.cols != xx.rows || bias.rows != w.rows || bias.cols != 1 {
                return Ok(None);
            }
            let z = bin(c, G::Add, &matmul(c, &w.t, &xx.t)?, &f32_of(c, &bias.t)?)?;
            built(act(c, *a, z)?, w.rows, xx.cols)
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let Some((r, cc)) = broadcast_dims(x0, &xs[1]) else { return Ok(None) };
            let g = match op {
                Op::Add => G::Add,
                Op::Sub => G::Sub,
                Op::Mul => G::Mul,
                _ => G::Div,
            };
            let a = expand(c, &Dev::new(x(0)?, r0, c0), r, cc)?;
            built(bin(c, g, &a, &x(1)?)?, r, cc)
        }
        Op::Scale(s) => built(scale(c, &x(0)?, *s)?, r0, c0),
        Op::Relu | Op::Sigmoid | Op::Tanh | Op::Exp | Op::Log => {
            let u = match op {
                Op::Relu => UnaryOp::Relu,
                Op::Sigmoid => UnaryOp::Sigmoid,
                Op::Tanh => UnaryOp::Tanh,
                Op::Exp => UnaryOp::Exp,
                _ => UnaryOp::Log,
            };
            built(unary(c, u, &x(0)?)?, r0, c0)
        }
        Op::Softmax => built(softmax(c, &x(0)?)?, r0, c0),
        Op::Pow(p) => built(pow(b, c, &Dev::new(x(0)?, r0, c0), *p)?, r0, c0),
        Op::Clamp(lo, hi) => built(c.op(G::Clamp { min: *lo, max: *hi }, &[x(0)?])?, r0, c0),
        Op::Sum(a) | Op::Mean(a) => {
            let xx = x(0)?;
            let (t, r, cc, n) = match a {
                Axis::All => (total(c, &xx)?, 1, 1, x0.len()),
                Axis::Rows => (row_sums(c, &xx, r0)?, r0, 1, c0),
                Axis::Cols => (col_sums(c, &xx)?, 1, c0, r0),
            };
            let t = if matches!(op, Op::Mean(_)) { scale(c, &t, 1.0 / n as f64)? } else { t };
            built(contig(c, &t)?, r, cc)
        }
        Op::Reshape(r, cc) => {
            if r.checked_mul(*cc) != Some(x0.len()) {
                return Ok(None);
            }
            let v = c.reshape(&contig(c, &x(0)?)?, &[*r, *cc])?;
            built(c.op(G::Cont, &[v])?, *r, *cc)
        }
        Op::Transpose => built(transpose(c, &x(0)?)?, c0, r0),
        Op::MseLoss => {
            if !x0.same_shape(&xs[1]) {
                return Ok(None);
            }
            let d = bin(c, G::Sub, &x(0)?, &x(1)?)?;
            let s = total(c, &unary(c, UnaryOp::Sqr, &d)?)?;
            built(scale(c, &s, 1.0 / x0.len() as f64)?, 1, 1)
        }
        Op::CrossEntropyLoss => {
            if !x0.same_shape(&xs[1]) {
                return Ok(None);
            }
            let lp = unary(c, UnaryOp::Log, &ce_clamp(c, &x(0)?)?)?;
            let s = total(c, &bin(c, G::Mul, &x(1)?, &lp)?)?;
            built(scale(c, &s, -1.0 / c0 as f64)?, 1, 1)
        }
        Op::SoftmaxCrossEntropyLoss => {
            if !x0.same_shape(&xs[1]) {
                return Ok(None);
            }
            let (l, t) = (x(0)?, x(1)?);
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
            Ok(Some(Built { out: Dev::new(loss, 1, 1), saved: vec![Dev::new(p, r0, c0)], aux: None }))
        }
        Op::BatchNorm { eps, training } => batch_norm(b, c, xs, *eps, *training),
        Op::Gather(idx) => {
            if idx.iter().any(|&k| k >= c0) {
                return Ok(None);
            }
            let ix = b.data(c, DType::I32, &[idx.len()], idx.iter().map(|&k| k as f64).collect())?;
            built(c.op(G::GetRows, &[x(0)?, ix])?, r0, idx.len())
        }
        Op::SliceRows(from, to) => {
            if from >= to || *to > r0 {
                return Ok(None);
            }
            built(rows_of(c, &x(0)?, *from, *to, c0)?, to - from, c0)
        }
        Op::ConcatRows => {
            if xs.iter().any(|d| d.cols != c0) {
                return Ok(None);
            }
            let mut t = x(0)?;
            for d in &xs[1..] {
                // Many pieces may need more than one context's room.
                let c = b.ctx()?;
                t = c.op(G::Concat { dim: 0 }, &[t, f32_of(&c, &d.t)?])?;
            }
            built(t, xs.iter().map(|d| d.rows).sum(), c0)
        }
    }
}

/// Column-wise softmax (ggml's soft_max works along ne0, a column here).
pub fn softmax(c: &Context, x: &T) -> Result<T> {
    c.op(G::SoftMax { scale: 1.0, max_bias: 0.0 }, &[contig(c, x)?])
}

/// Probabilities kept away from 0 and 1, as cross-entropy does.
pub fn ce_clamp(c: &Context, p: &T) -> Result<T> {
    c.op(G::Clamp { min: CE_EPS, max: 1.0 - CE_EPS }, std::slice::from_ref(p))
}

/// Rows `from..to` of a `[rows, cols]` matrix, contiguous.
pub fn rows_of(c: &Context, x: &T, from: usize, to: usize, cols: usize) -> Result<T> {
    let l = x.layout();
    let v = c.view(x, &[to - from, cols], &[l.nb[1]], from * l.nb[0])?;
    c.op(G::Cont, &[v])
}

fn batch_norm(b: &mut Builder, c: &Context, xs: &[Dev], eps: f64, training: bool) -> Result<Option<Built>> {
    let (m, f, n) = (&xs[0], xs[0].rows, xs[0].cols);
    let col = |d: &Dev| d.rows == f && d.cols == 1;
    let stats_ok = if training { n > 0 } else { col(&xs[3]) && col(&xs[4]) };
    if !col(&xs[1]) || !col(&xs[2]) || !stats_ok {
        return Ok(None);
    }
    let x = f32_of(c, &m.t)?;
    let (mu, var) = if training {
        let mu = scale(c, &row_sums(c, &x, f)?, 1.0 / n as f64)?;
        let d = bin(c, G::Sub, &x, &mu)?;
        let var = scale(c, &row_sums(c, &unary(c, UnaryOp::Sqr, &d)?, f)?, 1.0 / n as f64)?;
        (mu, var)
    } else {
        (f32_of(c, &xs[3].t)?, f32_of(c, &xs[4].t)?)
    };
    let e = b.scalar(c, eps)?;
    let std = unary(c, UnaryOp::Sqrt, &c.op(G::Add1, &[var.clone(), e])?)?;
    let xhat = bin(c, G::Div, &bin(c, G::Sub, &x, &mu)?, &std)?;
    let out = bin(c, G::Mul, &xhat, &f32_of(c, &xs[1].t)?)?;
    let out = bin(c, G::Add, &out, &f32_of(c, &xs[2].t)?)?;
    let aux = if training {
        let mv = c.op(G::Concat { dim: 0 }, &[contig(c, &mu)?, contig(c, &var)?])?;
        Some(Dev::new(mv, 2 * f, 1))
    } else {
        None
    };
    Ok(Some(Built {
        out: Dev::new(out, f, n),
        saved: vec![Dev::new(xhat, f, n), Dev::new(contig(c, &std)?, f, 1)],
        aux,
    }))
}
