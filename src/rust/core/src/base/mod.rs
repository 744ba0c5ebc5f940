//! The bottom layer: error conventions, element types, the runtime choice of
//! CPU kernels, and human-readable formatting. Imports nothing of the crate.

pub mod dtype;
pub mod error;
pub mod float;
pub mod fmt;
pub mod simd;
