//! The Vulkan backend's graph compute: resolved graph nodes become
//! [`VkNode`]s over the buffers' device memory, and the whole graph runs as
//! one recorded command buffer and one queue submission.

use super::{VkBuffer, VkContext, VkNode, VkTensorRef};
use crate::backend::node::{self, Node};
use crate::base::dtype::DType;
use crate::base::fmt::fmt_bytes;
use crate::layout::walk::for_each_offset;
use crate::memory::{BufferLocks, BufferMem, BufferTag, DeviceMemory};
use crate::op::Op;
use crate::tensor::DataRef;
use std::any::Any;
use std::sync::Arc;

/// `bytes` of zeroed device memory on `ctx` for a buffer tagged `tag`.
pub fn allocate(ctx: &Arc<VkContext>, bytes: usize, tag: BufferTag, backend: &str) -> crate::Result<BufferMem> {
    let vb = ctx
        .alloc(bytes)
        .map_err(|e| e.context(format!("allocating a {} {} buffer on backend '{backend}'", fmt_bytes(bytes), tag.name())))?;
    zero_fill(ctx, &vb, bytes)?;
    Ok(BufferMem::Device(Box::new(vb)))
}

/// New buffers start zeroed, as host ones do (written in 4 MiB pieces).
// BOUNDS-FN: `n` is at most `zeros.len()` (the min just above its slice).
fn zero_fill(ctx: &VkContext, vb: &VkBuffer, bytes: usize) -> crate::Result<()> {
    let zeros = vec![0u8; bytes.min(4 << 20)];
    let mut at = 0;
    while at < bytes {
        let n = zeros.len().min(bytes - at);
        ctx.write(vb, at, &zeros[..n])?;
        at += n;
    }
    Ok(())
}

