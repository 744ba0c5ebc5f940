//! Device "gpu" (the residency pools, f32) against device "cpu" (the CPU
//! backend in f64) through the same rules: every op's forward and gradient,
//! the backward pass as one graph, gradients kept in the pools and rescued
//! before a reset, and in-place optimizer updates.

use super::graph::graphs_computed;
use super::place::upload;
use super::*;
use crate::base::dtype::DType;
use crate::backend::Backend;
use crate::residency::{self, Scope};
use std::sync::Arc;

fn mat(r: usize, c: usize, k: f64) -> HostMat {
    HostMat::new(r, c, (0..r * c).map(|i| ((i as f64 + k) * 0.37).sin()).collect()).unwrap()
}

fn map(m: HostMat, f: impl Fn(f64) -> f64) -> HostMat {
    HostMat::new(m.rows, m.cols, m.data.into_iter().map(f).collect()).unwrap()
}

fn pos(r: usize, c: usize, k: f64) -> HostMat {
    map(mat(r, c, k), |v| 0.6 + 0.5 * v)
}

/// `m` in the pool `scope`, as f32.
fn dev(m: &HostMat, scope: Scope) -> EngineVal {
    upload(m, Place::Pools, scope, DType::F32).unwrap()
}

fn close(a: &HostMat, b: &HostMat, tol: f64, what: &str) {
    assert_eq!((a.rows, a.cols), (b.rows, b.cols), "{what}");
    for (x, y) in a.data.iter().zip(&b.data) {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}: {x} vs {y}");
    }
}

fn cpu_device() -> std::sync::MutexGuard<'static, ()> {
    let g = crate::memory::ledger::tests::serial();
    super::reset_pools(&Scope::BOTH, Some(1.0)).unwrap();
    residency::state().set_backend(Some(Arc::new(Backend::cpu())));
    g
}

/// Values and gradients of sum(op(inputs) * W) (and the gradient storages).
fn run(op: &AgOp, ins: &[HostMat], grad: &[bool], dev: bool) -> (HostMat, Vec<Storage>) {
    let mut tape = Tape::new();
    let ts: Vec<AgTensorRef> = ins.iter().map(|m| tape.tensor(m.clone())).collect();
    if dev {
        for (t, m) in ts.iter().zip(ins) {
            t.set_storage(Storage::Engine(self::dev(m, Scope::Persistent)));
        }
    }
    tape.begin();
    let n0 = graphs_computed();
    let out = tape.apply_on(op.clone(), &ts, grad, dev).unwrap().tensor;
    assert_eq!(graphs_computed() - n0, 1, "{op:?}: the forward is a graph");
    assert_eq!(out.value().in_pools(), dev, "{op:?} runs where its inputs are");
    let (r, c) = out.shape();
    let w = tape.tensor(mat(r, c, 7.0));
    let prod = tape.apply(AgOp::Mul, &[out.clone(), w], &[true, false]).unwrap().tensor;
    let loss = tape.apply(AgOp::Sum(Axis::All), &[prod], &[true]).unwrap().tensor;
    let before = graphs_computed();
    let g = tape.backward(&loss).unwrap();
    assert_eq!(graphs_computed() - before, 1, "{op:?}: the backward pass is one graph");
    let gs = ts.iter().zip(grad).filter(|(_, &n)| n).map(|(t, _)| {
        g.iter().find(|(x, _)| x.id == t.id).expect("a gradient").1.clone()
    });
    (out.value().to_host().unwrap(), gs.collect())
}

fn backends() -> Vec<Arc<Backend>> {
    let mut v = vec![Arc::new(Backend::cpu())];
    match crate::backend::vulkan::VkContext::unshared(0) {
        Ok(c) => v.push(Arc::new(Backend::on_vulkan_context(0, c))),
        Err(e) => eprintln!("skipping the Vulkan backend: {e:#}"),
    }
    v
}

#[test]
fn every_op_on_the_device_matches_the_cpu() {
    let _g = cpu_device();
    for be in backends() {
        super::reset_pools(&Scope::BOTH, None).unwrap();
        residency::state().set_backend(Some(be.clone()));
        every_op(&be);
    }
    super::reset_pools(&Scope::BOTH, None).unwrap();
}

