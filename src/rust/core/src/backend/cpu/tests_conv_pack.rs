//! The f32 convolution on the packed register kernels (`conv_pack`) against
//! sums written the plain way in f64, one output value at a time with every
//! tap bounds-tested: strides, paddings and dilations; output channel
//! counts that are not multiples of the 8-column panels; images whose
//! pixels are not a multiple of the 48-row panels and span several bands;
//! kernels deeper than one packed block; 1 and 2 threads. On a CPU without
//! AVX-512 the tests check that the shape is not taken (and pass through
//! the `gemm` crate's path, which the same sums check). Stride 1 runs on
//! the wide rows of `conv_shift`, other strides on `conv_pack`'s unfolding.

use super::access::Src;
use super::conv_gemm::Shape;
use super::matmul::GemmFloat;
use super::par::CpuPool;
use super::tests_nn::vals;
use std::borrow::Cow;

/// [kw, kh, ic, oc, w, h, n, s0, s1, p0, p1, d0, d1]
const CASES: [[usize; 13]; 8] = [
    // 576 deep (two blocks of 288), 3136 pixels (7 bands), 64 channels
    [3, 3, 64, 64, 56, 56, 2, 1, 1, 1, 1, 1, 1],
    // 13 channels (a short panel), 10 x 9 pixels
    [3, 3, 5, 13, 10, 9, 2, 1, 1, 1, 1, 1, 1],
    // strides 2 and 1, padding 2 and 0, dilation 1 and 2
    [3, 2, 7, 16, 23, 19, 1, 2, 1, 2, 0, 1, 2],
    // 5 x 5 kernel wider than part of the padding, 1031 deep (three blocks)
    [5, 5, 41, 9, 17, 15, 1, 1, 1, 2, 2, 1, 1],
    // 1 x 1, stride 3
    [1, 1, 32, 24, 30, 20, 3, 3, 3, 0, 0, 1, 1],
    // a kernel larger than the padded input in x: columns all padding
    [7, 3, 4, 8, 2, 12, 1, 1, 1, 3, 1, 1, 1],
    // stride 1 across, 2 down (the unfolding's contiguous copies)
    [3, 3, 6, 16, 15, 14, 2, 1, 2, 1, 1, 1, 1],
    // stride 1, dilations 2 and 3 (the wide rows' taps spread out)
    [3, 3, 8, 8, 20, 18, 1, 1, 1, 2, 1, 2, 3],
];

fn out_size(i: usize, k: usize, s: usize, p: usize, d: usize) -> usize {
    (i + 2 * p - d * (k - 1) - 1) / s + 1
}

/// out[ox, oy, oc, n] by the definition, in f64.
fn naive(c: &[usize; 13], k: &[f32], x: &[f32]) -> (Vec<f64>, [usize; 4]) {
    let [kw, kh, ic, oc, w, h, n, s0, s1, p0, p1, d0, d1] = *c;
    let (ow, oh) = (out_size(w, kw, s0, p0, d0), out_size(h, kh, s1, p1, d1));
    let mut out = vec![0.0; ow * oh * oc * n];
    for b in 0..n {
        for o in 0..oc {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0.0f64;
                    for i in 0..ic {
                        for ky in 0..kh {
                            let iy = (oy * s1 + ky * d1) as i64 - p1 as i64;
                            for kx in 0..kw {
                                let ix = (ox * s0 + kx * d0) as i64 - p0 as i64;
                                if iy < 0 || iy >= h as i64 || ix < 0 || ix >= w as i64 {
                                    continue;
                                }
                                let xv = x[ix as usize + w * (iy as usize + h * (i + ic * b))] as f64;
                                acc += k[kx + kw * (ky + kh * (i + ic * o))] as f64 * xv;
                            }
                        }
                    }
                    out[ox + ow * (oy + oh * (o + oc * b))] = acc;
                }
            }
        }
    }
    (out, [ow, oh, oc, n])
}

#[test]
fn packed_convolution_matches_the_sums() {
    for (ci, c) in CASES.iter().enumerate() {
        let [kw, kh, ic, oc, w, h, n, s0, s1, p0, p1, d0, d1] = *c;
        let k: Vec<f32> = vals(kw * kh * ic * oc, 40 + ci as u64).iter().map(|&v| v as f32).collect();
        let x: Vec<f32> = vals(w * h * ic * n, 50 + ci as u64).iter().map(|&v| v as f32).collect();
        let (want, ne) = naive(c, &k, &x);
        let ks = Src::new(Cow::Borrowed(&k[..]), [kw, kh, ic, oc]);
        let xs = Src::new(Cow::Borrowed(&x[..]), [w, h, ic, n]);
        let p = [s0, s1, p0, p1, d0, d1].map(|v| v as i32);
        let sh = Shape::new(&ks, &xs, p, &vec![0f32; want.len()], ne).unwrap();
        let taken = super::conv_pack::wanted(&sh);
        assert_eq!(taken, crate::base::simd::avx512f() && crate::base::simd::avx2_fma(), "case {ci}");
        let depth = (kw * kh * ic) as f64;
        for threads in [1, 2] {
            let pool = CpuPool::new(threads).unwrap();
            // NaN first: every output value must be written.
            let mut got = vec![f32::NAN; want.len()];
            f32::conv_2d(&ks, &xs, p, &mut got, ne, &pool).unwrap();
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                let tol = 1e-6 * depth.sqrt() * 4.0;
                assert!((*g as f64 - w).abs() <= tol, "case {ci}, {threads} threads, value {j}: {g} against {w}");
            }
        }
    }
}

/// GFLOP/s of the 3 x 3, 64 -> 64 channel convolution of 56 x 56 images,
/// batch 8 (`inst/bench/conv.R`'s), on 1 and 2 threads: `cargo test
/// --release -p ggmlr-core conv_pack_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn conv_pack_speed() {
    let (kw, kh, ic, oc, w, h, n) = (3, 3, 64, 64, 56, 56, 8);
    let k: Vec<f32> = vals(kw * kh * ic * oc, 1).iter().map(|&v| v as f32).collect();
    let x: Vec<f32> = vals(w * h * ic * n, 2).iter().map(|&v| v as f32).collect();
    let ks = Src::new(Cow::Borrowed(&k[..]), [kw, kh, ic, oc]);
    let xs = Src::new(Cow::Borrowed(&x[..]), [w, h, ic, n]);
    let ne = [w, h, oc, n];
    let mut out = vec![0f32; w * h * oc * n];
    let flop = 2.0 * (w * h * oc * n * kw * kh * ic) as f64;
    for threads in [1, 2] {
        let pool = CpuPool::new(threads).unwrap();
        let mut best = f64::MAX;
        for _ in 0..40 {
            let t = std::time::Instant::now();
            f32::conv_2d(&ks, &xs, [1, 1, 1, 1, 1, 1], &mut out, ne, &pool).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        eprintln!("{threads} thread(s): {:.2} ms, {:.1} GFLOP/s", best * 1e3, flop / best / 1e9);
    }
}
