//! Runtime choice between the AVX2+FMA kernels (x86-64 CPUs that have them)
//! and the portable ones, for the ncnn layers and the host matrix product.
//! The package is built for the baseline x86-64, so the fast kernels are
//! compiled with `#[target_feature]` and chosen here.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// 0: not probed yet, 1: no, 2: yes.
static DETECTED: AtomicU8 = AtomicU8::new(0);
/// Set by tests to run the portable kernels on a CPU that has AVX2.
static PORTABLE: AtomicBool = AtomicBool::new(false);

/// Whether the AVX2+FMA kernels may run.
#[inline]
pub fn avx2_fma() -> bool {
    if PORTABLE.load(Ordering::Relaxed) {
        return false;
    }
    match DETECTED.load(Ordering::Relaxed) {
        0 => {
            let yes = detect();
            DETECTED.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        v => v == 2,
    }
}

fn detect() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX-512F (the standard library caches the probe),
/// for the kernels written for 16-lane registers. Not turned off by the
/// tests' portable switch: callers that also need AVX2 and FMA ask
/// [`avx2_fma`] as well.
#[inline]
pub fn avx512f() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Run `f` compiled for AVX2 and FMA where the CPU has them, so that the
/// loops in it vectorise eight lanes wide (the same operations, so the same
/// results), else as it is.
#[inline(always)]
pub fn wide<R>(f: impl FnOnce() -> R) -> R {
    if avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        unsafe { wide_avx2(f) }
    } else {
        f()
    }
}

#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
// SAFETY: (for callers) only called when the CPU has AVX2 and FMA (see `wide`).
unsafe fn wide_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Run `f` with the portable kernels only (tests compare both paths).
#[cfg(test)]
pub fn portable<R>(f: impl FnOnce() -> R) -> R {
    PORTABLE.store(true, Ordering::SeqCst);
    let r = f();
    PORTABLE.store(false, Ordering::SeqCst);
    r
}
