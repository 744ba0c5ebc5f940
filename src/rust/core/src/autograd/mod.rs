//! Reverse-mode automatic differentiation for the `ag_*` API.
//!
//! - `mat`: host matrices (f64, column-major) and the dense kernels;
//! - `value`: where values live (`Storage`) and the tensor cells;
//! - `ops`: op definitions, shape rules and forward kernels;
//! - `kernels`: host kernels shared by forward and backward rules;
//! - `backward`: the backward rule of every op;
//! - `tape`: recording and the backward pass;
//! - `optim`: in-place optimizer updates and gradient clipping;
//! - `device`: the device path (values in the residency pools, graphs).
//!
//! Device "cpu" is `Storage::Host` (f64). Device "gpu" is `Storage::Device`:
//! an engine tensor in a residency pool (parameters in the persistent pool,
//! f32 or f16; activations in the pass pool, f32). `Tape::apply_on` runs an
//! op as a ggml graph on the residency backend when `device::forward` has
//! one, else its host kernel on downloaded inputs (the output goes back to
//! the pass pool); `Tape::backward` runs matmul and linear backward rules as
//! graphs and the others on the host, accumulating gradients on the host (so
//! they survive a reset of the pass pool). Optimizers update device weights
//! and their moments in place with graphs that `cpy` into their memory.

pub mod backward;
pub mod device;
pub mod device_bwd;
pub mod device_fwd;
pub mod device_graph;
pub mod kernels;
pub mod mat;
pub mod ops;
pub mod optim;
pub mod tape;
pub mod value;

pub use mat::Mat;
pub use ops::{Axis, Op};
pub use optim::{clip_factor, GradIn, OptKind, Optimizer};
pub use tape::{Applied, Tape};
pub use value::{grad_cell, rescue_device_grads, GradCell, Storage, Tensor, TensorRef, Value};

#[cfg(test)]
mod device_tests;
#[cfg(test)]
mod tests;
