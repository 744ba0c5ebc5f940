//! 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3):
//! each 2x2 block of outputs comes from a 4x4 block of input with 16
//! multiplications per input channel instead of 36.
//!
//! With d a 4x4 input tile, g a 3x3 kernel and
//! `B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]`,
//! `G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]`,
//! `A^T = [1 1 1 0; 0 1 -1 -1]`, the 2x2 output is
//! `A^T [(G g G^T) .* (B^T d B)] A`. The weights are transformed once, at
//! load; summed over input channels, the element-wise products become 16
//! matrix products (output channels x input channels times input channels
//! x tiles), which run on the convolution GEMM.
//!
//! The image is done in bands of tile rows small enough for the
//! transformed input and the products to stay in cache; bands run on the
//! net's threads.

use super::conv::border;
use super::gemm::{conv_gemm_band, BView, Epi, PackedA};
use crate::base::simd;
use crate::ncnn::layer::Activation;
use crate::ncnn::{par, Mat};
use std::cell::RefCell;

/// Bytes of transformed input and products a band aims at (they share the
/// L2 cache with the weights)...
const BAND_BYTES: usize = 256 << 10;
/// ...unless that is fewer tiles than this (short products run slowly).
const BAND_MIN_TILES: usize = 64;

/// Transformed weights: 16 packed (output x input channel) matrices.
#[derive(Clone, Debug, Default)]
pub struct Winograd {
    m: usize,
    c: usize,
    u: Vec<PackedA>,
}

