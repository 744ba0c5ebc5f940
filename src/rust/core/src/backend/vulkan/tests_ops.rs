//! Arithmetic op families against reference loops written here, on a real
//! device (skipped without one), with f32 and 16-bit storage, non-contiguous
//! sources and broadcasting; and a small MLP as one graph.

use super::test_util::*;
use super::*;
use crate::base::dtype::DType::{self, *};
use crate::op::{Op, UnaryOp};

fn tol(dt: DType) -> (f32, f32) {
    match dt {
        F32 => (1e-5, 1e-4),
        F16 => (2e-3, 2e-3),
        _ => (1e-2, 1e-2),
    }
}

#[test]
fn unary_scale_clamp_leaky() {
    let Some(c) = ctx() else { return };
    let ne = [7, 5, 3, 1];
    for (dt, tr) in [(F32, false), (F32, true), (F16, true), (BF16, false)] {
        let x: Vec<f32> = values(n_of(ne), 1, -3.0, 3.0).iter().map(|&v| quant(v, dt)).collect();
        let a = upload(&c, &x, ne, dt, tr, 3);
        let mut ops: Vec<(Op, Box<dyn Fn(f32) -> f32>)> = UnaryOp::ALL
            .iter()
            .map(|&u| (Op::Unary(u), Box::new(move |v: f32| u.apply(v)) as Box<dyn Fn(f32) -> f32>))
            .collect();
        ops.push((Op::Scale { s: -1.5 }, Box::new(|v| v * -1.5)));
        ops.push((Op::LeakyRelu { slope: 0.1 }, Box::new(|v| if v > 0.0 { v } else { 0.1 * v })));
        ops.push((Op::Clamp { min: -1.0, max: 0.5 }, Box::new(|v| v.clamp(-1.0, 0.5))));
        for (op, f) in ops {
            let out = output(&c, ne, dt);
            let got = run1(&c, &op, &[&a], &out);
            let want: Vec<f32> = x
                .iter()
                .map(|&v| {
                    let v = if matches!(op, Op::Unary(UnaryOp::Sqrt | UnaryOp::Log)) { v.abs() } else { v };
                    quant(f(v), dt)
                })
                .collect();
            if matches!(op, Op::Unary(UnaryOp::Sqrt | UnaryOp::Log)) {
                // defined only for x >= 0 / x > 0: compare where the input is valid
                let ok: Vec<usize> = (0..x.len()).filter(|&i| x[i] > 0.0).collect();
                let g: Vec<f32> = ok.iter().map(|&i| got[i]).collect();
                let w: Vec<f32> = ok.iter().map(|&i| want[i]).collect();
                assert_close(&g, &w, tol(dt).0, tol(dt).1, &format!("{op:?} {dt:?}"));
            } else {
                let (at, rt) = tol(dt);
                assert_close(&got, &want, at * 4.0, rt, &format!("{op:?} {dt:?} transposed={tr}"));
            }
        }
    }
}

