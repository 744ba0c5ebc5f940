//! Where a tensor's value lives, and the tensor cell the tape refers to.
//!
//! A value is a [`Storage`] behind an `Rc`: ops and the tape share values
//! without copying. `Storage::Host` holds values given by R that no op has
//! used yet; `Storage::Engine` an engine tensor ([`EngineVal`]) in one of the two
//! places computations run ([`Place`]): the host CPU backend in f64 (device
//! "cpu") or the residency pools on the residency backend (device "gpu").
//! Ops look at their inputs' storage, so the R API and the tape are the same
//! for both.

use super::rescue::{self, Rescue};
use crate::memory::BufferTag;
use crate::residency::Scope;
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// A column-major `rows x cols` matrix of f64: element (i, j) is
/// `data[i + j * rows]`, exactly as R stores a numeric matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct HostMat {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

impl HostMat {
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<HostMat> {
        if rows.checked_mul(cols) != Some(data.len()) {
            bail!(
                "a {rows}x{cols} matrix needs {} values, got {}",
                rows.saturating_mul(cols),
                data.len()
            );
        }
        Ok(HostMat { rows, cols, data })
    }
    /// Sizes come from the user's tensors: a refused allocation unwinds
    /// (`base::alloc::Refused`) to the binding, which reports it as an error.
    pub fn filled(rows: usize, cols: usize, v: f64) -> HostMat {
        let data = crate::base::alloc::try_vec(rows.saturating_mul(cols), v, "an autograd matrix");
        HostMat { rows, cols, data: crate::base::alloc::or_unwind(data) }
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

/// Where computations run: device "cpu" is the host CPU backend in f64
/// (each tensor in a buffer of its own, tagged `cpu`); device "gpu" the
/// residency backend in f32 (activations and gradients in the pass pool,
/// parameters and moments in the persistent pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Cpu,
    Pools,
}

/// A value held by a backend: an engine tensor `[rows, cols]` (an autograd
/// matrix is a ggml tensor with `ne = [rows, cols]`: rows vary fastest).
#[derive(Debug, Clone)]
pub struct EngineVal {
    pub t: Arc<ETensor>,
    pub rows: usize,
    pub cols: usize,
    pub place: Place,
}

impl EngineVal {
    pub fn new(t: Arc<ETensor>, rows: usize, cols: usize, place: Place) -> EngineVal {
        EngineVal { t, rows, cols, place }
    }
    /// The value, read to the host: from a pool, a download; a device
    /// "cpu" value is host memory already and is read in place.
    pub fn download(&self) -> Result<HostMat> {
        if self.place == Place::Pools {
            let v = crate::tensor::io::get_values(&self.t, 0, Some(self.len()))?;
            return HostMat::new(self.rows, self.cols, v);
        }
        let r = self.t.resolve()?;
        let g = r.buf.read("a device \"cpu\" value")?;
        let Some(bytes) = g.host_bytes() else { bail!("internal: a device \"cpu\" value is not in host memory") };
        if r.layout.is_contiguous() {
            let es = r.layout.dtype.size();
            let Some(b) = bytes.get(r.offset..r.offset + self.len() * es) else { bail!("internal: a device \"cpu\" value overruns its buffer") };
            return HostMat::new(self.rows, self.cols, crate::layout::convert::decode_all(r.layout.dtype, b));
        }
        let mut data = Vec::with_capacity(self.len());
        crate::layout::walk::for_each_offset(&r.layout, r.offset, |_, o| {
            data.push(crate::layout::convert::decode::<f64>(r.layout.dtype, bytes, o))
        });
        HostMat::new(self.rows, self.cols, data)
    }
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The residency pool the value's memory is in, if any (None for a
    /// freed buffer too).
    pub fn pool(&self) -> Option<Scope> {
        let tag = self.t.resolve().ok()?.buf.tag();
        Scope::of_tag(tag)
    }
    /// Whether another holder (a tape's node) refers to this tensor.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.t) > 1
    }
    /// Whether the value's memory is a buffer tagged `tag`.
    pub fn is_in(&self, tag: BufferTag) -> bool {
        self.t.resolve().is_ok_and(|r| r.buf.tag() == tag)
    }
}

#[derive(Clone, Debug)]
pub enum Storage {
    /// Values given by R (f64, column-major), on no backend yet.
    Host(HostMat),
    /// An engine tensor.
    Engine(EngineVal),
}

