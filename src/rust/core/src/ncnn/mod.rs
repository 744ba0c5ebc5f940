//! ncnn model inference, in layers that each use only those above them here:
//!
//! - `error`, `mat`, `par`: the error class, blobs and the data-parallel loops;
//! - `param` (text and binary `.param`, the param dict), `modelbin` (weights);
//! - `layer`: the layer interface and helpers shared by layers;
//! - `layers/`: the builtin layers, one file per type, over `layers/kernels/`
//!   (compute kernels shared by several layers: GEMM, Winograd, depthwise,
//!   pooling rows, convolution helpers);
//! - `registry` (custom layer factories), `net` (layers from a param, weights
//!   from a model), `fuse_concat` (a Concat of convolutions written in
//!   place), `extractor` (one inference).
//!
//! The module uses only the crate's `base` (errors, SIMD dispatch); `error`
//! here is its error class.
//!
//! Custom layers are trait objects ([`layer::Layer`] made by a
//! [`registry::CustomFactory`]); this module never sees R.

pub mod error;
pub mod extractor;
mod fuse_concat;
pub mod layer;
pub mod layers;
pub mod mat;
pub mod modelbin;
pub mod net;
pub mod par;
pub mod param;
pub mod registry;
pub mod types;

pub use error::err;
pub use extractor::Extractor;
pub use layer::{Layer, Opt};
pub use mat::Mat;
pub use modelbin::{DataReader, ModelBin};
pub use net::Net;
pub use param::ParamDict;
pub use registry::{CustomFactory, Registry};

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod profile;
#[cfg(test)]
mod tests;