fn every_op(be: &Backend) {
    let oh = HostMat::new(3, 4, vec![1., 0., 0., 0., 0., 1., 0., 1., 0., 0., 1., 0.]).unwrap();
    let t2 = [true, true];
    let cases: Vec<(AgOp, Vec<HostMat>, Vec<bool>)> = vec![
        (AgOp::MatMul, vec![mat(3, 4, 0.), mat(4, 2, 1.)], t2.to_vec()),
        (AgOp::Linear(AgActivation::Relu), vec![mat(3, 4, 0.), mat(4, 5, 1.), mat(3, 1, 2.)], vec![true; 3]),
        (AgOp::Linear(AgActivation::Sigmoid), vec![mat(3, 4, 0.), mat(4, 5, 1.), mat(3, 1, 2.)], vec![true; 3]),
        (AgOp::Linear(AgActivation::Tanh), vec![mat(3, 4, 0.), mat(4, 5, 1.), mat(3, 1, 2.)], vec![true; 3]),
        (AgOp::Add, vec![mat(3, 4, 0.), mat(3, 4, 1.)], t2.to_vec()),
        (AgOp::Add, vec![mat(3, 4, 0.), mat(3, 1, 1.)], t2.to_vec()),
        (AgOp::Add, vec![mat(1, 4, 0.), mat(3, 4, 1.)], t2.to_vec()),
        (AgOp::Add, vec![mat(3, 1, 0.), mat(1, 4, 1.)], t2.to_vec()),
        (AgOp::Sub, vec![mat(3, 4, 0.), mat(1, 4, 1.)], t2.to_vec()),
        (AgOp::Sub, vec![mat(1, 1, 0.), mat(3, 4, 1.)], t2.to_vec()),
        (AgOp::Mul, vec![mat(3, 4, 0.), mat(3, 4, 1.)], t2.to_vec()),
        (AgOp::Mul, vec![mat(3, 1, 0.), mat(3, 4, 1.)], t2.to_vec()),
        (AgOp::Div, vec![mat(3, 4, 0.), pos(3, 4, 1.)], t2.to_vec()),
        (AgOp::Div, vec![mat(3, 4, 0.), pos(1, 4, 1.)], t2.to_vec()),
        (AgOp::Scale(-2.5), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Relu, vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Sigmoid, vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Tanh, vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Softmax, vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Log, vec![pos(3, 4, 0.)], vec![true]),
        (AgOp::Exp, vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Pow(3.0), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Pow(-2.0), vec![pos(3, 4, 0.)], vec![true]),
        (AgOp::Pow(1.5), vec![pos(3, 4, 0.)], vec![true]),
        (AgOp::Pow(0.5), vec![pos(3, 4, 0.)], vec![true]),
        (AgOp::Clamp(-0.5, 0.5), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Sum(Axis::All), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Sum(Axis::Rows), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Sum(Axis::Cols), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Mean(Axis::All), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Mean(Axis::Rows), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Mean(Axis::Cols), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Reshape(2, 6), vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::Transpose, vec![mat(3, 4, 0.)], vec![true]),
        (AgOp::MseLoss, vec![mat(3, 4, 0.), mat(3, 4, 1.)], t2.to_vec()),
        (AgOp::CrossEntropyLoss, vec![map(pos(3, 4, 0.), |v| v * 0.8), oh.clone()], t2.to_vec()),
        (AgOp::SoftmaxCrossEntropyLoss, vec![mat(3, 4, 0.), oh.clone()], t2.to_vec()),
        // large logits: probabilities that underflow in f32
        (AgOp::SoftmaxCrossEntropyLoss, vec![map(mat(3, 4, 0.), |v| 120.0 * v), oh.clone()], vec![true, false]),
        (AgOp::BatchNorm { eps: 1e-5, training: true }, vec![mat(3, 6, 0.), pos(3, 1, 1.), mat(3, 1, 2.)], vec![true; 3]),
        (
            AgOp::BatchNorm { eps: 1e-5, training: false },
            vec![mat(3, 6, 0.), pos(3, 1, 1.), mat(3, 1, 2.), mat(3, 1, 3.), pos(3, 1, 4.)],
            vec![true, true, true, false, false],
        ),
        (AgOp::Gather(vec![2, 0, 2], 1), vec![mat(3, 4, 0.)], vec![true]),
        // Few reads per column (a convolution's patches): the sum of gathers.
        (AgOp::Gather(vec![0, 1, 2, 3, 1, 2, 3, 2, 1], 1), vec![mat(1, 5, 0.)], vec![true]),
        // The same picks stacked three per column (patches [3, 3]).
        (AgOp::Gather(vec![0, 1, 2, 3, 1, 2, 3, 2, 1], 3), vec![mat(1, 5, 0.)], vec![true]),
        (AgOp::SliceRows(1, 3), vec![mat(4, 3, 0.)], vec![true]),
        (AgOp::SliceRows(0, 2), vec![mat(4, 3, 0.)], vec![true]),
        (AgOp::ConcatRows, vec![mat(2, 3, 0.), mat(1, 3, 1.), mat(2, 3, 2.)], vec![true; 3]),
    ];
    let mut cases = cases;
    for (g, n) in [(crate::op::max_pool::PoolGeom { c: 3, w: 6, h: 5, kw: 2, kh: 2, sw: 2, sh: 2 }, 2),
                   (crate::op::max_pool::PoolGeom { c: 2, w: 5, h: 4, kw: 3, kh: 2, sw: 1, sh: 1 }, 3)] {
        cases.push((AgOp::MaxPool2d(g), vec![mat(g.c * g.w * g.h, n, 0.)], vec![true]));
    }
    for (i, (g, f, n)) in super::conv_tests::cases().into_iter().enumerate() {
        let a = [AgActivation::Relu, AgActivation::None, AgActivation::Tanh][i % 3];
        let ins = vec![mat(f, g.patch(), 0.), mat(g.sample(), n, 1.), mat(f, 1, 2.)];
        cases.push((AgOp::Conv2d(g, a), ins, vec![true; 3]));
    }
    for (op, ins, grad) in &cases {
        let (hv, hg) = run(op, ins, grad, false);
        let (dv, dg) = run(op, ins, grad, true);
        let name = be.name();
        close(&dv, &hv, 1e-4, &format!("{name} {op:?} value"));
        assert_eq!(hg.len(), dg.len());
        for (i, (d, h)) in dg.iter().zip(&hg).enumerate() {
            assert!(d.in_pools(), "{op:?}: gradient {i} stays on the device");
            assert!(!h.in_pools(), "{op:?}: gradient {i} stays on the CPU");
            close(&d.to_host().unwrap(), &h.to_host().unwrap(), 1e-4, &format!("{name} {op:?} gradient {i}"));
        }
    }
}

