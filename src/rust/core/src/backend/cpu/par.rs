//! The CPU backend's thread pool and its parallel loop over rows.

use anyhow::Context as _;
use rayon::prelude::*;

/// A thread pool and its size.
#[derive(Debug)]
pub struct Pool {
    pub n_threads: usize,
    pub rayon: Option<rayon::ThreadPool>,
}

impl Pool {
    pub fn new(n_threads: usize) -> crate::Result<Pool> {
        let rayon = if n_threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n_threads)
                    .thread_name(|i| format!("ggmlr-cpu-{i}"))
                    .build()
                    .context("could not start the CPU backend's threads")?,
            )
        } else {
            None
        };
        Ok(Pool { n_threads, rayon })
    }

    /// Run `f` inside the pool (so rayon's parallel iterators use its threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.rayon {
            Some(p) => p.install(f),
            None => f(),
        }
    }
}

pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Below this many output elements a kernel runs on the calling thread.
pub const PAR_MIN: usize = 1 << 15;

/// Run `f(first_row, rows)` over `out` split into chunks of whole rows of
/// `row_len`, in parallel on `pool` when the work is large enough.
pub fn par_rows<T: Send>(
    pool: &Pool,
    out: &mut [T],
    row_len: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let row_len = row_len.max(1);
    let n_rows = out.len() / row_len;
    if pool.n_threads <= 1 || out.len() < PAR_MIN || n_rows < 2 {
        f(0, out);
        return;
    }
    let rows_per = n_rows.div_ceil(pool.n_threads * 4).max(1);
    pool.install(|| {
        out.par_chunks_mut(rows_per * row_len)
            .enumerate()
            .for_each(|(c, chunk)| f(c * rows_per, chunk));
    });
}
