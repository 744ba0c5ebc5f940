//! The CPU backend's double-precision matrix product (f64 tensors):
//! `C = op(A) op(B)` with C column-major and A, B any strided views.
//!
//! On x86-64 CPUs with AVX2 and FMA (detected at run time) it runs a blocked
//! product: B is packed in `KC x NR` panels, A in `MR x KC` panels, and an
//! 8 x 6 register kernel (12 accumulators of 4 doubles) does the arithmetic.
//! The packing buffers are kept per thread and reused, so a product
//! allocates nothing but its result. Other CPUs (and `simd::portable` in
//! tests) use matrixmultiply.

use std::cell::RefCell;

/// Rows of the register tile (two vectors of 4 doubles).
pub(super) const MR: usize = 8;
/// Columns of the register tile.
pub(super) const NR: usize = 6;
/// Depth of a packed panel: an `MR x KC` panel of A (16 KiB) and an
/// `KC x NR` panel of B (12 KiB) share the L1 cache.
pub(super) const KC: usize = 256;
/// Rows of A packed at a time (a 256 KiB block: half of a 512 KiB L2).
const MC: usize = 128;

/// A strided read-only matrix: element (i, j) is at `ptr + i*rs + j*cs`.
#[derive(Clone, Copy)]
pub struct F64View {
    pub ptr: *const f64,
    pub rs: isize,
    pub cs: isize,
}
// SAFETY: a view only reads; the matrices it addresses outlive every
// product that uses it, and nothing writes them meanwhile.
unsafe impl Send for F64View {}
unsafe impl Sync for F64View {}

impl F64View {
    /// The view starting at element `(i0, j0)`.
    ///
    /// # Safety
    /// The element must lie inside the viewed matrix.
    pub unsafe fn shift(self, i0: usize, j0: usize) -> F64View {
        F64View { ptr: self.ptr.offset(i0 as isize * self.rs + j0 as isize * self.cs), ..self }
    }
}

thread_local! {
    pub(super) static BUFS: RefCell<(Vec<f64>, Vec<f64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `C[0..m, 0..n] = op(A) (m x k) * op(B) (k x n)`, C column-major with
/// leading dimension `ldc` (C is overwritten).
///
/// # Safety
/// The views must address `m x k` and `k x n` valid elements and `c` an
/// `m x n` block with leading dimension `ldc` that nothing else touches.
pub unsafe fn dgemm(m: usize, k: usize, n: usize, a: F64View, b: F64View, c: *mut f64, ldc: usize) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for j in 0..n {
            std::ptr::write_bytes(c.add(j * ldc), 0, m);
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if crate::base::simd::avx2_fma() {
            return BUFS.with(|bufs| {
                let mut bufs = bufs.borrow_mut();
                let (ap, bp) = &mut *bufs;
                blocked(m, k, n, a, b, c, ldc, ap, bp)
            });
        }
    }
    matrixmultiply::dgemm(m, k, n, 1.0, a.ptr, a.rs, a.cs, b.ptr, b.rs, b.cs, 0.0, c, 1, ldc as isize);
}

/// The blocked product: panels of op(A) and op(B) packed into `ap`, `bp`,
/// then tile by tile.
///
/// # Safety
/// The views address op(A) (m x k) and op(B) (k x n); `c` an m x n
/// column-major C with leading dimension `ldc` that nothing else writes
/// meanwhile; the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn blocked(m: usize, k: usize, n: usize, a: F64View, b: F64View, c: *mut f64, ldc: usize, ap: &mut Vec<f64>, bp: &mut Vec<f64>) {
    let npanels = n.div_ceil(NR);
    grow(bp, npanels * NR * KC.min(k));
    grow(ap, MC * KC.min(k));
    for pc in (0..k).step_by(KC) {
        let kc = KC.min(k - pc);
        pack_b(kc, n, b, pc, bp);
        let first = pc == 0;
        for ic in (0..m).step_by(MC) {
            let mc = MC.min(m - ic);
            pack_a(mc, kc, a, ic, pc, ap);
            for jp in 0..npanels {
                let j0 = jp * NR;
                let bpan = bp.as_ptr().add(jp * NR * kc);
                for ip in 0..mc.div_ceil(MR) {
                    let i0 = ip * MR;
                    let apan = ap.as_ptr().add(ip * MR * kc);
                    let cij = c.add(ic + i0 + j0 * ldc);
                    tile(kc, apan, bpan, cij, ldc, MR.min(mc - i0), NR.min(n - j0), first);
                }
            }
        }
    }
}

