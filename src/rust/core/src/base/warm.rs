//! Keeping a pool's threads awake between the regions of a computation.
//!
//! A rayon worker with nothing to do looks for work for a few tens of
//! microseconds, then sleeps; the next parallel region pays a wake-up (4-11
//! us on bare metal, 20-45 us on a 2-vCPU virtual machine; ignored test
//! `pool_region_cost`) before the sleeper helps, and the thread that started
//! the region may then wait for it. A graph, a training step or an ncnn pass
//! runs one region per kernel, often tens of microseconds long, with serial
//! work in between: the wake-up is then a large share of the kernel, and two
//! threads run slower than one.
//!
//! [`rearm`], called before a region by the thread that starts it, hands
//! each other worker of that thread's pool a job that keeps looking for work
//! (rayon's `yield_now`, which runs what it finds) until it has found none
//! for [`IDLE_LIMIT`] (as OpenMP runtimes spin before they block). A region
//! started while they look costs a steal, about 1-2 us. While they do,
//! [`active`] is true on the starting thread: the CPU backend's split
//! thresholds weigh the cheaper region. (ncnn's layer loops, which split
//! whatever their size, do not rearm: see `ncnn::par::chunks_mut`.)

use rayon::Yield;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a kept-awake worker looks for work without finding any before
/// it goes back to rayon's own idling (and sleep). A second thread's share of
/// a small kernel is tens of microseconds; the serial stretches between the
/// kernels of a step (allocation, a layout copy, the R code between two
/// eager operations) are shorter than this.
pub const IDLE_LIMIT: Duration = Duration::from_micros(1500);

#[derive(Debug, Default)]
struct State {
    /// Spinner jobs handed out and not yet started.
    pending: AtomicUsize,
    /// Spinner jobs running.
    live: AtomicUsize,
}

impl State {
    fn awake(&self) -> bool {
        self.live.load(Ordering::Acquire) > 0 || self.pending.load(Ordering::Acquire) > 0
    }
}

thread_local! {
    /// The spinners this thread started, on the pool it is a worker of (a
    /// thread is a worker of one pool for its whole life).
    static KEPT: RefCell<Option<Arc<State>>> = const { RefCell::new(None) };
}

/// Whether the calling thread's pool has workers looking for work that
/// this thread handed them (so a region started now costs a steal).
pub fn active() -> bool {
    KEPT.with(|k| k.borrow().as_ref().is_some_and(|s| s.awake()))
}

/// Keep the other workers of the calling thread's pool looking for work
/// (for [`IDLE_LIMIT`] after the last they find); cheap when they already
/// do. Nothing when the caller is no worker, the pool is the caller alone,
/// or its other workers are not in this process (a forked child). Never
/// inlined: the parallel loops that call it stay small enough to be
/// inlined where they are written.
#[inline(never)]
pub fn rearm() {
    // The usual case first, with no look at the pool (whose fork check asks
    // the process id): its workers still look for work.
    if active() {
        return;
    }
    let threads = rayon::current_num_threads();
    let Some(me) = rayon::current_thread_index() else { return };
    if !super::threads::runs_as_pool_of(threads) {
        return;
    }
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        let s = k.get_or_insert_with(Default::default);
        s.pending.fetch_add(threads - 1, Ordering::AcqRel);
        let state = s.clone();
        rayon::spawn_broadcast(move |ctx| {
            if ctx.index() != me {
                spin(&state)
            }
        });
    });
}

fn spin(s: &State) {
    s.live.fetch_add(1, Ordering::AcqRel);
    s.pending.fetch_sub(1, Ordering::AcqRel);
    let mut idle = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        match rayon::yield_now() {
            Some(Yield::Executed) => {
                idle = 0;
                since = None;
            }
            _ => {
                idle = idle.wrapping_add(1);
                if idle % 64 == 0 {
                    let now = Instant::now();
                    if now.duration_since(*since.get_or_insert(now)) > IDLE_LIMIT {
                        break;
                    }
                }
                // A pause now and then, not every round: back-to-back
                // pauses are what a hypervisor watches for to take a virtual
                // CPU away (pause-loop exiting). `pool_region_cost`, 2 vCPUs,
                // 1 ms of serial work before each region: median cost 3.9-5.2
                // us pausing every round, 1.7 us one round in 16, 2.2 never.
                if idle % 16 == 0 {
                    std::hint::spin_loop();
                }
            }
        }
    }
    s.live.fetch_sub(1, Ordering::AcqRel);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    fn pool(n: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()
    }

    fn state() -> Arc<State> {
        KEPT.with(|k| k.borrow().clone().unwrap())
    }

    #[test]
    fn regions_run_and_idle_spinners_leave() {
        let p = pool(3);
        let st = p.install(|| {
            assert!(!active());
            for _ in 0..200 {
                rearm();
                assert!(active());
                let s: u64 = (0..1000u64).into_par_iter().sum();
                assert_eq!(s, 999 * 500);
            }
            state()
        });
        let t = Instant::now();
        while st.awake() {
            assert!(t.elapsed() < Duration::from_secs(5), "idle spinners did not leave");
            std::thread::sleep(Duration::from_millis(1));
        }
        // And come back.
        p.install(|| {
            assert!(!active());
            rearm();
            assert!(active());
            assert_eq!((0..100u64).into_par_iter().sum::<u64>(), 4950);
        });
    }

    #[test]
    fn nothing_is_kept_off_a_pool_or_in_a_one_thread_pool() {
        rearm();
        assert!(!active(), "a test thread is no pool's worker");
        pool(1).install(|| {
            rearm();
            assert!(!active());
        });
    }
}
