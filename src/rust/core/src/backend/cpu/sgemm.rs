//! The f32 matrix product on CPUs with AVX-512: a register kernel of 48 x 8
//! values of C (three 16-lane rows of accumulators times eight columns, 24
//! of the 32 zmm registers), fed from packed panels of A (48 rows by a depth
//! block of `KC`, streamed from L2) and of B (a depth block by 8 columns,
//! kept in L1). Each thread of the pool computes its own block of C's
//! columns (or rows) with its own packed panels: no thread waits for
//! another inside a product. `gemm_rt` calls it for large f32 products
//! when the CPU has AVX-512F and C's columns are contiguous; elsewhere the
//! `gemm` crate's kernels run.

use super::gemm_base::{transpose, with_scratch, SendFn, Strided};
use super::par::CpuPool;

/// Rows of C per register tile (three vectors of 16 lanes).
pub(super) const MR: usize = 48;
/// Columns of C per register tile.
pub(super) const NR: usize = 8;
/// Depth of one packed block: B's micro-panel (KC x 8, 16 KiB) stays in
/// L1, and C is read and written once per KC of depth.
const KC: usize = 512;
/// Rows of A packed at once: MC x KC values (960 KiB) stay in L2. (Against
/// 256 x 960, 384 x 480 and 512 x 240 this was the fastest or within noise
/// of it at 1024 and 2048, 1 and 2 threads: `sgemm_candidates`.)
const MC: usize = MR * 10;

/// Multiply-adds per thread from which a product goes to these kernels
/// rather than the `gemm` crate's. Measured side by side (ignored test
/// `sgemm_candidates`, chrt -f 1, load 15; GFLOP/s, these kernels / the
/// crate): 1 thread 256: 206 / 212, 512: 212 / 208, 1024: 208 / 193, 2048:
/// 195 / 191; 2 threads 256: 371 / 375, 512: 405 / 419, 1024: 407 / 402,
/// 2048: 409 / 399. Below 2^29 per thread the crate is as fast or faster.
pub(super) const MIN_WORK: usize = 1 << 29;
/// Multiply-adds per thread at least, when a product is split.
const MIN_SPLIT: usize = 1 << 21;

/// Whether this CPU runs these kernels (AVX-512F, and not forced onto the
/// portable path by a test).
pub(super) fn available() -> bool {
    crate::base::simd::avx512f() && crate::base::simd::avx2_fma()
}

/// Whether a product of these sizes on `threads` threads, C with columns of
/// stride `c_rs`, goes to these kernels.
pub(super) fn wanted(m: usize, k: usize, n: usize, c_rs: isize, threads: usize) -> bool {
    #[cfg(test)]
    if OFF.load(std::sync::atomic::Ordering::Relaxed) {
        return false;
    }
    c_rs == 1 && m >= 16 && n >= NR && k >= 16 && m * n * k >= MIN_WORK * threads.max(1) && available()
}

/// Set by the side-by-side timing to reach the `gemm` crate's kernels.
#[cfg(test)]
pub(super) static OFF: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `C (m x n, columns contiguous, of stride c_cs) = A (m x k) * B (k x n)`,
/// split over `pool`'s threads when given and large.
///
/// # Safety
/// `a`, `b` address `m x k` and `k x n` valid values; `c` addresses the
/// `m x n` block, which nothing else reads or writes during the call; the
/// CPU has AVX-512F ([`available`]).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn product(pool: Option<&CpuPool>, m: usize, k: usize, n: usize, a: Strided<f32>, b: Strided<f32>, c: *mut f32, c_cs: isize) {
    let threads = pool.map_or(1, |p| p.n_threads).min(split_limit(m, k, n));
    let Some(pool) = pool.filter(|_| threads > 1) else {
        return serial(m, k, n, a, b, c, c_cs);
    };
    let split = Split::new(m, n, threads);
    let go = SendFn(move |p: usize| {
        let (s, len) = split.part(p);
        if len == 0 {
            return;
        }
        // SAFETY: part p is columns (rows) s..s+len of C, of B's columns
        // (A's rows), inside the caller's operands; parts do not overlap.
        unsafe {
            if split.cols {
                let b = Strided { ptr: b.ptr.offset(s as isize * b.cs), ..b };
                serial(m, k, len, a, b, c.offset(s as isize * c_cs), c_cs)
            } else {
                let a = Strided { ptr: a.ptr.offset(s as isize * a.rs), ..a };
                serial(len, k, n, a, b, c.add(s), c_cs)
            }
        }
    });
    pool.install(|| {
        use rayon::prelude::*;
        let go = &go;
        (0..split.parts).into_par_iter().for_each(|p| go.each(p));
    });
}

