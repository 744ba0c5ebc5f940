//! Device residency: two pools of contexts and buffers with independent
//! lifetimes.
//!
//! The "pass" pool holds what one training step needs (activations,
//! gradients) and is freed wholesale at every tape reset; the "persistent"
//! pool holds what must survive steps (weights, optimizer moments). Each pool
//! has its contexts (oldest first), its buffers, a current context that new
//! tensors go into, and a generation counter bumped by each of its resets.
//! Every pool buffer is allocated through [`Buffer::allocate`] and so through
//! the ledger; a reset frees the buffers, so a stale tensor fails with an
//! error naming the pool and both generations instead of reading freed memory.

use crate::backend::Backend;
use crate::memory::tag;
use crate::memory::{Buffer, BufferTag};
use crate::tensor::{Context, TENSOR_OVERHEAD};
use crate::base::dtype::DType;
use crate::tensor::Tensor;
use anyhow::{bail, ensure};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// One of the two residency pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Pass,
    Persistent,
}

impl Scope {
    pub const BOTH: [Scope; 2] = [Scope::Pass, Scope::Persistent];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Pass => "pass",
            Scope::Persistent => "persistent",
        }
    }

    pub fn parse(name: &str) -> crate::Result<Scope> {
        match name {
            "pass" => Ok(Scope::Pass),
            "persistent" => Ok(Scope::Persistent),
            other => bail!("unknown residency scope \"{other}\": use \"pass\" or \"persistent\""),
        }
    }

    pub fn tag(self) -> BufferTag {
        match self {
            Scope::Pass => BufferTag::Pass,
            Scope::Persistent => BufferTag::Persistent,
        }
    }

    pub fn of_tag(tag: BufferTag) -> Option<Scope> {
        match tag {
            BufferTag::Pass => Some(Scope::Pass),
            BufferTag::Persistent => Some(Scope::Persistent),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            Scope::Pass => 0,
            Scope::Persistent => 1,
        }
    }

    /// An error unless `size_mb` (the size of new pool contexts) is none or
    /// a positive number of megabytes.
    pub fn check_size_mb(size_mb: Option<f64>) -> crate::Result<()> {
        if let Some(mb) = size_mb {
            ensure!(
                mb.is_finite() && mb > 0.0,
                "`size_mb` must be a positive number of megabytes, got {mb}"
            );
        }
        Ok(())
    }
}

/// The current generation of a pool (kept with the pool's buffer tag in
/// [`crate::memory::tag`], so lower layers can name it in messages).
pub fn generation(scope: Scope) -> i32 {
    tag::generation(scope.tag())
}

/// Default capacity of a pool context, in bytes of tensor descriptors.
pub const DEFAULT_CTX_BYTES: usize = 1024 * 1024;

/// Who keeps an uploaded tensor's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// The pool, until its next reset (what `ctx_ensure` / `ctx_flush`
    /// give too).
    Pool,
    /// The tensor's own handles: when the last one goes (a model or
    /// optimizer dropped with the weights it made resident), its buffer is
    /// freed. A reset of the pool still frees it first.
    Handles,
}

/// A tensor the pool tracks but does not keep ([`Hold::Handles`]): its own
/// context, without the tensor in it, and its buffer.
#[derive(Debug)]
struct Held {
    ctx: Context,
    buf: Weak<Buffer>,
}

#[derive(Debug, Default)]
struct Pool {
    contexts: Vec<Arc<Context>>,
    buffers: Vec<Arc<Buffer>>,
    current: Option<Arc<Context>>,
    held: Vec<Held>,
}

/// Byte figures of one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolMem {
    pub ctx_bytes: f64,
    pub ctx_used: f64,
    pub buffer_bytes: f64,
    pub n_contexts: usize,
    pub n_buffers: usize,
}

/// The residency state of the process.
#[derive(Debug)]
pub struct Residency {
    pools: [Pool; 2],
    backend: Option<Arc<Backend>>,
    ctx_bytes: usize,
}

static STATE: Mutex<Residency> = Mutex::new(Residency {
    pools: [
        Pool { contexts: Vec::new(), buffers: Vec::new(), current: None, held: Vec::new() },
        Pool { contexts: Vec::new(), buffers: Vec::new(), current: None, held: Vec::new() },
    ],
    backend: None,
    ctx_bytes: DEFAULT_CTX_BYTES,
});

/// Exclusive access to the residency state.
pub fn state() -> MutexGuard<'static, Residency> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn capacity(ctx: &Context) -> usize {
    if ctx.is_freed() {
        return 0;
    }
    ctx.mem_size().saturating_sub(ctx.used_mem()) / TENSOR_OVERHEAD
}

impl Residency {
    fn pool(&self, scope: Scope) -> &Pool {
        // BOUNDS: `Scope::index` is 0 or 1 and `pools` is a [Pool; 2].
        &self.pools[scope.index()]
    }

