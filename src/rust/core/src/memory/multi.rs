//! A multi-buffer: several buffers handled as one (ggml's
//! `ggml_backend_multi_buffer`): one size, one usage, freed together.

use super::buffer::{Buffer, Usage};
use anyhow::ensure;
use std::sync::Arc;

#[derive(Debug)]
pub struct MultiBuffer {
    parts: Vec<Arc<Buffer>>,
}

impl MultiBuffer {
    /// Wrap `parts` (at least one; none freed).
    pub fn new(parts: Vec<Arc<Buffer>>) -> crate::Result<MultiBuffer> {
        ensure!(!parts.is_empty(), "a multi-buffer needs at least one buffer");
        if let Some(b) = parts.iter().find(|b| b.is_freed()) {
            anyhow::bail!("{} was freed; a multi-buffer can only wrap live buffers", b.describe());
        }
        Ok(MultiBuffer { parts })
    }

    pub fn parts(&self) -> &[Arc<Buffer>] {
        &self.parts
    }

    /// Bytes of all parts.
    pub fn size(&self) -> usize {
        self.parts.iter().map(|b| b.size()).sum()
    }

    pub fn is_freed(&self) -> bool {
        self.parts.iter().all(|b| b.is_freed())
    }

    /// The usage of every part.
    pub fn set_usage(&self, usage: Usage) {
        for b in &self.parts {
            b.set_usage(usage);
        }
    }

    /// The parts' usage when they agree, else `Any`.
    pub fn usage(&self) -> Usage {
        // BOUNDS: `new` refuses an empty list of parts.
        let u = self.parts[0].usage();
        if self.parts.iter().all(|b| b.usage() == u) {
            u
        } else {
            Usage::Any
        }
    }

    pub fn is_host(&self) -> bool {
        self.parts.iter().all(|b| b.is_host())
    }

    /// Free every part.
    pub fn free(&self) {
        for b in &self.parts {
            b.free();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{BufferTag, HostMemory};

    #[test]
    fn parts_move_together() {
        let a = Arc::new(Buffer::allocate(&HostMemory, 16, BufferTag::User).unwrap());
        let b = Arc::new(Buffer::allocate(&HostMemory, 32, BufferTag::User).unwrap());
        assert!(MultiBuffer::new(vec![]).is_err());
        let m = MultiBuffer::new(vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(m.size(), 48);
        m.set_usage(Usage::Compute);
        assert_eq!((a.usage(), m.usage()), (Usage::Compute, Usage::Compute));
        b.set_usage(Usage::Weights);
        assert_eq!(m.usage(), Usage::Any);
        assert!(m.is_host());
        m.free();
        assert!(a.is_freed() && b.is_freed() && m.is_freed());
        assert!(MultiBuffer::new(vec![a]).is_err());
    }
}
