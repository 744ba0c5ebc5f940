//! Meta devices whose split policy is an R function.
//!
//! The engine holds a policy that is only an id; R keeps the function and
//! its environment under that id (`.meta_policies` in R/meta-backend.R) and
//! its helper `.meta_split()` calls it, catching its errors. A policy asked
//! from another thread than R's main thread fails without calling R, and the
//! meta device then mirrors (its sticky fallback).

use crate::devices::{device_arg, device_robj};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::backend::device::MetaDevice;
use ggmlr_core::backend::meta::split::{SplitAnswer, SplitPolicy, SplitTensorInfo};
use std::sync::{Arc, OnceLock};
use std::thread::ThreadId;

/// R's main thread (the thread that made the first meta device).
static MAIN: OnceLock<ThreadId> = OnceLock::new();

#[derive(Debug)]
struct RPolicy {
    id: i32,
}

fn info_robj(info: &SplitTensorInfo) -> Robj {
    // `type` is a Rust keyword: names given as strings.
    let values: [Robj; 5] = [
        info.name.as_str().into(),
        info.type_code.into(),
        info.ne.iter().map(|&n| n as f64).collect::<Vec<f64>>().into(),
        info.op.as_str().into(),
        (info.flags as i32).into(),
    ];
    List::from_names_and_values(["name", "type", "ne", "op", "flags"], values)
        .map(Robj::from)
        .unwrap_or_else(|_| ().into())
}

impl SplitPolicy for RPolicy {
    fn split(&self, info: &SplitTensorInfo, n: usize) -> ggmlr_core::Result<SplitAnswer> {
        if MAIN.get() != Some(&std::thread::current().id()) {
            anyhow::bail!("the split function can only be called on R's main thread");
        }
        let helper = eval_string("ggmlR:::.meta_split")
            .ok()
            .and_then(|h| h.as_function())
            .ok_or_else(|| anyhow::anyhow!("internal: no split helper"))?;
        let res = helper
            .call(pairlist!(self.id, info_robj(info), n as i32))
            .map_err(|_| anyhow::anyhow!("the split function left through a jump to an outer restart"))?;
        let l = res.as_list().ok_or_else(|| anyhow::anyhow!("internal: the split helper returned no list"))?;
        let part = |i: usize| l.elt(i).map_err(|_| anyhow::anyhow!("internal: incomplete split helper result"));
        if !part(0)?.as_bool().unwrap_or(false) {
            let why = crate::rstr::lossy(&part(1)?).unwrap_or_else(|| "unknown R error".into());
            anyhow::bail!("{why}");
        }
        let axis = part(1)?.as_real().unwrap_or(f64::NAN);
        let ne = crate::conv::f64_vec(&part(2)?, "ne")?;
        Ok(SplitAnswer { axis: axis as i64, ne: ne.iter().map(|&v| v as i64).collect() })
    }
}

/// A meta device over `devs` (a list of devices) whose split function R
/// keeps under `id`.
/// @noRd
#[extendr]
fn rs_meta_device(devs: Robj, id: Robj) -> Robj {
    guard(|| {
        let id = crate::conv::scalar_i64(&id, "id")? as i32;
        let _ = MAIN.set(std::thread::current().id());
        let list = devs.as_list().ok_or_else(|| anyhow::anyhow!("`devs` must be a list of devices"))?;
        let mut devices = Vec::with_capacity(list.len());
        for (i, (_, d)) in list.iter().enumerate() {
            devices.push(device_arg(&d, &format!("devs[[{}]]", i + 1))?.clone());
        }
        let policy = Arc::new(RPolicy { id });
        let m = MetaDevice::new(devices, policy)?;
        Ok(device_robj(Some(m.device())))
    })
}

extendr_module! {
    mod meta;
    fn rs_meta_device;
}