    fn pool_mut(&mut self, scope: Scope) -> &mut Pool {
        // BOUNDS: `Scope::index` is 0 or 1 and `pools` is a [Pool; 2].
        &mut self.pools[scope.index()]
    }

    pub fn backend(&self) -> Option<&Arc<Backend>> {
        self.backend.as_ref()
    }

    /// The installed backend, or an error saying how to install one.
    fn require_backend(&self) -> crate::Result<Arc<Backend>> {
        match &self.backend {
            Some(b) => Ok(b.clone()),
            None => bail!(
                "no compute backend is installed for residency: set .ag_device_state$backend \
                 (e.g. to ggml_backend_cpu_init()) or call ag_device(\"gpu\") first"
            ),
        }
    }

    /// Install the backend new pool buffers are allocated on (or none).
    pub fn set_backend(&mut self, backend: Option<Arc<Backend>>) {
        self.backend = backend;
    }

    pub fn contexts(&self, scope: Scope) -> Vec<Arc<Context>> {
        self.pool(scope).contexts.clone()
    }

    pub fn buffers(&self, scope: Scope) -> Vec<Arc<Buffer>> {
        self.pool(scope).buffers.clone()
    }

    pub fn current(&self, scope: Scope) -> Option<Arc<Context>> {
        self.pool(scope).current.clone()
    }

    /// Bytes of descriptor capacity given to each new pool context.
    pub fn ctx_bytes(&self) -> usize {
        self.ctx_bytes
    }

    /// Free the pools in `scopes` (contexts and buffers), bump their
    /// generations, and optionally change the size of new contexts. What
    /// must outlive the reset is the caller's to save first.
    pub fn reset(&mut self, scopes: &[Scope], size_mb: Option<f64>) -> crate::Result<()> {
        Scope::check_size_mb(size_mb)?;
        if let Some(mb) = size_mb {
            self.ctx_bytes = ((mb * 1024.0 * 1024.0) as usize).max(TENSOR_OVERHEAD);
        }
        for &scope in scopes {
            let pool = std::mem::take(self.pool_mut(scope));
            for b in &pool.buffers {
                b.free();
            }
            for c in &pool.contexts {
                c.free();
            }
            for h in &pool.held {
                h.ctx.free();
                if let Some(b) = h.buf.upgrade() {
                    b.free();
                }
            }
            tag::bump_generation(scope.tag());
        }
        Ok(())
    }

    /// The pool's current context, with room for `n` more descriptors; a new
    /// context is started (and kept) when the current one is full.
    pub fn ctx_ensure(&mut self, n: usize, scope: Scope) -> crate::Result<Arc<Context>> {
        if let Some(c) = &self.pool(scope).current {
            if capacity(c) >= n {
                return Ok(c.clone());
            }
        }
        let size = self.ctx_bytes.max(n.saturating_mul(TENSOR_OVERHEAD));
        let ctx = Arc::new(Context::new(size, true)?);
        ctx.set_pool(scope.tag(), generation(scope));
        let pool = self.pool_mut(scope);
        pool.contexts.push(ctx.clone());
        pool.current = Some(ctx.clone());
        Ok(ctx)
    }

    /// Back every tensor of `ctx` that has no memory with ONE new buffer on
    /// the installed backend, appended to the pool's buffers. `None` when
    /// there was nothing to allocate.
    pub fn ctx_flush(&mut self, ctx: &Context, scope: Scope) -> crate::Result<Option<Arc<Buffer>>> {
        let backend = self.require_backend()?;
        let Some(buf) = ctx.alloc_tensors(&*backend, scope.tag())? else {
            return Ok(None);
        };
        buf.set_pool_generation(generation(scope));
        self.pool_mut(scope).buffers.push(buf.clone());
        Ok(Some(buf))
    }

    /// Upload a column-major `nrow` x `ncol` matrix into a new tensor of the
    /// pool, which keeps it until its next reset. The budget is checked
    /// before anything is created.
    pub fn upload_matrix(
        &mut self,
        data: &[f64],
        nrow: usize,
        ncol: usize,
        dtype: DType,
        scope: Scope,
    ) -> crate::Result<Arc<Tensor>> {
        self.upload_held(data, nrow, ncol, dtype, scope, Hold::Pool)
    }

