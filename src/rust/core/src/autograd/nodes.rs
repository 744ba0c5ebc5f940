//! The graph pieces the forward and backward rules are built from, over
//! engine ops.
//!
//! Layout: an autograd `[rows, cols]` column-major matrix is a ggml tensor
//! with `ne = [rows, cols]` (rows vary fastest), so no data is reordered. A
//! column of the matrix is a ggml "row": ggml's row-wise ops (`soft_max`,
//! `sum_rows`, `get_rows`) work per column of the autograd matrix.

use super::graph::{blank, GraphBuilder};
use super::op::{AgActivation, CE_EPS};
use crate::tensor::Context;
use crate::op::{Op as G, UnaryOp};
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::sync::Arc;

type T = Arc<ETensor>;

pub fn unary(c: &Context, u: UnaryOp, x: &T) -> Result<T> {
    c.op(G::Unary(u), std::slice::from_ref(x))
}

pub fn bin(c: &Context, op: G, a: &T, b: &T) -> Result<T> {
    c.op(op, &[a.clone(), b.clone()])
}

pub fn scale(c: &Context, x: &T, s: f64) -> Result<T> {
    c.op(G::Scale { s }, std::slice::from_ref(x))
}

/// `x`, contiguous (a copy only when it is a strided view).
pub fn contig(c: &Context, x: &T) -> Result<T> {
    if x.layout().is_contiguous() {
        Ok(x.clone())
    } else {
        c.op(G::Cont, std::slice::from_ref(x))
    }
}

/// `x` as an operand of a reading op: the CPU backend reads strided views
/// itself; other backends get a contiguous copy.
fn operand(b: &GraphBuilder, c: &Context, x: &T) -> Result<T> {
    if b.reads_views() {
        Ok(x.clone())
    } else {
        contig(c, x)
    }
}

/// `x` in the builder's compute type (weights may be stored in f16).
pub fn cast(b: &GraphBuilder, c: &Context, x: &T) -> Result<T> {
    if x.dtype() == b.dtype() {
        return Ok(x.clone());
    }
    let dst = c.new_tensor(b.dtype(), &x.dims())?;
    c.cpy(x, &dst)
}

/// `t(x)` as a contiguous matrix.
pub fn transpose(c: &Context, x: &T) -> Result<T> {
    c.op(G::Cont, &[c.transpose(x)?])
}

/// `a %*% b` for `a` `[m, k]`, `b` `[k, n]` (ggml: mul_mat(t(a), b)).
pub fn matmul(b: &GraphBuilder, c: &Context, x: &T, y: &T) -> Result<T> {
    c.op(G::MulMat, &[operand(b, c, &c.transpose(x)?)?, y.clone()])
}

/// `act(w %*% x + bias)` for `w` `[m, k]`, `x` `[k, n]`, `bias` `[m, 1]`:
/// one fused product where the backend has it, else product, sum and
/// activation.
pub fn linear(b: &GraphBuilder, c: &Context, w: &T, x: &T, bias: &T, a: AgActivation) -> Result<T> {
    let fused = G::Linear { act: a.unary() };
    if b.supports(&fused) {
        return c.op(fused, &[c.transpose(w)?, x.clone(), bias.clone()]);
    }
    let z = bin(c, G::Add, &matmul(b, c, w, x)?, bias)?;
    act(c, a, z)
}

/// Per-row sums of a `[rows, cols]` matrix, as a `[rows, 1]` column.
pub fn row_sums(b: &GraphBuilder, c: &Context, x: &T, rows: usize) -> Result<T> {
    let t = c.transpose(x)?;
    let s = c.op(G::SumRows, &[if b.reads_views() { t } else { contig(c, &t)? }])?;
    c.reshape(&s, &[rows, 1])
}

/// Per-column sums, as a `[1, cols]` row.
pub fn col_sums(c: &Context, x: &T) -> Result<T> {
    c.op(G::SumRows, &[contig(c, x)?])
}

/// The sum of every element, `[1, 1]`.
pub fn total(c: &Context, x: &T) -> Result<T> {
    let s = c.op(G::Sum, &[contig(c, x)?])?;
    c.reshape(&s, &[1, 1])
}

