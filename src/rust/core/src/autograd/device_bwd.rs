//! Backward rules of every op on the device. A rule appends nodes to the
//! backward pass's graph: it reads the node's device values (`xs`, `out`,
//! `saved`) and the gradient `g` of its output (itself a node of the same
//! graph) and returns the gradients of the inputs that need one, as nodes.
//! Nothing is computed here: the tape computes the whole pass at once.

use super::device::*;
use super::device_fwd::{ce_clamp, rows_of};
use super::ops::{Act, Axis, Op};
use crate::tensor::Context;
use crate::base::dtype::DType;
use crate::op::{Op as G, UnaryOp};
use anyhow::Result;
use std::sync::Arc;

type T = Arc<crate::tensor::Tensor>;

/// Gradients of the inputs of one node (None where `need[i]` is false).
#[allow(clippy::too_many_arguments)]
pub fn backward(
    b: &mut Builder,
    c: &Context,
    op: &Op,
    xs: &[Dev],
    out: &Dev,
    saved: &[Dev],
    g: &Dev,
    need: &[bool],
) -> Result<Vec<Option<Dev>>> {
    let want = |i: usize| need.get(i).copied().unwrap_or(false);
    let x = |i: usize| f32_of(c, &xs[i].t);
    let shape = |i: usize| (xs[i].rows, xs[i].cols);
    let dev = |t, i: usize| Some(Dev::new(t, xs[i].rows, xs[i].cols));
    let gt = g.t.clone();
    let mut res: Vec<Option<Dev>> = vec![None; xs.len()];
    match op {
        Op::MatMul | Op::Linear(_) => {
            let gz = match op {
                Op::Linear(a) if *a != Act::None => act_grad(c, *a, &gt, &out.t)?,
                _ => gt,
            };
            // d a = gz %*% t(b) = out_prod(gz, b); d b = t(a) %*% gz = mul_mat(a, gz).
            if want(0) {
                res[0] = dev(c.op(G::OutProd, &[gz.clone(), xs[1].t.clone()])?, 0);
            }
            if want(1) {
                res[1] = dev(c.op(G::MulMat, &[xs[0].t.clone(), gz.clone()])?, 1);
            }
            if want(2) {
                res[2] = dev(row_sums(c, &gz, out.rows)?, 2);
            }
        }
        Op::Add | Op::Sub => {
            if want(0) {
                res[0] = dev(reduce_to(c, g, xs[0].rows, xs[0].cols)?, 0);
            }
            if want(1) {
                let gb = if matches!(op, Op::Sub) { unary(c, UnaryOp::Neg, &gt)? } else { gt };
                res[1] = dev(reduce_to(c, &Dev::new(gb, g.rows, g.cols), xs[1].rows, xs[1].cols)?, 1);
            }
        }
        Op::Mul | Op::Div => {
            let red = |t, i: usize| reduce_to(c, &Dev::new(t, g.rows, g.cols), xs[i].rows, xs[i].cols);
            if want(0) {
                let gop = if matches!(op, Op::Mul) { G::Mul } else { G::Div };
                res[0] = dev(red(bin(c, gop, &gt, &x(1)?)?, 0)?, 0);
            }
            if want(1) {
                let t = if matches!(op, Op::Mul) {
                    bin(c, G::Mul, &gt, &x(0)?)?
                } else {
                    // d(a/b)/db = -(a/b)/b
                    let q = bin(c, G::Div, &bin(c, G::Mul, &gt, &out.t)?, &x(1)?)?;
                    unary(c, UnaryOp::Neg, &q)?
                };
                res[1] = dev(red(t, 1)?, 1);
            }
        }
        Op::Scale(s) => res[0] = dev(scale(c, &gt, *s)?, 0),
        Op::Relu => res[0] = dev(bin(c, G::Mul, &gt, &unary(c, UnaryOp::Step, &x(0)?)?)?, 0),
        Op::Sigmoid => res[0] = dev(act_grad(c, Act::Sigmoid, &gt, &out.t)?, 0),
        Op::Tanh => res[0] = dev(act_grad(c, Act::Tanh, &gt, &out.t)?, 0),
        Op::Softmax => {
            let p = &out.t;
            let dot = col_sums(c, &bin(c, G::Mul, p, &gt)?)?;
            res[0] = dev(bin(c, G::Mul, p, &bin(c, G::Sub, &gt, &dot)?)?, 0);
        }
        Op::Log => res[0] = dev(bin(c, G::Div, &gt, &x(0)?)?, 0),
        Op::Exp => res[0] = dev(bin(c, G::Mul, &gt, &out.t)?, 0),
        Op::Pow(p) => {
            let xd = Dev::new(x(0)?, xs[0].rows, xs[0].cols);
            let d = scale(c, &pow(b, c, &xd, p - 1.0)?, *p)?;
            res[0] = dev(bin(c, G::Mul, &gt, &d)?, 0);
        }
        Op::Clamp(lo, hi) => {
            // 1 where lo < x < hi, else 0.
            let xx = x(0)?;
            let above = unary(c, UnaryOp::Step, &c.op(G::Add1, &[xx.clone(), b.scalar(c, -lo)?])?)?;
            let nx = unary(c, UnaryOp::Neg, &xx)?;
            let below = unary(c, UnaryOp::Step, &c.op(G::Add1, &[nx, b.scalar(c, *hi)?])?)?;
            res[0] = dev(bin(c, G::Mul, &gt, &bin(c, G::Mul, &above, &below)?)?, 0);
        }
        Op::Sum(a) | Op::Mean(a) => {
            let (r, cc) = shape(0);
            let n = match (op, a) {
                (Op::Sum(_), _) => 1,
                (_, Axis::All) => r * cc,
                (_, Axis::Rows) => cc,
                (_, Axis::Cols) => r,
            };
            let t = expand(c, g, r, cc)?;
            res[0] = dev(if n == 1 { contig(c, &t)? } else { scale(c, &t, 1.0 / n as f64)? }, 0);
        }
        Op::Reshape(..) => {
            let (r, cc) = shape(0);
            res[0] = dev(c.reshape(&contig(c, &gt)?, &[r, cc])?, 0);
        }
        Op::Transpose => res[0] = dev(transpose(c, &gt)?, 0),
        Op::MseLoss => {
            let n = xs[0].len() as f64;
            let d = scale(c, &bin(c, G::Mul, &bin(c, G::Sub, &x(0)?, &x(1)?)?, &gt)?, 2.0 / n)?;
            if want(1) {
                res[1] = dev(unary(c, UnaryOp::Neg, &d)?, 1);
            }
            if want(0) {
                res[0] = dev(d, 0);
            }
        }
        Op::CrossEntropyLoss => {
            let k = -1.0 / xs[0].cols as f64;
            let p = ce_clamp(c, &x(0)?)?;
            if want(0) {
                let q = bin(c, G::Mul, &bin(c, G::Div, &x(1)?, &p)?, &gt)?;
                res[0] = dev(scale(c, &q, k)?, 0);
            }
            if want(1) {
                let q = bin(c, G::Mul, &unary(c, UnaryOp::Log, &p)?, &gt)?;
                res[1] = dev(scale(c, &q, k)?, 1);
            }
        }
        Op::SoftmaxCrossEntropyLoss => {
            let n = xs[0].cols as f64;
            let p = &saved[0].t;
            if want(0) {
                let t = x(1)?;
                let pt = bin(c, G::Mul, p, &col_sums(c, &t)?)?;
                let q = bin(c, G::Mul, &bin(c, G::Sub, &pt, &t)?, &gt)?;
                res[0] = dev(scale(c, &q, 1.0 / n)?, 0);
            }
            if want(1) {
                let q = bin(c, G::Mul, &unary(c, UnaryOp::Log, p)?, &gt)?;
                res[1] = dev(scale(c, &q, -1.0 / n)?, 1);
            }
        }
        Op::BatchNorm { training, .. } => {
            let (f, n) = shape(0);
            let (xhat, std) = (&saved[0].t, &saved[1].t);
            let gsum = row_sums(c, &gt, f)?;
            let gxh = row_sums(c, &bin(c, G::Mul, &gt, xhat)?, f)?;
            if want(0) {
                let s = bin(c, G::Div, &x(1)?, std)?;
                let inner = if *training {
                    let k = 1.0 / n as f64;
                    let a = bin(c, G::Sub, &gt, &scale(c, &gsum, k)?)?;
                    bin(c, G::Sub, &a, &bin(c, G::Mul, xhat, &scale(c, &gxh, k)?)?)?
                } else {
                    gt
                };
                res[0] = dev(bin(c, G::Mul, &inner, &s)?, 0);
            }
            if want(1) {
                res[1] = dev(gxh, 1);
            }
            if want(2) {
                res[2] = dev(gsum, 2);
            }
        }
        Op::Gather(idx) => res[0] = dev(gather_grad(b, c, gt, idx, xs[0].rows, xs[0].cols)?, 0),
        Op::SliceRows(from, to) => {
            let (r, cc) = shape(0);
            let mut t = gt;
            if *from > 0 {
                t = c.op(G::Concat { dim: 0 }, &[b.fill(c, *from, cc, 0.0)?, contig(c, &t)?])?;
            }
            if *to < r {
                t = c.op(G::Concat { dim: 0 }, &[contig(c, &t)?, b.fill(c, r - to, cc, 0.0)?])?;
            }
            res[0] = dev(t, 0);
        }
        Op::ConcatRows => {
            let mut off = 0;
            for (i, m) in xs.iter().enumerate() {
                if want(i) {
                    let c = b.ctx()?;
                    res[i] = dev(rows_of(&c, &gt, off, off + m.rows, m.cols)?, i);
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
fn gather_grad(b: &mut Builder, c: &Context, g: T, idx: &[usize], rows: usize, v: usize) -> Result<T> {
    let mut hits = vec![0usize; v];
    for &i in idx {
        hits[i] += 1;
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
        let oh = b.data(c, DType::F32, &[v, n], oh)?;
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
        let ix = b.data(c, DType::I32, &[v], inv[j * v..(j + 1) * v].to_vec())?;
        let part = c.op(G::GetRows, &[ge.clone(), ix])?;
        acc = Some(match acc {
            None => part,
            Some(a) => bin(c, G::Add, &a, &part)?,
        });
    }
    Ok(acc.expect("at least one gather"))
}

/// A zeroed vector of `len` values, or an error (not an abort) when the
/// memory cannot be had.
fn zeros_checked(len: usize) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        anyhow::anyhow!("the gradient of an embedding lookup needs {len} values of work space, more than this machine can give")
    })?;
    v.resize(len, 0.0);
    Ok(v)
}