#[test]
fn binary_ops_broadcast() {
    let Some(c) = ctx() else { return };
    let ne = [6, 4, 3, 2];
    for (dt, tr) in [(F32, false), (F32, true), (F16, false), (BF16, true)] {
        let x: Vec<f32> = values(n_of(ne), 2, -2.0, 2.0).iter().map(|&v| quant(v, dt)).collect();
        let a = upload(&c, &x, ne, dt, tr, 1);
        for bne in [ne, [6, 1, 3, 1], [1, 4, 1, 2], [3, 2, 1, 1], [1, 1, 1, 1]] {
            let y: Vec<f32> = values(n_of(bne), 3, 0.5, 2.0).iter().map(|&v| quant(v, dt)).collect();
            let b = upload(&c, &y, bne, dt, false, 0);
            let ops: [(Op, fn(f32, f32) -> f32); 4] = [
                (Op::Add, |p, q| p + q),
                (Op::Sub, |p, q| p - q),
                (Op::Mul, |p, q| p * q),
                (Op::Div, |p, q| p / q),
            ];
            for (op, f) in ops {
                let out = output(&c, ne, dt);
                let got = run1(&c, &op, &[&a, &b], &out);
                let want: Vec<f32> = (0..x.len())
                    .map(|i| {
                        let q = coords(ne, i);
                        let qb = [q[0] % bne[0], q[1] % bne[1], q[2] % bne[2], q[3] % bne[3]];
                        quant(f(x[i], y[lin(bne, qb)]), dt)
                    })
                    .collect();
                let (at, rt) = tol(dt);
                assert_close(&got, &want, at * 4.0, rt, &format!("{op:?} {dt:?} b {bne:?}"));
            }
        }
        let one = upload(&c, &[0.25], [1, 1, 1, 1], dt, false, 0);
        let out = output(&c, ne, dt);
        let got = run1(&c, &Op::Add1, &[&a, &one], &out);
        let want: Vec<f32> = x.iter().map(|&v| quant(v + 0.25, dt)).collect();
        assert_close(&got, &want, tol(dt).0 * 4.0, tol(dt).1, "ADD1");
    }
}

fn matmul_ref(a: &[f32], ane: [usize; 4], b: &[f32], bne: [usize; 4], dne: [usize; 4], out_prod: bool) -> Vec<f32> {
    let mut d = vec![0f32; n_of(dne)];
    let k_len = if out_prod { ane[1] } else { ane[0] };
    for i3 in 0..dne[3] {
        for i2 in 0..dne[2] {
            let (a2, a3) = (i2 / (dne[2] / ane[2]), i3 / (dne[3] / ane[3]));
            let (b2, b3) = (i2 / (dne[2] / bne[2]), i3 / (dne[3] / bne[3]));
            for n in 0..dne[1] {
                for m in 0..dne[0] {
                    let mut s = 0f64;
                    for k in 0..k_len {
                        let (av, bv) = if out_prod {
                            (a[lin(ane, [m, k, a2, a3])], b[lin(bne, [n, k, b2, b3])])
                        } else {
                            (a[lin(ane, [k, m, a2, a3])], b[lin(bne, [k, n, b2, b3])])
                        };
                        s += av as f64 * bv as f64;
                    }
                    d[lin(dne, [m, n, i2, i3])] = s as f32;
                }
            }
        }
    }
    d
}

#[test]
fn mul_mat_and_out_prod() {
    let Some(c) = ctx() else { return };
    // CPU-type devices take a register-blocked kernel; GPUs shared-memory
    // tiles: run both there.
    both_paths(&c, check_products);
}

