//! Building in-place results, `set`, and the convolutions ggml composes from
//! other ops (conv_1d from im2col and mul_mat; the depthwise forms from the
//! direct depthwise kernel).

use super::construct::args;
use super::context::Context;
use super::descriptor::Tensor;
use crate::layout::{fmt_shape, Layout};
use crate::op::conv::Conv;
use crate::op::index::IndexOp;
use crate::op::names::fn_name;
use crate::op::{shape, Op};
use anyhow::{ensure, Context as _};
use std::sync::Arc;

impl Context {
    /// `op` on `srcs`, written into the memory of `srcs[0]`: the result is a
    /// view of it (ggml's `*_inplace`). The op's result must have the first
    /// source's type and shape.
    pub fn op_inplace(&self, op: Op, srcs: &[Arc<Tensor>]) -> crate::Result<Arc<Tensor>> {
        let refs: Vec<&Arc<Tensor>> = srcs.iter().collect();
        let what = || format!("{}_inplace({})", fn_name(&op), args(&refs));
        ensure!(!srcs.is_empty() && !op.is_view(), "{}: not an op that can be computed in place", what());
        for s in srcs {
            s.check_live().with_context(what)?;
        }
        let layouts: Vec<Layout> = srcs.iter().map(|t| *t.layout()).collect();
        let out = shape::infer(&op, &layouts).with_context(what)?;
        // BOUNDS: srcs is not empty (checked above).
        let a = &srcs[0];
        ensure!(
            out.ne == a.dims() && out.dtype == a.dtype(),
            "{}: the result ({} {}) differs from a ({}), so it cannot be written into a's memory; use the \
             version without _inplace",
            what(),
            out.dtype.name(),
            fmt_shape(&out.ne),
            a.describe()
        );
        self.push(*a.layout(), op.clone(), srcs.to_vec(), Some((a.clone(), 0))).with_context(what)
    }

    /// ggml's set: a copy of `a` (or `a` itself, `inplace`) with `b` written
    /// into the view of it at byte `offset` with byte strides `nb` (dimensions 2 to 4).
    pub fn set(&self, a: &Arc<Tensor>, b: &Arc<Tensor>, nb: [usize; 3], offset: usize, inplace: bool) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_set({}, nb = {nb:?}, offset = {offset})", args(&[a, b]));
        let es = a.dtype().size();
        ensure!(
            offset % es == 0 && nb.iter().all(|&x| x % es == 0),
            "{}: the offset and strides are in bytes and must be multiples of a's element size ({es} bytes)",
            what()
        );
        let op = Op::Index(IndexOp::Set { nb: nb.map(|x| x / es), offset: offset / es });
        let srcs = [a.clone(), b.clone()];
        // The op's own errors already name ggml_set and its sources.
        if inplace {
            self.op_inplace(op, &srcs)
        } else {
            self.op(op, &srcs)
        }
    }

    /// ggml's conv_1d: kernel a [K, Cin, Cout], input b [L, Cin, N] -> [OL, Cout, N],
    /// as im2col and one product.
    // BOUNDS-FN: ne() is a [usize; 4], indexed by literals.
    pub fn conv_1d(&self, a: &Arc<Tensor>, b: &Arc<Tensor>, s0: i32, p0: i32, d0: i32) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_conv_1d({})", args(&[a, b]));
        let op = Op::Im2Col { s0, s1: 1, p0, p1: 0, d0, d1: 1, is_2d: false };
        let cols = self.im2col(a, b, op, a.dtype()).with_context(what)?; // [Cin K, OL, N]
        let (cn, an) = (cols.ne(), a.ne());
        let cols2 = self.reshape(&cols, &[cn[0], cn[1] * cn[2]])?;
        let ka = self.contiguous(a)?;
        let k2 = self.reshape(&ka, &[an[0] * an[1], an[2]]).with_context(what)?;
        let prod = self.op(Op::MulMat, &[cols2, k2]).with_context(what)?; // [OL N, Cout]
        let r = self.reshape(&prod, &[cn[1], cn[2], an[2]])?; // [OL, N, Cout]
        let p = self.permute(&r, [0, 2, 1, 3])?; // [OL, Cout, N]
        self.op(Op::Cont, &[p])
    }

    /// ggml's conv_1d_dw: kernel a [K, 1, C], input b [L, C, N] -> [OL, C, N],
    /// one kernel per channel.
    // BOUNDS-FN: ne() is a [usize; 4], indexed by literals.
    pub fn conv_1d_dw(&self, a: &Arc<Tensor>, b: &Arc<Tensor>, s0: i32, p0: i32, d0: i32) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_conv_1d_dw({})", args(&[a, b]));
        let (an, bn) = (a.ne(), b.ne());
        ensure!(
            an[1] == 1 && an[2] == bn[1] && an[3] == 1 && bn[3] == 1,
            "{}: the kernel must be [K, 1, C] and the input [L, C, N] with the same C",
            what()
        );
        let ka = self.contiguous(a)?;
        let xb = self.contiguous(b)?;
        let k4 = self.reshape(&ka, &[an[0], 1, 1, an[2]])?;
        let x4 = self.reshape(&xb, &[bn[0], 1, bn[1], bn[2]])?;
        let op = Op::Conv(Conv::Depthwise2d { s0, s1: 1, p0, p1: 0, d0, d1: 1 });
        let y = self.op(op, &[k4, x4]).with_context(what)?; // [OL, 1, C, N]
        let yn = y.ne();
        self.reshape(&y, &[yn[0], yn[2], yn[3]])
    }

    /// `a` itself when contiguous, else a contiguous copy (for reshapes).
    fn contiguous(&self, a: &Arc<Tensor>) -> crate::Result<Arc<Tensor>> {
        if a.layout().is_contiguous() {
            Ok(a.clone())
        } else {
            self.op(Op::Cont, &[a.clone()])
        }
    }
}
