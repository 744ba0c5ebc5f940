//! The bottom layer: error conventions, element types, the runtime choice of
//! CPU kernels, human-readable formatting and the quantized block formats.
//! Imports nothing of the crate.

pub mod dtype;
pub mod error;
pub mod fmt;
pub mod quant;
pub mod simd;