impl DeviceMemory for VkBuffer {
    fn write(&self, offset: usize, data: &[u8]) -> crate::Result<()> {
        self.context().write(self, offset, data)
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> crate::Result<()> {
        self.context().read(self, offset, out)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The Vulkan buffer behind `mem`, if it is one.
pub fn vk_buffer(mem: &BufferMem) -> Option<&VkBuffer> {
    match mem {
        BufferMem::Device(d) => d.as_any().downcast_ref::<VkBuffer>(),
        BufferMem::Host(_) | BufferMem::Mapped(_) | BufferMem::Freed => None,
    }
}

/// Run `nodes` (topological order, views resolved) on `ctx`.
// BOUNDS-FN: layouts' `ne` are [usize; 5], indexed by constants below 5; `&sliced[..]` is the whole vector.
pub fn compute(ctx: &Arc<VkContext>, backend: &str, nodes: &[Node]) -> crate::Result<()> {
    // Nodes over five dimensions run as one node per slice of the fifth.
    let five = |n: &Node| n.dst.layout.ne[4] > 1 || n.srcs.iter().any(|s| s.layout.ne[4] > 1);
    let sliced: Vec<Node>;
    let nodes = if nodes.iter().any(five) {
        let mut all = Vec::with_capacity(nodes.len());
        for n in nodes {
            if !five(n) {
                all.push(n.clone());
                continue;
            }
            let srcs: Vec<_> = n.srcs.iter().map(|s| s.layout).collect();
            anyhow::ensure!(
                node::sliceable(&n.op, &srcs, &n.dst.layout),
                "computing {}: the Vulkan backend computes {} on tensors of up to four dimensions; \
                 compute this graph on the CPU backend, or with a scheduler (ggml_backend_sched_new()) \
                 that has the CPU backend to fall back to",
                n.tensor.describe(),
                n.op.name()
            );
            all.extend(node::slices(n));
        }
        sliced = all;
        &sliced[..]
    } else {
        nodes
    };
    let bufs = nodes.iter().flat_map(|n| n.srcs.iter().chain(std::iter::once(&n.dst)).map(|r| &*r.buf));
    let locks = BufferLocks::read(bufs)?;
    let mut vk_nodes = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let types: Vec<DType> = n.srcs.iter().map(|s| s.layout.dtype).collect();
        if let Some(why) = super::support::quant_refusal(&n.op, &types, n.dst.layout.dtype) {
            anyhow::bail!(
                "computing {}: {why}; compute this graph on the CPU backend (ggml_backend_cpu_init()), \
                 or dequantize the weights to f32 or f16 first",
                n.tensor.describe()
            );
        }
        // Indices the shaders would read as rows or experts (the shader
        // gives 0 for one out of range; the CPU backend refuses it).
        let checked = match (&n.op, n.srcs.as_slice()) {
            (Op::GetRows, [rows, idx]) => Some((idx, rows.layout.ne[1], Indexed::Rows)),
            (Op::MulMatId, [experts, _, ids]) => Some((ids, experts.layout.ne[2], Indexed::Experts)),
            _ => None,
        };
        if let Some((idx, n_max, kind)) = checked {
            let earlier = nodes.get(..i).unwrap_or(&[]);
            check_indices(&locks, earlier, idx, n_max, kind).map_err(|e| e.context(format!("computing {}", n.tensor.describe())))?;
        }
        let what = || format!("computing {}", n.tensor.describe());
        let mut srcs = Vec::with_capacity(n.srcs.len());
        for (i, s) in n.srcs.iter().enumerate() {
            srcs.push(device_ref(ctx, backend, &locks, s, &format!("source {}", i + 1)).map_err(|e| e.context(what()))?);
        }
        let dst = device_ref(ctx, backend, &locks, &n.dst, "result").map_err(|e| e.context(what()))?;
        vk_nodes.push(VkNode { op: &n.op, srcs, dst });
    }
    ctx.run_graph(&vk_nodes).map_err(|e| e.context(format!("running a graph of {} nodes on backend '{backend}'", nodes.len())))
}

/// What an index tensor indexes.
#[derive(Clone, Copy)]
enum Indexed {
    Rows,
    Experts,
}

/// GET_ROWS indices and MUL_MAT_ID expert ids already in device memory (not
/// computed by an earlier node of the graph) are checked on the host
/// against `n_max`, so a bad index is an error as on the CPU backend.
fn check_indices(locks: &BufferLocks, earlier: &[Node], idx: &DataRef, n_max: usize, kind: Indexed) -> crate::Result<()> {
    let l = &idx.layout;
    if l.dtype != DType::I32 {
        return Ok(());
    }
    let (start, end) = (idx.offset, idx.offset + l.span_bytes());
    let produced = earlier.iter().any(|n| {
        let s = n.dst.offset;
        n.dst.buf.id() == idx.buf.id() && s < end && start < s + n.dst.layout.span_bytes()
    });
    let Some(vb) = vk_buffer(locks.mem(&idx.buf)?) else { return Ok(()) };
    if produced || end > vb.size() {
        return Ok(());
    }
    let mut bytes = vec![0u8; end - start];
    vb.context().read(vb, start, &mut bytes)?;
    let mut bad = None;
    for_each_offset(l, 0, |_, o| {
        let r = bytes.get(o..).and_then(crate::base::bytes::array).map_or(0, i32::from_ne_bytes);
        if bad.is_none() && (r < 0 || r as usize >= n_max) {
            bad = Some(r);
        }
    });
    match (bad, kind) {
        (Some(r), Indexed::Rows) => anyhow::bail!(
            "get_rows: row index {r} is out of range: the tensor has {n_max} rows (indices start at 0)"
        ),
        (Some(r), Indexed::Experts) => anyhow::bail!(
            "mul_mat_id: expert id {r} is out of range: there are {n_max} experts (ids start at 0)"
        ),
        (None, _) => Ok(()),
    }
}

fn device_ref<'a>(
    ctx: &Arc<VkContext>,
    backend: &str,
    locks: &'a BufferLocks<'a>,
    r: &DataRef,
    role: &str,
) -> crate::Result<VkTensorRef<'a>> {
    let vb: &'a VkBuffer = match vk_buffer(locks.mem(&r.buf)?) {
        Some(vb) => vb,
        None => anyhow::bail!(
            "the {role} lives in {}, which backend '{backend}' cannot use; allocate the context's tensors \
             on this backend with ggml_backend_alloc_ctx_tensors(ctx, backend)",
            r.buf.describe()
        ),
    };
    anyhow::ensure!(
        Arc::ptr_eq(vb.context(), ctx),
        "the {role} lives in {} on Vulkan device '{}', but backend '{backend}' runs on '{}'",
        r.buf.describe(),
        vb.context().name(),
        ctx.name()
    );
    Ok(VkTensorRef { buf: vb, offset: r.offset, layout: r.layout })
}