thread_local! {
    /// Per thread: transformed input (16 x c x tiles) and products
    /// (16 x m x tiles) of the band at hand, and rows of even and odd
    /// input columns.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

impl Winograd {
    /// Transform weights stored [out][in][3][3].
    // BOUNDS-FN: w holds m * c * 9 (asserted), o < m and i < c; gg is 4 x 3
    // (col < 3), u 16 rows of m * c (4 * r + col < 16).
    pub fn new(w: &[f32], m: usize, c: usize) -> Winograd {
        assert_eq!(w.len(), m * c * 9, "Winograd weights");
        // u[xi][o][i], xi = 4 * row + column of the 4x4 transformed kernel.
        let mut u = vec![vec![0.0f32; m * c]; 16];
        for o in 0..m {
            for i in 0..c {
                let g = &w[(o * c + i) * 9..(o * c + i) * 9 + 9];
                // G g: 4 x 3.
                let mut gg = [[0.0f32; 3]; 4];
                for col in 0..3 {
                    let (g0, g1, g2) = (g[col], g[3 + col], g[6 + col]);
                    gg[0][col] = g0;
                    gg[1][col] = 0.5 * (g0 + g1 + g2);
                    gg[2][col] = 0.5 * (g0 - g1 + g2);
                    gg[3][col] = g2;
                }
                // (G g) G^T: 4 x 4.
                for (r, row) in gg.iter().enumerate() {
                    let (a, b, cc) = (row[0], row[1], row[2]);
                    let t = [a, 0.5 * (a + b + cc), 0.5 * (a - b + cc), cc];
                    for (col, v) in t.iter().enumerate() {
                        u[4 * r + col][o * c + i] = *v;
                    }
                }
            }
        }
        Winograd { m, c, u: u.iter().map(|a| PackedA::new(a, m, c)).collect() }
    }

    /// The convolution of `x` (3-d, `self.c` channels), bordered with
    /// `pad_value` by `top` rows and `left` columns (and as many at the
    /// bottom and right as `outh` and `outw` imply), into `out` (`self.m`
    /// planes of `outw` x `outh`), adding `bias` (empty: none) and applying
    /// `act`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(&self, x: &Mat, top: usize, left: usize, pad_value: f32, bias: &[f32], act: &Activation, out: &mut [f32], outw: usize, outh: usize) {
        let (th, tw) = (outh.div_ceil(2), outw.div_ceil(2));
        if th == 0 || tw == 0 {
            return;
        }
        assert!(out.len() >= self.m * outw * outh, "convolution output buffer too small");
        // Border the input to whole tiles: rows and columns past the
        // padded input only feed outputs that are not kept.
        let (hp, wp) = (2 * th + 2, 2 * tw + 2);
        assert!(hp >= x.h + top && wp >= x.w + left, "Winograd output smaller than its input");
        let xp = border(x, top, hp - x.h - top, left, wp - x.w - left, pad_value);
        let per_tile = 16 * (self.c + self.m) * 4;
        let band = ((BAND_BYTES / per_tile).max(BAND_MIN_TILES) / tw).clamp(1, th);
        let bands = th.div_ceil(band);
        let dst = super::gemm::SendPtr(out.as_mut_ptr());
        par::range(bands, |bi| {
            let (ty0, ty1) = (bi * band, ((bi + 1) * band).min(th));
            // SAFETY: band bi writes output rows 2*ty0 .. 2*ty1 (clipped to
            // outh) of every plane, which no other band writes.
            unsafe { self.band(&xp, ty0, ty1, tw, bias, act, dst, outw, outh) };
        });
    }

    /// Tile rows ty0..ty1.
    ///
    /// # Safety
    /// `out` must address `self.m` planes of `outw` x `outh` values, whose
    /// rows 2*ty0..2*ty1 nobody else touches meanwhile.
    // BOUNDS-FN: v and prod are grown to the lengths they are sliced to.
    #[allow(clippy::too_many_arguments)]
    unsafe fn band(&self, xp: &Mat, ty0: usize, ty1: usize, tw: usize, bias: &[f32], act: &Activation, out: super::gemm::SendPtr, outw: usize, outh: usize) {
        let (m, c) = (self.m, self.c);
        let nt = (ty1 - ty0) * tw;
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let (v, prod, eo) = &mut *s;
            for (buf, len) in [(&mut *v, 16 * c * nt), (&mut *prod, 16 * m * nt), (&mut *eo, 8 * (tw + 1))] {
                if buf.len() < len {
                    buf.resize(len, 0.0);
                }
            }
            let v = &mut v[..16 * c * nt];
            input_transform(xp, ty0, ty1, tw, v, eo);
            let none = Activation::default();
            let ep = Epi { bias: &[], act: &none };
            // Rows of the transformed input for element xi: (xi * c + i) * nt.
            let mut offs: Vec<usize> = (0..c).map(|i| i * nt).collect();
            for (xi, u) in self.u.iter().enumerate() {
                if xi > 0 {
                    offs.iter_mut().for_each(|o| *o += c * nt);
                }
                let bv = BView { base: v, offs: &offs, rs: nt };
                conv_gemm_band(u, &bv, nt, 1, nt, prod.as_mut_ptr().add(xi * m * nt), &ep);
            }
            let prod = &prod[..16 * m * nt];
            output_transform(prod, m, ty0, ty1, tw, bias, act, out, outw, outh);
        })
    }
}

