//! Reverse-mode automatic differentiation for the `ag_*` API.
//!
//! - `mat`: host matrices (f64, column-major) and the dense kernels;
//! - `value`: where values live (`Storage`) and the tensor cells;
//! - `ops`: op definitions, shape rules and forward kernels;
//! - `kernels`: host kernels shared by forward and backward rules;
//! - `backward`: the backward rule of every op;
//! - `tape`: recording and the backward pass;
//! - `optim`: in-place optimizer updates and gradient clipping;
//! - `device`: device values (`Dev`) and the graph pieces the device rules
//!   are built from; `device_graph`: one graph in the pass pool, computed
//!   once; `device_fwd` / `device_bwd`: the forward graph and the backward
//!   rule of every op on the device.
//!
//! Device "cpu" is `Storage::Host` (f64). Device "gpu" is `Storage::Device`:
//! an engine tensor in a residency pool (parameters in the persistent pool,
//! f32, f16 or bf16; activations and gradients in the pass pool, f32).
//!
//! On the device, `Tape::apply_on` runs each op as one graph; its results
//! are *detached* leaves (they alias the computed memory), so later graphs
//! never compute them again. `Tape::backward` appends the backward rule of
//! every node to ONE graph (gradients are nodes, summed with `add` nodes,
//! and the leaves' gradients are added to those they already hold) and
//! computes it once: one queue submission on Vulkan for the whole pass,
//! nothing downloaded. The leaves' gradients stay on the device; R reads
//! download them on demand. Gradients live in the pass pool: before a pool
//! is reset (by `pools::reset_pools`), `value::rescue_device_grads` copies
//! the ones still referenced (by a tensor or a gradient store) to the host. Optimizers update every
//! device weight and its moments in place with one graph that reads the
//! device gradients directly and `cpy`s into the weights' own memory.
//!
//! Host fallback on the device: an op whose input shapes do not fit it runs
//! its host kernel on downloaded inputs, which reports the error; a node
//! recorded that way (or with host values) runs its host backward rule, and
//! the gradient it needs is computed and downloaded first. Mixed tapes are
//! correct, only slower.

pub mod backward;
pub mod device;
pub mod device_bwd;
pub mod device_fwd;
pub mod device_graph;
pub mod kernels;
pub mod mat;
pub mod ops;
pub mod optim;
pub mod pools;
pub mod tape;
pub mod value;

pub use mat::Mat;
pub use ops::{Axis, Op};
pub use optim::{clip_factor, GradIn, OptKind, Optimizer};
pub use pools::reset_pools;
pub use tape::{Applied, Tape};
pub use value::{grad_cell, rescue_device_grads, GradCell, Storage, Tensor, TensorRef, Value};

#[cfg(test)]
mod device_tests;
#[cfg(test)]
mod tests;
