//! The channels-innermost direct convolution and its kernel gradient
//! ([`ConvCl`]), read straight from the input: one output position's
//! kernel taps along a row are `KW * IC` values `IC` apart per tap, so a
//! block of positions is computed in registers (output channels across the
//! vector lanes, the input value broadcast) with nothing unfolded. Blocks
//! whose taps all lie inside the input run without checks; positions at a
//! padded border take each tap only where it is inside.
//!
//! The loops are written once, generic over the value type and the block
//! sizes, and compiled three times: for AVX-512, for AVX2 with FMA, and
//! portable; the CPU picks at run time (`base::simd`).

use super::access::Src;
use super::par::{par_rows_from, threshold, CpuPool, PAR_PRODUCT};
use crate::base::float::Float;
use crate::op::conv_cl::{ClGeom, ConvCl};
use crate::op::UnaryOp;
use anyhow::{anyhow, ensure};

/// Computes `c` on its sources into `out` of sizes `ne`.
// BOUNDS-FN: `ne` of a source is a [usize; 4] indexed by the literal 0.
pub fn run<T: Float>(c: &ConvCl<UnaryOp>, s: &[Src<'_, T>], out: &mut [T], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    let src = |i: usize| s.get(i).ok_or_else(|| anyhow!("internal: {} without its source {i}", c.name()));
    match *c {
        ConvCl::Forward { g, act } => {
            let (k, x) = (src(0)?, src(1)?);
            let geo = Geo::new(&g, x.ne, k.ne[0]);
            let bias = s.get(2).map(|b| &b.d[..]);
            ensure!(ne == [geo.oc, geo.ow, geo.oh, geo.n] && out.len() == ne.iter().product::<usize>(), "internal: conv_cl result {ne:?} for {g:?}");
            geo.holds(x, "x")?;
            geo.holds_n(k, geo.oc * geo.ic * geo.kw * geo.kh, "the kernel")?;
            forward(&geo, &k.d, &x.d, bias, act, out, pool);
        }
        ConvCl::Weights(g) => {
            let (gz, x) = (src(0)?, src(1)?);
            let geo = Geo::new(&g, x.ne, gz.ne[0]);
            ensure!(ne == [geo.oc, geo.ic, geo.kw, geo.kh] && out.len() == ne.iter().product::<usize>(), "internal: conv_cl_weights result {ne:?} for {g:?}");
            geo.holds(x, "x")?;
            geo.holds_n(gz, geo.oc * geo.ow * geo.oh * geo.n, "the gradient")?;
            weights(&geo, &gz.d, &x.d, out, pool)?;
        }
    }
    Ok(())
}

/// The sizes and steps of one node, with what the loops derive from them.
struct Geo {
    oc: usize,
    ic: usize,
    w: usize,
    h: usize,
    n: usize,
    kw: usize,
    kh: usize,
    ow: usize,
    oh: usize,
    s: [i64; 2],
    a: [i64; 2],
    d: [i64; 2],
    /// Offset of row tap u = kx IC + i from its position's first value.
    uoff: Vec<i64>,
    /// Output columns [lo, hi) whose every tap along the row is inside.
    inner: (usize, usize),
}

impl Geo {
    // BOUNDS-FN: `x` ([usize; 4]) and the geometry's [i32; 2] fields are
    // indexed by literals.
    fn new(g: &ClGeom, x: [usize; 4], oc: usize) -> Geo {
        let v = |p: [i32; 2]| [i64::from(p[0]), i64::from(p[1])];
        let (s, a, d, k, out) = (v(g.s), v(g.a), v(g.d), g.k, g.out);
        let (kw, kh) = (k[0].max(0) as usize, k[1].max(0) as usize);
        let ic = x[0];
        let uoff = (0..kw * ic).map(|u| (u / ic.max(1)) as i64 * d[0] * ic as i64 + (u % ic.max(1)) as i64).collect();
        let mut geo = Geo { oc, ic, w: x[1], h: x[2], n: x[3], kw, kh, ow: out[0].max(0) as usize, oh: out[1].max(0) as usize, s, a, d, uoff, inner: (0, 0) };
        geo.inner = geo.inside_cols();
        geo
    }

    /// Whether the input holds its `IC W H N` values (the unchecked reads
    /// of the inner loops stay below that).
    fn holds<T: Float>(&self, x: &Src<'_, T>, what: &str) -> crate::Result<()> {
        let need = self.ic.checked_mul(self.w).and_then(|v| v.checked_mul(self.h)).and_then(|v| v.checked_mul(self.n));
        ensure!(need.is_some_and(|v| v <= x.d.len()), "internal: conv_cl: {what} holds {} values, not {:?}", x.d.len(), need);
        Ok(())
    }

    /// Whether source `s` holds at least `need` values (the kernel or the
    /// output's gradient, which the vector blocks also read unchecked).
    fn holds_n<T: Float>(&self, s: &Src<'_, T>, need: usize, what: &str) -> crate::Result<()> {
        ensure!(need <= s.d.len(), "internal: conv_cl: {what} holds {} values, not {need}", s.d.len());
        Ok(())
    }

    /// The first input column of output column `ox` (its tap 0).
    // BOUNDS-FN: the steps are [i64; 2] indexed by literals.
    fn ix0(&self, ox: usize) -> i64 {
        ox as i64 * self.s[0] + self.a[0]
    }

    /// The output columns whose taps along the row all lie in 0..W.
    // BOUNDS-FN: the steps are [i64; 2] indexed by literals.
    fn inside_cols(&self) -> (usize, usize) {
        let span = (self.kw.max(1) - 1) as i64 * self.d[0];
        let (lo_tap, hi_tap) = (span.min(0), span.max(0));
        let (w, ow) = (self.w as i64, self.ow as i64);
        // ox s + a + lo_tap >= 0 and ox s + a + hi_tap <= w - 1.
        let lo = (-(self.a[0] + lo_tap)).max(0);
        let lo = (lo + self.s[0] - 1) / self.s[0];
        let top = w - 1 - self.a[0] - hi_tap;
        let hi = if top < 0 { 0 } else { top / self.s[0] + 1 };
        let (lo, hi) = (lo.clamp(0, ow), hi.clamp(0, ow));
        (lo as usize, hi.max(lo) as usize)
    }

    /// Input row of output row `oy` at tap `ky`, when it lies inside.
    // BOUNDS-FN: the steps are [i64; 2] indexed by literals.
    fn row(&self, oy: usize, ky: usize) -> Option<usize> {
        let iy = oy as i64 * self.s[1] + self.a[1] + ky as i64 * self.d[1];
        (0..self.h as i64).contains(&iy).then_some(iy as usize)
    }

    /// Input column of output column `ox` at tap `kx`, when it lies inside.
    // BOUNDS-FN: the steps are [i64; 2] indexed by literals.
    fn col(&self, ox: usize, kx: usize) -> Option<usize> {
        let ix = self.ix0(ox) + kx as i64 * self.d[0];
        (0..self.w as i64).contains(&ix).then_some(ix as usize)
    }
}

/// Which compiled copy of the loops runs.
#[derive(Clone, Copy)]
enum Isa {
    Avx512,
    Avx2,
    Portable,
}

fn isa() -> Isa {
    if crate::base::simd::avx2_fma() {
        if crate::base::simd::avx512f() && !AVX2_ONLY.load(std::sync::atomic::Ordering::Relaxed) {
            return Isa::Avx512;
        }
        return Isa::Avx2;
    }
    Isa::Portable
}

/// Set by tests to run the AVX2 copy on a CPU that has AVX-512.
static AVX2_ONLY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `f` with the AVX2 copy of the loops where the CPU has AVX-512.
#[cfg(test)]
pub fn avx2_only<R>(f: impl FnOnce() -> R) -> R {
    AVX2_ONLY.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = f();
    AVX2_ONLY.store(false, std::sync::atomic::Ordering::SeqCst);
    r
}

/// `a * b + c`, fused where the copy is compiled with FMA.
#[inline(always)]
fn madd<T: Float, const FMA: bool>(a: T, b: T, c: T) -> T {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// The inputs of the forward loops.
struct Fwd<'a, T> {
    geo: &'a Geo,
    k: &'a [T],
    x: &'a [T],
    bias: Option<&'a [T]>,
    act: Option<UnaryOp>,
}

fn forward<T: Float>(geo: &Geo, k: &[T], x: &[T], bias: Option<&[T]>, act: Option<UnaryOp>, out: &mut [T], pool: &CpuPool) {
    let p = Fwd { geo, k, x, bias, act };
    let row = geo.ow * geo.oc;
    let taps = (geo.kw * geo.kh * geo.ic).max(1);
    let isa = isa();
    par_rows_from(pool, out, row, threshold(PAR_PRODUCT) / taps, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(row.max(1)).enumerate() {
            let r = r0 + j;
            let (oy, n) = (r % geo.oh.max(1), r / geo.oh.max(1));
            match isa {
                // SAFETY: the CPU has these features (`isa`).
                Isa::Avx512 => unsafe { fwd_row_avx512(&p, oy, n, orow) },
                // SAFETY: as above.
                Isa::Avx2 => unsafe { fwd_row_avx2(&p, oy, n, orow) },
                Isa::Portable => fwd_row::<T, false, 4, 0>(&p, oy, n, orow),
            }
        }
    });
}

