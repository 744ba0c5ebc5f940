//! Reverse-mode automatic differentiation for the `ag_*` API.
//!
//! - `mat`: host matrices (f64, column-major) and the dense kernels;
//! - `value`: where values live (`Storage`) and the tensor cells;
//! - `ops`: op definitions, shape rules and forward kernels;
//! - `kernels`: host kernels shared by forward and backward rules;
//! - `backward`: the backward rule of every op;
//! - `tape`: recording and the backward pass;
//! - `optim`: in-place optimizer updates and gradient clipping.
//!
//! Device "cpu" is `Storage::Host` (f64). The device path adds a storage
//! variant holding a residency handle (pool, generation, id) and an f32/f16
//! element type; `Tape::apply` and `Tape::backward` then dispatch each op on
//! the storage of its inputs (host kernels here, a ggml graph on the backend
//! there) while the tape, the ids and the R API stay as they are. Optimizer
//! updates are written against `Tensor::update_host` today and against the
//! persistent pool's buffers on a device, in place in both cases.

pub mod backward;
pub mod device;
pub mod kernels;
pub mod mat;
pub mod ops;
pub mod optim;
pub mod tape;
pub mod value;

pub use mat::Mat;
pub use ops::{Axis, Op};
pub use optim::{clip_factor, OptKind, Optimizer};
pub use tape::{Applied, Tape};
pub use value::{Storage, Tensor, TensorRef, Value};

#[cfg(test)]
mod device_tests;
#[cfg(test)]
mod tests;
