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

/// A single string from `x`.
pub fn scalar_str(x: &Robj, what: &str) -> anyhow::Result<String> {
    match x.as_str() {
        Some(s) if x.len() == 1 => Ok(s.to_string()),
        _ => bail!("`{what}` must be a single string"),
    }
}

/// A borrowed engine object held by an external pointer made with `ExternalPtr::new`.
pub fn xptr<'a, T: 'static>(x: &'a Robj, what: &str, kind: &str) -> anyhow::Result<&'a T> {
    let p: &ExternalPtr<T> = x.try_into().map_err(|_| {
        anyhow!("`{what}` must be a {kind} object (it is not, or it did not survive saving and reloading the session)")
    })?;
    p.try_addr().map_err(|_| anyhow!("`{what}` is a {kind} whose memory was released"))
}