#[test]
fn device_gradients_accumulate_and_are_rescued_before_a_reset() {
    let _g = cpu_device();
    let w = AgTensor::with_storage(1, Storage::Engine(dev(&mat(2, 3, 0.), Scope::Persistent)));
    let x = mat(3, 4, 1.);
    let step = |tape: &mut Tape| {
        let xt = tape.tensor(x.clone());
        tape.begin();
        let y = tape.apply(AgOp::MatMul, &[w.clone(), xt], &[true, false]).unwrap().tensor;
        let loss = tape.apply(AgOp::Sum(Axis::All), &[y], &[true]).unwrap().tensor;
        tape.backward(&loss).unwrap()
    };
    let mut tape = Tape::new();
    let g1 = step(&mut tape);
    let row_sum = |i: usize| (0..4).map(|j| x.data[i + 3 * j]).sum::<f64>();
    let want = HostMat::new(2, 3, (0..6).map(|k| row_sum(k / 2)).collect()).unwrap();
    close(&g1[0].1.to_host().unwrap(), &want, 1e-5, "gradient");
    // A second backward adds to the accumulated gradient inside its graph.
    let g2 = step(&mut tape);
    assert!(w.grad_storage().unwrap().in_pools());
    close(&w.grad().unwrap().unwrap(), &map(want.clone(), |v| 2.0 * v), 1e-5, "accumulated");
    // A store's cell and the tensor's gradient survive a reset of the pass pool.
    let cell = grad_cell(g2[0].1.clone());
    let down0 = crate::memory::ledger::stats().download_calls;
    super::reset_pools(&[Scope::Pass], None).unwrap();
    assert!(!cell.borrow().in_pools() && !w.grad_storage().unwrap().in_pools());
    assert!(crate::memory::ledger::stats().download_calls.iter().sum::<u64>() > down0.iter().sum::<u64>());
    close(cell.borrow().host().unwrap(), &want, 1e-5, "rescued store gradient");
    close(&w.grad().unwrap().unwrap(), &map(want.clone(), |v| 2.0 * v), 1e-5, "rescued gradient");
    // A dropped store costs nothing at the next reset.
    w.set_grad(None);
    drop(cell);
    let g3 = step(&mut tape);
    w.set_grad(None);
    drop(g3);
    let down1 = crate::memory::ledger::stats().download_bytes;
    super::reset_pools(&[Scope::Pass], None).unwrap();
    assert_eq!(crate::memory::ledger::stats().download_bytes, down1, "nothing left to rescue");
    super::reset_pools(&Scope::BOTH, None).unwrap();
}