/// `v[(xi * c + ch) * nt + t] = (B^T d B)[xi]` for every channel and tile
/// t of tile rows ty0..ty1 (`eo` holds 8 rows of `tw + 1`: the even and
/// odd columns of the 4 input rows of a tile row).
// Bounds: xp is bordered to 2 * th + 2 rows of wp (forward) and ty < ty1 <= th,
// so rows 2ty..2ty + 4 exist; ch < xp.c; eo holds 8 rows of n and v 16 * c
// rows of nt (asserted) with xi < 16, t0 < nt.
// BOUNDS-FN: every index is in range as said just above.
#[inline(always)]
fn input_transform(xp: &Mat, ty0: usize, ty1: usize, tw: usize, v: &mut [f32], eo: &mut [f32]) {
    let (c, wp) = (xp.c, xp.w);
    let nt = (ty1 - ty0) * tw;
    let n = tw + 1;
    assert!(v.len() >= 16 * c * nt && eo.len() >= 8 * n && wp >= 2 * n);
    for ch in 0..c {
        let plane = &xp.data[ch * xp.cstep()..];
        for ty in ty0..ty1 {
            // Even and odd columns of rows 2ty .. 2ty+4.
            for i in 0..4 {
                let row = &plane[(2 * ty + i) * wp..(2 * ty + i) * wp + 2 * n];
                let (e, o) = eo[2 * i * n..(2 * i + 2) * n].split_at_mut(n);
                for ((e, o), pair) in e.iter_mut().zip(o.iter_mut()).zip(row.chunks_exact(2)) {
                    *e = pair[0];
                    *o = pair[1];
                }
            }
            let t0 = (ty - ty0) * tw;
            // d[i][j] for tile tx: even columns of row i at tx (j = 0) and
            // tx + 1 (j = 2), odd columns at tx (j = 1) and tx + 1 (j = 3).
            let src: [*const f32; 16] = std::array::from_fn(|ij| {
                let (i, j) = (ij / 4, ij % 4);
                eo[(2 * i + j % 2) * n + j / 2..].as_ptr()
            });
            let dst: [*mut f32; 16] = std::array::from_fn(|xi| v[(xi * c + ch) * nt + t0..].as_mut_ptr());
            // SAFETY: every source row holds tw + 1 values from its start
            // (j / 2 <= 1 of them skipped), every destination tw from t0
            // (lengths checked above).
            unsafe { in_tiles(&src, &dst, tw) };
        }
    }
}

/// The input transform of `tw` tiles: `dst[xi][tx]` from `src[4i + j][tx]`.
///
/// # Safety
/// Every `src` must be readable and every `dst` writable for `tw` values.
// BOUNDS-FN: src and dst are [_; 16] arrays indexed by ij, xi < 16.
unsafe fn in_tiles(src: &[*const f32; 16], dst: &[*mut f32; 16], tw: usize) {
    let mut tx = 0;
    #[cfg(target_arch = "x86_64")]
    if simd::avx2_fma() {
        tx = in_tiles_avx2(src, dst, tw);
    }
    for tx in tx..tw {
        let d: [f32; 16] = std::array::from_fn(|ij| *src[ij].add(tx));
        let out = in_tile(&d, |a, b| a + b, |a, b| a - b);
        for (xi, v) in out.iter().enumerate() {
            *dst[xi].add(tx) = *v;
        }
    }
}

/// `B^T d B` of one tile (or of one lane of several), with the given sum
/// and difference.
// BOUNDS-FN: d is a [T; 16] indexed by j + 12 < 16 (j < 4); r is 4 x 4 (xi < 16).
#[inline(always)]
fn in_tile<T: Copy>(d: &[T; 16], add: impl Fn(T, T) -> T, sub: impl Fn(T, T) -> T) -> [T; 16] {
    // B^T d: rows r0 = d0 - d2, r1 = d1 + d2, r2 = d2 - d1, r3 = d1 - d3;
    // then the same on the columns.
    let r: [[T; 4]; 4] = [
        std::array::from_fn(|j| sub(d[j], d[8 + j])),
        std::array::from_fn(|j| add(d[4 + j], d[8 + j])),
        std::array::from_fn(|j| sub(d[8 + j], d[4 + j])),
        std::array::from_fn(|j| sub(d[4 + j], d[12 + j])),
    ];
    std::array::from_fn(|xi| {
        let q = r[xi / 4];
        match xi % 4 {
            0 => sub(q[0], q[2]),
            1 => add(q[1], q[2]),
            2 => sub(q[2], q[1]),
            _ => sub(q[1], q[3]),
        }
    })
}

