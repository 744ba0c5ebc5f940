//! The products through `gemm_rt` against a plain triple loop (all stride
//! layouts, threads, depths crossing a slab), and the side-by-side timing of
//! the candidate kernels (ignored: run with `cargo test --release -p
//! ggmlr-core gemm_candidates -- --ignored --nocapture`).

use super::dgemm::{dgemm, F64View};
use super::dgemm_par::dgemm_par;
use super::gemm_rt::{product, Strided};
use super::par::CpuPool;

fn naive(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    // a row-major m x k, b row-major k x n, result row-major.
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

fn vals(len: usize, seed: usize) -> Vec<f64> {
    (0..len).map(|i| ((i * 7 + seed * 13) % 17) as f64 / 8.0 - 1.0).collect()
}

#[test]
fn gemm_rt_matches_the_triple_loop_in_every_layout() {
    let pool = CpuPool::new(2).unwrap();
    for &(m, k, n) in &[(1, 1, 1), (3, 0, 2), (7, 5, 3), (33, 70, 65), (130, 300, 90), (200, 300, 150)] {
        let (a, b) = (vals(m * k, 1), vals(k * n, 2));
        let want = naive(m, k, n, &a, &b);
        // A row-major or transposed storage, B the same; C row- or column-major.
        let at: Vec<f64> = (0..m * k).map(|x| a[(x % m) * k + x / m]).collect();
        let bt: Vec<f64> = (0..k * n).map(|x| b[(x % k) * n + x / k]).collect();
        for (ad, ars, acs) in [(&a, k, 1), (&at, 1, m)] {
            for (bd, brs, bcs) in [(&b, n, 1), (&bt, 1, k)] {
                for (crs, ccs) in [(n, 1), (1, m)] {
                    for p in [&CpuPool::single(), &pool] {
                        let mut c64 = vec![f64::NAN; m * n];
                        let av = Strided { ptr: ad.as_ptr(), rs: ars as isize, cs: acs as isize };
                        let bv = Strided { ptr: bd.as_ptr(), rs: brs as isize, cs: bcs as isize };
                        // SAFETY: the views address m x k and k x n values of their vectors; C is m x n.
                        unsafe { product(Some(p), m, k, n, av, bv, c64.as_mut_ptr(), crs as isize, ccs as isize) };
                        let a32: Vec<f32> = ad.iter().map(|&x| x as f32).collect();
                        let b32: Vec<f32> = bd.iter().map(|&x| x as f32).collect();
                        let mut c32 = vec![f32::NAN; m * n];
                        let av = Strided { ptr: a32.as_ptr(), rs: ars as isize, cs: acs as isize };
                        let bv = Strided { ptr: b32.as_ptr(), rs: brs as isize, cs: bcs as isize };
                        // SAFETY: as above.
                        unsafe { product(Some(p), m, k, n, av, bv, c32.as_mut_ptr(), crs as isize, ccs as isize) };
                        for i in 0..m {
                            for j in 0..n {
                                let (w, at) = (want[i * n + j], i * crs + j * ccs);
                                assert!((c64[at] - w).abs() <= 1e-12 * (1.0 + w.abs()), "f64 {m}x{k}x{n} ({i},{j})");
                                assert!((c32[at] as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()), "f32 {m}x{k}x{n} ({i},{j})");
                            }
                        }
                    }
                }
            }
        }
    }
}

fn best(mut f: impl FnMut()) -> f64 {
    f();
    let (start, mut b, mut k) = (std::time::Instant::now(), f64::MAX, 0);
    while k < 3 || start.elapsed().as_secs_f64() < 0.5 {
        let t = std::time::Instant::now();
        f();
        b = b.min(t.elapsed().as_secs_f64());
        k += 1;
    }
    b
}

#[test]
#[ignore]
fn gemm_candidates() {
    let sizes: Vec<usize> = std::env::var("GEMM_SIZES")
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![256, 512, 1024, 2048]);
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    println!("GFLOP/s, best of repeated runs; columns: gemm crate | matrixmultiply (rows split over the pool) | package dgemm");
    for threads in [1usize, 2] {
        let pool = CpuPool::new(threads).unwrap();
        for &n in &sizes {
            let gf = |t: f64| 2.0 * (n as f64).powi(3) / t / 1e9;
            let (a, b) = (vals(n * n, 1), vals(n * n, 2));
            let (a32, b32): (Vec<f32>, Vec<f32>) = (a.iter().map(|&x| x as f32).collect(), b.iter().map(|&x| x as f32).collect());
            let mut c = vec![0.0f64; n * n];
            let mut c32 = vec![0.0f32; n * n];
            let s = |p: *const f64| Strided { ptr: p, rs: n as isize, cs: 1 };
            let s32 = |p: *const f32| Strided { ptr: p, rs: n as isize, cs: 1 };
            // SAFETY (all timed calls): n x n operands and results, exclusively borrowed.
            let g32 = best(|| unsafe { product(Some(&pool), n, n, n, s32(a32.as_ptr()), s32(b32.as_ptr()), c32.as_mut_ptr(), n as isize, 1) });
            // ggml's layout: C (n x m) = B (n x k) * A^T, A^T read with rs = 1.
            let t32 = |p: *const f32| Strided { ptr: p, rs: 1, cs: n as isize };
            let g32t = best(|| unsafe { product(Some(&pool), n, n, n, s32(a32.as_ptr()), t32(b32.as_ptr()), c32.as_mut_ptr(), n as isize, 1) });
            let g64 = best(|| unsafe { product(Some(&pool), n, n, n, s(a.as_ptr()), s(b.as_ptr()), c.as_mut_ptr(), n as isize, 1) });
            let per = n.div_ceil(threads);
            let m32 = best(|| {
                use rayon::prelude::*;
                let (ap, bp) = (a32.as_ptr() as usize, b32.as_ptr() as usize);
                pool.install(|| {
                    c32.par_chunks_mut(per * n).enumerate().for_each(|(i, ch)| unsafe {
                        let rows = ch.len() / n;
                        matrixmultiply::sgemm(rows, n, n, 1.0, (ap as *const f32).add(i * per * n), n as isize, 1, bp as *const f32, n as isize, 1, 0.0, ch.as_mut_ptr(), n as isize, 1)
                    })
                })
            });
            let m64 = best(|| {
                use rayon::prelude::*;
                let (ap, bp) = (a.as_ptr() as usize, b.as_ptr() as usize);
                pool.install(|| {
                    c.par_chunks_mut(per * n).enumerate().for_each(|(i, ch)| unsafe {
                        let rows = ch.len() / n;
                        matrixmultiply::dgemm(rows, n, n, 1.0, (ap as *const f64).add(i * per * n), n as isize, 1, bp as *const f64, n as isize, 1, 0.0, ch.as_mut_ptr(), n as isize, 1)
                    })
                })
            });
            let v = |p: *const f64| F64View { ptr: p, rs: 1, cs: n as isize };
            let post = |_: usize, _: usize, _: &mut [f64]| {};
            let d64 = best(|| unsafe {
                if threads > 1 {
                    dgemm_par(&pool, n, n, n, v(a.as_ptr()), v(b.as_ptr()), c.as_mut_ptr(), n, &post)
                } else {
                    dgemm(n, n, n, v(a.as_ptr()), v(b.as_ptr()), c.as_mut_ptr(), n)
                }
            });
            println!(
                "n={n:5} threads={threads}  f32: gemm {:7.1} (B^T {:7.1}) | mm {:7.1}    f64: gemm {:6.1} | mm {:6.1} | dgemm {:6.1}",
                gf(g32), gf(g32t), gf(m32), gf(g64), gf(m64), gf(d64)
            );
        }
    }
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}

