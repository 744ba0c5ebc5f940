//! The sliding-window kernels (`window`) against per-element window sums
//! written the plain way, on awkward shapes: strides, dilations, paddings
//! up to past the kernel, odd and tiny sizes, several threads.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use super::window::{depthwise_2d, pool_2d};
use crate::base::float::Float;
use crate::op::PoolOp;
use std::borrow::Cow;

// The references: one window sum per output element, bounds tested per tap.

/// One kernel per channel: out[x, y, c, n] = sum b[x s0 + kx d0 - p0, y s1 + ky d1 - p1, c, n] a[kx, ky, 0, c].
fn naive_depthwise_2d<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, p: [i32; 6], out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let [s0, s1, p0, p1, d0, d1] = p.map(|v| v as i64);
    let (kw, kh) = (a.ne[0], a.ne[1]);
    let (iw, ih) = (b.ne[0] as i64, b.ne[1] as i64);
    let (ow, oh, ch) = (ne[0], ne[1], ne[2]);
    par_rows(pool, out, ow, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ow.max(1)).enumerate() {
            let r = r0 + j;
            let (y, c, n) = (r % oh, (r / oh) % ch, r / (oh * ch));
            for (x, v) in orow.iter_mut().enumerate() {
                let mut acc = T::ZERO;
                for ky in 0..kh {
                    let sy = y as i64 * s1 + ky as i64 * d1 - p1;
                    if sy < 0 || sy >= ih {
                        continue;
                    }
                    for kx in 0..kw {
                        let sx = x as i64 * s0 + kx as i64 * d0 - p0;
                        if sx < 0 || sx >= iw {
                            continue;
                        }
                        acc += b.at(sx as usize, sy as usize, c, n) * a.at(kx, ky, 0, c);
                    }
                }
                *v = acc;
            }
        }
    });
}

/// Max or average over windows; `kp` is [k0, k1, s0, s1], `pad` [p0, p1].
/// Windows skip padded positions; the average divides by the full window size.
fn naive_pool_2d<T: Float>(
    a: &Src<'_, T>,
    op: PoolOp,
    kp: [i32; 4],
    pad: [f32; 2],
    out: &mut [T],
    ne: [usize; 4],
    pool: &CpuPool,
) {
    let [k0, k1, s0, s1] = kp.map(|v| v as i64);
    let (p0, p1) = (pad[0] as i64, pad[1] as i64);
    let (iw, ih) = (a.ne[0] as i64, a.ne[1] as i64);
    let (ow, oh) = (ne[0], ne[1]);
    par_rows(pool, out, ow, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(ow.max(1)).enumerate() {
            let r = r0 + j;
            let y = r % oh;
            let plane = r / oh;
            let (c, n) = (plane % a.ne[2], plane / a.ne[2]);
            for (x, o) in orow.iter_mut().enumerate() {
                let mut acc = match op {
                    PoolOp::Max => T::MIN,
                    PoolOp::Avg => T::ZERO,
                };
                for ky in 0..k1 {
                    let iy = y as i64 * s1 - p1 + ky;
                    if iy < 0 || iy >= ih {
                        continue;
                    }
                    for kx in 0..k0 {
                        let ix = x as i64 * s0 - p0 + kx;
                        if ix < 0 || ix >= iw {
                            continue;
                        }
                        let v = a.at(ix as usize, iy as usize, c, n);
                        match op {
                            PoolOp::Max => acc = acc.max(v),
                            PoolOp::Avg => acc += v,
                        }
                    }
                }
                *o = match op {
                    PoolOp::Max => acc,
                    PoolOp::Avg => acc / T::from_f64((k0 * k1) as f64),
                };
            }
        }
    });
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn depthwise_matches_the_window_sums() {
    let pools = [CpuPool::single(), CpuPool::new(3).unwrap()];
    let mut cases = 0;
    // [iw, ih, ch, n, kw, kh, s0, s1, p0, p1, d0, d1]
    for &[iw, ih, ch, n, kw, kh, s0, s1, p0, p1, d0, d1] in &[
        [7usize, 5, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1],
        [9, 9, 4, 2, 3, 3, 2, 2, 1, 1, 1, 1],
        [13, 6, 5, 1, 3, 2, 3, 1, 2, 0, 2, 3],
        [1, 1, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1],
        [2, 3, 1, 1, 5, 5, 1, 2, 4, 4, 1, 1],
        [31, 17, 3, 2, 5, 3, 2, 3, 2, 1, 1, 2],
        [8, 8, 2, 1, 1, 1, 3, 2, 0, 0, 1, 1],
        [6, 4, 3, 1, 3, 3, 4, 5, 3, 2, 2, 1],
        [64, 3, 16, 1, 3, 3, 1, 1, 1, 1, 1, 1],
        [5, 5, 1, 1, 2, 2, 1, 1, 0, 0, 4, 4],
    ] {
        let ow = (iw + 2 * p0) as i64 - (d0 * (kw - 1)) as i64 - 1;
        let oh = (ih + 2 * p1) as i64 - (d1 * (kh - 1)) as i64 - 1;
        if ow < 0 || oh < 0 {
            continue;
        }
        let (ow, oh) = (ow as usize / s0 + 1, oh as usize / s1 + 1);
        let k = Src::new(Cow::Owned(values(kw * kh * ch, 1)), [kw, kh, 1, ch]);
        let b = Src::new(Cow::Owned(values(iw * ih * ch * n, 2)), [iw, ih, ch, n]);
        let ne = [ow, oh, ch, n];
        let p = [s0, s1, p0, p1, d0, d1].map(|v| v as i32);
        let mut want = vec![f32::NAN; ow * oh * ch * n];
        naive_depthwise_2d(&k, &b, p, &mut want, ne, &pools[0]);
        for pool in &pools {
            let mut got = vec![f32::NAN; want.len()];
            depthwise_2d(&k, &b, p, &mut got, ne, pool);
            assert_eq!(got, want, "depthwise {:?} on {:?}", p, b.ne);
        }
        cases += 1;
    }
    assert!(cases >= 9);
}

