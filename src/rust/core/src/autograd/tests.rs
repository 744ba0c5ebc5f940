//! Every op's gradient on device "cpu" (the CPU backend in f64) against
//! central finite differences of its own forward, forward values against
//! plain f64 arithmetic, plus tape and optimizer behaviour.

use super::*;

fn zeros(r: usize, c: usize) -> HostMat {
    HostMat::filled(r, c, 0.0)
}

fn host(s: &Storage) -> HostMat {
    s.to_host().unwrap()
}

/// The forward value of `op` on `inputs` (not recorded).
pub(super) fn value(op: &AgOp, inputs: &[HostMat]) -> HostMat {
    let mut tape = Tape::new();
    let ts: Vec<AgTensorRef> = inputs.iter().map(|m| tape.tensor(m.clone())).collect();
    let rg = vec![false; ts.len()];
    host(&tape.apply(op.clone(), &ts, &rg).unwrap().tensor.value())
}

pub(super) fn rnd(r: usize, c: usize, seed: u64, lo: f64, hi: f64) -> HostMat {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let data = (0..r * c)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    HostMat::new(r, c, data).unwrap()
}

/// loss = sum(op(inputs) * w) for a fixed random weight w; compares the
/// tape's gradient with central differences for every input in `check`.
pub(super) fn fd_check(op: AgOp, inputs: Vec<HostMat>, check: &[bool]) {
    let mut tape = Tape::new();
    let ts: Vec<AgTensorRef> = inputs.iter().map(|m| tape.tensor(m.clone())).collect();
    tape.begin();
    let out = tape.apply(op.clone(), &ts, check).unwrap().tensor;
    let (r, c) = out.shape();
    let w = tape.tensor(rnd(r, c, 99, -1.0, 1.0));
    let prod = tape.apply(AgOp::Mul, &[out, w.clone()], &[true, false]).unwrap().tensor;
    let loss = tape.apply(AgOp::Sum(Axis::All), &[prod], &[true]).unwrap().tensor;
    let grads = tape.backward(&loss).unwrap();
    let wv = host(&w.value());
    let f = |xs: &[HostMat]| -> f64 { value(&op, xs).data.iter().zip(&wv.data).map(|(a, b)| a * b).sum() };
    for (i, t) in ts.iter().enumerate() {
        if !check[i] {
            continue;
        }
        let g = host(&grads.iter().find(|(x, _)| x.id == t.id).expect("gradient").1);
        let mut xs = inputs.clone();
        for k in 0..xs[i].len() {
            let h = 1e-6;
            let x0 = xs[i].data[k];
            xs[i].data[k] = x0 + h;
            let fp = f(&xs);
            xs[i].data[k] = x0 - h;
            let fm = f(&xs);
            xs[i].data[k] = x0;
            let num = (fp - fm) / (2.0 * h);
            assert!((num - g.data[k]).abs() < 1e-5 * (1.0 + num.abs()), "{op:?} input {i} elem {k}: {num} vs {}", g.data[k]);
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    let a = rnd(3, 4, 1, -1.0, 1.0);
    let b = rnd(4, 2, 2, -1.0, 1.0);
    let pos = rnd(3, 4, 3, 0.5, 2.0);
    let col = rnd(3, 1, 4, 0.5, 2.0);
    let row = rnd(1, 4, 5, 0.5, 2.0);
    fd_check(AgOp::MatMul, vec![a.clone(), b.clone()], &[true, true]);
    for act in [AgActivation::None, AgActivation::Relu, AgActivation::Sigmoid, AgActivation::Tanh] {
        fd_check(AgOp::Linear(act), vec![a.clone(), b.clone(), rnd(3, 1, 12, -1.0, 1.0)], &[true, true, true]);
    }
    for op in [AgOp::Add, AgOp::Sub, AgOp::Mul, AgOp::Div] {
        fd_check(op.clone(), vec![a.clone(), pos.clone()], &[true, true]);
        fd_check(op.clone(), vec![a.clone(), col.clone()], &[true, true]);
        fd_check(op.clone(), vec![a.clone(), row.clone()], &[true, true]);
        fd_check(op, vec![a.clone(), HostMat::filled(1, 1, 1.7)], &[true, true]);
    }
    for op in [AgOp::Scale(-2.5), AgOp::Sigmoid, AgOp::Tanh, AgOp::Softmax, AgOp::Exp, AgOp::Transpose, AgOp::Reshape(2, 6)] {
        fd_check(op, vec![a.clone()], &[true]);
    }
    let away = rnd(3, 4, 7, 0.1, 1.0);
    let signed = HostMat::new(3, 4, away.data.iter().zip(&a.data).map(|(m, s)| if *s > 0.0 { *m } else { -m }).collect()).unwrap();
    fd_check(AgOp::Relu, vec![signed], &[true]);
    fd_check(AgOp::Log, vec![pos.clone()], &[true]);
    fd_check(AgOp::Pow(2.5), vec![pos.clone()], &[true]);
    fd_check(AgOp::Pow(2.0), vec![a.clone()], &[true]);
    fd_check(AgOp::Clamp(-0.5, 0.5), vec![a.clone()], &[true]);
    for ax in [Axis::All, Axis::Rows, Axis::Cols] {
        fd_check(AgOp::Sum(ax), vec![a.clone()], &[true]);
        fd_check(AgOp::Mean(ax), vec![a.clone()], &[true]);
    }
    let probs = value(&AgOp::Softmax, std::slice::from_ref(&a));
    let target = rnd(3, 4, 8, 0.0, 1.0);
    fd_check(AgOp::MseLoss, vec![a.clone(), target.clone()], &[true, true]);
    fd_check(AgOp::CrossEntropyLoss, vec![probs, target.clone()], &[true, true]);
    fd_check(AgOp::SoftmaxCrossEntropyLoss, vec![a.clone(), target], &[true, true]);
    let gamma = rnd(3, 1, 9, 0.5, 1.5);
    let beta = rnd(3, 1, 10, -0.5, 0.5);
    fd_check(AgOp::BatchNorm { eps: 1e-5, training: true }, vec![a.clone(), gamma.clone(), beta.clone()], &[true, true, true]);
    fd_check(
        AgOp::BatchNorm { eps: 1e-5, training: false },
        vec![a.clone(), gamma, beta, col.clone(), rnd(3, 1, 11, 0.5, 1.0)],
        &[true, true, true, false, false],
    );
    fd_check(AgOp::Gather(vec![2, 0, 2, 1], 1), vec![a.clone()], &[true]);
    // Patches: three picks stacked per column (columns read up to 3 times).
    fd_check(AgOp::Gather(vec![0, 1, 2, 1, 2, 3, 2, 3, 0, 3, 0, 1], 3), vec![a.clone()], &[true]);
    fd_check(AgOp::SliceRows(1, 3), vec![a.clone()], &[true]);
    fd_check(AgOp::ConcatRows, vec![a.clone(), row, pos], &[true, true, false]);
}

#[test]
fn errors_leave_the_tape_unchanged() {
    let mut tape = Tape::new();
    let a = tape.tensor(rnd(2, 3, 1, -1.0, 1.0));
    let b = tape.tensor(rnd(2, 3, 2, -1.0, 1.0));
    tape.begin();
    let ok = tape.apply(AgOp::Mul, &[a.clone(), b.clone()], &[true, false]).unwrap();
    assert_eq!(tape.len(), 1);
    let err = tape.apply(AgOp::MatMul, &[a.clone(), b.clone()], &[true, false]).err().unwrap();
    assert!(format!("{err}").contains("non-conformable"), "{err}");
    let c = tape_tensor(&mut tape, 3, 3);
    let err = tape.apply(AgOp::Add, &[a.clone(), c], &[true, false]).err().unwrap();
    assert!(format!("{err}").contains("do not match"), "{err}");
    assert_eq!(tape.len(), 1);
    let loss = tape.apply(AgOp::Sum(Axis::All), &[ok.tensor], &[true]).unwrap().tensor;
    let g = tape.backward(&loss).unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(host(&g[0].1), host(&b.value()));
    assert!(tape.is_empty());
    // A second backward on a consumed tape is an error, not a crash.
    assert!(tape.backward(&loss).is_err());
}

fn tape_tensor(t: &mut Tape, r: usize, c: usize) -> AgTensorRef {
    t.tensor(zeros(r, c))
}

#[test]
fn gradients_accumulate_on_leaves_and_shared_inputs() {
    let mut tape = Tape::new();
    let x = tape.tensor(HostMat::new(1, 2, vec![1.0, 2.0]).unwrap());
    tape.begin();
    // loss = sum(x * x) uses x twice: gradient 2x
    let y = tape.apply(AgOp::Mul, &[x.clone(), x.clone()], &[true, true]).unwrap().tensor;
    let loss = tape.apply(AgOp::Sum(Axis::All), &[y], &[true]).unwrap().tensor;
    tape.backward(&loss).unwrap();
    assert_eq!(x.grad().unwrap().unwrap().data, vec![2.0, 4.0]);
}

#[test]
fn adam_updates_in_place_unless_a_tape_holds_the_weight() {
    let mut tape = Tape::new();
    let w = tape.tensor(HostMat::new(1, 2, vec![1.0, -1.0]).unwrap());
    let mut opt = Optimizer::new(OptKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8 }, 1);
    let g = [0.5, -0.25];
    let n0 = graph::graphs_computed();
    opt.step(&[w.clone()], &["w".into()], &[Some(GradIn::Host(&g))], 0.1).unwrap();
    assert_eq!(graph::graphs_computed() - n0, 1, "one graph");
    // First Adam step moves each weight by lr * sign(g) (up to eps).
    let d = host(&w.value()).data;
    assert!((d[0] - 0.9).abs() < 1e-6 && (d[1] + 0.9).abs() < 1e-6, "{d:?}");
    // The weight is now a CPU tensor, updated in its own memory.
    let t0 = std::sync::Arc::as_ptr(&w.value().engine().unwrap().t);
    opt.step(&[w.clone()], &["w".into()], &[Some(GradIn::Host(&g))], 0.1).unwrap();
    assert_eq!(std::sync::Arc::as_ptr(&w.value().engine().unwrap().t), t0, "the update is in place");
    // A tape that still holds the weight keeps the value it read.
    tape.begin();
    let y = tape.apply(AgOp::Mul, &[w.clone(), w.clone()], &[true, true]).unwrap().tensor;
    let held = host(&w.value());
    opt.step(&[w.clone()], &["w".into()], &[Some(GradIn::Host(&g))], 0.1).unwrap();
    assert_ne!(host(&w.value()), held);
    let loss = tape.apply(AgOp::Sum(Axis::All), &[y], &[true]).unwrap().tensor;
    let gr = host(&tape.backward(&loss).unwrap()[0].1);
    assert_eq!(gr.data, held.data.iter().map(|v| 2.0 * v).collect::<Vec<_>>(), "the gradient of the value read");
    let bad = [1.0];
    assert!(opt.step(&[w.clone()], &["w".into()], &[Some(GradIn::Host(&bad))], 0.1).is_err());
}

#[test]
fn cpu_results_are_exact_f64() {
    // Values f32 cannot hold survive every op on device "cpu".
    let a = HostMat::new(2, 2, vec![1.0 + 1e-12, 2.0, 3.0, 4.0 - 1e-12]).unwrap();
    let b = HostMat::new(2, 1, vec![1e-13, -1e-13]).unwrap();
    let s = value(&AgOp::Add, &[a.clone(), b.clone()]);
    assert_eq!(s.data, vec![1.0 + 1e-12 + 1e-13, 2.0 - 1e-13, 3.0 + 1e-13, 4.0 - 1e-12 - 1e-13]);
    let m = value(&AgOp::MatMul, &[a.clone(), HostMat::new(2, 1, vec![1.0, 1.0]).unwrap()]);
    assert_eq!(m.data, vec![1.0 + 1e-12 + 3.0, 2.0 + 4.0 - 1e-12]);
    let l = value(&AgOp::Linear(AgActivation::Tanh), &[a.clone(), HostMat::new(2, 1, vec![0.5, -0.25]).unwrap(), b]);
    let want0 = ((1.0 + 1e-12) * 0.5 - 3.0 * 0.25 + 1e-13f64).tanh();
    assert!((l.data[0] - want0).abs() < 1e-15, "{} vs {want0}", l.data[0]);
    assert_eq!(value(&AgOp::Scale(1.0 / 3.0), &[a.clone()]).data[1], 2.0 * (1.0 / 3.0));
    assert_eq!(value(&AgOp::Mean(Axis::All), &[a]).data[0], (1.0 + 1e-12 + 2.0 + 3.0 + 4.0 - 1e-12) * 0.25);
}

#[test]
fn clip_factor_scales_to_max_norm() {
    let (n, f) = clip_factor(&[&[3.0], &[4.0]], 1.0).unwrap();
    assert_eq!(n, 5.0);
    assert!((f * 5.0 - 1.0).abs() < 1e-6);
    assert_eq!(clip_factor(&[&[0.3]], 1.0).unwrap().1, 1.0);
    assert!(clip_factor(&[&[0.3]], -1.0).is_err());
}

/// CPU time of this thread in ns (from /proc; 0 where it is not there).
fn thread_ns() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// CPU time of this process (all threads), in 10 ms ticks, from /proc.
fn cpu_ticks() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0);
    field(11) + field(12)
}