fn check_products(c: &std::sync::Arc<VkContext>) {
    let c = c.clone();
    let (k, m, n) = (37, 19, 23);
    let ane = [k, m, 2, 1];
    let bne = [k, n, 2, 3];
    let dne = [m, n, 2, 3];
    for (adt, bdt, tra, trb) in [(F32, F32, false, false), (F32, F32, true, true), (F16, F32, false, true), (F16, F16, true, false), (BF16, F32, false, false)] {
        let x: Vec<f32> = values(n_of(ane), 4, -1.0, 1.0).iter().map(|&v| quant(v, adt)).collect();
        let y: Vec<f32> = values(n_of(bne), 5, -1.0, 1.0).iter().map(|&v| quant(v, bdt)).collect();
        let a = upload(&c, &x, ane, adt, tra, 2);
        let b = upload(&c, &y, bne, bdt, trb, 0);
        let out = output(&c, dne, F32);
        let got = run1(&c, &Op::MulMat, &[&a, &b], &out);
        let want = matmul_ref(&x, ane, &y, bne, dne, false);
        assert_close(&got, &want, 1e-4, 1e-4, &format!("MUL_MAT {adt:?}x{bdt:?} tr {tra} {trb}"));
    }
    // a larger square product crossing many tiles, f16 storage of both
    let s = 130;
    let x: Vec<f32> = values(s * s, 6, -1.0, 1.0).iter().map(|&v| quant(v, F16)).collect();
    let y: Vec<f32> = values(s * s, 7, -1.0, 1.0).iter().map(|&v| quant(v, F16)).collect();
    let a = upload(&c, &x, [s, s, 1, 1], F16, false, 0);
    let b = upload(&c, &y, [s, s, 1, 1], F16, false, 0);
    let out = output(&c, [s, s, 1, 1], F32);
    let got = run1(&c, &Op::MulMat, &[&a, &b], &out);
    assert_close(&got, &matmul_ref(&x, [s, s, 1, 1], &y, [s, s, 1, 1], [s, s, 1, 1], false), 1e-3, 1e-4, "MUL_MAT 130");
    // out_prod: a[M, K], b[N, K] -> [M, N]
    let (ane, bne, dne) = ([5, 7, 1, 1], [6, 7, 2, 1], [5, 6, 2, 1]);
    let x = values(n_of(ane), 8, -1.0, 1.0);
    let y = values(n_of(bne), 9, -1.0, 1.0);
    let a = upload(&c, &x, ane, F32, true, 0);
    let b = upload(&c, &y, bne, F32, false, 0);
    let out = output(&c, dne, F32);
    let got = run1(&c, &Op::OutProd, &[&a, &b], &out);
    assert_close(&got, &matmul_ref(&x, ane, &y, bne, dne, true), 1e-5, 1e-5, "OUT_PROD");
    // a shape mismatch is an error, and the device stays usable
    let bad = VkNode { op: &Op::MulMat, srcs: vec![a.r(), b.r()], dst: out.r() };
    let e = c.run_graph(&[bad]).unwrap_err();
    assert!(format!("{e:#}").contains("MUL_MAT"), "{e:#}");
}

/// Held by the tests that switch kernel paths, one at a time, and by those
/// that count the kernel variants a graph uses.
pub(super) static PATHS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `check` with the device's own kernels, then with those GPUs take
/// (the same where the device is a GPU), one such test at a time.
fn both_paths(c: &std::sync::Arc<VkContext>, check: fn(&std::sync::Arc<VkContext>)) {
    let _one = PATHS.lock().unwrap_or_else(|p| p.into_inner());
    check(c);
    encode::GPU_PATHS_ON_CPU.store(true, std::sync::atomic::Ordering::Relaxed);
    check(c);
    encode::GPU_PATHS_ON_CPU.store(false, std::sync::atomic::Ordering::Relaxed);
}

fn rows_of(x: &[f32], ne: [usize; 4]) -> Vec<&[f32]> {
    x.chunks(ne[0]).collect()
}

#[test]
fn reductions_norms_softmax_argmax() {
    let Some(c) = ctx() else { return };
    // Short rows take one invocation per row; long rows a workgroup each on
    // GPUs and one invocation each on CPU-type devices: run both there.
    both_paths(&c, check_reductions);
}

