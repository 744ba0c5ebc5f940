//! Compute backends: the CPU and, when the loader finds one, Vulkan devices.
//!
//! A [`Backend`] is what users hold; its [`BackendImpl`] is the implementation.
//! Adding a device backend means adding a variant there, a `BufferMem` variant
//! for its memory, and their arms in [`Backend::compute`],
//! [`crate::buffer::Buffer::allocate`] and the buffer's byte reads and writes.
//! `compute` receives the graph's nodes in order, each with its op and, for
//! every source and the result, the buffer, byte offset and layout; a device
//! backend locks all the buffers at once with `buffer::BufferLocks::read` and
//! records the whole graph.

use crate::cpu::CpuBackend;
use crate::graph::Node;
use crate::vulkan::VkContext;
use crate::vulkan_probe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Vulkan { device: usize },
}

/// The implementation behind a backend.
#[derive(Debug)]
pub enum BackendImpl {
    Cpu(CpuBackend),
    /// A Vulkan device; the context is shared by every backend on that device
    /// and released when the last backend and buffer using it are gone
    /// (`free` drops the backend's reference at once).
    Vulkan(Mutex<Option<Arc<VkContext>>>),
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
            BackendImpl::Cpu(_) => None,
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
        if let BackendImpl::Vulkan(c) = &self.imp {
            c.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
    }

    pub fn is_freed(&self) -> bool {
        self.freed.load(Ordering::SeqCst)
    }

    /// Fails with a clear message when the backend was freed.
    pub fn check_live(&self) -> crate::Result<()> {
        anyhow::ensure!(
            !self.is_freed(),
            "backend '{}' was freed with ggml_backend_free(); create a new one",
            self.name
        );
        Ok(())
    }

    /// The error for a Vulkan backend whose context is gone.
    pub fn gone(&self) -> anyhow::Error {
        self.check_live().err().unwrap_or_else(|| {
            anyhow::anyhow!("backend '{}' has no Vulkan device any more; create a new backend", self.name)
        })
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
        }
    }

    pub fn n_threads(&self) -> usize {
        match &self.imp {
            BackendImpl::Cpu(c) => c.n_threads(),
            BackendImpl::Vulkan(_) => 1,
        }
    }

    /// Run resolved graph nodes (topological order, views already resolved).
    pub fn compute(&self, nodes: &[Node]) -> crate::Result<()> {
        self.check_live()?;
        match &self.imp {
            BackendImpl::Cpu(c) => c.compute(nodes),
            BackendImpl::Vulkan(_) => {
                let ctx = self.vulkan_context().ok_or_else(|| self.gone())?;
                crate::vulkan_backend::compute(&ctx, &self.name, nodes)
            }
        }
    }
}

/// The CPU backend used for context memory and `ggml_graph_compute()`.
pub fn host() -> &'static Arc<Backend> {
    static HOST: OnceLock<Arc<Backend>> = OnceLock::new();
    HOST.get_or_init(|| Arc::new(Backend::cpu()))
}

/// Number of backend devices: the CPU plus every Vulkan device found.
pub fn dev_count() -> usize {
    1 + vulkan_probe::discovery().devices.len()
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
    }
}