#[test]
fn optimizers_read_device_gradients_and_update_in_place() {
    let _g = cpu_device();
    for kind in [OptKind::Sgd { momentum: 0.0 }, OptKind::Sgd { momentum: 0.9 }, OptKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8 }] {
        let w0 = mat(3, 4, 0.0);
        let g = mat(3, 4, 5.0);
        let wh = AgTensor::new(1, w0.clone());
        let wd = AgTensor::with_storage(2, Storage::Engine(dev(&w0, Scope::Persistent)));
        let gd = Storage::Engine(dev(&g, Scope::Pass));
        let before = wd.value().engine().unwrap().t.clone();
        let mut oh = Optimizer::new(kind.clone(), 1);
        let mut od = Optimizer::new(kind.clone(), 1);
        for step in 0..3 {
            oh.step(std::slice::from_ref(&wh), &["w".into()], &[Some(GradIn::Host(&g.data))], 0.25).unwrap();
            let up0 = crate::memory::ledger::stats().upload_bytes;
            let n0 = graphs_computed();
            od.step(std::slice::from_ref(&wd), &["w".into()], &[Some(GradIn::Stored(&gd))], 0.25).unwrap();
            assert_eq!(graphs_computed() - n0, 1, "one graph per step");
            if step > 0 {
                let up1 = crate::memory::ledger::stats().upload_bytes;
                let p = crate::memory::ledger::tag_index(Scope::Persistent.tag());
                assert_eq!(up1[p], up0[p], "no upload into the persistent pool");
            }
        }
        let after = wd.value();
        assert!(Arc::ptr_eq(&after.engine().unwrap().t, &before), "in place");
        close(&after.to_host().unwrap(), &wh.value().to_host().unwrap(), 1e-5, &format!("{kind:?}"));
    }
    super::reset_pools(&Scope::BOTH, None).unwrap();
}

#[test]
fn long_concatenations_and_many_gradients_fit_the_pass_pool() {
    let _g = cpu_device();
    // More nodes than one rule's reserved room: the builder moves on to new contexts.
    let ins: Vec<HostMat> = (0..60).map(|k| mat(1, 3, k as f64)).collect();
    let (hv, hg) = run(&AgOp::ConcatRows, &ins, &[true; 60], false);
    let (dv, dg) = run(&AgOp::ConcatRows, &ins, &[true; 60], true);
    close(&dv, &hv, 1e-5, "concat value");
    for (d, h) in dg.iter().zip(&hg) {
        close(&d.to_host().unwrap(), &h.to_host().unwrap(), 1e-5, "concat gradient");
    }
    // Clipping 200 gradients in the pass pool and 1 on the host together.
    let cells: Vec<GradCell> = (0..200).map(|k| grad_cell(Storage::Engine(dev(&mat(2, 2, k as f64), Scope::Pass)))).collect();
    let host = grad_cell(Storage::Host(mat(2, 2, 200.0)));
    let all: Vec<GradCell> = cells.iter().cloned().chain(std::iter::once(host.clone())).collect();
    let want: f64 = (0..201).map(|k| mat(2, 2, k as f64).data.iter().map(|v| v * v).sum::<f64>()).sum::<f64>().sqrt();
    let got = clip_grads(&all, want / 2.0).unwrap();
    assert!((got - want).abs() < 1e-4 * want, "{got} vs {want}");
    let f = (want / 2.0) / (want + 1e-6);
    close(&cells[199].borrow().to_host().unwrap(), &map(mat(2, 2, 199.0), |v| v * f), 1e-6, "scaled in the pool");
    close(host.borrow().host().unwrap(), &map(mat(2, 2, 200.0), |v| v * f), 1e-6, "scaled on the host");
    super::reset_pools(&Scope::BOTH, None).unwrap();
}

#[test]
fn mixed_host_and_device_nodes_share_one_backward_pass() {
    let _g = cpu_device();
    let grads = |dev: bool| {
        let mut tape = Tape::new();
        let x = tape.tensor(mat(4, 3, 1.0));
        let w = tape.tensor(mat(2, 4, 0.0));
        if dev {
            w.set_storage(Storage::Engine(self::dev(&mat(2, 4, 0.0), Scope::Persistent)));
        }
        tape.begin();
        // a node on the CPU (x stays there) feeding device nodes
        let h = tape.apply(AgOp::Tanh, std::slice::from_ref(&x), &[true]).unwrap().tensor;
        let y = tape.apply_on(AgOp::MatMul, &[w.clone(), h], &[true, true], dev).unwrap().tensor;
        let s = tape.apply_on(AgOp::Softmax, &[y], &[true], dev).unwrap().tensor;
        let t = tape.tensor(mat(2, 3, 5.0));
        let loss = tape.apply_on(AgOp::MseLoss, &[s, t], &[true, false], dev).unwrap().tensor;
        let g = tape.backward(&loss).unwrap();
        assert_eq!(g.len(), 2);
        g.into_iter().map(|(_, g)| g.to_host().unwrap()).collect::<Vec<_>>()
    };
    let (h, d) = (grads(false), grads(true));
    for (a, b) in d.iter().zip(&h) {
        close(a, b, 1e-5, "mixed tape gradient");
    }
    super::reset_pools(&Scope::BOTH, None).unwrap();
}