fn check_reductions(c: &std::sync::Arc<VkContext>) {
    let c = c.clone();
    for (ne, dt, tr) in [([300, 3, 2, 1], F32, false), ([17, 9, 1, 2], F16, true), ([5, 4, 1, 1], F32, true)] {
        let x: Vec<f32> = values(n_of(ne), 10, -2.0, 2.0).iter().map(|&v| quant(v, dt)).collect();
        let a = upload(&c, &x, ne, dt, tr, 1);
        let rows = rows_of(&x, ne);
        let rne = [1, ne[1], ne[2], ne[3]];
        let (at, rt) = (1e-4 * ne[0] as f32, 1e-4);
        let out = output(&c, rne, F32);
        let want: Vec<f32> = rows.iter().map(|r| r.iter().sum()).collect();
        assert_close(&run1(&c, &Op::SumRows, &[&a], &out), &want, at, rt, "SUM_ROWS");
        let want: Vec<f32> = rows.iter().map(|r| r.iter().sum::<f32>() / ne[0] as f32).collect();
        assert_close(&run1(&c, &Op::Mean, &[&a], &out), &want, at, rt, "MEAN");
        let out1 = output(&c, [1, 1, 1, 1], F32);
        assert_close(&run1(&c, &Op::Sum, &[&a], &out1), &[x.iter().sum()], at * 10.0, rt, "SUM");
        for rms in [false, true] {
            let out = output(&c, ne, F32);
            let op = if rms { Op::RmsNorm { eps: 1e-5 } } else { Op::Norm { eps: 1e-5 } };
            let want: Vec<f32> = rows
                .iter()
                .flat_map(|r| {
                    let n = r.len() as f32;
                    let mean = if rms { 0.0 } else { r.iter().sum::<f32>() / n };
                    let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
                    r.iter().map(move |v| (v - mean) / (var + 1e-5).sqrt()).collect::<Vec<_>>()
                })
                .collect();
            assert_close(&run1(&c, &op, &[&a], &out), &want, 1e-4, 1e-3, &format!("{op:?}"));
        }
        // softmax without mask, then with a broadcast mask and ALiBi
        let out = output(&c, ne, F32);
        let sm = |r: &[f32], scale: f32, slope: f32, m: &[f32]| -> Vec<f32> {
            let v: Vec<f32> = r.iter().zip(m).map(|(x, mk)| x * scale + slope * mk).collect();
            let mx = v.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let s: f32 = v.iter().map(|x| (x - mx).exp()).sum();
            v.iter().map(|x| (x - mx).exp() / s).collect()
        };
        let zeros = vec![0f32; ne[0]];
        let want: Vec<f32> = rows.iter().flat_map(|r| sm(r, 0.7, 1.0, &zeros)).collect();
        assert_close(&run1(&c, &Op::SoftMax { scale: 0.7, max_bias: 0.0 }, &[&a], &out), &want, 1e-6, 1e-4, "SOFT_MAX");
        let mne = [ne[0], ne[1] + 1, 1, 1];
        let mv: Vec<f32> = (0..n_of(mne)).map(|i| if i % 5 == 0 { f32::NEG_INFINITY } else { (i % 3) as f32 * 0.5 }).collect();
        for mdt in [F32, F16] {
            let mask = upload(&c, &mv, mne, mdt, false, 0);
            let max_bias = 8.0;
            let n_head = ne[2];
            let nhl2 = 1usize << (usize::BITS - 1 - n_head.leading_zeros());
            let m0 = 2f32.powf(-max_bias / nhl2 as f32);
            let m1 = 2f32.powf(-(max_bias / 2.0) / nhl2 as f32);
            let want: Vec<f32> = rows
                .iter()
                .enumerate()
                .flat_map(|(ri, r)| {
                    let (i1, h) = (ri % ne[1], (ri / ne[1]) % ne[2]);
                    let slope = if h < nhl2 { m0.powi(h as i32 + 1) } else { m1.powi(2 * (h - nhl2) as i32 + 1) };
                    sm(r, 0.5, slope, &mv[i1 * ne[0]..(i1 + 1) * ne[0]])
                })
                .collect();
            let got = run1(&c, &Op::SoftMax { scale: 0.5, max_bias }, &[&a, &mask], &out);
            assert_close(&got, &want, 1e-6, 1e-4, &format!("SOFT_MAX mask {mdt:?}"));
        }
        // argmax over rows of the 2-D view
        if ne[2] * ne[3] == 1 {
            let out = output(&c, [ne[1], 1, 1, 1], I32);
            let want: Vec<f32> = rows
                .iter()
                .map(|r| {
                    let mut b = 0;
                    for (i, &v) in r.iter().enumerate() {
                        if v > r[b] {
                            b = i;
                        }
                    }
                    b as f32
                })
                .collect();
            assert_close(&run1(&c, &Op::Argmax, &[&a], &out), &want, 0.0, 0.0, "ARGMAX");
        }
    }
}

