//! Buffer usage, clearing, host memory, multi-buffers.

use crate::buffer::buffer;
use crate::conv::{scalar_i64, scalar_str, xptr};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::memory::{MultiBuffer, Usage};
use std::sync::Arc;

fn multi(x: &Robj) -> anyhow::Result<&MultiBuffer> {
    xptr::<MultiBuffer>(x, "buffer", "ggml_backend_multi_buffer")
}

/// list(name, usage, is_host) of a buffer or multi-buffer (`is_multi`).
/// @noRd
#[extendr]
fn rs_buffer_props(buf: Robj, is_multi: Robj) -> Robj {
    guard(|| {
        if crate::conv::scalar_bool(&is_multi, "is_multi")? {
            let m = multi(&buf)?;
            let name = m.parts().first().map_or("", |b| b.backend_name());
            return Ok(list!(name = name, usage = m.usage() as i32, is_host = m.is_host(), size = m.size() as f64, freed = m.is_freed()).into());
        }
        let b = buffer(&buf)?;
        Ok(list!(name = b.backend_name(), usage = b.usage() as i32, is_host = b.is_host(), size = b.size() as f64, freed = b.is_freed()).into())
    })
}

/// "usage" (set to `value`), "clear" (fill with byte `value`), "reset", "free".
/// @noRd
#[extendr]
fn rs_buffer_control(buf: Robj, is_multi: Robj, what: Robj, value: Robj) -> Robj {
    guard(|| {
        let what = scalar_str(&what, "what")?;
        if crate::conv::scalar_bool(&is_multi, "is_multi")? {
            let m = multi(&buf)?;
            match what.as_str() {
                "usage" => m.set_usage(Usage::from_code(scalar_i64(&value, "usage")?)?),
                "free" => m.free(),
                "clear" => {
                    let v = byte(&value)?;
                    for b in m.parts() {
                        b.clear(v, "ggml_backend_buffer_clear()")?;
                    }
                }
                _ => anyhow::ensure!(!m.is_freed(), "the multi-buffer was freed"),
            }
            return Ok(().into());
        }
        let b = buffer(&buf)?;
        match what.as_str() {
            "usage" => b.set_usage(Usage::from_code(scalar_i64(&value, "usage")?)?),
            "clear" => b.clear(byte(&value)?, "ggml_backend_buffer_clear()")?,
            _ => {
                drop(b.read("ggml_backend_buffer_reset()")?);
            }
        }
        Ok(().into())
    })
}

fn byte(v: &Robj) -> anyhow::Result<u8> {
    let v = scalar_i64(v, "value")?;
    u8::try_from(v).map_err(|_| anyhow::anyhow!("`value` must be a byte value from 0 to 255, not {v}"))
}

/// A multi-buffer over a list of buffers.
/// @noRd
#[extendr]
fn rs_multi_buffer(bufs: Robj) -> Robj {
    guard(|| {
        let list = bufs.as_list().ok_or_else(|| anyhow::anyhow!("`buffers` must be a list of buffers"))?;
        let mut parts = Vec::with_capacity(list.len());
        for (_, b) in list.iter() {
            let b: &Arc<_> = buffer(&b)?;
            parts.push(b.clone());
        }
        Ok(ExternalPtr::new(MultiBuffer::new(parts)?).into())
    })
}

extendr_module! {
    mod buffer_tools;
    fn rs_buffer_props;
    fn rs_buffer_control;
    fn rs_multi_buffer;
}