#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f,avx2,fma"))]
// SAFETY: (for callers) only called when the CPU has AVX-512F, AVX2 and FMA.
unsafe fn fwd_row_avx512<T: Float>(p: &Fwd<'_, T>, oy: usize, n: usize, orow: &mut [T]) {
    fwd_row::<T, true, 8, 2>(p, oy, n, orow)
}

#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
// SAFETY: (for callers) only called when the CPU has AVX2 and FMA.
unsafe fn fwd_row_avx2<T: Float>(p: &Fwd<'_, T>, oy: usize, n: usize, orow: &mut [T]) {
    fwd_row::<T, true, 8, 1>(p, oy, n, orow)
}

/// One output row `orow` (`OW * OC` values) of sample `n`, row `oy`:
/// output channels in chunks of 16 (with 16-lane registers, `V` = 2), 8, 4
/// and 1, positions in blocks of `P`. `V`: 0 portable, 1 AVX2, 2 AVX-512.
#[inline(always)]
fn fwd_row<T: Float, const FMA: bool, const P: usize, const V: u8>(p: &Fwd<'_, T>, oy: usize, n: usize, orow: &mut [T]) {
    let g = p.geo;
    // The input rows this output row reads: (first value of the row, first
    // kernel value of its taps, `ky KW IC OC`).
    let taps = g.kw * g.ic * g.oc;
    let rows: Vec<(i64, usize)> = (0..g.kh).filter_map(|ky| g.row(oy, ky).map(|iy| (((n * g.h + iy) * g.w * g.ic) as i64, ky * taps))).collect();
    let mut f0 = 0;
    while f0 < g.oc {
        let left = g.oc - f0;
        f0 += if left >= 16 && (V == 2 || V == 0) {
            fwd_chunk::<T, FMA, P, 16, V>(p, &rows, f0, orow);
            16
        } else if left >= 8 {
            fwd_chunk::<T, FMA, P, 8, V>(p, &rows, f0, orow);
            8
        } else if left >= 4 {
            fwd_chunk::<T, FMA, P, 4, V>(p, &rows, f0, orow);
            4
        } else {
            fwd_chunk::<T, FMA, P, 1, V>(p, &rows, f0, orow);
            1
        };
    }
}

