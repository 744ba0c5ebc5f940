use super::*;
use crate::base::dtype::DType;
use crate::op::{PoolOp, UnaryOp};
use crate::tensor::io::{get_values, set_values};
use crate::tensor::{Context, TENSOR_OVERHEAD};

/// Values in [-0.5, 0.5) that differ between tensors.
fn vals(n: usize, seed: u64) -> Vec<f64> {
    (0..n).map(|k| ((k as u64 * 37 + seed * 11) % 101) as f64 / 101.0 - 0.5).collect()
}

/// An MLP forward: 64 -> 256 -> 256 -> 10, relu, softmax, batch 32.
fn mlp(ctx: &Context) -> (Vec<Arc<Tensor>>, Arc<Tensor>) {
    let x = ctx.new_tensor(DType::F32, &[64, 32]).unwrap();
    let mut leaves = vec![x.clone()];
    let mut h = x;
    for (i, (fan_in, fan_out)) in [(64, 256), (256, 256), (256, 10)].into_iter().enumerate() {
        let w = ctx.new_tensor(DType::F32, &[fan_in, fan_out]).unwrap();
        let b = ctx.new_tensor(DType::F32, &[fan_out, 1]).unwrap();
        leaves.push(w.clone());
        leaves.push(b.clone());
        let z = ctx.op(Op::MulMat, &[w, h]).unwrap();
        let z = ctx.op(Op::Add, &[z, b]).unwrap();
        h = if i < 2 { ctx.op(Op::Unary(UnaryOp::Relu), &[z]).unwrap() } else { z };
    }
    let y = ctx.op(Op::SoftMax { scale: 1.0, max_bias: 0.0 }, &[h]).unwrap();
    (leaves, y)
}

/// A CNN forward: 3x32x32 images (batch 2) -> conv 3x3x16 -> relu -> max
/// pool 2 -> conv 3x3x32 -> relu -> avg pool 2.
fn cnn(ctx: &Context) -> (Vec<Arc<Tensor>>, Arc<Tensor>) {
    let img = ctx.new_tensor(DType::F32, &[32, 32, 3, 2]).unwrap();
    let k1 = ctx.new_tensor(DType::F32, &[3, 3, 3, 16]).unwrap();
    let k2 = ctx.new_tensor(DType::F32, &[3, 3, 16, 32]).unwrap();
    let c1 = ctx.conv_2d(&k1, &img, 1, 1, 1, 1, 1, 1).unwrap();
    let r1 = ctx.op(Op::Unary(UnaryOp::Relu), &[c1]).unwrap();
    let pool = |op| Op::Pool2d { op, k0: 2, k1: 2, s0: 2, s1: 2, p0: 0.0, p1: 0.0 };
    let p1 = ctx.op(pool(PoolOp::Max), &[r1]).unwrap();
    let c2 = ctx.conv_2d(&k2, &p1, 1, 1, 1, 1, 1, 1).unwrap();
    let r2 = ctx.op(Op::Unary(UnaryOp::Relu), &[c2]).unwrap();
    let y = ctx.op(pool(PoolOp::Avg), &[r2]).unwrap();
    (vec![img, k1, k2], y)
}

/// Values of `y` computed with every tensor in memory of its own.
fn reference(build: fn(&Context) -> (Vec<Arc<Tensor>>, Arc<Tensor>)) -> Vec<f64> {
    let ctx = Context::new(64 * TENSOR_OVERHEAD, true).unwrap();
    let (leaves, y) = build(&ctx);
    ctx.alloc_tensors(crate::backend::host().as_ref(), BufferTag::User).unwrap();
    for (i, l) in leaves.iter().enumerate() {
        set_values(l, &vals(l.nelements(), i as u64), 0).unwrap();
    }
    Graph::build(&y).unwrap().compute(crate::backend::host()).unwrap();
    get_values(&y, 0, None).unwrap()
}

fn allocated(build: fn(&Context) -> (Vec<Arc<Tensor>>, Arc<Tensor>)) -> (Vec<f64>, Plan, usize) {
    let ctx = Context::new(64 * TENSOR_OVERHEAD, true).unwrap();
    let (leaves, y) = build(&ctx);
    let g = Graph::build(&y).unwrap();
    let ga = GraphAllocator::new(crate::backend::host().clone()).unwrap();
    let reserved = ga.reserve(&g).unwrap();
    let p = ga.alloc_graph(&g).unwrap();
    assert_eq!(reserved.peak, p.peak);
    for (i, l) in leaves.iter().enumerate() {
        set_values(l, &vals(l.nelements(), i as u64), 0).unwrap();
    }
    g.compute(crate::backend::host()).unwrap();
    // A second allocation of the same graph keeps the memory (and the inputs).
    let again = ga.alloc_graph(&g).unwrap();
    assert!(again.offsets.is_empty());
    g.compute(crate::backend::host()).unwrap();
    (get_values(&y, 0, None).unwrap(), p, ga.buffer_size())
}

#[test]
fn mlp_reuses_memory_and_computes_the_same() {
    let want = reference(mlp);
    let (got, p, size) = allocated(mlp);
    assert_eq!(got, want);
    assert_eq!(size, p.peak);
    assert!(p.peak < p.naive, "peak {} naive {}", p.peak, p.naive);
    assert!(p.reused > 0 && p.in_place > 0, "{p:?}");
    eprintln!("MLP forward: peak {} bytes, {} without reuse", p.peak, p.naive);
}

#[test]
fn cnn_reuses_memory_and_computes_the_same() {
    let want = reference(cnn);
    let (got, p, _) = allocated(cnn);
    assert_eq!(got, want);
    assert!(p.peak < p.naive, "peak {} naive {}", p.peak, p.naive);
    eprintln!("CNN forward: peak {} bytes, {} without reuse", p.peak, p.naive);
}

#[test]
fn kept_tensors_outlive_the_graph() {
    let ctx = Context::new(16 * TENSOR_OVERHEAD, true).unwrap();
    let a = ctx.new_tensor(DType::F32, &[1000]).unwrap();
    let b = ctx.op(Op::Unary(UnaryOp::Exp), &[a.clone()]).unwrap();
    b.set_flag(Tensor::OUTPUT);
    let c = ctx.op(Op::Unary(UnaryOp::Neg), &[b.clone()]).unwrap();
    let d = ctx.op(Op::Scale { s: 2.0 }, &[c.clone()]).unwrap();
    let g = Graph::build(&d).unwrap();
    let p = plan(&g, &|_| true);
    let off = |t: &Arc<Tensor>| p.offsets.iter().find(|(x, _)| x.id() == t.id()).unwrap().1;
    // b is an output: c cannot take its memory; d takes c's (in place)
    assert_ne!(off(&b), off(&c));
    assert_eq!(off(&c), off(&d));
    assert_ne!(off(&a), off(&b));
    let ga = GraphAllocator::new(crate::backend::host().clone()).unwrap();
    ga.alloc_graph(&g).unwrap();
    set_values(&a, &vec![0.0; 1000], 0).unwrap();
    g.compute(crate::backend::host()).unwrap();
    assert_eq!(get_values(&b, 0, Some(2)).unwrap(), vec![1.0, 1.0]);
    assert_eq!(get_values(&d, 0, Some(2)).unwrap(), vec![-2.0, -2.0]);
    ga.free();
    assert!(get_values(&d, 0, None).unwrap_err().to_string().contains("freed"));
    assert_eq!(ga.buffer_size(), 0);
}