    /// [`Residency::upload_matrix`] with the keeper of the memory chosen:
    /// with [`Hold::Handles`] the tensor gets a context and a buffer of its
    /// own that the pool only tracks (for its figures and resets), so
    /// dropping the last handle frees the buffer.
    pub fn upload_held(&mut self, data: &[f64], nrow: usize, ncol: usize, dtype: DType, scope: Scope, hold: Hold) -> crate::Result<Arc<Tensor>> {
        ensure!(
            data.len() == nrow * ncol,
            "a {nrow} x {ncol} matrix needs {} values, got {}",
            nrow * ncol,
            data.len()
        );
        self.require_backend()?;
        let bytes = crate::base::alloc::check(nrow.saturating_mul(ncol), dtype.size(), "an autograd device tensor")?;
        crate::memory::ledger::check_budget(bytes as u64, "an autograd device tensor")?;
        if hold == Hold::Handles {
            return self.upload_handles(data, nrow, ncol, dtype, scope);
        }
        let ctx = self.ctx_ensure(1, scope)?;
        let t = ctx.new_tensor(dtype, &[nrow, ncol])?;
        self.ctx_flush(&ctx, scope)?;
        crate::tensor::io::set_values(&t, data, 0)?;
        Ok(t)
    }

    /// The [`Hold::Handles`] upload: one context and one buffer for the
    /// tensor, the context detached from it, both tracked by the pool.
    fn upload_handles(&mut self, data: &[f64], nrow: usize, ncol: usize, dtype: DType, scope: Scope) -> crate::Result<Arc<Tensor>> {
        let backend = self.require_backend()?;
        let ctx = Context::new(TENSOR_OVERHEAD, true)?;
        ctx.set_pool(scope.tag(), generation(scope));
        let t = ctx.new_tensor(dtype, &[nrow, ncol])?;
        let buf = ctx
            .alloc_tensors(&*backend, scope.tag())?
            .ok_or_else(|| anyhow::anyhow!("internal: a new tensor of {nrow} x {ncol} got no buffer"))?;
        buf.set_pool_generation(generation(scope));
        ctx.detach_tensors();
        let pool = self.pool_mut(scope);
        pool.held.retain(|h| h.buf.strong_count() > 0);
        pool.held.push(Held { ctx, buf: Arc::downgrade(&buf) });
        drop(buf);
        crate::tensor::io::set_values(&t, data, 0)?;
        Ok(t)
    }

    /// Byte figures of a pool.
    pub fn mem(&self, scope: Scope) -> PoolMem {
        let p = self.pool(scope);
        let held: Vec<(&Held, Arc<Buffer>)> = p.held.iter().filter_map(|h| h.buf.upgrade().map(|b| (h, b))).collect();
        let held_ctx: f64 = held.iter().map(|(h, _)| h.ctx.mem_size() as f64).sum();
        PoolMem {
            ctx_bytes: p.contexts.iter().map(|c| c.mem_size() as f64).sum::<f64>() + held_ctx,
            ctx_used: p.contexts.iter().map(|c| c.used_mem() as f64).sum::<f64>() + held_ctx,
            buffer_bytes: p.buffers.iter().chain(held.iter().map(|(_, b)| b)).filter(|b| !b.is_freed()).map(|b| b.size() as f64).sum(),
            n_contexts: p.contexts.len() + held.len(),
            n_buffers: p.buffers.len() + held.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::ledger;

    /// Residency state is process-wide: these tests run one at a time.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        ledger::tests::serial()
    }

    fn fresh() -> MutexGuard<'static, Residency> {
        let mut s = state();
        s.reset(&Scope::BOTH, Some(1.0)).unwrap();
        s.set_backend(Some(Arc::new(Backend::cpu())));
        s
    }

