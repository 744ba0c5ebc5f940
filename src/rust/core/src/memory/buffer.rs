//! Memory buffers: the only place where tensor memory is allocated.
//!
//! Every allocation (a context's own data with `no_alloc = FALSE`, the buffer of
//! `ggml_backend_alloc_ctx_tensors`, pools built on top) goes through
//! [`Buffer::allocate`], and every release through [`Buffer::free`] (also run
//! on drop). Both report to the [`ledger`], as do host uploads and downloads.
//! The memory itself comes from an [`Allocator`] (a backend): host memory is
//! made here ([`host_memory`]); device memory is a [`DeviceMemory`] the
//! backend owns, so this layer knows no backend.
//!
//! A buffer outlives nothing it should not: after `free`, its memory is gone and
//! every read, write or compute touching it is an error naming the buffer.

use super::ledger;
use super::tag::{self, BufferTag};
use crate::base::fmt::fmt_bytes;
use anyhow::{bail, ensure};
use std::any::Any;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// What buffer memory is asked of: a backend (or [`HostMemory`]).
pub trait Allocator {
    /// The name buffers report ("CPU", "Vulkan0").
    fn name(&self) -> &str;
    /// An error when the allocator can no longer be used (a freed backend).
    fn check_live(&self) -> crate::Result<()>;
    /// `bytes` of zeroed memory for a buffer tagged `tag`. Called after the
    /// ledger granted the bytes.
    fn allocate_mem(&self, bytes: usize, tag: BufferTag) -> crate::Result<BufferMem>;
}

/// Memory on a device, owned by its backend. Reads and writes copy between
/// the device and the host; the backend's kernels reach the memory itself
/// through [`DeviceMemory::as_any`].
pub trait DeviceMemory: std::fmt::Debug + Send + Sync {
    fn write(&self, offset: usize, data: &[u8]) -> crate::Result<()>;
    fn read(&self, offset: usize, out: &mut [u8]) -> crate::Result<()>;
    fn as_any(&self) -> &dyn Any;
}

/// Host memory for a buffer: `bytes` zeroed, or an error (never an abort)
/// when the memory is not there.
pub fn host_memory(bytes: usize, tag: BufferTag) -> crate::Result<BufferMem> {
    crate::base::alloc::check(bytes, 1, &format!("a {} buffer", tag.name()))?;
    match crate::base::alloc::zeroed_words(bytes.div_ceil(4)) {
        Some(b) => Ok(BufferMem::Host(b)),
        None => bail!(
            "could not allocate {} of host memory for a {} buffer; free unused \
             contexts or buffers, or use smaller tensors",
            fmt_bytes(bytes),
            tag.name()
        ),
    }
}

/// The host as an allocator, for context memory (`no_alloc = FALSE`).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostMemory;

impl Allocator for HostMemory {
    fn name(&self) -> &str {
        "CPU"
    }
    fn check_live(&self) -> crate::Result<()> {
        Ok(())
    }
    fn allocate_mem(&self, bytes: usize, tag: BufferTag) -> crate::Result<BufferMem> {
        host_memory(bytes, tag)
    }
}

/// Data offsets inside a buffer are multiples of this many bytes.
pub const ALIGN: usize = 64;

pub fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Read-only bytes of a mapped file (a GGUF file's tensor data): the mapping
/// and the range of it the buffer covers.
#[derive(Clone)]
pub struct Mapped {
    pub map: std::sync::Arc<dyn AsRef<[u8]> + Send + Sync>,
    pub start: usize,
    pub len: usize,
}

impl Mapped {
    pub fn bytes(&self) -> &[u8] {
        let all: &[u8] = (*self.map).as_ref();
        let end = self.start.saturating_add(self.len).min(all.len());
        all.get(self.start..end).unwrap_or(&[])
    }
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapped({} bytes at {})", self.len, self.start)
    }
}

