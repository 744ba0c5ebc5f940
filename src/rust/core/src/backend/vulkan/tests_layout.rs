//! Data-movement and windowed ops (repeat, concat, get_rows, diag_mask_inf,
//! pad, upscale, im2col, pool_2d) against reference loops written here.

use super::test_util::*;
use crate::base::dtype::DType::*;
use crate::op::{Op, PoolOp};

#[test]
fn repeat_concat_get_rows_mask_pad_upscale() {
    let Some(c) = ctx() else { return };
    for dt in [F32, F16] {
        let ane = [3, 2, 2, 1];
        let x: Vec<f32> = values(n_of(ane), 12, -4.0, 4.0).iter().map(|&v| quant(v, dt)).collect();
        let a = upload(&c, &x, ane, dt, true, 1);
        // repeat to [6, 4, 2, 3]
        let rne = [6, 4, 2, 3];
        let out = output(&c, rne, dt);
        let got = run1(&c, &Op::Repeat, &[&a, &out], &out);
        let want: Vec<f32> = (0..n_of(rne))
            .map(|i| {
                let q = coords(rne, i);
                x[lin(ane, [q[0] % 3, q[1] % 2, q[2] % 2, 0])]
            })
            .collect();
        assert_close(&got, &want, 0.0, 0.0, "REPEAT");
        // concat along every dim
        for dim in 0..4 {
            let mut bne = ane;
            bne[dim] = 2;
            let y: Vec<f32> = values(n_of(bne), 13, -4.0, 4.0).iter().map(|&v| quant(v, dt)).collect();
            let b = upload(&c, &y, bne, dt, false, 0);
            let mut dne = ane;
            dne[dim] += 2;
            let out = output(&c, dne, dt);
            let got = run1(&c, &Op::Concat { dim }, &[&a, &b], &out);
            let want: Vec<f32> = (0..n_of(dne))
                .map(|i| {
                    let mut q = coords(dne, i);
                    if q[dim] < ane[dim] {
                        x[lin(ane, q)]
                    } else {
                        q[dim] -= ane[dim];
                        y[lin(bne, q)]
                    }
                })
                .collect();
            assert_close(&got, &want, 0.0, 0.0, &format!("CONCAT dim {dim}"));
        }
        // get_rows: a [4, 5, 2], idx [3, 2] -> [4, 3, 2]
        let gne = [4, 5, 2, 1];
        let g: Vec<f32> = values(n_of(gne), 14, -4.0, 4.0).iter().map(|&v| quant(v, dt)).collect();
        let ga = upload(&c, &g, gne, dt, false, 0);
        let rows = [4.0, 0.0, 2.0, 1.0, 1.0, 3.0];
        let idx = upload(&c, &rows, [3, 2, 1, 1], I32, false, 0);
        let dne = [4, 3, 2, 1];
        let out = output(&c, dne, dt);
        let got = run1(&c, &Op::GetRows, &[&ga, &idx], &out);
        let want: Vec<f32> = (0..n_of(dne))
            .map(|i| {
                let q = coords(dne, i);
                g[lin(gne, [q[0], rows[q[1] + 3 * q[2]] as usize, q[2], 0])]
            })
            .collect();
        assert_close(&got, &want, 0.0, 0.0, "GET_ROWS");
        // diag_mask_inf
        let mne = [5, 4, 2, 1];
        let m: Vec<f32> = values(n_of(mne), 15, -4.0, 4.0).iter().map(|&v| quant(v, dt)).collect();
        let ma = upload(&c, &m, mne, dt, false, 0);
        let out = output(&c, mne, dt);
        let got = run1(&c, &Op::DiagMaskInf { n_past: 1 }, &[&ma], &out);
        let want: Vec<f32> = (0..m.len())
            .map(|i| {
                let q = coords(mne, i);
                if q[0] as i32 > 1 + q[1] as i32 { f32::NEG_INFINITY } else { m[i] }
            })
            .collect();
        assert_close(&got, &want, 0.0, 0.0, "DIAG_MASK_INF");
        // pad
        let p = [2, 1, 0, 1];
        let pne = [ane[0] + 2, ane[1] + 1, ane[2], ane[3] + 1];
        let out = output(&c, pne, dt);
        let got = run1(&c, &Op::Pad { p }, &[&a], &out);
        let want: Vec<f32> = (0..n_of(pne))
            .map(|i| {
                let q = coords(pne, i);
                if (0..4).all(|d| q[d] < ane[d]) { x[lin(ane, q)] } else { 0.0 }
            })
            .collect();
        assert_close(&got, &want, 0.0, 0.0, "PAD");
        // upscale by 2
        let une = [6, 4, 2, 1];
        let out = output(&c, une, dt);
        let got = run1(&c, &Op::Upscale { factor: 2 }, &[&a], &out);
        let want: Vec<f32> = (0..n_of(une))
            .map(|i| {
                let q = coords(une, i);
                x[lin(ane, [q[0] / 2, q[1] / 2, q[2], q[3]])]
            })
            .collect();
        assert_close(&got, &want, 0.0, 0.0, "UPSCALE");
    }
}