/// Output channels f0..f0 + F of one row, every position.
#[inline(always)]
fn fwd_chunk<T: Float, const FMA: bool, const P: usize, const F: usize, const V: u8>(p: &Fwd<'_, T>, rows: &[(i64, usize)], f0: usize, orow: &mut [T]) {
    let g = p.geo;
    let (lo, hi) = g.inner;
    let mut ox = 0;
    while ox < g.ow {
        if ox >= lo && ox + P <= hi {
            let acc = fwd_inner::<T, FMA, P, F, V>(p, rows, f0, ox);
            store::<T, P, F>(p, &acc, f0, ox, orow);
            ox += P;
        } else if ox >= lo && ox < hi && hi - lo >= P {
            // The last inner block ends at hi, over positions done already.
            let acc = fwd_inner::<T, FMA, P, F, V>(p, rows, f0, hi - P);
            store::<T, P, F>(p, &acc, f0, hi - P, orow);
            ox = hi;
        } else if ox >= lo && ox + 2 <= hi {
            let acc = fwd_inner::<T, FMA, 2, F, V>(p, rows, f0, ox);
            store::<T, 2, F>(p, &acc, f0, ox, orow);
            ox += 2;
        } else if ox >= lo && ox < hi {
            let acc = fwd_inner::<T, FMA, 1, F, V>(p, rows, f0, ox);
            store::<T, 1, F>(p, &acc, f0, ox, orow);
            ox += 1;
        } else {
            let acc = fwd_border::<T, FMA, F>(p, rows, f0, ox);
            store::<T, 1, F>(p, &[acc], f0, ox, orow);
            ox += 1;
        }
    }
}

