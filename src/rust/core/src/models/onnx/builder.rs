//! Building a model's engine graph: contexts for its tensor descriptors,
//! the two pools its memory comes from, and the constants uploaded to them.
//!
//! The persistent pool holds what outlives a plan (initializers and other
//! model-only constants, uploaded once and shared by every plan of the
//! model, found by key); each plan has a pass pool for its intermediate
//! tensors, inputs and shape-dependent constants. Every buffer of both is
//! allocated on the model's backend through the ledger (tags "persistent"
//! and "pass"), one buffer per pool and flush.

use crate::backend::Backend;
use crate::base::dtype::DType;
use crate::layout::convert::encode;
use crate::memory::{Buffer, BufferTag};
use crate::op::Op;
use crate::tensor::{alloc_group, Context, Tensor, TENSOR_OVERHEAD};
use anyhow::Context as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Descriptors per context.
const CTX_TENSORS: usize = 4096;

/// Contexts and buffers of one pool.
#[derive(Debug)]
pub struct BufferPool {
    tag: BufferTag,
    ctxs: Vec<Arc<Context>>,
    bufs: Vec<Arc<Buffer>>,
}

impl BufferPool {
    pub fn new(tag: BufferTag) -> BufferPool {
        BufferPool { tag, ctxs: Vec::new(), bufs: Vec::new() }
    }

    /// A context with room for `n` more descriptors.
    fn ctx(&mut self, n: usize) -> crate::Result<Arc<Context>> {
        if let Some(c) = self.ctxs.last() {
            if (c.mem_size() - c.used_mem()) / TENSOR_OVERHEAD >= n {
                return Ok(c.clone());
            }
        }
        let c = Arc::new(Context::new(CTX_TENSORS.max(n) * TENSOR_OVERHEAD, true)?);
        self.ctxs.push(c.clone());
        Ok(c)
    }

    /// Gives every tensor without memory a place: on a Vulkan device in one
    /// new buffer per context; on the CPU in a buffer of its own, since a
    /// CPU kernel writes its result in place only when no source lives in
    /// the result's buffer (else it computes aside and copies).
    fn alloc(&mut self, backend: &Backend) -> crate::Result<()> {
        for c in &self.ctxs {
            if backend.is_vulkan() {
                if let Some(b) = c.alloc_tensors(backend, self.tag)? {
                    self.bufs.push(b);
                }
                continue;
            }
            for t in c.tensors() {
                if let Some(b) = alloc_group(std::iter::once(&t), backend, self.tag)? {
                    self.bufs.push(b);
                }
            }
        }
        Ok(())
    }

    /// Bytes of the pool's buffers.
    pub fn bytes(&self) -> usize {
        self.bufs.iter().filter(|b| !b.is_freed()).map(|b| b.size()).sum()
    }

    pub fn n_buffers(&self) -> usize {
        self.bufs.len()
    }

    fn absorb(&mut self, other: &mut BufferPool) {
        self.ctxs.append(&mut other.ctxs);
        self.bufs.append(&mut other.bufs);
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        for b in &self.bufs {
            b.free();
        }
        for c in &self.ctxs {
            c.free();
        }
    }
}

/// The persistent pool of a model and its uploaded constants by key.
#[derive(Debug)]
pub struct Persist {
    pub pool: BufferPool,
    cache: HashMap<String, Arc<Tensor>>,
}

impl Persist {
    pub fn new() -> Persist {
        Persist { pool: BufferPool::new(BufferTag::Persistent), cache: HashMap::new() }
    }
}

impl Default for Persist {
    fn default() -> Self {
        Persist::new()
    }
}

/// Builds the engine graph of one plan.
#[derive(Debug)]
pub struct Builder {
    pub backend: Arc<Backend>,
    pub pass: BufferPool,
    persist: Arc<Mutex<Persist>>,
    /// Persistent constants made by this plan, moved to the shared pool at flush.
    fresh: BufferPool,
    fresh_keys: HashMap<String, Arc<Tensor>>,
    pending: Vec<(Arc<Tensor>, Vec<f32>)>,
    /// Store large weights in f16.
    pub f16: bool,
}

impl Builder {
    pub fn new(backend: Arc<Backend>, persist: Arc<Mutex<Persist>>, f16: bool) -> Builder {
        Builder {
            backend,
            pass: BufferPool::new(BufferTag::Pass),
            persist,
            fresh: BufferPool::new(BufferTag::Persistent),
            fresh_keys: HashMap::new(),
            pending: Vec::new(),
            f16,
        }
    }

    /// A pass-pool context with room for the next few nodes.
    pub fn ctx(&mut self) -> crate::Result<Arc<Context>> {
        self.pass.ctx(64)
    }

    pub fn op(&mut self, op: Op, srcs: &[Arc<Tensor>]) -> crate::Result<Arc<Tensor>> {
        self.ctx()?.op(op, srcs)
    }

