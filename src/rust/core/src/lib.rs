//! ggmlr-core: the engine of the ggmlR R package.
//!
//! This crate knows nothing about R. The binding crate (`ggmlr`) converts R
//! values to the plain Rust types used here and turns [`anyhow::Error`]s into
//! R conditions; errors that need a specific R condition class carry a
//! [`error::Classed`] value.
//!
//! Data model: a [`context::Context`] holds [`tensor::Tensor`] descriptors;
//! tensor memory is a [`buffer::Buffer`] (allocated only by
//! `Buffer::allocate`, reported to the [`ledger`]); [`build`] adds op nodes,
//! [`graph::Graph`] orders them and resolves them into [`graph::Node`]s that a
//! [`backend::Backend`] computes (CPU kernels in [`ops`]).

pub mod autograd;
pub mod backend;
pub mod buffer;
pub mod build;
pub mod context;
pub mod cpu;
pub mod dtype;
pub mod error;
pub mod float;
pub mod graph;
pub mod io;
pub mod ledger;
pub mod ncnn;
pub mod op;
pub mod ops;
pub mod residency;
pub mod simd;
pub mod tensor;
pub mod vulkan;
pub mod vulkan_backend;
pub mod vulkan_probe;

pub use error::{Classed, Result};

/// Version of the engine, reported by `ggml_version()`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
