//! The channels-innermost convolution (`conv_cl`) against sums written the
//! plain way, one output value at a time with every tap bounds-tested: the
//! forward on strides, paddings, dilations and channel counts that are not
//! multiples of the vector blocks; the input gradient (the taps walked
//! backwards) against the adjoint identity <conv(x), g> = <x, conv'(g)>; the
//! kernel gradient against the same identity in the kernel; on 1 and 2
//! threads, the portable, AVX2 and AVX-512 copies (as the CPU has them).

use super::access::Src;
use super::conv_cl::run;
use super::par::CpuPool;
use crate::op::conv_cl::{ClGeom, ConvCl};
use crate::op::UnaryOp;
use std::borrow::Cow;

use super::tests_nn::vals as values;

struct Case {
    oc: usize,
    ic: usize,
    w: usize,
    h: usize,
    n: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
}

const CASES: [Case; 7] = [
    Case { oc: 16, ic: 8, w: 13, h: 11, n: 2, k: [3, 3], s: [1, 1], p: [0, 0], d: [1, 1] },
    Case { oc: 8, ic: 1, w: 28, h: 9, n: 3, k: [3, 3], s: [1, 1], p: [1, 1], d: [1, 1] },
    Case { oc: 13, ic: 3, w: 10, h: 12, n: 1, k: [3, 5], s: [2, 1], p: [1, 2], d: [1, 1] },
    Case { oc: 20, ic: 5, w: 17, h: 7, n: 2, k: [3, 2], s: [1, 2], p: [2, 0], d: [2, 1] },
    Case { oc: 3, ic: 2, w: 4, h: 4, n: 2, k: [5, 5], s: [1, 1], p: [2, 2], d: [1, 1] },
    Case { oc: 1, ic: 4, w: 9, h: 9, n: 1, k: [1, 1], s: [3, 3], p: [0, 0], d: [1, 1] },
    Case { oc: 36, ic: 7, w: 21, h: 6, n: 1, k: [4, 3], s: [1, 1], p: [3, 1], d: [1, 2] },
];

/// out[o, ox, oy, n] by the definition, taps outside the input skipped.
fn naive(c: &Case, g: &ClGeom, k: &[f64], x: &[f64], bias: &[f64]) -> Vec<f64> {
    let (ow, oh) = (g.out[0] as usize, g.out[1] as usize);
    let mut out = vec![0.0; c.oc * ow * oh * c.n];
    for n in 0..c.n {
        for oy in 0..oh {
            for ox in 0..ow {
                for o in 0..c.oc {
                    let mut acc = bias[o];
                    for ky in 0..c.k[1] {
                        let iy = (oy * c.s[1] + ky * c.d[1]) as i64 - c.p[1] as i64;
                        for kx in 0..c.k[0] {
                            let ix = (ox * c.s[0] + kx * c.d[0]) as i64 - c.p[0] as i64;
                            if iy < 0 || iy >= c.h as i64 || ix < 0 || ix >= c.w as i64 {
                                continue;
                            }
                            for i in 0..c.ic {
                                let xv = x[i + c.ic * (ix as usize + c.w * (iy as usize + c.h * n))];
                                acc += k[o + c.oc * (i + c.ic * (kx + c.k[0] * ky))] * xv;
                            }
                        }
                    }
                    out[o + c.oc * (ox + ow * (oy + oh * n))] = acc;
                }
            }
        }
    }
    out
}

fn conv<T: crate::base::float::Float>(op: ConvCl<UnaryOp>, srcs: Vec<(Vec<f64>, [usize; 4])>, ne: [usize; 4], pool: &CpuPool) -> Vec<f64> {
    let s: Vec<Src<'_, T>> = srcs.into_iter().map(|(d, ne)| Src::new(Cow::Owned(d.into_iter().map(T::from_f64).collect()), ne)).collect();
    let mut out = vec![T::from_f64(f64::NAN); ne.iter().product()];
    run(&op, &s, &mut out, ne, pool).unwrap();
    out.into_iter().map(T::to_f64).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn close(a: &[f64], b: &[f64], tol: f64) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("lengths {} and {}", a.len(), b.len()));
    }
    let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if !((x - y).abs() <= tol * scale) {
            return Err(format!("element {i}: {x} against {y}"));
        }
    }
    Ok(())
}

fn each_setting(f: impl Fn(&CpuPool, &str)) {
    for threads in [1, 2] {
        let pool = CpuPool::new(threads).unwrap();
        f(&pool, &format!("{threads} thread(s)"));
        super::conv_cl::avx2_only(|| f(&pool, &format!("{threads} thread(s), AVX2")));
        crate::base::simd::portable(|| f(&pool, &format!("{threads} thread(s), portable")));
    }
}

