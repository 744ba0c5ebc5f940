//! Tensor descriptors: type and shape (a [`Layout`]), the op that computes
//! them, and a checked reference to their memory.
//!
//! A tensor never points into memory directly. Its data is found through its
//! [`DataSlot`] (an `Arc<Buffer>` and a byte offset) or, for views, through the
//! tensor it views; every access checks that the context and the buffer are
//! still alive, so freed memory cannot be read.

use crate::base::dtype::DType;
use crate::layout::{fmt_shape, n_dims, Dims, Layout};
use crate::memory::tag::{self, BufferTag};
use crate::memory::Buffer;
use crate::op::codes::{op_params, OP_PARAMS_BYTES};
use crate::op::Op;
use anyhow::bail;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Liveness of a context, shared by the context and its tensors.
#[derive(Debug)]
pub struct CtxState {
    pub id: u64,
    freed: AtomicBool,
    /// Freed by `ggml_reset()` (the context itself lives on).
    reset: AtomicBool,
    /// For residency pool contexts: the pool's buffer tag and its
    /// generation at creation.
    pool: OnceLock<(BufferTag, i32)>,
}

impl CtxState {
    pub fn new(id: u64) -> CtxState {
        CtxState { id, freed: AtomicBool::new(false), reset: AtomicBool::new(false), pool: OnceLock::new() }
    }
    pub fn set_pool(&self, pool: BufferTag, generation: i32) {
        let _ = self.pool.set((pool, generation));
    }
    pub fn pool(&self) -> Option<(BufferTag, i32)> {
        self.pool.get().copied()
    }
    pub fn mark_freed(&self) {
        self.freed.store(true, Ordering::SeqCst);
    }
    pub fn is_freed(&self) -> bool {
        self.freed.load(Ordering::SeqCst)
    }
    /// Retire the state at a reset of its context: its tensors are gone.
    pub fn mark_reset(&self) {
        self.reset.store(true, Ordering::SeqCst);
        self.mark_freed();
    }
    pub fn was_reset(&self) -> bool {
        self.reset.load(Ordering::SeqCst)
    }
}

/// Where a (non-view) tensor's bytes are.
#[derive(Debug, Clone)]
pub struct DataSlot {
    pub buf: Arc<Buffer>,
    pub offset: usize,
}

/// A resolved tensor for a backend: buffer, byte offset and layout.
#[derive(Debug, Clone)]
pub struct DataRef {
    pub buf: Arc<Buffer>,
    pub offset: usize,
    pub layout: Layout,
}

static NEXT_TENSOR: AtomicU64 = AtomicU64::new(1);

/// Counts every change of any tensor's memory (see [`storage_generation`]).
static STORAGE_GENERATION: AtomicU64 = AtomicU64::new(0);

/// A number that changes whenever some tensor is given memory: a graph's
/// resolved nodes stay valid while it is unchanged (their buffers being
/// still there and their contexts live).
pub fn storage_generation() -> u64 {
    STORAGE_GENERATION.load(Ordering::Acquire)
}

#[derive(Debug)]
pub struct Tensor {
    id: u64,
    ctx: Arc<CtxState>,
    layout: Layout,
    op: Op,
    srcs: Vec<Arc<Tensor>>,
    /// For views (and `cpy`): the non-view tensor whose memory this is, and the byte offset.
    view: Option<(Arc<Tensor>, usize)>,
    name: Mutex<String>,
    storage: Mutex<Option<DataSlot>>,
    /// ggml's tensor flags: [`Tensor::INPUT`], [`Tensor::OUTPUT`], [`Tensor::PARAM`].
    flags: AtomicU8,
    /// ggml's parameter block, for inspection (the op keeps its own parameters).
    params: Mutex<[u8; OP_PARAMS_BYTES]>,
}

impl Drop for Tensor {
    /// A tensor owns its sources, so a long chain (`y <- op(y)` a hundred
    /// thousand times) would drop recursively, one stack frame per tensor,
    /// and overflow the stack. Unlink it iteratively instead: every source
    /// whose last owner this is gives up its own sources before it goes.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Tensor>> = std::mem::take(&mut self.srcs);
        if let Some((base, _)) = self.view.take() {
            stack.push(base);
        }
        while let Some(t) = stack.pop() {
            if let Some(mut inner) = Arc::into_inner(t) {
                stack.append(&mut inner.srcs);
                if let Some((base, _)) = inner.view.take() {
                    stack.push(base);
                }
            }
        }
    }
}

impl Tensor {
    pub(crate) fn new(
        ctx: Arc<CtxState>,
        layout: Layout,
        op: Op,
        srcs: Vec<Arc<Tensor>>,
        view: Option<(Arc<Tensor>, usize)>,
        storage: Option<DataSlot>,
    ) -> Tensor {
        // A view of a view refers to the original tensor directly.
        let view = view.map(|(t, off)| match &t.view {
            Some((base, boff)) => (base.clone(), boff + off),
            None => (t, off),
        });
        let params = op_params(&op);
        Tensor {
            id: NEXT_TENSOR.fetch_add(1, Ordering::Relaxed),
            ctx,
            layout,
            op,
            srcs,
            view,
            name: Mutex::new(String::new()),
            storage: Mutex::new(storage),
            flags: AtomicU8::new(0),
            params: Mutex::new(params),
        }
    }

    /// Flag of a graph input (`ggml_set_input`).
    pub const INPUT: u8 = 1;
    /// Flag of a graph output (`ggml_set_output`).
    pub const OUTPUT: u8 = 2;
    /// Flag of a trainable parameter (`ggml_set_param`).
    pub const PARAM: u8 = 4;

