//! The depthwise convolution of one channel: every output row is a sum of
//! kernel taps times (stride-phase) input rows, accumulated in registers
//! over up to 64 columns at a time, with bias and activation applied before
//! the single store.

use super::conv::{phase_dims, phase_plane, Border, ConvParams};

thread_local! {
    /// The padded, stride-phased plane of the channel being convolved.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Convolve one input plane `src` (`h` rows of `w`), bordered as `pad`
/// says, with the kernel `k` into `o` (rows of `outw`), adding `bias` and
/// applying the activation. The bordered plane is built in a per-thread
/// scratch buffer that stays in cache.
// Bounds: k holds the kh * kw taps and every read of the output rows
// (largest tap offset + (outh - 1) row steps + outw) lies inside the phase
// plane of `size` values: both asserted on entry to the row loops, which
// `rows`, `block`, `row` and `chunk` rely on; o is cut into groups of whole
// rows of outw.
// BOUNDS-FN: every index is in range as said just above.
#[allow(clippy::too_many_arguments)]
pub fn dw_channel(
    src: &[f32],
    w: usize,
    h: usize,
    pad: Border,
    k: &[f32],
    bias: f32,
    p: &ConvParams,
    o: &mut [f32],
    outw: usize,
    fast: bool,
) {
    assert!(k.len() >= p.kh * p.kw, "depthwise: fewer weights than kernel taps");
    SCRATCH.with(|cell| {
        let mut plane = cell.borrow_mut();
        let (pw, ph) = phase_dims(w, h, pad, p.sw);
        let size = p.sw * ph * pw;
        if plane.len() < size {
            plane.resize(size, 0.0);
        }
        // Every value of the first `size` is written here.
        let plane = &mut plane[..size];
        phase_plane(src, w, h, pad, p.sw, plane);
        let plane = &*plane;
        let sw = p.sw;
        let clamp = match p.act.kind {
            1 => Some((0.0, f32::INFINITY)),
            3 => Some((p.act.params.first().copied().unwrap_or(f32::NEG_INFINITY), p.act.params.get(1).copied().unwrap_or(f32::INFINITY))),
            _ => None,
        };
        let post = !matches!(p.act.kind, 0 | 1 | 3);
        // Tap offsets in the phase plane for output row 0; row oy adds oy * sh * pw.
        let mut base: Vec<(usize, f32)> = Vec::with_capacity(p.kh * p.kw);
        for ky in 0..p.kh {
            for kx in 0..p.kw {
                let tx = kx * p.dw;
                base.push((((tx % sw) * ph + ky * p.dh) * pw + tx / sw, k[ky * p.kw + kx]));
            }
        }
        let mut taps = base.clone();
        // Output rows in groups of GROUP (the last group may be smaller).
        let rstep = p.sh * pw;
        let outh = o.len().div_ceil(outw.max(1));
        let reach = base.iter().map(|b| b.0).max().unwrap_or(0) + outh.saturating_sub(1) * rstep + outw;
        assert!(reach <= size, "depthwise: the output reads past the bordered plane");
        // The flat path only on AVX-512: on 8-lane registers the row blocks waste less.
        if sw == 1 && p.sh == 1 && outh > 1 && fast && crate::base::simd::avx512f() && outw < FLAT_BELOW {
            flat(&Taps { plane, taps: &base, bias, clamp }, pw, o, outw);
            if post {
                p.act.apply(o);
            }
            return;
        }
        for (g, orows) in o.chunks_mut(GROUP * outw).enumerate() {
            let shift = g * GROUP * rstep;
            for (t, b) in taps.iter_mut().zip(&base) {
                t.0 = b.0 + shift;
            }
            let t = Taps { plane, taps: &taps, bias, clamp };
            if fast {
                // SAFETY: chosen only when the CPU has AVX2 and FMA.
                unsafe { rows_avx2(&t, rstep, orows, outw) }
            } else {
                rows::<false>(&t, rstep, orows, outw)
            }
            if post {
                p.act.apply(orows);
            }
        }
    })
}

/// Stride-1 planes narrower than this many output columns are convolved as
/// one long row (see `flat`): per channel (dw_speed, AVX-512) 0.14 against
/// 0.15 us for 3x3 at 7x7 and 0.16 against 0.31 for 5x5, but from 14
/// columns on the row blocks are as fast or faster (5x5 at 14x14: 0.55
/// against 0.41 us).
const FLAT_BELOW: usize = 12;

thread_local! {
    /// The output of `flat` over whole bordered rows, before its columns
    /// past the output width are dropped.
    static FLAT: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A stride-1 convolution of a narrow plane as one long row: output value
/// (y, x) sits at y * pw + x of a run over whole bordered rows of `pw`
/// (every tap is then one shifted read of the plane), so the 16-lane
/// registers are filled across row ends instead of a few columns per row;
/// the `pw - outw` values past each row's end are computed and dropped.
// Bounds: the run has (outh - 1) * pw + outw values, its largest read (largest
// tap + run length) is dw_channel's asserted reach with rstep = pw; each kept
// row y < outh starts at y * pw inside the run and o holds outh rows of outw.
// BOUNDS-FN: every index is in range as said just above.
fn flat(t: &Taps, pw: usize, o: &mut [f32], outw: usize) {
    let outh = o.len() / outw.max(1);
    let n = (outh - 1) * pw + outw;
    FLAT.with(|cell| {
        let mut run = cell.borrow_mut();
        if run.len() < n {
            run.resize(n, 0.0);
        }
        let run = &mut run[..n];
        // SAFETY: chosen only when the CPU has AVX-512F, AVX2 and FMA.
        unsafe { row_avx512(t, run) };
        for (y, orow) in o.chunks_exact_mut(outw).enumerate() {
            orow.copy_from_slice(&run[y * pw..y * pw + outw]);
        }
    })
}

/// `row` compiled for AVX-512 (its 64-wide chunks in four registers).
///
/// # Safety
/// The CPU must have AVX-512F, AVX2 and FMA.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f,avx2,fma"))]
unsafe fn row_avx512(t: &Taps, out: &mut [f32]) {
    row::<true>(t, 0, out)
}

/// Output rows computed together: with 16 columns of each, eight sums in
/// flight hide the latency of the multiply-adds.
const GROUP: usize = 4;

/// What every output value reads: the phase plane, the kernel taps (offset
/// in the plane, weight), the bias and the clamp of the activation.
#[derive(Clone, Copy)]
struct Taps<'a> {
    plane: &'a [f32],
    taps: &'a [(usize, f32)],
    bias: f32,
    clamp: Option<(f32, f32)>,
}

/// `rows` compiled for AVX2 and FMA on x86-64 (elsewhere it is never chosen).
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn rows_avx2(t: &Taps, rstep: usize, out: &mut [f32], outw: usize) {
    rows::<true>(t, rstep, out, outw)
}

/// The output rows `out` (rows of `outw`; row r reads `rstep` further into
/// the plane than row r - 1): a whole group in blocks of all its rows,
/// fewer rows one at a time.
// BOUNDS-FN: out is whole rows of outw (a group of GROUP or fewer); reads
// are inside the plane as dw_channel asserts (and `last` re-checks for the
// block path); tmp holds GROUP rows of 8 and outw - x < 8 there.
#[inline(always)]
fn rows<const FMA: bool>(t: &Taps, rstep: usize, out: &mut [f32], outw: usize) {
    if out.len() != GROUP * outw {
        for (r, orow) in out.chunks_mut(outw).enumerate() {
            row::<FMA>(t, r * rstep, orow);
        }
        return;
    }
    let plane = t.plane;
    // Every read of the blocks below lies before the end of the last row.
    let last = t.taps.iter().map(|t| t.0).max().unwrap_or(0) + (GROUP - 1) * rstep + outw;
    assert!(last <= plane.len(), "depthwise plane too short");
    let mut x = 0;
    while x + 16 <= outw {
        block::<FMA, GROUP, 16>(t, rstep, out, outw, x);
        x += 16;
    }
    if x + 8 <= outw {
        block::<FMA, GROUP, 8>(t, rstep, out, outw, x);
        x += 8;
    }
    if x < outw && last - outw + x + 8 <= plane.len() {
        // The last few columns as a block of 8 that reads on into the
        // next row (still inside the plane); only the real columns are kept.
        let mut tmp = [0.0f32; GROUP * 8];
        block::<FMA, GROUP, 8>(&Taps { plane: &plane[x..], ..*t }, rstep, &mut tmp, 8, 0);
        for (r, t) in tmp.chunks_exact(8).enumerate() {
            out[r * outw + x..(r + 1) * outw].copy_from_slice(&t[..outw - x]);
        }
        x = outw;
    }
    if x < outw {
        for r in 0..GROUP {
            row::<FMA>(t, r * rstep + x, &mut out[r * outw + x..(r + 1) * outw]);
        }
    }
}

/// Columns x..x+W of R rows; the caller checks that the reads (up to
/// `max(s) + (R - 1) * rstep + x + W`) are in `plane`.
// BOUNDS-FN: out holds R rows of outw and x + W <= outw (the callers' loop
// conditions, or the 8-wide tmp with outw = 8); reads as the caller checks.
#[inline(always)]
fn block<const FMA: bool, const R: usize, const W: usize>(t: &Taps, rstep: usize, out: &mut [f32], outw: usize, x: usize) {
    let Taps { plane, taps, bias, clamp } = *t;
    let mut acc = [[bias; W]; R];
    for &(s, k) in taps {
        for (r, acc) in acc.iter_mut().enumerate() {
            let at = s + r * rstep + x;
            debug_assert!(at + W <= plane.len());
            // SAFETY: in bounds, as the caller checked.
            let v = unsafe { &*(plane.as_ptr().add(at) as *const [f32; W]) };
            for i in 0..W {
                acc[i] = madd::<FMA>(k, v[i], acc[i]);
            }
        }
    }
    for (r, mut a) in acc.into_iter().enumerate() {
        if let Some((lo, hi)) = clamp {
            a.iter_mut().for_each(|v| *v = v.max(lo).min(hi));
        }
        out[r * outw + x..r * outw + x + W].copy_from_slice(&a);
    }
}

#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// out[x] = act(bias + sum over taps (s, t) of t * plane[s + off + x]).
// BOUNDS-FN: every x + W <= n = out.len() by the loop conditions; plane reads
// end before the largest tap + off + n, inside the plane as dw_channel asserts.
#[inline(always)]
fn row<const FMA: bool>(t: &Taps, off: usize, out: &mut [f32]) {
    let Taps { plane, taps, bias, clamp } = *t;
    let n = out.len();
    let mut x = 0;
    // Wide chunks keep several independent sums in flight per tap.
    while x + 64 <= n {
        chunk::<FMA, 64>(t, &mut out[x..x + 64], off + x);
        x += 64;
    }
    if x + 32 <= n {
        chunk::<FMA, 32>(t, &mut out[x..x + 32], off + x);
        x += 32;
    }
    if x + 16 <= n {
        chunk::<FMA, 16>(t, &mut out[x..x + 16], off + x);
        x += 16;
    }
    if x + 8 <= n {
        chunk::<FMA, 8>(t, &mut out[x..x + 8], off + x);
        x += 8;
    }
    for (i, o) in out[x..].iter_mut().enumerate() {
        let mut a = bias;
        for &(s, t) in taps {
            a = madd::<FMA>(t, plane[s + off + x + i], a);
        }
        if let Some((lo, hi)) = clamp {
            a = a.max(lo).min(hi);
        }
        *o = a;
    }
}

// BOUNDS-FN: the W values at s + x are inside the plane as dw_channel asserts
// (a tap offset plus a row offset plus a column below outw).
#[inline(always)]
fn chunk<const FMA: bool, const W: usize>(t: &Taps, out: &mut [f32], x: usize) {
    let Taps { plane, taps, bias, clamp } = *t;
    let mut acc = [bias; W];
    for &(s, t) in taps {
        // INVARIANT: a slice of length W always converts to [f32; W].
        let r: &[f32; W] = plane[s + x..s + x + W].try_into().unwrap();
        for i in 0..W {
            acc[i] = madd::<FMA>(t, r[i], acc[i]);
        }
    }
    if let Some((lo, hi)) = clamp {
        for a in acc.iter_mut() {
            *a = a.max(lo).min(hi);
        }
    }
    out.copy_from_slice(&acc);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::layer::Activation;

    fn params(k: usize, s: usize, d: usize, act: Activation) -> ConvParams {
        let text = format!("7767517\n1 1\nConvolutionDepthWise c 0 1 x 0=1 1={k} 6={} 7=1\n", k * k);
        let spec = crate::ncnn::param::parse_text(&text).unwrap();
        let mut p = ConvParams::new(&spec.layers[0].params, true).unwrap();
        (p.kw, p.kh, p.sw, p.sh, p.dw, p.dh, p.act) = (k, k, s, s, d, d, act);
        p
    }

    #[test]
    fn matches_direct_sum_on_both_paths() {
        let acts = [
            Activation { kind: 0, params: vec![] },
            Activation { kind: 3, params: vec![0.0, 6.0] },
            Activation { kind: 6, params: vec![0.2, 0.5] },
        ];
        for (ci, &(k, s, d, w, h)) in [(3, 1, 1, 37, 9), (3, 2, 1, 40, 11), (5, 2, 2, 30, 14), (1, 1, 1, 8, 3), (3, 3, 1, 17, 7), (3, 2, 1, 33, 8), (3, 2, 1, 2, 5), (3, 1, 1, 70, 13), (3, 2, 1, 59, 17), (5, 1, 1, 7, 7), (3, 1, 2, 14, 6), (5, 1, 1, 3, 9), (3, 1, 1, 47, 5)]
            .iter()
            .enumerate()
        {
            let act = acts[ci % acts.len()].clone();
            let p = params(k, s, d, act.clone());
            let src: Vec<f32> = (0..w * h).map(|i| ((i * 7 % 13) as f32) * 0.5 - 3.0).collect();
            let kern: Vec<f32> = (0..k * k).map(|i| (i as f32) * 0.25 - 1.0).collect();
            let pad = Border { t: ci % 2, b: ci % 3, l: ci % 3, r: 1, value: 0.5 * (ci % 2) as f32 };
            let (ww, hh) = (w + pad.l + pad.r, h + pad.t + pad.b);
            let at = |y: usize, x: usize| {
                if y < pad.t || y >= pad.t + h || x < pad.l || x >= pad.l + w {
                    pad.value
                } else {
                    src[(y - pad.t) * w + x - pad.l]
                }
            };
            let ext = d * (k - 1) + 1;
            let (outw, outh) = ((ww - ext) / s + 1, (hh - ext) / s + 1);
            let mut want = vec![0.0f32; outw * outh];
            for oy in 0..outh {
                for ox in 0..outw {
                    let mut a = 0.5;
                    for ky in 0..k {
                        for kx in 0..k {
                            a += kern[ky * k + kx] * at(oy * s + ky * d, ox * s + kx * d);
                        }
                    }
                    want[oy * outw + ox] = act.apply1(a);
                }
            }
            for fast in [false, crate::base::simd::avx2_fma()] {
                let mut got = vec![f32::NAN; outw * outh];
                dw_channel(&src, w, h, pad, &kern, 0.5, &p, &mut got, outw, fast);
                for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                    assert!((g - e).abs() < 1e-4, "case {ci} fast={fast} at {i}: {g} vs {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::ncnn::layer::Activation;

    /// Manual throughput check of one depthwise channel (3x3, 112x112,
    /// border 1): `cargo test --release dw_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn dw_speed() {
        let text = "7767517\n1 1\nConvolutionDepthWise c 0 1 x 0=1 1=3 6=9 7=1\n";
        let spec = crate::ncnn::param::parse_text(text).unwrap();
        let mut p = ConvParams::new(&spec.layers[0].params, true).unwrap();
        p.act = Activation { kind: 3, params: vec![0.0, 6.0] };
        let (w, h) = (112, 112);
        let src: Vec<f32> = (0..w * h).map(|i| (i % 7) as f32).collect();
        let k = [0.1f32; 9];
        let pad = Border { t: 1, b: 1, l: 1, r: 1, value: 0.0 };
        for s in [1, 2] {
            p.sw = s;
            p.sh = s;
            let (outw, outh) = ((w + 2 - 3) / s + 1, (h + 2 - 3) / s + 1);
            let mut o = vec![0.0f32; outw * outh];
            let mut best = f64::INFINITY;
            for _ in 0..2000 {
                let t = std::time::Instant::now();
                dw_channel(&src, w, h, pad, &k, 0.0, &p, &mut o, outw, true);
                best = best.min(t.elapsed().as_secs_f64());
            }
            let flop = 18.0 * (outw * outh) as f64;
            println!("stride {s}: {:.1} us per channel, {:.1} GFLOP/s", best * 1e6, flop / best / 1e9);
        }
        // Stride 1 at narrow widths: one long row (AVX-512) against row
        // blocks (AVX2), on the same bordered plane.
        if !(crate::base::simd::avx2_fma() && crate::base::simd::avx512f()) {
            return;
        }
        for (k, w) in [(3, 7), (5, 7), (3, 14), (5, 14), (3, 28), (5, 28), (3, 56), (3, 112)] {
            let pw = w + k - 1;
            let plane: Vec<f32> = (0..pw * pw).map(|i| (i % 7) as f32).collect();
            let taps: Vec<(usize, f32)> = (0..k * k).map(|i| ((i / k) * pw + i % k, 0.1)).collect();
            let t = Taps { plane: &plane, taps: &taps, bias: 0.0, clamp: Some((0.0, 6.0)) };
            let mut o = vec![0.0f32; w * w];
            let time = |f: &mut dyn FnMut(&mut [f32])| {
                let mut o = vec![0.0f32; w * w];
                let mut best = f64::INFINITY;
                for _ in 0..3000 {
                    let s = std::time::Instant::now();
                    f(&mut o);
                    best = best.min(s.elapsed().as_secs_f64());
                }
                best * 1e6
            };
            let a = time(&mut |o| flat(&t, pw, o, w));
            let shifted: Vec<Vec<(usize, f32)>> = (0..w.div_ceil(GROUP))
                .map(|g| taps.iter().map(|&(s, v)| (s + g * GROUP * pw, v)).collect())
                .collect();
            let b = time(&mut |o| {
                for (orows, sh) in o.chunks_mut(GROUP * w).zip(&shifted) {
                    // SAFETY: the CPU has AVX2 and FMA (checked above).
                    unsafe { rows_avx2(&Taps { taps: sh, ..t }, pw, orows, w) }
                }
            });
            flat(&t, pw, &mut o, w);
            println!("{k}x{k} at {w}x{w}: one long row {a:.2} us, row blocks {b:.2} us per channel");
        }
    }
}