/// f32 sums of a vector block as the kernel's type.
#[inline(always)]
// BOUNDS-FN: j < P (from_fn) indexes the P rows of `a`; a row is read with get.
fn widen<T: Float, const N: usize, const P: usize, const F: usize>(a: [[f32; N]; P]) -> [[T; F]; P] {
    std::array::from_fn(|j| std::array::from_fn(|f| T::from_f32(a[j].get(f).copied().unwrap_or(0.0))))
}

/// The sums of positions ox..ox + P, whose taps all lie inside the input
/// (`Geo::inner`), for output channels f0..f0 + F.
#[inline(always)]
// BOUNDS-FN: the geometry's steps are [i64; 2] indexed by literals; `x` is read unchecked only inside `Geo::inner` (see the SAFETY notes).
fn fwd_inner<T: Float, const FMA: bool, const P: usize, const F: usize, const V: u8>(
    p: &Fwd<'_, T>,
    rows: &[(i64, usize)],
    f0: usize,
    ox: usize,
) -> [[T; F]; P] {
    let g = p.geo;
    #[cfg(target_arch = "x86_64")]
    if V > 0 && (F == 8 || (F == 16 && V == 2)) {
        if let (Some(x), Some(k)) = (T::as_f32(p.x), T::as_f32(p.k)) {
            let b = super::conv_cl_x86::Block { x, k, rows, xo: g.ix0(ox) * g.ic as i64, f0, uoff: &g.uoff, oc: g.oc, step: g.s[0] as usize * g.ic };
            // SAFETY: V says the CPU has the block's features (`isa`);
            // positions ox..ox + P lie in `Geo::inner` (every read inside
            // `x`, as below) and channels f0..f0 + F exist (`fwd_row`), so
            // the kernel reads inside `k`.
            return if F == 16 { widen(unsafe { super::conv_cl_x86::fwd16::<P>(&b) }) } else { widen(unsafe { super::conv_cl_x86::fwd8::<P>(&b) }) };
        }
    }
    let mut acc = [[T::ZERO; F]; P];
    let step = g.s[0] as usize * g.ic;
    for &(base, wrow) in rows {
        // Position ox's tap 0 of this row; inside the input (`inner`).
        let xb = base + g.ix0(ox) * g.ic as i64;
        let wb = wrow + f0;
        for (u, &uo) in g.uoff.iter().enumerate() {
            let w = lanes::<T, F>(p.k, wb + u * g.oc);
            let at = (xb + uo) as usize;
            for (j, a) in acc.iter_mut().enumerate() {
                let i = at + j * step;
                debug_assert!(i < p.x.len());
                // SAFETY: positions ox..ox + P lie in `Geo::inner`, so every
                // tap u of each reads column ix0 + kx d inside 0..W of an
                // input row inside 0..H of sample n < N: index < x.len().
                let v = unsafe { *p.x.get_unchecked(i) };
                for (s, &wv) in a.iter_mut().zip(&w) {
                    *s = madd::<T, FMA>(v, wv, *s);
                }
            }
        }
    }
    acc
}