/// Comma-separated sizes from environment variable `key` (else `default`).
pub(crate) fn env_dims(key: &str, default: &str) -> Vec<usize> {
    let v = std::env::var(key).unwrap_or_else(|_| default.into());
    v.split(',').map(|d| d.trim().parse().expect("sizes must be whole numbers")).collect()
}

/// Time per training step (forward, backward, Adam) of an MLP without R
/// around it, wall clock and CPU time (default 512-256-10 at batch 512;
/// GGMLR_STEP_SIZE="128,128,64" for the small bench model):
/// `cargo test --release step_timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn step_timing() {
    use std::time::Instant;
    // GGMLR_STEP_SIZE="in,hidden,batch" (default the large bench model).
    let dims = env_dims("GGMLR_STEP_SIZE", "512,256,512");
    let (d, h, nb) = (dims[0], dims[1], dims[2]);
    let mut tape = Tape::new();
    let w1 = tape.tensor(rnd(h, d, 1, -0.05, 0.05));
    let b1 = tape.tensor(zeros(h, 1));
    let w2 = tape.tensor(rnd(10, h, 2, -0.05, 0.05));
    let b2 = tape.tensor(zeros(10, 1));
    let x = tape.tensor(rnd(d, nb, 3, -1.0, 1.0));
    let y = tape.tensor(HostMat::new(10, nb, (0..10 * nb).map(|i| if i % 10 == (i / 10) % 10 { 1.0 } else { 0.0 }).collect()).unwrap());
    let params = [w1.clone(), b1.clone(), w2.clone(), b2.clone()];
    let names: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
    let mut opt = Optimizer::new(OptKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8 }, 4);
    let forward = |tape: &mut Tape| {
        tape.begin();
        let h = tape.apply(AgOp::Linear(AgActivation::Relu), &[w1.clone(), x.clone(), b1.clone()], &[true, false, true]).unwrap().tensor;
        let z = tape.apply(AgOp::Linear(AgActivation::None), &[w2.clone(), h, b2.clone()], &[true, true, true]).unwrap().tensor;
        let loss = tape.apply(AgOp::SoftmaxCrossEntropyLoss, &[z, y.clone()], &[true, false]).unwrap().tensor;
        tape.end();
        loss
    };
    // Wall seconds and CPU ticks of forward, backward and Adam.
    let (mut wall, mut ticks, mut own) = ([0.0; 3], [0.0; 3], [0.0; 3]);
    let n = (100 * 512 * 256 * 512 / (d * h * nb)).clamp(100, 5000);
    for it in 0..n + 5 {
        let (t0, c0, s0) = (Instant::now(), cpu_ticks(), thread_ns());
        let loss = forward(&mut tape);
        let (t1, c1, s1) = (Instant::now(), cpu_ticks(), thread_ns());
        let grads = tape.backward(&loss).unwrap();
        let (t2, c2, s2) = (Instant::now(), cpu_ticks(), thread_ns());
        let gs: Vec<Option<GradIn>> = params.iter().map(|p| grads.iter().find(|(t, _)| t.id == p.id).map(|(_, g)| GradIn::Stored(g))).collect();
        opt.step(&params, &names, &gs, 1e-3).unwrap();
        for p in &params {
            p.set_grad(None);
        }
        let (t3, c3, s3) = (Instant::now(), cpu_ticks(), thread_ns());
        if it >= 5 {
            for (k, (a, b)) in [(t0, t1), (t1, t2), (t2, t3)].into_iter().enumerate() {
                wall[k] += (b - a).as_secs_f64();
            }
            for (k, d) in [c1 - c0, c2 - c1, c3 - c2].into_iter().enumerate() {
                ticks[k] += d;
            }
            for (k, d) in [s1 - s0, s2 - s1, s3 - s2].into_iter().enumerate() {
                own[k] += d;
            }
        }
    }
    let ms = |t: f64| t / n as f64 * 1e3;
    println!(
        "forward {:.2} ms, backward {:.2} ms, adam {:.2} ms, step {:.2} ms",
        ms(wall[0]), ms(wall[1]), ms(wall[2]), ms(wall.iter().sum())
    );
    println!(
        "cpu time (summed over threads): forward {:.2} ms, backward {:.2} ms per step",
        ticks[0] * 10.0 / n as f64, ticks[1] * 10.0 / n as f64
    );
    println!(
        "cpu time of the calling thread: forward {:.4} ms, backward {:.4} ms, adam {:.4} ms",
        own[0] / 1e6 / n as f64, own[1] / 1e6 / n as f64, own[2] / 1e6 / n as f64
    );
}

