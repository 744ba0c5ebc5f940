//! The vectorising scalar functions the ncnn layers use (exp, ln, pow,
//! erf), shared with the CPU backend from the base layer.

pub use crate::base::vmath::{erf, erfc, exp, ln, pow};