/// `in_tiles` eight tiles at a time; returns how many tiles it did.
///
/// # Safety
/// As for `in_tiles`, on a CPU with AVX2 and FMA.
// BOUNDS-FN: src and dst are [_; 16] arrays indexed by ij, xi < 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn in_tiles_avx2(src: &[*const f32; 16], dst: &[*mut f32; 16], tw: usize) -> usize {
    use std::arch::x86_64::*;
    let n = tw / 8 * 8;
    for tx in (0..n).step_by(8) {
        let d: [__m256; 16] = std::array::from_fn(|ij| _mm256_loadu_ps(src[ij].add(tx)));
        let out = in_tile(&d, |a, b| _mm256_add_ps(a, b), |a, b| _mm256_sub_ps(a, b));
        for (xi, v) in out.iter().enumerate() {
            _mm256_storeu_ps(dst[xi].add(tx), *v);
        }
    }
    n
}

/// Output rows 2*ty0 .. 2*ty1 (within outh) of every plane:
/// `A^T M A + bias`, then the activation.
///
/// # Safety
/// `out` must address `m` planes of `outw` x `outh` values whose rows
/// 2*ty0..2*ty1 nobody else touches meanwhile.
// Bounds: prod holds 16 * m * nt (asserted), xi < 16, o < m, t0 < nt; y
// holds 4 rows of tw; the row has outw values and ya[pairs] is read only
// when outw is odd, where tw = pairs + 1.
// BOUNDS-FN: every index is in range as said just above.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn output_transform(prod: &[f32], m: usize, ty0: usize, ty1: usize, tw: usize, bias: &[f32], act: &Activation, out: super::gemm::SendPtr, outw: usize, outh: usize) {
    let nt = (ty1 - ty0) * tw;
    assert!(prod.len() >= 16 * m * nt);
    let mut y = vec![0.0f32; 4 * tw];
    for o in 0..m {
        let bo = bias.get(o).copied().unwrap_or(0.0);
        for ty in ty0..ty1 {
            let t0 = (ty - ty0) * tw;
            let src: [*const f32; 16] = std::array::from_fn(|xi| prod[(xi * m + o) * nt + t0..].as_ptr());
            out_tiles(&src, y.as_mut_ptr(), tw, bo);
            for a in 0..2 {
                let oy = 2 * ty + a;
                if oy >= outh {
                    continue;
                }
                let (ya, yb) = (&y[2 * a * tw..(2 * a + 1) * tw], &y[(2 * a + 1) * tw..(2 * a + 2) * tw]);
                // SAFETY: row oy of plane o is this band's (see `band`).
                let row = std::slice::from_raw_parts_mut(out.at((o * outh + oy) * outw), outw);
                let pairs = outw / 2;
                for ((pair, a), b) in row.chunks_exact_mut(2).zip(ya).zip(yb) {
                    pair[0] = *a;
                    pair[1] = *b;
                }
                if outw % 2 == 1 {
                    row[outw - 1] = ya[pairs];
                }
                if act.kind != 0 {
                    act.apply(row);
                }
            }
        }
    }
}

/// The output transform of `tw` tiles plus `bias`: rows y00, y01, y10,
/// y11 of `tw` values each at `y`, from `src[xi][tx]`.
///
/// # Safety
/// Every `src` must be readable for `tw` values, `y` writable for 4 * tw.
// BOUNDS-FN: src is a [_; 16] array indexed by xi < 16.
unsafe fn out_tiles(src: &[*const f32; 16], y: *mut f32, tw: usize, bias: f32) {
    let mut tx = 0;
    #[cfg(target_arch = "x86_64")]
    if simd::avx2_fma() {
        tx = out_tiles_avx2(src, y, tw, bias);
    }
    for tx in tx..tw {
        let q: [f32; 16] = std::array::from_fn(|xi| *src[xi].add(tx));
        let r = out_tile(&q, bias, |a, b| a + b, |a, b| a - b);
        for (k, v) in r.iter().enumerate() {
            *y.add(k * tw + tx) = *v;
        }
    }
}