#[test]
fn im2col_and_pool2d() {
    let Some(c) = ctx() else { return };
    // 2-D: input [IW=7, IH=6, IC=2, N=2], kernel [KW=3, KH=2, IC, OC]
    let (iw, ih, ic, nn, kw, kh) = (7usize, 6usize, 2usize, 2usize, 3usize, 2usize);
    let (s0, s1, p0, p1, d0, d1) = (2i32, 1i32, 1i32, 0i32, 1i32, 2i32);
    let ow = (iw as i32 + 2 * p0 - d0 * (kw as i32 - 1) - 1) / s0 + 1;
    let oh = (ih as i32 + 2 * p1 - d1 * (kh as i32 - 1) - 1) / s1 + 1;
    let ine = [iw, ih, ic, nn];
    for dt in [F32, F16] {
        let x: Vec<f32> = values(n_of(ine), 16, -1.0, 1.0).iter().map(|&v| quant(v, dt)).collect();
        let input = upload(&c, &x, ine, dt, false, 0);
        let kern = upload(&c, &vec![0.0; kw * kh * ic * 4], [kw, kh, ic, 4], dt, false, 0);
        let dne = [ic * kh * kw, ow as usize, oh as usize, nn];
        let out = output(&c, dne, dt);
        let op = Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d: true };
        let got = run1(&c, &op, &[&kern, &input], &out);
        let want: Vec<f32> = (0..n_of(dne))
            .map(|i| {
                let q = coords(dne, i);
                let (iic, ikh, ikw) = (q[0] / (kh * kw), (q[0] % (kh * kw)) / kw, q[0] % kw);
                let iiw = q[1] as i32 * s0 + ikw as i32 * d0 - p0;
                let iih = q[2] as i32 * s1 + ikh as i32 * d1 - p1;
                if iiw < 0 || iih < 0 || iiw >= iw as i32 || iih >= ih as i32 {
                    0.0
                } else {
                    x[lin(ine, [iiw as usize, iih as usize, iic, q[3]])]
                }
            })
            .collect();
        assert_close(&got, &want, 0.0, 0.0, &format!("IM2COL 2d {dt:?}"));
    }
    // 1-D: input [IW=9, IC=3, N=2], kernel [KW=4, IC, OC]
    let ine1 = [9, 3, 2, 1];
    let x = values(n_of(ine1), 17, -1.0, 1.0);
    let input = upload(&c, &x, ine1, F32, false, 0);
    let kern = upload(&c, &vec![0.0; 4 * 3 * 2], [4, 3, 2, 1], F32, false, 0);
    let ow1 = (9 + 2 - 4) / 1 + 1;
    let dne = [3 * 4, ow1, 2, 1];
    let out = output(&c, dne, F32);
    let op = Op::Im2Col { s0: 1, s1: 0, p0: 1, p1: 0, d0: 1, d1: 0, is_2d: false };
    let got = run1(&c, &op, &[&kern, &input], &out);
    let want: Vec<f32> = (0..n_of(dne))
        .map(|i| {
            let q = coords(dne, i);
            let (iic, ikw) = (q[0] / 4, q[0] % 4);
            let iiw = q[1] as i32 + ikw as i32 - 1;
            if iiw < 0 || iiw >= 9 { 0.0 } else { x[lin(ine1, [iiw as usize, iic, q[2], 0])] }
        })
        .collect();
    assert_close(&got, &want, 0.0, 0.0, "IM2COL 1d");
    // pool_2d, max and average, with padding
    let pne = [7, 5, 2, 1];
    for dt in [F32, F16] {
        let x: Vec<f32> = values(n_of(pne), 18, -1.0, 1.0).iter().map(|&v| quant(v, dt)).collect();
        let a = upload(&c, &x, pne, dt, true, 0);
        for pop in [PoolOp::Max, PoolOp::Avg] {
            let (k0, k1, s0, s1, p0, p1) = (3i32, 2i32, 2i32, 2i32, 1i32, 1i32);
            let ow = (7 + 2 * p0 - k0) / s0 + 1;
            let oh = (5 + 2 * p1 - k1) / s1 + 1;
            let dne = [ow as usize, oh as usize, 2, 1];
            let out = output(&c, dne, F32);
            let op = Op::Pool2d { op: pop, k0, k1, s0, s1, p0: p0 as f32, p1: p1 as f32 };
            let got = run1(&c, &op, &[&a], &out);
            let want: Vec<f32> = (0..n_of(dne))
                .map(|i| {
                    let q = coords(dne, i);
                    let mut acc = if pop == PoolOp::Max { -f32::MAX } else { 0.0 };
                    for ky in 0..k1 {
                        for kx in 0..k0 {
                            let (ix, iy) = (q[0] as i32 * s0 - p0 + kx, q[1] as i32 * s1 - p1 + ky);
                            if ix < 0 || iy < 0 || ix >= 7 || iy >= 5 {
                                continue;
                            }
                            let v = x[lin(pne, [ix as usize, iy as usize, q[2], 0])];
                            if pop == PoolOp::Max { acc = acc.max(v) } else { acc += v }
                        }
                    }
                    if pop == PoolOp::Avg { acc / (k0 * k1) as f32 } else { acc }
                })
                .collect();
            assert_close(&got, &want, 1e-6, 1e-5, &format!("POOL_2D {pop:?} {dt:?}"));
        }
    }
}