/// Makes a packing buffer at least `len` long. Buffers only grow:
/// shrinking and regrowing would refill them.
pub(super) fn grow(buf: &mut Vec<f64>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
}

/// The `mr x nr` tile of C at `cij` (+)= an A panel times a B panel
/// (stores when `first`, adds otherwise); a partial tile is computed whole
/// aside and only its part inside C is written.
///
/// # Safety
/// `apan` and `bpan` hold full packed panels of depth `kc` (`MR x kc`,
/// `kc x NR`); `cij` addresses an `mr x nr` block (mr <= MR, nr <= NR) of a
/// column-major C with leading dimension `ldc`; the CPU has AVX2 and FMA.
// BOUNDS-FN: i < mr <= MR and j < nr <= NR, so i + j * MR < MR * NR, the
// length of `t`.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) unsafe fn tile(kc: usize, apan: *const f64, bpan: *const f64, cij: *mut f64, ldc: usize, mr: usize, nr: usize, first: bool) {
    if mr == MR && nr == NR {
        return kernel(kc, apan, bpan, cij, ldc, first);
    }
    let mut t = [0.0f64; MR * NR];
    kernel(kc, apan, bpan, t.as_mut_ptr(), MR, true);
    for j in 0..nr {
        for i in 0..mr {
            let d = cij.add(i + j * ldc);
            let v = t[i + j * MR];
            *d = if first { v } else { *d + v };
        }
    }
}

/// How many rows (columns) ahead the packing loops prefetch: the source
/// mostly comes from L3, and without it the copies wait on every line.
const AHEAD: isize = 3;

