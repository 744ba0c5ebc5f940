//! The two places computations run (see [`Place`]) and moving values into
//! them: the backend of each, its compute type, memory for new tensors, and
//! uploads of host values and of values held by the other place.
//!
//! Device "cpu" is the host CPU backend (`backend::host()`, the one
//! `ggml_graph_compute()` uses, with its thread count) in f64. Its tensors
//! get a buffer each (tag `cpu`), so a value's memory is free as soon as the
//! last tensor aliasing it goes, as R's own matrices are; buffers of the
//! sizes in use are kept for reuse (a training step then reuses the memory
//! of the previous one: see [`Spare`]). Device "gpu" is the
//! residency backend in f32 (f16 or bf16 parameters are read as f32).

use super::value::{HostMat, Place, Storage, EngineVal};
use crate::backend::{self, Backend};
use crate::base::dtype::DType;
use crate::memory::{Buffer, BufferTag};
use crate::residency::{self, Scope};
use crate::tensor::{Context, DataSlot, Tensor as ETensor, TENSOR_OVERHEAD};
use anyhow::{anyhow, Result};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

impl Place {
    /// The backend computing in this place (an error when "gpu" has none).
    pub fn backend(self) -> Result<Arc<Backend>> {
        match self {
            Place::Cpu => Ok(backend::host().clone()),
            Place::Pools => residency::state().backend().cloned().ok_or_else(no_backend),
        }
    }

    /// The type values are computed in.
    pub fn dtype(self) -> DType {
        match self {
            Place::Cpu => DType::F64,
            Place::Pools => DType::F32,
        }
    }

    /// The place of an op's inputs: the pools when asked for (`on_device`)
    /// or when an input is there, else the CPU.
    pub fn of_inputs<'a>(on_device: bool, mut inputs: impl Iterator<Item = &'a Storage>) -> Place {
        if on_device || inputs.any(|s| s.in_pools()) {
            Place::Pools
        } else {
            Place::Cpu
        }
    }
}

pub(crate) fn no_backend() -> anyhow::Error {
    anyhow!(
        "no compute backend is installed for the device: call ag_device(\"gpu\") \
         (it installs the best backend) before computing on \"gpu\""
    )
}

/// Device-"cpu" buffers kept for reuse: of each size at most this many...
const SPARE_PER_SIZE: usize = 128;
/// ...none larger than this...
const SPARE_LARGEST: usize = 512 << 20;
/// ...and at most this many bytes in all (less under a memory budget: see
/// [`spare_cap`]).
const SPARE_BYTES: usize = 2 << 30;

/// The bytes of kept buffers allowed: [`SPARE_BYTES`], or a quarter of the
/// memory budget when one is set (`ag_memory_limit()`), so that what
/// is kept never crowds out what the budget is for.
fn spare_cap() -> usize {
    let limit = crate::memory::ledger::limit();
    if limit.is_finite() {
        ((limit / 4.0) as usize).min(SPARE_BYTES)
    } else {
        SPARE_BYTES
    }
}

/// Buffers of device-"cpu" tensors, by size, kept so that a tensor of a
/// size seen before reuses the buffer of one that is gone (nothing but this
/// list holds it): the arena of a training loop. Each step builds the same
/// graphs with the same sizes, so it takes the memory of the previous step
/// instead of allocating fresh pages (and faulting them in) again; a
/// kernel overwrites every element of its result, so nothing is cleared.
/// The ledger counts kept buffers as allocated; they are freed when an
/// allocation would exceed the budget, and the whole list never holds more
/// than [`spare_cap`].
#[derive(Default)]
struct Spare {
    by_size: HashMap<usize, Vec<Arc<Buffer>>>,
    bytes: usize,
}

thread_local! {
    static SPARE: RefCell<Spare> = RefCell::new(Spare::default());
}

fn unused(b: &Arc<Buffer>) -> bool {
    Arc::strong_count(b) == 1
}

impl Spare {
    fn take(&self, bytes: usize) -> Option<Arc<Buffer>> {
        self.by_size.get(&bytes)?.iter().find(|b| unused(b)).cloned()
    }

