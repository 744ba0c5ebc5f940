//! Resetting the residency pools on autograd's behalf: what the rescue
//! registry holds in a pool (gradients a tensor or a gradient store still
//! refers to, values the R side made resident) is copied to the host before
//! the pool is freed, so it survives the reset.

use super::rescue;
use crate::residency::{self, Scope};
use anyhow::Result;

/// Free the pools in `scopes` (see [`residency::Residency::reset`]) after
/// rescuing what lives there; optionally change the size of new pool
/// contexts.
pub fn reset_pools(scopes: &[Scope], size_mb: Option<f64>) -> Result<()> {
    Scope::check_size_mb(size_mb)?;
    rescue::rescue(scopes)?;
    residency::state().reset(scopes, size_mb)
}
