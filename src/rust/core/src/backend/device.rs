//! Devices and registries, as ggml's backend registry presents them: one
//! registry per kind of backend ("Vulkan" when a device is present, then
//! "CPU"), each listing its devices; a device can say what it is, how much
//! memory it has, which ops it computes, and start a backend.
//!
//! Devices are listed GPU first and CPU last, as ggml registers them. A meta
//! device ([`MetaDevice`], computed on by [`super::meta`]) is made of other
//! devices and belongs to no registry unless registered.

use super::meta::memory::DeviceSplit;
use super::meta::split::{answer_split, SplitPolicy, SplitTensorInfo};
use super::vulkan;
use crate::base::log;
use crate::layout::Layout;
use crate::op::Op;
use crate::tensor::Tensor;
use anyhow::{bail, ensure};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// ggml's device types (`GGML_BACKEND_DEVICE_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    Cpu = 0,
    Gpu = 1,
    IGpu = 2,
    Accel = 3,
}

impl DeviceType {
    pub fn from_code(code: i64) -> crate::Result<DeviceType> {
        Ok(match code {
            0 => DeviceType::Cpu,
            1 => DeviceType::Gpu,
            2 => DeviceType::IGpu,
            3 => DeviceType::Accel,
            other => anyhow::bail!(
                "unknown device type {other}: use ggml_backend_device_type_cpu() (0), _gpu() (1), _igpu() (2) or _accel() (3)"
            ),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DeviceType::Cpu => "cpu",
            DeviceType::Gpu => "gpu",
            DeviceType::IGpu => "igpu",
            DeviceType::Accel => "accel",
        }
    }
}

/// What a device runs on.
#[derive(Debug, Clone)]
pub enum Target {
    Cpu,
    Vulkan(usize),
    Meta(Arc<MetaDevice>),
}

#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    pub description: String,
    pub dev_type: DeviceType,
    /// The registry listing the device (None for a meta device).
    pub registry: Option<&'static str>,
    pub target: Target,
}

pub const CPU_REGISTRY: &str = "CPU";
pub const VULKAN_REGISTRY: &str = "Vulkan";

/// Devices registered with `ggml_backend_device_register()`.
static REGISTERED: Mutex<Vec<Device>> = Mutex::new(Vec::new());

/// The CPU's model name (from /proc/cpuinfo where there is one).
fn cpu_description() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "CPU".to_string())
}

pub fn cpu_device() -> Device {
    Device {
        name: "CPU".into(),
        description: cpu_description(),
        dev_type: DeviceType::Cpu,
        registry: Some(CPU_REGISTRY),
        target: Target::Cpu,
    }
}

fn vulkan_device(i: usize, info: &vulkan::DeviceInfo) -> Device {
    Device {
        name: format!("Vulkan{i}"),
        description: info.name.clone(),
        dev_type: if info.device_type == "integrated" { DeviceType::IGpu } else { DeviceType::Gpu },
        registry: Some(VULKAN_REGISTRY),
        target: Target::Vulkan(i),
    }
}

/// The devices of a registry.
pub fn registry_devices(reg: &str) -> Vec<Device> {
    let mut out: Vec<Device> = match reg {
        VULKAN_REGISTRY => vulkan::discovery().devices.iter().enumerate().map(|(i, d)| vulkan_device(i, d)).collect(),
        CPU_REGISTRY => vec![cpu_device()],
        _ => Vec::new(),
    };
    let extra = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    out.extend(extra.iter().filter(|d| d.registry == Some(reg)).cloned());
    out
}

/// Registry names, GPU first: "Vulkan" when a Vulkan device is present, then "CPU".
pub fn registries() -> Vec<&'static str> {
    let mut r = Vec::new();
    if !vulkan::discovery().devices.is_empty() {
        r.push(VULKAN_REGISTRY);
    }
    r.push(CPU_REGISTRY);
    r
}

/// Every device, in registry order, then devices registered without a registry.
pub fn devices() -> Vec<Device> {
    let mut out: Vec<Device> = registries().into_iter().flat_map(registry_devices).collect();
    let extra = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    out.extend(extra.iter().filter(|d| d.registry.is_none()).cloned());
    out
}

/// The device called `name` (case does not matter).
pub fn by_name(name: &str) -> Option<Device> {
    devices().into_iter().find(|d| d.name.eq_ignore_ascii_case(name))
}

/// The first device of type `t`.
pub fn by_type(t: DeviceType) -> Option<Device> {
    devices().into_iter().find(|d| d.dev_type == t)
}

/// Add a device to the list (`ggml_backend_device_register`); a device
/// already listed is not added twice.
pub fn register(dev: Device) {
    if devices().iter().any(|d| d.same_as(&dev)) {
        return;
    }
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).push(dev);
}

/// Free and total bytes of the host's memory (Linux: /proc/meminfo; else unknown, 0).
fn host_memory() -> (u64, u64) {
    let Ok(s) = std::fs::read_to_string("/proc/meminfo") else { return (0, 0) };
    let field = |key: &str| -> u64 {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("MemAvailable:"), field("MemTotal:"))
}