#[test]
fn copies_and_conversions() {
    let Some(c) = ctx() else { return };
    let ne = [9, 6, 2, 1];
    let x = values(n_of(ne), 11, -100.0, 100.0);
    for (sdt, tr) in [(F32, true), (F16, false), (BF16, true)] {
        let xs: Vec<f32> = x.iter().map(|&v| quant(v, sdt)).collect();
        let a = upload(&c, &xs, ne, sdt, tr, 1);
        for ddt in [F32, F16, BF16] {
            for op in [Op::Cont, Op::Dup, Op::Cpy] {
                let out = output(&c, ne, ddt);
                let got = run1(&c, &op, &[&a, &out], &out);
                let want: Vec<f32> = xs.iter().map(|&v| quant(v, ddt)).collect();
                assert_close(&got, &want, 0.0, 0.0, &format!("{op:?} {sdt:?}->{ddt:?}"));
            }
        }
    }
    // Cpy into a strided destination of another shape with equal size
    let a = upload(&c, &x, ne, F32, false, 0);
    let dne = [6, 9, 2, 1];
    let dst = upload(&c, &vec![0.0; n_of(dne)], dne, F16, true, 2);
    let got = run1(&c, &Op::Cpy, &[&a, &dst], &dst);
    let want: Vec<f32> = x.iter().map(|&v| quant(v, F16)).collect();
    assert_close(&got, &want, 0.0, 0.0, "CPY to strided f16");
    // i32 copies keep every bit
    let big: Vec<f32> = vec![16_777_217.0, -5.0, 2_000_000_001.0, 0.0];
    let bytes: Vec<u8> = [16_777_217i32, -5, 2_000_000_001, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let ia = c.alloc(16).unwrap();
    c.write(&ia, 0, &bytes).unwrap();
    let src = DevT { buf: ia, offset: 0, layout: crate::layout::Layout::contiguous(I32, [4, 1, 1, 1]) };
    let out = output(&c, [4, 1, 1, 1], I32);
    run1(&c, &Op::Dup, &[&src], &out);
    let mut back = vec![0u8; 16];
    c.read(&out.buf, 0, &mut back).unwrap();
    assert_eq!(back, bytes, "i32 dup of {big:?}");
}

#[test]
fn mlp_forward_is_one_submission() {
    if ctx().is_none() {
        return;
    }
    // A context of its own, so other tests' submissions do not count here,
    // and the kernel paths held fixed: a test running both_paths meanwhile
    // would otherwise switch the variants it counts.
    let _paths = PATHS.lock().unwrap_or_else(|p| p.into_inner());
    let c = VkContext::unshared(0).unwrap();
    let (inp, hid, outd, batch) = (64, 48, 10, 8);
    let x = values(inp * batch, 20, -1.0, 1.0);
    let dims = [(inp, hid), (hid, hid), (hid, outd)];
    let ws: Vec<Vec<f32>> = dims.iter().enumerate().map(|(i, &(a, b))| values(a * b, 30 + i as u64, -0.3, 0.3)).collect();
    let bs: Vec<Vec<f32>> = dims.iter().enumerate().map(|(i, &(_, b))| values(b, 40 + i as u64, -0.1, 0.1)).collect();
    let xt = upload(&c, &x, [inp, batch, 1, 1], F32, false, 0);
    let wt: Vec<DevT> = ws.iter().zip(&dims).map(|(w, &(a, b))| upload(&c, w, [a, b, 1, 1], F16, false, 0)).collect();
    let bt: Vec<DevT> = bs.iter().zip(&dims).map(|(bv, &(_, b))| upload(&c, bv, [b, 1, 1, 1], F32, false, 0)).collect();
    // all intermediates in one buffer at different offsets
    let widths = [hid, hid, hid, hid, outd, outd, outd];
    let offs: Vec<usize> = widths.iter().scan(0, |o, &w| { let at = *o; *o += w * batch * 4 + 256; Some(at) }).collect();
    let scratch = c.alloc(offs[6] + outd * batch * 4 + 256).unwrap();
    let t = |i: usize| VkTensorRef { buf: &scratch, offset: offs[i], layout: crate::layout::Layout::contiguous(F32, [widths[i], batch, 1, 1]) };
    let (mm, add, relu, sm) = (Op::MulMat, Op::Add, Op::Unary(UnaryOp::Relu), Op::SoftMax { scale: 1.0, max_bias: 0.0 });
    let nodes = vec![
        VkNode { op: &mm, srcs: vec![wt[0].r(), xt.r()], dst: t(0) },
        VkNode { op: &add, srcs: vec![t(0), bt[0].r()], dst: t(1) },
        VkNode { op: &relu, srcs: vec![t(1)], dst: t(0) },
        VkNode { op: &mm, srcs: vec![wt[1].r(), t(0)], dst: t(2) },
        VkNode { op: &add, srcs: vec![t(2), bt[1].r()], dst: t(3) },
        VkNode { op: &relu, srcs: vec![t(3)], dst: t(2) },
        VkNode { op: &mm, srcs: vec![wt[2].r(), t(2)], dst: t(4) },
        VkNode { op: &add, srcs: vec![t(4), bt[2].r()], dst: t(5) },
        VkNode { op: &sm, srcs: vec![t(5)], dst: t(6) },
    ];
    let (s0, b0) = (c.submissions(), c.barriers());
    c.run_graph(&nodes).unwrap();
    assert_eq!(c.submissions() - s0, 1, "the whole graph is one queue submission");
    assert_eq!(c.barriers() - b0, 8, "one barrier between each dependent pair");
    // reference
    let mut h: Vec<f32> = x.clone();
    let mut w_in = inp;
    for (l, &(a, b)) in dims.iter().enumerate() {
        let wq: Vec<f32> = ws[l].iter().map(|&v| quant(v, F16)).collect();
        let mut nh = vec![0f32; b * batch];
        for n in 0..batch {
            for m in 0..b {
                let s: f32 = (0..a).map(|k| wq[k + a * m] * h[k + w_in * n]).sum();
                nh[m + b * n] = s + bs[l][m];
                if l < 2 {
                    nh[m + b * n] = nh[m + b * n].max(0.0);
                }
            }
        }
        h = nh;
        w_in = b;
    }
    for n in 0..batch {
        let r = &mut h[n * outd..(n + 1) * outd];
        let mx = r.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let s: f32 = r.iter().map(|v| (v - mx).exp()).sum();
        r.iter_mut().for_each(|v| *v = (*v - mx).exp() / s);
    }
    let mut bytes = vec![0u8; outd * batch * 4];
    c.read(&scratch, offs[6], &mut bytes).unwrap();
    let got: Vec<f32> = bytes.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_close(&got, &h, 1e-5, 1e-4, "MLP");
    // one pipeline per op variant: f16 x f32 matmul, f32 add, f32 relu, f32 softmax
    assert_eq!(c.pipeline_count(), 4);
    c.run_graph(&nodes).unwrap();
    assert_eq!(c.pipeline_count(), 4, "pipelines are created once and cached");
    // independent nodes need no barrier between them
    let b1 = c.barriers();
    let ind = vec![
        VkNode { op: &relu, srcs: vec![xt.r()], dst: t(0) },
        VkNode { op: &relu, srcs: vec![xt.r()], dst: t(2) },
    ];
    c.run_graph(&ind).unwrap();
    assert_eq!(c.barriers(), b1);
}
