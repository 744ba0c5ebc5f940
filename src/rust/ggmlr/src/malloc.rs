//! Tuning of the C allocator for numeric work (glibc only).
//!
//! An ML step frees and reallocates the same few large blocks every time.
//! With glibc's defaults a freed block at the top of the heap is returned to
//! the kernel as soon as more than 128 KiB are free there, and the next step
//! takes page faults to get the memory back (measured: a 128-128-10 MLP step
//! spent a third of its time in page faults). Keeping up to 64 MiB of freed
//! memory, and serving blocks of up to 32 MiB from the heap, avoids that.

use crate::guard;
use extendr_api::prelude::*;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune() -> bool {
    use std::os::raw::c_int;
    extern "C" {
        fn mallopt(param: c_int, value: c_int) -> c_int;
    }
    const M_TRIM_THRESHOLD: c_int = -1;
    const M_MMAP_THRESHOLD: c_int = -3;
    // SAFETY: mallopt only changes allocator parameters.
    unsafe { mallopt(M_TRIM_THRESHOLD, 64 << 20) == 1 && mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune() -> bool {
    false
}

/// Applies the allocator settings; TRUE when they were applied.
/// @noRd
#[extendr]
fn rs_malloc_tune() -> Robj {
    guard(|| Ok(tune().into()))
}

/// The largest single allocation the engine grants (bytes): this machine's
/// physical memory (see `ggmlr_core::base::alloc`).
/// @noRd
#[extendr]
fn rs_alloc_limit() -> Robj {
    guard(|| Ok((ggmlr_core::base::alloc::limit() as f64).into()))
}

extendr_module! {
    mod malloc;
    fn rs_malloc_tune;
    fn rs_alloc_limit;
}
