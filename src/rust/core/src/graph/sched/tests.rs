use super::*;
use crate::backend::vulkan::support::REFUSED_FOR_TESTS;
use crate::base::dtype::DType;
use crate::memory::ledger;
use crate::op::{Op, UnaryOp};
use crate::tensor::io::{get_values, set_values};
use crate::tensor::{Context, TENSOR_OVERHEAD};

/// softmax(relu(W x + b)) * 2 with its leaves.
fn graph(ctx: &Context) -> (Vec<Arc<Tensor>>, Arc<Tensor>) {
    let w = ctx.new_tensor(DType::F32, &[8, 16]).unwrap();
    let x = ctx.new_tensor(DType::F32, &[8, 4]).unwrap();
    let b = ctx.new_tensor(DType::F32, &[16, 1]).unwrap();
    let z = ctx.op(Op::MulMat, &[w.clone(), x.clone()]).unwrap();
    let z = ctx.op(Op::Add, &[z, b.clone()]).unwrap();
    let z = ctx.op(Op::Unary(UnaryOp::Relu), &[z]).unwrap();
    let z = ctx.op(Op::SoftMax { scale: 1.0, max_bias: 0.0 }, &[z]).unwrap();
    let y = ctx.op(Op::Scale { s: 2.0 }, &[z]).unwrap();
    (vec![w, x, b], y)
}

fn fill(leaves: &[Arc<Tensor>]) {
    for (i, l) in leaves.iter().enumerate() {
        let v: Vec<f64> = (0..l.nelements()).map(|k| ((k * 7 + i * 3) % 11) as f64 / 11.0 - 0.4).collect();
        set_values(l, &v, 0).unwrap();
    }
}

fn reference() -> Vec<f64> {
    let ctx = Context::new(32 * TENSOR_OVERHEAD, true).unwrap();
    let (leaves, y) = graph(&ctx);
    ctx.alloc_tensors(crate::backend::host().as_ref(), BufferTag::User).unwrap();
    fill(&leaves);
    Graph::build(&y).unwrap().compute(crate::backend::host()).unwrap();
    get_values(&y, 0, None).unwrap()
}

#[test]
fn cpu_only_schedule_is_one_split() {
    let s = Scheduler::new(vec![Arc::new(Backend::cpu())], 2048, true).unwrap();
    assert_eq!(s.backends().len(), 1);
    let ctx = Context::new(32 * TENSOR_OVERHEAD, true).unwrap();
    let (leaves, y) = graph(&ctx);
    let g = Graph::build(&y).unwrap();
    s.alloc_graph(&g).unwrap();
    fill(&leaves);
    s.compute(&g).unwrap();
    assert_eq!(get_values(&y, 0, None).unwrap(), reference());
    assert_eq!((s.n_splits(), s.n_copies()), (1, 0));
    assert!(s.tensor_backend(&y).is_some());
    s.reset();
    assert!(get_values(&y, 0, None).is_err(), "reset frees the tensors' memory");
    s.alloc_graph(&g).unwrap();
    s.free();
    assert!(get_values(&y, 0, None).is_err(), "free frees the tensors' memory");
    assert!(s.alloc_graph(&g).is_err() && s.compute(&g).is_err(), "a freed scheduler is unusable");
}

#[test]
fn an_op_vulkan_lacks_runs_on_the_cpu_with_counted_copies() {
    let vk = match crate::backend::vulkan::VkContext::unshared(0) {
        Ok(c) => Arc::new(Backend::on_vulkan_context(0, c)),
        Err(e) => return eprintln!("skipping scheduler Vulkan test: {e:#}"),
    };
    let _l = ledger::tests::serial();
    REFUSED_FOR_TESTS.lock().unwrap().push("SOFT_MAX");
    let s = Scheduler::new(vec![vk.clone()], 2048, true).unwrap();
    assert_eq!(s.backends().len(), 2, "a CPU backend is added");
    let ctx = Context::new(32 * TENSOR_OVERHEAD, true).unwrap();
    let (leaves, y) = graph(&ctx);
    let g = Graph::build(&y).unwrap();
    s.alloc_graph(&g).unwrap();
    fill(&leaves);
    let before = ledger::stats();
    s.compute(&g).unwrap();
    let after = ledger::stats();
    REFUSED_FOR_TESTS.lock().unwrap().retain(|n| *n != "SOFT_MAX");
    let got = get_values(&y, 0, None).unwrap();
    for (a, b) in got.iter().zip(reference()) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    // Vulkan: mul_mat, add, relu; CPU: soft_max; Vulkan: scale.
    assert_eq!(s.n_splits(), 3);
    assert_eq!(s.n_copies(), 2, "relu's result to the CPU, soft_max's back");
    let i = ledger::tag_index(BufferTag::User);
    assert_eq!(after.copy_calls[i] - before.copy_calls[i], 2);
    assert_eq!(after.copy_bytes[i] - before.copy_bytes[i], 2 * 16 * 4 * 4);
    let b = s.tensor_backend(&y).unwrap();
    assert!(b.is_vulkan());
    // pinning the last node to the CPU moves it there on the next allocation
    s.set_tensor_backend(&y, &s.backends()[1].clone()).unwrap();
    assert!(s.set_tensor_backend(&y, &Backend::cpu()).is_err());
}