    pub fn reshape(&mut self, a: &Arc<Tensor>, ne: [usize; 4]) -> crate::Result<Arc<Tensor>> {
        if a.ne() == ne {
            return Ok(a.clone());
        }
        let a = self.contig(a)?;
        self.ctx()?.reshape(&a, &ne)
    }

    /// `a` itself when contiguous, else a contiguous copy.
    pub fn contig(&mut self, a: &Arc<Tensor>) -> crate::Result<Arc<Tensor>> {
        if a.layout().is_contiguous() {
            Ok(a.clone())
        } else {
            self.op(Op::Cont, std::slice::from_ref(a))
        }
    }

    /// A view with sizes `ne`, byte strides `nb` and byte offset `offset`.
    // BOUNDS-FN: nb is a [usize; 4]: nb[1..] is its last three.
    pub fn view(&mut self, a: &Arc<Tensor>, ne: [usize; 4], nb: [usize; 4], offset: usize) -> crate::Result<Arc<Tensor>> {
        self.ctx()?.view(a, &ne, &nb[1..], offset)
    }

    pub fn permute(&mut self, a: &Arc<Tensor>, axes: [usize; 4]) -> crate::Result<Arc<Tensor>> {
        if axes == [0, 1, 2, 3] {
            return Ok(a.clone());
        }
        self.ctx()?.permute(a, axes)
    }

    /// A new pass-pool tensor without values (written later or computed into).
    pub fn leaf(&mut self, dtype: DType, ne: [usize; 4]) -> crate::Result<Arc<Tensor>> {
        self.ctx()?.new_tensor(dtype, &ne)
    }

    /// A pass-pool tensor holding `vals` (written at the next flush).
    pub fn data(&mut self, ne: [usize; 4], vals: Vec<f32>) -> crate::Result<Arc<Tensor>> {
        anyhow::ensure!(ne.iter().product::<usize>() == vals.len(), "internal: {} values for {ne:?}", vals.len());
        let t = self.leaf(DType::F32, ne)?;
        self.pending.push((t.clone(), vals));
        Ok(t)
    }

    /// A constant tensor: from the persistent pool when `key` is given
    /// (made once per key and model), else in this plan's pass pool.
    pub fn constant(
        &mut self,
        key: Option<&str>,
        dtype: DType,
        ne: [usize; 4],
        vals: impl FnOnce() -> crate::Result<Vec<f32>>,
    ) -> crate::Result<Arc<Tensor>> {
        let Some(key) = key else {
            let t = self.leaf(dtype, ne)?;
            let v = vals()?;
            anyhow::ensure!(v.len() == t.nelements(), "internal: {} values for {ne:?}", v.len());
            self.pending.push((t.clone(), v));
            return Ok(t);
        };
        let key = format!("{key}|{}|{ne:?}", dtype.name());
        if let Some(t) = self.fresh_keys.get(&key) {
            return Ok(t.clone());
        }
        if let Some(t) = self.persist.lock().unwrap_or_else(|e| e.into_inner()).cache.get(&key) {
            return Ok(t.clone());
        }
        let t = self.fresh.ctx(1)?.new_tensor(dtype, &ne)?;
        let v = vals()?;
        anyhow::ensure!(v.len() == t.nelements(), "internal: {} values for {ne:?}", v.len());
        self.pending.push((t.clone(), v));
        self.fresh_keys.insert(key, t.clone());
        Ok(t)
    }

    /// Allocates every new tensor (pass and persistent) and writes the
    /// pending values.
    pub fn flush(&mut self) -> crate::Result<()> {
        self.pass.alloc(&self.backend)?;
        self.fresh.alloc(&self.backend)?;
        for (t, v) in std::mem::take(&mut self.pending) {
            write_f32(&t, &v)?;
        }
        let mut p = self.persist.lock().unwrap_or_else(|e| e.into_inner());
        p.pool.absorb(&mut self.fresh);
        p.cache.extend(self.fresh_keys.drain());
        Ok(())
    }
}

/// Writes `vals` (ggml order) into the contiguous tensor `t`, converting to its type.
pub fn write_f32(t: &Tensor, vals: &[f32]) -> crate::Result<()> {
    let r = t.resolve()?;
    anyhow::ensure!(r.layout.is_contiguous() && vals.len() == t.nelements(), "internal: writing {}", t.describe());
    let es = r.layout.dtype.size();
    let mut bytes = vec![0u8; vals.len() * es];
    if r.layout.dtype == DType::F32 {
        for (c, v) in bytes.chunks_exact_mut(4).zip(vals) {
            c.copy_from_slice(&v.to_ne_bytes());
        }
    } else {
        for (i, &v) in vals.iter().enumerate() {
            encode(r.layout.dtype, v, &mut bytes, i * es);
        }
    }
    r.buf.write_bytes(r.offset, &bytes, &t.describe()).with_context(|| format!("uploading {}", t.describe()))
}
