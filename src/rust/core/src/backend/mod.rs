//! Compute backends: the CPU and, when the loader finds one, Vulkan devices.
//!
//! A [`Backend`] is what users hold; its [`BackendImpl`] is the implementation.
//! A backend is the [`Allocator`] of its buffers' memory (host memory for the
//! CPU; a [`crate::memory::DeviceMemory`] of its own for a device) and
//! computes graph [`Node`]s. Adding a device backend means adding a variant
//! to `BackendImpl` and its arms in [`Backend::compute`] and
//! [`Allocator::allocate_mem`]. `compute` receives the graph's nodes in order,
//! each with its op and, for every source and the result, the buffer, byte
//! offset and layout; a device backend locks all the buffers at once with
//! `memory::BufferLocks::read` and records the whole graph.

pub mod cpu;
pub mod device;
pub mod event;
pub mod meta;
pub mod node;
pub mod vulkan;

pub use node::Node;

use crate::memory::{self, Allocator, BufferMem, BufferTag};
use cpu::CpuBackend;
use vulkan::VkContext;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Vulkan { device: usize },
    Meta,
}

/// The implementation behind a backend.
#[derive(Debug)]
pub enum BackendImpl {
    Cpu(CpuBackend),
    /// A Vulkan device; the context is shared by every backend on that device
    /// and released when the last backend and buffer using it are gone
    /// (`free` drops the backend's reference at once).
    Vulkan(Mutex<Option<Arc<VkContext>>>),
    /// Several devices seen as one (see [`meta`]).
    Meta(meta::MetaBackend),
}

/// A compute backend as seen by users.
#[derive(Debug)]
pub struct Backend {
    kind: BackendKind,
    name: String,
    freed: AtomicBool,
    imp: BackendImpl,
}

impl Backend {
    pub fn cpu() -> Backend {
        Backend {
            kind: BackendKind::Cpu,
            name: "CPU".into(),
            freed: AtomicBool::new(false),
            imp: BackendImpl::Cpu(CpuBackend::new()),
        }
    }

    /// A backend on Vulkan device `device` (0-based), named "Vulkan<device>".
    pub fn vulkan(device: usize) -> crate::Result<Backend> {
        Ok(Backend::on_vulkan_context(device, VkContext::get(device)?))
    }

    /// A backend on a meta device: one backend per device under it.
    pub fn meta(device: Arc<device::MetaDevice>) -> crate::Result<Backend> {
        let name = device.name().to_string();
        let mut parts: Vec<Arc<dyn meta::Part>> = Vec::new();
        for d in device.devices() {
            parts.push(Arc::new(Backend::on_device(d)?));
        }
        Ok(Backend {
            kind: BackendKind::Meta,
            name,
            freed: AtomicBool::new(false),
            imp: BackendImpl::Meta(meta::MetaBackend::new(device, parts)?),
        })
    }

    /// A new backend on device `d`.
    pub fn on_device(d: &device::Device) -> crate::Result<Backend> {
        match &d.target {
            device::Target::Cpu => Ok(Backend::cpu()),
            device::Target::Vulkan(i) => Backend::vulkan(*i),
            device::Target::Meta(m) => Backend::meta(m.clone()),
        }
    }

    /// The device the backend runs on.
    pub fn device(&self) -> device::Device {
        match (&self.imp, self.kind) {
            (BackendImpl::Meta(m), _) => m.device(),
            (BackendImpl::Vulkan(_), BackendKind::Vulkan { device }) => device::vulkan(device),
            _ => device::cpu_device(),
        }
    }

    /// Whether the backend computes `op` from `srcs` into `dst`.
    pub fn supports_node(&self, op: &crate::op::Op, srcs: &[crate::layout::Layout], dst: &crate::layout::Layout) -> bool {
        self.device().supports(op, srcs, dst)
    }

