//! End-to-end engine tests: build graphs in a context, compute on the CPU
//! backend, compare with straightforward reference loops.

use ggmlr_core::backend::Backend;
use ggmlr_core::memory::BufferTag;
use ggmlr_core::tensor::Context;
use ggmlr_core::base::dtype::DType;
use ggmlr_core::graph::Graph;
use ggmlr_core::tensor::io::{get_values, set_values};
use ggmlr_core::op::{Op, UnaryOp};
use std::sync::Arc;

fn vals(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}");
    }
}

fn compute(t: &Arc<ggmlr_core::tensor::Tensor>, threads: usize) {
    let cpu = Backend::cpu();
    cpu.set_n_threads(threads).unwrap();
    Graph::build(t).unwrap().compute(&cpu).unwrap();
}

#[test]
fn mul_mat_matches_loops_odd_sizes() {
    for &(k, m, n) in &[(1, 1, 1), (3, 17, 5), (17, 3, 1023), (64, 130, 70)] {
        for threads in [1, 2] {
            let ctx = Context::new(64 << 20, false).unwrap();
            let a = ctx.new_tensor(DType::F32, &[k, m]).unwrap();
            let b = ctx.new_tensor(DType::F32, &[k, n]).unwrap();
            let (av, bv) = (vals(k * m, 1), vals(k * n, 2));
            set_values(&a, &av, 0).unwrap();
            set_values(&b, &bv, 0).unwrap();
            let c = ctx.op(Op::MulMat, &[a, b]).unwrap();
            assert_eq!(c.ne(), [m, n, 1, 1]);
            compute(&c, threads);
            let got = get_values(&c, 0, None).unwrap();
            let mut want = vec![0.0; m * n];
            for j in 0..n {
                for i in 0..m {
                    want[j * m + i] = (0..k).map(|l| av[i * k + l] * bv[j * k + l]).sum();
                }
            }
            close(&got, &want, 1e-5);
        }
    }
}

#[test]
fn broadcast_add_on_backend_buffer_and_views() {
    let cpu = Backend::cpu();
    let ctx = Context::new(1 << 16, true).unwrap();
    let a = ctx.new_tensor(DType::F32, &[4, 3]).unwrap();
    let b = ctx.new_tensor(DType::F16, &[4, 1]).unwrap();
    let at = ctx.transpose(&a).unwrap(); // [3, 4], strided
    let c = ctx.op(Op::Cont, &[at.clone()]).unwrap();
    let s = ctx.op(Op::Add, &[a.clone(), b.clone()]).unwrap();
    let e = ctx.op(Op::Unary(UnaryOp::Exp), &[at]).unwrap();
    let buf = ctx.alloc_tensors(&cpu, BufferTag::User).unwrap().unwrap();
    let av = vals(12, 3);
    set_values(&a, &av, 0).unwrap();
    set_values(&b, &[1.0, 2.0, 3.0, 4.0], 0).unwrap();
    let mut g = Graph::build(&c).unwrap();
    g.expand(&s).unwrap();
    g.expand(&e).unwrap();
    g.compute(&cpu).unwrap();
    let cv = get_values(&c, 0, None).unwrap();
    let ev = get_values(&e, 0, None).unwrap();
    for i in 0..4 {
        for j in 0..3 {
            assert!((cv[i * 3 + j] - av[j * 4 + i]).abs() < 1e-6);
            assert!((ev[i * 3 + j] - av[j * 4 + i].exp()).abs() < 1e-5);
        }
    }
    let sv = get_values(&s, 0, None).unwrap();
    for (i, v) in sv.iter().enumerate() {
        assert!((v - (av[i] + (i % 4) as f64 + 1.0)).abs() < 1e-6);
    }
    buf.free();
    let err = format!("{:#}", g.compute(&cpu).unwrap_err());
    assert!(err.contains("was freed"), "{err}");
}

