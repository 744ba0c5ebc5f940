//! Loader, instance and physical-device queries.
//!
//! The Vulkan loader is opened with `dlopen` the first time it is needed
//! (ash's `loaded` feature), so the package builds and runs with no Vulkan
//! library installed. Discovery of devices happens once per process.

use ash::vk;
use std::ffi::CStr;
use std::sync::OnceLock;

/// What the engine knows about one physical device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub index: usize,
    pub name: String,
    /// "discrete", "integrated", "virtual", "cpu" or "other".
    pub device_type: &'static str,
    pub api_version: (u32, u32, u32),
    pub vendor_id: u32,
    pub device_id: u32,
    /// Driver name and version string ("llvmpipe", "Mesa 22.3.6" ...), or "unknown".
    pub driver: String,
    /// Total bytes of the device-local heaps.
    pub memory_total: u64,
    /// The size of the largest device-local heap.
    pub largest_heap: u64,
    /// Arithmetic in f16 inside shaders (`shaderFloat16`).
    pub fp16: bool,
    /// 16-bit storage buffer access (`storageBuffer16BitAccess`).
    pub storage16: bool,
    /// VK_EXT_memory_budget is available.
    pub memory_budget: bool,
    /// Device memory is host memory (integrated GPUs, CPU devices): buffers are mapped directly.
    pub unified_memory: bool,
    pub subgroup_size: u32,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
    /// VK_KHR_cooperative_matrix is offered (the engine does not use it yet).
    pub cooperative_matrix: bool,
    /// VK_KHR_shader_bfloat16 is offered (bf16 storage works everywhere).
    pub bf16: bool,
    /// Integer dot products (Vulkan 1.3 or VK_KHR_shader_integer_dot_product).
    pub integer_dot_product: bool,
    pub limits: DeviceLimits,
}

/// The device limits the engine respects.
#[derive(Debug, Clone, Copy)]
pub struct DeviceLimits {
    pub max_memory_allocation_count: u32,
    pub max_memory_allocation_size: u64,
    pub max_storage_buffer_range: u32,
    pub min_storage_buffer_offset_alignment: u64,
    pub max_compute_work_group_count: [u32; 3],
    pub max_compute_work_group_invocations: u32,
    pub max_compute_shared_memory_size: u32,
    pub max_push_constants_size: u32,
}

/// The outcome of discovery: the devices found, or why there are none.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub devices: Vec<DeviceInfo>,
    pub status: String,
}

static ENTRY: OnceLock<Result<ash::Entry, String>> = OnceLock::new();
static DISCOVERY: OnceLock<Discovery> = OnceLock::new();

/// The process-wide loader, opened once.
pub(crate) fn entry() -> Result<&'static ash::Entry, String> {
    ENTRY
        .get_or_init(|| {
            // SAFETY: loading the system Vulkan loader runs its initialisers;
            // that is the documented use of ash's `loaded` feature.
            unsafe { ash::Entry::load() }.map_err(|e| format!("Vulkan loader not found ({e})"))
        })
        .as_ref()
        .map_err(|e| e.clone())
}

/// The Vulkan version instances are created for: 1.1 when the loader
/// offers it, else 1.0.
pub(crate) fn instance_api(entry: &ash::Entry) -> u32 {
    // SAFETY: plain query of the loader.
    let loader_version = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    if loader_version >= vk::API_VERSION_1_1 { vk::API_VERSION_1_1 } else { vk::API_VERSION_1_0 }
}

/// A new instance (Vulkan 1.1 when the loader offers it).
pub(crate) fn create_instance(entry: &ash::Entry) -> Result<ash::Instance, String> {
    let api = instance_api(entry);
    let app = vk::ApplicationInfo::default()
        .application_name(c"ggmlR")
        .engine_name(c"ggmlR")
        .api_version(api);
    let info = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: `info` and `app` outlive the call.
    unsafe { entry.create_instance(&info, None) }
        .map_err(|e| format!("Vulkan instance could not be created ({e})"))
}

/// Discover devices once and return the cached result.
pub fn discovery() -> &'static Discovery {
    DISCOVERY.get_or_init(|| match discover() {
        Ok(devices) if devices.is_empty() => Discovery {
            devices,
            status: "Vulkan loader found, but it reports no physical device".into(),
        },
        Ok(devices) => {
            let names: Vec<String> = devices.iter().map(|d| format!("'{}'", d.name)).collect();
            let status = format!("{} Vulkan device(s) available: {}", devices.len(), names.join(", "));
            Discovery { devices, status }
        }
        Err(why) => Discovery { devices: Vec::new(), status: why },
    })
}