/// Threads worth using: each must have 2^21 multiply-adds at least (about
/// 10 us on one core, against a few us of waking a thread).
fn split_limit(m: usize, k: usize, n: usize) -> usize {
    (m * n * k / MIN_SPLIT).max(1)
}

/// C split over threads: `parts` runs of whole columns (`cols`) or rows,
/// each a multiple of the register tile's side but the last.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Split {
    pub cols: bool,
    pub parts: usize,
    pub per: usize,
    pub len: usize,
}

impl Split {
    pub fn new(m: usize, n: usize, threads: usize) -> Split {
        let threads = threads.max(1);
        // Along columns unless too few of them: each part then packs all
        // of A (m x k once) and its own columns of B.
        let cols = n >= threads * NR * 4 || n >= m;
        let (len, g) = if cols { (n, NR) } else { (m, MR) };
        let per = (len.div_ceil(threads).div_ceil(g) * g).max(1);
        Split { cols, parts: len.div_ceil(per), per, len }
    }
    /// First column (row) and length of part `p`.
    pub fn part(&self, p: usize) -> (usize, usize) {
        let s = (p * self.per).min(self.len);
        (s, self.per.min(self.len - s))
    }
}

/// Depth and rows of the packed blocks ([`KC`], [`MC`]; the side-by-side
/// timing tries others).
fn blocks() -> (usize, usize) {
    #[cfg(test)]
    {
        let t = TUNE.load(std::sync::atomic::Ordering::Relaxed);
        if t != 0 {
            return (t >> 32, (t & 0xffff_ffff).div_ceil(MR) * MR);
        }
    }
    (KC, MC)
}

/// Depth << 32 | rows of the packed blocks, when not 0 (tests only).
#[cfg(test)]
pub(super) static TUNE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The product on the calling thread: for each depth block, B's columns
/// packed once; for each block of MC rows, A packed, then every tile.
///
/// # Safety
/// As [`product`].
unsafe fn serial(m: usize, k: usize, n: usize, a: Strided<f32>, b: Strided<f32>, c: *mut f32, c_cs: isize) {
    let (kc_blk, mc_blk) = blocks();
    let kc_max = kc_blk.min(k);
    let mc_max = mc_blk.min(m.div_ceil(MR) * MR);
    let np = n.div_ceil(NR) * NR;
    with_scratch(mc_max * kc_max + np * kc_max, |buf| {
        let (ap, bp) = buf.split_at_mut(mc_max * kc_max);
        let mut p0 = 0;
        while p0 < k {
            if crate::base::cancel::requested() {
                return;
            }
            let kc = kc_max.min(k - p0);
            // SAFETY: rows p0..p0+kc of B and columns p0..p0+kc of A are
            // valid (the caller's contract); the panels fit the scratch.
            unsafe {
                pack(n, NR, kc, b.ptr.offset(p0 as isize * b.rs), b.cs, b.rs, bp.as_mut_ptr());
                let mut i0 = 0;
                while i0 < m {
                    let mc = mc_max.min(m - i0);
                    pack(mc, MR, kc, a.ptr.offset(i0 as isize * a.rs + p0 as isize * a.cs), a.rs, a.cs, ap.as_mut_ptr());
                    tiles(mc, kc, n, ap.as_ptr(), bp.as_ptr(), c.add(i0), c_cs, p0 > 0);
                    i0 += mc;
                }
            }
            p0 += kc;
        }
    });
}

/// Every tile of one packed block of A (mc rows) times the packed columns
/// of B: C (+)= Ap * Bp. The last rows of C take a kernel of as many
/// vectors as they need, their last vector stored under a mask, and the
/// last columns are stored only as far as C goes.
///
/// # Safety
/// `ap` holds mc rows (rounded up to MR) by kc, `bp` kc by n (rounded up to
/// NR), packed; `c` addresses mc x n values, columns of stride `c_cs`; the
/// CPU has AVX-512F.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tiles(mc: usize, kc: usize, n: usize, ap: *const f32, bp: *const f32, c: *mut f32, c_cs: isize, add: bool) {
    let mut j0 = 0;
    while j0 < n {
        let nr = NR.min(n - j0);
        let bj = bp.add(j0 * kc);
        let mut i0 = 0;
        while i0 < mc {
            let mr = MR.min(mc - i0);
            let t = Tile { c: c.offset(i0 as isize + j0 as isize * c_cs), c_cs, mr, nr, add };
            let ai = ap.add(i0 * kc);
            match mr.div_ceil(16) {
                3 => kernel::<3>(kc, ai, bj, t),
                2 => kernel::<2>(kc, ai, bj, t),
                _ => kernel::<1>(kc, ai, bj, t),
            }
            i0 += MR;
        }
        j0 += NR;
    }
}