/// `A^T M A + bias` of one tile (or lane): y00, y01, y10, y11.
// BOUNDS-FN: q is a [T; 16] indexed by j + 12 < 16 (j < 4); s0, s1 have 4.
#[inline(always)]
fn out_tile<T: Copy>(q: &[T; 16], bias: T, add: impl Fn(T, T) -> T, sub: impl Fn(T, T) -> T) -> [T; 4] {
    // A^T M: two rows of 4, then (.) A.
    let s0: [T; 4] = std::array::from_fn(|j| add(add(q[j], q[4 + j]), q[8 + j]));
    let s1: [T; 4] = std::array::from_fn(|j| sub(sub(q[4 + j], q[8 + j]), q[12 + j]));
    [
        add(add(add(s0[0], s0[1]), s0[2]), bias),
        add(sub(sub(s0[1], s0[2]), s0[3]), bias),
        add(add(add(s1[0], s1[1]), s1[2]), bias),
        add(sub(sub(s1[1], s1[2]), s1[3]), bias),
    ]
}

/// `out_tiles` eight tiles at a time; returns how many tiles it did.
///
/// # Safety
/// As for `out_tiles`, on a CPU with AVX2 and FMA.
// BOUNDS-FN: src is a [_; 16] array indexed by xi < 16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn out_tiles_avx2(src: &[*const f32; 16], y: *mut f32, tw: usize, bias: f32) -> usize {
    use std::arch::x86_64::*;
    let n = tw / 8 * 8;
    let b = _mm256_set1_ps(bias);
    for tx in (0..n).step_by(8) {
        let q: [__m256; 16] = std::array::from_fn(|xi| _mm256_loadu_ps(src[xi].add(tx)));
        let r = out_tile(&q, b, |a, b| _mm256_add_ps(a, b), |a, b| _mm256_sub_ps(a, b));
        for (k, v) in r.iter().enumerate() {
            _mm256_storeu_ps(y.add(k * tw + tx), *v);
        }
    }
    n
}

/// Whether a convolution with these parameters and input channels runs
/// by Winograd: 3x3, stride 1, no dilation, enough channels for the
/// transforms to pay off.
pub fn suits(p: &super::conv::ConvParams, inch: usize) -> bool {
    (p.kw, p.kh, p.sw, p.sh, p.dw, p.dh) == (3, 3, 1, 1, 1, 1) && p.group == 1 && inch >= MIN_CHANNELS && p.num_output >= MIN_CHANNELS
}

