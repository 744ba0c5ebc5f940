//! What is built on graphs: model formats imported onto the engine.
//!
//! - [`onnx`]: ONNX models, their operators mapped onto engine ops, run on
//!   any backend with their weights in a persistent pool.

pub mod onnx;
