//! The inner blocks of the channels-innermost convolution (`conv_cl`) in
//! f32 vector instructions: 16 output channels in one AVX-512 register or
//! 8 in one AVX2 register, each input value broadcast to all lanes. The
//! callers check that every read lies inside the input (`Geo::inner`) and
//! that the F channels from f0 exist.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Where a block reads: input rows (first value of each row, first kernel
/// value of the row's taps), the offset `xo` of the block's first position
/// in a row, its first output channel `f0`, the row taps' offsets, the
/// kernel's step between taps (OC) and the input's between positions.
pub struct Block<'a> {
    pub x: &'a [f32],
    pub k: &'a [f32],
    pub rows: &'a [(i64, usize)],
    pub xo: i64,
    pub f0: usize,
    pub uoff: &'a [i64],
    pub oc: usize,
    pub step: usize,
}

macro_rules! fwd_block {
    ($name:ident, $feat:literal, $v:ty, $n:literal, $zero:ident, $load:ident, $set1:ident, $fma:ident, $store:ident) => {
        /// The sums of P positions for $n output channels.
        ///
        /// # Safety
        /// The CPU has the features; every read `x[xb + uo + j step]` and
        /// `k[wb + f0 + u oc .. + $n]` of the block lies inside its slice.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feat)]
        pub unsafe fn $name<const P: usize>(b: &Block<'_>) -> [[f32; $n]; P] {
            let mut acc: [$v; P] = [$zero(); P];
            for &(xb, wb) in b.rows {
                for (u, &uo) in b.uoff.iter().enumerate() {
                    // SAFETY: inside `k` (the caller's contract).
                    let w = unsafe { $load(b.k.as_ptr().add(wb + b.f0 + u * b.oc)) };
                    // SAFETY: xb + xo + uo >= 0 and the P reads below lie inside `x`.
                    let xp = unsafe { b.x.as_ptr().offset((xb + b.xo + uo) as isize) };
                    for (j, a) in acc.iter_mut().enumerate() {
                        // SAFETY: as above.
                        *a = $fma($set1(unsafe { *xp.add(j * b.step) }), w, *a);
                    }
                }
            }
            let mut out = [[0f32; $n]; P];
            for (o, a) in out.iter_mut().zip(&acc) {
                // SAFETY: `o` holds $n values.
                unsafe { $store(o.as_mut_ptr(), *a) };
            }
            out
        }
    };
}

fwd_block!(fwd16, "avx512f", __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps);
fwd_block!(fwd8, "avx2,fma", __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps);

/// Where a kernel-gradient block reads: the output gradient from `g0`
/// (position lo's channel f0, `oc` apart per position), the input from
/// `xb` (position lo's tap 0, `step` apart), the P taps' offsets, and the
/// number of positions.
pub struct WBlock<'a> {
    pub gz: &'a [f32],
    pub x: &'a [f32],
    pub g0: usize,
    pub xb: i64,
    pub oc: usize,
    pub step: i64,
    pub count: usize,
}

macro_rules! wgt_block {
    ($name:ident, $feat:literal, $v:ty, $n:literal, $zero:ident, $load:ident, $set1:ident, $fma:ident, $store:ident) => {
        /// The sums over the block's positions for P taps and $n channels.
        ///
        /// # Safety
        /// The CPU has the features; every read `gz[g0 + i oc .. + $n]`
        /// and `x[xb + i step + offs[t]]` (i < count) lies inside its slice.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feat)]
        pub unsafe fn $name<const P: usize>(b: &WBlock<'_>, offs: &[i64; P]) -> [[f32; $n]; P] {
            let mut acc: [$v; P] = [$zero(); P];
            let mut xb = b.xb;
            for i in 0..b.count {
                // SAFETY: inside `gz` (the caller's contract).
                let gv = unsafe { $load(b.gz.as_ptr().add(b.g0 + i * b.oc)) };
                for (a, &o) in acc.iter_mut().zip(offs) {
                    // SAFETY: inside `x` (the caller's contract).
                    *a = $fma($set1(unsafe { *b.x.as_ptr().offset((xb + o) as isize) }), gv, *a);
                }
                xb += b.step;
            }
            let mut out = [[0f32; $n]; P];
            for (o, a) in out.iter_mut().zip(&acc) {
                // SAFETY: `o` holds $n values.
                unsafe { $store(o.as_mut_ptr(), *a) };
            }
            out
        }
    };
}

wgt_block!(wgt16, "avx512f", __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps);
wgt_block!(wgt8, "avx2,fma", __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps);
