//! The bottom layer: error conventions, element types, the runtime choice of
//! CPU kernels, human-readable formatting, allocations sized by input,
//! cancellation (Ctrl-C) and fork-safe worker pools. Imports nothing of the crate.

pub mod alloc;
pub mod cancel;
pub mod dtype;
pub mod error;
pub mod float;
pub mod fmt;
pub mod simd;
pub mod threads;
