//! R bindings of ggmlR. Thin by design: convert, call the engine, convert back.
//! Every function takes `Robj`s and returns an `Robj` through [`guard::guard`],
//! so argument errors, engine errors and panics all reach R as conditions.

use extendr_api::prelude::*;

mod ag_env;
mod autograd;
mod backend;
mod buffer;
mod context;
mod conv;
mod graph;
mod guard;
mod interrupt;
mod malloc;
mod ops;
mod ops_nn;
mod residency;
mod rstr;
mod savefile;
mod tensor;
mod vulkan;
mod vulkan_backend;
mod ncnn;
mod ncnn_custom;

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
    use malloc;
    use backend;
    use context;
    use tensor;
    use graph;
    use buffer;
    use ops;
    use ops_nn;
    use residency;
    use vulkan;
    use vulkan_backend;
    use ncnn;
    use savefile;
}
