//! Fuzz the ONNX reader and planner: any bytes must load (and, when every
//! input shape is declared, plan on the CPU backend: shape inference and
//! constant folding) or give an error, never a panic, an abort or a hang.
//! Allocations are limited to 256 MiB, so a tensor a file makes too large
//! is an error, not an out-of-memory.
#![no_main]

use ggmlr_core::backend::Backend;
use ggmlr_core::models::onnx::{Model, Runner};
use libfuzzer_sys::fuzz_target;
use prost::bytes::Bytes;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    ggmlr_core::base::alloc::set_limit(256 << 20);
    let Ok(model) = Model::from_bytes(Bytes::copy_from_slice(data), None) else { return };
    let _ = Runner::new(model, Arc::new(Backend::cpu()), false, Vec::new());
});