impl std::fmt::Debug for VkContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VkContext('{}')", self.name())
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::Backend;
    use crate::memory::BufferTag;
    use crate::tensor::Context;
    use crate::base::dtype::DType;
    use crate::graph::Graph;
    use crate::tensor::io::{get_values, set_values};
    use crate::op::{Op, UnaryOp};
    use crate::tensor::TENSOR_OVERHEAD;

    /// relu(a %*% b) + a's column sums on `backend`; (values, submissions made).
    fn run(backend: &Backend) -> (Vec<f64>, u64) {
        let ctx = Context::new(16 * TENSOR_OVERHEAD, true).unwrap();
        let a = ctx.new_tensor(DType::F32, &[3, 4]).unwrap();
        let b = ctx.new_tensor(DType::F16, &[3, 2]).unwrap();
        let mm = ctx.op(Op::MulMat, &[a.clone(), b.clone()]).unwrap();
        let y = ctx.op(Op::Unary(UnaryOp::Relu), &[mm]).unwrap();
        let buf = ctx.alloc_tensors(backend, BufferTag::User).unwrap().unwrap();
        assert_eq!(buf.backend_name(), backend.name());
        set_values(&a, &(0..12).map(|v| v as f64 - 6.0).collect::<Vec<_>>(), 0).unwrap();
        set_values(&b, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0).unwrap();
        let before = backend.vulkan_context().map(|c| c.submissions()).unwrap_or(0);
        Graph::build(&y).unwrap().compute(backend).unwrap();
        let subs = backend.vulkan_context().map(|c| c.submissions()).unwrap_or(0) - before;
        (get_values(&y, 0, None).unwrap(), subs)
    }

    #[test]
    fn vulkan_backend_matches_cpu_in_one_submission() {
        // A context of its own, so other tests' submissions do not count.
        let vk = match crate::backend::vulkan::VkContext::unshared(0) {
            Ok(c) => Backend::on_vulkan_context(0, c),
            Err(e) => return eprintln!("skipping Vulkan backend test: {e:#}"),
        };
        let (want, _) = run(&Backend::cpu());
        let (got, subs) = run(&vk);
        assert_eq!(got, want);
        assert_eq!(subs, 1);
        assert!(vk.set_n_threads(2).is_err());
        // fused ops and f64 are the CPU backend's alone
        assert!(!vk.supports(&Op::Linear { act: None }, DType::F32));
        assert!(!vk.supports(&Op::Add, DType::F64) && vk.supports(&Op::Add, DType::F32));
        // host tensors are refused with a message naming the buffer
        let ctx = Context::new(4 * TENSOR_OVERHEAD + 1024, false).unwrap();
        let x = ctx.new_tensor(DType::F32, &[4]).unwrap();
        let y = ctx.op(Op::Scale { s: 2.0 }, &[x]).unwrap();
        let e = format!("{:#}", Graph::build(&y).unwrap().compute(&vk).unwrap_err());
        assert!(e.contains("cannot use") && e.contains("(context, CPU"), "{e}");
    }
}
