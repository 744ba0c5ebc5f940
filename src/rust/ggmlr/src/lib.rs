//! R bindings of ggmlR. Thin by design: convert, call the engine, convert back.
//! Every function takes `Robj`s and returns an `Robj` through [`guard::guard`],
//! so argument errors, engine errors and panics all reach R as conditions.

use extendr_api::prelude::*;

mod ag_env;
mod ag_resident;
mod ag_tape;
mod autograd;
mod backend;
mod buffer;
mod buffer_tools;
mod context;
mod conv;
mod devices;
mod graph;
mod graph_tools;
mod guard;
mod info;
mod interrupt;
mod logging;
mod malloc;
mod meta;
mod ops;
mod quant;
mod gguf;
mod ops_nn;
mod residency;
mod rstr;
mod savefile;
mod sched;
mod tensor;
mod tensor_tools;
mod vulkan;
mod vulkan_backend;
mod ncnn;
mod ncnn_custom;
mod ncnn_params;
mod onnx;

pub use guard::guard;

/// Engine version.
/// @noRd
#[extendr]
fn rs_version() -> Robj {
    guard(|| Ok(ggmlr_core::VERSION.into()))
}

/// Deliberately fails, for tests of the error path: `kind` is "error" or "panic".
/// @noRd
#[extendr]
fn rs_debug_fail(kind: Robj) -> Robj {
    guard(|| {
        let kind = conv::scalar_str(&kind, "kind")?;
        match kind.as_str() {
            "error" => anyhow::bail!("deliberate engine error for testing"),
            // INVARIANT: the deliberate panic that tests the guard's catch.
            "panic" => panic!("deliberate panic for testing"),
            other => anyhow::bail!("unknown failure kind '{other}'"),
        }
    })
}

extendr_module! {
    mod ggmlR;
    fn rs_version;
    fn rs_debug_fail;
    use autograd;
    use ag_env;
    use ag_resident;
    use malloc;
    use backend;
    use context;
    use tensor;
    use graph;
    use buffer;
    use ops;
    use quant;
    use gguf;
    use ops_nn;
    use residency;
    use vulkan;
    use vulkan_backend;
    use ncnn;
    use ncnn_params;
    use onnx;
    use savefile;
    use devices;
    use meta;
    use sched;
    use graph_tools;
    use tensor_tools;
    use buffer_tools;
    use info;
}
