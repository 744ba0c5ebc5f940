//! The convolution op on device "cpu": forward values against a direct
//! loop in plain f64 arithmetic, gradients against finite differences, for
//! strides, paddings, dilations, channels and activations.

use super::conv::Conv2d;
use super::tests::{fd_check, rnd, value};
use super::*;

/// C, W, H, KW, KH, stride, padding, dilation (width, height).
type Geom = (usize, usize, usize, usize, usize, [usize; 2], [usize; 2], [usize; 2]);

fn geom((c, w, h, kw, kh, stride, pad, dil): Geom) -> Conv2d {
    Conv2d { c, w, h, kw, kh, stride, pad, dil }
}

/// The convolution written out: out[f, o] = b[f] + sum k[f, tap] x[tap's input].
fn direct(g: &Conv2d, k: &HostMat, x: &HostMat, b: &HostMat, a: AgActivation) -> HostMat {
    let (ow, oh) = g.out_size().unwrap();
    let n = x.len() / g.sample();
    let f = k.rows;
    let mut out = HostMat::filled(f, ow * oh * n, 0.0);
    for s in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let col = ox + ow * (oy + oh * s);
                for o in 0..f {
                    let mut acc = b.data[o];
                    for ky in 0..g.kh {
                        for kx in 0..g.kw {
                            let ix = (ox * g.stride[0] + kx * g.dil[0]) as i64 - g.pad[0] as i64;
                            let iy = (oy * g.stride[1] + ky * g.dil[1]) as i64 - g.pad[1] as i64;
                            if ix < 0 || iy < 0 || ix >= g.w as i64 || iy >= g.h as i64 {
                                continue;
                            }
                            for c in 0..g.c {
                                let kv = k.data[o + f * (c + g.c * (kx + g.kw * ky))];
                                let xv = x.data[c + g.c * (ix as usize + g.w * iy as usize) + s * g.sample()];
                                acc += kv * xv;
                            }
                        }
                    }
                    out.data[o + f * col] = match a {
                        AgActivation::None => acc,
                        AgActivation::Relu => acc.max(0.0),
                        AgActivation::Sigmoid => 1.0 / (1.0 + (-acc).exp()),
                        AgActivation::Tanh => acc.tanh(),
                    };
                }
            }
        }
    }
    out
}

pub(super) fn cases() -> Vec<(Conv2d, usize, usize)> {
    // (geometry, filters, batch)
    vec![
        (geom((1, 6, 5, 3, 3, [1, 1], [0, 0], [1, 1])), 2, 2),
        (geom((2, 5, 6, 3, 2, [1, 1], [1, 0], [1, 1])), 3, 2),
        (geom((3, 7, 6, 3, 3, [2, 2], [1, 1], [1, 1])), 2, 1),
        (geom((2, 8, 7, 2, 3, [2, 3], [0, 1], [1, 1])), 2, 2),
        (geom((2, 7, 7, 3, 2, [1, 2], [2, 1], [2, 1])), 2, 1),
        // a 1-D convolution: height 1
        (geom((3, 9, 1, 4, 1, [2, 1], [1, 0], [1, 1])), 2, 3),
    ]
}

fn inputs(g: &Conv2d, f: usize, n: usize, seed: u64) -> Vec<HostMat> {
    vec![rnd(f, g.patch(), seed, -1.0, 1.0), rnd(g.sample(), n, seed + 1, -1.0, 1.0), rnd(f, 1, seed + 2, -0.5, 0.5)]
}

#[test]
fn convolution_matches_the_direct_sum() {
    for (i, (g, f, n)) in cases().into_iter().enumerate() {
        for a in [AgActivation::None, AgActivation::Relu, AgActivation::Tanh] {
            let ins = inputs(&g, f, n, 10 * i as u64);
            let got = value(&AgOp::Conv2d(g, a), &ins);
            let want = direct(&g, &ins[0], &ins[1], &ins[2], a);
            assert_eq!(got.shape(), want.shape(), "{g:?}");
            for (x, y) in got.data.iter().zip(&want.data) {
                assert!((x - y).abs() < 1e-12, "{g:?} {a:?}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn convolution_gradients_match_finite_differences() {
    for (i, (g, f, n)) in cases().into_iter().enumerate() {
        let a = if i % 2 == 0 { AgActivation::Tanh } else { AgActivation::Sigmoid };
        fd_check(AgOp::Conv2d(g, a), inputs(&g, f, n, 7 * i as u64 + 3), &[true, true, true]);
        // Only some inputs wanting a gradient.
        fd_check(AgOp::Conv2d(g, AgActivation::None), inputs(&g, f, n, 5), &[true, false, false]);
        fd_check(AgOp::Conv2d(g, AgActivation::None), inputs(&g, f, n, 6), &[false, true, false]);
    }
}

#[test]
fn convolution_shape_errors_name_the_layer() {
    let g = cases()[1].0;
    let mut tape = Tape::new();
    let ins: Vec<AgTensorRef> = inputs(&g, 3, 2, 1).into_iter().map(|m| tape.tensor(m)).collect();
    let bad = tape.tensor(rnd(g.sample() + 1, 2, 9, -1.0, 1.0));
    let e = tape.apply(AgOp::Conv2d(g, AgActivation::None), &[ins[0].clone(), bad, ins[2].clone()], &[true; 3]);
    let msg = format!("{:#}", e.err().expect("an error"));
    assert!(msg.contains("ggml_layer_conv_2d") && msg.contains("whole batch"), "{msg}");
    let e = AgOp::parse("conv2d", &[9.0, 1.0, 4.0, 4.0, 3.0, 3.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0], None);
    assert!(e.is_err());
}
