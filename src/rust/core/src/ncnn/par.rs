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

/// `f(i, chunk)` for every `size`-long chunk of `data`.
pub fn chunks_mut<T: Send, F: Fn(usize, &mut [T]) + Sync + Send>(data: &mut [T], size: usize, f: F) {
    let size = size.max(1);
    if sequential() {
        data.chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        crate::base::warm::rearm();
        data.par_chunks_mut(size).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `f(i)` for i in 0..n.
pub fn range<F: Fn(usize) + Sync + Send>(n: usize, f: F) {
    if sequential() {
        (0..n).for_each(f);
    } else {
        crate::base::warm::rearm();
        (0..n).into_par_iter().for_each(f);
    }
}