/// The sums of a border position ox: each tap only where it lies inside.
#[inline(always)]
fn fwd_border<T: Float, const FMA: bool, const F: usize>(p: &Fwd<'_, T>, rows: &[(i64, usize)], f0: usize, ox: usize) -> [T; F] {
    let g = p.geo;
    let mut acc = [T::ZERO; F];
    for &(base, wrow) in rows {
        for kx in 0..g.kw {
            let Some(ix) = g.col(ox, kx) else { continue };
            let xs = p.x.get(base as usize + ix * g.ic..).unwrap_or(&[]);
            for (i, &v) in xs.iter().take(g.ic).enumerate() {
                let w = lanes::<T, F>(p.k, wrow + (kx * g.ic + i) * g.oc + f0);
                for (s, &wv) in acc.iter_mut().zip(&w) {
                    *s = madd::<T, FMA>(v, wv, *s);
                }
            }
        }
    }
    acc
}

/// F kernel values from `at` (zeros past the end, which the shape rule rules out).
#[inline(always)]
fn lanes<T: Float, const F: usize>(k: &[T], at: usize) -> [T; F] {
    match k.get(at..).and_then(|s| s.first_chunk::<F>()) {
        Some(w) => *w,
        None => [T::ZERO; F],
    }
}

/// Sums of positions ox.. plus the bias, through the activation, into `orow`.
#[inline(always)]
fn store<T: Float, const P: usize, const F: usize>(p: &Fwd<'_, T>, acc: &[[T; F]; P], f0: usize, ox: usize, orow: &mut [T]) {
    let oc = p.geo.oc;
    let b: [T; F] = p.bias.map_or([T::ZERO; F], |b| lanes::<T, F>(b, f0));
    // One loop per activation, so that each runs over whole vectors.
    let put = |f: &dyn Fn(T) -> T, orow: &mut [T]| {
        for (j, a) in acc.iter().enumerate() {
            let Some(o) = orow.get_mut((ox + j) * oc + f0..).and_then(|o| o.first_chunk_mut::<F>()) else { continue };
            for ((d, &s), &bv) in o.iter_mut().zip(a).zip(&b) {
                *d = f(s + bv);
            }
        }
    };
    match p.act {
        None => put(&|v| v, orow),
        Some(UnaryOp::Relu) => put(&|v: T| v.max(T::ZERO), orow),
        Some(u) => put(&|v| u.apply(v), orow),
    }
}

/// The inputs of the kernel-gradient loops.
struct Wgt<'a, T> {
    geo: &'a Geo,
    gz: &'a [T],
    x: &'a [T],
}

/// The kernel's gradient: rows (sample, output row) split into one part
/// per thread, each summed into its own `[OC, IC, KW, KH]`, then added.
fn weights<T: Float>(geo: &Geo, gz: &[T], x: &[T], out: &mut [T], pool: &CpuPool) -> crate::Result<()> {
    let len = out.len();
    let rows = geo.n * geo.oh;
    let macs = rows * geo.ow * geo.oc * geo.kw * geo.kh * geo.ic;
    let parts = if macs >= threshold(PAR_PRODUCT) { pool.n_threads.clamp(1, rows.max(1)) } else { 1 };
    let mut sums = super::access::alloc::<T>(len * parts)?;
    let p = Wgt { geo, gz, x };
    let per = rows.div_ceil(parts.max(1));
    let isa = isa();
    par_rows_from(pool, &mut sums, len, 0, |q0, chunk| {
        for (j, dk) in chunk.chunks_mut(len.max(1)).enumerate() {
            let q = q0 + j;
            let span = (q * per).min(rows)..((q + 1) * per).min(rows);
            for r in span {
                let (oy, n) = (r % geo.oh.max(1), r / geo.oh.max(1));
                match isa {
                    // SAFETY: the CPU has these features (`isa`).
                    Isa::Avx512 => unsafe { wgt_row_avx512(&p, oy, n, dk) },
                    // SAFETY: as above.
                    Isa::Avx2 => unsafe { wgt_row_avx2(&p, oy, n, dk) },
                    Isa::Portable => wgt_row::<T, false, 4, 0>(&p, oy, n, dk),
                }
            }
        }
    });
    out.fill(T::ZERO);
    for part in sums.chunks_exact(len.max(1)) {
        for (o, &v) in out.iter_mut().zip(part) {
            *o = *o + v;
        }
    }
    Ok(())
}

