//! Which Vulkan device the "best backend" uses.
//!
//! Real GPUs rank discrete, integrated, virtual, then others. A CPU-type
//! device (llvmpipe / lavapipe, `VK_PHYSICAL_DEVICE_TYPE_CPU`) runs shaders
//! on the host far slower than the CPU backend runs the same graph, so it is
//! never the best choice by itself: it is used when asked for by index
//! (`Backend::vulkan(i)`) or when the environment variable
//! [`CPU_DEVICE_ENV`] is set to a true value (test runs on machines whose
//! only Vulkan device is lavapipe).

use super::device::DeviceInfo;

/// Set to `1` (or `true`, `yes`) to let the best-backend choice take a
/// CPU-type Vulkan device when there is no real GPU.
pub const CPU_DEVICE_ENV: &str = "GGMLR_VULKAN_CPU_DEVICE";

/// Whether [`CPU_DEVICE_ENV`] allows CPU-type devices.
pub fn cpu_device_allowed() -> bool {
    std::env::var(CPU_DEVICE_ENV)
        .map(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
        .unwrap_or(false)
}

fn rank(device_type: &str) -> u8 {
    match device_type {
        "discrete" => 0,
        "integrated" => 1,
        "virtual" => 2,
        "cpu" => 4,
        _ => 3,
    }
}

/// The best device among `devices`: the highest-ranked real GPU (lowest
/// index among equals); a CPU-type device only when `allow_cpu`.
pub fn best_device(devices: &[DeviceInfo], allow_cpu: bool) -> Option<&DeviceInfo> {
    let i = best_index(devices.iter().map(|d| (d.index, d.device_type)), allow_cpu)?;
    devices.iter().find(|d| d.index == i)
}

/// The rule of [`best_device`] on `(index, device type)` pairs.
fn best_index<'a>(devices: impl Iterator<Item = (usize, &'a str)>, allow_cpu: bool) -> Option<usize> {
    devices
        .filter(|&(_, t)| allow_cpu || t != "cpu")
        .min_by_key(|&(i, t)| (rank(t), i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::best_index;

    fn best(types: &[&str], allow_cpu: bool) -> Option<usize> {
        best_index(types.iter().copied().enumerate(), allow_cpu)
    }

    #[test]
    fn a_cpu_type_device_is_best_only_when_allowed() {
        assert_eq!(best(&["cpu"], false), None);
        assert_eq!(best(&["cpu"], true), Some(0));
        let mixed = ["cpu", "integrated", "discrete", "discrete"];
        assert_eq!(best(&mixed, false), Some(2));
        assert_eq!(best(&mixed, true), Some(2));
        assert_eq!(best(&["cpu", "other", "integrated"], true), Some(2));
        assert_eq!(best(&["cpu", "other"], false), Some(1));
        assert_eq!(best(&[], true), None);
    }
}