    /// Whether the backend computes on `buf`'s memory directly (a buffer it
    /// allocated, or host memory for the CPU).
    pub fn uses_buffer(&self, buf: &crate::memory::Buffer) -> bool {
        match &self.imp {
            BackendImpl::Cpu(_) => buf.is_host(),
            BackendImpl::Vulkan(_) => !buf.is_host() && buf.backend_name() == self.name,
            BackendImpl::Meta(_) => buf.backend_name() == self.name,
        }
    }

    /// Give every tensor of `ctx` that has no memory a place in one new buffer
    /// of this backend (`None` when there is nothing to allocate).
    pub fn alloc_ctx_tensors(
        &self,
        ctx: &crate::tensor::Context,
        tag: BufferTag,
    ) -> crate::Result<Option<Arc<crate::memory::Buffer>>> {
        self.check_live()?;
        match &self.imp {
            BackendImpl::Meta(m) => m.alloc_ctx_tensors(ctx, tag),
            _ => ctx.alloc_tensors(self, tag),
        }
    }

    /// A Vulkan backend on a given context (tests use unshared ones).
    pub(crate) fn on_vulkan_context(device: usize, ctx: Arc<VkContext>) -> Backend {
        Backend {
            kind: BackendKind::Vulkan { device },
            name: format!("Vulkan{device}"),
            freed: AtomicBool::new(false),
            imp: BackendImpl::Vulkan(Mutex::new(Some(ctx))),
        }
    }

    /// True for Vulkan backends (freed or not).
    pub fn is_vulkan(&self) -> bool {
        matches!(self.imp, BackendImpl::Vulkan(_))
    }

    /// The Vulkan context of a live Vulkan backend.
    pub fn vulkan_context(&self) -> Option<Arc<VkContext>> {
        match &self.imp {
            BackendImpl::Vulkan(c) => c.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            BackendImpl::Cpu(_) | BackendImpl::Meta(_) => None,
        }
    }

    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn imp(&self) -> &BackendImpl {
        &self.imp
    }

    /// Release the backend; later use is an error, freeing twice is harmless.
    pub fn free(&self) {
        self.freed.store(true, Ordering::SeqCst);
        match &self.imp {
            BackendImpl::Vulkan(c) => {
                c.lock().unwrap_or_else(|e| e.into_inner()).take();
            }
            BackendImpl::Meta(m) => m.free(),
            BackendImpl::Cpu(_) => {}
        }
    }

    pub fn is_freed(&self) -> bool {
        self.freed.load(Ordering::SeqCst)
    }

    /// Fails with a clear message when the backend was freed.
    pub fn check_live(&self) -> crate::Result<()> {
        if self.is_freed() {
            return Err(self.freed_error());
        }
        Ok(())
    }

    fn freed_error(&self) -> anyhow::Error {
        anyhow::anyhow!("backend '{}' was freed with ggml_backend_free(); create a new one", self.name)
    }

    /// Threads used by the CPU backend's kernels.
    pub fn set_n_threads(&self, n: usize) -> crate::Result<()> {
        self.check_live()?;
        match &self.imp {
            BackendImpl::Cpu(c) => c.set_n_threads(n),
            BackendImpl::Vulkan(_) => anyhow::bail!(
                "backend '{}' is a Vulkan backend; threads can only be set on a CPU backend",
                self.name
            ),
            BackendImpl::Meta(m) => m.set_n_threads(n),
        }
    }

    pub fn n_threads(&self) -> usize {
        match &self.imp {
            BackendImpl::Cpu(c) => c.n_threads(),
            BackendImpl::Vulkan(_) => 1,
            BackendImpl::Meta(m) => m.n_threads(),
        }
    }

