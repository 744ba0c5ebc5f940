//! The general matrix product of f32 and f64 values through the `gemm`
//! crate: register kernels for AVX-512, AVX2 + FMA or portable code, chosen
//! at run time for the CPU in use; large f32 products on CPUs with AVX-512
//! go to the package's own kernels (`sgemm`) instead. A large product is split here into one
//! block of C per thread of the CPU backend's pool
//! (`ggml_backend_cpu_set_n_threads()`), each computed by the crate on one
//! thread: one parallel region per product, where the crate's own threading
//! meets its threads twice per depth block of 512 and packs the same rows of
//! A on both. An f32 A stored by rows (ggml's `mul_mat` layout, depth
//! contiguous) is copied by columns with 8 x 8 vector transposes first,
//! which the crate would gather one value at a time; at one thread this was
//! 11% faster at 256 and 17% at 512 (measured at load 12, side by side).
//!
//! The crate was measured against `matrixmultiply` (with and without its own
//! threading) and the package's earlier AVX2 kernels, on f32 and f64, by the
//! ignored test `gemm_candidates` (`cargo test --release -p ggmlr-core
//! gemm_candidates -- --ignored --nocapture`).

use super::par::{threshold, CpuPool, PAR_PRODUCT};
use super::gemm_base::{with_scratch, SendFn};
pub(super) use super::gemm_base::{transpose, Strided};

/// Multiply-adds of one call at most, when a product is summed over slabs of
/// its depth so that a requested stop (Ctrl-C) is seen between them...
const SLAB_WORK: usize = 1 << 31;
/// ...in whole multiples of this depth.
const SLAB_DEPTH: usize = 256;

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
    // The crate's kernels write C by columns: a row-major C is computed as
    // its transpose, C^T = B^T A^T.
    if c_cs.unsigned_abs() < c_rs.unsigned_abs() {
        let (at, bt) = (Strided { ptr: a.ptr, rs: a.cs, cs: a.rs }, Strided { ptr: b.ptr, rs: b.cs, cs: b.rs });
        return product(pool, n, k, m, bt, at, c, c_cs, c_rs);
    }
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() && super::sgemm::wanted(m, k, n, c_rs, pool.map_or(1, |p| p.n_threads)) {
        let (a, b) = (Strided { ptr: a.ptr as *const f32, rs: a.rs, cs: a.cs }, Strided { ptr: b.ptr as *const f32, rs: b.rs, cs: b.cs });
        // SAFETY: T is f32 (so the casts are the identity); the caller's
        // contract, C's rows of stride 1, and AVX-512F (`wanted`).
        return super::sgemm::product(pool, m, k, n, a, b, c as *mut f32, c_cs);
    }
    let pool = pool.filter(|p| p.n_threads > 1 && m * n * k >= threshold(PAR_PRODUCT));
    let Some(pool) = pool else {
        return block(m, k, n, a, b, c, c_rs, c_cs);
    };
    let plan = Plan::new(m, n, pool.n_threads, transposes::<T>(a, m, k, n));
    let go = SendFn(move |p: usize| {
        let (s, len) = plan.block(p);
        // SAFETY: block p is rows (columns) s..s+len of C, of A's rows (B's
        // columns), inside the caller's operands; blocks do not overlap.
        unsafe {
            if plan.rows {
                let a = Strided { ptr: a.ptr.offset(s as isize * a.rs), ..a };
                block(len, k, n, a, b, c.offset(s as isize * c_rs), c_rs, c_cs)
            } else {
                let b = Strided { ptr: b.ptr.offset(s as isize * b.cs), ..b };
                block(m, k, len, a, b, c.offset(s as isize * c_cs), c_rs, c_cs)
            }
        }
    });
    pool.install(|| {
        use rayon::prelude::*;
        let go = &go;
        (0..plan.parts).into_par_iter().for_each(|p| go.each(p));
    });
}

/// One thread's product, C with rows of stride 1 or less than its columns'.
/// An A of f32 stored by rows (its depth contiguous: ggml's `mul_mat`
/// operands) is first copied by columns, a slab of depth at a time, with
/// 8 x 8 transposes (`transpose`): the crate would gather it one value at a
/// time into its packed panels.
///
/// # Safety
/// As [`product`].
#[allow(clippy::too_many_arguments)]
unsafe fn block<T: Copy + Send + Sync + 'static + num_zero::Zero>(
    m: usize,
    k: usize,
    n: usize,
    a: Strided<T>,
    b: Strided<T>,
    c: *mut T,
    c_rs: isize,
    c_cs: isize,
) {
    if !transposes::<T>(a, m, k, n) {
        return serial(m, k, n, a, b, c, c_rs, c_cs);
    }
    let a32 = Strided { ptr: a.ptr as *const f32, rs: a.rs, cs: 1 };
    let slab = TRANSPOSE_DEPTH.min(k);
    with_scratch(m * slab, |buf| {
        let mut k0 = 0;
        while k0 < k {
            if crate::base::cancel::requested() {
                return;
            }
            let kk = slab.min(k - k0);
            // SAFETY: columns k0..k0+kk of the m rows of A are valid (the
            // caller's contract); `buf` holds m * kk values.
            unsafe {
                transpose(m, kk, a32.ptr.add(k0), a32.rs, buf.as_mut_ptr());
                let at = Strided { ptr: buf.as_ptr() as *const T, rs: 1, cs: m as isize };
                let bk = Strided { ptr: b.ptr.offset(k0 as isize * b.rs), ..b };
                gemm_call(m, kk, n, at, bk, c, c_rs, c_cs, k0 > 0);
            }
            k0 += kk;
        }
    });
}

