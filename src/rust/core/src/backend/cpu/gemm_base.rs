//! What the f32 and f64 products share: strided views of operands, the
//! closure handed to the pool's threads, the copy of a matrix stored by
//! rows into one stored by columns, and each thread's scratch buffer.

/// A strided matrix: element (i, j) at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub(super) struct Strided<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

/// `dst (m x k, by columns: dst[i + j*m]) = src (m x k, rows of stride rs,
/// columns contiguous)`.
///
/// # Safety
/// `src` addresses m rows of k values at stride `rs`; `dst` holds m * k.
pub(super) unsafe fn transpose(m: usize, k: usize, src: *const f32, rs: isize, dst: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    if crate::base::simd::avx2_fma() {
        let (m8, k8) = (m / 8 * 8, k / 8 * 8);
        for j in (0..k8).step_by(8) {
            for i in (0..m8).step_by(8) {
                // SAFETY: the 8 x 8 block at (i, j) is inside both; the CPU has AVX2.
                unsafe { t8x8(src.offset(i as isize * rs + j as isize), rs, dst.add(i + j * m), m) };
            }
        }
        // SAFETY: as the caller's contract; the edges outside the blocks.
        unsafe {
            transpose_scalar(m8..m, 0..k, src, rs, dst, m);
            transpose_scalar(0..m8, k8..k, src, rs, dst, m);
        }
        return;
    }
    // SAFETY: as the caller's contract.
    unsafe { transpose_scalar(0..m, 0..k, src, rs, dst, m) }
}

/// The rows `is` x columns `js` part of [`transpose`], one value at a time.
///
/// # Safety
/// As [`transpose`], `ld` being its m.
unsafe fn transpose_scalar(is: std::ops::Range<usize>, js: std::ops::Range<usize>, src: *const f32, rs: isize, dst: *mut f32, ld: usize) {
    for j in js {
        for i in is.clone() {
            *dst.add(i + j * ld) = *src.offset(i as isize * rs + j as isize);
        }
    }
}

/// The 8 x 8 block at `src` (rows of stride `rs`) stored transposed at
/// `dst` (columns of stride `ld`).
///
/// # Safety
/// Both blocks are valid; the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn t8x8(src: *const f32, rs: isize, dst: *mut f32, ld: usize) {
    use std::arch::x86_64::*;
    let r = |i: isize| _mm256_loadu_ps(src.offset(i * rs));
    let (r0, r1, r2, r3, r4, r5, r6, r7) = (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
    // Pairs of rows interleaved, then quads, then the 128-bit halves.
    let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
    let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
    let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
    let (q0, q1) = (_mm256_shuffle_ps::<0x44>(t0, t2), _mm256_shuffle_ps::<0xEE>(t0, t2));
    let (q2, q3) = (_mm256_shuffle_ps::<0x44>(t1, t3), _mm256_shuffle_ps::<0xEE>(t1, t3));
    let (q4, q5) = (_mm256_shuffle_ps::<0x44>(t4, t6), _mm256_shuffle_ps::<0xEE>(t4, t6));
    let (q6, q7) = (_mm256_shuffle_ps::<0x44>(t5, t7), _mm256_shuffle_ps::<0xEE>(t5, t7));
    let cols = [
        _mm256_permute2f128_ps::<0x20>(q0, q4),
        _mm256_permute2f128_ps::<0x20>(q1, q5),
        _mm256_permute2f128_ps::<0x20>(q2, q6),
        _mm256_permute2f128_ps::<0x20>(q3, q7),
        _mm256_permute2f128_ps::<0x31>(q0, q4),
        _mm256_permute2f128_ps::<0x31>(q1, q5),
        _mm256_permute2f128_ps::<0x31>(q2, q6),
        _mm256_permute2f128_ps::<0x31>(q3, q7),
    ];
    for (j, v) in cols.into_iter().enumerate() {
        _mm256_storeu_ps(dst.add(j * ld), v);
    }
}

/// Carries the product's closure (raw pointers, used by one product at a
/// time) into the pool.
pub(super) struct SendFn<F>(pub F);
// SAFETY: the pointers inside address memory the caller keeps alive and
// exclusive for the whole call, which `install` does not outlive.
unsafe impl<F> Send for SendFn<F> {}

// SAFETY: as for Send: the closure only reads the operands and writes
// disjoint blocks of C, from however many threads call it.
unsafe impl<F> Sync for SendFn<F> {}

impl<F: Fn(usize)> SendFn<F> {
    /// Runs the closure for one block.
    pub(super) fn each(&self, p: usize) {
        (self.0)(p)
    }
}

/// Scratch a thread keeps between products at most (bytes); a larger one
/// is freed after its product.
const SCRATCH_KEEP: usize = 8 << 20;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with `len` f32 values aligned to 64 bytes: the calling thread's
/// own buffer, reused across products (a fresh one if that is in use).
pub(super) fn with_scratch(len: usize, f: impl FnOnce(&mut [f32])) {
    fn aligned(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
        if v.len() < len + 16 {
            v.resize(len + 16, 0.0);
        }
        let off = v.as_ptr().align_offset(64).min(16);
        // BOUNDS: off <= 16 and v.len() >= len + 16, so off + len <= v.len().
        &mut v[off..off + len]
    }
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            f(aligned(&mut v, len));
            if v.capacity() * 4 > SCRATCH_KEEP {
                *v = Vec::new();
            }
        }
        Err(_) => f(aligned(&mut Vec::new(), len)),
    })
}
