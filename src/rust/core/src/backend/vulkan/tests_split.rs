//! Dispatches run in pieces (a batch ending inside a long dispatch, so
//! that Ctrl-C is answered during one huge operation) compute exactly what
//! the whole dispatch computes, on every grid shape and kernel path.

use super::batch::BATCH_BUDGET_NS;
use super::test_util::*;
use super::*;
use crate::base::dtype::DType::*;
use crate::op::Op;

#[test]
fn dispatches_split_into_pieces_compute_what_whole_ones_do() {
    let Some(shared) = ctx() else { return };
    if !shared.pipelines.dispatch_base() {
        return eprintln!("skipping: the device cannot run dispatches from a base workgroup");
    }
    // Both kernel paths of products and reductions, one such test at a time.
    let _paths = super::tests_ops::PATHS.lock().unwrap_or_else(|p| p.into_inner());
    let c = VkContext::unshared(0).unwrap();
    let ane = [37, 150, 3, 2];
    let bne = [37, 130, 3, 2];
    let x = values(37 * 150 * 6, 60, -1.0, 1.0);
    let y = values(37 * 130 * 6, 61, -1.0, 1.0);
    let a = upload(&c, &x, ane, F32, false, 0);
    let b = upload(&c, &y, bne, F16, true, 0);
    let long = upload(&c, &values(3000 * 4, 62, -1.0, 1.0), [3000, 4, 1, 1], F32, false, 0);
    let cases: Vec<(Op, Vec<&DevT>, [usize; 4])> = vec![
        (Op::MulMat, vec![&a, &b], [150, 130, 3, 2]),
        (Op::Add, vec![&a, &a], ane),
        (Op::Scale { s: 2.0 }, vec![&a], ane),
        (Op::SoftMax { scale: 1.0, max_bias: 0.0 }, vec![&a], ane),
        (Op::SumRows, vec![&a], [1, 150, 3, 2]),
        (Op::SoftMax { scale: 1.0, max_bias: 0.0 }, vec![&long], [3000, 4, 1, 1]),
    ];
    // Three workgroups per batch when pinned at a third of the budget.
    let third = u64::from(BATCH_BUDGET_NS) * 1000 / 3;
    for gpu_paths in [false, true] {
        encode::GPU_PATHS_ON_CPU.store(gpu_paths, std::sync::atomic::Ordering::Relaxed);
        for cap in [u32::MAX, 5] {
            c.set_group_cap(cap);
            for (op, srcs, dne) in &cases {
                let what = format!("{op:?}, GPU paths {gpu_paths}, at most {cap} workgroups per dimension");
                c.lock_speeds().pin(Some(1));
                let s0 = c.submissions();
                let whole = run1(&c, op, srcs, &output(&c, *dne, F32));
                assert_eq!(c.submissions() - s0, 1, "{what}: one submission when every dispatch fits");
                c.lock_speeds().pin(Some(third));
                let s0 = c.submissions();
                let pieces = run1(&c, op, srcs, &output(&c, *dne, F32));
                let subs = c.submissions() - s0;
                assert!(whole.iter().any(|&v| v != 0.0), "{what}");
                assert_close(&pieces, &whole, 0.0, 0.0, &format!("{what}: in {subs} pieces"));
                assert!(subs > 1 || (!gpu_paths && dne[0] == 3000), "{what}: {subs} submissions");
            }
        }
    }
    encode::GPU_PATHS_ON_CPU.store(false, std::sync::atomic::Ordering::Relaxed);
    c.set_group_cap(u32::MAX);
    // Unpinned, a fresh shader's first dispatch of more than PROBE_GROUPS
    // workgroups and PROBE_UNITS of work is timed on a probe, then sized
    // by it: a product of ones over an inner length of 8192 is 8192 everywhere.
    c.lock_speeds().pin(None);
    let fresh = VkContext::unshared(0).unwrap();
    let k = 8192;
    let ones = upload(&fresh, &vec![1.0; k * 256], [k, 256, 1, 1], F32, false, 0);
    let s0 = fresh.submissions();
    let got = run1(&fresh, &Op::MulMat, &[&ones, &ones], &output(&fresh, [256, 256, 1, 1], F32));
    assert!(fresh.submissions() - s0 >= 2, "the first dispatch was probed");
    assert!(got.iter().all(|&v| v == k as f32), "product after a probe");
}
