//! ONNX model import.
//!
//! A model is read ([`load`]: protobuf in [`proto`], initializers in
//! [`init`]), planned for bound input shapes ([`plan`]: shape inference and
//! constant folding in one walk, each operator mapped onto engine ops by its
//! family in [`ops`], N-dimensional tensors on the engine's 4 dimensions in
//! [`dev`]) and run ([`run`]): one engine graph per run, computed on the
//! CPU backend or a Vulkan device in one submission, with the weights in
//! the model's persistent pool and the intermediate tensors in its pass
//! pool ([`builder`]), every buffer through the ledger.

pub mod attr;
pub mod builder;
pub mod dev;
pub mod elem;
pub mod host;
pub mod init;
pub mod load;
pub mod lowp;
pub mod model;
pub mod ops;
pub mod plan;
pub mod proto;
pub mod run;
pub mod val;

pub use load::Model;
pub use run::{onnx_err, Output, PlanInfo, Runner, CLASS};

use crate::backend::Backend;
use anyhow::Context as _;
use prost::bytes::Bytes;
use std::path::Path;
use std::sync::Arc;

/// Reads the model file at `path` (external data files beside it).
pub fn read_file(path: &Path) -> crate::Result<Model> {
    let bytes = std::fs::read(path).map_err(|e| onnx_err(format!("cannot read '{}': {e}", path.display())))?;
    Model::from_bytes(Bytes::from(bytes), path.parent())
        .with_context(|| format!("'{}' is not a model ggmlR can load", path.display()))
        .map_err(run::classed)
}

/// Loads the model at `path` for `backend`.
pub fn load(path: &Path, backend: Arc<Backend>, f16: bool, shapes: Vec<(String, Vec<i64>)>) -> crate::Result<Runner> {
    let model = read_file(path)?;
    Runner::new(model, backend, f16, shapes)
}

/// Reads a serialized `TensorProto` (the `.pb` files of ONNX test data).
pub fn read_tensor_file(path: &Path) -> crate::Result<(String, host::HTensor)> {
    let bytes = std::fs::read(path).map_err(|e| onnx_err(format!("cannot read '{}': {e}", path.display())))?;
    let t = proto::decode_tensor(Bytes::from(bytes)).map_err(run::classed)?;
    let init = init::Init::from_proto(&t, path.parent(), "tensor").map_err(run::classed)?;
    Ok((init.name.clone(), init.to_host().map_err(run::classed)?))
}

/// The backend for `onnx_load(device = ...)`: "cpu"; "vulkan" or "gpu" (the
/// best Vulkan device: discrete, integrated, virtual, then CPU-type); or
/// None: a Vulkan GPU when there is one, else the CPU (a CPU-type Vulkan
/// device such as lavapipe is slower than the CPU backend, so it is only
/// used when asked for).
pub fn backend_for(device: Option<&str>, n_threads: usize) -> crate::Result<Arc<Backend>> {
    use crate::backend::vulkan::discovery;
    let rank = |t: &str| match t {
        "discrete" => 0,
        "integrated" => 1,
        "virtual" => 2,
        "cpu" => 3,
        _ => 4,
    };
    let d = discovery();
    let best = d.devices.iter().min_by_key(|x| (rank(x.device_type), x.index));
    let cpu = || -> crate::Result<Arc<Backend>> {
        let b = Backend::cpu();
        b.set_n_threads(n_threads.max(1))?;
        Ok(Arc::new(b))
    };
    match device {
        None => match best {
            Some(x) if x.device_type != "cpu" => Ok(Arc::new(Backend::vulkan(x.index)?)),
            _ => cpu(),
        },
        Some("cpu") => cpu(),
        Some("vulkan") | Some("gpu") => match best {
            Some(x) => Ok(Arc::new(Backend::vulkan(x.index)?)),
            None => Err(onnx_err(format!("no Vulkan device is available ({}); use device = \"cpu\"", d.status))),
        },
        Some(other) => Err(onnx_err(format!("unknown device \"{other}\": use \"cpu\", \"vulkan\" (or \"gpu\"), or NULL"))),
    }
}

#[cfg(test)]
mod tests;
