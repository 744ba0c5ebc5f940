//! The double-precision product on the threads of the CPU backend's pool
//! (`ggml_backend_cpu_set_n_threads()`), for products large enough to be
//! worth splitting.
//!
//! The operand along the split is packed once, by all threads together, into
//! a buffer they share; the other operand is cut into many small blocks
//! that threads take as they become free, each packing only its own block.
//! So no value is packed twice, and a thread slowed down by another process
//! does not hold the others back: they take its share of the blocks.
//!
//! After the last depth step each finished block is handed to `post` while
//! it is still in the cache, so that a bias and an activation cost no extra
//! pass over C.

use super::dgemm::{self, F64View, KC, MR, NR};
use super::par::CpuPool;
use rayon::prelude::*;
use std::cell::RefCell;

/// Called on each finished column segment of C: `(first_row, column, values)`.
pub type Post<'a> = &'a (dyn Fn(usize, usize, &mut [f64]) + Sync);

#[derive(Clone, Copy)]
struct Ptr(*mut f64);
// SAFETY: shared between the threads of one product, which write disjoint
// parts of C and of the packing buffer (or only read the buffer).
unsafe impl Send for Ptr {}
unsafe impl Sync for Ptr {}

thread_local! {
    /// The shared packing buffer, kept by the calling thread between calls.
    static SHARED: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// Rounds `len / parts` up to a multiple of `unit`, within `lo..=hi` units.
fn block_len(len: usize, parts: usize, unit: usize, lo: usize, hi: usize) -> usize {
    len.div_ceil(parts).div_ceil(unit).clamp(lo, hi) * unit
}

/// Calls `post` on rows `i0..i0+mb` of columns `j0..j0+nb` of C.
///
/// # Safety
/// `c` addresses a column-major C with leading dimension `ldc` holding
/// these rows and columns, which no other thread touches during the call.
unsafe fn post_block(post: Post, c: *mut f64, ldc: usize, i0: usize, mb: usize, j0: usize, nb: usize) {
    for j in j0..j0 + nb {
        post(i0, j, std::slice::from_raw_parts_mut(c.add(i0 + j * ldc), mb));
    }
}

/// `C = op(A) (m x k) * op(B) (k x n)` (C column-major, leading dimension
/// `ldc`, overwritten), split over the threads of `pool`, then `post` on
/// every element of C (each once). A pool of one thread runs it on the
/// calling thread.
///
/// # Safety
/// As `dgemm::dgemm`; nothing else may touch C meanwhile.
#[allow(clippy::too_many_arguments)]
pub unsafe fn dgemm_par(pool: &CpuPool, m: usize, k: usize, n: usize, a: F64View, b: F64View, c: *mut f64, ldc: usize, post: Post) {
    let threads = pool.n_threads;
    if threads <= 1 {
        dgemm::dgemm(m, k, n, a, b, c, ldc);
        post_block(post, c, ldc, 0, m, 0, n);
        return;
    }
    let cp = Ptr(c);
    // SAFETY: the caller's guarantees hold on whichever thread runs this.
    pool.install(move || unsafe { split(m, k, n, a, b, cp, ldc, post, threads) })
}

/// [`dgemm_par`] inside the pool: rayon's parallel loops use its threads.
#[allow(clippy::too_many_arguments)]
unsafe fn split(m: usize, k: usize, n: usize, a: F64View, b: F64View, cp: Ptr, ldc: usize, post: Post, threads: usize) {
    let c = cp.0;
    #[cfg(target_arch = "x86_64")]
    {
        if crate::base::simd::avx2_fma() && k > 0 && m > 0 && n > 0 {
            return SHARED.with(|sh| {
                // A thread waiting inside one product can be handed another
                // (rayon runs queued work while it waits): that one packs
                // into a buffer of its own instead of the borrowed one.
                let mut own = Vec::new();
                let mut kept = sh.try_borrow_mut();
                let sh = match kept.as_deref_mut() {
                    Ok(v) => v,
                    Err(_) => &mut own,
                };
                if n >= m {
                    by_columns(m, k, n, a, b, c, ldc, post, threads, sh)
                } else {
                    by_rows(m, k, n, a, b, c, ldc, post, threads, sh)
                }
            });
        }
    }
    // Other CPUs: blocks of columns (or rows), each a whole product.
    let run = |i0: usize, mb: usize, j0: usize, nb: usize| {
        let c = cp;
        dgemm::dgemm(mb, k, nb, a.shift(i0, 0), b.shift(0, j0), c.0.add(i0 + j0 * ldc), ldc);
        post_block(post, c.0, ldc, i0, mb, j0, nb);
    };
    if n >= m {
        let w = block_len(n, 2 * threads, 1, 1, usize::MAX);
        (0..n.div_ceil(w)).into_par_iter().for_each(|bi| run(0, m, bi * w, w.min(n - bi * w)));
    } else {
        let w = block_len(m, 2 * threads, 1, 1, usize::MAX);
        (0..m.div_ceil(w)).into_par_iter().for_each(|bi| run(bi * w, w.min(m - bi * w), 0, n));
    }
}

/// n >= m: all of op(A) packed together, op(B) in blocks of columns.
///
/// # Safety
/// As [`super::dgemm::gemm`]: the views address op(A) (m x k) and op(B)
/// (k x n), `c` an m x n column-major C with leading dimension `ldc`, and
/// the CPU has AVX2 and FMA. Threads write disjoint blocks of columns.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn by_columns(m: usize, k: usize, n: usize, a: F64View, b: F64View, c: *mut f64, ldc: usize, post: Post, threads: usize, sh: &mut Vec<f64>) {
    let mpan = m.div_ceil(MR);
    dgemm::grow(sh, mpan * MR * KC.min(k));
    // Columns per block: about four blocks per thread, 4 to 16 panels.
    let nb = block_len(n, 4 * threads, NR, 4, 16);
    let cp = Ptr(c);
    for pc in (0..k).step_by(KC) {
        let kc = KC.min(k - pc);
        let (first, last) = (pc == 0, pc + kc == k);
        // Pack op(A) in row blocks of 8 panels, side by side.
        // BOUNDS: kc <= KC.min(k), and `grow` made sh at least mpan * MR * KC.min(k) long.
        sh[..mpan * MR * kc].par_chunks_mut(8 * MR * kc).enumerate().for_each(|(bi, dst)| {
            let ic = bi * 8 * MR;
            dgemm::pack_a((8 * MR).min(m - ic), kc, a, ic, pc, dst);
        });
        // Taken after the packing, which borrowed the buffer mutably.
        let shp = Ptr(sh.as_mut_ptr());
        (0..n.div_ceil(nb)).into_par_iter().for_each(|bi| {
            let (c, ap) = (cp, shp);
            let j0 = bi * nb;
            let w = nb.min(n - j0);
            dgemm::BUFS.with(|bufs| {
                let bp = &mut bufs.borrow_mut().1;
                dgemm::grow(bp, w.div_ceil(NR) * NR * kc);
                dgemm::pack_b(kc, w, b.shift(0, j0), pc, bp);
                // One A panel (in L1) against every panel of the block (in L2).
                for ip in 0..mpan {
                    let i0 = ip * MR;
                    let apan = ap.0.add(ip * MR * kc);
                    for jp in 0..w.div_ceil(NR) {
                        let jj = jp * NR;
                        let cij = c.0.add(i0 + (j0 + jj) * ldc);
                        dgemm::tile(kc, apan, bp.as_ptr().add(jp * NR * kc), cij, ldc, MR.min(m - i0), NR.min(w - jj), first);
                    }
                }
            });
            if last {
                post_block(post, c.0, ldc, 0, m, j0, w);
            }
        });
    }
}

