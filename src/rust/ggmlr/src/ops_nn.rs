//! Graph ops with arguments beyond numbers: in-place results, `set` (byte
//! strides), the composite 1-D convolutions, and zeroing a tensor.

use crate::conv::{exactly, f64_vec, scalar_bool, scalar_str, usize_vec};
use crate::guard;
use crate::tensor::{tensor, tensor_robj, TensorPtr};
use extendr_api::prelude::*;
use ggmlr_core::op::names::op_from_name;
use ggmlr_core::tensor::{io, Context};

fn ctx(x: &Robj) -> anyhow::Result<&Context> {
    crate::conv::ctx_arg(x, "ctx").map(|c| &**c)
}

fn srcs(x: &Robj) -> anyhow::Result<Vec<TensorPtr>> {
    let l: List = x.try_into().map_err(|_| anyhow::anyhow!("internal: sources must be a list"))?;
    let names = ["a", "b", "c", "d"];
    l.values()
        .enumerate()
        .map(|(i, t)| tensor(&t, names.get(i).unwrap_or(&"x")).cloned())
        .collect()
}

/// A computing op by ggml name, written into the first source's memory.
/// @noRd
#[extendr]
fn rs_op_inplace(c: Robj, name: Robj, src: Robj, params: Robj) -> Robj {
    guard(|| {
        let c = ctx(&c)?;
        let op = op_from_name(&scalar_str(&name, "op")?, &f64_vec(&params, "params")?)?;
        Ok(tensor_robj(c.op_inplace(op, &srcs(&src)?)?))
    })
}

/// nb: byte strides of dimensions 2 to 4; offset in bytes.
/// @noRd
#[extendr]
fn rs_set(c: Robj, a: Robj, b: Robj, nb: Robj, offset: Robj, inplace: Robj) -> Robj {
    guard(|| {
        let nb: [usize; 3] = exactly(usize_vec(&nb, "nb", 0)?, "internal: set takes three strides")?;
        let [off]: [usize; 1] = exactly(usize_vec(&offset, "offset", 0)?, "`offset` must be a single number")?;
        let t = ctx(&c)?.set(tensor(&a, "a")?, tensor(&b, "b")?, nb, off, scalar_bool(&inplace, "inplace")?)?;
        Ok(tensor_robj(t))
    })
}

/// params: s0, p0, d0; `depthwise` selects conv_1d_dw.
/// @noRd
#[extendr]
fn rs_conv_1d(c: Robj, a: Robj, b: Robj, params: Robj, depthwise: Robj) -> Robj {
    guard(|| {
        let c = ctx(&c)?;
        let p: [f64; 3] = exactly(f64_vec(&params, "params")?, "internal: conv_1d takes 3 parameters")?;
        let [s0, p0, d0] = p.map(|v| v as i32);
        let (a, b) = (tensor(&a, "a")?, tensor(&b, "b")?);
        let t = if scalar_bool(&depthwise, "depthwise")? {
            c.conv_1d_dw(a, b, s0, p0, d0)?
        } else {
            c.conv_1d(a, b, s0, p0, d0)?
        };
        Ok(tensor_robj(t))
    })
}

/// @noRd
#[extendr]
fn rs_tensor_zero(t: Robj) -> Robj {
    guard(|| {
        io::set_zero(tensor(&t, "tensor")?)?;
        Ok(().into())
    })
}

extendr_module! {
    mod ops_nn;
    fn rs_op_inplace;
    fn rs_set;
    fn rs_conv_1d;
    fn rs_tensor_zero;
}
