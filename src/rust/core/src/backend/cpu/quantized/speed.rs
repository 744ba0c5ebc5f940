//! The speed of the AVX-512 row kernels on matrix-vector work that streams
//! from memory, beside a plain AVX-512 read of the same bytes, with each
//! prefetch distance of [`AHEAD`] (ignored test: run it alone, e.g.
//! `TH=2 cargo test --release --lib quantized::speed -- --ignored --nocapture`,
//! under `chrt -f 1` on a shared machine). The distances in `dispatch`
//! were chosen from its figures.

use super::dispatch::{dot_rows_col, path, Column, ColumnActs, QuantRows, AHEAD, AHEAD_FOUR, AHEAD_ONE};
use super::dot::partner;
use super::tests::noise;
use crate::base::quant::{self, QType};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A plain read of `b` (four 64-byte loads a step, added up).
#[target_feature(enable = "avx512f")]
fn read(b: &[u8]) -> f32 {
    use core::arch::x86_64::*;
    let mut a = [_mm512_setzero_ps(); 4];
    for c in b.chunks_exact(256) {
        for (j, s) in a.iter_mut().enumerate() {
            // SAFETY: bytes 64 j .. 64 j + 64 lie in the 256 of `c`.
            *s = _mm512_add_ps(*s, unsafe { _mm512_loadu_ps(c.as_ptr().add(64 * j) as *const f32) });
        }
    }
    _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])))
}

/// Seconds per call of `f`, the fastest of 7 batches of `iters` calls.
fn timed(iters: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / iters as f64);
    }
    best
}

#[test]
#[ignore]
fn kernels_against_a_plain_read() {
    if path() != "avx512" {
        return;
    }
    let k = 4096;
    let th: usize = std::env::var("TH").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    for q in [QType::Q8_0, QType::Q4_0, QType::Q4_K] {
        let one = quant::quantize_chunk(q, &noise(k * 4096, 1), 4096, k, None).unwrap();
        let rs = q.row_size(k).unwrap();
        let y = quant::quantize_chunk(partner(q).qtype().unwrap(), &noise(k, 2), 1, k, None).unwrap();
        let col = Column::new(q, k, ColumnActs::Q(&y));
        // copies of 4096 rows making 256 MB: more than the caches hold
        let m = 4096 * (256usize << 20).div_ceil(one.len());
        let bytes: Vec<u8> = (0..m / 4096).flat_map(|_| one.iter().copied()).collect();
        let per = m / th;
        let split = |f: &(dyn Fn(&[u8]) + Sync)| {
            std::thread::scope(|s| {
                for t in 0..th {
                    let b = &bytes[t * per * rs..(t + 1) * per * rs];
                    s.spawn(move || f(b));
                }
            })
        };
        // SAFETY: the CPU has AVX-512 F (path() is "avx512").
        let t = timed(3, || split(&|b| _ = std::hint::black_box(unsafe { read(b) })));
        print!("{q:?}, {th} thread(s), {:.0} MB: plain read {:.1} GB/s; kernel, KiB ahead:", bytes.len() as f64 / 1e6, bytes.len() as f64 / t / 1e9);
        for kib in [0usize, 1, 4, 8, 16, 64] {
            AHEAD.iter().for_each(|a| a.store(kib << 10, Ordering::Relaxed));
            let t = timed(3, || {
                split(&|b| {
                    let mut out = vec![0f32; per];
                    dot_rows_col(QuantRows { q, data: b, stride: rs, k }, &col, &mut out, &mut Vec::new());
                    std::hint::black_box(out);
                })
            });
            print!(" {kib}: {:.1}", bytes.len() as f64 / t / 1e9);
        }
        println!(" GB/s");
        AHEAD[0].store(AHEAD_FOUR, Ordering::Relaxed);
        AHEAD[1].store(AHEAD_ONE, Ordering::Relaxed);
    }
}