/// Where the bytes live.
#[derive(Debug)]
pub enum BufferMem {
    /// Host memory, 4-byte aligned (so f32/i32 data can be read in place).
    Host(Box<[u32]>),
    /// A read-only mapped file.
    Mapped(Mapped),
    /// Memory on a device (freed when dropped).
    Device(Box<dyn DeviceMemory>),
    /// Released by `free`.
    Freed,
}

impl BufferMem {
    /// The host bytes, or an error for memory that is not on the host.
    pub fn host_bytes(&self) -> Option<&[u8]> {
        match self {
            BufferMem::Host(w) => Some(words_as_bytes(w)),
            BufferMem::Mapped(m) => Some(m.bytes()),
            BufferMem::Device(_) | BufferMem::Freed => None,
        }
    }

    /// Writable host bytes (not for mapped files, which are read-only).
    pub fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            BufferMem::Host(w) => Some(words_as_bytes_mut(w)),
            BufferMem::Mapped(_) | BufferMem::Device(_) | BufferMem::Freed => None,
        }
    }

    /// `n` f32 values starting at byte `offset`, read in place, when aligned.
    pub fn host_f32(&self, offset: usize, n: usize) -> Option<&[f32]> {
        match self {
            BufferMem::Host(w) if offset % 4 == 0 && offset / 4 + n <= w.len() => {
                // BOUNDS: the guard checked offset / 4 + n <= w.len().
                let words = &w[offset / 4..offset / 4 + n];
                // SAFETY: u32 and f32 have the same size and alignment and every
                // bit pattern is a valid f32.
                Some(unsafe { std::slice::from_raw_parts(words.as_ptr() as *const f32, n) })
            }
            BufferMem::Mapped(m) => {
                let b = m.bytes().get(offset..offset.checked_add(n.checked_mul(4)?)?)?;
                // SAFETY: the slice covers exactly n * 4 bytes, its start is
                // 4-byte aligned (checked here), and every bit pattern is a valid f32.
                (b.as_ptr() as usize % 4 == 0).then(|| unsafe { std::slice::from_raw_parts(b.as_ptr() as *const f32, n) })
            }
            _ => None,
        }
    }
}

impl BufferMem {
    /// Mutable `n` f32 values at byte `offset`, when aligned.
    pub fn host_f32_mut(&mut self, offset: usize, n: usize) -> Option<&mut [f32]> {
        match self {
            BufferMem::Host(w) if offset % 4 == 0 && offset / 4 + n <= w.len() => {
                // BOUNDS: the guard checked offset / 4 + n <= w.len().
                let words = &mut w[offset / 4..offset / 4 + n];
                // SAFETY: as in `host_f32`; the borrow is exclusive.
                Some(unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut f32, n) })
            }
            _ => None,
        }
    }
}

fn words_as_bytes(w: &[u32]) -> &[u8] {
    // SAFETY: u8 has alignment 1 and the length covers exactly the same memory.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 4) }
}

fn words_as_bytes_mut(w: &mut [u32]) -> &mut [u8] {
    // SAFETY: as above; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, w.len() * 4) }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a buffer holds, as ggml's usage hints (`GGML_BACKEND_BUFFER_USAGE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Any = 0,
    Weights = 1,
    Compute = 2,
}

impl Usage {
    pub fn from_code(code: i64) -> crate::Result<Usage> {
        Ok(match code {
            0 => Usage::Any,
            1 => Usage::Weights,
            2 => Usage::Compute,
            other => bail!(
                "unknown buffer usage {other}: use ggml_backend_buffer_usage_any() (0), _weights() (1) or _compute() (2)"
            ),
        })
    }
}

/// A block of tensor memory on one backend.
#[derive(Debug)]
pub struct Buffer {
    id: u64,
    size: usize,
    tag: BufferTag,
    backend_name: String,
    mem: RwLock<BufferMem>,
    /// For residency pool buffers: the pool's generation when allocated (-1: none).
    pool_gen: AtomicI64,
    /// A [`Usage`] code.
    usage: AtomicU8,
    /// Whether the ledger counts this buffer's bytes and transfers (not for
    /// a buffer over other buffers, which the ledger counts themselves).
    accounted: bool,
}

