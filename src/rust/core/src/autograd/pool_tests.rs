//! Max pooling against a direct loop over the windows, its gradient against
//! finite differences, ties (the first tap of a window gets the gradient)
//! and the errors users see.

use super::op::AgOp;
use super::tests::{fd_check, rnd, value};
use super::*;
use crate::op::max_pool::PoolGeom;

fn geom(c: usize, w: usize, h: usize, kw: usize, kh: usize, sw: usize, sh: usize) -> PoolGeom {
    PoolGeom { c, w, h, kw, kh, sw, sh }
}

/// (geometry, batch)
fn cases() -> Vec<(PoolGeom, usize)> {
    vec![
        (geom(1, 4, 4, 2, 2, 2, 2), 1),
        (geom(3, 6, 5, 2, 2, 2, 2), 2),
        // overlapping windows: an input can be the maximum of several
        (geom(2, 5, 4, 3, 2, 1, 1), 3),
        (geom(2, 7, 5, 3, 3, 2, 1), 2),
        // a 1-D pooling: height 1
        (geom(4, 9, 1, 3, 1, 3, 1), 2),
    ]
}

/// The maxima by a direct loop: window taps row by row, the first of equal
/// maxima; and the flat input index of each.
fn direct(g: &PoolGeom, x: &HostMat) -> (HostMat, Vec<usize>) {
    let n = x.len() / (g.c * g.w * g.h);
    let (ow, oh) = ((g.w - g.kw) / g.sw + 1, (g.h - g.kh) / g.sh + 1);
    let mut v = Vec::new();
    let mut at = Vec::new();
    for s in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for ch in 0..g.c {
                    let mut best = (f64::NEG_INFINITY, 0);
                    for ky in 0..g.kh {
                        for kx in 0..g.kw {
                            let i = ch + g.c * ((ox * g.sw + kx) + g.w * (oy * g.sh + ky)) + g.c * g.w * g.h * s;
                            if x.data[i] > best.0 {
                                best = (x.data[i], i);
                            }
                        }
                    }
                    v.push(best.0);
                    at.push(best.1);
                }
            }
        }
    }
    (HostMat::new(g.c, v.len() / g.c, v).unwrap(), at)
}

#[test]
fn max_pooling_matches_the_direct_loop() {
    for (i, (g, n)) in cases().into_iter().enumerate() {
        // Any matrix of the values: one column per sample, or other shapes.
        let x = rnd(g.c * g.w * g.h, n, 11 + i as u64, -1.0, 1.0);
        let got = value(&AgOp::MaxPool2d(g), &[x.clone()]);
        let (want, _) = direct(&g, &x);
        assert_eq!(got, want, "{g:?}");
        let flat = HostMat::new(1, x.len(), x.data.clone()).unwrap();
        assert_eq!(value(&AgOp::MaxPool2d(g), &[flat]), want, "{g:?} from a row");
    }
}

#[test]
fn max_pooling_gradients_match_finite_differences() {
    for (i, (g, n)) in cases().into_iter().enumerate() {
        fd_check(AgOp::MaxPool2d(g), vec![rnd(g.c * g.w * g.h, n, 5 + i as u64, -1.0, 1.0)], &[true]);
    }
}

#[test]
fn tied_maxima_give_the_gradient_to_the_first_tap() {
    // Values from a few levels: many windows hold their maximum twice.
    for (g, n) in cases() {
        let r = rnd(g.c * g.w * g.h, n, 3, 0.0, 3.0);
        let x = HostMat::new(r.rows, r.cols, r.data.iter().map(|v| v.floor()).collect()).unwrap();
        let mut tape = Tape::new();
        let xt = tape.tensor(x.clone());
        tape.begin();
        let out = tape.apply(AgOp::MaxPool2d(g), &[xt.clone()], &[true]).unwrap().tensor;
        let (r, c) = out.shape();
        let w = rnd(r, c, 8, 0.5, 1.5);
        let wt = tape.tensor(w.clone());
        let prod = tape.apply(AgOp::Mul, &[out, wt], &[true, false]).unwrap().tensor;
        let loss = tape.apply(AgOp::Sum(Axis::All), &[prod], &[true]).unwrap().tensor;
        let grads = tape.backward(&loss).unwrap();
        let got = grads.iter().find(|(t, _)| t.id == xt.id).unwrap().1.to_host().unwrap();
        let (_, at) = direct(&g, &x);
        let mut want = vec![0.0; x.len()];
        for (j, &i) in at.iter().enumerate() {
            want[i] += w.data[j];
        }
        assert_eq!(got.data, want, "{g:?}");
    }
}

#[test]
fn max_pooling_errors_name_the_layer() {
    let g = cases()[1].0;
    let mut tape = Tape::new();
    let bad = tape.tensor(rnd(g.c * g.w * g.h + 1, 2, 9, -1.0, 1.0));
    let e = tape.apply(AgOp::MaxPool2d(g), &[bad], &[true]);
    let msg = format!("{:#}", e.err().expect("an error"));
    assert!(msg.contains("ggml_layer_max_pooling_2d") && msg.contains("whole batch"), "{msg}");
    let e = AgOp::parse("max_pool2d", &[2.0, 3.0, 3.0, 4.0, 2.0, 1.0, 1.0], None).unwrap_err().to_string();
    assert!(e.contains("ggml_layer_max_pooling_2d") && e.contains("does not fit"), "{e}");
    assert!(AgOp::parse("max_pool2d", &[2.0, 3.0, 3.0, 2.0, 2.0, 0.0, 1.0], None).is_err());
    assert!(AgOp::parse("max_pool2d", &[2.0, 3.0, 3.0], None).is_err());
}