    /// Frees every kept buffer nothing else holds; returns whether any was.
    fn release_unused(&mut self) -> bool {
        let before = self.bytes;
        for list in self.by_size.values_mut() {
            list.retain(|b| !unused(b));
        }
        self.by_size.retain(|_, l| !l.is_empty());
        self.bytes = self.by_size.values().flatten().map(|b| b.size()).sum();
        self.bytes < before
    }

    fn keep(&mut self, b: &Arc<Buffer>) {
        let n = b.size();
        let cap = spare_cap();
        if n > SPARE_LARGEST || n > cap {
            return;
        }
        if self.bytes + n > cap {
            self.release_unused();
        }
        let list = self.by_size.entry(n).or_default();
        if list.len() < SPARE_PER_SIZE && self.bytes + n <= cap {
            list.push(b.clone());
            self.bytes += n;
        }
    }
}

/// A buffer of `bytes` for a device-"cpu" tensor: a kept one of that size
/// that nothing uses any more (the kernel computing the tensor, or an
/// upload, overwrites its old values), else a new one.
fn cpu_buffer(bytes: usize) -> Result<Arc<Buffer>> {
    if let Some(b) = SPARE.with(|s| s.borrow().take(bytes)) {
        return Ok(b);
    }
    let host = backend::host().as_ref();
    let buf = match Buffer::allocate(host, bytes, BufferTag::Cpu) {
        Ok(b) => b,
        // The kept buffers may be what the budget is missing.
        Err(_) if SPARE.with(|s| s.borrow_mut().release_unused()) => Buffer::allocate(host, bytes, BufferTag::Cpu)?,
        Err(e) => return Err(e),
    };
    let buf = Arc::new(buf);
    SPARE.with(|s| s.borrow_mut().keep(&buf));
    Ok(buf)
}

/// Frees the kept device-"cpu" buffers nothing uses (for tests).
pub fn release_spare_buffers() {
    SPARE.with(|s| s.borrow_mut().release_unused());
}

/// Gives `t` (a tensor of a device-"cpu" graph) a buffer of its own on the
/// host backend, unless it has memory or is a view.
pub(crate) fn cpu_alloc(t: &ETensor) -> Result<()> {
    if t.view_base().is_some() || t.has_data() {
        return Ok(());
    }
    t.set_storage(DataSlot { buf: cpu_buffer(t.nbytes().max(1))?, offset: 0 });
    Ok(())
}

/// A new f64 tensor `[rows, cols]` on the host backend holding `m`.
fn cpu_upload(m: &HostMat) -> Result<EngineVal> {
    let ctx = Context::new(TENSOR_OVERHEAD, true)?;
    let t = ctx.new_tensor(DType::F64, &[m.rows, m.cols])?;
    cpu_alloc(&t)?;
    crate::tensor::io::set_values(&t, &m.data, 0)?;
    Ok(EngineVal::new(t, m.rows, m.cols, Place::Cpu))
}

/// Uploads `m` into `place`: the CPU in f64, or a new tensor of the pool
/// `scope` as `dtype` (f32, or f16 / bf16 for weights stored in half
/// precision; products and activations are computed in f32).
pub fn upload(m: &HostMat, place: Place, scope: Scope, dtype: DType) -> Result<EngineVal> {
    match place {
        Place::Cpu => cpu_upload(m),
        Place::Pools => {
            let t = residency::state().upload_matrix(&m.data, m.rows, m.cols, dtype, scope)?;
            Ok(EngineVal::new(t, m.rows, m.cols, Place::Pools))
        }
    }
}

/// The host values of `s`: borrowed when it holds them, else read from
/// its backend (see [`EngineVal::download`]).
pub fn host_values(s: &Storage) -> Result<std::borrow::Cow<'_, HostMat>> {
    use std::borrow::Cow;
    match s {
        Storage::Host(m) => Ok(Cow::Borrowed(m)),
        Storage::Engine(v) => Ok(Cow::Owned(v.download()?)),
    }
}

/// `s` as an engine value in `place`: itself when it is there, else
/// uploaded (a host value, or one held by the other place, moves into the
/// pass pool or onto the CPU).
pub fn to_place(s: &Storage, place: Place) -> Result<EngineVal> {
    match s {
        Storage::Engine(v) if v.place == place => Ok(v.clone()),
        _ => upload(&*host_values(s)?, place, Scope::Pass, DType::F32),
    }
}