impl Storage {
    /// The value as a host matrix: a copy, read from the backend when there.
    pub fn to_host(&self) -> Result<HostMat> {
        match self {
            Storage::Host(m) => Ok(m.clone()),
            Storage::Engine(v) => v.download(),
        }
    }
    pub fn engine(&self) -> Option<&EngineVal> {
        match self {
            Storage::Engine(v) => Some(v),
            Storage::Host(_) => None,
        }
    }
    pub fn host(&self) -> Option<&HostMat> {
        match self {
            Storage::Host(m) => Some(m),
            Storage::Engine(_) => None,
        }
    }
    /// True when the value is an engine tensor in a residency pool.
    pub fn in_pools(&self) -> bool {
        matches!(self, Storage::Engine(v) if v.place == Place::Pools)
    }
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Storage::Host(m) => m.shape(),
            Storage::Engine(v) => v.shape(),
        }
    }
}

pub type ValueRef = Rc<Storage>;

/// A gradient cell. Cells holding values in a pool are known to the rescue
/// registry, which copies them to the host before that pool is reset.
pub type GradCell = Rc<RefCell<Storage>>;

impl Rescue for RefCell<Storage> {
    fn rescue(&self, scopes: &[Scope]) -> Result<bool> {
        let host = match &*self.borrow() {
            Storage::Engine(v) => match v.pool() {
                Some(s) if scopes.contains(&s) => Some(v.download()?),
                Some(_) => return Ok(true),
                None => None,
            },
            Storage::Host(_) => None,
        };
        if let Some(m) = host {
            *self.borrow_mut() = Storage::Host(m);
        }
        Ok(false)
    }
}

fn register(c: &GradCell) {
    if c.borrow().in_pools() {
        let r: Rc<dyn Rescue> = c.clone();
        rescue::register_weak(&r);
    }
}

/// A gradient cell holding `s` (registered for rescue when in a pool).
pub fn grad_cell(s: Storage) -> GradCell {
    let c = Rc::new(RefCell::new(s));
    register(&c);
    c
}

/// Replaces the value of a gradient cell (registering it when it moves to a pool).
pub fn set_cell(c: &GradCell, s: Storage) {
    *c.borrow_mut() = s;
    register(c);
}

/// A tensor as the engine sees it: an id (shared with the R object), its
/// current value and its accumulated gradient.
#[derive(Debug)]
pub struct AgTensor {
    pub id: u64,
    value: RefCell<ValueRef>,
    grad: RefCell<Option<GradCell>>,
}

pub type AgTensorRef = Rc<AgTensor>;

impl AgTensor {
    pub fn new(id: u64, m: HostMat) -> AgTensorRef {
        AgTensor::with_storage(id, Storage::Host(m))
    }
    pub fn with_storage(id: u64, s: Storage) -> AgTensorRef {
        Rc::new(AgTensor { id, value: RefCell::new(Rc::new(s)), grad: RefCell::new(None) })
    }
    /// The current value (shared, not copied).
    pub fn value(&self) -> ValueRef {
        self.value.borrow().clone()
    }
    pub fn shape(&self) -> (usize, usize) {
        self.value.borrow().shape()
    }
    /// Replaces the value (values already saved by a tape keep the old one).
    pub fn set_value(&self, m: HostMat) {
        self.set_storage(Storage::Host(m));
    }
    /// Replaces the value with another storage (e.g. its copy on a backend).
    pub fn set_storage(&self, s: Storage) {
        *self.value.borrow_mut() = Rc::new(s);
    }
    /// The accumulated gradient as it is stored.
    pub fn grad_storage(&self) -> Option<Storage> {
        self.grad.borrow().as_ref().map(|c| c.borrow().clone())
    }
    /// The accumulated gradient on the host (read from its backend).
    pub fn grad(&self) -> Result<Option<HostMat>> {
        self.grad_storage().map(|s| s.to_host()).transpose()
    }
    pub fn set_grad(&self, g: Option<HostMat>) {
        self.set_grad_storage(g.map(Storage::Host));
    }
    pub fn set_grad_storage(&self, g: Option<Storage>) {
        *self.grad.borrow_mut() = g.map(grad_cell);
    }
    /// Drops the value (and the gradient), keeping the shape: the value
    /// becomes a tensor of context `c` without memory, so that a later read
    /// or op fails with an error naming it instead of reading anything.
    pub fn release(&self, c: &crate::tensor::Context) -> Result<()> {
        let (rows, cols) = self.shape();
        let place = self.value.borrow().engine().map_or(Place::Cpu, |v| v.place);
        let t = c.new_tensor(crate::base::dtype::DType::F32, &[rows, cols])?;
        t.set_name("a value released at the end of its training step");
        self.set_storage(Storage::Engine(EngineVal::new(t, rows, cols, place)));
        *self.grad.borrow_mut() = None;
        Ok(())
    }
}
