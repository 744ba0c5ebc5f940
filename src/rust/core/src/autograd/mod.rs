//! Reverse-mode automatic differentiation for the `ag_*` API.
//!
//! Every op has one forward definition (`forward.rs`) and one backward rule
//! (`backward.rs`), written over engine ops (`nodes.rs`) and run by the
//! backend of the place its inputs are in (`value::Place`): device "cpu" is
//! the host CPU backend in f64 (results equal to base R's to rounding),
//! device "gpu" the residency backend in f32 (f16 or bf16 weights). Where
//! the backend has fused ops (the CPU backend: a dense layer as one product
//! with its bias and activation, an optimizer step as one pass), the rules
//! use them; elsewhere they build the unfused form.
//!
//! Modules, bottom-up (each imports only those above it in this list):
//! - `rescue`: what must be copied out of a pool before it is reset;
//! - `op`, `conv`: the ops, their parameters and shape rules (the errors users see);
//! - `value`: where values live ([`Storage`], [`Place`], [`EngineVal`]) and the
//!   tensor cells;
//! - `place`: each place's backend, memory and uploads;
//! - `graph`: building one graph in a place and computing it once;
//! - `nodes`: the graph pieces the rules are made of;
//! - `conv_rules`, `pool_rules`, `forward`, `backward`: the rules;
//! - `tape`: recording and the backward pass;
//! - `batch`: mini-batches written from the caller's columns into a place;
//! - `samples`: a training set converted once to f32, batches copied from it;
//! - `optim`, `clip`: optimizer updates and gradient clipping;
//! - `pools`: resetting the residency pools after the rescue.
//!
//! `Tape::apply_on` runs each op as one graph; its results are *detached*
//! leaves (they alias the computed memory), so later graphs never compute
//! them again. `Tape::backward` appends the backward rule of every node to
//! ONE graph per place (gradients are nodes, summed with `add` nodes, and
//! the leaves' gradients are added to those they already hold) and computes
//! it once: one queue submission on Vulkan for the whole pass, nothing
//! downloaded. The leaves' gradients stay where they were computed; R reads
//! copy them on demand. On "gpu" they live in the pass pool: before a pool
//! is reset (by `pools::reset_pools`), the rescue registry copies the ones
//! still referenced (by a tensor or a gradient store) to the host.
//! Optimizers update every weight and its moments in place with one graph
//! per place that reads the gradients where they are. Mixed tapes (a "cpu"
//! tensor in a "gpu" op) move values between the places as needed.

pub mod backward;
pub mod batch;
pub mod clip;
pub mod conv;
mod conv_rules;
pub mod forward;
pub mod graph;
pub mod nodes;
pub mod op;
pub mod optim;
pub mod place;
mod pool_rules;
pub mod pools;
pub mod rescue;
pub mod samples;
pub mod tape;
pub mod value;

pub use clip::{clip_factor, clip_grads};
pub use op::{AgActivation, AgOp, Axis};
pub use optim::{GradIn, OptKind, Optimizer};
pub use pools::reset_pools;
pub use tape::{Applied, Tape};
pub use value::{grad_cell, set_cell, AgTensor, AgTensorRef, EngineVal, GradCell, HostMat, Place, Storage, ValueRef};

#[cfg(test)]
mod conv_tests;
#[cfg(test)]
mod device_tests;
#[cfg(test)]
mod pool_tests;
#[cfg(test)]
mod tests;
