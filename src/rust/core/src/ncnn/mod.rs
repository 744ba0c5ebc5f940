//! ncnn model inference: the param formats (text and binary), the weight
//! reader, the per-net layer registry, the net and its extractor, and the
//! builtin layers (one file each under `layers/`).
//!
//! Custom layers are trait objects ([`layer::Layer`] made by a
//! [`registry::CustomFactory`]); this module never sees R.

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

pub use layer::{Layer, Opt};
pub use mat::Mat;
pub use modelbin::{DataReader, ModelBin};
pub use net::{Extractor, Net};
pub use param::ParamDict;
pub use registry::{CustomFactory, Registry};

/// An error of R class `ncnn_error`.
pub fn err(msg: impl Into<String>) -> anyhow::Error {
    crate::base::error::Classed::new("ncnn_error", msg)
}

/// Return early with an `ncnn_error`.
#[macro_export]
macro_rules! ncnn_bail {
    ($($t:tt)*) => { return Err($crate::ncnn::err(format!($($t)*))) };
}

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod profile;
#[cfg(test)]
mod tests;
