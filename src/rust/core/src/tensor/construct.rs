//! Building op results in a context: computing ops (shaped by
//! [`crate::op::shape`]), views, `cpy`, and composites such as `conv_2d`.

use super::context::Context;
use super::descriptor::Tensor;
use crate::base::dtype::DType;
use crate::layout::{fmt_shape, Layout, MAX_DIMS};
use crate::op::names::fn_name;
use crate::op::{shape, Op};
use anyhow::{ensure, Context as _};
use std::sync::Arc;

pub(super) fn args(srcs: &[&Arc<Tensor>]) -> String {
    let names = ["a", "b", "c"];
    srcs.iter()
        .enumerate()
        .map(|(i, t)| format!("{} = {}", names.get(i).unwrap_or(&"x"), t.describe()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Context {
    /// A node computing `op` on `srcs`.
    pub fn op(&self, op: Op, srcs: &[Arc<Tensor>]) -> crate::Result<Arc<Tensor>> {
        let what = || format!("{}({})", fn_name(&op), args(&srcs.iter().collect::<Vec<_>>()));
        for s in srcs {
            s.check_live().with_context(what)?;
        }
        // The sources' layouts, on the stack for the usual few sources.
        let mut few = [Layout::contiguous(crate::base::dtype::DType::F32, [1; 4]); 4];
        let many: Vec<Layout>;
        let layouts: &[Layout] = if srcs.len() <= few.len() {
            for (l, t) in few.iter_mut().zip(srcs) {
                *l = *t.layout();
            }
            // BOUNDS: srcs.len() <= few.len() in this branch.
            &few[..srcs.len()]
        } else {
            many = srcs.iter().map(|t| *t.layout()).collect();
            &many
        };
        let out = shape::infer(&op, layouts).with_context(what)?;
        // An op that updates its first source in place is that source's memory.
        // (An op in place has a first source: `shape::infer` read it.)
        let pushed = match (op.is_in_place(), srcs.first(), layouts.first()) {
            (true, Some(first), Some(l)) => self.push(*l, op.clone(), srcs.to_vec(), Some((first.clone(), 0))),
            _ => self.push(Layout::contiguous(out.dtype, out.ne), op.clone(), srcs.to_vec(), None),
        };
        pushed.with_context(what)
    }

    /// `im2col` with an explicit result type.
    pub fn im2col(
        &self,
        kernel: &Arc<Tensor>,
        input: &Arc<Tensor>,
        op: Op,
        dst_type: DType,
    ) -> crate::Result<Arc<Tensor>> {
        ensure!(matches!(op, Op::Im2Col { .. }), "internal: not an im2col op");
        ensure!(dst_type.is_float(), "im2col: `dst_type` must be GGML_TYPE_F32, F16 or BF16");
        let what = || format!("ggml_im2col({})", args(&[kernel, input]));
        kernel.check_live().with_context(what)?;
        input.check_live().with_context(what)?;
        let out = shape::infer(&op, &[*kernel.layout(), *input.layout()]).with_context(what)?;
        self.push(
            Layout::contiguous(dst_type, out.ne),
            op,
            vec![kernel.clone(), input.clone()],
            None,
        )
        .with_context(what)
    }

    fn view_node(&self, a: &Arc<Tensor>, op: Op, layout: Layout, offset: usize) -> crate::Result<Arc<Tensor>> {
        self.push(layout, op, vec![a.clone()], Some((a.clone(), offset)))
    }

    /// Same data, new sizes (a must be contiguous).
    pub fn reshape(&self, a: &Arc<Tensor>, ne: &[usize]) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_reshape_{}d({}, {:?})", ne.len(), args(&[a]), ne);
        a.check_live().with_context(what)?;
        ensure!(
            (1..=MAX_DIMS).contains(&ne.len()),
            "{}: a tensor has 1 to {MAX_DIMS} dimensions, not {}",
            what(),
            ne.len()
        );
        let mut full = [1usize; MAX_DIMS];
        // BOUNDS: 1 <= ne.len() <= MAX_DIMS, checked above.
        full[..ne.len()].copy_from_slice(ne);
        ensure!(
            a.layout().is_contiguous(),
            "{}: a is not contiguous (a transposed or permuted view); use ggml_cont() first",
            what()
        );
        ensure!(
            full.iter().product::<usize>() == a.nelements(),
            "{}: the new shape {} has {} elements, a has {}",
            what(),
            fmt_shape(&full),
            full.iter().product::<usize>(),
            a.nelements()
        );
        self.view_node(a, Op::Reshape, Layout::contiguous(a.dtype(), full), 0)
    }

    /// A view of `a` with sizes `ne`, byte strides `nb` (for dimensions 1..) and byte offset.
    pub fn view(&self, a: &Arc<Tensor>, ne: &[usize], nb: &[usize], offset: usize) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_view_{}d({}, ne = {:?}, offset = {offset})", ne.len(), args(&[a]), ne);
        a.check_live().with_context(what)?;
        ensure!(nb.len() + 1 == ne.len() && ne.len() <= MAX_DIMS, "internal: view strides");
        let es = a.dtype().size();
        // Elements start at whole multiples of their size: another byte
        // offset or stride would read the bytes of two elements as one.
        ensure!(
            offset % es == 0,
            "{}: the byte offset {offset} is not a multiple of the {} element size ({es} bytes); give offset = k * {es}",
            what(),
            a.dtype().name()
        );
        if let Some(b) = nb.iter().find(|&&b| b % es != 0) {
            anyhow::bail!(
                "{}: the byte stride {b} is not a multiple of the {} element size ({es} bytes)",
                what(),
                a.dtype().name()
            );
        }
        let mut full_ne = [1usize; MAX_DIMS];
        // BOUNDS: 1 <= ne.len() = nb.len() + 1 <= MAX_DIMS (checked above),
        // and 1 <= i < MAX_DIMS in the loop.
        full_ne[..ne.len()].copy_from_slice(ne);
        let mut full_nb = [es; MAX_DIMS];
        full_nb[1..ne.len()].copy_from_slice(nb);
        for i in ne.len().max(1)..MAX_DIMS {
            // BOUNDS: 1 <= i < MAX_DIMS.
            full_nb[i] = full_nb[i - 1] * full_ne[i - 1];
        }
        let layout = Layout { dtype: a.dtype(), ne: full_ne, nb: full_nb };
        // Bounds against the memory of the tensor ultimately viewed.
        let (root, root_off) = match a.view_base() {
            Some((r, o)) => (r.clone(), o + offset),
            None => (a.clone(), offset),
        };
        let span = layout
            .checked_span_bytes()
            .ok_or_else(|| anyhow::anyhow!("{}: the view is too large to address", what()))?;
        ensure!(
            root_off.saturating_add(span) <= root.nbytes(),
            "{}: the view spans bytes {}..{} but the viewed data has {} bytes",
            what(),
            root_off,
            root_off.saturating_add(span),
            root.nbytes()
        );
        self.view_node(a, Op::View, layout, offset)
    }

    /// Swap the first two dimensions (a view).
    pub fn transpose(&self, a: &Arc<Tensor>) -> crate::Result<Arc<Tensor>> {
        self.permute(a, [1, 0, 2, 3]).map_err(|e| e.context("ggml_transpose"))
    }

    /// ggml's permute: dimension i of a becomes dimension axes[i] of the
    /// result (of the first four; a fifth dimension stays where it is).
    pub fn permute(&self, a: &Arc<Tensor>, axes: [usize; 4]) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_permute({}, axes = {:?})", args(&[a]), axes);
        a.check_live().with_context(what)?;
        let mut seen = [false; 4];
        // BOUNDS: x < 4 is checked before seen[x]; axes is a [usize; 4] of
        // axes below 4 (checked) and ne, nb are Dims of MAX_DIMS >= 4.
        for &x in &axes {
            ensure!(x < 4 && !seen[x], "{}: the axes must be 0, 1, 2 and 3 in some order", what());
            seen[x] = true;
        }
        let l = a.layout();
        let (mut ne, mut nb) = (l.ne, l.nb);
        for i in 0..4 {
            // BOUNDS: i < 4 and axes[i] < 4 (checked above); Dims hold MAX_DIMS >= 4.
            ne[axes[i]] = l.ne[i];
            nb[axes[i]] = l.nb[i];
        }
        let op = if axes == [1, 0, 2, 3] { Op::Transpose } else { Op::Permute { axes } };
        self.view_node(a, op, Layout { dtype: l.dtype, ne, nb }, 0)
    }

    /// Copy a into b's memory (converting the type); the result is b's memory.
    pub fn cpy(&self, a: &Arc<Tensor>, b: &Arc<Tensor>) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_cpy({})", args(&[a, b]));
        a.check_live().with_context(what)?;
        b.check_live().with_context(what)?;
        ensure!(
            a.nelements() == b.nelements(),
            "{}: a has {} elements and b {}; they must be equal",
            what(),
            a.nelements(),
            b.nelements()
        );
        self.push(*b.layout(), Op::Cpy, vec![a.clone(), b.clone()], Some((b.clone(), 0)))
            .with_context(what)
    }

    /// ggml's conv_2d: im2col, then mul_mat with the flattened kernel.
    /// a: kernel [KW, KH, IC, OC]; b: input [W, H, IC, N] -> [OW, OH, OC, N].
    #[allow(clippy::too_many_arguments)]
    pub fn conv_2d(
        &self,
        a: &Arc<Tensor>,
        b: &Arc<Tensor>,
        s0: i32,
        s1: i32,
        p0: i32,
        p1: i32,
        d0: i32,
        d1: i32,
    ) -> crate::Result<Arc<Tensor>> {
        let op = Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d: true };
        let cols = self.im2col(a, b, op, a.dtype()).context("ggml_conv_2d")?;
        // BOUNDS: ne() is a [usize; 4], indexed by literals below.
        let cn = cols.ne();
        let an = a.ne();
        let cols2 = self.reshape(&cols, &[cn[0], cn[1] * cn[2] * cn[3]])?;
        let k2 = self.reshape(a, &[an[0] * an[1] * an[2], an[3]]).context("ggml_conv_2d")?;
        let prod = self.op(Op::MulMat, &[cols2, k2])?; // [OW*OH*N, OC]
        // BOUNDS: literals below 4 on [usize; 4].
        let r = self.reshape(&prod, &[cn[1], cn[2], cn[3], an[3]])?; // [OW, OH, N, OC]
        let p = self.permute(&r, [0, 1, 3, 2])?; // [OW, OH, OC, N]
        self.op(Op::Cont, &[p])
    }
}

