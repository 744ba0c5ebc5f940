//! The CPU backend: a rayon thread pool sized by `ggml_backend_cpu_set_n_threads`,
//! running each node's kernel (in `ops`) in turn.

use crate::graph::Node;
use anyhow::{ensure, Context as _};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct CpuBackend {
    pool: Mutex<Arc<Pool>>,
}

/// A thread pool and its size; it starts new threads when first used in a
/// forked child (see [`crate::threads`]).
#[derive(Debug)]
pub struct Pool {
    pub n_threads: usize,
    threads: crate::threads::Pool,
}

impl Pool {
    pub fn new(n_threads: usize) -> crate::Result<Pool> {
        let threads = crate::threads::Pool::new(n_threads, "ggmlr-cpu")
            .context("could not start the CPU backend's threads")?;
        Ok(Pool { n_threads, threads })
    }

    /// Run `f` inside the pool (so rayon's parallel iterators use its threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match self.threads.get() {
            Ok(Some(p)) => p.install(f),
            // One thread, or no threads could start in this process: the
            // caller's thread does the work.
            _ => f(),
        }
    }
}

pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl CpuBackend {
    pub fn new() -> CpuBackend {
        let pool = Pool::new(default_threads()).unwrap_or_else(|_| Pool {
            n_threads: 1,
            threads: crate::threads::Pool::single(),
        });
        CpuBackend { pool: Mutex::new(Arc::new(pool)) }
    }

    fn pool(&self) -> Arc<Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn n_threads(&self) -> usize {
        self.pool().n_threads
    }

    pub fn set_n_threads(&self, n: usize) -> crate::Result<()> {
        ensure!((1..=1024).contains(&n), "`n_threads` must be between 1 and 1024, not {n}");
        if n != self.n_threads() {
            let p = Pool::new(n)?;
            *self.pool.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(p);
        }
        Ok(())
    }

    /// Compute `nodes` in order; a stop requested through [`crate::cancel`]
    /// ends it between nodes (large kernels also stop between chunks).
    pub fn compute(&self, nodes: &[Node]) -> crate::Result<()> {
        let pool = self.pool();
        for n in nodes {
            crate::cancel::check()?;
            crate::ops::run(n, &pool)
                .with_context(|| format!("computing {}", n.tensor.describe()))?;
        }
        crate::cancel::check()
    }
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}
