//! Vulkan device queries: list, description, memory, capabilities.

use crate::conv::scalar_i64;
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::backend::vulkan::{self, DeviceInfo};

fn device_arg(x: &Robj) -> anyhow::Result<&'static DeviceInfo> {
    let d = scalar_i64(x, "device")?;
    anyhow::ensure!(d >= 0, "`device` must be a device index (0 or more), got {d}");
    vulkan::device_info(d as usize)
}

/// @noRd
#[extendr]
fn rs_vulkan_list_devices() -> Robj {
    guard(|| {
        let devs = &vulkan::discovery().devices;
        let index: Vec<i32> = devs.iter().map(|d| d.index as i32).collect();
        let name: Vec<String> = devs.iter().map(|d| d.name.clone()).collect();
        let kind: Vec<String> = devs.iter().map(|d| d.device_type.to_string()).collect();
        let driver: Vec<String> = devs.iter().map(|d| d.driver.clone()).collect();
        let memory: Vec<f64> = devs.iter().map(|d| d.memory_total as f64).collect();
        let f16: Vec<bool> = devs.iter().map(|d| d.fp16).collect();
        Ok(list!(index = index, name = name, device_type = kind, driver = driver, memory = memory, f16 = f16).into())
    })
}

/// @noRd
#[extendr]
fn rs_vulkan_device_description(device: Robj) -> Robj {
    guard(|| Ok(device_arg(&device)?.name.clone().into()))
}

/// @noRd
#[extendr]
fn rs_vulkan_device_memory(device: Robj) -> Robj {
    guard(|| {
        let info = device_arg(&device)?;
        let (free, total) = vulkan::device_memory(info.index)?;
        Ok(list!(free = free as f64, total = total as f64).into())
    })
}

/// @noRd
#[extendr]
fn rs_vulkan_device_caps(device: Robj) -> Robj {
    guard(|| {
        let d = device_arg(&device)?;
        let l = &d.limits;
        let arch = match d.vendor_id {
            0x10de => "NVIDIA",
            0x1002 => "AMD",
            0x8086 => "INTEL",
            _ => "OTHER",
        };
        let (maj, min, patch) = d.api_version;
        let wg: Vec<i32> = l.max_compute_work_group_count.iter().map(|&v| v.min(i32::MAX as u32) as i32).collect();
        let int = |v: u32| v.min(i32::MAX as u32) as i32;
        Ok(list!(
            coopmat_support = d.cooperative_matrix,
            coopmat1_fa_support = false,
            fp16 = d.fp16,
            bf16 = d.bf16,
            integer_dot_product = d.integer_dot_product,
            subgroup_size = int(d.subgroup_size),
            subgroup_min_size = int(d.subgroup_min_size),
            subgroup_max_size = int(d.subgroup_max_size),
            subgroup_no_shmem = false,
            wavefronts_per_simd = 0i32,
            arch = arch,
            coopmat_m = 0i32,
            coopmat_n = 0i32,
            coopmat_k = 0i32,
            supports_256_push_constants = l.max_push_constants_size >= 256,
            max_push_constants_size = int(l.max_push_constants_size),
            device_type = d.device_type,
            api_version = format!("{maj}.{min}.{patch}"),
            driver = d.driver.clone(),
            storage_16bit = d.storage16,
            unified_memory = d.unified_memory,
            memory_budget = d.memory_budget,
            max_memory_allocation_count = int(l.max_memory_allocation_count),
            max_memory_allocation_size = l.max_memory_allocation_size as f64,
            max_storage_buffer_range = l.max_storage_buffer_range as f64,
            min_storage_buffer_offset_alignment = l.min_storage_buffer_offset_alignment as f64,
            max_compute_work_group_count = wg,
            max_compute_work_group_invocations = int(l.max_compute_work_group_invocations),
            max_compute_shared_memory_size = int(l.max_compute_shared_memory_size)
        )
        .into())
    })
}

extendr_module! {
    mod vulkan;
    fn rs_vulkan_list_devices;
    fn rs_vulkan_device_description;
    fn rs_vulkan_device_memory;
    fn rs_vulkan_device_caps;
}
