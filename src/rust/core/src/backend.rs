//! Compute backends: the CPU and, when the loader finds one, Vulkan devices.
//!
//! This is the foundation's slice: backend identity and device counting.
//! Buffers and graph compute arrive with the tensor engine.

use crate::vulkan_probe;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Cpu,
    Vulkan { device: usize },
}

/// A compute backend as seen by users.
#[derive(Debug)]
pub struct Backend {
    kind: BackendKind,
    name: String,
    freed: AtomicBool,
}

impl Backend {
    pub fn cpu() -> Backend {
        Backend { kind: BackendKind::Cpu, name: "CPU".into(), freed: AtomicBool::new(false) }
    }

    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Release the backend; later use is an error, freeing twice is harmless.
    pub fn free(&self) {
        self.freed.store(true, Ordering::SeqCst);
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
        b.free();
        b.free();
        let msg = b.check_live().unwrap_err().to_string();
        assert!(msg.contains("freed"), "{msg}");
        assert!(dev_count() >= 1);
    }
}
