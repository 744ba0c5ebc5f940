//! Matrix-vector products on the CPU: the f32 one ([`gemv`]) and the row
//! split that it shares with the quantized products ([`split_rows`]).
//!
//! A matrix-vector product reads each weight once, so it runs at memory
//! speed when every thread streams its own part of the weights from start
//! to end. [`split_rows`] gives each of the pool's threads an equal,
//! contiguous range of rows, in chunks: a thread takes its own chunks from
//! the front of its range, and when done takes the chunks still left in the
//! others' ranges from their back, so a thread that starts late (woken
//! after the caller began) costs only its share of the work, and every
//! thread's reads stay sequential. The pool is entered once per product
//! (one task per thread, no nested splitting).

use super::par::CpuPool;
use crate::base::vdot::{self, WeightRows};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// Below this many bytes of weights a product runs on the calling thread.
const PAR_MIN_BYTES: usize = 1 << 18;
/// Bytes of weights per chunk (rows are claimed this many at a time).
const CHUNK_BYTES: usize = 1 << 16;
/// Rows per chunk are a multiple of this (16 f32 results: one cache line,
/// so two threads never write the same line of the results).
const ROW_ALIGN: usize = 16;

/// `out[i] = row i . v` for `out.len()` rows of `v.len()` values, contiguous
/// in `rows`, split across the pool.
pub fn gemv(pool: &CpuPool, rows: &[f32], v: &[f32], out: &mut [f32]) {
    let k = v.len();
    if k == 0 {
        out.fill(0.0);
        return;
    }
    assert!(rows.len() >= out.len() * k, "gemv operand bounds");
    split_rows(pool, out, 4 * k, |r0, o| vdot::rows(WeightRows::F32(rows), v, k, r0, o));
}

/// The two ends (front in the low half, back in the high half) of the
/// chunks still unclaimed in one thread's range.
struct Range(AtomicU64);

impl Range {
    fn new(front: usize, back: usize) -> Range {
        Range(AtomicU64::new(front as u64 | (back as u64) << 32))
    }

    /// Claims the first unclaimed chunk (`front`) or the last (`!front`).
    fn claim(&self, front: bool) -> Option<usize> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let (f, b) = (cur & 0xFFFF_FFFF, cur >> 32);
            if f >= b {
                return None;
            }
            let (next, got) = if front { (cur + 1, f) } else { (cur - (1 << 32), b - 1) };
            match self.0.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(got as usize),
                Err(now) => cur = now,
            }
        }
    }
}

/// A pointer to the results that the threads share; each writes only the
/// chunks it claimed.
struct Out(*mut f32);
// SAFETY: the pointer is only dereferenced for chunks claimed through a
// `Range`, which hands each chunk to exactly one thread, so no two threads
// touch the same element; the slice outlives the scope that uses it.
unsafe impl Sync for Out {}

impl Out {
    /// SAFETY: (for callers) `r0 + len` is within the results, and no other
    /// thread uses these elements while the slice lives.
    unsafe fn part(&self, r0: usize, len: usize) -> &mut [f32] {
        // SAFETY: as the caller guarantees.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(r0), len) }
    }
}

/// Runs `f(first_row, results)` over `out` (one result per row of
/// `row_bytes` bytes of weights) in chunks of rows, on every thread of the
/// pool when the weights are large (see the module's notes).
// BOUNDS-FN: ranges holds n ranges; the threads are numbered t in 0..n and
// each visits u = (t + d) % n < n.
pub fn split_rows(pool: &CpuPool, out: &mut [f32], row_bytes: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let m = out.len();
    let n = pool.n_threads;
    if n <= 1 || m < 2 * ROW_ALIGN || m.saturating_mul(row_bytes) < PAR_MIN_BYTES {
        f(0, out);
        return;
    }
    let per = (CHUNK_BYTES / row_bytes.max(1)).max(1).next_multiple_of(ROW_ALIGN);
    let chunks = m.div_ceil(per);
    let n = n.min(chunks);
    let ranges: Vec<Range> = (0..n).map(|t| Range::new(t * chunks / n, (t + 1) * chunks / n)).collect();
    let dst = Out(out.as_mut_ptr());
    let run = |c: usize| {
        let r0 = c * per;
        let len = per.min(m - r0);
        // SAFETY: chunk `c` lies within the `m` results (`r0 < m`), and it
        // was claimed by this thread alone (see `Out`).
        f(r0, unsafe { dst.part(r0, len) });
    };
    let work = |t: usize| {
        while let Some(c) = ranges[t].claim(true) {
            if crate::base::cancel::requested() {
                return;
            }
            run(c);
        }
        for u in (1..n).map(|d| (t + d) % n) {
            while let Some(c) = ranges[u].claim(false) {
                if crate::base::cancel::requested() {
                    return;
                }
                run(c);
            }
        }
    };
    pool.install(|| (0..n).into_par_iter().with_max_len(1).for_each(|t| work(t)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Every row is computed exactly once, whatever the number of threads
    /// and rows (uneven chunks, fewer chunks than threads).
    #[test]
    fn split_rows_covers_each_row_once() {
        for threads in [1, 2, 3, 5] {
            let pool = CpuPool::new(threads).unwrap();
            for m in [1, 31, 32, 33, 1000, 4099] {
                let calls = AtomicUsize::new(0);
                let mut out = vec![-1f32; m];
                split_rows(&pool, &mut out, 4096, |r0, o| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    for (i, x) in o.iter_mut().enumerate() {
                        assert_eq!(*x, -1.0, "row {} computed twice", r0 + i);
                        *x = (r0 + i) as f32;
                    }
                });
                assert!(out.iter().enumerate().all(|(i, &x)| x == i as f32), "{threads} threads, {m} rows");
                let per = (CHUNK_BYTES / 4096).next_multiple_of(ROW_ALIGN);
                let expect = if threads == 1 || m < 2 * ROW_ALIGN || m * 4096 < PAR_MIN_BYTES { 1 } else { m.div_ceil(per) };
                assert_eq!(calls.into_inner(), expect);
            }
        }
    }

    /// The f32 product against a plain f64 dot product of each row.
    #[test]
    fn gemv_matches_f64_dot_products() {
        let pool = CpuPool::new(2).unwrap();
        for (m, k) in [(3, 5), (257, 1000), (1500, 333)] {
            let rows: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 211) as f32 / 50.0 - 2.0).collect();
            let v: Vec<f32> = (0..k).map(|i| ((i * 31) % 17) as f32 / 8.0 - 1.0).collect();
            let mut out = vec![0f32; m];
            gemv(&pool, &rows, &v, &mut out);
            for (r, &o) in out.iter().enumerate() {
                let want: f64 = (0..k).map(|j| rows[r * k + j] as f64 * v[j] as f64).sum();
                assert!((o as f64 - want).abs() <= 1e-5 * (k as f64) * 4.0, "row {r}: {o} vs {want}");
            }
        }
    }
}
