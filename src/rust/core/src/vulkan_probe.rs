//! Run-time discovery of Vulkan devices.
//!
//! The Vulkan loader is opened with `dlopen` when first asked for (ash's
//! `loaded` feature), so the package builds and runs without any Vulkan
//! library installed. Discovery happens once per process and is cached.

use ash::vk;
use std::ffi::CStr;
use std::sync::OnceLock;

/// What discovery found about one physical device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub index: usize,
    pub name: String,
    pub device_type: &'static str,
    pub api_version: (u32, u32, u32),
}

/// The outcome of discovery: the devices found, or why there are none.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub devices: Vec<DeviceInfo>,
    pub status: String,
}

static DISCOVERY: OnceLock<Discovery> = OnceLock::new();

/// Discover devices once and return the cached result.
pub fn discovery() -> &'static Discovery {
    DISCOVERY.get_or_init(|| match discover() {
        Ok(devices) if devices.is_empty() => Discovery {
            devices,
            status: "Vulkan loader found, but it reports no physical device".into(),
        },
        Ok(devices) => {
            let status = format!("{} Vulkan device(s) available", devices.len());
            Discovery { devices, status }
        }
        Err(why) => Discovery { devices: Vec::new(), status: why },
    })
}

pub fn device_type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    }
}

fn discover() -> std::result::Result<Vec<DeviceInfo>, String> {
    // SAFETY: loading the system Vulkan loader runs its initialisers; that is
    // the documented way to use ash's `loaded` feature.
    let entry = unsafe { ash::Entry::load() }
        .map_err(|e| format!("Vulkan loader not found ({e})"))?;
    let app = vk::ApplicationInfo::default()
        .application_name(c"ggmlR")
        .api_version(vk::make_api_version(0, 1, 1, 0));
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: `info` and `app` outlive the call; the instance is destroyed below.
    let instance = unsafe { entry.create_instance(&info, None) }
        .map_err(|e| format!("Vulkan instance could not be created ({e})"))?;
    // SAFETY: the instance is valid until destroy_instance below.
    let result = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| format!("Vulkan devices could not be enumerated ({e})"))
        .map(|pds| {
            pds.iter()
                .enumerate()
                .map(|(index, &pd)| {
                    // SAFETY: `pd` came from this instance.
                    let props = unsafe { instance.get_physical_device_properties(pd) };
                    let name = props
                        .device_name_as_c_str()
                        .unwrap_or(CStr::from_bytes_with_nul(b"unknown\0").unwrap())
                        .to_string_lossy()
                        .into_owned();
                    let v = props.api_version;
                    DeviceInfo {
                        index,
                        name,
                        device_type: device_type_name(props.device_type),
                        api_version: (
                            vk::api_version_major(v),
                            vk::api_version_minor(v),
                            vk::api_version_patch(v),
                        ),
                    }
                })
                .collect()
        });
    // SAFETY: nothing created from the instance is alive any more.
    unsafe { instance.destroy_instance(None) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_never_panics_and_is_cached() {
        let a = discovery();
        let b = discovery();
        assert!(std::ptr::eq(a, b));
        assert!(!a.status.is_empty());
        for (i, d) in a.devices.iter().enumerate() {
            assert_eq!(d.index, i);
            assert!(!d.name.is_empty());
        }
    }
}