/// m > n: all of op(B) packed together, op(A) in blocks of rows.
///
/// # Safety
/// As `by_columns`; threads write disjoint blocks of rows.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn by_rows(m: usize, k: usize, n: usize, a: F64View, b: F64View, c: *mut f64, ldc: usize, post: Post, threads: usize, sh: &mut Vec<f64>) {
    let npan = n.div_ceil(NR);
    dgemm::grow(sh, npan * NR * KC.min(k));
    // Rows per block: about four blocks per thread, 4 to 16 panels.
    let mb = block_len(m, 4 * threads, MR, 4, 16);
    let cp = Ptr(c);
    for pc in (0..k).step_by(KC) {
        let kc = KC.min(k - pc);
        let (first, last) = (pc == 0, pc + kc == k);
        // Pack op(B) in column blocks of 8 panels, side by side.
        // BOUNDS: kc <= KC.min(k), and `grow` made sh at least npan * NR * KC.min(k) long.
        sh[..npan * NR * kc].par_chunks_mut(8 * NR * kc).enumerate().for_each(|(bi, dst)| {
            let j0 = bi * 8 * NR;
            dgemm::pack_b(kc, (8 * NR).min(n - j0), b.shift(0, j0), pc, dst);
        });
        // Taken after the packing, which borrowed the buffer mutably.
        let shp = Ptr(sh.as_mut_ptr());
        (0..m.div_ceil(mb)).into_par_iter().for_each(|bi| {
            let (c, bsh) = (cp, shp);
            let i0 = bi * mb;
            let h = mb.min(m - i0);
            dgemm::BUFS.with(|bufs| {
                let ap = &mut bufs.borrow_mut().0;
                dgemm::grow(ap, h.div_ceil(MR) * MR * kc);
                dgemm::pack_a(h, kc, a, i0, pc, ap);
                // One B panel (in L1) against every panel of the block (in L2).
                for jp in 0..npan {
                    let j0 = jp * NR;
                    let bpan = bsh.0.add(jp * NR * kc);
                    for ip in 0..h.div_ceil(MR) {
                        let ii = ip * MR;
                        let cij = c.0.add(i0 + ii + j0 * ldc);
                        dgemm::tile(kc, ap.as_ptr().add(ip * MR * kc), bpan, cij, ldc, MR.min(h - ii), NR.min(n - j0), first);
                    }
                }
            });
            if last {
                post_block(post, c.0, ldc, i0, h, 0, n);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Products split by columns and by rows, with depths over several
    /// packed steps and every transpose, against plain sums; `post` sees
    /// every element exactly once, after its last depth step.
    #[test]
    fn matches_plain_sums_and_posts_each_element_once() {
        let check = |m: usize, k: usize, n: usize, path: &str, pool: &CpuPool| {
            let av: Vec<f64> = (0..m * k).map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0).collect();
            let bv: Vec<f64> = (0..k * n).map(|i| ((i * 53 % 89) as f64 - 44.0) / 5.0).collect();
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = if ta { F64View { ptr: av.as_ptr(), rs: k as isize, cs: 1 } } else { F64View { ptr: av.as_ptr(), rs: 1, cs: m as isize } };
                let b = if tb { F64View { ptr: bv.as_ptr(), rs: n as isize, cs: 1 } } else { F64View { ptr: bv.as_ptr(), rs: 1, cs: k as isize } };
                let ldc = m + 2;
                let mut c = vec![f64::NAN; ldc * n];
                let seen = AtomicUsize::new(0);
                let post = |i0: usize, j: usize, col: &mut [f64]| {
                    seen.fetch_add(col.len(), Ordering::Relaxed);
                    for (r, v) in col.iter_mut().enumerate() {
                        *v += (i0 + r) as f64 * 1000.0 + j as f64;
                    }
                };
                unsafe { dgemm_par(pool, m, k, n, a, b, c.as_mut_ptr(), ldc, &post) };
                assert_eq!(seen.load(Ordering::Relaxed), m * n, "{path} {m}x{k}x{n}: posted elements");
                for j in 0..n {
                    for i in 0..ldc {
                        let got = c[i + j * ldc];
                        if i >= m {
                            assert!(got.is_nan(), "{path}: wrote outside C at ({i},{j})");
                            continue;
                        }
                        let mut s = 0.0;
                        for p in 0..k {
                            s += unsafe { *a.ptr.offset(i as isize * a.rs + p as isize * a.cs) * *b.ptr.offset(p as isize * b.rs + j as isize * b.cs) };
                        }
                        let want = s + i as f64 * 1000.0 + j as f64;
                        assert!((got - want).abs() <= 1e-11 * (1.0 + want.abs()), "{path} {m}x{k}x{n} ta={ta} tb={tb} ({i},{j}): {got} vs {want}");
                    }
                }
            }
        };
        for threads in [1, 2, 3] {
            let pool = CpuPool::new(threads).unwrap();
            for (m, k, n) in [(37, 300, 203), (203, 300, 37), (64, 600, 64), (9, 5, 700), (700, 5, 9)] {
                check(m, k, n, "blocked", &pool);
                crate::base::simd::portable(|| check(m, k, n, "portable", &pool));
            }
        }
    }

    /// The product runs on the threads of the pool it is given: with one
    /// thread on the caller's, with more on the pool's own (not rayon's
    /// global pool).
    #[test]
    fn runs_on_the_pools_threads() {
        let (m, k, n) = (300, 200, 300);
        let av = vec![0.5; m * k];
        let bv = vec![0.25; k * n];
        let a = F64View { ptr: av.as_ptr(), rs: 1, cs: m as isize };
        let b = F64View { ptr: bv.as_ptr(), rs: 1, cs: k as isize };
        for threads in [1, 2] {
            let pool = CpuPool::new(threads).unwrap();
            let names = std::sync::Mutex::new(std::collections::HashSet::new());
            let post = |_: usize, _: usize, _: &mut [f64]| {
                let t = std::thread::current();
                names.lock().unwrap().insert(t.name().unwrap_or("").to_string());
            };
            let mut c = vec![0.0; m * n];
            unsafe { dgemm_par(&pool, m, k, n, a, b, c.as_mut_ptr(), m, &post) };
            assert!(c.iter().all(|&v| v == 0.125 * k as f64));
            let names = names.into_inner().unwrap();
            let caller = std::thread::current().name().unwrap_or("").to_string();
            if threads == 1 {
                assert_eq!(names.into_iter().collect::<Vec<_>>(), vec![caller]);
            } else {
                assert!(!names.is_empty() && names.iter().all(|t| t.starts_with("ggmlr-cpu-")), "{names:?}");
            }
        }
    }
}
