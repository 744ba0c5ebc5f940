//! Devices and registries: listing, properties, op support, starting backends.

use crate::conv::{backend_arg, scalar_i64, scalar_str, xptr};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::backend::device::{self, Device, DeviceType, Target};
use ggmlr_core::backend::Backend;
use ggmlr_core::memory::Buffer;
use std::sync::Arc;

/// A registry as R holds it: its name.
pub struct Registry(pub &'static str);

pub fn device_arg<'a>(x: &'a Robj, what: &str) -> anyhow::Result<&'a Device> {
    xptr::<Device>(x, what, "ggml_backend_device")
}

fn registry_arg<'a>(x: &'a Robj) -> anyhow::Result<&'a Registry> {
    xptr::<Registry>(x, "reg", "ggml_backend_reg")
}

pub fn device_robj(d: Option<Device>) -> Robj {
    match d {
        Some(d) => ExternalPtr::new(d).into(),
        None => ().into(),
    }
}

fn backend_robj(b: Backend) -> Robj {
    ExternalPtr::new(Arc::new(b)).into()
}

fn index(x: &Robj) -> anyhow::Result<Option<usize>> {
    let i = scalar_i64(x, "index")?;
    Ok(usize::try_from(i).ok())
}

/// @noRd
#[extendr]
fn rs_dev_get(i: Robj) -> Robj {
    guard(|| Ok(device_robj(index(&i)?.and_then(|i| device::devices().into_iter().nth(i)))))
}

/// @noRd
#[extendr]
fn rs_dev_by_name(name: Robj) -> Robj {
    guard(|| Ok(device_robj(device::by_name(&scalar_str(&name, "name")?))))
}

/// @noRd
#[extendr]
fn rs_dev_by_type(t: Robj) -> Robj {
    guard(|| Ok(device_robj(device::by_type(DeviceType::from_code(scalar_i64(&t, "type")?)?))))
}

/// list(name, description, type, registry, free, total, meta)
/// @noRd
#[extendr]
fn rs_dev_info(d: Robj) -> Robj {
    guard(|| {
        let d = device_arg(&d, "device")?;
        let (free, total) = d.memory()?;
        let id: Robj = match &d.target {
            Target::Cpu => Robj::from(()),
            Target::Vulkan(i) => (*i as i32).into(),
            Target::Meta(_) => Robj::from(()),
        };
        Ok(list!(
            name = d.name.as_str(),
            description = d.description.as_str(),
            type_code = d.dev_type as i32,
            type_name = d.dev_type.name(),
            registry = d.registry.unwrap_or(""),
            free = free as f64,
            total = total as f64,
            device_id = id,
            meta = matches!(d.target, Target::Meta(_))
        )
        .into())
    })
}

/// Whether the device computes `op` (a tensor), or, with `offload`, wants to.
/// @noRd
#[extendr]
fn rs_dev_supports_op(d: Robj, op: Robj, offload: Robj) -> Robj {
    guard(|| {
        let d = device_arg(&d, "device")?;
        let t = crate::tensor::tensor(&op, "op")?;
        let srcs: Vec<_> = t.srcs().iter().map(|s| *s.layout()).collect();
        let yes = if crate::conv::scalar_bool(&offload, "offload")? {
            d.offload_op(t.op(), &srcs, t.layout())
        } else {
            d.supports(t.op(), &srcs, t.layout())
        };
        Ok(yes.into())
    })
}

/// Whether a backend on the device computes on a buffer's memory.
/// @noRd
#[extendr]
fn rs_dev_supports_buffer(d: Robj, buf: Robj) -> Robj {
    guard(|| {
        let d = device_arg(&d, "device")?;
        let b: &Arc<Buffer> = crate::buffer::buffer(&buf)?;
        let yes = match &d.target {
            Target::Cpu => b.is_host(),
            _ => !b.is_host() && b.backend_name() == d.name,
        };
        Ok(yes.into())
    })
}

/// @noRd
#[extendr]
fn rs_dev_init(d: Robj) -> Robj {
    guard(|| Ok(backend_robj(Backend::on_device(device_arg(&d, "device")?)?)))
}

/// @noRd
#[extendr]
fn rs_dev_register(d: Robj) -> Robj {
    guard(|| {
        device::register(device_arg(&d, "device")?.clone());
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_get_device(b: Robj) -> Robj {
    guard(|| {
        let b = backend_arg(&b, "backend")?;
        b.check_live()?;
        Ok(device_robj(Some(b.device())))
    })
}

/// A backend on the device or registry called `name` (NULL when there is none).
/// @noRd
#[extendr]
fn rs_backend_init_by_name(name: Robj) -> Robj {
    guard(|| {
        let name = scalar_str(&name, "name")?;
        let d = device::by_name(&name).or_else(|| {
            device::registries()
                .into_iter()
                .find(|r| r.eq_ignore_ascii_case(&name))
                .and_then(|r| device::registry_devices(r).into_iter().next())
        });
        Ok(match d {
            Some(d) => backend_robj(Backend::on_device(&d)?),
            None => ().into(),
        })
    })
}

/// @noRd
#[extendr]
fn rs_reg_names() -> Robj {
    guard(|| Ok(device::registries().into_iter().collect::<Vec<&str>>().into()))
}

/// @noRd
#[extendr]
fn rs_reg_get(name: Robj) -> Robj {
    guard(|| {
        let name = scalar_str(&name, "name")?;
        Ok(match device::registries().into_iter().find(|r| r.eq_ignore_ascii_case(&name)) {
            Some(r) => ExternalPtr::new(Registry(r)).into(),
            None => ().into(),
        })
    })
}

/// @noRd
#[extendr]
fn rs_reg_name(reg: Robj) -> Robj {
    guard(|| Ok(registry_arg(&reg)?.0.into()))
}

/// @noRd
#[extendr]
fn rs_reg_dev_count(reg: Robj) -> Robj {
    guard(|| Ok((device::registry_devices(registry_arg(&reg)?.0).len() as f64).into()))
}

/// @noRd
#[extendr]
fn rs_reg_dev_get(reg: Robj, i: Robj) -> Robj {
    guard(|| {
        let r = registry_arg(&reg)?;
        Ok(device_robj(index(&i)?.and_then(|i| device::registry_devices(r.0).into_iter().nth(i))))
    })
}

extendr_module! {
    mod devices;
    fn rs_dev_get;
    fn rs_dev_by_name;
    fn rs_dev_by_type;
    fn rs_dev_info;
    fn rs_dev_supports_op;
    fn rs_dev_supports_buffer;
    fn rs_dev_init;
    fn rs_dev_register;
    fn rs_backend_get_device;
    fn rs_backend_init_by_name;
    fn rs_reg_names;
    fn rs_reg_get;
    fn rs_reg_name;
    fn rs_reg_dev_count;
    fn rs_reg_dev_get;
}
