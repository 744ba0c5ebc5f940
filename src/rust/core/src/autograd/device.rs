//! The device path: values as engine tensors in the residency pools, and the
//! graph pieces that the device forward (`device_fwd.rs`) and backward
//! (`device_bwd.rs`) rules are built from.
//!
//! Layout: an autograd `[rows, cols]` column-major matrix is a ggml tensor
//! with `ne = [rows, cols]` (rows vary fastest), so no data is reordered. A
//! column of the matrix is a ggml "row": ggml's row-wise ops (`soft_max`,
//! `sum_rows`, `get_rows`) work per column of the autograd matrix.

use super::mat::Mat;
use super::ops::Act;
use crate::tensor::Context;
use crate::base::dtype::DType;
use crate::op::{Op as G, UnaryOp};
use crate::residency::{self, Scope};
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::sync::Arc;

pub use super::device_graph::{run_devs, Builder};

type T = Arc<ETensor>;

/// A value on the device: an engine tensor `[rows, cols]` in a pool (or a
/// node of a graph being built).
#[derive(Debug, Clone)]
pub struct Dev {
    pub t: T,
    pub rows: usize,
    pub cols: usize,
}

impl Dev {
    pub fn new(t: T, rows: usize, cols: usize) -> Dev {
        Dev { t, rows, cols }
    }
    /// Uploads `m` (as f32) into a new tensor of the pool `scope`.
    pub fn upload(m: &Mat, scope: Scope) -> Result<Dev> {
        Dev::upload_as(m, scope, DType::F32)
    }
    /// Uploads `m` as `dtype` (f32, or f16 for weights stored in half
    /// precision; products and activations are computed in f32).
    pub fn upload_as(m: &Mat, scope: Scope, dtype: DType) -> Result<Dev> {
        let t = residency::state().upload_matrix(&m.data, m.rows, m.cols, dtype, scope)?;
        Ok(Dev { t, rows: m.rows, cols: m.cols })
    }
    /// A zero-filled tensor of the pool `scope`.
    pub fn zeros(rows: usize, cols: usize, scope: Scope) -> Result<Dev> {
        Dev::upload(&Mat::filled(rows, cols, 0.0), scope)
    }
    /// The value, downloaded to the host.
    pub fn download(&self) -> Result<Mat> {
        let v = crate::tensor::io::get_values(&self.t, 0, Some(self.rows * self.cols))?;
        Mat::new(self.rows, self.cols, v)
    }
    pub fn same_shape(&self, o: &Dev) -> bool {
        self.rows == o.rows && self.cols == o.cols
    }
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

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

/// `x` in f32 (weights may be stored in f16).
pub fn f32_of(c: &Context, x: &T) -> Result<T> {
    if x.dtype() == DType::F32 {
        return Ok(x.clone());
    }
    let dst = c.new_tensor(DType::F32, &x.ne())?;
    c.cpy(x, &dst)
}

/// `t(x)` as a contiguous matrix.
pub fn transpose(c: &Context, x: &T) -> Result<T> {
    c.op(G::Cont, &[c.transpose(x)?])
}

/// `a %*% b` for `a` `[m, k]`, `b` `[k, n]` (ggml: mul_mat(t(a), b)).
pub fn matmul(c: &Context, a: &T, b: &T) -> Result<T> {
    c.op(G::MulMat, &[transpose(c, a)?, b.clone()])
}

/// Per-row sums of a `[rows, cols]` matrix, as a `[rows, 1]` column.
pub fn row_sums(c: &Context, x: &T, rows: usize) -> Result<T> {
    let s = c.op(G::SumRows, &[transpose(c, x)?])?;
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

/// A gradient `g` of a broadcast result, summed back to `[rows, cols]`.
pub fn reduce_to(c: &Context, g: &Dev, rows: usize, cols: usize) -> Result<T> {
    let mut t = g.t.clone();
    if rows == 1 && g.rows != 1 {
        t = col_sums(c, &t)?;
    }
    if cols == 1 && g.cols != 1 {
        t = row_sums(c, &t, rows)?;
    }
    Ok(t)
}

/// `x` tiled to `[rows, cols]` (when it is smaller).
pub fn expand(c: &Context, x: &Dev, rows: usize, cols: usize) -> Result<T> {
    if x.rows == rows && x.cols == cols {
        return Ok(x.t.clone());
    }
    let shape = super::device_graph::blank(c, rows, cols)?;
    c.op(G::Repeat, &[x.t.clone(), shape])
}

pub fn act(c: &Context, a: Act, z: T) -> Result<T> {
    Ok(match a {
        Act::None => z,
        Act::Relu => unary(c, UnaryOp::Relu, &z)?,
        Act::Sigmoid => unary(c, UnaryOp::Sigmoid, &z)?,
        Act::Tanh => unary(c, UnaryOp::Tanh, &z)?,
    })
}

/// `g * act'(z)` from the activation's output `y`.
pub fn act_grad(c: &Context, a: Act, g: &T, y: &T) -> Result<T> {
    Ok(match a {
        Act::None => g.clone(),
        Act::Relu => bin(c, G::Mul, g, &unary(c, UnaryOp::Step, y)?)?,
        Act::Sigmoid => {
            let d = bin(c, G::Sub, y, &unary(c, UnaryOp::Sqr, y)?)?;
            bin(c, G::Mul, g, &d)?
        }
        Act::Tanh => {
            let gy2 = bin(c, G::Mul, g, &unary(c, UnaryOp::Sqr, y)?)?;
            bin(c, G::Sub, g, &gy2)?
        }
    })
}

/// `x ^ p` as R computes it: exact for whole powers (repeated products, the
/// reciprocal for negative ones), else `exp(p log x)` (NaN for negative `x`).
pub fn pow(b: &mut Builder, c: &Context, x: &Dev, p: f64) -> Result<T> {
    if p == 0.0 {
        return b.fill(c, x.rows, x.cols, 1.0);
    }
    if p == 1.0 {
        return Ok(x.t.clone());
    }
    if p == 0.5 {
        return unary(c, UnaryOp::Sqrt, &x.t);
    }
    if p.fract() == 0.0 && p.abs() <= 64.0 {
        let mut n = p.abs() as u32;
        let mut base = x.t.clone();
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
        let r = acc.expect("a non-zero power");
        if p > 0.0 {
            return Ok(r);
        }
        let one = b.fill(c, x.rows, x.cols, 1.0)?;
        return bin(c, G::Div, &one, &r);
    }
    let l = scale(c, &unary(c, UnaryOp::Log, &x.t)?, p)?;
    unary(c, UnaryOp::Exp, &l)
}

/// Updates `dst` in place (its own memory) with the value of `src`; both
/// are already nodes of the graph being built.
pub fn write_into(c: &Context, src: &T, dst: &T) -> Result<T> {
    if src.nelements() != dst.nelements() {
        bail!("internal: in-place update of {} from {}", dst.describe(), src.describe());
    }
    c.cpy(src, dst)
}
