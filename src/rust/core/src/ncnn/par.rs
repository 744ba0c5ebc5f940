//! Data-parallel loops of the builtin layers. Inside a net's worker pool
//! they run on rayon; a net with one thread runs its layers on the calling
//! thread, where these loops run sequentially (no thread hand-over at all).

use rayon::prelude::*;
use std::cell::Cell;

thread_local! {
    static SEQUENTIAL: Cell<bool> = const { Cell::new(false) };
}

/// Whether loops on this thread run sequentially.
pub fn sequential() -> bool {
    SEQUENTIAL.with(|s| s.get())
}

/// Run `f` with sequential loops on this thread.
pub fn run_sequential<R>(f: impl FnOnce() -> R) -> R {
    let prev = SEQUENTIAL.with(|s| s.replace(true));
    let r = f();
    SEQUENTIAL.with(|s| s.set(prev));
    r
}

/// Threads the loops may use.
pub fn threads() -> usize {
    if sequential() {
        1
    } else {
        rayon::current_num_threads().max(1)
    }
}

/// `f(i, chunk)` for every `size`-long chunk of `data`. Always inlined, as
/// the loops it wraps were written to be compiled in their caller: kept as
/// a call (when a call to `base::warm::rearm` here made it larger), the
/// ReLU map of `ActivationLayer` compiled to a scalar loop that stores every
/// value, and blazeface on one thread took 3.2 ms instead of 1.5.
///
/// The loops do not keep the pool awake (`base::warm`): a layer's loop
/// always splits, and measured with inst/bench/ncnn.R on 2 vCPUs, small
/// nets ran slower with the other thread stealing every tiny layer's half
/// (blazeface 2.2-2.3 -> 2.5-3.1 ms, shufflenet 4.6-6.4 -> 7.3-9.0) than
/// with it asleep through them.
#[inline(always)]
pub fn chunks_mut<T: Send, F: Fn(usize, &mut [T]) + Sync + Send>(data: &mut [T], size: usize, f: F) {
    let size = size.max(1);
    if sequential() {
        data.chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        data.par_chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `f(i)` for i in 0..n (inlined, as [`chunks_mut`]).
#[inline(always)]
pub fn range<F: Fn(usize) + Sync + Send>(n: usize, f: F) {
    if sequential() {
        (0..n).for_each(f);
    } else {
        (0..n).into_par_iter().for_each(f);
    }
}
