//! Values of a graph while it is planned: constants known on the host
//! (initializers, folded results, shapes) or tensors of the engine graph
//! being built.

use super::elem::Elem;
use super::host::{fmt_shape, HTensor};
use super::init::Init;
use crate::tensor::Tensor;
use std::sync::{Arc, OnceLock};

/// What a constant depends on, from least to most: only the model
/// (`Static`: kept in the persistent pool across plans), the bound input
/// shapes (`Shape`: kept with a plan), or input data (`Data`: a plan that
/// holds one is made again for every run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Taint {
    Static,
    Shape,
    Data,
}

#[derive(Debug)]
enum Src {
    Init(Arc<Init>),
    Host(Arc<HTensor>),
}

/// A constant value.
#[derive(Debug)]
pub struct Const {
    src: Src,
    host: OnceLock<Arc<HTensor>>,
    pub taint: Taint,
    /// For `Static` constants: the key of its uploads in the persistent pool.
    pub key: Option<String>,
}

impl Const {
    pub fn init(i: Arc<Init>) -> Const {
        let key = Some(format!("init:{}", i.name));
        Const { src: Src::Init(i), host: OnceLock::new(), taint: Taint::Static, key }
    }

    pub fn host(t: HTensor, taint: Taint, key: Option<String>) -> Const {
        let key = if taint == Taint::Static { key } else { None };
        Const { src: Src::Host(Arc::new(t)), host: OnceLock::new(), taint, key }
    }

    pub fn shape(&self) -> &[usize] {
        match &self.src {
            Src::Init(i) => &i.shape,
            Src::Host(t) => &t.shape,
        }
    }

    pub fn elem(&self) -> Elem {
        match &self.src {
            Src::Init(i) => i.elem,
            Src::Host(t) => t.elem,
        }
    }

    /// The values as a host tensor (decoded once for initializers).
    pub fn value(&self) -> crate::Result<Arc<HTensor>> {
        match &self.src {
            Src::Host(t) => Ok(t.clone()),
            Src::Init(i) => {
                if let Some(t) = self.host.get() {
                    return Ok(t.clone());
                }
                let t = Arc::new(i.to_host()?);
                Ok(self.host.get_or_init(|| t).clone())
            }
        }
    }

    /// The values as f32, row-major (for uploads).
    pub fn f32s(&self) -> crate::Result<Vec<f32>> {
        match &self.src {
            Src::Init(i) => i.to_f32(),
            Src::Host(t) => Ok(t.f64s().iter().map(|&x| x as f32).collect()),
        }
    }
}

/// A tensor of the engine graph: an engine tensor whose elements, in ggml
/// order (ne0 fastest, strides allowed), are the ONNX tensor's in row-major
/// order, with `shape` its ONNX shape and `elem` its ONNX element type
/// (computed in f32 whatever it is).
#[derive(Debug, Clone)]
pub struct Dev {
    pub t: Arc<Tensor>,
    pub shape: Vec<usize>,
    pub elem: Elem,
}

#[derive(Debug, Clone)]
pub enum Val {
    C(Arc<Const>),
    D(Dev),
}

impl Val {
    pub fn shape(&self) -> &[usize] {
        match self {
            Val::C(c) => c.shape(),
            Val::D(d) => &d.shape,
        }
    }

    pub fn elem(&self) -> Elem {
        match self {
            Val::C(c) => c.elem(),
            Val::D(d) => d.elem,
        }
    }

    pub fn konst(&self) -> Option<&Arc<Const>> {
        match self {
            Val::C(c) => Some(c),
            Val::D(_) => None,
        }
    }

    pub fn describe(&self) -> String {
        let kind = if matches!(self, Val::C(_)) { "constant " } else { "" };
        format!("{kind}{} tensor of shape {}", self.elem().name(), fmt_shape(self.shape()))
    }

    pub fn c(t: HTensor, taint: Taint) -> Val {
        Val::C(Arc::new(Const::host(t, taint, None)))
    }
}
