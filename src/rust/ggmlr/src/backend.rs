//! Backends: creation, naming, freeing, device counts.

use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::backend::{self, Backend};
use ggmlr_core::backend::vulkan;

/// @noRd
#[extendr]
fn rs_backend_cpu_init() -> Robj {
    guard(|| Ok(ExternalPtr::new(std::sync::Arc::new(Backend::cpu())).into()))
}

/// @noRd
#[extendr]
fn rs_backend_name(b: Robj) -> Robj {
    guard(|| {
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        b.check_live()?;
        Ok(b.name().into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_free(b: Robj) -> Robj {
    guard(|| {
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        b.free();
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_is_freed(b: Robj) -> Robj {
    guard(|| {
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        Ok(b.is_freed().into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_cpu_set_n_threads(b: Robj, n: Robj) -> Robj {
    guard(|| {
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        let n = crate::conv::scalar_i64(&n, "n_threads")?;
        anyhow::ensure!(n >= 1, "`n_threads` must be at least 1, not {n}");
        b.set_n_threads(n as usize)?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_n_threads(b: Robj) -> Robj {
    guard(|| {
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        Ok((b.n_threads() as i32).into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_dev_count() -> Robj {
    guard(|| Ok((backend::dev_count() as i32).into()))
}

/// @noRd
#[extendr]
fn rs_vulkan_device_count() -> Robj {
    guard(|| Ok((vulkan::discovery().devices.len() as i32).into()))
}

/// @noRd
#[extendr]
fn rs_vulkan_status() -> Robj {
    guard(|| Ok(vulkan::discovery().status.clone().into()))
}

extendr_module! {
    mod backend;
    fn rs_backend_cpu_init;
    fn rs_backend_name;
    fn rs_backend_free;
    fn rs_backend_is_freed;
    fn rs_backend_cpu_set_n_threads;
    fn rs_backend_n_threads;
    fn rs_backend_dev_count;
    fn rs_vulkan_device_count;
    fn rs_vulkan_status;
}