    /// Whether this backend computes `op` on tensors of type `dtype`. The
    /// fused ops (`Linear`, `UnaryBack`, the cross-entropy loss and its
    /// gradient, the optimizer steps) and f64 tensors are the CPU backend's alone;
    /// graph builders build the unfused form elsewhere.
    pub fn supports(&self, op: &crate::op::Op, dtype: crate::base::dtype::DType) -> bool {
        match &self.imp {
            BackendImpl::Cpu(_) => true,
            // A meta backend may mirror onto Vulkan devices: the same rule.
            BackendImpl::Vulkan(_) | BackendImpl::Meta(_) => {
                use crate::op::Op;
                dtype != crate::base::dtype::DType::F64
                    && !matches!(
                        op,
                        Op::Linear { .. }
                            | Op::UnaryBack { .. }
                            | Op::CrossEntropyLoss
                            | Op::CrossEntropyLossBack
                            | Op::AdamStep { .. }
                            | Op::SgdStep { .. }
                            | Op::Im2ColBack { .. }
                            | Op::MaxPool(_)
                            | Op::Recurrent(_)
                            | Op::ConvAct { .. }
                            | Op::ConvCl(_)
                    )
            }
        }
    }

    /// Run resolved graph nodes (topological order, views already resolved).
    pub fn compute(&self, nodes: &[Node]) -> crate::Result<()> {
        self.check_live()?;
        match &self.imp {
            BackendImpl::Cpu(c) => c.compute(nodes),
            BackendImpl::Vulkan(_) => {
                let ctx = self.vulkan_context().ok_or_else(|| self.freed_error())?;
                vulkan::compute::compute(&ctx, &self.name, nodes)
            }
            BackendImpl::Meta(m) => m.compute(nodes),
        }
    }
}

impl Allocator for Backend {
    fn name(&self) -> &str {
        &self.name
    }

    fn check_live(&self) -> crate::Result<()> {
        Backend::check_live(self)
    }

    fn allocate_mem(&self, bytes: usize, tag: BufferTag) -> crate::Result<BufferMem> {
        match &self.imp {
            BackendImpl::Cpu(_) => memory::host_memory(bytes, tag),
            BackendImpl::Vulkan(_) => {
                let ctx = self.vulkan_context().ok_or_else(|| self.freed_error())?;
                vulkan::compute::allocate(&ctx, bytes, tag, &self.name)
            }
            BackendImpl::Meta(_) => anyhow::bail!(
                "backend '{}' is a meta backend: its buffers hold tensors laid out over several devices; \
                 allocate them with ggml_backend_alloc_ctx_tensors(ctx, backend)",
                self.name
            ),
        }
    }
}

impl meta::Part for Backend {
    fn compute(&self, nodes: &[Node]) -> crate::Result<()> {
        Backend::compute(self, nodes)
    }
    fn free(&self) {
        Backend::free(self)
    }
    fn set_cpu_threads(&self, n: usize) -> crate::Result<()> {
        match self.imp {
            BackendImpl::Cpu(_) => self.set_n_threads(n),
            _ => Ok(()),
        }
    }
    fn threads(&self) -> usize {
        self.n_threads()
    }
}

/// The CPU backend used for `ggml_graph_compute()`.
pub fn host() -> &'static Arc<Backend> {
    static HOST: OnceLock<Arc<Backend>> = OnceLock::new();
    HOST.get_or_init(|| Arc::new(Backend::cpu()))
}

/// Number of backend devices: the CPU plus every Vulkan device found (and
/// devices registered since).
pub fn dev_count() -> usize {
    device::devices().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_backend_lifecycle() {
        let b = Backend::cpu();
        assert_eq!(b.name(), "CPU");
        assert!(b.check_live().is_ok());
        b.set_n_threads(2).unwrap();
        assert_eq!(b.n_threads(), 2);
        assert!(b.set_n_threads(0).is_err());
        b.free();
        b.free();
        let msg = b.check_live().unwrap_err().to_string();
        assert!(msg.contains("freed"), "{msg}");
        assert!(dev_count() >= 1);
        let lin = crate::op::Op::Linear { act: None };
        assert!(Backend::cpu().supports(&lin, crate::base::dtype::DType::F64));
    }
}