/// Whether [`block`] copies A by columns first.
fn transposes<T: 'static>(a: Strided<T>, m: usize, k: usize, n: usize) -> bool {
    a.cs == 1 && a.rs > 1 && m >= 8 && k >= 8 && n >= TRANSPOSE_MIN_N
        && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
}

/// Depth of the slabs an A stored by rows is copied in (the crate's own
/// depth block on this kind of CPU: `gemm_common::cache::kernel_params`).
const TRANSPOSE_DEPTH: usize = 512;
/// Columns of C below which A is not copied (copying costs as much as a
/// few columns of products).
const TRANSPOSE_MIN_N: usize = 16;
/// Blocks of a product's C: `parts` runs of whole rows (`rows`) or whole
/// columns, each `per` long (a multiple of `GRANULE`) but the last. Rows
/// when A is copied by columns first (each thread then copies only its
/// rows of A) and there are enough of them, else along the longer side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Plan {
    pub rows: bool,
    pub parts: usize,
    pub per: usize,
    pub len: usize,
}

/// Rows (columns) of a block of C: a multiple of the register tiles' sides
/// (16 f32 or 8 f64 lanes, times 1 to 4; 6 columns of 64 bytes are 384
/// bytes) so that only the last block has partial tiles.
const GRANULE: usize = 64;

impl Plan {
    pub fn new(m: usize, n: usize, threads: usize, a_copied: bool) -> Plan {
        let threads = threads.max(1);
        let rows = m >= n || (a_copied && m >= threads * GRANULE);
        let len = if rows { m } else { n };
        let per = (len.div_ceil(threads).div_ceil(GRANULE) * GRANULE).max(1);
        Plan { rows, parts: len.div_ceil(per), per, len }
    }
    /// First row (column) and length of block `p`.
    pub fn block(&self, p: usize) -> (usize, usize) {
        let s = (p * self.per).min(self.len);
        (s, self.per.min(self.len - s))
    }
}

/// The product on the calling thread, summed over slabs of the depth so that a requested stop is seen
/// between them.
///
/// # Safety
/// As [`product`].
#[allow(clippy::too_many_arguments)]
unsafe fn serial<T: Copy + Send + Sync + 'static + num_zero::Zero>(
    m: usize,
    k: usize,
    n: usize,
    a: Strided<T>,
    b: Strided<T>,
    c: *mut T,
    c_rs: isize,
    c_cs: isize,
) {
    let depth = (SLAB_WORK / (m * n).max(1)).max(1).div_ceil(SLAB_DEPTH) * SLAB_DEPTH;
    let mut k0 = 0;
    while k0 < k {
        if crate::base::cancel::requested() {
            return;
        }
        let kk = depth.min(k - k0);
        // SAFETY: by the caller's contract, columns k0..k0+kk of A and
        // rows k0..k0+kk of B are valid, and C is this call's alone.
        unsafe { gemm_call(m, kk, n, Strided { ptr: a.ptr.offset(k0 as isize * a.cs), ..a }, Strided { ptr: b.ptr.offset(k0 as isize * b.rs), ..b }, c, c_rs, c_cs, k0 > 0) };
        k0 += kk;
    }
}

/// `C (+)= A (m x k) * B (k x n)` by the crate: added when `add` (`gemm`
/// computes dst = alpha*dst + beta*lhs*rhs, reading dst only then).
///
/// # Safety
/// As [`product`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_call<T: Copy + Send + Sync + 'static + num_zero::Zero>(
    m: usize,
    k: usize,
    n: usize,
    a: Strided<T>,
    b: Strided<T>,
    c: *mut T,
    c_rs: isize,
    c_cs: isize,
    add: bool,
) {
    gemm::gemm(m, n, k, c, c_cs, c_rs, add, a.ptr, a.cs, a.rs, b.ptr, b.cs, b.rs, T::ONE, T::ONE, false, false, false, gemm::Parallelism::None)
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
