//! The device path: values as engine tensors in the residency pools, and
//! ops run as small ggml graphs on the residency backend (whatever backend is
//! installed: the CPU backend, or a GPU backend once one is present).
//!
//! Layout: an autograd `[rows, cols]` column-major matrix is a ggml tensor
//! with `ne = [rows, cols]` (rows vary fastest), so no data is reordered.
//! Ops with a graph here run on the device; the others run their host
//! kernel on downloaded inputs and put the result back in the pass pool
//! (see `forward`).

use super::mat::Mat;
use super::ops::{Act, Axis, Op};
use crate::context::Context;
use crate::dtype::DType;
use crate::graph::Graph;
use crate::op::{Op as G, UnaryOp};
use crate::residency::{self, Scope};
use crate::tensor::Tensor as ETensor;
use anyhow::{anyhow, bail, Result};
use std::sync::Arc;

/// Descriptors reserved in the pass pool's context for one op's graph.
const GRAPH_SLOTS: usize = 32;

/// A value on the device: an engine tensor `[rows, cols]` in a pool.
#[derive(Debug, Clone)]
pub struct Dev {
    pub t: Arc<ETensor>,
    pub rows: usize,
    pub cols: usize,
}

impl Dev {
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
        let v = crate::io::get_values(&self.t, 0, Some(self.rows * self.cols))?;
        Mat::new(self.rows, self.cols, v)
    }
    pub fn same_shape(&self, o: &Dev) -> bool {
        self.rows == o.rows && self.cols == o.cols
    }
}

/// Builds a graph in the pass pool with `f`, backs its new tensors with
/// memory of the pass pool, and computes everything `f` returned (in order).
pub fn run(f: impl FnOnce(&Context) -> Result<Vec<Arc<ETensor>>>) -> Result<Vec<Arc<ETensor>>> {
    run_with(|c| Ok((f(c)?, Vec::new())))
}

/// As `run`; `f` also names constant leaves to fill (once they have memory).
pub fn run_with(
    f: impl FnOnce(&Context) -> Result<(Vec<Arc<ETensor>>, Vec<(Arc<ETensor>, f64)>)>,
) -> Result<Vec<Arc<ETensor>>> {
    let (ctx, backend) = {
        let mut s = residency::state();
        let backend = s.backend().cloned().ok_or_else(|| {
            anyhow!(
                "no compute backend is installed for the device: call ag_device(\"gpu\") \
                 (it installs the best backend) before computing on \"gpu\""
            )
        })?;
        (s.ctx_ensure(GRAPH_SLOTS, Scope::Pass)?, backend)
    };
    let (outs, consts) = f(&ctx)?;
    residency::state().ctx_flush(&ctx, Scope::Pass)?;
    for (t, v) in &consts {
        crate::io::set_values(t, &vec![*v; t.nelements()], 0)?;
    }
    let mut g = Graph::new();
    for o in &outs {
        g.expand(o)?;
    }
    g.compute(&backend)?;
    Ok(outs)
}

fn unary(c: &Context, u: UnaryOp, x: &Arc<ETensor>) -> Result<Arc<ETensor>> {
    c.op(G::Unary(u), &[x.clone()])
}

/// `a %*% b` for `a` `[m, k]`, `b` `[k, n]` (ggml: mul_mat(t(a), b)).
pub fn matmul(c: &Context, a: &Arc<ETensor>, b: &Arc<ETensor>) -> Result<Arc<ETensor>> {
    let at = c.op(G::Cont, &[c.transpose(a)?])?;
    c.op(G::MulMat, &[at, b.clone()])
}

fn act(c: &Context, a: Act, z: Arc<ETensor>) -> Result<Arc<ETensor>> {
    Ok(match a {
        Act::None => z,
        Act::Relu => unary(c, UnaryOp::Relu, &z)?,
        Act::Sigmoid => unary(c, UnaryOp::Sigmoid, &z)?,
        Act::Tanh => unary(c, UnaryOp::Tanh, &z)?,
    })
}

/// ggml broadcasts the second operand of an element-wise op when it tiles
/// the first; the autograd ops also recycle the first. Only the first case
/// (and equal shapes) runs on the device.
fn tiles(a: &Dev, b: &Dev) -> bool {
    (b.rows == a.rows || b.rows == 1) && (b.cols == a.cols || b.cols == 1)
}

/// Whether `op` has a device graph (for some shapes of its inputs).
pub fn has_graph(op: &Op) -> bool {
    matches!(
        op,
        Op::MatMul
            | Op::Linear(_)
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Scale(_)
            | Op::Relu
            | Op::Sigmoid
            | Op::Tanh
            | Op::Exp
            | Op::Log
            | Op::Sum(Axis::All)
            | Op::Transpose
    )
}