fn discover() -> Result<Vec<DeviceInfo>, String> {
    let entry = entry()?;
    let instance = create_instance(entry)?;
    // SAFETY: the instance is valid until destroy_instance below, and every
    // physical device handle comes from it.
    let result = unsafe { instance.enumerate_physical_devices() }
        .map_err(|e| format!("Vulkan devices could not be enumerated ({e})"))
        .map(|pds| {
            pds.iter().enumerate().map(|(i, &pd)| query_device(&instance, pd, i)).collect()
        });
    // SAFETY: nothing created from the instance is alive any more.
    unsafe { instance.destroy_instance(None) };
    result
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

fn has_extension(instance: &ash::Instance, pd: vk::PhysicalDevice, name: &CStr) -> bool {
    // SAFETY: `pd` belongs to `instance`.
    unsafe { instance.enumerate_device_extension_properties(pd) }
        .map(|exts| exts.iter().any(|e| e.extension_name_as_c_str().ok() == Some(name)))
        .unwrap_or(false)
}

/// Everything the engine needs to know about `pd`.
pub(crate) fn query_device(instance: &ash::Instance, pd: vk::PhysicalDevice, index: usize) -> DeviceInfo {
    // SAFETY (whole function): `pd` belongs to `instance`; every structure
    // chained into a query outlives the call.
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let v = props.api_version;
    let v11 = v >= vk::API_VERSION_1_1;
    let v12 = v >= vk::API_VERSION_1_2;
    let name = props
        .device_name_as_c_str()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    // SAFETY: `pd` belongs to `instance`.
    let mem = unsafe { instance.get_physical_device_memory_properties(pd) };
    let heaps = mem.memory_heaps.get(..mem.memory_heap_count as usize).unwrap_or(&mem.memory_heaps);
    let local: Vec<u64> = heaps
        .iter()
        .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|h| h.size)
        .collect();
    let memory_total = local.iter().sum();
    let largest_heap = local.iter().copied().max().unwrap_or(0);
    let types = mem.memory_types.get(..mem.memory_type_count as usize).unwrap_or(&mem.memory_types);
    let shared_type = types.iter().any(|t| {
        t.property_flags.contains(
            vk::MemoryPropertyFlags::DEVICE_LOCAL
                | vk::MemoryPropertyFlags::HOST_VISIBLE
                | vk::MemoryPropertyFlags::HOST_COHERENT,
        )
    });
    let integrated = matches!(
        props.device_type,
        vk::PhysicalDeviceType::INTEGRATED_GPU | vk::PhysicalDeviceType::CPU
    );

    let mut fp16 = false;
    let mut storage16 = false;
    let mut subgroup_size = 0;
    let mut sg_range = (0, 0);
    let mut max_alloc = largest_heap;
    let mut driver = String::from("unknown");
    if v11 {
        let has_f16_ext = has_extension(instance, pd, ash::khr::shader_float16_int8::NAME);
        let mut f16 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
        let mut s16 = vk::PhysicalDevice16BitStorageFeatures::default();
        let mut feats = vk::PhysicalDeviceFeatures2::default().push_next(&mut s16);
        if v12 || has_f16_ext {
            feats = feats.push_next(&mut f16);
        }
        // SAFETY: `pd` belongs to `instance`; the chained feature structures outlive the call.
        unsafe { instance.get_physical_device_features2(pd, &mut feats) };
        fp16 = f16.shader_float16 == vk::TRUE;
        storage16 = s16.storage_buffer16_bit_access == vk::TRUE;

        let has_drv_ext = has_extension(instance, pd, ash::khr::driver_properties::NAME);
        let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut sg = vk::PhysicalDeviceSubgroupProperties::default();
        let mut drv = vk::PhysicalDeviceDriverProperties::default();
        let mut sgc = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
        let has_sgc = v >= vk::API_VERSION_1_3 || has_extension(instance, pd, ash::ext::subgroup_size_control::NAME);
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut m3).push_next(&mut sg);
        if v12 || has_drv_ext {
            p2 = p2.push_next(&mut drv);
        }
        if has_sgc {
            p2 = p2.push_next(&mut sgc);
        }
        // SAFETY: `pd` belongs to `instance`; the chained property structures outlive the call.
        unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        if m3.max_memory_allocation_size > 0 {
            max_alloc = m3.max_memory_allocation_size;
        }
        subgroup_size = sg.subgroup_size;
        sg_range = if has_sgc && sgc.min_subgroup_size > 0 {
            (sgc.min_subgroup_size, sgc.max_subgroup_size)
        } else {
            (subgroup_size, subgroup_size)
        };
        if v12 || has_drv_ext {
            let dn = drv.driver_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let di = drv.driver_info_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            driver = match (dn.is_empty(), di.is_empty()) {
                (false, false) => format!("{dn} ({di})"),
                (false, true) => dn,
                (true, false) => di,
                (true, true) => driver,
            };
        }
    }
    let l = &props.limits;
    DeviceInfo {
        index,
        name,
        device_type: device_type_name(props.device_type),
        api_version: (vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v)),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        driver,
        memory_total,
        largest_heap,
        fp16,
        storage16,
        memory_budget: v11 && has_extension(instance, pd, ash::ext::memory_budget::NAME),
        unified_memory: integrated && shared_type,
        subgroup_size,
        subgroup_min_size: sg_range.0,
        subgroup_max_size: sg_range.1,
        cooperative_matrix: has_extension(instance, pd, c"VK_KHR_cooperative_matrix"),
        bf16: has_extension(instance, pd, c"VK_KHR_shader_bfloat16"),
        integer_dot_product: v >= vk::API_VERSION_1_3
            || has_extension(instance, pd, c"VK_KHR_shader_integer_dot_product"),
        limits: DeviceLimits {
            max_memory_allocation_count: l.max_memory_allocation_count,
            max_memory_allocation_size: max_alloc,
            max_storage_buffer_range: l.max_storage_buffer_range,
            min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment.max(4),
            max_compute_work_group_count: l.max_compute_work_group_count,
            max_compute_work_group_invocations: l.max_compute_work_group_invocations,
            max_compute_shared_memory_size: l.max_compute_shared_memory_size,
            max_push_constants_size: l.max_push_constants_size,
        },
    }
}

