//! The resolved nodes a graph keeps between computes.

use super::Graph;
use crate::base::dtype::DType;
use crate::memory::BufferTag;
use crate::op::Op;
use crate::tensor::io::{get_values, set_values};
use crate::tensor::{Context, TENSOR_OVERHEAD};

#[test]
fn kept_nodes_follow_new_values_new_memory_and_freed_buffers() {
    let host = crate::backend::host();
    let ctx = Context::new(8 * TENSOR_OVERHEAD, true).unwrap();
    let a = ctx.new_tensor(DType::F32, &[3]).unwrap();
    let b = ctx.new_tensor(DType::F32, &[3]).unwrap();
    let y = ctx.op(Op::Add, &[a.clone(), b.clone()]).unwrap();
    let g = Graph::build(&y).unwrap();
    let fill = |x: f64| {
        set_values(&a, &[1.0, 2.0, 3.0], 0).unwrap();
        set_values(&b, &[x; 3], 0).unwrap();
    };
    let buf = ctx.alloc_tensors(host.as_ref(), BufferTag::User).unwrap().unwrap();
    fill(10.0);
    g.compute(host).unwrap();
    assert_eq!(get_values(&y, 0, None).unwrap(), vec![11.0, 12.0, 13.0]);
    // New values, same memory: the kept nodes read them.
    fill(20.0);
    g.compute(host).unwrap();
    assert_eq!(get_values(&y, 0, None).unwrap(), vec![21.0, 22.0, 23.0]);
    // A freed buffer: the error of an unresolved graph.
    buf.free();
    let err = format!("{:#}", g.compute(host).unwrap_err());
    assert!(err.contains("allocate the context's tensors again"), "{err}");
    // New memory: computed there.
    let buf2 = ctx.alloc_tensors(host.as_ref(), BufferTag::User).unwrap().unwrap();
    fill(30.0);
    g.compute(host).unwrap();
    assert_eq!(get_values(&y, 0, None).unwrap(), vec![31.0, 32.0, 33.0]);
    drop(buf2);
    // A freed context.
    ctx.free();
    assert!(g.compute(host).is_err());
}
