//! A whole LSTM layer over one sequence in one node ([`RecurrentOp::Lstm`]):
//! the input projection of every step comes precomputed (one matrix product
//! over the sequence, outside this node), so each step is the recurrent
//! matrix-vector product, the gates and the state update.
//!
//! The recurrent weights come by columns, gate after gate (each gate's
//! `h x h` block contiguous), so the product of a step is a sum of weight
//! columns scaled by the hidden state, its results held in vector
//! registers while the columns stream through in order (no horizontal
//! sums).
//!
//! Threads split each step by hidden units: a chunk of units is its rows in
//! the four gate blocks of the recurrent weights, and its slice of the cell
//! and hidden states, so chunks are independent within a step. Chunks are
//! claimed in order from one counter over (step, chunk); a chunk waits only
//! until every chunk of the step before is done. Any one thread can thus
//! finish the whole layer alone (a thread that starts late, or never, stalls
//! nothing), and a waiting thread waits on chunks already claimed by running
//! threads.

use super::access::Src;
use super::par::CpuPool;
use crate::base::dtype::DType;
use crate::base::float::Float;
use crate::op::recurrent::RecurrentOp;
use crate::op::UnaryOp;
use anyhow::ensure;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Hidden sizes below this run on one thread (a step is too short to share).
const PAR_MIN_HIDDEN: usize = 64;

/// Computes `op` on its sources [xw, r, h0, c0] into `out` (see the op).
// BOUNDS-FN: the shape rule gave four sources (arity 4, checked before the kernel runs).
pub fn run<T: Float>(op: &RecurrentOp<UnaryOp>, s: &[Src<'_, T>], out: &mut [T], pool: &CpuPool) -> crate::Result<()> {
    ensure!(s.len() == 4, "internal: LSTM takes 4 sources, got {}", s.len());
    match op {
        RecurrentOp::Lstm { acts, reverse } => lstm(*acts, *reverse, &s[0].d, &s[1].d, &s[2].d, &s[3].d, out, pool),
    }
}

/// `v` as f32 values when `T` is f32.
fn as_f32<T: Float>(v: &[T]) -> Option<&[f32]> {
    // SAFETY: Float is implemented for f32 and f64 only, so a T of type
    // F32 and of 4 bytes is f32 itself: the same memory, length and alignment.
    (T::DTYPE == DType::F32 && std::mem::size_of::<T>() == 4).then(|| unsafe { std::slice::from_raw_parts(v.as_ptr() as *const f32, v.len()) })
}

/// See [`as_f32`].
fn as_f32_mut<T: Float>(v: &mut [T]) -> Option<&mut [f32]> {
    // SAFETY: as in `as_f32`.
    (T::DTYPE == DType::F32 && std::mem::size_of::<T>() == 4).then(|| unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut f32, v.len()) })
}

/// `y[i] = sum_k rt[k g + j0 + i] x[k]`: rows `j0 ..` of one gate's
/// recurrent weights (stored by columns of `g` values) times `x`.
// BOUNDS-FN: the rows are taken with get (an operand too small leaves zeros).
fn mat_vec<T: Float>(rt: &[T], g: usize, x: &[T], j0: usize, y: &mut [T]) {
    if let (Some(r), Some(xf)) = (as_f32(rt), as_f32(x)) {
        if let Some(yf) = as_f32_mut(y) {
            return cols_f32(r, g, xf, j0, yf);
        }
    }
    y.fill(T::ZERO);
    let m = y.len();
    for (k, &xv) in x.iter().enumerate() {
        let row = rt.get(k * g + j0..k * g + j0 + m).unwrap_or(&[]);
        for (o, &w) in y.iter_mut().zip(row) {
            *o = *o + w * xv;
        }
    }
}

