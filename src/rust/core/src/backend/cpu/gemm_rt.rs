//! The general matrix product of f32 and f64 values through the `gemm`
//! crate: register kernels for AVX-512, AVX2 + FMA or portable code, chosen
//! at run time for the CPU in use, and split over the threads of the CPU
//! backend's pool (`ggml_backend_cpu_set_n_threads()`) when the product is
//! large enough.
//!
//! The crate was measured against `matrixmultiply` (with and without its own
//! threading) and the package's earlier AVX2 kernels, on f32 and f64, by the
//! ignored test `gemm_candidates` (`cargo test --release -p ggmlr-core
//! gemm_candidates -- --ignored --nocapture`).

use super::par::CpuPool;

/// Multiply-adds below which a product runs on the calling thread (waking
/// the pool costs more than it saves: the 64 x 128 x 128 products of a small
/// MLP's f32 training step ran slower on two threads than on one at 2^18).
const PAR_WORK: usize = 1 << 22;
/// Multiply-adds of one call at most, when a product is summed over slabs of
/// its depth so that a requested stop (Ctrl-C) is seen between them...
const SLAB_WORK: usize = 1 << 31;
/// ...in whole multiples of this depth.
const SLAB_DEPTH: usize = 256;

/// A strided matrix: element (i, j) at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub(super) struct Strided<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

/// `C (m x n) = A (m x k) * B (k x n)`, C at `c` with strides `c_rs`, `c_cs`
/// (overwritten), on `pool`'s threads when the product is large (on the
/// calling thread only when `pool` is `None`). A
/// requested stop (Ctrl-C) leaves C partly computed; the caller reports it.
///
/// # Safety
/// `a`, `b` address `m x k` and `k x n` valid elements; `c` addresses an
/// `m x n` block that nothing else reads or writes during the call, and
/// whose elements do not overlap.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product<T: Copy + Send + Sync + 'static + num_zero::Zero>(
    pool: Option<&CpuPool>,
    m: usize,
    k: usize,
    n: usize,
    a: Strided<T>,
    b: Strided<T>,
    c: *mut T,
    c_rs: isize,
    c_cs: isize,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                *c.offset(i as isize * c_rs + j as isize * c_cs) = T::ZERO;
            }
        }
        return;
    }
    let pool = pool.filter(|p| p.n_threads > 1 && m * n * k >= PAR_WORK);
    let threads = pool.map_or(1, |p| p.n_threads);
    let depth = (SLAB_WORK / (m * n).max(1)).max(1).div_ceil(SLAB_DEPTH) * SLAB_DEPTH;
    let run = move || {
        let par = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
        let mut k0 = 0;
        while k0 < k {
            if crate::base::cancel::requested() {
                return;
            }
            let kk = depth.min(k - k0);
            // SAFETY: by the caller's contract, columns k0..k0+kk of A and
            // rows k0..k0+kk of B are valid, and C is this call's alone.
            // `gemm` computes dst = alpha*dst + beta*lhs*rhs, reading dst
            // only after the first slab.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    kk,
                    c,
                    c_cs,
                    c_rs,
                    k0 > 0,
                    a.ptr.offset(k0 as isize * a.cs),
                    a.cs,
                    a.rs,
                    b.ptr.offset(k0 as isize * b.rs),
                    b.cs,
                    b.rs,
                    T::ONE,
                    T::ONE,
                    false,
                    false,
                    false,
                    par,
                )
            };
            k0 += kk;
        }
    };
    match pool {
        Some(pool) => {
            let run = SendFn(run);
            pool.install(move || run.call());
        }
        None => run(),
    }
}

/// Carries the product's closure (raw pointers, used by one product at a
/// time) into the pool.
struct SendFn<F>(F);
// SAFETY: the pointers inside address memory the caller keeps alive and
// exclusive for the whole call, which `install` does not outlive.
unsafe impl<F> Send for SendFn<F> {}

impl<F: FnOnce()> SendFn<F> {
    /// Runs the closure (a method, so the closure moves the whole wrapper).
    fn call(self) {
        (self.0)()
    }
}

/// Zero and one of the element types.
pub(super) mod num_zero {
    pub trait Zero {
        const ZERO: Self;
        const ONE: Self;
    }
    impl Zero for f32 {
        const ZERO: f32 = 0.0;
        const ONE: f32 = 1.0;
    }
    impl Zero for f64 {
        const ZERO: f64 = 0.0;
        const ONE: f64 = 1.0;
    }
}