/// Asks for the `len` doubles at `p` to be brought into the cache (a hint:
/// addresses past the end of the source are harmless).
#[inline(always)]
fn prefetch_span(p: *const f64, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..len).step_by(8) {
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(off) as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Packs rows `pc..pc+kc` of op(B) (all `n` columns) into `KC x NR`
/// panels, each stored row by row, the last one padded with zeros.
///
/// # Safety
/// `b` addresses op(B) with at least `pc + kc` rows and `n` columns;
/// `bp` has room for the panels (indexing of `bp` is checked).
// BOUNDS-FN: `bp` holds n.div_ceil(NR) panels of NR * kc values (the
// caller's room: `blocked` and `dgemm_par` grow it so); jp <
// n.div_ceil(NR), so panel jp, jp * NR * kc..(jp + 1) * NR * kc, lies
// inside, and p < kc, jj < NR give p * NR + jj < NR * kc, the panel's
// length.
pub(super) unsafe fn pack_b(kc: usize, n: usize, b: F64View, pc: usize, bp: &mut [f64]) {
    let full = n / NR;
    if b.cs == 1 {
        // Rows are contiguous: read each row once, front to back (the
        // hardware prefetcher follows), six values into each panel.
        for p in 0..kc {
            let row = b.ptr.offset((pc + p) as isize * b.rs);
            prefetch_span(row.wrapping_offset(AHEAD * b.rs), n);
            for jp in 0..full {
                let dst = bp.as_mut_ptr().add(jp * NR * kc + p * NR);
                std::ptr::copy_nonoverlapping(row.add(jp * NR), dst, NR);
            }
        }
    } else if b.rs == 1 {
        // Columns are contiguous: six streams read side by side.
        for jp in 0..full {
            let j0 = jp * NR;
            let dst = &mut bp[jp * NR * kc..(jp + 1) * NR * kc];
            let col = |jj: usize| b.ptr.offset((j0 + jj) as isize * b.cs + pc as isize);
            let cols = [col(0), col(1), col(2), col(3), col(4), col(5)];
            for (p, d) in dst.chunks_exact_mut(NR).enumerate() {
                for (v, c) in d.iter_mut().zip(&cols) {
                    *v = *c.add(p);
                }
            }
        }
    }
    let first = if b.cs == 1 || b.rs == 1 { full } else { 0 };
    for jp in first..n.div_ceil(NR) {
        let j0 = jp * NR;
        let nr = NR.min(n - j0);
        let dst = &mut bp[jp * NR * kc..(jp + 1) * NR * kc];
        for jj in 0..NR {
            if jj >= nr {
                for p in 0..kc {
                    dst[p * NR + jj] = 0.0;
                }
                continue;
            }
            let col = b.ptr.offset((j0 + jj) as isize * b.cs + pc as isize * b.rs);
            for p in 0..kc {
                dst[p * NR + jj] = *col.offset(p as isize * b.rs);
            }
        }
    }
}

/// Packs rows `ic..ic+mc`, columns `pc..pc+kc` of op(A) into `MR x KC`
/// panels, each stored column by column, the last one padded with zeros.
///
/// # Safety
/// `a` addresses op(A) with at least `ic + mc` rows and `pc + kc` columns;
/// `ap` has room for the panels (indexing of `ap` is checked).
// BOUNDS-FN: `ap` holds mc.div_ceil(MR) panels of MR * kc values (the
// caller's room); ip < mc.div_ceil(MR), so panel ip lies inside, and
// p < kc, ii < MR give p * MR + ii < MR * kc, the panel's length.
pub(super) unsafe fn pack_a(mc: usize, kc: usize, a: F64View, ic: usize, pc: usize, ap: &mut [f64]) {
    let full = if a.rs == 1 { mc / MR } else { 0 };
    // Columns are contiguous: read each column of the block once, front to
    // back (the hardware prefetcher follows), eight values into each panel.
    for p in (0..kc).filter(|_| full > 0) {
        let col = a.ptr.offset(ic as isize + (pc + p) as isize * a.cs);
        prefetch_span(col.wrapping_offset(AHEAD * a.cs), full * MR);
        for ip in 0..full {
            let dst = ap.as_mut_ptr().add(ip * MR * kc + p * MR);
            std::ptr::copy_nonoverlapping(col.add(ip * MR), dst, MR);
        }
    }
    for ip in full..mc.div_ceil(MR) {
        let i0 = ip * MR;
        let mr = MR.min(mc - i0);
        let dst = &mut ap[ip * MR * kc..(ip + 1) * MR * kc];
        let base = a.ptr.offset((ic + i0) as isize * a.rs + pc as isize * a.cs);
        for ii in 0..MR {
            if ii >= mr {
                for p in 0..kc {
                    dst[p * MR + ii] = 0.0;
                }
                continue;
            }
            let row = base.offset(ii as isize * a.rs);
            for p in 0..kc {
                dst[p * MR + ii] = *row.offset(p as isize * a.cs);
            }
        }
    }
}

/// The 8 x 6 tile `C (+)= Apanel * Bpanel` over depth `kc`: stores when
/// `first`, adds otherwise.
///
/// # Safety
/// The CPU has AVX2 and FMA; `a` holds `MR * kc` and `b` `kc * NR` values;
/// `c` addresses a full 8 x 6 block of a column-major C with leading
/// dimension `ldc`.
// BOUNDS-FN: each `acc` is a [__m256d; 2] indexed by the literals 0 and 1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel(kc: usize, a: *const f64, b: *const f64, c: *mut f64, ldc: usize, first: bool) {
    use std::arch::x86_64::*;
    // The tile of C is fetched while the products run.
    for j in 0..NR {
        _mm_prefetch::<_MM_HINT_T0>(c.add(j * ldc) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(c.add(j * ldc + MR - 1) as *const i8);
    }
    let mut acc = [[_mm256_setzero_pd(); 2]; NR];
    for p in 0..kc {
        // A runs 8 steps (512 bytes) ahead in its panel (past its end on
        // the last steps, which a prefetch may).
        _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(p * MR + 8 * MR) as *const i8);
        let a0 = _mm256_loadu_pd(a.add(p * MR));
        let a1 = _mm256_loadu_pd(a.add(p * MR + 4));
        let bb = b.add(p * NR);
        for (j, acc) in acc.iter_mut().enumerate() {
            let bj = _mm256_broadcast_sd(&*bb.add(j));
            acc[0] = _mm256_fmadd_pd(a0, bj, acc[0]);
            acc[1] = _mm256_fmadd_pd(a1, bj, acc[1]);
        }
    }
    for (j, acc) in acc.iter().enumerate() {
        let cj = c.add(j * ldc);
        if first {
            _mm256_storeu_pd(cj, acc[0]);
            _mm256_storeu_pd(cj.add(4), acc[1]);
        } else {
            _mm256_storeu_pd(cj, _mm256_add_pd(_mm256_loadu_pd(cj), acc[0]));
            _mm256_storeu_pd(cj.add(4), _mm256_add_pd(_mm256_loadu_pd(cj.add(4)), acc[1]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: F64View, b: F64View) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for j in 0..n {
            for i in 0..m {
                let mut s = 0.0;
                for p in 0..k {
                    unsafe {
                        s += *a.ptr.offset(i as isize * a.rs + p as isize * a.cs)
                            * *b.ptr.offset(p as isize * b.rs + j as isize * b.cs);
                    }
                }
                c[i + j * m] = s;
            }
        }
        c
    }

    /// op(A) (m x k) and op(B) (k x n) over column-major storage, each
    /// transposed in storage when its flag is set.
    fn views(av: &[f64], bv: &[f64], m: usize, k: usize, n: usize, ta: bool, tb: bool) -> (F64View, F64View) {
        let a = if ta { F64View { ptr: av.as_ptr(), rs: k as isize, cs: 1 } } else { F64View { ptr: av.as_ptr(), rs: 1, cs: m as isize } };
        let b = if tb { F64View { ptr: bv.as_ptr(), rs: n as isize, cs: 1 } } else { F64View { ptr: bv.as_ptr(), rs: 1, cs: k as isize } };
        (a, b)
    }

    fn check(m: usize, k: usize, n: usize, path: &str) {
        let av: Vec<f64> = (0..m * k).map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0).collect();
        let bv: Vec<f64> = (0..k * n).map(|i| ((i * 53 % 89) as f64 - 44.0) / 5.0).collect();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a, b) = views(&av, &bv, m, k, n, ta, tb);
            let want = naive(m, k, n, a, b);
            // C with a larger leading dimension, to check nothing outside is written.
            let ldc = m + 3;
            let mut c = vec![f64::NAN; ldc * n];
            unsafe { dgemm(m, k, n, a, b, c.as_mut_ptr(), ldc) };
            for j in 0..n {
                for i in 0..ldc {
                    let got = c[i + j * ldc];
                    if i < m {
                        let w = want[i + j * m];
                        assert!((got - w).abs() <= 1e-12 * (1.0 + w.abs()), "{path}: {m}x{k}x{n} ta={ta} tb={tb} ({i},{j}): {got} vs {w}");
                    } else {
                        assert!(got.is_nan(), "{path}: wrote outside C at ({i},{j})");
                    }
                }
            }
        }
    }

    #[test]
    fn matches_naive_sums_for_edges_depths_and_transposes() {
        // Sizes around the tile (8 x 6) and block (MC = 128 rows, KC = 256) edges.
        let sizes = [(1, 1, 1), (7, 3, 5), (8, 256, 6), (9, 257, 7), (97, 300, 13), (130, 513, 61), (200, 40, 1)];
        for &(m, k, n) in &sizes {
            check(m, k, n, "blocked");
            crate::base::simd::portable(|| check(m, k, n, "portable"));
        }
    }

    /// Single-thread speed against matrixmultiply, alternating runs (sizes
    /// GGMLR_DGEMM_SIZE="m,k,n", default 256,512,256):
    /// `cargo test --release dgemm_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn dgemm_speed() {
        let d = std::env::var("GGMLR_DGEMM_SIZE").unwrap_or_else(|_| "256,512,256".into()).split(',').map(|v| v.trim().parse::<usize>().expect("sizes")).collect::<Vec<_>>();
        let (m, k, n) = (d[0], d[1], d[2]);
        let av: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let bv: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.11).cos()).collect();
        let mut c = vec![0.0; m * n];
        let flop = 2.0 * (m * k * n) as f64;
        for (ta, tb) in [(false, false), (false, true), (true, false)] {
            let (a, b) = views(&av, &bv, m, k, n, ta, tb);
            let (mut ours, mut theirs) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..300 {
                let t = std::time::Instant::now();
                unsafe { dgemm(m, k, n, a, b, c.as_mut_ptr(), m) };
                ours = ours.min(t.elapsed().as_secs_f64());
                let t = std::time::Instant::now();
                unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a.ptr, a.rs, a.cs, b.ptr, b.rs, b.cs, 0.0, c.as_mut_ptr(), 1, m as isize) };
                theirs = theirs.min(t.elapsed().as_secs_f64());
            }
            println!("ta={ta} tb={tb}: ours {:.1} GFLOP/s, matrixmultiply {:.1} GFLOP/s", flop / ours / 1e9, flop / theirs / 1e9);
        }
    }
}