/// [`mat_vec`] in f32: the widest instructions the CPU has, the results
/// in registers (blocks of up to 128) while the columns stream through.
fn cols_f32(rt: &[f32], g: usize, x: &[f32], j0: usize, y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::base::simd::avx512f() {
            // SAFETY: the CPU has AVX-512F (detected just above), the only
            // requirement of a target_feature function.
            return unsafe { cols_avx512(rt, g, x, j0, y) };
        }
        if crate::base::simd::avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { cols_avx2(rt, g, x, j0, y) };
        }
    }
    cols_blocks::<false>(rt, g, x, j0, y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
// SAFETY: (for callers) only called when the CPU has AVX-512F.
unsafe fn cols_avx512(rt: &[f32], g: usize, x: &[f32], j0: usize, y: &mut [f32]) {
    cols_blocks::<true>(rt, g, x, j0, y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
// SAFETY: (for callers) only called when the CPU has AVX2 and FMA.
unsafe fn cols_avx2(rt: &[f32], g: usize, x: &[f32], j0: usize, y: &mut [f32]) {
    cols_blocks::<true>(rt, g, x, j0, y)
}

/// `y` in blocks of 128, 64, 32 and 16 results, then the rest one by one
/// (`FMA`: fused multiply-adds, for callers compiled with them).
#[inline(always)]
// BOUNDS-FN: each block is taken while y.len() - i is at least its width.
fn cols_blocks<const FMA: bool>(rt: &[f32], g: usize, x: &[f32], j0: usize, y: &mut [f32]) {
    let mut i = 0;
    while y.len() - i >= 128 {
        block::<128, FMA>(rt, g, x, j0 + i, &mut y[i..i + 128]);
        i += 128;
    }
    for w in [64, 32, 16] {
        if y.len() - i >= w {
            match w {
                64 => block::<64, FMA>(rt, g, x, j0 + i, &mut y[i..i + 64]),
                32 => block::<32, FMA>(rt, g, x, j0 + i, &mut y[i..i + 32]),
                _ => block::<16, FMA>(rt, g, x, j0 + i, &mut y[i..i + 16]),
            }
            i += w;
        }
    }
    for (n, o) in y.iter_mut().enumerate().skip(i) {
        *o = x.iter().enumerate().map(|(k, &xv)| rt.get(k * g + j0 + n).map_or(0.0, |&w| w * xv)).sum();
    }
}

/// `W` results of [`mat_vec`] (`y` holds `W` values), accumulated in a
/// fixed-size array that the compiler keeps in vector registers.
// BOUNDS-FN: y has W values (the caller's slices); column parts through get.
#[inline(always)]
fn block<const W: usize, const FMA: bool>(rt: &[f32], g: usize, x: &[f32], j0: usize, y: &mut [f32]) {
    let mut acc = [0f32; W];
    for (k, &xv) in x.iter().enumerate() {
        let Some(Ok(col)) = rt.get(k * g + j0..k * g + j0 + W).map(<&[f32; W]>::try_from) else { break };
        for i in 0..W {
            acc[i] = if FMA { col[i].mul_add(xv, acc[i]) } else { acc[i] + col[i] * xv };
        }
    }
    y[..W].copy_from_slice(&acc);
}

/// `u` applied to every value of `v`, one loop per function (so that it
/// vectorises).
#[inline(always)]
fn activate<T: Float>(u: UnaryOp, v: &mut [T]) {
    match u {
        UnaryOp::Sigmoid => v.iter_mut().for_each(|x| *x = UnaryOp::Sigmoid.apply(*x)),
        UnaryOp::Tanh => v.iter_mut().for_each(|x| *x = UnaryOp::Tanh.apply(*x)),
        UnaryOp::Relu => v.iter_mut().for_each(|x| *x = UnaryOp::Relu.apply(*x)),
        other => v.iter_mut().for_each(|x| *x = other.apply(*x)),
    }
}

/// One step for the hidden units `a .. a + y.len()`: `xw` is the step's
/// input projection (4h values), `hp` the previous hidden state (h), `y`
/// and `c` the units' hidden and cell states (the cell state updated in
/// place), `pre` scratch of 4 y.len() values.
// BOUNDS-FN: the caller passes a + y.len() <= h = hp.len(), xw.len() = 4h,
// r of 4h rows of h, c.len() = y.len() and pre.len() >= 4 y.len(); the
// slices below are of those ranges.
#[inline(always)]
fn units<T: Float>(acts: [UnaryOp; 3], xw: &[T], rt: &[T], hp: &[T], a: usize, y: &mut [T], c: &mut [T], pre: &mut [T]) {
    let (h, m) = (hp.len(), y.len());
    let pre = &mut pre[..4 * m];
    for (q, p) in pre.chunks_exact_mut(m).enumerate() {
        mat_vec(&rt[q * h * h..(q + 1) * h * h], h, hp, a, p);
        for (v, &x) in p.iter_mut().zip(&xw[q * h + a..q * h + a + m]) {
            *v = *v + x;
        }
    }
    let (iof, cand) = pre.split_at_mut(3 * m);
    activate(acts[0], iof);
    activate(acts[1], cand);
    let (i, of) = iof.split_at(m);
    let (o, f) = of.split_at(m);
    for k in 0..m {
        let cn = f[k] * c[k] + i[k] * cand[k];
        c[k] = cn;
        y[k] = cn;
    }
    activate(acts[2], y);
    for (v, &g) in y.iter_mut().zip(o) {
        *v = *v * g;
    }
}

/// The results and cell state that the threads share; each writes only
/// the units of the chunks it claimed.
struct Shared<T>(*mut T, *mut T);
// SAFETY: the pointers are dereferenced only for the units of a claimed
// chunk (each claimed by one thread) and for columns of steps already
// done (read only); both buffers outlive the scope that uses them.
unsafe impl<T> Sync for Shared<T> {}

// BOUNDS-FN: the checks at the top give xw = 4h * steps, r = 4h * h, c0 = h and
// out = h (steps + 2) values; column t < steps of out is out[t h .. (t + 1) h].
#[allow(clippy::too_many_arguments)]
fn lstm<T: Float>(acts: [UnaryOp; 3], reverse: bool, xw: &[T], r: &[T], h0: &[T], c0: &[T], out: &mut [T], pool: &CpuPool) -> crate::Result<()> {
    let h = h0.len();
    let g = 4 * h;
    ensure!(
        h > 0 && c0.len() == h && r.len() == g * h && xw.len() % g == 0 && out.len() == h * (xw.len() / g + 2),
        "internal: LSTM operands of {} (projection), {} (weights), {} and {} (states) values for {} results",
        xw.len(),
        r.len(),
        h0.len(),
        c0.len(),
        out.len()
    );
    let steps = xw.len() / g;
    let mut c = c0.to_vec();
    let n = pool.n_threads.max(1);
    let chunk = if n > 1 && h >= PAR_MIN_HIDDEN { h.div_ceil(n).next_multiple_of(16) } else { h };
    let nch = h.div_ceil(chunk);
    let col = |s: usize| if reverse { steps - 1 - s } else { s };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let total = steps * nch;
    let shared = Shared(out.as_mut_ptr(), c.as_mut_ptr());
    let work = || {
        let shared = &shared;
        let mut pre = vec![T::ZERO; 4 * chunk];
        loop {
            let idx = next.fetch_add(1, Ordering::Relaxed);
            if idx >= total {
                break;
            }
            let (s, k) = (idx / nch, idx % nch);
            let mut spins = 0u32;
            while done.load(Ordering::Acquire) < s * nch {
                spins += 1;
                if spins < 2000 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            let t = col(s);
            let a = k * chunk;
            let m = chunk.min(h - a);
            // SAFETY: every chunk of step s - 1 is done (the acquire load
            // above pairs with their release), so its column is complete and
            // no longer written; chunk (s, k) was claimed by this thread
            // alone, so units a .. a + m of column t and of the cell state
            // are written by nobody else; all ranges lie in out (steps + 2
            // columns of h) and c (h values), and column t differs from the
            // column of step s - 1.
            let (hp, y, cs) = unsafe {
                let hp = if s == 0 { h0 } else { std::slice::from_raw_parts(shared.0.add(col(s - 1) * h), h) };
                (hp, std::slice::from_raw_parts_mut(shared.0.add(t * h + a), m), std::slice::from_raw_parts_mut(shared.1.add(a), m))
            };
            crate::base::simd::wide(|| units(acts, &xw[t * g..(t + 1) * g], r, hp, a, y, cs, &mut pre));
            done.fetch_add(1, Ordering::Release);
        }
    };
    if nch <= 1 {
        work();
    } else {
        pool.install(|| {
            rayon::scope(|sc| {
                for _ in 1..n.min(nch) {
                    sc.spawn(|_| work());
                }
                work();
            })
        });
    }
    let last = if steps == 0 { h0.to_vec() } else { out[col(steps - 1) * h..(col(steps - 1) + 1) * h].to_vec() };
    out[steps * h..(steps + 1) * h].copy_from_slice(&last);
    out[(steps + 1) * h..].copy_from_slice(&c);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The LSTM step by step in f64, written from the ONNX definition.
    fn reference(xw: &[f64], r: &[f64], h0: &[f64], c0: &[f64], reverse: bool) -> Vec<f64> {
        let h = h0.len();
        let steps = xw.len() / (4 * h);
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        let mut out = vec![0.0; h * (steps + 2)];
        let (mut hp, mut c) = (h0.to_vec(), c0.to_vec());
        for s in 0..steps {
            let t = if reverse { steps - 1 - s } else { s };
            let pre: Vec<f64> = (0..4 * h).map(|j| xw[t * 4 * h + j] + (0..h).map(|k| r[j * h + k] * hp[k]).sum::<f64>()).collect();
            for k in 0..h {
                let (i, o, f, g) = (sig(pre[k]), sig(pre[h + k]), sig(pre[2 * h + k]), pre[3 * h + k].tanh());
                c[k] = f * c[k] + i * g;
                out[t * h + k] = o * c[k].tanh();
            }
            hp = out[t * h..(t + 1) * h].to_vec();
        }
        out[steps * h..(steps + 1) * h].copy_from_slice(&hp);
        out[(steps + 1) * h..].copy_from_slice(&c);
        out
    }

    #[test]
    fn matches_the_step_by_step_definition_on_one_and_more_threads() {
        let acts = [UnaryOp::Sigmoid, UnaryOp::Tanh, UnaryOp::Tanh];
        let val = |i: usize, k: f64| (i as f64 * k).sin() * 0.8;
        for (h, steps) in [(3usize, 5usize), (64, 7), (72, 4), (128, 3), (5, 0)] {
            let xw: Vec<f64> = (0..4 * h * steps).map(|i| val(i, 0.37)).collect();
            let r: Vec<f64> = (0..4 * h * h).map(|i| val(i, 0.91) / (h as f64).sqrt()).collect();
            let h0: Vec<f64> = (0..h).map(|i| val(i, 1.3)).collect();
            let c0: Vec<f64> = (0..h).map(|i| val(i, 2.1)).collect();
            // The kernel's weights are by columns within each gate:
            // rt[q h h + k h + i] = r[(q h + i) h + k].
            let rt: Vec<f64> = (0..4 * h * h).map(|x| r[((x / (h * h)) * h + x % h) * h + (x / h) % h]).collect();
            for reverse in [false, true] {
                let want = reference(&xw, &r, &h0, &c0, reverse);
                for threads in [1usize, 2, 3] {
                    let pool = CpuPool::new(threads).unwrap();
                    let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                    let mut got = vec![0f32; want.len()];
                    lstm(acts, reverse, &f(&xw), &f(&rt), &f(&h0), &f(&c0), &mut got, &pool).unwrap();
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!((*g as f64 - w).abs() < 2e-5, "h {h} steps {steps} reverse {reverse} threads {threads}: [{i}] {g} vs {w}");
                    }
                    let mut got64 = vec![0f64; want.len()];
                    lstm(acts, reverse, &xw, &rt, &h0, &c0, &mut got64, &pool).unwrap();
                    for (g, w) in got64.iter().zip(&want) {
                        assert!((g - w).abs() < 1e-12);
                    }
                }
            }
        }
        let pool = CpuPool::single();
        let mut out = vec![0f32; 10];
        assert!(lstm(acts, false, &[0.0; 12], &[0.0; 35], &[0.0; 3], &[0.0; 3], &mut out, &pool).is_err());
    }
}
