//! Reverse-mode automatic differentiation for the `ag_*` API.
//!
//! - `mat`: host matrices (f64, column-major) and the dense kernels;
//! - `value`: where values live (`Storage`) and the tensor cells;
//! - `ops`: op definitions, shape rules and forward kernels;
//! - `backward`: the backward rule of every op;
//! - `tape`: recording and the backward pass;
//! - `optim`: in-place optimizer updates and gradient clipping.

pub mod backward;
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
mod tests;
