//! ggmlr-core: the engine of the ggmlR R package.
//!
//! This crate knows nothing about R. The binding crate (`ggmlr`) converts R
//! values to the plain Rust types used here and turns [`anyhow::Error`]s into
//! R conditions; errors that need a specific R condition class carry a
//! [`base::error::Classed`] value.
//!
//! The engine is built in layers; each module imports only the layers below
//! it (checked by `tools/layercheck`, which reads `layers.toml` beside this
//! crate's `Cargo.toml`). From the bottom:
//!
//! - [`base`]: errors, element types, CPU feature switches, formatting;
//! - [`layout`]: sizes and byte strides, the strided walk, element conversion;
//! - [`op`]: op definitions and their shape rules (no kernels);
//! - [`memory`]: buffers and the byte ledger (a backend allocates; the ledger
//!   knows buffer tags and pool generations, not backends);
//! - [`tensor`]: contexts, tensor descriptors, building op results, I/O;
//! - [`backend`]: the backend type, graph nodes, `cpu/` (all CPU kernels) and
//!   `vulkan/` (ash, gpu-allocator, shaders);
//! - [`graph`]: forward graphs and their computation;
//! - [`residency`]: the pass and persistent pools, generations, handles;
//! - [`autograd`]: the tape, the backward rules, optimizers;
//! - [`ncnn`]: ncnn model inference, beside the rest on [`base`] only;
//! - [`savefile`]: the saved-model file (plain values, checksummed), on [`base`].

pub mod base;
pub mod layout;
pub mod op;
pub mod memory;
pub mod tensor;
pub mod backend;
pub mod graph;
pub mod residency;
pub mod autograd;
pub mod ncnn;
pub mod savefile;

pub use base::error::{Classed, Result};

/// Version of the engine, reported by `ggml_version()`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
