//! The Vulkan backend's graph compute: resolved graph nodes become
//! [`VkNode`]s over the buffers' device memory, and the whole graph runs as
//! one recorded command buffer and one queue submission.

use crate::buffer::{BufferLocks, BufferMem};
use crate::graph::Node;
use crate::tensor::TensorRef;
use crate::vulkan::{VkBuffer, VkContext, VkNode, VkTensorRef};
use std::sync::Arc;

/// Run `nodes` (topological order, views resolved) on `ctx`.
pub fn compute(ctx: &Arc<VkContext>, backend: &str, nodes: &[Node]) -> crate::Result<()> {
    let bufs = nodes.iter().flat_map(|n| n.srcs.iter().chain(std::iter::once(&n.dst)).map(|r| &*r.buf));
    let locks = BufferLocks::read(bufs)?;
    let mut vk_nodes = Vec::with_capacity(nodes.len());
    for n in nodes {
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

fn device_ref<'a>(
    ctx: &Arc<VkContext>,
    backend: &str,
    locks: &'a BufferLocks<'a>,
    r: &TensorRef,
    role: &str,
) -> crate::Result<VkTensorRef<'a>> {
    let vb: &'a VkBuffer = match locks.mem(&r.buf)? {
        BufferMem::Vulkan(vb) => vb,
        _ => anyhow::bail!(
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