#[test]
fn conv_2d_matches_direct_convolution() {
    let (w, h, ic, oc, kw, kh) = (7, 6, 2, 3, 3, 2);
    let ctx = Context::new(16 << 20, false).unwrap();
    let k = ctx.new_tensor(DType::F32, &[kw, kh, ic, oc]).unwrap();
    let x = ctx.new_tensor(DType::F32, &[w, h, ic, 1]).unwrap();
    let (kv, xv) = (vals(kw * kh * ic * oc, 4), vals(w * h * ic, 5));
    set_values(&k, &kv, 0).unwrap();
    set_values(&x, &xv, 0).unwrap();
    let (s0, s1, p0, p1) = (2usize, 1usize, 1usize, 0usize);
    let y = ctx.conv_2d(&k, &x, s0 as i32, s1 as i32, p0 as i32, p1 as i32, 1, 1).unwrap();
    let ow = (w + 2 * p0 - kw) / s0 + 1;
    let oh = (h + 2 * p1 - kh) / s1 + 1;
    assert_eq!(y.ne(), [ow, oh, oc, 1]);
    compute(&y, 2);
    let want = conv_ref(&kv, &xv, [kw, kh, ic, oc], [w, h, ic, 1], [s0, s1], [p0, p1], [1, 1]);
    close(&get_values(&y, 0, None).unwrap(), &want, 1e-4);
}

/// The convolution `k [KW, KH, IC, OC]` over `x [W, H, IC, N]` by its sums.
#[allow(clippy::too_many_arguments)]
fn conv_ref(kv: &[f64], xv: &[f64], k: [usize; 4], x: [usize; 4], s: [usize; 2], p: [usize; 2], d: [usize; 2]) -> Vec<f64> {
    let ([kw, kh, ic, oc], [w, h, _, n]) = (k, x);
    let ow = (w + 2 * p[0] - d[0] * (kw - 1) - 1) / s[0] + 1;
    let oh = (h + 2 * p[1] - d[1] * (kh - 1) - 1) / s[1] + 1;
    let mut out = vec![0.0; ow * oh * oc * n];
    for b in 0..n {
        for o in 0..oc {
            for yy in 0..oh {
                for xx in 0..ow {
                    let mut acc = 0.0;
                    for c in 0..ic {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let ix = (xx * s[0] + kx * d[0]) as i64 - p[0] as i64;
                                let iy = (yy * s[1] + ky * d[1]) as i64 - p[1] as i64;
                                if ix < 0 || iy < 0 || ix >= w as i64 || iy >= h as i64 {
                                    continue;
                                }
                                acc += kv[kx + kw * (ky + kh * (c + ic * o))]
                                    * xv[ix as usize + w * (iy as usize + h * (c + ic * b))];
                            }
                        }
                    }
                    out[xx + ow * (yy + oh * (o + oc * b))] = acc;
                }
            }
        }
    }
    out
}

#[test]
fn conv_2d_as_one_convolution_keeps_flagged_patches() {
    // Images large enough for several bands of rows per image; the CPU
    // backend runs conv_2d's three nodes as one convolution unless the
    // patches are flagged as an output, when they are stored as im2col's.
    let cases = [([3, 3, 8, 5], [40, 37, 8, 2], [1, 1], [1, 1], [1, 1]), ([3, 2, 3, 4], [29, 31, 3, 3], [2, 1], [0, 2], [2, 1])];
    for (kn, xn, s, p, d) in cases {
        for (threads, keep) in [(1, false), (2, false), (2, true)] {
            let ctx = Context::new(64 << 20, false).unwrap();
            let k = ctx.new_tensor(DType::F32, &kn).unwrap();
            let x = ctx.new_tensor(DType::F32, &xn).unwrap();
            let (kv, xv) = (vals(kn.iter().product(), 7), vals(xn.iter().product(), 8));
            set_values(&k, &kv, 0).unwrap();
            set_values(&x, &xv, 0).unwrap();
            let (s, p, d) = (s.map(|v: usize| v as i32), p.map(|v: usize| v as i32), d.map(|v: usize| v as i32));
            let y = ctx.conv_2d(&k, &x, s[0], s[1], p[0], p[1], d[0], d[1]).unwrap();
            // y = cont(permute(reshape(mul_mat(reshape(cols), kernel))))
            let cols = y.srcs()[0].srcs()[0].srcs()[0].srcs()[0].srcs()[0].clone();
            assert!(matches!(cols.op(), Op::Im2Col { .. }));
            if keep {
                cols.set_flag(ggmlr_core::tensor::Tensor::OUTPUT);
            }
            compute(&y, threads);
            let want = conv_ref(&kv, &xv, kn, xn, s.map(|v| v as usize), p.map(|v| v as usize), d.map(|v| v as usize));
            close(&get_values(&y, 0, None).unwrap(), &want, 1e-4);
            let c = get_values(&cols, 0, None).unwrap();
            // Unflagged, the patches were never stored (the context's memory starts zeroed).
            assert_eq!(c.iter().all(|&v| v == 0.0), !keep);
            if keep {
                // Patch (0, 0) of image 0 starts with tap (kx 0, ky 0, channel 0).
                let (ix, iy) = (-p[0] as i64, -p[1] as i64);
                let first = if ix < 0 || iy < 0 { 0.0 } else { xv[ix as usize + xn[0] * iy as usize] };
                assert!((c[0] - first).abs() < 1e-6 && c.iter().any(|&v| v != 0.0));
            }
        }
    }
}

