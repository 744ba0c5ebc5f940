//! Worker pools that survive `fork()`.
//!
//! A forked child (R's `parallel::mclapply`) inherits the parent's memory but
//! only the thread that forked: a pool's workers do not exist there, and
//! handing them work waits forever. Every pool the engine keeps is a
//! [`Pool`], which remembers the process that started its threads and starts
//! new ones the first time it is used in another process.

use anyhow::Context as _;
use std::sync::{Arc, Mutex};

/// The id of this process (changes in a forked child).
pub fn pid() -> u32 {
    std::process::id()
}

/// A rayon pool of `n` threads, re-created after a fork; `n == 1` is no
/// pool at all (work runs on the calling thread).
#[derive(Debug)]
pub struct Pool {
    n: usize,
    name: &'static str,
    cell: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>>,
}

impl Pool {
    /// A pool of `n` threads named `<name>-<i>`, started now.
    pub fn new(n: usize, name: &'static str) -> crate::Result<Pool> {
        let p = Pool { n: n.max(1), name, cell: Mutex::new(None) };
        p.get()?;
        Ok(p)
    }

    /// A one-thread pool (no threads at all).
    pub fn single() -> Pool {
        Pool { n: 1, name: "single", cell: Mutex::new(None) }
    }

    pub fn n_threads(&self) -> usize {
        self.n
    }

    fn build(&self) -> crate::Result<rayon::ThreadPool> {
        let name = self.name;
        rayon::ThreadPoolBuilder::new()
            .num_threads(self.n)
            .thread_name(move |i| format!("{name}-{i}"))
            .build()
            .with_context(|| format!("could not start {} worker threads", self.n))
    }

    /// The pool's threads in this process (None for a one-thread pool).
    pub fn get(&self) -> crate::Result<Option<Arc<rayon::ThreadPool>>> {
        if self.n <= 1 {
            return Ok(None);
        }
        let mut cell = self.cell.lock().unwrap_or_else(|p| p.into_inner());
        let me = pid();
        if let Some((owner, p)) = cell.as_ref() {
            if *owner == me {
                return Ok(Some(p.clone()));
            }
            // The parent's threads are not in this process: leak their pool
            // (dropping it would wait for them to acknowledge) and start anew.
            if let Some((_, old)) = cell.take() {
                std::mem::forget(old);
            }
        }
        let p = Arc::new(self.build()?);
        *cell = Some((me, p.clone()));
        Ok(Some(p))
    }
}

/// Make the global rayon pool include the calling thread, so that a forked
/// child, which keeps only that thread, can still run work handed to the
/// global pool (the calling thread then does it all). Call once, early, from
/// the thread that forks (R's main thread); a no-op when the global pool
/// already exists.
pub fn init_global_with_current_thread() {
    let built = rayon::ThreadPoolBuilder::new()
        .use_current_thread()
        .thread_name(|i| format!("ggmlr-global-{i}"))
        .build_global();
    if built.is_ok() {
        let _ = GLOBAL_OWNER.set(pid());
    }
}

/// The process that built the global pool with the calling thread in it.
static GLOBAL_OWNER: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Whether the calling thread is a worker of a rayon pool of `n` threads
/// whose other workers run in this process: then work meant for a pool of
/// `n` threads can run right here (its parallel loops share it among that
/// pool's threads, the caller's included) instead of being handed to
/// another pool's thread and back. R's main thread is one (worker 0 of the
/// global pool, see [`init_global_with_current_thread`]) until the process
/// forks: a forked child's global pool has lost its other workers.
pub fn runs_as_pool_of(n: usize) -> bool {
    n > 1
        && rayon::current_thread_index().is_some()
        && rayon::current_num_threads() == n
        && GLOBAL_OWNER.get().is_none_or(|&p| p == pid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_is_no_pool() {
        let p = Pool::new(1, "t").unwrap();
        assert!(p.get().unwrap().is_none());
        let p = Pool::new(2, "t").unwrap();
        let a = p.get().unwrap().unwrap();
        let b = p.get().unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 2);
    }

    #[test]
    fn a_worker_runs_work_for_a_pool_of_its_size() {
        assert!(!runs_as_pool_of(2), "a test thread is no pool's worker");
        let p = Pool::new(3, "t").unwrap().get().unwrap().unwrap();
        assert_eq!(p.install(|| (runs_as_pool_of(3), runs_as_pool_of(2), runs_as_pool_of(1))), (true, false, false));
    }
}
