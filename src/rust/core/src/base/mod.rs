//! The bottom layer: error conventions, element types, numbers from file
//! bytes, the runtime choice of CPU kernels, human-readable formatting,
//! allocations sized by input,
//! cancellation (Ctrl-C), fork-safe worker pools kept awake through a
//! computation, the CPU's features, where
//! messages go (logging, internal failures), the quantized block formats
//! and scalar functions written to vectorise (exp, ln, tanh, sigmoid, erf).
//! Imports nothing of the crate.

pub mod alloc;
pub mod bytes;
pub mod cancel;
pub mod clock;
pub mod cpu_features;
pub mod dtype;
pub mod error;
pub mod float;
pub mod fmt;
pub mod log;
pub mod quant;
pub mod simd;
pub mod threads;
pub mod vdot;
pub mod vmath;
pub mod warm;
