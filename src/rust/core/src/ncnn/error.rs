//! The ncnn module's errors: R class `ncnn_error`.

/// An error of R class `ncnn_error`.
pub fn err(msg: impl Into<String>) -> anyhow::Error {
    crate::base::error::Classed::new("ncnn_error", msg)
}

/// Return early with an `ncnn_error`.
#[macro_export]
macro_rules! ncnn_bail {
    ($($t:tt)*) => { return Err($crate::ncnn::error::err(format!($($t)*))) };
}