/// A gradient `g` (`[gr, gc]`) of a broadcast result, summed back to `[rows, cols]`.
pub fn reduce_to(b: &GraphBuilder, c: &Context, g: &T, (gr, gc): (usize, usize), rows: usize, cols: usize) -> Result<T> {
    let mut t = g.clone();
    if rows == 1 && gr != 1 {
        t = col_sums(c, &t)?;
    }
    if cols == 1 && gc != 1 {
        t = row_sums(b, c, &t, rows)?;
    }
    Ok(t)
}

/// `x` (`[xr, xc]`) tiled to `[rows, cols]` (when it is smaller).
pub fn expand(c: &Context, x: &T, (xr, xc): (usize, usize), rows: usize, cols: usize) -> Result<T> {
    if xr == rows && xc == cols {
        return Ok(x.clone());
    }
    let shape = blank(c, rows, cols)?;
    c.op(G::Repeat, &[x.clone(), shape])
}

pub fn act(c: &Context, a: AgActivation, z: T) -> Result<T> {
    match a.unary() {
        None => Ok(z),
        Some(u) => unary(c, u, &z),
    }
}

/// `g * act'(z)` from the activation's output `y`: one node where the
/// backend has it.
pub fn act_grad(b: &GraphBuilder, c: &Context, a: AgActivation, g: &T, y: &T) -> Result<T> {
    if let Some(u) = a.unary() {
        let fused = G::UnaryBack { u };
        if b.supports(&fused) {
            return c.op(fused, &[g.clone(), y.clone()]);
        }
    }
    Ok(match a {
        AgActivation::None => g.clone(),
        AgActivation::Relu => bin(c, G::Mul, g, &unary(c, UnaryOp::Step, y)?)?,
        AgActivation::Sigmoid => {
            let d = bin(c, G::Sub, y, &unary(c, UnaryOp::Sqr, y)?)?;
            bin(c, G::Mul, g, &d)?
        }
        AgActivation::Tanh => {
            let gy2 = bin(c, G::Mul, g, &unary(c, UnaryOp::Sqr, y)?)?;
            bin(c, G::Sub, g, &gy2)?
        }
    })
}

/// `x ^ p` (`x` `[rows, cols]`) as R computes it: exact for whole powers
/// (repeated products, the reciprocal for negative ones), else
/// `exp(p log x)` (NaN for negative `x`).
pub fn pow(b: &mut GraphBuilder, c: &Context, x: &T, (rows, cols): (usize, usize), p: f64) -> Result<T> {
    if p == 0.0 {
        return b.fill(c, rows, cols, 1.0);
    }
    if p == 1.0 {
        return Ok(x.clone());
    }
    if p == 0.5 {
        return unary(c, UnaryOp::Sqrt, x);
    }
    if p.fract() == 0.0 && p.abs() <= 64.0 {
        let mut n = p.abs() as u32;
        let mut base = x.clone();
        let mut acc: Option<T> = None;
        while n > 0 {
            if n & 1 == 1 {
                acc = Some(match acc {
                    None => base.clone(),
                    Some(a) => bin(c, G::Mul, &a, &base)?,
                });
            }
            n >>= 1;
            if n > 0 {
                base = unary(c, UnaryOp::Sqr, &base)?;
            }
        }
        let r = acc.ok_or_else(|| anyhow::anyhow!("internal: power {p} has no factor"))?;
        if p > 0.0 {
            return Ok(r);
        }
        let one = b.fill(c, rows, cols, 1.0)?;
        return bin(c, G::Div, &one, &r);
    }
    let l = scale(c, &unary(c, UnaryOp::Log, x)?, p)?;
    unary(c, UnaryOp::Exp, &l)
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
// BOUNDS-FN: `nb` is Dims ([usize; MAX_DIMS]) indexed by literals.
pub fn rows_of(c: &Context, x: &T, from: usize, to: usize, cols: usize) -> Result<T> {
    let l = x.layout();
    let v = c.view(x, &[to - from, cols], &[l.nb[1]], from * l.nb[0])?;
    c.op(G::Cont, &[v])
}

/// Updates `dst` in place (its own memory) with the value of `src`; both
/// are already nodes of the graph being built.
pub fn write_into(c: &Context, src: &T, dst: &T) -> Result<T> {
    if src.nelements() != dst.nelements() {
        bail!("internal: in-place update of {} from {}", dst.describe(), src.describe());
    }
    c.cpy(src, dst)
}
