//! Where a tensor's value lives, and the tensor cell the tape refers to.
//!
//! A value is a [`Storage`] behind an `Rc`: ops and the tape share values
//! without copying, and an optimizer updates a weight in place
//! (`Rc::make_mut`) once the tape that read it has been consumed.
//!
//! `Storage::Host` is f64 on the host (device "cpu"); `Storage::Device` an
//! engine tensor in a residency pool (device "gpu", see `device.rs`). Ops
//! match on the storage of their inputs, so the R API and the tape are the
//! same for both.

use super::device::Dev;
use super::mat::Mat;
use anyhow::{bail, Result};
use std::cell::{Ref, RefCell};
use std::rc::Rc;

#[derive(Clone, Debug)]
pub enum Storage {
    /// Double precision on the host, column-major.
    Host(Mat),
    /// An engine tensor in a residency pool (f32, column-major `[rows, cols]`).
    Device(Dev),
}

impl Storage {
    /// The host matrix of this value.
    pub fn host(&self) -> Result<&Mat> {
        match self {
            Storage::Host(m) => Ok(m),
            Storage::Device(_) => bail!("internal: this value is on the device; download it first"),
        }
    }
    pub fn host_mut(&mut self) -> Result<&mut Mat> {
        match self {
            Storage::Host(m) => Ok(m),
            Storage::Device(_) => bail!("internal: this value is on the device; update it with a graph"),
        }
    }
    /// The value as a host matrix: a copy, downloaded when on the device.
    pub fn to_host(&self) -> Result<Mat> {
        match self {
            Storage::Host(m) => Ok(m.clone()),
            Storage::Device(d) => d.download(),
        }
    }
    /// The value on the host: borrowed when it is there, else downloaded.
    pub fn host_view(&self) -> Result<std::borrow::Cow<'_, Mat>> {
        match self {
            Storage::Host(m) => Ok(std::borrow::Cow::Borrowed(m)),
            Storage::Device(d) => Ok(std::borrow::Cow::Owned(d.download()?)),
        }
    }
    pub fn device(&self) -> Option<&Dev> {
        match self {
            Storage::Device(d) => Some(d),
            Storage::Host(_) => None,
        }
    }
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Storage::Host(m) => (m.rows, m.cols),
            Storage::Device(d) => (d.rows, d.cols),
        }
    }
}

pub type Value = Rc<Storage>;

/// A tensor as the engine sees it: an id (shared with the R object), its
/// current value and its accumulated gradient.
#[derive(Debug)]
pub struct Tensor {
    pub id: u64,
    value: RefCell<Value>,
    grad: RefCell<Option<Mat>>,
}

pub type TensorRef = Rc<Tensor>;

impl Tensor {
    pub fn new(id: u64, m: Mat) -> TensorRef {
        Rc::new(Tensor { id, value: RefCell::new(Rc::new(Storage::Host(m))), grad: RefCell::new(None) })
    }
    pub fn with_storage(id: u64, s: Storage) -> TensorRef {
        Rc::new(Tensor { id, value: RefCell::new(Rc::new(s)), grad: RefCell::new(None) })
    }
    /// The current value (shared, not copied).
    pub fn value(&self) -> Value {
        self.value.borrow().clone()
    }
    pub fn shape(&self) -> (usize, usize) {
        self.value.borrow().shape()
    }
    /// Replaces the value (values already saved by a tape keep the old one).
    pub fn set_value(&self, m: Mat) {
        *self.value.borrow_mut() = Rc::new(Storage::Host(m));
    }
    /// Replaces the value with another storage (e.g. its device copy).
    pub fn set_storage(&self, s: Storage) {
        *self.value.borrow_mut() = Rc::new(s);
    }
    /// Updates the value in place; copies first only when a tape still shares it.
    pub fn update_host(&self, f: impl FnOnce(&mut Mat) -> Result<()>) -> Result<()> {
        let mut v = self.value.borrow_mut();
        f(Rc::make_mut(&mut v).host_mut()?)
    }
    pub fn grad(&self) -> Ref<'_, Option<Mat>> {
        self.grad.borrow()
    }
    pub fn set_grad(&self, g: Option<Mat>) {
        *self.grad.borrow_mut() = g;
    }
    /// Adds `g` to the accumulated gradient.
    pub fn accumulate_grad(&self, g: &Mat) {
        let mut cur = self.grad.borrow_mut();
        match cur.as_mut() {
            Some(c) if c.same_shape(g) => c.add_assign(g),
            _ => *cur = Some(g.clone()),
        }
    }
}