impl Buffer {
    /// Allocate `bytes` (zeroed) from `alloc`. The single allocation path.
    pub fn allocate(alloc: &dyn Allocator, bytes: usize, tag: BufferTag) -> crate::Result<Buffer> {
        alloc.check_live()?;
        ledger::before_alloc(bytes, tag)?;
        let mem = alloc.allocate_mem(bytes, tag)?;
        let buf = Buffer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            size: bytes,
            tag,
            backend_name: alloc.name().to_string(),
            mem: RwLock::new(mem),
            pool_gen: AtomicI64::new(-1),
            usage: AtomicU8::new(Usage::Any as u8),
            accounted: true,
        };
        ledger::after_alloc(bytes, tag);
        Ok(buf)
    }

    /// A buffer over `mem`, memory made of other buffers that the ledger
    /// already counts (a meta backend's buffer): it is not counted again.
    pub fn wrap(backend_name: &str, bytes: usize, tag: BufferTag, mem: Box<dyn DeviceMemory>) -> Buffer {
        Buffer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            size: bytes,
            tag,
            backend_name: backend_name.to_string(),
            mem: RwLock::new(BufferMem::Device(mem)),
            pool_gen: AtomicI64::new(-1),
            usage: AtomicU8::new(Usage::Any as u8),
            accounted: false,
        }
    }

    /// A buffer over read-only mapped bytes (on the host, counted by the
    /// ledger like any buffer of `tag`; the mapping lives as long as the buffer).
    pub fn mapped(m: Mapped, tag: BufferTag) -> crate::Result<Buffer> {
        ledger::before_alloc(m.len, tag)?;
        let size = m.len;
        let buf = Buffer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            size,
            tag,
            backend_name: "CPU (mapped file)".to_string(),
            mem: RwLock::new(BufferMem::Mapped(m)),
            pool_gen: AtomicI64::new(-1),
            usage: AtomicU8::new(Usage::Any as u8),
            accounted: true,
        };
        ledger::after_alloc(size, tag);
        Ok(buf)
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn tag(&self) -> BufferTag {
        self.tag
    }

    pub fn backend_name(&self) -> &str {
        &self.backend_name
    }

    pub fn is_freed(&self) -> bool {
        matches!(*self.read_lock(), BufferMem::Freed)
    }

    pub fn usage(&self) -> Usage {
        match self.usage.load(Ordering::SeqCst) {
            1 => Usage::Weights,
            2 => Usage::Compute,
            _ => Usage::Any,
        }
    }

    pub fn set_usage(&self, usage: Usage) {
        self.usage.store(usage as u8, Ordering::SeqCst);
    }

    /// Whether the memory is host memory (the CPU backend computes on it in place).
    pub fn is_host(&self) -> bool {
        matches!(*self.read_lock(), BufferMem::Host(_))
    }

    /// Set every byte to `value` (an upload of the buffer's size).
    pub fn clear(&self, value: u8, what: &str) -> crate::Result<()> {
        let mut g = self.write(what)?;
        match &mut *g {
            BufferMem::Host(w) => words_as_bytes_mut(w).fill(value),
            BufferMem::Device(d) => {
                let chunk = vec![value; self.size.min(4 << 20)];
                let mut at = 0;
                while at < self.size {
                    let n = chunk.len().min(self.size - at);
                    // BOUNDS: n <= chunk.len().
                    d.write(at, &chunk[..n]).map_err(|e| e.context(what.to_string()))?;
                    at += n;
                }
            }
            BufferMem::Mapped(_) => bail!("{what}: {} is a read-only mapped file and cannot be cleared", self.describe()),
            BufferMem::Freed => return Err(self.freed_error(what)),
        }
        if self.accounted {
            ledger::uploaded(self.size, self.tag);
        }
        Ok(())
    }

    /// Copy `len` bytes at `src_off` of this buffer to `dst_off` of `dst`,
    /// counted as one copy (not as an upload and a download).
    pub fn copy_to(&self, src_off: usize, dst: &Buffer, dst_off: usize, len: usize, what: &str) -> crate::Result<()> {
        let fits = |b: &Buffer, off: usize| off.checked_add(len).is_some_and(|e| e <= b.size);
        ensure!(
            fits(self, src_off) && fits(dst, dst_off),
            "{what}: copying {} from offset {src_off} of {} to offset {dst_off} of {} overruns a buffer",
            fmt_bytes(len),
            self.describe(),
            dst.describe()
        );
        if self.id == dst.id {
            let mut tmp = vec![0u8; len];
            self.read_raw(src_off, &mut tmp, what)?;
            dst.write_raw(dst_off, &tmp, what)?;
        } else {
            let src = self.read(what)?;
            match &*src {
                BufferMem::Host(w) => dst.write_raw(dst_off, self.span(words_as_bytes(w), src_off, len, what)?, what)?,
                BufferMem::Mapped(m) => dst.write_raw(dst_off, self.span(m.bytes(), src_off, len, what)?, what)?,
                BufferMem::Device(d) => {
                    let mut tmp = vec![0u8; len];
                    d.read(src_off, &mut tmp).map_err(|e| e.context(what.to_string()))?;
                    drop(src);
                    dst.write_raw(dst_off, &tmp, what)?;
                }
                BufferMem::Freed => return Err(self.freed_error(what)),
            }
        }
        if dst.accounted {
            ledger::copied(len, dst.tag);
        }
        Ok(())
    }

    /// `len` bytes at `offset` of this buffer's memory `b`, or the error that
    /// they overrun it (a mapped file shorter than its buffer).
    fn span<'b>(&self, b: &'b [u8], offset: usize, len: usize, what: &str) -> crate::Result<&'b [u8]> {
        b.get(offset..offset.saturating_add(len)).ok_or_else(|| self.overrun(offset, len, what))
    }

    fn overrun(&self, offset: usize, len: usize, what: &str) -> anyhow::Error {
        anyhow::anyhow!("{what}: {} at offset {offset} overrun the memory of {}", fmt_bytes(len), self.describe())
    }

    fn write_raw(&self, offset: usize, data: &[u8], what: &str) -> crate::Result<()> {
        let mut g = self.write(what)?;
        match &mut *g {
            BufferMem::Host(w) => {
                let to = words_as_bytes_mut(w).get_mut(offset..offset.saturating_add(data.len()));
                to.ok_or_else(|| self.overrun(offset, data.len(), what))?.copy_from_slice(data)
            }
            BufferMem::Device(d) => d.write(offset, data).map_err(|e| e.context(what.to_string()))?,
            BufferMem::Mapped(_) => bail!(
                "{what}: {} is a read-only mapped file; copy the tensor into an allocated one \
                 (ggml_cpy) to change it",
                self.describe()
            ),
            BufferMem::Freed => return Err(self.freed_error(what)),
        }
        Ok(())
    }

    fn read_raw(&self, offset: usize, out: &mut [u8], what: &str) -> crate::Result<()> {
        let g = self.read(what)?;
        match &*g {
            BufferMem::Host(w) => out.copy_from_slice(self.span(words_as_bytes(w), offset, out.len(), what)?),
            BufferMem::Mapped(m) => out.copy_from_slice(self.span(m.bytes(), offset, out.len(), what)?),
            BufferMem::Device(d) => d.read(offset, out).map_err(|e| e.context(what.to_string()))?,
            BufferMem::Freed => return Err(self.freed_error(what)),
        }
        Ok(())
    }

    /// Record the residency pool generation this buffer belongs to.
    pub fn set_pool_generation(&self, generation: i32) {
        self.pool_gen.store(generation as i64, Ordering::SeqCst);
    }

    /// The residency pool generation this buffer was allocated in, if any.
    pub fn pool_generation(&self) -> Option<i32> {
        let g = self.pool_gen.load(Ordering::SeqCst);
        (g >= 0).then_some(g as i32)
    }

    /// Why a freed buffer is gone, for error messages: for pool buffers this
    /// names the pool and both generations.
    pub fn freed_note(&self) -> String {
        match self.pool_generation() {
            Some(g) if self.tag.is_pool() => format!(
                "it was freed by a reset of the {} pool (allocated in generation {g}, the pool is now at generation {})",
                self.tag.name(),
                tag::generation(self.tag)
            ),
            _ => "it was freed".to_string(),
        }
    }

    /// "buffer #3 (user, CPU, 1.0 KiB)"
    pub fn describe(&self) -> String {
        format!(
            "buffer #{} ({}, {}, {})",
            self.id,
            self.tag.name(),
            self.backend_name,
            fmt_bytes(self.size)
        )
    }

    /// Release the memory now; later use is an error, freeing twice is harmless.
    pub fn free(&self) {
        let mut m = self.write_lock();
        if !matches!(*m, BufferMem::Freed) {
            *m = BufferMem::Freed;
            if self.accounted {
                ledger::released(self.size, self.tag);
            }
        }
    }

    fn read_lock(&self) -> RwLockReadGuard<'_, BufferMem> {
        self.mem.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, BufferMem> {
        self.mem.write().unwrap_or_else(|e| e.into_inner())
    }

    fn freed_error(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{what} uses {}, and {}; its tensors have no data any more \
             (allocate them again with ggml_backend_alloc_ctx_tensors())",
            self.describe(),
            self.freed_note()
        )
    }

    /// Read access to the memory; an error when freed.
    pub fn read(&self, what: &str) -> crate::Result<RwLockReadGuard<'_, BufferMem>> {
        let g = self.read_lock();
        if matches!(*g, BufferMem::Freed) {
            return Err(self.freed_error(what));
        }
        Ok(g)
    }

    /// Write access to the memory; an error when freed.
    pub fn write(&self, what: &str) -> crate::Result<RwLockWriteGuard<'_, BufferMem>> {
        let g = self.write_lock();
        if matches!(*g, BufferMem::Freed) {
            return Err(self.freed_error(what));
        }
        Ok(g)
    }

    /// Copy `data` into the buffer at `offset` (an upload).
    pub fn write_bytes(&self, offset: usize, data: &[u8], what: &str) -> crate::Result<()> {
        ensure!(
            offset.checked_add(data.len()).is_some_and(|end| end <= self.size),
            "{what}: writing {} at offset {offset} overruns {}",
            fmt_bytes(data.len()),
            self.describe()
        );
        self.write_raw(offset, data, what)?;
        if self.accounted {
            ledger::uploaded(data.len(), self.tag);
        }
        Ok(())
    }

    /// Upload `len` bytes at `offset` that `fill` writes: in place in host
    /// memory (no staging copy), through a staging vector on a device.
    pub fn write_with(&self, offset: usize, len: usize, what: &str, fill: impl FnOnce(&mut [u8])) -> crate::Result<()> {
        ensure!(
            offset.checked_add(len).is_some_and(|end| end <= self.size),
            "{what}: writing {} at offset {offset} overruns {}",
            fmt_bytes(len),
            self.describe()
        );
        let mut g = self.write(what)?;
        if let BufferMem::Host(w) = &mut *g {
            let to = words_as_bytes_mut(w).get_mut(offset..offset.saturating_add(len));
            fill(to.ok_or_else(|| self.overrun(offset, len, what))?);
            if self.accounted {
                ledger::uploaded(len, self.tag);
            }
            return Ok(());
        }
        drop(g);
        let mut staged = vec![0u8; len];
        fill(&mut staged);
        self.write_bytes(offset, &staged, what)
    }

    /// Copy `out.len()` bytes from `offset` (a download).
    pub fn read_bytes(&self, offset: usize, out: &mut [u8], what: &str) -> crate::Result<()> {
        ensure!(
            offset.checked_add(out.len()).is_some_and(|end| end <= self.size),
            "{what}: reading {} at offset {offset} overruns {}",
            fmt_bytes(out.len()),
            self.describe()
        );
        self.read_raw(offset, out, what)?;
        if self.accounted {
            ledger::downloaded(out.len(), self.tag);
        }
        Ok(())
    }
}