/// Where a kernel stores its tile: `mr` rows (at most 16 per vector of the
/// kernel) by `nr` columns of C at `c`, columns of stride `c_cs`, added to
/// what C holds when `add`.
#[derive(Clone, Copy)]
struct Tile {
    c: *mut f32,
    c_cs: isize,
    mr: usize,
    nr: usize,
    add: bool,
}

/// One tile of R vectors (16 R rows) x 8 columns: `C (+)= Ap (16 R of
/// each 48 x kc column, by columns) * Bp (kc x 8, by rows)`.
///
/// # Safety
/// `a` holds 48 * kc values, `b` kc * 8; `t` addresses its mr x nr values
/// (mr <= 16 R, nr <= 8); the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel<const R: usize>(kc: usize, a: *const f32, b: *const f32, t: Tile) {
    use std::arch::x86_64::*;
    // C's tile is brought into L1 while the sums run.
    for j in 0..t.nr {
        let cj = t.c.offset(j as isize * t.c_cs);
        for r in 0..R {
            _mm_prefetch::<_MM_HINT_T0>(cj.add(16 * r) as *const i8);
        }
    }
    let z = _mm512_setzero_ps();
    let mut acc = [[z; R]; NR];
    let (mut a, mut b) = (a, b);
    for _ in 0..kc {
        let mut av = [z; R];
        for (r, v) in av.iter_mut().enumerate() {
            *v = _mm512_loadu_ps(a.add(16 * r));
        }
        // (The constant loops unroll: 8 broadcasts, 8 R FMAs.)
        for (j, row) in acc.iter_mut().enumerate() {
            let bj = _mm512_set1_ps(*b.add(j));
            for (x, v) in row.iter_mut().zip(av) {
                *x = _mm512_fmadd_ps(v, bj, *x);
            }
        }
        a = a.add(MR);
        b = b.add(NR);
    }
    for (j, row) in acc.iter().enumerate().take(t.nr) {
        let cj = t.c.offset(j as isize * t.c_cs);
        for (r, v) in row.iter().enumerate() {
            let d = cj.add(16 * r);
            let left = t.mr - 16 * r;
            if left >= 16 {
                let v = if t.add { _mm512_add_ps(_mm512_loadu_ps(d), *v) } else { *v };
                _mm512_storeu_ps(d, v);
            } else {
                // The last rows: lanes past C are neither read nor written.
                let k: __mmask16 = (1u16 << left) - 1;
                let v = if t.add { _mm512_add_ps(_mm512_maskz_loadu_ps(k, d), *v) } else { *v };
                _mm512_mask_storeu_ps(d, k, v);
            }
        }
    }
}

/// Never called: [`available`] is false off x86-64.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel<const R: usize>(_: usize, _: *const f32, _: *const f32, _: Tile) {}

/// Packs `len` rows of A (`pack(mc, MR, kc, a.ptr, a.rs, a.cs, ..)`) or
/// columns of B (`pack(n, NR, kc, b.ptr, b.cs, b.rs, ..)`), depth 0..kc, as
/// panels of `w`: panel q holds `dst[q*w*kc + p*w + i] = src(q*w + i, p)`
/// (`src(i, p)` at `i*s_i + p*s_p`), lanes past len zero.
///
/// # Safety
/// `src` addresses len x kc values at those strides; `dst` holds len
/// (rounded up to w) * kc.
pub(super) unsafe fn pack(len: usize, w: usize, kc: usize, src: *const f32, s_i: isize, s_p: isize, dst: *mut f32) {
    let mut i0 = 0;
    while i0 < len {
        let wi = w.min(len - i0);
        let (s, d) = (src.offset(i0 as isize * s_i), dst.add(i0 * kc));
        if wi == w && s_p == 1 {
            // Depth contiguous (ggml's layout): 8 x 8 transposes.
            transpose(w, kc, s, s_i, d);
        } else {
            gather(wi, w, kc, s, s_i, s_p, d);
        }
        i0 += w;
    }
}

/// `dst[p*w + i] = src[i*s_i + p*s_p]` for i < len, zero for len <= i < w.
///
/// # Safety
/// `src` addresses len x kc values at those strides; `dst` holds w * kc.
unsafe fn gather(len: usize, w: usize, kc: usize, src: *const f32, s_i: isize, s_p: isize, dst: *mut f32) {
    for p in 0..kc {
        let (s, d) = (src.offset(p as isize * s_p), dst.add(p * w));
        if s_i == 1 {
            std::ptr::copy_nonoverlapping(s, d, len);
        } else {
            for i in 0..len {
                *d.add(i) = *s.offset(i as isize * s_i);
            }
        }
        for i in len..w {
            *d.add(i) = 0.0;
        }
    }
}