    #[test]
    fn pools_are_independent() {
        let _g = serial();
        let mut s = fresh();
        let w = s.upload_matrix(&[1.0, 2.0, 3.0, 4.0], 2, 2, DType::F32, Scope::Persistent).unwrap();
        let a = s.upload_matrix(&[5.0; 6], 3, 2, DType::F32, Scope::Pass).unwrap();
        let (gp, gq) = (generation(Scope::Pass), generation(Scope::Persistent));
        assert_eq!(s.mem(Scope::Pass).n_buffers, 1);
        s.reset(&[Scope::Pass], None).unwrap();
        assert_eq!(generation(Scope::Pass), gp + 1);
        assert_eq!(generation(Scope::Persistent), gq);
        assert_eq!(s.mem(Scope::Pass), PoolMem::default());
        assert_eq!(crate::tensor::io::get_values(&w, 0, None).unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        let e = crate::tensor::io::get_values(&a, 0, None).unwrap_err().to_string();
        assert!(e.contains("pass pool"), "{e}");
        assert!(e.contains(&format!("generation {gp}")), "{e}");
        assert!(e.contains(&format!("now at generation {}", gp + 1)), "{e}");
        s.reset(&[Scope::Persistent], None).unwrap();
        assert!(crate::tensor::io::get_values(&w, 0, None).is_err());
        assert_eq!(generation(Scope::Pass), gp + 1);
    }

    #[test]
    fn rollover_keeps_old_contexts() {
        let _g = serial();
        let mut s = fresh();
        s.reset(&Scope::BOTH, Some((2 * TENSOR_OVERHEAD) as f64 / (1024.0 * 1024.0))).unwrap();
        let gen = generation(Scope::Pass);
        let c1 = s.ctx_ensure(1, Scope::Pass).unwrap();
        let t1 = c1.new_tensor(DType::F32, &[2]).unwrap();
        let t2 = c1.new_tensor(DType::F32, &[2]).unwrap();
        s.ctx_flush(&c1, Scope::Pass).unwrap();
        assert!(s.ctx_flush(&c1, Scope::Pass).unwrap().is_none(), "nothing left to allocate");
        let c2 = s.ctx_ensure(1, Scope::Pass).unwrap();
        assert!(!Arc::ptr_eq(&c1, &c2));
        assert_eq!(s.mem(Scope::Pass).n_contexts, 2);
        assert_eq!(generation(Scope::Pass), gen);
        crate::tensor::io::set_values(&t1, &[1.0, 2.0], 0).unwrap();
        assert_eq!(crate::tensor::io::get_values(&t2, 0, None).unwrap(), vec![0.0, 0.0]);
        assert!(Arc::ptr_eq(&s.ctx_ensure(1, Scope::Pass).unwrap(), &c2));
        s.reset(&Scope::BOTH, Some(1.0)).unwrap();
    }

    #[test]
    fn budget_refuses_before_creating_anything() {
        let _g = serial();
        let mut s = fresh();
        s.upload_matrix(&[0.0; 64], 8, 8, DType::F32, Scope::Persistent).unwrap();
        let used = ledger::stats().total_bytes();
        let old = ledger::set_limit((used + 16) as f64).unwrap();
        let before = s.mem(Scope::Pass);
        let e = s.upload_matrix(&[0.0; 64], 8, 8, DType::F32, Scope::Pass);
        ledger::set_limit(old).unwrap();
        assert!(e.unwrap_err().to_string().contains("budget exceeded"));
        assert_eq!(s.mem(Scope::Pass), before, "no context or buffer was created");
        s.reset(&Scope::BOTH, None).unwrap();
    }

    /// A tensor uploaded with `Hold::Handles` is counted by the pool while
    /// it lives, and dropping its last handle gives its bytes back to the
    /// ledger; a reset still frees one that is alive (a stale-handle error).
    #[test]
    fn held_uploads_are_freed_with_their_last_handle() {
        let _g = serial();
        let mut s = fresh();
        let base = ledger::stats().bytes_of(BufferTag::Persistent);
        let kept = s.upload_matrix(&[1.0; 16], 4, 4, DType::F32, Scope::Persistent).unwrap();
        let with_kept = ledger::stats().bytes_of(BufferTag::Persistent);
        let w: Vec<Arc<Tensor>> =
            (0..3).map(|i| s.upload_held(&[i as f64; 64], 8, 8, DType::F32, Scope::Persistent, Hold::Handles).unwrap()).collect();
        assert_eq!(s.mem(Scope::Persistent).n_buffers, 4);
        assert_eq!(ledger::stats().bytes_of(BufferTag::Persistent), with_kept + 3 * 256);
        assert_eq!(crate::tensor::io::get_values(&w[2], 0, None).unwrap(), vec![2.0; 64]);
        drop(w);
        assert_eq!(ledger::stats().bytes_of(BufferTag::Persistent), with_kept, "the three held buffers are freed");
        let m = s.mem(Scope::Persistent);
        assert_eq!((m.n_buffers, m.buffer_bytes), (1, (with_kept - base) as f64));
        assert_eq!(crate::tensor::io::get_values(&kept, 0, None).unwrap(), vec![1.0; 16], "the pool keeps its own");
        let alive = s.upload_held(&[3.0; 4], 2, 2, DType::F32, Scope::Persistent, Hold::Handles).unwrap();
        s.reset(&[Scope::Persistent], None).unwrap();
        let e = crate::tensor::io::get_values(&alive, 0, None).unwrap_err().to_string();
        assert!(e.contains("persistent pool"), "{e}");
        assert_eq!(ledger::stats().bytes_of(BufferTag::Persistent), base);
        s.reset(&Scope::BOTH, None).unwrap();
    }

    #[test]
    fn flush_needs_a_backend() {
        let _g = serial();
        let mut s = fresh();
        s.set_backend(None);
        let c = s.ctx_ensure(1, Scope::Pass).unwrap();
        c.new_tensor(DType::F32, &[2]).unwrap();
        let e = s.ctx_flush(&c, Scope::Pass).unwrap_err().to_string();
        assert!(e.contains("no compute backend"), "{e}");
        s.reset(&Scope::BOTH, None).unwrap();
    }
}