#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx512f,avx2,fma"))]
// SAFETY: (for callers) only called when the CPU has AVX-512F, AVX2 and FMA.
unsafe fn wgt_row_avx512<T: Float>(p: &Wgt<'_, T>, oy: usize, n: usize, dk: &mut [T]) {
    wgt_row::<T, true, 8, 2>(p, oy, n, dk)
}

#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
// SAFETY: (for callers) only called when the CPU has AVX2 and FMA.
unsafe fn wgt_row_avx2<T: Float>(p: &Wgt<'_, T>, oy: usize, n: usize, dk: &mut [T]) {
    wgt_row::<T, true, 8, 1>(p, oy, n, dk)
}

/// Adds output row `oy` of sample `n` to the kernel's gradient `dk`.
#[inline(always)]
fn wgt_row<T: Float, const FMA: bool, const P: usize, const V: u8>(p: &Wgt<'_, T>, oy: usize, n: usize, dk: &mut [T]) {
    let g = p.geo;
    let grow = (n * g.oh + oy) * g.ow * g.oc;
    for ky in 0..g.kh {
        let Some(iy) = g.row(oy, ky) else { continue };
        let base = (n * g.h + iy) * g.w * g.ic;
        let mut f0 = 0;
        while f0 < g.oc {
            let left = g.oc - f0;
            f0 += if left >= 16 && (V == 2 || V == 0) {
                wgt_chunk::<T, FMA, P, 16, V>(p, grow, base, ky, f0, dk);
                16
            } else if left >= 8 {
                wgt_chunk::<T, FMA, P, 8, V>(p, grow, base, ky, f0, dk);
                8
            } else if left >= 4 {
                wgt_chunk::<T, FMA, P, 4, V>(p, grow, base, ky, f0, dk);
                4
            } else {
                wgt_chunk::<T, FMA, P, 1, V>(p, grow, base, ky, f0, dk);
                1
            };
        }
        // Border columns: each tap where it lies inside.
        let (lo, hi) = g.inner;
        for ox in (0..lo).chain(hi..g.ow) {
            let gv = p.gz.get(grow + ox * g.oc..).unwrap_or(&[]);
            for kx in 0..g.kw {
                let Some(ix) = g.col(ox, kx) else { continue };
                let xs = p.x.get(base + ix * g.ic..).unwrap_or(&[]);
                for (i, &v) in xs.iter().take(g.ic).enumerate() {
                    let at = (i + g.ic * (kx + g.kw * ky)) * g.oc;
                    let d = dk.get_mut(at..).unwrap_or(&mut []);
                    for (s, &gw) in d.iter_mut().zip(gv.iter().take(g.oc)) {
                        *s = madd::<T, FMA>(v, gw, *s);
                    }
                }
            }
        }
    }
}