    pub fn flags(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }
    pub fn set_flag(&self, flag: u8) {
        self.flags.fetch_or(flag, Ordering::Relaxed);
    }

    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn dtype(&self) -> DType {
        self.layout.dtype
    }
    /// The sizes of the first four dimensions (see [`Tensor::dims`] for all).
    pub fn ne(&self) -> [usize; 4] {
        self.layout.ne4()
    }
    /// The sizes of every dimension, the fifth included.
    pub fn dims(&self) -> Dims {
        self.layout.ne
    }
    pub fn op(&self) -> &Op {
        &self.op
    }
    pub fn srcs(&self) -> &[Arc<Tensor>] {
        &self.srcs
    }
    pub fn view_base(&self) -> Option<&(Arc<Tensor>, usize)> {
        self.view.as_ref()
    }
    pub fn ctx_id(&self) -> u64 {
        self.ctx.id
    }
    pub fn nelements(&self) -> usize {
        self.layout.nelements()
    }
    /// Bytes of the data as ggml counts them (the span of the layout).
    pub fn nbytes(&self) -> usize {
        self.layout.span_bytes()
    }
    /// ggml's number of dimensions: 1 + the last dimension above 1 (at least 1).
    pub fn n_dims(&self) -> usize {
        n_dims(&self.layout.ne)
    }

    pub fn name(&self) -> String {
        self.name.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn set_name(&self, name: &str) {
        *self.name.lock().unwrap_or_else(|e| e.into_inner()) = name.to_string();
    }

    pub fn op_params(&self) -> [u8; OP_PARAMS_BYTES] {
        *self.params.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Overwrite bytes of the parameter block from `at`; an error past its end.
    pub fn set_op_params(&self, at: usize, bytes: &[u8]) -> crate::Result<()> {
        anyhow::ensure!(
            at.checked_add(bytes.len()).is_some_and(|e| e <= OP_PARAMS_BYTES),
            "a tensor's op parameters are {OP_PARAMS_BYTES} bytes; {} bytes at byte {at} do not fit",
            bytes.len()
        );
        // BOUNDS: at + bytes.len() <= OP_PARAMS_BYTES, the block's length (checked above).
        self.params.lock().unwrap_or_else(|e| e.into_inner())[at..at + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// "tensor 'x' (f32 [3, 4])" or "unnamed tensor (f32 [3, 4])".
    pub fn describe(&self) -> String {
        let name = self.name();
        let what = if name.is_empty() {
            if self.op == Op::None {
                "unnamed tensor".to_string()
            } else {
                let op = match &self.op {
                    Op::Unary(u) => u.name().to_uppercase(),
                    other => other.name().to_string(),
                };
                format!("unnamed {op} result")
            }
        } else {
            format!("tensor '{name}'")
        };
        format!("{what} ({} {})", self.dtype().name(), fmt_shape(&self.layout.ne))
    }

    /// An error unless the tensor's context is alive.
    pub fn check_live(&self) -> crate::Result<()> {
        if self.ctx.is_freed() {
            if let Some((pool, g)) = self.ctx.pool() {
                bail!(
                    "{} belongs to the {} pool's generation {g}, which was freed by a reset \
                     (the pool is now at generation {}); compute it again after the reset",
                    self.describe(),
                    pool.name(),
                    tag::generation(pool)
                );
            }
            if self.ctx.was_reset() {
                bail!(
                    "{} belongs to a context that was reset with ggml_reset() since; create the \
                     tensor again in the context",
                    self.describe()
                );
            }
            bail!(
                "{} belongs to a context that was freed with ggml_free(); create the tensor \
                 again in a live context",
                self.describe()
            );
        }
        Ok(())
    }

    /// Whether the tensor has memory of its own that is still there (a
    /// freed buffer's tensors have none: allocating the context again gives
    /// them new memory, as the freed-buffer error tells the user to do).
    pub(crate) fn has_own_storage(&self) -> bool {
        self.storage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|s| !s.buf.is_freed())
    }

    pub(crate) fn set_storage(&self, s: DataSlot) {
        *self.storage.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
        STORAGE_GENERATION.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether the tensor (or the tensor it views) has memory.
    pub fn has_data(&self) -> bool {
        match &self.view {
            Some((base, _)) => base.has_own_storage(),
            None => self.has_own_storage(),
        }
    }

    /// The memory of the tensor, checked: live context, data present, buffer not freed.
    pub fn resolve(&self) -> crate::Result<DataRef> {
        self.check_live()?;
        let (base, extra) = match &self.view {
            Some((b, off)) => {
                b.check_live()?;
                (b.as_ref(), *off)
            }
            None => (self, 0),
        };
        let st = base.storage.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(st) = st else {
            bail!(
                "{} has no data: its context was created with no_alloc = TRUE; give it memory \
                 with ggml_backend_alloc_ctx_tensors(ctx, backend) first",
                self.describe()
            );
        };
        if st.buf.is_freed() {
            bail!(
                "{} lives in {}, and {}; allocate the context's tensors again",
                self.describe(),
                st.buf.describe(),
                st.buf.freed_note()
            );
        }
        Ok(DataRef { buf: st.buf, offset: st.offset + extra, layout: self.layout })
    }

    /// Where the data lives, for printing.
    pub fn location(&self) -> String {
        if self.ctx.is_freed() {
            return "freed context".into();
        }
        match self.resolve() {
            Ok(r) => format!("{}, offset {}", r.buf.describe(), r.offset),
            Err(_) if self.has_data() => "freed buffer".into(),
            Err(_) => "no data".into(),
        }
    }
}