#[test]
fn products_from_several_threads_share_one_pool() {
    // Callers outside the pool queue their products on it; a worker that
    // waits inside one product may be handed another, which must not touch
    // the first one's packing buffer.
    let pool = std::sync::Arc::new(CpuPool::new(2).unwrap());
    let (m, k, n) = (150, 260, 170);
    let (a, b) = (std::sync::Arc::new(vals(m * k, 3)), std::sync::Arc::new(vals(k * n, 4)));
    let want = std::sync::Arc::new(naive(m, k, n, &a, &b));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (pool, a, b, want) = (pool.clone(), a.clone(), b.clone(), want.clone());
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let mut c = vec![f64::NAN; m * n];
                    let post = |_: usize, _: usize, _: &mut [f64]| {};
                    // op(A) row-major m x k, op(B) row-major k x n; C column-major.
                    let av = F64View { ptr: a.as_ptr(), rs: k as isize, cs: 1 };
                    let bv = F64View { ptr: b.as_ptr(), rs: n as isize, cs: 1 };
                    // SAFETY: the views address m x k and k x n values of their vectors; C is m x n, this thread's own.
                    unsafe { dgemm_par(&pool, m, k, n, av, bv, c.as_mut_ptr(), m, &post) };
                    for i in 0..m {
                        for j in 0..n {
                            let w = want[i * n + j];
                            assert!((c[i + j * m] - w).abs() <= 1e-12 * (1.0 + w.abs()), "({i},{j})");
                        }
                    }
                }
            })
        })
        .collect();
    for c in callers {
        assert!(c.join().is_ok(), "a product on the shared pool failed");
    }
}