/// The forward of `op` as a graph on the device, when there is one; `None`
/// means the op runs its host kernel (shapes are checked there).
pub fn forward(op: &Op, xs: &[Dev]) -> Option<Result<Dev>> {
    let (rows, cols, build): (usize, usize, Box<dyn FnOnce(&Context) -> Result<Arc<ETensor>>>) = match op {
        Op::MatMul if xs[0].cols == xs[1].rows => {
            let (a, b) = (xs[0].t.clone(), xs[1].t.clone());
            (xs[0].rows, xs[1].cols, Box::new(move |c| matmul(c, &a, &b)))
        }
        Op::Linear(a) if xs[0].cols == xs[1].rows && xs[2].rows == xs[0].rows && xs[2].cols == 1 => {
            let (w, x, b, a) = (xs[0].t.clone(), xs[1].t.clone(), xs[2].t.clone(), *a);
            (xs[0].rows, xs[1].cols, Box::new(move |c| {
                let z = matmul(c, &w, &x)?;
                let z = c.op(G::Add, &[z, b])?;
                act(c, a, z)
            }))
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div if tiles(&xs[0], &xs[1]) => {
            let g = match op {
                Op::Add => G::Add,
                Op::Sub => G::Sub,
                Op::Mul => G::Mul,
                _ => G::Div,
            };
            let (a, b) = (xs[0].t.clone(), xs[1].t.clone());
            (xs[0].rows, xs[0].cols, Box::new(move |c| c.op(g, &[a, b])))
        }
        Op::Scale(s) => {
            let (a, s) = (xs[0].t.clone(), *s as f32);
            (xs[0].rows, xs[0].cols, Box::new(move |c| c.op(G::Scale { s }, &[a])))
        }
        Op::Relu | Op::Sigmoid | Op::Tanh | Op::Exp | Op::Log => {
            let u = match op {
                Op::Relu => UnaryOp::Relu,
                Op::Sigmoid => UnaryOp::Sigmoid,
                Op::Tanh => UnaryOp::Tanh,
                Op::Exp => UnaryOp::Exp,
                _ => UnaryOp::Log,
            };
            let a = xs[0].t.clone();
            (xs[0].rows, xs[0].cols, Box::new(move |c| unary(c, u, &a)))
        }
        Op::Sum(Axis::All) => {
            let a = xs[0].t.clone();
            (1, 1, Box::new(move |c| {
                let s = c.op(G::Sum, &[a])?;
                c.reshape(&s, &[1, 1])
            }))
        }
        Op::Transpose => {
            let a = xs[0].t.clone();
            (xs[0].cols, xs[0].rows, Box::new(move |c| c.op(G::Cont, &[c.transpose(&a)?])))
        }
        _ => return None,
    };
    Some(run(|c| Ok(vec![build(c)?])).map(|o| Dev { t: o[0].clone(), rows, cols }))
}

/// The backward rule of `op` as a graph on the device, for the ops whose
/// cost is in products (matmul, linear): `xs` and `out` are the saved device
/// values, `g` the output's gradient. The gradients come back to the host,
/// where the tape accumulates them. `None`: the op has no device rule.
pub fn backward(op: &Op, xs: &[Dev], out: &Dev, g: &Mat, need: &[bool]) -> Option<Result<Vec<Option<Mat>>>> {
    if !matches!(op, Op::MatMul | Op::Linear(_)) {
        return None;
    }
    Some(backward_products(op, xs, out, g, need))
}

fn backward_products(op: &Op, xs: &[Dev], out: &Dev, g: &Mat, need: &[bool]) -> Result<Vec<Option<Mat>>> {
    let gd = Dev::upload(g, Scope::Pass)?;
    let shapes: Vec<(usize, usize)> = xs.iter().map(|d| (d.rows, d.cols)).collect();
    let (a, b) = (xs[0].t.clone(), xs[1].t.clone());
    let (y, gt) = (out.t.clone(), gd.t.clone());
    let op2 = op.clone();
    let need2 = need.to_vec();
    let outs = run(move |c| {
        let gz = match op2 {
            Op::Linear(Act::Relu) => c.op(G::Mul, &[gt, unary(c, UnaryOp::Step, &y)?])?,
            Op::Linear(Act::Sigmoid) => {
                let one_minus = c.op(G::Sub, &[y.clone(), c.op(G::Mul, &[y.clone(), y.clone()])?])?;
                c.op(G::Mul, &[gt, one_minus])?
            }
            Op::Linear(Act::Tanh) => {
                let y2 = c.op(G::Mul, &[y.clone(), y.clone()])?;
                c.op(G::Sub, &[gt.clone(), c.op(G::Mul, &[gt, y2])?])?
            }
            _ => gt,
        };
        let mut res = Vec::new();
        // d a = gz %*% t(b); d b = t(a) %*% gz (ggml: mul_mat(a, gz)).
        if need2[0] {
            let bt = c.op(G::Cont, &[c.transpose(&b)?])?;
            res.push(matmul(c, &gz, &bt)?);
        }
        if need2[1] {
            res.push(c.op(G::MulMat, &[a.clone(), gz.clone()])?);
        }
        if need2.get(2).copied().unwrap_or(false) {
            let gzt = c.op(G::Cont, &[c.transpose(&gz)?])?;
            res.push(c.op(G::SumRows, &[gzt])?);
        }
        Ok(res)
    })?;
    let mut it = outs.into_iter();
    let mut grads = Vec::with_capacity(need.len());
    for (i, &n) in need.iter().enumerate() {
        if !n {
            grads.push(None);
            continue;
        }
        let t = it.next().ok_or_else(|| anyhow!("internal: missing device gradient"))?;
        let (r, c) = shapes[i];
        grads.push(Some(Dev { t, rows: r, cols: c }.download()?));
    }
    Ok(grads)
}

/// Updates `dst` in place (its own memory) with the value of `src`; both
/// are already nodes of the graph being built.
pub fn write_into(c: &Context, src: &Arc<ETensor>, dst: &Arc<ETensor>) -> Result<Arc<ETensor>> {
    if src.nelements() != dst.nelements() {
        bail!("internal: in-place update of {} from {}", dst.describe(), src.describe());
    }
    c.cpy(src, dst)
}