/// Output channels f0..f0 + F, row taps in blocks of `P`, over the inner
/// columns of one input row (`base`) at kernel row `ky`.
#[inline(always)]
fn wgt_chunk<T: Float, const FMA: bool, const P: usize, const F: usize, const V: u8>(p: &Wgt<'_, T>, grow: usize, base: usize, ky: usize, f0: usize, dk: &mut [T]) {
    let g = p.geo;
    let taps = g.uoff.len();
    let mut u0 = 0;
    while u0 < taps {
        let left = taps - u0;
        u0 += if left >= P {
            wgt_inner::<T, FMA, P, F, V>(p, grow, base, ky, f0, u0, dk);
            P
        } else if left >= 4 {
            wgt_inner::<T, FMA, 4, F, V>(p, grow, base, ky, f0, u0, dk);
            4
        } else if left >= 2 {
            wgt_inner::<T, FMA, 2, F, V>(p, grow, base, ky, f0, u0, dk);
            2
        } else {
            wgt_inner::<T, FMA, 1, F, V>(p, grow, base, ky, f0, u0, dk);
            1
        };
    }
}

/// Row taps u0..u0 + P for output channels f0..f0 + F, summed over the
/// inner columns, added to `dk`.
#[inline(always)]
fn wgt_inner<T: Float, const FMA: bool, const P: usize, const F: usize, const V: u8>(p: &Wgt<'_, T>, grow: usize, base: usize, ky: usize, f0: usize, u0: usize, dk: &mut [T]) {
    let g = p.geo;
    let offs: [i64; P] = std::array::from_fn(|t| g.uoff.get(u0 + t).copied().unwrap_or(0));
    let acc = wgt_sums::<T, FMA, P, F, V>(p, grow, base, f0, &offs);
    let row = g.uoff.len();
    for (t, a) in acc.iter().enumerate() {
        let at = (ky * row + u0 + t) * g.oc + f0;
        let Some(d) = dk.get_mut(at..).and_then(|d| d.first_chunk_mut::<F>()) else { continue };
        for (s, &v) in d.iter_mut().zip(a) {
            *s = *s + v;
        }
    }
}

/// The sums over the inner columns of one input row (`base`) for the row
/// taps at offsets `offs` and output channels f0..f0 + F.
#[inline(always)]
// BOUNDS-FN: the geometry's steps are [i64; 2] indexed by literals; `x` is read unchecked only inside `Geo::inner` (see the SAFETY notes).
fn wgt_sums<T: Float, const FMA: bool, const P: usize, const F: usize, const V: u8>(p: &Wgt<'_, T>, grow: usize, base: usize, f0: usize, offs: &[i64; P]) -> [[T; F]; P] {
    let g = p.geo;
    let (lo, hi) = g.inner;
    let step = g.s[0] * g.ic as i64;
    let mut xb = base as i64 + g.ix0(lo) * g.ic as i64;
    #[cfg(target_arch = "x86_64")]
    if V > 0 && (F == 8 || (F == 16 && V == 2)) {
        if let (Some(gz), Some(x)) = (T::as_f32(p.gz), T::as_f32(p.x)) {
            let b = super::conv_cl_x86::WBlock { gz, x, g0: grow + lo * g.oc + f0, xb, oc: g.oc, step, count: hi - lo };
            // SAFETY: V says the CPU has the block's features (`isa`);
            // columns lo..hi lie in `Geo::inner` (every tap's read inside
            // `x`, as below) and channels f0..f0 + F exist (`wgt_row`).
            return if F == 16 { widen(unsafe { super::conv_cl_x86::wgt16::<P>(&b, offs) }) } else { widen(unsafe { super::conv_cl_x86::wgt8::<P>(&b, offs) }) };
        }
    }
    let mut acc = [[T::ZERO; F]; P];
    for ox in lo..hi {
        let gv = lanes::<T, F>(p.gz, grow + ox * g.oc + f0);
        for (a, &o) in acc.iter_mut().zip(offs) {
            let i = (xb + o) as usize;
            debug_assert!(i < p.x.len());
            // SAFETY: column ox lies in `Geo::inner`, so its row tap u0 + t
            // reads a column inside 0..W of the input row `base` (inside
            // 0..H of a sample < N): index < x.len().
            let v = unsafe { *p.x.get_unchecked(i) };
            for (s, &gw) in a.iter_mut().zip(&gv) {
                *s = madd::<T, FMA>(v, gw, *s);
            }
        }
        xb += step;
    }
    acc
}