#[test]
fn forward_matches_the_definition() {
    each_setting(|pool, how| {
        for (ci, c) in CASES.iter().enumerate() {
            let g = ClGeom::conv(c.s, c.p, c.d, c.k, c.w, c.h).unwrap();
            let kne = [c.oc, c.ic, c.k[0], c.k[1]];
            let xne = [c.ic, c.w, c.h, c.n];
            let k = values(kne.iter().product(), 1 + ci as u64);
            let x = values(xne.iter().product(), 100 + ci as u64);
            let bias = values(c.oc, 200 + ci as u64);
            let want = naive(c, &g, &k, &x, &bias);
            let ne = [c.oc, g.out[0] as usize, g.out[1] as usize, c.n];
            let srcs = vec![(k.clone(), kne), (x.clone(), xne), (bias.clone(), [c.oc, 1, 1, 1])];
            let got = conv::<f64>(ConvCl::Forward { g, act: None }, srcs.clone(), ne, pool);
            close(&got, &want, 1e-12).unwrap_or_else(|e| panic!("case {ci}, f64, {how}: {e}"));
            let got = conv::<f32>(ConvCl::Forward { g, act: None }, srcs.clone(), ne, pool);
            close(&got, &want, 1e-5).unwrap_or_else(|e| panic!("case {ci}, f32, {how}: {e}"));
            let relu: Vec<f64> = want.iter().map(|v| v.max(0.0)).collect();
            let got = conv::<f32>(ConvCl::Forward { g, act: Some(UnaryOp::Relu) }, srcs, ne, pool);
            close(&got, &relu, 1e-5).unwrap_or_else(|e| panic!("case {ci}, f32 relu, {how}: {e}"));
        }
    });
}

#[test]
fn input_gradient_is_the_adjoint() {
    each_setting(|pool, how| {
        for (ci, c) in CASES.iter().enumerate().filter(|(_, c)| c.s == [1, 1]) {
            let g = ClGeom::conv(c.s, c.p, c.d, c.k, c.w, c.h).unwrap();
            let (ow, oh) = (g.out[0] as usize, g.out[1] as usize);
            let kne = [c.oc, c.ic, c.k[0], c.k[1]];
            let k = values(kne.iter().product(), 300 + ci as u64);
            let x = values(c.ic * c.w * c.h * c.n, 400 + ci as u64);
            let gz = values(c.oc * ow * oh * c.n, 500 + ci as u64);
            let fwd = naive(c, &g, &k, &x, &vec![0.0; c.oc]);
            // The kernel with its channels swapped: [IC, OC, KW, KH].
            let mut kt = vec![0.0; k.len()];
            for t in 0..c.k[0] * c.k[1] {
                for i in 0..c.ic {
                    for o in 0..c.oc {
                        kt[i + c.ic * (o + c.oc * t)] = k[o + c.oc * (i + c.ic * t)];
                    }
                }
            }
            let back = ClGeom::input_grad(&g, c.w, c.h).unwrap();
            let srcs = vec![(kt, [c.ic, c.oc, c.k[0], c.k[1]]), (gz.clone(), [c.oc, ow, oh, c.n])];
            let dx = conv::<f64>(ConvCl::Forward { g: back, act: None }, srcs, [c.ic, c.w, c.h, c.n], pool);
            let (l, r) = (dot(&fwd, &gz), dot(&x, &dx));
            assert!((l - r).abs() <= 1e-10 * l.abs().max(1.0), "case {ci}, {how}: <conv(x), g> = {l}, <x, conv'(g)> = {r}");
            // Each input value's gradient alone: a unit x gives that value.
            for probe in [0, x.len() / 2, x.len() - 1] {
                let mut e = vec![0.0; x.len()];
                e[probe] = 1.0;
                let want = dot(&naive(c, &g, &k, &e, &vec![0.0; c.oc]), &gz);
                assert!((dx[probe] - want).abs() <= 1e-10 * want.abs().max(1.0), "case {ci}, {how}: dx[{probe}] = {}, not {want}", dx[probe]);
            }
        }
    });
}

#[test]
fn kernel_gradient_is_the_adjoint() {
    each_setting(|pool, how| {
        for (ci, c) in CASES.iter().enumerate() {
            let g = ClGeom::conv(c.s, c.p, c.d, c.k, c.w, c.h).unwrap();
            let (ow, oh) = (g.out[0] as usize, g.out[1] as usize);
            let kne = [c.oc, c.ic, c.k[0], c.k[1]];
            let nk: usize = kne.iter().product();
            let x = values(c.ic * c.w * c.h * c.n, 600 + ci as u64);
            let gz = values(c.oc * ow * oh * c.n, 700 + ci as u64);
            let srcs = vec![(gz.clone(), [c.oc, ow, oh, c.n]), (x.clone(), [c.ic, c.w, c.h, c.n])];
            let dk64 = conv::<f64>(ConvCl::Weights(g), srcs.clone(), kne, pool);
            let dk32 = conv::<f32>(ConvCl::Weights(g), srcs, kne, pool);
            // dk[j] is <conv_{e_j}(x), g> for the unit kernel e_j.
            let want: Vec<f64> = (0..nk)
                .map(|j| {
                    let mut e = vec![0.0; nk];
                    e[j] = 1.0;
                    dot(&naive(c, &g, &e, &x, &vec![0.0; c.oc]), &gz)
                })
                .collect();
            close(&dk64, &want, 1e-12).unwrap_or_else(|e| panic!("case {ci}, f64, {how}: {e}"));
            close(&dk32, &want, 1e-4).unwrap_or_else(|e| panic!("case {ci}, f32, {how}: {e}"));
        }
    });
}