/// Free and total bytes of the device-local heaps of `pd`: from
/// VK_EXT_memory_budget when `budget` is true, otherwise free = total - `used`.
pub(crate) fn heap_memory(instance: &ash::Instance, pd: vk::PhysicalDevice, budget: bool, used: u64) -> (u64, u64) {
    // SAFETY: `pd` belongs to `instance`; the chained structure outlives the call.
    let mut b = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let mut p2 = vk::PhysicalDeviceMemoryProperties2::default();
    if budget {
        p2 = p2.push_next(&mut b);
        // SAFETY: `pd` belongs to `instance`; the chained budget structure outlives the call.
        unsafe { instance.get_physical_device_memory_properties2(pd, &mut p2) };
    } else {
        p2.memory_properties = unsafe { instance.get_physical_device_memory_properties(pd) };
    }
    let mem = p2.memory_properties;
    let (mut free, mut total) = (0u64, 0u64);
    let heaps = mem.memory_heaps.get(..mem.memory_heap_count as usize).unwrap_or(&mem.memory_heaps);
    for (i, h) in heaps.iter().enumerate() {
        if !h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) {
            continue;
        }
        total += h.size;
        if budget {
            let (budget, usage) = (b.heap_budget.get(i).copied().unwrap_or(0), b.heap_usage.get(i).copied().unwrap_or(0));
            free += budget.saturating_sub(usage).min(h.size);
        }
    }
    if !budget {
        free = total.saturating_sub(used);
    }
    (free, total)
}

/// Free and total device-local bytes of device `index`, queried now through a
/// short-lived instance (no logical device is created).
pub fn device_memory(index: usize) -> crate::Result<(u64, u64)> {
    let info = device_info(index)?;
    let entry = entry().map_err(anyhow::Error::msg)?;
    let instance = create_instance(entry).map_err(anyhow::Error::msg)?;
    // SAFETY: the instance lives until destroy_instance below.
    let pds = unsafe { instance.enumerate_physical_devices() };
    let out = match pds {
        Ok(p) => match p.get(index) {
            Some(&pd) => Ok(heap_memory(&instance, pd, info.memory_budget, 0)),
            None => Err(anyhow::anyhow!("Vulkan device {index} is no longer present")),
        },
        Err(e) => Err(anyhow::anyhow!("Vulkan devices could not be enumerated ({e})")),
    };
    // SAFETY: nothing created from the instance is alive.
    unsafe { instance.destroy_instance(None) };
    out
}

/// The discovered description of device `index`, or an error saying why not.
pub fn device_info(index: usize) -> crate::Result<&'static DeviceInfo> {
    let d = discovery();
    if d.devices.is_empty() {
        anyhow::bail!("no Vulkan device is available ({}); use the CPU backend", d.status);
    }
    d.devices.get(index).ok_or_else(|| match d.devices.len() {
        0 => anyhow::anyhow!("Vulkan device {index} does not exist: no Vulkan device was found"),
        n => anyhow::anyhow!("Vulkan device {index} does not exist: {n} device(s) found, numbered 0 to {}", n - 1),
    })
}

