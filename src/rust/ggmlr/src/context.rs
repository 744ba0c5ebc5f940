//! Contexts and element types.

use crate::conv::{scalar_bool, scalar_i64, scalar_usize};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::tensor::{Context, GRAPH_OVERHEAD, TENSOR_OVERHEAD};
use ggmlr_core::base::dtype::DType;

/// @noRd
#[extendr]
fn rs_init(mem_size: Robj, no_alloc: Robj) -> Robj {
    guard(|| {
        let ctx = Context::new(scalar_usize(&mem_size, "mem_size")?, scalar_bool(&no_alloc, "no_alloc")?)?;
        Ok(ExternalPtr::new(std::sync::Arc::new(ctx)).into())
    })
}

/// @noRd
#[extendr]
fn rs_free(ctx: Robj) -> Robj {
    guard(|| {
        crate::conv::ctx_arg(&ctx, "ctx")?.free();
        Ok(().into())
    })
}

/// list(mem_size, used, n_tensors, no_alloc, freed)
/// @noRd
#[extendr]
fn rs_ctx_info(ctx: Robj) -> Robj {
    guard(|| {
        let c: &Context = crate::conv::ctx_arg(&ctx, "ctx")?;
        Ok(list!(
            mem_size = c.mem_size() as f64,
            used = c.used_mem() as f64,
            n_tensors = c.n_tensors() as i32,
            no_alloc = c.no_alloc(),
            freed = c.is_freed()
        )
        .into())
    })
}

/// @noRd
#[extendr]
fn rs_overheads() -> Robj {
    guard(|| Ok(list!(tensor = TENSOR_OVERHEAD as f64, graph = GRAPH_OVERHEAD as f64).into()))
}

/// list(size, name) of a type code.
/// @noRd
#[extendr]
fn rs_type_info(type_: Robj) -> Robj {
    guard(|| {
        let t = DType::from_code(scalar_i64(&type_, "type")?)?;
        Ok(list!(size = t.size() as i32, name = t.name()).into())
    })
}

extendr_module! {
    mod context;
    fn rs_init;
    fn rs_free;
    fn rs_ctx_info;
    fn rs_overheads;
    fn rs_type_info;
}