#[test]
fn shapes_that_do_not_fit_are_errors() {
    assert!(ClGeom::conv([1, 1], [0, 0], [1, 1], [5, 5], 4, 4).is_err());
    assert!(ClGeom::conv([0, 1], [0, 0], [1, 1], [3, 3], 8, 8).is_err());
    let g = ClGeom::conv([1, 1], [0, 0], [1, 1], [3, 3], 8, 8).unwrap();
    let op = crate::op::Op::ConvCl(ConvCl::Forward { g, act: None });
    let lay = |ne: [usize; 4]| crate::layout::Layout::contiguous(crate::base::dtype::DType::F32, ne);
    // The kernel's channels differ from the input's.
    assert!(crate::op::shape::infer(&op, &[lay([4, 3, 3, 3]), lay([2, 8, 8, 1])]).is_err());
    // A bias of the wrong length.
    assert!(crate::op::shape::infer(&op, &[lay([4, 2, 3, 3]), lay([2, 8, 8, 1]), lay([3, 1, 1, 1])]).is_err());
    let ok = crate::op::shape::infer(&op, &[lay([4, 2, 3, 3]), lay([2, 8, 8, 5]), lay([4, 1, 1, 1])]).unwrap();
    assert_eq!(ok.ne4(), [4, 6, 6, 5]);
}

/// Timings of the three uses in a small CNN's training step (conv 8 -> 16,
/// 3x3, 26x26, batch 64): `cargo test --release -p ggmlr-core conv_cl_speed -- --ignored --nocapture`.
#[test]
#[ignore]
fn conv_cl_speed() {
    let pool = CpuPool::new(1).unwrap();
    let (oc, ic, w, h, n) = (16, 8, 26, 26, 64);
    let g = ClGeom::conv([1, 1], [0, 0], [1, 1], [3, 3], w, h).unwrap();
    let (ow, oh) = (g.out[0] as usize, g.out[1] as usize);
    let k = values(oc * ic * 9, 1);
    let x = values(ic * w * h * n, 2);
    let gz = values(oc * ow * oh * n, 3);
    let macs = (oc * ic * 9 * ow * oh * n) as f64;
    let time = |what: &str, f: &dyn Fn()| {
        f();
        let t = std::time::Instant::now();
        let reps = 20;
        for _ in 0..reps {
            f();
        }
        let s = t.elapsed().as_secs_f64() / reps as f64;
        println!("{what}: {:.3} ms, {:.1} GFLOP/s", s * 1e3, 2.0 * macs / s / 1e9);
    };
    let kf: Vec<f32> = k.iter().map(|&v| v as f32).collect();
    let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let gf: Vec<f32> = gz.iter().map(|&v| v as f32).collect();
    let mut out = vec![0f32; oc * ow * oh * n];
    let fwd = std::cell::RefCell::new(out.as_mut_slice());
    time("forward f32", &|| {
        let s = [Src::new(Cow::Borrowed(&kf[..]), [oc, ic, 3, 3]), Src::new(Cow::Borrowed(&xf[..]), [ic, w, h, n])];
        run(&ConvCl::Forward { g, act: Some(UnaryOp::Relu) }, &s, &mut fwd.borrow_mut(), [oc, ow, oh, n], &pool).unwrap();
    });
    let back = ClGeom::input_grad(&g, w, h).unwrap();
    let mut dx = vec![0f32; ic * w * h * n];
    let dxc = std::cell::RefCell::new(dx.as_mut_slice());
    time("input gradient f32", &|| {
        let s = [Src::new(Cow::Borrowed(&kf[..]), [ic, oc, 3, 3]), Src::new(Cow::Borrowed(&gf[..]), [oc, ow, oh, n])];
        run(&ConvCl::Forward { g: back, act: None }, &s, &mut dxc.borrow_mut(), [ic, w, h, n], &pool).unwrap();
    });
    let mut dk = vec![0f32; oc * ic * 9];
    let dkc = std::cell::RefCell::new(dk.as_mut_slice());
    time("kernel gradient f32", &|| {
        let s = [Src::new(Cow::Borrowed(&gf[..]), [oc, ow, oh, n]), Src::new(Cow::Borrowed(&xf[..]), [ic, w, h, n])];
        run(&ConvCl::Weights(g), &s, &mut dkc.borrow_mut(), [oc, ic, 3, 3], &pool).unwrap();
    });
}
