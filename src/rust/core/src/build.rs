//! Building graph nodes in a context: computing ops (shaped by
//! [`crate::ops::shape`]), views, `cpy`, and composites such as `conv_2d`.

use crate::context::Context;
use crate::dtype::DType;
use crate::op::{Layout, Op, PoolOp, UnaryOp};
use crate::ops::shape;
use crate::tensor::{fmt_shape, Tensor};
use anyhow::{bail, ensure, Context as _};
use std::sync::Arc;

/// ggml's function name of an op, for messages ("ggml_mul_mat").
pub fn fn_name(op: &Op) -> String {
    match op {
        Op::Unary(u) => format!("ggml_{}", u.name()),
        Op::SoftMax { .. } => "ggml_soft_max".into(),
        _ => format!("ggml_{}", op.name().to_lowercase()),
    }
}

fn args(srcs: &[&Arc<Tensor>]) -> String {
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
        let refs: Vec<&Arc<Tensor>> = srcs.iter().collect();
        let what = || format!("{}({})", fn_name(&op), args(&refs));
        for s in srcs {
            s.check_live().with_context(what)?;
        }
        let layouts: Vec<Layout> = srcs.iter().map(|t| *t.layout()).collect();
        let out = shape::infer(&op, &layouts).with_context(what)?;
        let pushed = self.push(Layout::contiguous(out.dtype, out.ne), op.clone(), srcs.to_vec(), None);
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
        let mut full = [1usize; 4];
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
        ensure!(nb.len() + 1 == ne.len(), "internal: view strides");
        let es = a.dtype().size();
        let mut full_ne = [1usize; 4];
        full_ne[..ne.len()].copy_from_slice(ne);
        let mut full_nb = [es; 4];
        full_nb[1..ne.len()].copy_from_slice(nb);
        for i in ne.len()..4 {
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

    /// ggml's permute: dimension i of a becomes dimension axes[i] of the result.
    pub fn permute(&self, a: &Arc<Tensor>, axes: [usize; 4]) -> crate::Result<Arc<Tensor>> {
        let what = || format!("ggml_permute({}, axes = {:?})", args(&[a]), axes);
        a.check_live().with_context(what)?;
        let mut seen = [false; 4];
        for &x in &axes {
            ensure!(x < 4 && !seen[x], "{}: the axes must be 0, 1, 2 and 3 in some order", what());
            seen[x] = true;
        }
        let l = a.layout();
        let mut ne = [0usize; 4];
        let mut nb = [0usize; 4];
        for i in 0..4 {
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
        let cn = cols.ne();
        let an = a.ne();
        let cols2 = self.reshape(&cols, &[cn[0], cn[1] * cn[2] * cn[3]])?;
        let k2 = self.reshape(a, &[an[0] * an[1] * an[2], an[3]]).context("ggml_conv_2d")?;
        let prod = self.op(Op::MulMat, &[cols2, k2])?; // [OW*OH*N, OC]
        let r = self.reshape(&prod, &[cn[1], cn[2], cn[3], an[3]])?; // [OW, OH, N, OC]
        let p = self.permute(&r, [0, 1, 3, 2])?; // [OW, OH, OC, N]
        self.op(Op::Cont, &[p])
    }
}

/// An op from its ggml name and numeric parameters (as passed from R).
pub fn op_from_name(name: &str, p: &[f64]) -> crate::Result<Op> {
    let need = |n: usize| -> crate::Result<()> {
        ensure!(p.len() >= n, "internal: {name} needs {n} parameters, got {}", p.len());
        Ok(())
    };
    let f = |i: usize| p[i] as f32;
    let int = |i: usize| p[i] as i32;
    if let Some(u) = UnaryOp::ALL.iter().find(|u| u.name() == name) {
        return Ok(Op::Unary(*u));
    }
    Ok(match name {
        "dup" => Op::Dup,
        "add" => Op::Add,
        "sub" => Op::Sub,
        "mul" => Op::Mul,
        "div" => Op::Div,
        "add1" => Op::Add1,
        "mul_mat" => Op::MulMat,
        "out_prod" => Op::OutProd,
        "sum" => Op::Sum,
        "sum_rows" => Op::SumRows,
        "mean" => Op::Mean,
        "argmax" => Op::Argmax,
        "cont" => Op::Cont,
        "repeat" => Op::Repeat,
        "get_rows" => Op::GetRows,
        "scale" => {
            need(1)?;
            Op::Scale { s: p[0] }
        }
        "leaky_relu" => {
            need(1)?;
            Op::LeakyRelu { slope: f(0) }
        }
        "clamp" => {
            need(2)?;
            Op::Clamp { min: p[0], max: p[1] }
        }
        "soft_max" => {
            need(2)?;
            Op::SoftMax { scale: f(0), max_bias: f(1) }
        }
        "norm" => {
            need(1)?;
            Op::Norm { eps: f(0) }
        }
        "rms_norm" => {
            need(1)?;
            Op::RmsNorm { eps: f(0) }
        }
        "concat" => {
            need(1)?;
            ensure!((0.0..4.0).contains(&p[0]), "concat: `dim` must be 0 to 3, not {}", p[0]);
            Op::Concat { dim: p[0] as usize }
        }
        "diag_mask_inf" => {
            need(1)?;
            Op::DiagMaskInf { n_past: int(0) }
        }
        "im2col" => {
            need(7)?;
            Op::Im2Col { s0: int(0), s1: int(1), p0: int(2), p1: int(3), d0: int(4), d1: int(5), is_2d: p[6] != 0.0 }
        }
        "pool_2d" => {
            need(7)?;
            let op = match int(0) {
                0 => PoolOp::Max,
                1 => PoolOp::Avg,
                o => bail!("pool_2d: `op` must be GGML_OP_POOL_MAX (0) or GGML_OP_POOL_AVG (1), not {o}"),
            };
            Op::Pool2d { op, k0: int(1), k1: int(2), s0: int(3), s1: int(4), p0: f(5), p1: f(6) }
        }
        "pad" => {
            need(4)?;
            Op::Pad { p: [int(0), int(1), int(2), int(3)] }
        }
        "upscale" => {
            need(1)?;
            Op::Upscale { factor: int(0) }
        }
        other => bail!("unknown op '{other}'"),
    })
}
