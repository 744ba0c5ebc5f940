//! Where a tensor's value lives, and the tensor cell the tape refers to.
//!
//! A value is a [`Storage`] behind an `Rc`: ops and the tape share values
//! without copying, and an optimizer updates a weight in place
//! (`Rc::make_mut`) once the tape that read it has been consumed.
//!
//! Today every value is `Storage::Host` (f64 on the host): device "cpu", and
//! device "gpu" as its fallback until the device path lands. The device
//! variant (a handle into a residency pool: weights in the persistent pool,
//! activations and gradients in the pass pool) joins this enum; ops match on
//! the storage of their inputs, so the R API and the tape do not change.

use super::mat::Mat;
use anyhow::Result;
use std::cell::{Ref, RefCell};
use std::rc::Rc;

#[derive(Clone, Debug)]
pub enum Storage {
    /// Double precision on the host, column-major.
    Host(Mat),
}

impl Storage {
    /// The host matrix of this value.
    pub fn host(&self) -> Result<&Mat> {
        match self {
            Storage::Host(m) => Ok(m),
        }
    }
    pub fn host_mut(&mut self) -> Result<&mut Mat> {
        match self {
            Storage::Host(m) => Ok(m),
        }
    }
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Storage::Host(m) => (m.rows, m.cols),
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
