//! The device path against the host path: graph forwards, the backward pass
//! through device values, and in-place optimizer updates.

use super::device::Dev;
use super::*;
use crate::backend::Backend;
use crate::residency::{self, Scope};
use std::sync::Arc;

fn mat(r: usize, c: usize, k: f64) -> Mat {
    Mat::new(r, c, (0..r * c).map(|i| ((i as f64 + k) * 0.37).sin()).collect()).unwrap()
}

fn close(a: &Mat, b: &Mat, tol: f64) {
    assert_eq!((a.rows, a.cols), (b.rows, b.cols));
    for (x, y) in a.data.iter().zip(&b.data) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{x} vs {y}");
    }
}

#[test]
fn device_ops_match_host_and_update_in_place() {
    let _g = crate::ledger::tests::serial();
    {
        let mut s = residency::state();
        s.reset(&Scope::BOTH, Some(1.0)).unwrap();
        s.set_backend(Some(Arc::new(Backend::cpu())));
    }
    let (w, x, b) = (mat(3, 4, 0.0), mat(4, 5, 1.0), mat(3, 1, 2.0));
    let ops = [Op::MatMul, Op::Linear(ops::Act::Tanh)];
    for op in ops {
        let ins: Vec<Mat> = if op == Op::MatMul { vec![w.clone(), x.clone()] } else { vec![w.clone(), x.clone(), b.clone()] };
        let run = |dev: bool| {
            let mut tape = Tape::new();
            let ts: Vec<TensorRef> = ins.iter().map(|m| tape.tensor(m.clone())).collect();
            if dev {
                let d = Dev::upload(&ins[0], Scope::Persistent).unwrap();
                ts[0].set_storage(Storage::Device(d));
            }
            tape.begin();
            let rg = vec![true; ts.len()];
            let out = tape.apply_on(op.clone(), &ts, &rg, dev).unwrap().tensor;
            assert_eq!(out.value().device().is_some(), dev);
            let loss = tape.apply(Op::Sum(Axis::All), &[out.clone()], &[true]).unwrap().tensor;
            let g = tape.backward(&loss).unwrap();
            (out.value().to_host().unwrap(), g.into_iter().map(|(_, g)| g).collect::<Vec<_>>(), ts)
        };
        let (hv, hg, _) = run(false);
        let (dv, dg, ts) = run(true);
        close(&dv, &hv, 1e-5);
        for (a, b) in dg.iter().zip(&hg) {
            close(a, b, 1e-5);
        }
        // SGD on the device writes into the weight's own memory.
        let before = ts[0].value().device().unwrap().t.clone();
        // Two steps; the second uploads nothing to the persistent pool.
        let mut opt = Optimizer::new(OptKind::Sgd { momentum: 0.0 }, 1);
        opt.step(&ts[..1], &["w".into()], &[Some(&dg[0].data)], 0.25).unwrap();
        let up0 = crate::ledger::stats().upload_bytes;
        opt.step(&ts[..1], &["w".into()], &[Some(&dg[0].data)], 0.25).unwrap();
        let up1 = crate::ledger::stats().upload_bytes;
        let after = ts[0].value();
        assert!(Arc::ptr_eq(&after.device().unwrap().t, &before));
        let mut want = w.clone();
        for (v, g) in want.data.iter_mut().zip(&dg[0].data) {
            *v -= 0.5 * g;
        }
        close(&after.to_host().unwrap(), &want, 1e-5);
        let p = crate::ledger::tag_index(Scope::Persistent.tag());
        assert_eq!(up1[p], up0[p], "no upload into the persistent pool");
    }
    residency::state().reset(&Scope::BOTH, None).unwrap();
}
