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
use std::cell::RefCell;
use std::rc::{Rc, Weak};

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

/// A gradient: a value on the host or, on the device, in the pass pool.
/// Cells made by [`grad_cell`] are known to [`rescue_device_grads`], which
/// copies them to the host before the pass pool is reset.
pub type GradCell = Rc<RefCell<Storage>>;

thread_local! {
    static DEVICE_GRADS: RefCell<Vec<Weak<RefCell<Storage>>>> = const { RefCell::new(Vec::new()) };
}

/// A gradient cell holding `s` (registered for rescue when on the device).
pub fn grad_cell(s: Storage) -> GradCell {
    let on_dev = s.device().is_some();
    let c = Rc::new(RefCell::new(s));
    if on_dev {
        DEVICE_GRADS.with(|r| {
            let mut r = r.borrow_mut();
            r.retain(|w| w.strong_count() > 0);
            r.push(Rc::downgrade(&c));
        });
    }
    c
}

/// Replaces the value of a gradient cell (registering it when it moves to the device).
pub fn set_cell(c: &GradCell, s: Storage) {
    let on_dev = s.device().is_some();
    *c.borrow_mut() = s;
    if on_dev {
        DEVICE_GRADS.with(|r| r.borrow_mut().push(Rc::downgrade(c)));
    }
}

/// Copies every device gradient still referenced (by a tensor or a gradient
/// store) whose memory is in a pool tagged `tags` to the host. Called
/// before such a pool is freed; returns how many were copied.
pub fn rescue_device_grads(tags: &[crate::memory::BufferTag]) -> Result<usize> {
    let cells: Vec<GradCell> = DEVICE_GRADS.with(|r| {
        let mut r = r.borrow_mut();
        r.retain(|w| w.strong_count() > 0);
        r.iter().filter_map(Weak::upgrade).collect()
    });
    let mut n = 0;
    for c in &cells {
        let host = match &*c.borrow() {
            Storage::Device(d) => match d.t.resolve() {
                Ok(r) if tags.contains(&r.buf.tag()) => Some(d.download()?),
                _ => None,
            },
            Storage::Host(_) => None,
        };
        if let Some(m) = host {
            *c.borrow_mut() = Storage::Host(m);
            n += 1;
        }
    }
    DEVICE_GRADS.with(|r| {
        r.borrow_mut().retain(|w| w.upgrade().is_some_and(|c| c.borrow().device().is_some()))
    });
    Ok(n)
}

/// A tensor as the engine sees it: an id (shared with the R object), its
/// current value and its accumulated gradient.
#[derive(Debug)]
pub struct Tensor {
    pub id: u64,
    value: RefCell<Value>,
    grad: RefCell<Option<GradCell>>,
}

pub type TensorRef = Rc<Tensor>;

impl Tensor {
    pub fn new(id: u64, m: Mat) -> TensorRef {
        Tensor::with_storage(id, Storage::Host(m))
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
    /// The accumulated gradient as it is stored (host or device).
    pub fn grad_storage(&self) -> Option<Storage> {
        self.grad.borrow().as_ref().map(|c| c.borrow().clone())
    }
    /// The accumulated gradient on the host (downloaded when on the device).
    pub fn grad(&self) -> Result<Option<Mat>> {
        self.grad_storage().map(|s| s.to_host()).transpose()
    }
    pub fn set_grad(&self, g: Option<Mat>) {
        self.set_grad_storage(g.map(Storage::Host));
    }
    pub fn set_grad_storage(&self, g: Option<Storage>) {
        *self.grad.borrow_mut() = g.map(grad_cell);
    }
    /// Adds the host gradient `g` to the accumulated gradient.
    pub fn accumulate_grad(&self, g: &Mat) -> Result<()> {
        let cur = match self.grad_storage() {
            Some(Storage::Host(mut c)) if c.same_shape(g) => {
                c.add_assign(g);
                c
            }
            Some(s @ Storage::Device(_)) => {
                let mut c = s.to_host()?;
                if c.same_shape(g) {
                    c.add_assign(g);
                    c
                } else {
                    g.clone()
                }
            }
            _ => g.clone(),
        };
        self.set_grad(Some(cur));
        Ok(())
    }
}
