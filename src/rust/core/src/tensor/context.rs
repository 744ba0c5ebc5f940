//! Contexts: arenas of tensor descriptors with a fixed capacity, as in ggml.
//!
//! Each tensor costs [`TENSOR_OVERHEAD`] bytes of the capacity. A context made
//! with `no_alloc = false` also owns one host buffer of `mem_size` bytes from
//! which its tensors' data is taken; with `no_alloc = true` the data comes
//! later from [`Context::alloc_tensors`].

use super::descriptor::{CtxState, DataSlot, Tensor};
use crate::base::fmt::fmt_bytes;
use crate::layout::{fmt_shape, Layout, MAX_DIMS};
use crate::memory::{align_up, Allocator, Buffer, BufferTag, HostMemory};
use crate::op::Op;
use anyhow::{bail, ensure};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes of a context's capacity taken by one tensor descriptor (ggml's value on 64-bit).
pub const TENSOR_OVERHEAD: usize = 368;
/// Bytes ggml reserves for a graph of the default size (informational).
pub const GRAPH_OVERHEAD: usize = 2048 * 5 * 8 + 368;

static NEXT_CTX: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
struct Inner {
    used: usize,
    tensors: Vec<Arc<Tensor>>,
    data: Option<Arc<Buffer>>,
}

#[derive(Debug)]
pub struct Context {
    /// Replaced at every `reset` (the old one retires with its tensors).
    state: Mutex<Arc<CtxState>>,
    mem_size: usize,
    no_alloc: AtomicBool,
    inner: Mutex<Inner>,
}

