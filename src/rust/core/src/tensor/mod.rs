//! Tensors: contexts (fixed-capacity arenas of descriptors, as in ggml),
//! tensor descriptors with checked references to their memory, building op
//! results in a context, and moving values in and out.

pub mod construct;
pub mod construct_nn;
pub mod context;
pub mod descriptor;
pub mod io;

pub use context::{alloc_group, Context, GRAPH_OVERHEAD, TENSOR_OVERHEAD};
pub use descriptor::{storage_generation, CtxState, DataRef, DataSlot, Tensor};