#[test]
fn im2col_and_product_of_one_image_run_as_one_convolution() {
    // The ONNX import's form for one image: im2col, then the product alone.
    let (kn, xn) = ([3usize, 3, 6, 7], [33usize, 30, 6, 1]);
    for threads in [1, 2] {
        let ctx = Context::new(64 << 20, false).unwrap();
        let k = ctx.new_tensor(DType::F32, &kn).unwrap();
        let x = ctx.new_tensor(DType::F32, &xn).unwrap();
        let (kv, xv) = (vals(kn.iter().product(), 9), vals(xn.iter().product(), 10));
        set_values(&k, &kv, 0).unwrap();
        set_values(&x, &xv, 0).unwrap();
        let op = Op::Im2Col { s0: 1, s1: 2, p0: 1, p1: 1, d0: 1, d1: 1, is_2d: true };
        let cols = ctx.im2col(&k, &x, op, DType::F32).unwrap();
        let cn = cols.ne();
        let cols2 = ctx.reshape(&cols, &[cn[0], cn[1] * cn[2]]).unwrap();
        let k2 = ctx.reshape(&k, &[cn[0], kn[3]]).unwrap();
        let y = ctx.op(Op::MulMat, &[cols2, k2]).unwrap();
        compute(&y, threads);
        let want = conv_ref(&kv, &xv, kn, xn, [1, 2], [1, 1], [1, 1]);
        close(&get_values(&y, 0, None).unwrap(), &want, 1e-4);
        assert!(get_values(&cols, 0, None).unwrap().iter().all(|&v| v == 0.0), "the patches were stored");
    }
}

#[test]
fn errors_name_tensors() {
    let ctx = Context::new(1 << 16, false).unwrap();
    let a = ctx.new_tensor(DType::F32, &[3, 2]).unwrap();
    a.set_name("weights");
    let b = ctx.new_tensor(DType::F32, &[4]).unwrap();
    let e = format!("{:#}", ctx.op(Op::Add, &[a.clone(), b]).unwrap_err());
    assert!(e.contains("ggml_add") && e.contains("'weights'") && e.contains("[3, 2]"), "{e}");
    let i = ctx.new_tensor(DType::I32, &[2]).unwrap();
    set_values(&i, &[0.0, 5.0], 0).unwrap();
    let r = ctx.op(Op::GetRows, &[a.clone(), i]).unwrap();
    let e = format!("{:#}", Graph::build(&r).unwrap().compute(&Backend::cpu()).unwrap_err());
    assert!(e.contains("out of range"), "{e}");
    ctx.free();
    let e = format!("{:#}", get_values(&a, 0, None).unwrap_err());
    assert!(e.contains("freed") && e.contains("weights"), "{e}");
}