#[test]
fn pooling_matches_the_window_maxima_and_means() {
    let pools = [CpuPool::single(), CpuPool::new(3).unwrap()];
    let mut cases = 0;
    // [iw, ih, planes, k0, k1, s0, s1, p0, p1]
    for &[iw, ih, planes, k0, k1, s0, s1, p0, p1] in &[
        [8usize, 8, 3, 2, 2, 2, 2, 0, 0],
        [7, 9, 2, 3, 3, 2, 2, 1, 1],
        [11, 5, 4, 3, 2, 1, 3, 1, 0],
        [1, 1, 1, 1, 1, 1, 1, 0, 0],
        [3, 2, 2, 3, 3, 1, 1, 2, 2],
        [30, 17, 5, 5, 3, 4, 2, 2, 1],
        [4, 4, 1, 2, 2, 5, 5, 1, 1],
        [112, 3, 8, 3, 3, 2, 2, 1, 1],
        // 2 x 2 windows of stride 2 (max: one pass over pairs), odd width
        [9, 6, 2, 2, 2, 2, 2, 0, 0],
        [96, 4, 3, 2, 2, 2, 2, 0, 0],
    ] {
        let ow = (iw + 2 * p0) as i64 - k0 as i64;
        let oh = (ih + 2 * p1) as i64 - k1 as i64;
        if ow < 0 || oh < 0 {
            continue;
        }
        let (ow, oh) = (ow as usize / s0 + 1, oh as usize / s1 + 1);
        let a = Src::new(Cow::Owned(values(iw * ih * planes, 3)), [iw, ih, planes, 1]);
        let ne = [ow, oh, planes, 1];
        let kp = [k0, k1, s0, s1].map(|v| v as i32);
        for op in [PoolOp::Max, PoolOp::Avg] {
            let mut want = vec![f32::NAN; ow * oh * planes];
            naive_pool_2d(&a, op, kp, [p0 as f32, p1 as f32], &mut want, ne, &pools[0]);
            for pool in &pools {
                let mut got = vec![f32::NAN; want.len()];
                pool_2d(&a, op, kp, [p0 as f32, p1 as f32], &mut got, ne, pool);
                assert_eq!(got, want, "{op:?} pool {kp:?} pad ({p0}, {p1}) on {:?}", a.ne);
            }
        }
        cases += 1;
    }
    assert!(cases >= 8);
}
