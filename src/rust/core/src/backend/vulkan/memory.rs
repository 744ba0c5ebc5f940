//! Device buffers. Memory comes from gpu-allocator, which suballocates large
//! device memory blocks, so the number of `vkAllocateMemory` calls stays far
//! below the driver's `maxMemoryAllocationCount` however many buffers live.
//! On devices that share memory with the host (integrated GPUs, lavapipe)
//! buffers are host-visible and transfers are plain copies; elsewhere buffers
//! are device-local and transfers go through a staging buffer.

use super::context::VkContext;
use crate::base::fmt::fmt_bytes;
use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme};
use gpu_allocator::MemoryLocation;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A buffer on one device; its memory is released when it is dropped.
pub struct VkBuffer {
    pub(crate) ctx: Arc<VkContext>,
    pub(crate) buffer: vk::Buffer,
    alloc: Option<Allocation>,
    size: usize,
    /// Host reads and writes go straight to the mapped memory.
    direct: bool,
}

// SAFETY: the mapped pointer inside the allocation is only written through
// `VkContext::write`, and callers order transfers against graph runs (each
// run waits for its fence before returning).
unsafe impl Send for VkBuffer {}
// SAFETY: shared references only read the handle and size; transfers
// through them are serialised by `VkContext` as above.
unsafe impl Sync for VkBuffer {}

impl std::fmt::Debug for VkBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VkBuffer({} on '{}')", fmt_bytes(self.size), self.ctx.name())
    }
}

impl VkBuffer {
    /// Usable size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn context(&self) -> &Arc<VkContext> {
        &self.ctx
    }

    /// True when the host reads and writes the memory directly.
    pub fn is_mapped(&self) -> bool {
        self.mapped().is_some()
    }

    fn mapped(&self) -> Option<*mut u8> {
        if !self.direct {
            return None;
        }
        self.alloc.as_ref().and_then(|a| a.mapped_ptr()).map(|p| p.as_ptr() as *mut u8)
    }
}

impl Drop for VkBuffer {
    fn drop(&mut self) {
        if !self.ctx.in_owner_process() {
            // A forked child's copy of its parent's buffer (see VkContext's drop).
            if let Some(a) = self.alloc.take() {
                std::mem::forget(a);
            }
            return;
        }
        let dev = &self.ctx.device;
        // SAFETY: graph runs wait for completion, so the buffer is idle.
        unsafe { dev.destroy_buffer(self.buffer, None) };
        if let Some(a) = self.alloc.take() {
            let _ = self.ctx.lock_allocator().free(a);
        }
    }
}

impl VkContext {
    /// A new buffer of `bytes` bytes (rounded up to whole 32-bit words).
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> crate::Result<VkBuffer> {
        let staged = self.force_staging.load(Ordering::SeqCst) || !self.info.unified_memory;
        let loc = if staged { MemoryLocation::GpuOnly } else { MemoryLocation::CpuToGpu };
        self.alloc_at(bytes, loc, "tensor buffer")
    }

