//! ggmlr-core: the engine of the ggmlR R package.
//!
//! This crate knows nothing about R. The binding crate (`ggmlr`) converts R
//! values to the plain Rust types used here and turns [`anyhow::Error`]s into
//! R conditions; errors that need a specific R condition class carry a
//! [`error::Classed`] value.

pub mod backend;
pub mod dtype;
pub mod error;
pub mod ncnn;
pub mod op;
pub mod vulkan_probe;

pub use error::{Classed, Result};

/// Version of the engine, reported by `ggml_version()`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
