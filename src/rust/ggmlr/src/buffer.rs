//! Backend buffers.

use crate::conv::xptr;
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::backend::Backend;
use ggmlr_core::memory::{Buffer, BufferTag};
use ggmlr_core::tensor::Context;
use std::sync::Arc;

pub fn buffer(x: &Robj) -> anyhow::Result<&Arc<Buffer>> {
    xptr::<Arc<Buffer>>(x, "buffer", "ggml_backend_buffer")
}

/// NULL when every tensor of the context already has memory. `tag`: "user",
/// "pass" or "persistent" (the ledger's account for the buffer).
/// @noRd
#[extendr]
fn rs_backend_alloc_ctx_tensors(ctx: Robj, b: Robj, tag: Robj) -> Robj {
    guard(|| {
        let c: &Context = crate::conv::ctx_arg(&ctx, "ctx")?;
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        let tag = BufferTag::from_name(&crate::conv::scalar_str(&tag, "tag")?)?;
        Ok(match c.alloc_tensors(b, tag)? {
            Some(buf) => ExternalPtr::new(buf).into(),
            None => ().into(),
        })
    })
}

/// list(size, freed, backend, id, tag)
/// @noRd
#[extendr]
fn rs_buffer_info(buf: Robj) -> Robj {
    guard(|| {
        let b = buffer(&buf)?;
        Ok(list!(
            size = b.size() as f64,
            freed = b.is_freed(),
            backend = b.backend_name(),
            id = b.id() as f64,
            tag = b.tag().name()
        )
        .into())
    })
}

/// @noRd
#[extendr]
fn rs_buffer_free(buf: Robj) -> Robj {
    guard(|| {
        buffer(&buf)?.free();
        Ok(().into())
    })
}

extendr_module! {
    mod buffer;
    fn rs_backend_alloc_ctx_tensors;
    fn rs_buffer_info;
    fn rs_buffer_free;
}