    pub(crate) fn alloc_at(self: &Arc<Self>, bytes: usize, loc: MemoryLocation, what: &str) -> crate::Result<VkBuffer> {
        self.check_live()?;
        let name = &self.info.name;
        let size = bytes.max(4).div_ceil(16) * 16;
        let lim = &self.info.limits;
        if size as u64 > lim.max_memory_allocation_size || size as u64 > self.info.largest_heap {
            anyhow::bail!(
                "Vulkan device '{name}': cannot allocate {} for a {what} (largest single allocation {}, \
                 device-local heap {}); use smaller tensors or the CPU backend",
                fmt_bytes(bytes),
                fmt_bytes(lim.max_memory_allocation_size as usize),
                fmt_bytes(self.info.largest_heap as usize)
            );
        }
        let usage = vk::BufferUsageFlags::STORAGE_BUFFER
            | vk::BufferUsageFlags::TRANSFER_SRC
            | vk::BufferUsageFlags::TRANSFER_DST;
        let binfo = vk::BufferCreateInfo::default()
            .size(size as u64)
            .usage(usage)
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let dev = &self.device;
        // SAFETY: valid device; the buffer is destroyed on every error path below.
        let buffer = unsafe { dev.create_buffer(&binfo, None) }
            .map_err(|e| self.vk_error(&format!("creating a {} buffer", fmt_bytes(bytes)), e))?;
        let req = unsafe { dev.get_buffer_memory_requirements(buffer) };
        let desc = AllocationCreateDesc {
            name: what,
            requirements: req,
            location: loc,
            linear: true,
            allocation_scheme: AllocationScheme::GpuAllocatorManaged,
        };
        let alloc = self.lock_allocator().allocate(&desc);
        let alloc = match alloc {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: the buffer was created just above, has no memory bound and is used by nothing else.
                unsafe { dev.destroy_buffer(buffer, None) };
                let (free, total) = self.memory();
                let why = match e {
                    gpu_allocator::AllocationError::OutOfMemory => "out of device memory".to_string(),
                    other => other.to_string(),
                };
                anyhow::bail!(
                    "Vulkan device '{name}': cannot allocate {} for a {what}: {why} ({} free of {}); \
                     free some buffers, use smaller tensors or the CPU backend",
                    fmt_bytes(bytes),
                    fmt_bytes(free as usize),
                    fmt_bytes(total as usize)
                );
            }
        };
        // SAFETY: the allocation satisfies `req` and is not bound elsewhere.
        if let Err(e) = unsafe { dev.bind_buffer_memory(buffer, alloc.memory(), alloc.offset()) } {
            unsafe { dev.destroy_buffer(buffer, None) };
            let _ = self.lock_allocator().free(alloc);
            return Err(self.vk_error("binding buffer memory", e));
        }
        // Device-local buffers use staged transfers even where the driver maps them.
        let direct = loc != MemoryLocation::GpuOnly;
        Ok(VkBuffer { ctx: Arc::clone(self), buffer, alloc: Some(alloc), size, direct })
    }

    fn check_range(&self, buf: &VkBuffer, offset: usize, len: usize, what: &str) -> crate::Result<()> {
        anyhow::ensure!(
            offset.checked_add(len).is_some_and(|end| end <= buf.size),
            "Vulkan device '{}': cannot {what} {} at offset {offset} of a {}-byte buffer",
            self.info.name,
            fmt_bytes(len),
            buf.size
        );
        Ok(())
    }

    /// Copy `data` into `buf` at byte `offset`.
    pub fn write(&self, buf: &VkBuffer, offset: usize, data: &[u8]) -> crate::Result<()> {
        self.same_device(buf)?;
        self.check_range(buf, offset, data.len(), "write")?;
        self.check_live()?;
        if data.is_empty() {
            return Ok(());
        }
        if let Some(p) = buf.mapped() {
            // SAFETY: the range is inside the mapped allocation (checked) and
            // no device work is in flight (graph runs wait for completion).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.add(offset), data.len()) };
            return Ok(());
        }
        let stage = Self::staging(buf, data.len(), MemoryLocation::CpuToGpu)?;
        let p = stage.mapped().ok_or_else(|| anyhow::anyhow!("staging buffer is not host-visible"))?;
        // SAFETY: `stage` holds at least data.len() mapped bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.copy_buffer(stage.buffer, 0, buf.buffer, offset as u64, data.len() as u64, "uploading data")
    }

    /// Copy bytes of `buf` from byte `offset` into `out`.
    pub fn read(&self, buf: &VkBuffer, offset: usize, out: &mut [u8]) -> crate::Result<()> {
        self.same_device(buf)?;
        self.check_range(buf, offset, out.len(), "read")?;
        self.check_live()?;
        if out.is_empty() {
            return Ok(());
        }
        if let Some(p) = buf.mapped() {
            // SAFETY: as in `write`.
            unsafe { std::ptr::copy_nonoverlapping(p.add(offset), out.as_mut_ptr(), out.len()) };
            return Ok(());
        }
        let stage = Self::staging(buf, out.len(), MemoryLocation::GpuToCpu)?;
        self.copy_buffer(buf.buffer, offset as u64, stage.buffer, 0, out.len() as u64, "downloading data")?;
        let p = stage.mapped().ok_or_else(|| anyhow::anyhow!("staging buffer is not host-visible"))?;
        // SAFETY: the copy finished (fence waited) and `stage` holds out.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn same_device(&self, buf: &VkBuffer) -> crate::Result<()> {
        anyhow::ensure!(
            std::ptr::eq(Arc::as_ptr(&buf.ctx), self),
            "the buffer lives on Vulkan device '{}', not on '{}'",
            buf.ctx.name(),
            self.info.name
        );
        Ok(())
    }

    /// A host-visible buffer on the same device as `buf` (which holds our Arc).
    fn staging(buf: &VkBuffer, bytes: usize, loc: MemoryLocation) -> crate::Result<VkBuffer> {
        buf.ctx.alloc_at(bytes, loc, "staging buffer")
    }

    fn copy_buffer(&self, src: vk::Buffer, so: u64, dst: vk::Buffer, dso: u64, len: u64, what: &str) -> crate::Result<()> {
        let s = self.lock_submitter();
        let dev = &self.device;
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let region = [vk::BufferCopy { src_offset: so, dst_offset: dso, size: len }];
        let to_host = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ | vk::AccessFlags::SHADER_READ)];
        // SAFETY: exclusive use of the command buffer (submitter lock); both
        // buffers are alive for the duration (we wait for the fence).
        unsafe {
            dev.reset_command_buffer(s.cmd, vk::CommandBufferResetFlags::empty())
                .map_err(|e| self.vk_error(what, e))?;
            dev.begin_command_buffer(s.cmd, &begin).map_err(|e| self.vk_error(what, e))?;
            dev.cmd_copy_buffer(s.cmd, src, dst, &region);
            dev.cmd_pipeline_barrier(
                s.cmd,
                vk::PipelineStageFlags::TRANSFER,
                vk::PipelineStageFlags::HOST | vk::PipelineStageFlags::COMPUTE_SHADER,
                vk::DependencyFlags::empty(),
                &to_host,
                &[],
                &[],
            );
            dev.end_command_buffer(s.cmd).map_err(|e| self.vk_error(what, e))?;
        }
        self.submit_and_wait(&s, what)
    }
}
