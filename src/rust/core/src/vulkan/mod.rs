//! The Vulkan backend's device side: device discovery and contexts, memory,
//! compiled compute shaders and their pipelines, and graph execution.
//!
//! The engine uses it like this:
//! ```text
//! let ctx = VkContext::get(0)?;                 // shared per device
//! let buf = ctx.alloc(bytes)?;                  // freed on drop
//! ctx.write(&buf, 0, &data)?;                   // upload
//! ctx.run_graph(&[VkNode { op: &op, srcs, dst }])?; // one submission
//! ctx.read(&buf, 0, &mut out)?;                 // download
//! ```

mod context;
mod device;
mod encode;
mod graph;
mod memory;
mod shaders;

pub use context::VkContext;
pub use device::{device_info, device_type_name, device_memory, discovery, fmt_bytes, DeviceInfo, DeviceLimits, Discovery};
pub use encode::{VkNode, VkTensorRef};
pub use memory::VkBuffer;
pub use shaders::{Shader, Variant};

#[cfg(test)]
mod tests_mem;
#[cfg(test)]
mod tests_ops;
#[cfg(test)]
mod tests_limits;
#[cfg(test)]
mod tests_bench;
#[cfg(test)]
mod test_util;