impl Device {
    /// The same device (meta devices: the same meta device object).
    pub fn same_as(&self, other: &Device) -> bool {
        match (&self.target, &other.target) {
            (Target::Cpu, Target::Cpu) => true,
            (Target::Vulkan(a), Target::Vulkan(b)) => a == b,
            (Target::Meta(a), Target::Meta(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Free and total bytes (a meta device: the sums over its devices).
    pub fn memory(&self) -> crate::Result<(u64, u64)> {
        match &self.target {
            Target::Cpu => Ok(host_memory()),
            Target::Vulkan(i) => vulkan::device_memory(*i),
            Target::Meta(m) => {
                let mut tot = (0, 0);
                for d in m.devices() {
                    let (f, t) = d.memory()?;
                    tot = (tot.0 + f, tot.1 + t);
                }
                Ok(tot)
            }
        }
    }

    /// Whether the device computes `op` from `srcs` into `dst`.
    pub fn supports(&self, op: &Op, srcs: &[Layout], dst: &Layout) -> bool {
        match &self.target {
            Target::Cpu => true,
            Target::Vulkan(i) => match vulkan::device_info(*i) {
                Ok(info) => vulkan::support::supports(op, srcs, dst, &info.limits),
                Err(_) => false,
            },
            Target::Meta(m) => m.devices().iter().all(|d| d.supports(op, srcs, dst)),
        }
    }

    /// Whether the device wants to compute `op` even when its weights are in
    /// host memory (ggml's `offload_op`): Vulkan devices for ops with a
    /// batch of at least 32 rows, except row lookups.
    // BOUNDS-FN: ne is [usize; 5], indexed by the constant 1.
    pub fn offload_op(&self, op: &Op, srcs: &[Layout], dst: &Layout) -> bool {
        match &self.target {
            Target::Cpu | Target::Meta(_) => false,
            Target::Vulkan(_) => {
                self.supports(op, srcs, dst) && !matches!(op, Op::GetRows) && dst.ne[1] >= 32
            }
        }
    }
}

/// The device of Vulkan device `i`.
pub fn vulkan(i: usize) -> Device {
    match vulkan::discovery().devices.get(i) {
        Some(info) => vulkan_device(i, info),
        None => Device {
            name: format!("Vulkan{i}"),
            description: format!("Vulkan{i}"),
            dev_type: DeviceType::Gpu,
            registry: Some(VULKAN_REGISTRY),
            target: Target::Vulkan(i),
        },
    }
}

#[derive(Debug)]
pub struct MetaDevice {
    devices: Vec<Device>,
    policy: Arc<dyn SplitPolicy>,
    /// Set when the policy failed once: every tensor is mirrored from then on.
    failed: AtomicBool,
    name: String,
}

impl MetaDevice {
    pub fn new(devices: Vec<Device>, policy: Arc<dyn SplitPolicy>) -> crate::Result<Arc<MetaDevice>> {
        ensure!(!devices.is_empty(), "a meta device needs at least one device");
        if let Some(d) = devices.iter().find(|d| matches!(d.target, Target::Meta(_))) {
            bail!("'{}' is a meta device; a meta device is made of simple devices (CPU, Vulkan)", d.name);
        }
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        let name = format!("Meta({})", names.join(", "));
        Ok(Arc::new(MetaDevice { devices, policy, failed: AtomicBool::new(false), name }))
    }

    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the policy failed and every tensor is now mirrored.
    pub fn fell_back(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// The device as a [`Device`] (type of its first device, in no registry).
    pub fn device(self: &Arc<Self>) -> Device {
        Device {
            name: self.name.clone(),
            description: format!("meta device over {} device(s)", self.devices.len()),
            dev_type: self.devices.first().map_or(DeviceType::Cpu, |d| d.dev_type),
            registry: None,
            target: Target::Meta(self.clone()),
        }
    }

    /// How `t` lies over the devices.
    pub fn split_of(&self, t: &Tensor) -> DeviceSplit {
        let n = self.devices.len();
        if n == 1 || self.fell_back() {
            return DeviceSplit::Mirrored;
        }
        let info = SplitTensorInfo {
            name: t.name(),
            type_code: t.dtype().code(),
            ne: t.ne(),
            op: t.op().name().to_string(),
            flags: t.flags(),
        };
        match self.policy.split(&info, n).and_then(|a| answer_split(&a, &info, n)) {
            Ok(s) => s,
            Err(e) => {
                self.failed.store(true, Ordering::SeqCst);
                log::warn(&format!(
                    "meta device {}: the split function failed for {} ({e:#}); this tensor and all later \
                     ones are mirrored on every device",
                    self.name,
                    t.describe()
                ));
                DeviceSplit::Mirrored
            }
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn registry_lists_the_cpu_last() {
        let devs = devices();
        assert_eq!(devs.last().unwrap().name, "CPU");
        assert_eq!(registries().last(), Some(&CPU_REGISTRY));
        assert!(by_name("cpu").is_some_and(|d| d.dev_type == DeviceType::Cpu));
        assert!(by_type(DeviceType::Cpu).is_some());
        assert!(by_name("no such device").is_none());
        let cpu = cpu_device();
        let (free, total) = cpu.memory().unwrap();
        assert!(free <= total);
        let l = Layout::contiguous(DType::F32, [4, 1, 1, 1]);
        assert!(cpu.supports(&Op::Add, &[l, l], &l));
        assert!(!cpu.offload_op(&Op::Add, &[l, l], &l));
        assert!(DeviceType::from_code(9).is_err());
        for (i, d) in vulkan::discovery().devices.iter().enumerate() {
            let v = vulkan_device(i, d);
            assert!(v.supports(&Op::MulMat, &[l, l], &l));
            let f64_like = Layout { dtype: DType::F32, ne: [1 << 30, 1, 1, 1, 1], nb: [4, 1 << 32, 1 << 32, 1 << 32, 1 << 32] };
            assert!(!v.supports(&Op::Add, &[f64_like, f64_like], &f64_like), "tensors beyond one binding");
        }
    }
}