impl Context {
    pub fn new(mem_size: usize, no_alloc: bool) -> crate::Result<Context> {
        ensure!(mem_size > 0, "`mem_size` must be positive, e.g. 16 * 1024 * 1024");
        let data = if no_alloc {
            None
        } else {
            Some(Arc::new(Buffer::allocate(&HostMemory, mem_size, BufferTag::Context)?))
        };
        Ok(Context {
            state: Mutex::new(Arc::new(CtxState::new(NEXT_CTX.fetch_add(1, Ordering::Relaxed)))),
            mem_size,
            no_alloc: AtomicBool::new(no_alloc),
            inner: Mutex::new(Inner { used: 0, tensors: Vec::new(), data }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn state(&self) -> Arc<CtxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn id(&self) -> u64 {
        self.state().id
    }
    pub fn mem_size(&self) -> usize {
        self.mem_size
    }
    pub fn no_alloc(&self) -> bool {
        self.no_alloc.load(Ordering::SeqCst)
    }
    /// From now on, new tensors get data from the context (`false`) or none
    /// (`true`). A context made with `no_alloc = TRUE` takes its memory for
    /// data when it is first switched to allocating.
    pub fn set_no_alloc(&self, no_alloc: bool) -> crate::Result<()> {
        self.check_live()?;
        if !no_alloc {
            let mut g = self.lock();
            if g.data.is_none() {
                g.data = Some(Arc::new(Buffer::allocate(&HostMemory, self.mem_size, BufferTag::Context)?));
            }
        }
        self.no_alloc.store(no_alloc, Ordering::SeqCst);
        Ok(())
    }
    /// The context's tensors, oldest first.
    pub fn tensors(&self) -> Vec<Arc<Tensor>> {
        self.lock().tensors.clone()
    }
    /// Bytes of the context's largest tensor (0 when it has none).
    pub fn max_tensor_size(&self) -> usize {
        self.lock().tensors.iter().map(|t| t.nbytes()).max().unwrap_or(0)
    }
    /// Make all the context's memory free again: its tensors are retired
    /// (using one is an error that names the reset) and new ones start from
    /// the beginning, as after `ggml_init()`.
    pub fn reset(&self) -> crate::Result<()> {
        self.check_live()?;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = Arc::new(CtxState::new(st.id));
        if let Some((pool, generation)) = st.pool() {
            fresh.set_pool(pool, generation);
        }
        st.mark_reset();
        *st = fresh;
        let mut g = self.lock();
        g.tensors.clear();
        g.used = 0;
        Ok(())
    }
    pub fn used_mem(&self) -> usize {
        self.lock().used
    }
    pub fn n_tensors(&self) -> usize {
        self.lock().tensors.len()
    }
    pub fn is_freed(&self) -> bool {
        self.state().is_freed()
    }

    /// Mark the context as belonging to a residency pool's generation, so
    /// that errors about its freed tensors name the reset.
    pub fn set_pool(&self, pool: BufferTag, generation: i32) {
        self.state().set_pool(pool, generation);
    }

    pub fn check_live(&self) -> crate::Result<()> {
        if self.is_freed() {
            bail!("the context was freed with ggml_free(); create a new one with ggml_init()");
        }
        Ok(())
    }

    /// Let go of the context's tensors without freeing anything: they live
    /// on while their handles do (the context keeps its state, so a later
    /// [`Context::free`] still makes them unusable).
    pub fn detach_tensors(&self) {
        self.lock().tensors.clear();
    }

    /// Free the context: its tensors become unusable and its own data is released.
    pub fn free(&self) {
        self.state().mark_freed();
        let mut g = self.lock();
        g.tensors.clear();
        if let Some(b) = g.data.take() {
            b.free();
        }
    }

    /// Add a tensor descriptor (and its data, for contexts that allocate).
    pub(crate) fn push(
        &self,
        layout: Layout,
        op: Op,
        srcs: Vec<Arc<Tensor>>,
        view: Option<(Arc<Tensor>, usize)>,
    ) -> crate::Result<Arc<Tensor>> {
        self.push_over(layout, op, srcs, view, None)
    }

    /// A leaf tensor over memory that exists already (a mapped file's
    /// data): only its descriptor takes room in the context.
    pub fn new_tensor_over(&self, dtype: crate::base::dtype::DType, ne: [usize; 4], slot: DataSlot) -> crate::Result<Arc<Tensor>> {
        let layout = Layout::contiguous(dtype, ne);
        let end = slot.offset.checked_add(layout.checked_span_bytes().unwrap_or(usize::MAX));
        ensure!(
            end.is_some_and(|e| e <= slot.buf.size()),
            "a {} tensor of sizes {} does not fit in {} at offset {}",
            dtype.name(),
            fmt_shape(&ne),
            slot.buf.describe(),
            slot.offset
        );
        self.push_over(layout, Op::None, Vec::new(), None, Some(slot))
    }

    fn push_over(
        &self,
        layout: Layout,
        op: Op,
        srcs: Vec<Arc<Tensor>>,
        view: Option<(Arc<Tensor>, usize)>,
        given: Option<DataSlot>,
    ) -> crate::Result<Arc<Tensor>> {
        self.check_live()?;
        for s in &srcs {
            s.check_live()?;
        }
        let bs = layout.dtype.block_size();
        // BOUNDS: ne is a Dims, indexed by the literal 0.
        let n0 = layout.ne[0];
        ensure!(
            n0 % bs == 0,
            "a {} tensor stores values in blocks of {bs} along its first dimension; {n0} values \
             is not a whole number of blocks (use a multiple of {bs})",
            layout.dtype.name()
        );
        ensure!(
            layout.checked_span_bytes().is_some(),
            "a {} tensor of sizes {} is too large to address",
            layout.dtype.name(),
            fmt_shape(&layout.ne)
        );
        let state = self.state();
        let mut g = self.lock();
        let own_data = !self.no_alloc() && view.is_none() && given.is_none();
        let data_off = align_up(g.used + TENSOR_OVERHEAD);
        let end = if own_data {
            data_off + layout.span_bytes()
        } else {
            g.used + TENSOR_OVERHEAD
        };
        if end > self.mem_size {
            bail!(
                "the context is full: {} of {} used, and a new {} {} tensor needs {} more; \
                 create the context with a larger mem_size (each tensor takes \
                 ggml_tensor_overhead() = {} bytes{})",
                fmt_bytes(g.used),
                fmt_bytes(self.mem_size),
                layout.dtype.name(),
                fmt_shape(&layout.ne),
                fmt_bytes(end - g.used),
                TENSOR_OVERHEAD,
                if self.no_alloc() { "" } else { " plus its data" }
            );
        }
        let storage = if own_data {
            let buf = g
                .data
                .clone()
                .ok_or_else(|| anyhow::anyhow!("internal: this context has no data buffer; create it with no_alloc = FALSE"))?;
            Some(DataSlot { buf, offset: data_off })
        } else {
            given
        };
        let t = Arc::new(Tensor::new(state, layout, op, srcs, view, storage));
        g.used = end;
        g.tensors.push(t.clone());
        Ok(t)
    }

    /// A new leaf tensor.
    pub fn new_tensor(&self, dtype: crate::base::dtype::DType, ne: &[usize]) -> crate::Result<Arc<Tensor>> {
        ensure!(
            (1..=MAX_DIMS).contains(&ne.len()),
            "a tensor has 1 to {MAX_DIMS} dimensions, not {}",
            ne.len()
        );
        let mut full = [1usize; MAX_DIMS];
        // BOUNDS: 1 <= ne.len() <= MAX_DIMS, checked above.
        full[..ne.len()].copy_from_slice(ne);
        self.push(Layout::contiguous(dtype, full), Op::None, Vec::new(), None)
    }

    /// Back every tensor that has no memory yet with one new buffer from `alloc` (a backend).
    /// `None` when there is nothing to allocate.
    pub fn alloc_tensors(
        &self,
        alloc: &dyn Allocator,
        tag: BufferTag,
    ) -> crate::Result<Option<Arc<Buffer>>> {
        self.check_live()?;
        let g = self.lock();
        alloc_group(g.tensors.iter(), alloc, tag)
    }
}

/// Back every tensor of `tensors` that has no memory yet (views aside: they
/// use their base's) with one new buffer from `alloc`. `None` when there is
/// nothing to allocate.
pub fn alloc_group<'a>(
    tensors: impl Iterator<Item = &'a Arc<Tensor>>,
    alloc: &dyn Allocator,
    tag: BufferTag,
) -> crate::Result<Option<Arc<Buffer>>> {
    let todo: Vec<&Arc<Tensor>> = tensors.filter(|t| t.view_base().is_none() && !t.has_data()).collect();
    if todo.is_empty() {
        return Ok(None);
    }
    let mut offsets = Vec::with_capacity(todo.len());
    let mut size = 0usize;
    for t in &todo {
        t.check_live()?;
        offsets.push(size);
        size = align_up(size + t.nbytes().max(1));
    }
    let buf = Arc::new(Buffer::allocate(alloc, size, tag)?);
    for (t, off) in todo.iter().zip(offsets) {
        t.set_storage(DataSlot { buf: buf.clone(), offset: off });
    }
    Ok(Some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn capacity_and_overflow() {
        let ctx = Context::new(3 * TENSOR_OVERHEAD, true).unwrap();
        for _ in 0..3 {
            ctx.new_tensor(DType::F32, &[1000]).unwrap();
        }
        assert_eq!(ctx.used_mem(), 3 * TENSOR_OVERHEAD);
        let e = ctx.new_tensor(DType::F32, &[2, 3]).unwrap_err().to_string();
        assert!(e.contains("context is full") && e.contains("[2, 3]"), "{e}");
        let ctx = Context::new(1024, false).unwrap();
        let e = ctx.new_tensor(DType::F32, &[1000]).unwrap_err().to_string();
        assert!(e.contains("plus its data"), "{e}");
        let big = Context::new(1 << 20, true).unwrap();
        let e = big.new_tensor(DType::F32, &[1 << 20, 1 << 20, 1 << 20, 1 << 20]).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    #[test]
    fn reset_retires_tensors_and_no_alloc_switches() {
        let ctx = Context::new(4096, false).unwrap();
        let a = ctx.new_tensor(DType::F32, &[100]).unwrap();
        assert!(ctx.used_mem() > 400 && ctx.max_tensor_size() == 400);
        ctx.reset().unwrap();
        assert_eq!((ctx.used_mem(), ctx.n_tensors()), (0, 0));
        let e = a.resolve().unwrap_err().to_string();
        assert!(e.contains("reset with ggml_reset()"), "{e}");
        let b = ctx.new_tensor(DType::F32, &[100]).unwrap();
        assert!(b.resolve().is_ok() && !ctx.is_freed());
        ctx.set_no_alloc(true).unwrap();
        assert!(!ctx.new_tensor(DType::F32, &[4]).unwrap().has_data());
        let lazy = Context::new(4096, true).unwrap();
        lazy.set_no_alloc(false).unwrap();
        assert!(lazy.new_tensor(DType::F32, &[4]).unwrap().has_data());
        assert_eq!(lazy.tensors().len(), 1);
    }

    #[test]
    fn alloc_and_free() {
        let cpu = HostMemory;
        let ctx = Context::new(10 * TENSOR_OVERHEAD, true).unwrap();
        let a = ctx.new_tensor(DType::F32, &[3, 2]).unwrap();
        a.set_name("a");
        let e = a.resolve().unwrap_err().to_string();
        assert!(e.contains("tensor 'a' (f32 [3, 2]) has no data"), "{e}");
        let buf = ctx.alloc_tensors(&cpu, BufferTag::User).unwrap().unwrap();
        assert!(buf.size() >= 24);
        assert!(a.resolve().is_ok());
        assert!(ctx.alloc_tensors(&cpu, BufferTag::User).unwrap().is_none());
        buf.free();
        assert!(a.resolve().unwrap_err().to_string().contains("was freed"));
        ctx.free();
        let e = a.resolve().unwrap_err().to_string();
        assert!(e.contains("context that was freed"), "{e}");
        assert!(ctx.new_tensor(DType::F32, &[1]).is_err());
    }
}
