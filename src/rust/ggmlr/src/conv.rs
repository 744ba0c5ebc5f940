//! Conversions from R values to engine values, with messages for R users.

use anyhow::{anyhow, bail};
use extendr_api::prelude::*;

/// A single whole number (integer or double without fraction) from `x`.
pub fn scalar_i64(x: &Robj, what: &str) -> anyhow::Result<i64> {
    if x.len() != 1 {
        bail!("`{what}` must be a single number, not a vector of length {}", x.len());
    }
    if let Some(v) = x.as_integer() {
        if v == i32::MIN {
            bail!("`{what}` must not be NA");
        }
        return Ok(v as i64);
    }
    if let Some(v) = x.as_real() {
        if !v.is_finite() || v.fract() != 0.0 {
            bail!("`{what}` must be a whole number, got {v}");
        }
        return Ok(v as i64);
    }
    Err(anyhow!("`{what}` must be a number, not {:?}", x.rtype()))
}

/// A single string from `x`, checked to be text (see [`crate::rstr`]).
pub fn scalar_str(x: &Robj, what: &str) -> anyhow::Result<String> {
    crate::rstr::scalar(x, what)
}

/// A borrowed engine object held by an external pointer made with `ExternalPtr::new`.
pub fn xptr<'a, T: 'static>(x: &'a Robj, what: &str, kind: &str) -> anyhow::Result<&'a T> {
    let p: &ExternalPtr<T> = x.try_into().map_err(|_| {
        anyhow!("`{what}` must be a {kind} object (it is not, or it did not survive saving and reloading the session)")
    })?;
    p.try_addr().map_err(|_| anyhow!("`{what}` is a {kind} whose memory was released"))
}

/// A single TRUE/FALSE from `x`.
pub fn scalar_bool(x: &Robj, what: &str) -> anyhow::Result<bool> {
    match x.as_bool() {
        Some(b) if x.len() == 1 => Ok(b),
        _ => bail!("`{what}` must be TRUE or FALSE"),
    }
}

/// A non-negative whole number that fits in memory sizes.
pub fn scalar_usize(x: &Robj, what: &str) -> anyhow::Result<usize> {
    let v = scalar_i64(x, what)?;
    if v < 0 {
        bail!("`{what}` must not be negative, got {v}");
    }
    Ok(v as usize)
}

/// The values of a numeric (double or integer) vector; NA becomes NaN.
pub fn f64_vec(x: &Robj, what: &str) -> anyhow::Result<Vec<f64>> {
    if let Some(v) = x.as_real_slice() {
        return Ok(v.to_vec());
    }
    if let Some(v) = x.as_integer_slice() {
        return Ok(v.iter().map(|&i| if i == i32::MIN { f64::NAN } else { i as f64 }).collect());
    }
    if let Some(v) = x.as_logical_slice() {
        return Ok(v.iter().map(|b| if b.is_na() { f64::NAN } else if b.is_true() { 1.0 } else { 0.0 }).collect());
    }
    bail!("`{what}` must be a numeric vector, not {:?}", x.rtype())
}

/// Whole numbers >= `min` (tensor sizes, strides, axes).
pub fn usize_vec(x: &Robj, what: &str, min: usize) -> anyhow::Result<Vec<usize>> {
    f64_vec(x, what)?
        .into_iter()
        .map(|v| {
            if !v.is_finite() || v.fract() != 0.0 || v < min as f64 {
                bail!("`{what}` must hold whole numbers of at least {min}, got {v}");
            }
            Ok(v as usize)
        })
        .collect()
}

/// The `N` values of `v` as an array; `msg` when there are not exactly `N`.
pub fn exactly<T, const N: usize>(v: Vec<T>, msg: &str) -> anyhow::Result<[T; N]> {
    let n = v.len();
    v.try_into().map_err(|_| anyhow!("{msg} (got {n} values)"))
}

/// A context argument (contexts are shared with the residency pools, hence `Arc`).
pub fn ctx_arg<'a>(x: &'a Robj, what: &str) -> anyhow::Result<&'a std::sync::Arc<ggmlr_core::tensor::Context>> {
    xptr(x, what, "ggml_context")
}

/// A backend argument (backends are shared with the residency pools, hence `Arc`).
pub fn backend_arg<'a>(x: &'a Robj, what: &str) -> anyhow::Result<&'a std::sync::Arc<ggmlr_core::backend::Backend>> {
    xptr(x, what, "ggml_backend")
}