/// Fewest input (and output) channels for Winograd.
pub const MIN_CHANNELS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct 3x3 convolution of `x` bordered by (t, b, l, r) with `pv`.
    fn direct(x: &Mat, w: &[f32], bias: &[f32], m: usize, pads: (usize, usize, usize, usize), pv: f32, act: &Activation) -> (Vec<f32>, usize, usize) {
        let (t, b, l, r) = pads;
        let xp = border(x, t, b, l, r, pv);
        let (outw, outh) = (xp.w - 2, xp.h - 2);
        let mut out = vec![0.0f32; m * outw * outh];
        for o in 0..m {
            for y in 0..outh {
                for xx in 0..outw {
                    let mut s = bias.get(o).copied().unwrap_or(0.0);
                    for c in 0..x.c {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                s += xp.data[c * xp.cstep() + (y + ky) * xp.w + xx + kx] * w[((o * x.c + c) * 3 + ky) * 3 + kx];
                            }
                        }
                    }
                    out[(o * outh + y) * outw + xx] = act.apply1(s);
                }
            }
        }
        (out, outw, outh)
    }

    #[test]
    fn matches_direct_convolution_for_sizes_borders_and_activations() {
        // (w, h, channels, outputs, borders, activation kind and params)
        let cases: [(usize, usize, usize, usize, (usize, usize, usize, usize), i32, Vec<f32>); 6] = [
            (8, 8, 8, 8, (1, 1, 1, 1), 0, vec![]),
            (13, 9, 9, 11, (1, 1, 1, 1), 1, vec![]),
            (7, 12, 16, 8, (0, 0, 0, 0), 3, vec![-0.5, 0.5]),
            (30, 5, 8, 13, (2, 0, 1, 3), 4, vec![]),
            (3, 3, 8, 8, (0, 0, 0, 0), 0, vec![]),
            (57, 41, 12, 9, (1, 1, 1, 1), 2, vec![0.1]),
        ];
        for (w, h, c, m, pads, kind, params) in cases {
            let x = Mat::from_shape(&[w, h, c], (0..w * h * c).map(|i| ((i * 7919 % 211) as f32 / 105.5) - 1.0).collect::<Vec<f32>>()).unwrap();
            let wt: Vec<f32> = (0..m * c * 9).map(|i| ((i * 104729 % 97) as f32 / 48.5) - 1.0).collect();
            let bias: Vec<f32> = if kind == 0 { vec![] } else { (0..m).map(|i| i as f32 * 0.1 - 0.3).collect() };
            let act = Activation { kind, params: params.clone() };
            let (want, outw, outh) = direct(&x, &wt, &bias, m, pads, 0.25, &act);
            let wg = Winograd::new(&wt, m, c);
            for threads in [1usize, 2] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for portable in [false, true] {
                    let mut got = vec![f32::NAN; m * outw * outh];
                    let mut run = || pool.install(|| wg.forward(&x, pads.0, pads.2, 0.25, &bias, &act, &mut got, outw, outh));
                    if portable { crate::base::simd::portable(&mut run) } else { run() }
                    for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                        assert!((g - e).abs() <= 1e-4 * (1.0 + e.abs()), "{w}x{h}x{c} -> {m} {pads:?} act {kind} threads {threads}: value {i}: {g} vs {e}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::ncnn::layers::kernels::conv::{conv_gemm, ConvParams};

    /// Winograd against the direct GEMM on one thread, on 3x3 padded
    /// convolutions (GGMLR_WINO_SIZE="side,channels,outputs" for one shape):
    /// `cargo test --release winograd_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn winograd_speed() {
        let shapes: Vec<(usize, usize, usize)> = match std::env::var("GGMLR_WINO_SIZE") {
            Ok(s) => {
                let v: Vec<usize> = s.split(',').map(|d| d.trim().parse().unwrap()).collect();
                vec![(v[0], v[1], v[2])]
            }
            Err(_) => vec![(55, 8, 16), (27, 16, 32), (56, 16, 16), (56, 32, 32), (28, 64, 64), (112, 16, 16)],
        };
        for (side, c, m) in shapes {
            let text = format!("7767517\n1 1\nConvolution c 0 1 x 0={m} 1=3 4=1 5=1 6={}\n", m * c * 9);
            let spec = crate::ncnn::param::parse_text(&text).unwrap();
            let p = ConvParams::new(&spec.layers[0].params, false).unwrap();
            let x = Mat::from_shape(&[side, side, c], (0..side * side * c).map(|i| (i % 13) as f32 * 0.1).collect::<Vec<_>>()).unwrap();
            let wt: Vec<f32> = (0..m * c * 9).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
            let bias = vec![0.1f32; m];
            let a = PackedA::new(&wt, m, c * 9);
            let wg = Winograd::new(&wt, m, c);
            let mut out = vec![0.0f32; m * side * side];
            let time = |f: &mut dyn FnMut()| {
                let mut best = f64::INFINITY;
                for _ in 0..200 {
                    let t = std::time::Instant::now();
                    crate::ncnn::par::run_sequential(&mut *f);
                    best = best.min(t.elapsed().as_secs_f64());
                }
                best * 1e3
            };
            let direct = time(&mut || conv_gemm(&x, &p, 0, c, &a, &mut out, side, side, &Epi { bias: &bias, act: &p.act }));
            let wino = time(&mut || wg.forward(&x, 1, 1, 0.0, &bias, &p.act, &mut out, side, side));
            println!("{side}x{side}, {c} -> {m}: direct {direct:.3} ms, winograd {wino:.3} ms ({:.2}x)", direct / wino);
        }
    }
}
