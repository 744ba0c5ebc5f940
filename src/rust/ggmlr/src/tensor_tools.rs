//! Tensor and context utilities: layout questions, flags, op parameters,
//! duplicates and whole views, copies, walking a context's tensors, reset.

use crate::conv::{ctx_arg, scalar_bool, scalar_usize};
use crate::guard;
use crate::tensor::{tensor, tensor_robj};
use extendr_api::prelude::*;
use ggmlr_core::layout::predicates as p;
use ggmlr_core::op::codes;
use ggmlr_core::tensor::io;

/// The tensor's strides (all five dimensions'),
/// rows, element size, layout predicates, flags and op codes.
/// @noRd
#[extendr]
fn rs_tensor_layout(t: Robj) -> Robj {
    guard(|| {
        let t = tensor(&t, "tensor")?;
        let l = t.layout();
        let nb: Vec<f64> = l.nb.iter().map(|&b| b as f64).collect();
        let unary: Robj = match t.op() {
            ggmlr_core::op::Op::Unary(u) => codes::unary_code(*u).map_or(Robj::from(()), |c| (c as i32).into()),
            _ => Robj::from(()),
        };
        Ok(list!(
            nb = nb,
            nrows = p::nrows(l) as f64,
            element_size = t.dtype().size() as f64,
            contiguous_0 = p::is_contiguous_n(l, 0),
            contiguous_1 = p::is_contiguous_n(l, 1),
            contiguous_2 = p::is_contiguous_n(l, 2),
            contiguous_rows = p::is_contiguous_rows(l),
            contiguous_channels = p::is_contiguous_channels(l),
            contiguously_allocated = p::is_contiguously_allocated(l),
            transposed = p::is_transposed(l),
            permuted = p::is_permuted(l),
            flags = t.flags() as i32,
            op_code = codes::op_code(t.op()).map_or(-1, |c| c as i32),
            op_desc = codes::op_desc(t.op()),
            unary_code = unary
        )
        .into())
    })
}

/// list(same_shape, same_stride, same_layout, can_repeat) of `a` and `b`.
/// @noRd
#[extendr]
fn rs_tensor_compare(a: Robj, b: Robj) -> Robj {
    guard(|| {
        let (a, b) = (tensor(&a, "a")?.layout(), tensor(&b, "b")?.layout());
        Ok(list!(
            same_shape = p::same_shape(a, b),
            same_stride = p::same_stride(a, b),
            same_layout = p::same_layout(a, b),
            can_repeat = p::can_repeat(a, b)
        )
        .into())
    })
}

/// @noRd
#[extendr]
fn rs_tensor_op_params(t: Robj) -> Robj {
    guard(|| Ok(Raw::from_bytes(&tensor(&t, "tensor")?.op_params()).into()))
}

/// Overwrite op parameter bytes from byte `at`.
/// @noRd
#[extendr]
fn rs_tensor_set_op_params(t: Robj, at: Robj, bytes: Robj) -> Robj {
    guard(|| {
        let raw: Raw = bytes.try_into().map_err(|_| anyhow::anyhow!("`params` must be a raw vector"))?;
        tensor(&t, "tensor")?.set_op_params(scalar_usize(&at, "index")?, raw.as_slice())?;
        Ok(().into())
    })
}

/// A new tensor of `t`'s type and sizes in `ctx` ("dup"), or a view of all of it ("view").
/// @noRd
#[extendr]
fn rs_tensor_like(ctx: Robj, t: Robj, view: Robj) -> Robj {
    guard(|| {
        let c = ctx_arg(&ctx, "ctx")?;
        let t = tensor(&t, "tensor")?;
        let l = t.layout();
        Ok(tensor_robj(if scalar_bool(&view, "view")? {
            // BOUNDS: `nb` is a Dims ([usize; 4]): `1..` is in range.
            c.view(t, &l.ne, &l.nb[1..], 0)?
        } else {
            c.new_tensor(t.dtype(), &l.ne)?
        }))
    })
}

/// @noRd
#[extendr]
fn rs_tensor_copy(dst: Robj, src: Robj) -> Robj {
    guard(|| {
        io::copy(tensor(&dst, "dst")?, tensor(&src, "src")?)?;
        Ok(().into())
    })
}

/// The tensor after `t` in `ctx` (the first when `t` is NULL); NULL past the last.
/// @noRd
#[extendr]
fn rs_ctx_next_tensor(ctx: Robj, t: Robj) -> Robj {
    guard(|| {
        let c = ctx_arg(&ctx, "ctx")?;
        c.check_live()?;
        let all = c.tensors();
        let next = if t.is_null() {
            all.first()
        } else {
            let id = tensor(&t, "tensor")?.id();
            let at = all.iter().position(|x| x.id() == id).ok_or_else(|| {
                anyhow::anyhow!("`tensor` is not one of the context's tensors (any more)")
            })?;
            all.get(at + 1)
        };
        Ok(next.map_or(Robj::from(()), |t| tensor_robj(t.clone())))
    })
}

/// "reset", "alloc" (no_alloc = FALSE) or "no_alloc" (no_alloc = TRUE).
/// @noRd
#[extendr]
fn rs_ctx_control(ctx: Robj, what: Robj) -> Robj {
    guard(|| {
        let c = ctx_arg(&ctx, "ctx")?;
        match crate::conv::scalar_str(&what, "what")?.as_str() {
            "reset" => c.reset()?,
            "alloc" => c.set_no_alloc(false)?,
            _ => c.set_no_alloc(true)?,
        }
        Ok(().into())
    })
}

/// list(max_tensor_size, names, types, shapes, bytes, ops) of the context's tensors.
/// @noRd
#[extendr]
fn rs_ctx_objects(ctx: Robj) -> Robj {
    guard(|| {
        let c = ctx_arg(&ctx, "ctx")?;
        c.check_live()?;
        let ts = c.tensors();
        Ok(list!(
            max_tensor_size = c.max_tensor_size() as f64,
            names = ts.iter().map(|t| crate::guard::out(&t.name())).collect::<Vec<_>>(),
            types = ts.iter().map(|t| t.dtype().name()).collect::<Vec<_>>(),
            shapes = ts.iter().map(|t| ggmlr_core::layout::fmt_shape(&t.dims())).collect::<Vec<_>>(),
            bytes = ts.iter().map(|t| t.nbytes() as f64).collect::<Vec<_>>(),
            ops = ts.iter().map(|t| codes::op_desc(t.op())).collect::<Vec<_>>()
        )
        .into())
    })
}

extendr_module! {
    mod tensor_tools;
    fn rs_tensor_layout;
    fn rs_tensor_compare;
    fn rs_tensor_op_params;
    fn rs_tensor_set_op_params;
    fn rs_tensor_like;
    fn rs_tensor_copy;
    fn rs_ctx_next_tensor;
    fn rs_ctx_control;
    fn rs_ctx_objects;
}