/// Products large enough to be split over threads, of awkward sizes (blocks
/// of C with partial tiles, split by rows and by columns, depths crossing
/// the copied slabs of A), equal the product on one thread and a plain sum.
#[test]
fn split_products_equal_the_one_thread_product() {
    let one = CpuPool::single();
    for threads in [2, 3] {
        let pool = CpuPool::new(threads).unwrap();
        for &(m, k, n) in &[(130, 600, 70), (67, 1100, 61), (600, 40, 200), (5, 900, 1000), (1000, 900, 5), (193, 521, 257)] {
            let (a, b) = (vals(m * k, 5), vals(k * n, 6));
            let want = naive(m, k, n, &a, &b);
            let (a32, b32): (Vec<f32>, Vec<f32>) = (a.iter().map(|&x| x as f32).collect(), b.iter().map(|&x| x as f32).collect());
            // A by rows (copied by columns first) and B by rows, or B stored
            // transposed (ggml's layout); C row-major (computed as C^T) and
            // column-major.
            let bt: Vec<f32> = (0..k * n).map(|x| b32[(x % k) * n + x / k]).collect();
            for (bd, brs, bcs) in [(&b32, n, 1), (&bt, 1, k)] {
                for (crs, ccs) in [(n, 1), (1, m)] {
                    let run = |p: &CpuPool| {
                        let mut c = vec![f32::NAN; m * n];
                        let av = Strided { ptr: a32.as_ptr(), rs: k as isize, cs: 1 };
                        let bv = Strided { ptr: bd.as_ptr(), rs: brs as isize, cs: bcs as isize };
                        // SAFETY: the views address m x k and k x n values of their vectors; C is m x n.
                        unsafe { product(Some(p), m, k, n, av, bv, c.as_mut_ptr(), crs as isize, ccs as isize) };
                        c
                    };
                    let (serial, split) = (run(&one), run(&pool));
                    for i in 0..m {
                        for j in 0..n {
                            let (w, at) = (want[i * n + j], i * crs + j * ccs);
                            let tol = 1e-4 * (1.0 + w.abs());
                            assert!((split[at] - serial[at]).abs() as f64 <= tol, "{threads} threads {m}x{k}x{n} ({i},{j}): {} vs {}", split[at], serial[at]);
                            assert!((split[at] as f64 - w).abs() <= tol, "{threads} threads {m}x{k}x{n} ({i},{j}): {} vs {w}", split[at]);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn plans_cover_c_in_whole_granules() {
    use super::gemm_rt::Plan;
    for &(m, n, t, copied) in &[(1000, 5, 2, false), (5, 1000, 2, false), (256, 512, 2, true), (256, 512, 2, false), (65, 70, 3, false), (1, 1, 2, false), (130, 129, 4, true)] {
        let p = Plan::new(m, n, t, copied);
        let len = if p.rows { m } else { n };
        assert_eq!(p.len, len);
        assert!(p.parts >= 1 && p.parts <= t, "{p:?}");
        let mut next = 0;
        for b in 0..p.parts {
            let (s, l) = p.block(b);
            assert_eq!(s, next, "{p:?}");
            assert!(l > 0 && (b + 1 == p.parts || l % 64 == 0), "{p:?} block {b}");
            next += l;
        }
        assert_eq!(next, len, "{p:?}");
    }
    // A copied by columns splits by rows when there are enough of them.
    assert!(Plan::new(256, 512, 2, true).rows && !Plan::new(256, 512, 2, false).rows);
}

#[test]
fn transposed_copies_match_in_both_paths() {
    for &(m, k, rs) in &[(8, 8, 8), (13, 29, 31), (64, 17, 17), (3, 100, 100), (40, 40, 45)] {
        let src: Vec<f32> = (0..m * rs).map(|x| x as f32).collect();
        let check = |path: &str| {
            let mut dst = vec![f32::NAN; m * k];
            // SAFETY: src holds m rows of stride rs >= k; dst holds m * k.
            unsafe { super::gemm_rt::transpose(m, k, src.as_ptr(), rs as isize, dst.as_mut_ptr()) };
            for i in 0..m {
                for j in 0..k {
                    assert_eq!(dst[i + j * m], src[i * rs + j], "{path} {m}x{k} ({i},{j})");
                }
            }
        };
        check("simd");
        crate::base::simd::portable(|| check("portable"));
    }
}

/// The cost of one parallel region of a 2-thread pool, called from one
/// of the pool's own threads (as R's main thread does), after the caller
/// worked alone for a while (serial work between kernels), with the pool
/// left to idle and kept awake ([`crate::base::warm::rearm`]). Each region is two
/// halves of 10 us: the time over 10 us is what the second thread's
/// arrival cost.
#[test]
#[ignore]
fn pool_region_cost() {
    // `cargo test --release -p ggmlr-core pool_region_cost -- --ignored --nocapture`
    use rayon::prelude::*;
    use std::time::{Duration, Instant};
    let busy = |us: u64| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(us) {
            std::hint::spin_loop();
        }
    };
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    // A plain rayon pool: `CpuPool::install` would keep it awake.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| {
        for warm in [false, true] {
            for serial_us in [0u64, 20, 100, 1000, 10000] {
                let mut v = Vec::new();
                for _ in 0..200 {
                    busy(serial_us);
                    if warm {
                        crate::base::warm::rearm();
                    }
                    let t = Instant::now();
                    (0..2).into_par_iter().with_max_len(1).for_each(|_| busy(10));
                    v.push(t.elapsed().as_secs_f64() * 1e6 - 10.0);
                }
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                println!(
                    "warm {warm:5}, serial {serial_us:6} us before: region over 10 us: min {:6.2}, median {:6.2}, p90 {:7.2}",
                    v[0], v[100], v[180]
                );
            }
        }
    });
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}

/// CPU time (all threads of the process) and wall time of the f32 product
/// in ggml's layout on one thread and split over two: equal CPU time means
/// the split adds no work (no operand packed twice, no waiting spun away),
/// so on two free cores the wall time halves; on a loaded machine the wall
/// time shows how much of a core each thread got.
/// `cargo test --release -p ggmlr-core split_cpu_time -- --ignored --nocapture`
#[test]
#[ignore]
fn split_cpu_time() {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
    }
    let cpu = || {
        let mut t = Timespec { sec: 0, nsec: 0 };
        // SAFETY: clock_gettime writes the struct it is given; 2 is CLOCK_PROCESS_CPUTIME_ID on Linux.
        unsafe { clock_gettime(2, &mut t) };
        t.sec as f64 + t.nsec as f64 * 1e-9
    };
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    for &n in &[256usize, 512, 1024, 2048] {
        let a: Vec<f32> = vals(n * n, 1).iter().map(|&x| x as f32).collect();
        let b: Vec<f32> = vals(n * n, 2).iter().map(|&x| x as f32).collect();
        let mut c = vec![0.0f32; n * n];
        let reps = (1usize << 31) / (n * n * n) + 2;
        let mut line = format!("n={n:5}");
        for threads in [1usize, 2] {
            let pool = CpuPool::new(threads).unwrap();
            let run = |c: &mut Vec<f32>| {
                let av = Strided { ptr: a.as_ptr(), rs: n as isize, cs: 1 };
                let bv = Strided { ptr: b.as_ptr(), rs: 1, cs: n as isize };
                // SAFETY: n x n operands and result, exclusively borrowed.
                unsafe { product(Some(&pool), n, n, n, av, bv, c.as_mut_ptr(), n as isize, 1) }
            };
            run(&mut c);
            let (w0, c0) = (std::time::Instant::now(), cpu());
            for _ in 0..reps {
                run(&mut c);
            }
            let (w, t) = (w0.elapsed().as_secs_f64() / reps as f64, (cpu() - c0) / reps as f64);
            line += &format!("  {threads} thread(s): cpu {:8.3} ms wall {:8.3} ms", t * 1e3, w * 1e3);
        }
        println!("{line}");
    }
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}

/// The AVX-512 kernels (`sgemm`) called directly, below the size from
/// which `gemm_rt` hands them products, on shapes with partial tiles in
/// both directions, depths crossing the packed blocks, A and B by rows or
/// transposed, C's columns of a wider stride, on one thread and split
/// (by columns and by rows); and the same products with the kernels off.
#[test]
fn sgemm_matches_the_triple_loop() {
    // (Not `available()`: other tests force the portable path meanwhile.)
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("avx512f") {
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    return;
    let pools = [CpuPool::single(), CpuPool::new(2).unwrap(), CpuPool::new(3).unwrap()];
    for &(m, k, n) in &[(1, 1, 1), (48, 1, 8), (47, 3, 9), (49, 257, 7), (96, 256, 16), (5, 40, 300), (300, 70, 5), (97, 520, 33), (1000, 20, 17), (130, 600, 131), (1000, 300, 17), (40, 600, 300)] {
        let (a, b) = (vals(m * k, 7), vals(k * n, 8));
        let want = naive(m, k, n, &a, &b);
        let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        let b32: Vec<f32> = b.iter().map(|&x| x as f32).collect();
        let at: Vec<f32> = (0..m * k).map(|x| a32[(x % m) * k + x / m]).collect();
        let bt: Vec<f32> = (0..k * n).map(|x| b32[(x % k) * n + x / k]).collect();
        let ldc = m + 3;
        for (ad, ars, acs) in [(&a32, k, 1), (&at, 1, m)] {
            for (bd, brs, bcs) in [(&b32, n, 1), (&bt, 1, k)] {
                for (pi, pool) in pools.iter().enumerate() {
                    let av = Strided { ptr: ad.as_ptr(), rs: ars as isize, cs: acs as isize };
                    let bv = Strided { ptr: bd.as_ptr(), rs: brs as isize, cs: bcs as isize };
                    let mut c = vec![f32::NAN; ldc * n];
                    // SAFETY: the views address m x k and k x n values of their vectors; C is m x n
                    // with columns of stride ldc >= m; the CPU has AVX-512F.
                    unsafe { super::sgemm::product(Some(pool), m, k, n, av, bv, c.as_mut_ptr(), ldc as isize) };
                    // The same through `gemm_rt` with the kernels off.
                    let mut p = vec![f32::NAN; ldc * n];
                    // SAFETY: as above.
                    crate::base::simd::portable(|| unsafe { product(Some(pool), m, k, n, av, bv, p.as_mut_ptr(), 1, ldc as isize) });
                    for j in 0..n {
                        for i in 0..m {
                            let w = want[i * n + j];
                            let tol = 1e-4 * (1.0 + w.abs());
                            let (got, port) = (c[i + j * ldc] as f64, p[i + j * ldc] as f64);
                            assert!((got - w).abs() <= tol, "{m}x{k}x{n} pool {pi} a({ars},{acs}) b({brs},{bcs}) ({i},{j}): {got} vs {w}");
                            assert!((port - w).abs() <= tol, "portable {m}x{k}x{n} ({i},{j}): {port} vs {w}");
                        }
                        // The gap between C's columns is left alone.
                        assert!(c[m + j * ldc..(j + 1) * ldc].iter().all(|v| v.is_nan()), "{m}x{k}x{n}: wrote past a column");
                    }
                }
            }
        }
    }
}

#[test]
fn sgemm_splits_cover_c_in_whole_tiles() {
    use super::sgemm::{Split, MR, NR};
    for &(m, n, t) in &[(1000, 5, 2), (5, 1000, 2), (2048, 2048, 2), (65, 70, 3), (1, 1, 2), (300, 40, 4)] {
        let s = Split::new(m, n, t);
        let (len, g) = if s.cols { (n, NR) } else { (m, MR) };
        assert_eq!(s.len, len);
        assert!(s.parts >= 1 && s.parts <= t, "{s:?}");
        let mut next = 0;
        for p in 0..s.parts {
            let (st, l) = s.part(p);
            assert_eq!(st, next, "{s:?}");
            assert!(l > 0 && (p + 1 == s.parts || l % g == 0), "{s:?} part {p}");
            next += l;
        }
        assert_eq!(next, len, "{s:?}");
    }
    assert!(Split::new(2048, 2048, 2).cols && !Split::new(1000, 20, 2).cols);
}

/// GFLOP/s of f32 products in ggml's layout (A by rows, B by columns, C^T
/// by columns) through the AVX-512 kernels and the `gemm` crate, side by
/// side. `GEMM_SIZES=m:k:n,...` or square sizes;
/// `cargo test --release -p ggmlr-core sgemm_candidates -- --ignored --nocapture`
#[test]
#[ignore]
fn sgemm_candidates() {
    let shapes: Vec<(usize, usize, usize)> = std::env::var("GEMM_SIZES")
        .map(|s| {
            s.split(',')
                .filter_map(|x| {
                    let v: Vec<usize> = x.split(':').filter_map(|y| y.trim().parse().ok()).collect();
                    match v[..] {
                        [n] => Some((n, n, n)),
                        [m, k, n] => Some((m, k, n)),
                        _ => None,
                    }
                })
                .collect()
        })
        .unwrap_or_else(|_| vec![(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048)]);
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    for threads in [1usize, 2] {
        let pool = CpuPool::new(threads).unwrap();
        for &(m, k, n) in &shapes {
            let a: Vec<f32> = vals(m * k, 1).iter().map(|&x| x as f32).collect();
            let b: Vec<f32> = vals(k * n, 2).iter().map(|&x| x as f32).collect();
            let mut c = vec![0.0f32; m * n];
            let gf = |t: f64| 2.0 * (m * k * n) as f64 / t / 1e9;
            let av = Strided { ptr: a.as_ptr(), rs: k as isize, cs: 1 };
            let bv = Strided { ptr: b.as_ptr(), rs: 1, cs: k as isize };
            // SAFETY (both): the operands and C are m x k, k x n, m x n; the CPU has AVX-512F.
            let own = best(|| unsafe { super::sgemm::product(Some(&pool), m, k, n, av, bv, c.as_mut_ptr(), m as isize) });
            super::sgemm::OFF.store(true, std::sync::atomic::Ordering::SeqCst);
            let crate_ = best(|| unsafe { product(Some(&pool), m, k, n, av, bv, c.as_mut_ptr(), 1, m as isize) });
            super::sgemm::OFF.store(false, std::sync::atomic::Ordering::SeqCst);
            let mut line = format!("{m:5} x {k:5} x {n:5} threads={threads}: sgemm {:7.1}  gemm crate {:7.1}", gf(own), gf(crate_));
            // Other depths x rows of the packed blocks (`SGEMM_BLOCKS=kc:mc,...`).
            for kb in std::env::var("SGEMM_BLOCKS").unwrap_or_default().split(',').filter(|x| !x.is_empty()) {
                let v: Vec<usize> = kb.split(':').filter_map(|y| y.trim().parse().ok()).collect();
                if let [kc, mc] = v[..] {
                    super::sgemm::TUNE.store(kc << 32 | mc, std::sync::atomic::Ordering::SeqCst);
                    // SAFETY: as above.
                    let t = best(|| unsafe { super::sgemm::product(Some(&pool), m, k, n, av, bv, c.as_mut_ptr(), m as isize) });
                    super::sgemm::TUNE.store(0, std::sync::atomic::Ordering::SeqCst);
                    line += &format!("  {kc}:{mc} {:7.1}", gf(t));
                }
            }
            println!("{line}");
        }
    }
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}

/// Where a split pays while the pool is kept awake: the f32 and f64
/// products (`gemm_rt`) and a plain map (`par_rows`) of the sizes of a small
/// training step, on one thread and split over two, alternated in one
/// process (`HEAVY=1`: the map computes a logistic function per value).
/// `cargo test --release -p ggmlr-core warm_split_break_even -- --ignored --nocapture`
#[test]
#[ignore]
fn warm_split_break_even() {
    use std::time::Instant;
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
    let pool = CpuPool::new(2).unwrap();
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64() * 1e6
    };
    pool.install(|| {
        super::par::set_warm_div(1 << 20);
        for &(m, k, n) in &[(64usize, 128usize, 64usize), (128, 128, 64), (256, 128, 64), (256, 512, 64), (512, 256, 128), (256, 512, 512)] {
            for f64s in [false, true] {
                let a = vals(m * k, 1);
                let b = vals(k * n, 2);
                let (af, bf): (Vec<f32>, Vec<f32>) = (a.iter().map(|&x| x as f32).collect(), b.iter().map(|&x| x as f32).collect());
                let mut c = vec![0.0f64; m * n];
                let mut cf = vec![0.0f32; m * n];
                let mut run = |split: bool| {
                    crate::base::warm::rearm();
                    let p = split.then_some(&pool);
                    // SAFETY: m x k and k x n operands, m x n result, exclusively borrowed.
                    unsafe {
                        if f64s {
                            let av = Strided { ptr: a.as_ptr(), rs: k as isize, cs: 1 };
                            let bv = Strided { ptr: b.as_ptr(), rs: n as isize, cs: 1 };
                            product(p, m, k, n, av, bv, c.as_mut_ptr(), n as isize, 1)
                        } else {
                            let av = Strided { ptr: af.as_ptr(), rs: k as isize, cs: 1 };
                            let bv = Strided { ptr: bf.as_ptr(), rs: n as isize, cs: 1 };
                            product(p, m, k, n, av, bv, cf.as_mut_ptr(), n as isize, 1)
                        }
                    }
                };
                let (mut one, mut two) = (Vec::new(), Vec::new());
                for _ in 0..300 {
                    one.push(time(&mut || run(false)));
                    two.push(time(&mut || run(true)));
                }
                one.sort_by(|x, y| x.total_cmp(y));
                two.sort_by(|x, y| x.total_cmp(y));
                println!(
                    "{} {m:4} x {k:4} x {n:4} (2^{:.1}): 1 thread median {:8.2} us, 2 threads {:8.2} (min {:.2} / {:.2})",
                    if f64s { "f64" } else { "f32" },
                    ((m * k * n) as f64).log2(),
                    one[150], two[150], one[0], two[0]
                );
            }
        }
        for lg in [12usize, 13, 14, 15, 16, 17, 18] {
            let len = 1 << lg;
            let x = vals(len, 3);
            let mut out = vec![0.0f64; len];
            let (mut one, mut two) = (Vec::new(), Vec::new());
            let heavy = std::env::var("HEAVY").is_ok();
            let f = |r0: usize, chunk: &mut [f64]| {
                for (i, o) in chunk.iter_mut().enumerate() {
                    let v = x[r0 * 64 + i];
                    *o = if heavy { v.exp() / (1.0 + v.exp()) } else { v * v + 1.0 };
                }
            };
            for _ in 0..300 {
                crate::base::warm::rearm();
                one.push(time(&mut || f(0, &mut out)));
                crate::base::warm::rearm();
                two.push(time(&mut || super::par::par_rows_from(&pool, &mut out, 64, 0, f)));
            }
            one.sort_by(|x, y| x.total_cmp(y));
            two.sort_by(|x, y| x.total_cmp(y));
            println!("map 2^{lg} f64: 1 thread median {:8.2} us, 2 threads {:8.2} (min {:.2} / {:.2})", one[150], two[150], one[0], two[0]);
        }
        super::par::set_warm_div(super::par::WARM_DIV);
    });
    println!("load: {}", std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim());
}
