//! Graph ops: one entry for the computing ops (by ggml name), and the views,
//! copies and composites that take extra arguments.

use crate::conv::{exactly, f64_vec, scalar_i64, scalar_str, scalar_usize, usize_vec};
use crate::guard;
use crate::tensor::{tensor, tensor_robj, TensorPtr};
use extendr_api::prelude::*;
use ggmlr_core::op::names::op_from_name;
use ggmlr_core::tensor::Context;
use ggmlr_core::base::dtype::DType;

fn ctx(x: &Robj) -> anyhow::Result<&Context> {
    crate::conv::ctx_arg(x, "ctx").map(|c| &**c)
}

fn srcs(x: &Robj) -> anyhow::Result<Vec<TensorPtr>> {
    let l: List = x.try_into().map_err(|_| anyhow::anyhow!("internal: sources must be a list"))?;
    let names = ["a", "b", "c"];
    l.values()
        .enumerate()
        .map(|(i, t)| tensor(&t, names.get(i).unwrap_or(&"x")).cloned())
        .collect()
}

/// A computing op by ggml name, with sources and numeric parameters.
/// @noRd
#[extendr]
fn rs_op(c: Robj, name: Robj, src: Robj, params: Robj) -> Robj {
    guard(|| {
        let c = ctx(&c)?;
        let op = op_from_name(&scalar_str(&name, "op")?, &f64_vec(&params, "params")?)?;
        Ok(tensor_robj(c.op(op, &srcs(&src)?)?))
    })
}

/// params: s0, s1, p0, p1, d0, d1, is_2d.
/// @noRd
#[extendr]
fn rs_im2col(c: Robj, a: Robj, b: Robj, params: Robj, dst_type: Robj) -> Robj {
    guard(|| {
        let c = ctx(&c)?;
        let op = op_from_name("im2col", &f64_vec(&params, "params")?)?;
        let dt = DType::from_code(scalar_i64(&dst_type, "dst_type")?)?;
        Ok(tensor_robj(c.im2col(tensor(&a, "a")?, tensor(&b, "b")?, op, dt)?))
    })
}

/// params: s0, s1, p0, p1, d0, d1.
/// @noRd
#[extendr]
fn rs_conv_2d(c: Robj, a: Robj, b: Robj, params: Robj) -> Robj {
    guard(|| {
        let c = ctx(&c)?;
        let p: [f64; 6] = exactly(f64_vec(&params, "params")?, "internal: conv_2d takes 6 parameters")?;
        let [s0, s1, p0, p1, d0, d1] = p.map(|v| v as i32);
        let t = c.conv_2d(tensor(&a, "a")?, tensor(&b, "b")?, s0, s1, p0, p1, d0, d1)?;
        Ok(tensor_robj(t))
    })
}

/// @noRd
#[extendr]
fn rs_reshape(c: Robj, a: Robj, ne: Robj) -> Robj {
    guard(|| Ok(tensor_robj(ctx(&c)?.reshape(tensor(&a, "a")?, &usize_vec(&ne, "ne", 1)?)?)))
}

/// @noRd
#[extendr]
fn rs_view(c: Robj, a: Robj, ne: Robj, nb: Robj, offset: Robj) -> Robj {
    guard(|| {
        let ne = usize_vec(&ne, "ne", 1)?;
        let nb = usize_vec(&nb, "nb", 0)?;
        let off = scalar_usize(&offset, "offset")?;
        Ok(tensor_robj(ctx(&c)?.view(tensor(&a, "a")?, &ne, &nb, off)?))
    })
}

/// @noRd
#[extendr]
fn rs_permute(c: Robj, a: Robj, axes: Robj) -> Robj {
    guard(|| {
        let ax: [usize; 4] = exactly(usize_vec(&axes, "axis", 0)?, "ggml_permute needs four axes")?;
        Ok(tensor_robj(ctx(&c)?.permute(tensor(&a, "a")?, ax)?))
    })
}

/// @noRd
#[extendr]
fn rs_transpose(c: Robj, a: Robj) -> Robj {
    guard(|| Ok(tensor_robj(ctx(&c)?.transpose(tensor(&a, "a")?)?)))
}

/// @noRd
#[extendr]
fn rs_cpy(c: Robj, a: Robj, b: Robj) -> Robj {
    guard(|| Ok(tensor_robj(ctx(&c)?.cpy(tensor(&a, "a")?, tensor(&b, "b")?)?)))
}

extendr_module! {
    mod ops;
    fn rs_op;
    fn rs_im2col;
    fn rs_conv_2d;
    fn rs_reshape;
    fn rs_view;
    fn rs_permute;
    fn rs_transpose;
    fn rs_cpy;
}
