//! The CPU backend's thread pool and its parallel loop over rows.

use anyhow::Context as _;
use rayon::prelude::*;

/// A thread pool and its size; it starts new threads when first used in a
/// forked child (see [`crate::base::threads`]).
#[derive(Debug)]
pub struct CpuPool {
    pub n_threads: usize,
    threads: crate::base::threads::Pool,
}

impl CpuPool {
    pub fn new(n_threads: usize) -> crate::Result<CpuPool> {
        let threads = crate::base::threads::Pool::new(n_threads, "ggmlr-cpu")
            .context("could not start the CPU backend's threads")?;
        Ok(CpuPool { n_threads, threads })
    }

    /// A pool of one thread (the caller's).
    pub fn single() -> CpuPool {
        CpuPool { n_threads: 1, threads: crate::base::threads::Pool::single() }
    }

    /// Run `f` inside the pool (so rayon's parallel iterators use its threads).
    /// A caller that is already one of `n_threads` workers of a pool (R's
    /// main thread, in the global pool of as many threads by default) runs
    /// `f` itself, its loops shared with its pool's threads: handing `f` to
    /// this pool's thread and the result back wakes two threads per kernel,
    /// which on a busy machine costs more than small kernels take. Either
    /// way the pool's other threads then look for work for a while
    /// ([`crate::base::warm`]), so the next region costs a steal.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if crate::base::threads::runs_as_pool_of(self.n_threads) {
            crate::base::warm::rearm();
            return f();
        }
        match self.threads.get() {
            Ok(Some(p)) => p.install(|| {
                crate::base::warm::rearm();
                f()
            }),
            // One thread, or no threads could start in this process: the
            // caller's thread does the work.
            _ => f(),
        }
    }
}

/// Threads of a new CPU backend: `RAYON_NUM_THREADS` when it is set to a
/// positive number (R CMD check's limit of two reaches the backends that
/// autograd on "cpu" and `ggml_graph_compute()` use, as it reaches rayon's
/// own pool), else every core.
pub fn default_threads() -> usize {
    let cap = std::env::var("RAYON_NUM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok());
    match cap {
        Some(n) if n > 0 => n,
        _ => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    }
}

/// Below this many output elements a kernel runs on the calling thread.
/// One parallel region costs 0.05 us while the pool's threads spin, 4 us
/// after 1 ms idle and 11 us after 10 ms (futex wake-up; ignored test
/// `pool_region_cost`, the caller one of the pool's threads as R's is). A map
/// of 2^17 f32 (512 KiB) takes 15-30 us and fits one core's 1 MiB L2 with
/// its source, where the previous kernel left it: split, half of it moves to
/// the other core and the saving is about the wake-up. From 2^18 (1 MiB) the
/// data streams from L3 either way, and two cores draw twice the bandwidth.
pub const PAR_MIN: usize = 1 << 18;

/// Multiply-adds below which a matrix product runs on the calling thread:
/// 2^22 take about 70 us on one core (f32, AVX-512), so two threads save 35
/// us against at most 11 us of waking the other (see [`PAR_MIN`]); f64
/// products take twice as long and meet twice per depth step of 256
/// (`dgemm_par`). The small products of the MLP steps of
/// `inst/bench/train_step.R` (512 x 256 x 10: 2^20.3, tens of us) stay on one
/// thread, with their operands in its cache, unless the pool is kept awake
/// ([`threshold`]).
pub const PAR_PRODUCT: usize = 1 << 22;

/// Factor by which the thresholds of compute-bound kernels (products,
/// [`PAR_MIN_HEAVY`]) drop while the pool's threads look for work
/// ([`crate::base::warm`]): a region then costs 1-2 us (a steal) instead of
/// a wake-up of 4-11 us on bare metal and 20-45 us on a 2-vCPU virtual
/// machine (ignored test `pool_region_cost`). Ignored test
/// `warm_split_break_even`, 2 vCPUs, kept awake: a product splits with gain
/// from 2^20 multiply-adds (f32 20 -> 12 us), a map of an exponential per
/// value from 2^12 values (19 -> 14 us). A plain map stays at [`PAR_MIN`]:
/// split, it ran twice as long at every size from 2^12 to 2^18 f64 values,
/// its data in the other core's cache.
pub const WARM_DIV: usize = 8;

/// `base`, a split threshold weighed against a sleeping pool, or
/// `base / WARM_DIV` on a thread whose pool is kept awake.
pub fn threshold(base: usize) -> usize {
    if crate::base::warm::active() {
        base / WARM_DIV_NOW.load(std::sync::atomic::Ordering::Relaxed).max(1)
    } else {
        base
    }
}

/// [`WARM_DIV`], changed by the side-by-side timing test.
static WARM_DIV_NOW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(WARM_DIV);

#[cfg(test)]
pub(super) fn set_warm_div(d: usize) {
    WARM_DIV_NOW.store(d, std::sync::atomic::Ordering::Relaxed);
}

/// Run `f(first_row, rows)` over `out` split into chunks of whole rows of
/// `row_len`, in parallel on `pool` when the work is large enough.
pub fn par_rows<T: Send>(
    pool: &CpuPool,
    out: &mut [T],
    row_len: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    par_rows_from(pool, out, row_len, PAR_MIN, f)
}

/// Output elements from which a kernel that costs several exponentials per
/// element (a softmax row: max, exp, sum, scale) is split: 2^16 f32 take
/// about 95 us on one core (`ggml_soft_max` of 128 x 1024 measured 190 us
/// against 75 us for `ggml_exp`, 1 thread), far above the wake-up of the
/// other thread that [`PAR_MIN`] weighs for a plain map.
pub const PAR_MIN_HEAVY: usize = PAR_MIN / 4;

/// As [`par_rows`], split from `min` output elements.
pub fn par_rows_from<T: Send>(
    pool: &CpuPool,
    out: &mut [T],
    row_len: usize,
    min: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let row_len = row_len.max(1);
    let n_rows = out.len() / row_len;
    if pool.n_threads <= 1 || out.len() < min || n_rows < 2 {
        f(0, out);
        return;
    }
    let rows_per = n_rows.div_ceil(pool.n_threads * 4).max(1);
    pool.install(|| {
        out.par_chunks_mut(rows_per * row_len)
            .enumerate()
            .for_each(|(c, chunk)| {
                // A requested stop skips the remaining chunks; the node
                // loop then reports the interruption.
                if !crate::base::cancel::requested() {
                    f(c * rows_per, chunk)
                }
            });
    });
}

/// Runs `f(n, q0, px)` for every band of `band` pixels (q0..q0+px, the
/// last band shorter) of `pixels` in each of `nb` images, on `pool`'s
/// threads; a requested stop (Ctrl-C) skips the bands not yet begun.
pub(super) fn for_bands(pool: &CpuPool, nb: usize, pixels: usize, band: usize, f: impl Fn(usize, usize, usize) + Sync) {
    let bands = pixels.div_ceil(band.max(1));
    let task = |t: usize| {
        if crate::base::cancel::requested() {
            return;
        }
        let (n, q0) = (t / bands, (t % bands) * band);
        f(n, q0, band.min(pixels - q0));
    };
    let tasks = bands * nb;
    if pool.n_threads <= 1 || tasks < 2 {
        (0..tasks).for_each(task);
    } else {
        pool.install(|| (0..tasks).into_par_iter().for_each(task));
    }
}
