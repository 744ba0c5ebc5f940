//! Tensors: creation, description, names and values.

use crate::conv::{f64_vec, scalar_i64, scalar_str, scalar_usize, usize_vec, xptr};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::tensor::Context;
use ggmlr_core::base::dtype::DType;
use ggmlr_core::tensor::io;
use ggmlr_core::tensor::Tensor;
use std::sync::Arc;

pub type TensorPtr = Arc<Tensor>;

/// The engine tensor behind an R `ggml_tensor`.
pub fn tensor<'a>(x: &'a Robj, what: &str) -> anyhow::Result<&'a TensorPtr> {
    xptr::<TensorPtr>(x, what, "ggml_tensor")
}

pub fn tensor_robj(t: TensorPtr) -> Robj {
    ExternalPtr::new(t).into()
}

/// @noRd
#[extendr]
fn rs_new_tensor(ctx: Robj, type_: Robj, ne: Robj) -> Robj {
    guard(|| {
        let c: &Context = crate::conv::ctx_arg(&ctx, "ctx")?;
        let t = DType::from_code(scalar_i64(&type_, "type")?)?;
        let ne = usize_vec(&ne, "ne", 1)?;
        Ok(tensor_robj(c.new_tensor(t, &ne)?))
    })
}

/// list(type, type_name, ne, nb, n_dims, nelements, nbytes, name, op, location, contiguous)
/// @noRd
#[extendr]
fn rs_tensor_info(t: Robj) -> Robj {
    guard(|| {
        let t = tensor(&t, "tensor")?;
        let l = t.layout();
        Ok(list!(
            id = t.id() as f64,
            type_code = t.dtype().code(),
            type_name = t.dtype().name(),
            ne = l.ne.iter().map(|&n| n as f64).collect::<Vec<_>>(),
            nb = l.nb.iter().map(|&n| n as f64).collect::<Vec<_>>(),
            n_dims = t.n_dims() as i32,
            nelements = t.nelements() as f64,
            nbytes = t.nbytes() as f64,
            name = crate::guard::out(&t.name()),
            op = t.op().name(),
            location = t.location(),
            contiguous = l.is_contiguous()
        )
        .into())
    })
}

/// @noRd
#[extendr]
fn rs_set_name(t: Robj, name: Robj) -> Robj {
    guard(|| {
        let t = tensor(&t, "tensor")?;
        t.set_name(&scalar_str(&name, "name")?);
        Ok(().into())
    })
}

/// Sets ggml's "input", "output" or "param" flag.
/// @noRd
#[extendr]
fn rs_tensor_set_flag(t: Robj, flag: Robj) -> Robj {
    guard(|| {
        let t = tensor(&t, "tensor")?;
        let f = match scalar_str(&flag, "flag")?.as_str() {
            "input" => Tensor::INPUT,
            "output" => Tensor::OUTPUT,
            "param" => Tensor::PARAM,
            other => anyhow::bail!("unknown tensor flag '{other}'"),
        };
        t.set_flag(f);
        Ok(().into())
    })
}

/// Write values (ggml order) from element `first`.
/// @noRd
#[extendr]
fn rs_tensor_set(t: Robj, values: Robj, first: Robj) -> Robj {
    guard(|| {
        let t = tensor(&t, "tensor")?;
        let v = f64_vec(&values, "data")?;
        io::set_values(t, &v, scalar_usize(&first, "offset")?)?;
        Ok(().into())
    })
}

/// Read `n` values (all when NULL) from element `first`; integers for i32 tensors.
/// @noRd
#[extendr]
fn rs_tensor_get(t: Robj, first: Robj, n: Robj) -> Robj {
    guard(|| {
        let t = tensor(&t, "tensor")?;
        let n = if n.is_null() { None } else { Some(scalar_usize(&n, "n_elements")?) };
        let v = io::get_values(t, scalar_usize(&first, "offset")?, n)?;
        Ok(if t.dtype() == DType::I32 {
            v.iter().map(|&x| x as i32).collect::<Vec<i32>>().into()
        } else {
            v.into()
        })
    })
}

extendr_module! {
    mod tensor;
    fn rs_new_tensor;
    fn rs_tensor_info;
    fn rs_set_name;
    fn rs_tensor_set_flag;
    fn rs_tensor_set;
    fn rs_tensor_get;
}