/// Read locks on a set of buffers, each locked once (however often it
/// appears), so a backend can read every source of a node (or a whole graph)
/// at the same time. Holding them keeps the buffers from being freed meanwhile.
pub struct BufferLocks<'a> {
    guards: Vec<(u64, RwLockReadGuard<'a, BufferMem>)>,
}

impl<'a> BufferLocks<'a> {
    /// Lock every buffer in `bufs`; an error when one was freed.
    pub fn read(bufs: impl IntoIterator<Item = &'a Buffer>) -> crate::Result<BufferLocks<'a>> {
        let mut guards: Vec<(u64, RwLockReadGuard<'a, BufferMem>)> = Vec::new();
        for b in bufs {
            if !guards.iter().any(|(id, _)| *id == b.id()) {
                guards.push((b.id(), b.read("a graph node")?));
            }
        }
        Ok(BufferLocks { guards })
    }

    /// The memory of `buf`, which must be one of the locked buffers.
    pub fn mem(&self, buf: &Buffer) -> crate::Result<&BufferMem> {
        self.guards
            .iter()
            .find(|(id, _)| *id == buf.id())
            .map(|(_, g)| &**g)
            .ok_or_else(|| anyhow::anyhow!("internal: {} was not locked", buf.describe()))
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_write_read_free() {
        let cpu = HostMemory;
        let b = Buffer::allocate(&cpu, 10, BufferTag::User).unwrap();
        b.write_bytes(2, &[1, 2, 3], "t").unwrap();
        let mut out = [0u8; 5];
        b.read_bytes(1, &mut out, "t").unwrap();
        assert_eq!(out, [0, 1, 2, 3, 0]);
        assert!(b.write_bytes(8, &[1, 2, 3], "t").unwrap_err().to_string().contains("overruns"));
        b.free();
        b.free();
        let e = b.read_bytes(0, &mut out, "tensor 'x'").unwrap_err().to_string();
        assert!(e.contains("was freed") && e.contains("tensor 'x'"), "{e}");
    }

    #[test]
    fn usage_clear_and_copies() {
        let _g = crate::memory::ledger::tests::serial();
        let a = Buffer::allocate(&HostMemory, 8, BufferTag::User).unwrap();
        let b = Buffer::allocate(&HostMemory, 8, BufferTag::User).unwrap();
        assert_eq!(a.usage(), Usage::Any);
        a.set_usage(Usage::Weights);
        assert_eq!(a.usage(), Usage::Weights);
        assert!(a.is_host() && Usage::from_code(3).is_err());
        a.clear(7, "t").unwrap();
        let before = ledger::stats();
        a.copy_to(2, &b, 4, 4, "t").unwrap();
        a.copy_to(0, &a, 4, 4, "t").unwrap();
        let after = ledger::stats();
        let i = ledger::tag_index(BufferTag::User);
        assert_eq!(after.copy_calls[i] - before.copy_calls[i], 2);
        assert_eq!(after.copy_bytes[i] - before.copy_bytes[i], 8);
        assert_eq!(after.upload_calls, before.upload_calls);
        let mut out = [0u8; 8];
        b.read_bytes(0, &mut out, "t").unwrap();
        assert_eq!(out, [0, 0, 0, 0, 7, 7, 7, 7]);
        assert!(a.copy_to(6, &b, 0, 4, "t").unwrap_err().to_string().contains("overruns"));
        b.free();
        assert!(a.copy_to(0, &b, 0, 4, "t").is_err());
    }

    #[test]
    fn f32_in_place() {
        let cpu = HostMemory;
        let b = Buffer::allocate(&cpu, 16, BufferTag::User).unwrap();
        b.write_bytes(4, &2.5f32.to_ne_bytes(), "t").unwrap();
        let g = b.read("t").unwrap();
        assert_eq!(g.host_f32(4, 1).unwrap(), &[2.5]);
        assert!(g.host_f32(2, 1).is_none());
        assert!(g.host_f32(12, 2).is_none());
    }
}
