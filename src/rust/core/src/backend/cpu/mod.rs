//! The CPU backend: a rayon thread pool sized by `ggml_backend_cpu_set_n_threads`,
//! running each node's kernel in turn. All CPU kernels live in this folder:
//! the per-node [`driver`], element access ([`access`]) and the kernel
//! families.

pub mod access;
mod attn;
mod col2im;
mod conv;
mod conv_act;
mod conv_cl;
mod conv_cl_x86;
mod conv_direct;
mod conv_gemm;
mod conv_pack;
mod conv_shift;
pub mod dgemm;
pub mod dgemm_par;
pub mod driver;
mod gemm_base;
mod gemm_rt;
pub(crate) mod gemv;
mod elementwise;
mod extended;
mod fuse;
mod glu;
mod index;
mod lstm;
mod matmul;
mod matmul_f64;
mod movement;
mod mul_mat_id;
mod optstep;
mod pool_argmax;
pub mod par;
mod sgemm;
mod quantized;
mod reduce;
mod rope;
mod rows;
mod window;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gemm;
#[cfg(test)]
mod tests_nn;
#[cfg(test)]
mod tests_place;
#[cfg(test)]
mod tests_window;
#[cfg(test)]
mod tests_conv_cl;
#[cfg(test)]
mod tests_conv_pack;

use super::Node;
pub use par::{default_threads, CpuPool};
use anyhow::{ensure, Context as _};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct CpuBackend {
    pool: Mutex<Arc<CpuPool>>,
}

impl CpuBackend {
    pub fn new() -> CpuBackend {
        let pool = CpuPool::new(default_threads()).unwrap_or_else(|_| CpuPool::single());
        CpuBackend { pool: Mutex::new(Arc::new(pool)) }
    }

    /// The thread pool (sized by `set_n_threads`).
    pub fn pool(&self) -> Arc<CpuPool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn n_threads(&self) -> usize {
        self.pool().n_threads
    }

    pub fn set_n_threads(&self, n: usize) -> crate::Result<()> {
        ensure!((1..=1024).contains(&n), "`n_threads` must be between 1 and 1024, not {n}");
        if n != self.n_threads() {
            let p = CpuPool::new(n)?;
            *self.pool.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(p);
        }
        Ok(())
    }

    pub fn compute(&self, nodes: &[Node]) -> crate::Result<()> {
        let pool = self.pool();
        // The whole node loop on the pool: one hand-over per graph where R's
        // thread is not one of the pool's, and every kernel's region started
        // from a pool thread, which keeps the pool awake (`base::warm`).
        pool.install(|| compute_nodes(nodes, &pool))
    }
}

/// The node loop of [`CpuBackend::compute`].
fn compute_nodes(nodes: &[Node], pool: &CpuPool) -> crate::Result<()> {
    // A stop requested through `base::cancel` (Ctrl-C) ends the
    // computation between nodes (large kernels also stop between chunks).
    let mut i = 0;
    while i < nodes.len() {
        crate::base::cancel::check()?;
        // ggml's conv_2d (three nodes) may run as one convolution.
        let (fused, n) = match fuse::conv_2d(nodes, i) {
            Some((f, n)) => (Some(f), n),
            None => (None, 1),
        };
        let Some(node) = fused.as_ref().or(nodes.get(i)) else { break };
        driver::run(node, pool)
            .with_context(|| format!("computing {}", node.tensor.describe()))?;
        i += n;
    }
    crate::base::cancel::check()
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}
