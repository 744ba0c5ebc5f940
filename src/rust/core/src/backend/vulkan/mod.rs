//! The Vulkan backend's device side: device discovery and contexts, memory,
//! compiled compute shaders and their pipelines, and graph execution.
//!
//! How the engine uses it:
//! ```text
//! let ctx = VkContext::get(device)?;             // one shared context per device
//! let buf = ctx.alloc(bytes)?;                   // a VkBuffer, freed on drop
//! ctx.write(&buf, offset, &bytes)?;              // upload (tensor_set)
//! ctx.run_graph(&nodes)?;                        // all nodes, ONE queue submission
//! ctx.read(&buf, offset, &mut bytes)?;           // download (tensor_get)
//! ```
//! A node is `VkNode { op: &Op, srcs: Vec<VkTensorRef>, dst: VkTensorRef }`,
//! each tensor a buffer, a byte offset and a `Layout` (ggml ne / nb in
//! bytes). Sources are listed as `Op` documents them and may be strided; the
//! result is contiguous except for `Cpy` (whose result is its second source's
//! memory). `Op::None` and view ops are skipped. Storage types: f32, f16,
//! bf16, and i32 for indices and argmax; quantized weights (in bytes) as
//! the first source of mul_mat and get_rows. Every buffer in a node must come
//! from this context. `run_graph` returns after the device finished, so the
//! host may read or reuse any buffer afterwards.

mod batch;
pub mod choice;
pub mod compute;
mod context;
mod device;
mod encode;
mod encode_nn;
mod encode_q;
mod graph;
mod memory;
mod shaders;
pub mod support;

pub use choice::{best_device, cpu_device_allowed, CPU_DEVICE_ENV};
pub use context::VkContext;
pub use device::{device_info, device_memory, device_type_name, discovery, DeviceInfo, DeviceLimits, Discovery};
pub use encode::{VkNode, VkTensorRef};
pub use memory::VkBuffer;
pub use shaders::{Shader, Variant};

#[cfg(test)]
mod test_util;
#[cfg(test)]
mod tests_bench;
#[cfg(test)]
mod tests_extended;
#[cfg(test)]
mod tests_layout;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_mem;
#[cfg(test)]
mod tests_nn;
#[cfg(test)]
mod tests_ops;
#[cfg(test)]
mod tests_quant;
#[cfg(test)]
mod tests_split;
