//! Vulkan backends: creation, the best device, and run statistics.

use crate::conv::backend_arg;
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::backend::Backend;
use ggmlr_core::backend::vulkan;
use std::sync::Arc;

/// @noRd
#[extendr]
fn rs_vulkan_init(device: Robj) -> Robj {
    guard(|| {
        let d = crate::conv::scalar_i64(&device, "device")?;
        anyhow::ensure!(d >= 0, "`device` must be a device index (0 or more), got {d}");
        Ok(ExternalPtr::new(Arc::new(Backend::vulkan(d as usize)?)).into())
    })
}

/// @noRd
#[extendr]
fn rs_vulkan_is_backend(b: Robj) -> Robj {
    guard(|| Ok(backend_arg(&b, "backend").map(|b| b.is_vulkan()).unwrap_or(false).into()))
}

/// The best device's index (-1 when none; a CPU-type device only when
/// GGMLR_VULKAN_CPU_DEVICE allows it), whether that variable allows it, and
/// the first CPU-type device (-1 when none).
/// @noRd
#[extendr]
fn rs_vulkan_best_device() -> Robj {
    guard(|| {
        let devs = &vulkan::discovery().devices;
        let allow = vulkan::cpu_device_allowed();
        let idx = |d: Option<&vulkan::DeviceInfo>| d.map(|d| d.index as i32).unwrap_or(-1);
        let best = idx(vulkan::best_device(devs, allow));
        let cpu = idx(devs.iter().find(|d| d.device_type == "cpu"));
        Ok(list!(index = best, cpu_allowed = allow, cpu_device = cpu, env = vulkan::CPU_DEVICE_ENV).into())
    })
}

/// @noRd
#[extendr]
fn rs_vulkan_backend_stats(b: Robj) -> Robj {
    guard(|| {
        let b = backend_arg(&b, "backend")?;
        b.check_live()?;
        let ctx = b.vulkan_context().ok_or_else(|| {
            anyhow::anyhow!("backend '{}' is not a Vulkan backend; create one with ggml_vulkan_init()", b.name())
        })?;
        let (free, total) = ctx.memory();
        Ok(list!(
            device = ctx.info().index as i32,
            name = ctx.name(),
            device_type = ctx.info().device_type,
            submissions = ctx.submissions() as f64,
            barriers = ctx.barriers() as f64,
            pipelines = ctx.pipeline_count() as i32,
            memory_blocks = ctx.device_allocations() as i32,
            memory_free = free as f64,
            memory_total = total as f64
        )
        .into())
    })
}

/// @noRd
#[extendr]
fn rs_vulkan_context_open(device: Robj) -> Robj {
    guard(|| {
        let d = crate::conv::scalar_i64(&device, "device")?;
        Ok((d >= 0 && vulkan::VkContext::is_open(d as usize)).into())
    })
}

extendr_module! {
    mod vulkan_backend;
    fn rs_vulkan_context_open;
    fn rs_vulkan_init;
    fn rs_vulkan_is_backend;
    fn rs_vulkan_best_device;
    fn rs_vulkan_backend_stats;
}
