//! Resetting the residency pools on autograd's behalf: device gradients that
//! a tensor or a gradient store still refers to are copied to the host
//! before their pool is freed, so they survive the reset.

use super::value::rescue_device_grads;
use crate::memory::BufferTag;
use crate::residency::{self, Scope};
use anyhow::Result;

/// Free the pools in `scopes` (see [`residency::Residency::reset`]) after
/// rescuing the gradients that live there; optionally change the size of new
/// pool contexts.
pub fn reset_pools(scopes: &[Scope], size_mb: Option<f64>) -> Result<()> {
    Scope::check_size_mb(size_mb)?;
    let tags: Vec<BufferTag> = scopes.iter().map(|s| s.tag()).collect();
    rescue_device_grads(&tags)?;
    residency::state().reset(scopes, size_mb)
}