/// Fixed cost of one recorded op and of its part of the backward pass, on
/// a 2x2 input (`cargo test --release op_overhead -- --ignored --nocapture`).
#[test]
#[ignore]
fn op_overhead() {
    let mut tape = Tape::new();
    let x = tape.tensor(rnd(2, 2, 1, -1.0, 1.0));
    let n = 20000;
    let (mut f, mut b) = (0.0, 0.0);
    for it in 0..n + 100 {
        let t0 = thread_ns();
        tape.begin();
        let y = tape.apply(AgOp::Scale(0.5), std::slice::from_ref(&x), &[true]).unwrap().tensor;
        let loss = tape.apply(AgOp::Sum(Axis::All), &[y], &[true]).unwrap().tensor;
        let t1 = thread_ns();
        tape.backward(&loss).unwrap();
        x.set_grad(None);
        let t2 = thread_ns();
        if it >= 100 {
            f += t1 - t0;
            b += t2 - t1;
        }
    }
    println!("two ops: forward {:.2} us, backward {:.2} us", f / n as f64 / 1e3, b / n as f64 / 1e3);
}

/// A scratch scope releases the tensors made in it that something still
/// holds (as R's objects do until its garbage collector runs): their values
/// become errors that name the release, their buffers are held by nothing
/// but the spare list (so the next step reuses them), and the tensors made
/// before the scope (a parameter and its gradient) are untouched.
#[test]
fn scratch_scope_releases_a_steps_tensors() {
    let mut tape = Tape::new();
    let xv = rnd(7, 13, 2, -1.0, 1.0);
    let w = tape.tensor(rnd(7, 13, 1, -1.0, 1.0));
    let wv = host(&w.value());
    assert_eq!(tape.scratch_begin().unwrap(), 0);
    let x = tape.tensor(xv.clone());
    tape.begin();
    let y = tape.apply(AgOp::Mul, &[w.clone(), x.clone()], &[true, false]).unwrap().tensor;
    let l = tape.apply(AgOp::Sum(Axis::All), &[y.clone()], &[true]).unwrap().tensor;
    tape.backward(&l).unwrap();
    tape.end();
    let buf = y.value().engine().unwrap().t.resolve().unwrap().buf;
    assert!(std::sync::Arc::strong_count(&buf) >= 3, "held by the tensor, the spare list and here");
    assert_eq!(tape.scratch_end().unwrap(), 3, "x, y and the loss");
    assert_eq!(std::sync::Arc::strong_count(&buf), 2, "only the spare list and here");
    assert_eq!(y.shape(), (7, 13));
    let e = y.value().to_host().unwrap_err().to_string();
    assert!(e.contains("released at the end of its training step"), "{e}");
    assert!(x.value().to_host().is_err() && l.value().to_host().is_err());
    assert_eq!(host(&w.value()), wv);
    assert_eq!(w.grad().unwrap().unwrap(), xv, "d sum(w * x) / dw = x");
    assert_eq!(tape.scratch_end().unwrap(), 0, "no scope is open");
    let later = tape.tensor(xv.clone());
    assert_eq!(tape.scratch_end().unwrap(), 0);
    assert_eq!(host(&later.value()), xv, "tensors made outside a scope are kept");
}
