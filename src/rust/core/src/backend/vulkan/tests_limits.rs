//! Device limits: dispatches capped below the work size still cover every
//! element, and tensors beyond what one kernel can address are clear errors.

use super::test_util::*;
use super::*;
use crate::base::dtype::DType::*;
use crate::layout::Layout;
use crate::op::Op;

#[test]
fn capped_dispatches_loop_over_all_work() {
    if ctx().is_none() {
        return;
    }
    let c = VkContext::unshared(0).unwrap();
    let ane = [37, 40, 3, 2];
    let bne = [37, 35, 3, 2];
    let x = values(37 * 40 * 6, 50, -1.0, 1.0);
    let y = values(37 * 35 * 6, 51, -1.0, 1.0);
    let a = upload(&c, &x, ane, F32, false, 0);
    let b = upload(&c, &y, bne, F16, true, 0);
    let cases: Vec<(Op, Vec<&DevT>, [usize; 4])> = vec![
        (Op::MulMat, vec![&a, &b], [40, 35, 3, 2]),
        (Op::Add, vec![&a, &a], ane),
        (Op::SoftMax { scale: 1.0, max_bias: 0.0 }, vec![&a], ane),
        (Op::SumRows, vec![&a], [1, 40, 3, 2]),
    ];
    for (op, srcs, dne) in cases {
        c.set_group_cap(u32::MAX);
        let full = run1(&c, &op, &srcs, &output(&c, dne, F32));
        c.set_group_cap(2);
        let capped = run1(&c, &op, &srcs, &output(&c, dne, F32));
        assert!(full.iter().any(|&v| v != 0.0));
        assert_close(&capped, &full, 0.0, 0.0, &format!("{op:?} with 2 workgroups per dimension"));
    }
}

#[test]
fn tensor_beyond_storage_buffer_range_is_an_error() {
    let Some(c) = ctx() else { return };
    let range = c.info().limits.max_storage_buffer_range as usize;
    if range > (1 << 28) {
        eprintln!("skipping: maxStorageBufferRange is {range} bytes, too large to exceed cheaply");
        return;
    }
    let n = range / 4 + 16;
    let big = c.alloc(n * 4).unwrap();
    let t = VkTensorRef { buf: &big, offset: 0, layout: Layout::contiguous(F32, [n, 1, 1, 1]) };
    let node = VkNode { op: &Op::Dup, srcs: vec![t], dst: t };
    let e = format!("{:#}", c.run_graph(&[node]).unwrap_err());
    assert!(e.contains("maxStorageBufferRange") && e.contains(&c.info().name), "{e}");
    // the device is still usable
    let v = upload(&c, &[1.0, -2.0], [2, 1, 1, 1], F32, false, 0);
    let out = output(&c, [2, 1, 1, 1], F32);
    assert_eq!(run1(&c, &Op::Unary(crate::op::UnaryOp::Abs), &[&v], &out), vec![1.0, 2.0]);
}

#[test]
fn discovery_never_panics_and_is_cached() {
    let a = discovery();
    let b = discovery();
    assert!(std::ptr::eq(a, b));
    assert!(!a.status.is_empty());
    for (i, d) in a.devices.iter().enumerate() {
        assert_eq!(d.index, i);
        assert!(!d.name.is_empty());
    }
}
