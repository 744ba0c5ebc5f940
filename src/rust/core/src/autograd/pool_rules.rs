//! The forward and backward rules of 2-D max pooling (`AgOp::MaxPool2d`)
//! on the channels-first layout (`op::max_pool`).
//!
//! - Where the backend has the engine's max pooling (the CPU), the forward
//!   is one pass that writes the maxima and the tap of each (`[P, 2]`, kept
//!   for the backward) and the output is a view of the maxima; the input's
//!   gradient is one scatter of the output's gradient to those taps.
//! - Elsewhere the same `[P, 2]` is built from engine ops: the window taps
//!   gathered (`get_rows` of the input's columns), each window's taps made
//!   a row, and the row maxima and first arg-maxima taken; the gradient is
//!   the output's gradient masked by `tap == k` for each tap `k` and summed
//!   back into the columns it was gathered from (`get_rows_back`).

use super::graph::GraphBuilder;
use super::nodes::{cast, contig};
use super::value::EngineVal;
use crate::base::dtype::DType;
use crate::op::index::IndexOp;
use crate::op::max_pool::{MaxPool, PoolGeom};
use crate::op::{BinFn, Op as G, RowFn};
use crate::tensor::Context;
use crate::tensor::Tensor as ETensor;
use anyhow::Result;
use std::sync::Arc;

type T = Arc<ETensor>;

/// Input columns (0-based, of the input viewed as `[C, W H N]`) of every
/// window tap: taps fastest (`kx + KW ky`), then output positions (width
/// fastest), then samples.
fn tap_columns(g: &PoolGeom, n: usize) -> Result<Vec<f64>> {
    let (ow, oh) = g.out_size()?;
    let mut idx = Vec::with_capacity(g.kw * g.kh * ow * oh * n);
    for s in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for ky in 0..g.kh {
                    for kx in 0..g.kw {
                        let (x, y) = (ox * g.sw + kx, oy * g.sh + ky);
                        idx.push((x + g.w * y + g.w * g.h * s) as f64);
                    }
                }
            }
        }
    }
    Ok(idx)
}

/// The forward: the maxima `[C, OW OH N]` and the saved `[P, 2]`.
pub fn forward(b: &mut GraphBuilder, c: &Context, g: &PoolGeom, x: &EngineVal) -> Result<(T, Vec<(T, usize, usize)>)> {
    let n = x.len() / g.sample();
    let p = g.out_sample()? * n;
    let xt = contig(c, &cast(b, c, &x.t)?)?;
    let op = G::MaxPool(MaxPool::Forward(*g));
    let packed = if b.supports(&op) {
        c.op(op, &[xt])?
    } else {
        let k = g.kw * g.kh;
        let q = p / g.c;
        let cols = c.reshape(&xt, &[g.c, g.w * g.h * n])?;
        let ix = b.data(c, Some(DType::I32), &[k * q], tap_columns(g, n)?)?;
        // [C, K Q] -> [C, K, Q] -> [K, C, Q]: one row per window and channel.
        let taps = c.reshape(&c.op(G::GetRows, &[cols, ix])?, &[g.c, k, q])?;
        let rows = c.op(G::Cont, &[c.permute(&taps, [1, 0, 2, 3])?])?;
        let best = c.op(G::ReduceRows { f: RowFn::Max }, std::slice::from_ref(&rows))?;
        let at = c.op(G::ReduceRows { f: RowFn::ArgMax }, &[rows])?;
        let (best, at) = (c.reshape(&best, &[p, 1])?, c.reshape(&at, &[p, 1])?);
        cast(b, c, &c.op(G::Concat { dim: 1 }, &[best, at])?)?
    };
    // BOUNDS: `nb` is Dims ([usize; MAX_DIMS]) indexed by a literal.
    let vals = c.view(&packed, &[g.c, p / g.c], &[packed.layout().nb[0] * g.c], 0)?;
    Ok((vals, vec![(packed, p, 2)]))
}

/// The input's gradient (the input's shape `rows x cols`) from the
/// output's gradient `gt` and the saved `[P, 2]`.
pub fn backward(b: &mut GraphBuilder, c: &Context, g: &PoolGeom, x: &EngineVal, saved: &EngineVal, gt: &T) -> Result<T> {
    let (rows, cols) = x.shape();
    let n = x.len() / g.sample();
    let p = saved.rows;
    let gz = contig(c, gt)?;
    let op = G::MaxPool(MaxPool::Back(*g));
    if b.supports(&op) {
        let dx = c.op(op, &[gz, saved.t.clone()])?;
        return c.reshape(&dx, &[rows, cols]);
    }
    let k = g.kw * g.kh;
    let q = p / g.c;
    let l = saved.t.layout();
    // BOUNDS: `nb` is Dims ([usize; MAX_DIMS]) indexed by a literal.
    let at = c.view(&saved.t, &[1, p], &[l.nb[0]], p * l.nb[0])?;
    let ks = c.op(G::Index(IndexOp::Arange { start: 0.0, stop: k as f32, step: 1.0 }), &[])?;
    let hit = c.op(G::Binary { f: BinFn::Equal }, &[ks, at])?;
    // [K, P] = [K, C, Q]: the gradient where the tap held the maximum.
    let gk = c.op(G::Binary { f: BinFn::Mask }, &[c.reshape(&gz, &[1, p])?, hit])?;
    let gk = c.reshape(&gk, &[k, g.c, q])?;
    let gk = c.op(G::Cont, &[c.permute(&gk, [1, 0, 2, 3])?])?;
    let gk = c.reshape(&gk, &[g.c, k * q])?;
    let ix = b.data(c, Some(DType::I32), &[k * q], tap_columns(g, n)?)?;
    let like = c.reshape(&contig(c, &cast(b, c, &x.t)?)?, &[g.c, g.w * g.h * n])?;
    let dx = c.op(G::Index(IndexOp::GetRowsBack), &[gk, ix, like])?;
    c.reshape(&cast(b, c, &dx)?, &[rows, cols])
}
