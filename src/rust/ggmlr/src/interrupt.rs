//! Ctrl-C for the engine. R's SIGINT handler only sets a flag
//! (`R_interrupts_pending`), which R acts on at its next check. The engine
//! asks [`ggmlr_core::base::cancel`] between graph nodes, ncnn layers and chunks of
//! large kernels; the source installed here answers by reading that flag (a
//! plain read, safe from any thread; no R function is called). When a
//! computation stops for it, [`consume`] clears the flag on R's main thread
//! and the R wrapper signals R's own interrupt condition (`.rs()` in
//! R/errors.R), so `tryCatch(interrupt =)` and the top level see a real
//! interrupt, and R does not act on the same keypress twice.

use ggmlr_core::base::cancel::Cancel;
use std::os::raw::c_int;
use std::ptr::{addr_of, addr_of_mut};

extern "C" {
    static mut R_interrupts_pending: c_int;
    static R_interrupts_suspended: c_int;
}

struct RInterrupt;

impl Cancel for RInterrupt {
    fn requested(&self) -> bool {
        // SAFETY: both are plain ints of libR, written by R's signal handler
        // and main thread; a volatile read of an aligned int cannot tear.
        unsafe {
            std::ptr::read_volatile(addr_of!(R_interrupts_pending)) != 0
                && std::ptr::read_volatile(addr_of!(R_interrupts_suspended)) == 0
        }
    }
}

/// Install the interrupt source and the fork-safe global pool (once, from
/// R's main thread: the first call into the binding).
pub fn install() {
    ggmlr_core::base::cancel::install(Box::new(RInterrupt));
    ggmlr_core::base::threads::init_global_with_current_thread();
}

/// Clear the pending interrupt the engine acted on (R's main thread only).
pub fn consume() {
    // SAFETY: called from R's main thread, as R itself clears the flag.
    unsafe { std::ptr::write_volatile(addr_of_mut!(R_interrupts_pending), 0) };
}
