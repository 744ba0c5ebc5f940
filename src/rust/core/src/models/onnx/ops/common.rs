//! What every operator family's file shares: the signatures of the engine
//! mapping and the host evaluation, and helpers for inputs, axes and keys.

use crate::models::onnx::builder::Builder;
use crate::models::onnx::dev::ne_of;
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::HTensor;
use crate::models::onnx::plan::{NeedsData, Planner};
use crate::models::onnx::val::{Const, Dev, Taint, Val};
use crate::base::dtype::DType;
use anyhow::{bail, ensure};
use std::sync::Arc;

pub use crate::models::onnx::plan::{Fold, Lower};

/// Input `i` (required).
pub fn arg<'a>(ins: &'a [Option<Val>], i: usize, what: &str) -> crate::Result<&'a Val> {
    match ins.get(i) {
        Some(Some(v)) => Ok(v),
        _ => bail!("its input {} ({what}) is missing", i + 1),
    }
}

/// Input `i`, if given.
pub fn opt(ins: &[Option<Val>], i: usize) -> Option<&Val> {
    ins.get(i).and_then(|v| v.as_ref())
}

/// Host input `i` (required).
pub fn harg<'a>(ins: &'a [Option<Arc<HTensor>>], i: usize, what: &str) -> crate::Result<&'a HTensor> {
    match ins.get(i) {
        Some(Some(v)) => Ok(v),
        _ => bail!("its input {} ({what}) is missing", i + 1),
    }
}

pub fn hopt(ins: &[Option<Arc<HTensor>>], i: usize) -> Option<&HTensor> {
    ins.get(i).and_then(|v| v.as_deref())
}

/// A lowering's result: one engine tensor.
pub fn one(d: Dev) -> crate::Result<Vec<Val>> {
    Ok(vec![Val::D(d)])
}

impl Planner {
    /// The value of `v` as a host tensor: a constant's, or a computed
    /// tensor's values (which needs input data; the plan then holds a
    /// data-dependent constant).
    pub fn value_of(&mut self, v: &Val, what: &str) -> crate::Result<Arc<HTensor>> {
        match v {
            Val::C(c) => c.value(),
            Val::D(d) => {
                if !self.has_data {
                    return Err(NeedsData { node: format!("the {what}, computed from the inputs' values,") }.into());
                }
                self.materialize(std::slice::from_ref(d))?;
                self.taint = Taint::Data;
                Ok(Arc::new(crate::models::onnx::plan::download(d)?))
            }
        }
    }

    /// The taint of a value (tensors count as data).
    pub fn taint_of(v: &Val) -> Taint {
        match v {
            Val::C(c) => c.taint,
            Val::D(_) => Taint::Data,
        }
    }

    /// Integer values of input `v` (shapes, axes, pads...).
    pub fn ints_of(&mut self, v: &Val, what: &str) -> crate::Result<Vec<i64>> {
        Ok(self.value_of(v, what)?.i64s().to_vec())
    }

    pub fn floats_of(&mut self, v: &Val, what: &str) -> crate::Result<Vec<f64>> {
        Ok(self.value_of(v, what)?.f64s().to_vec())
    }

    /// `v` as an engine tensor (a constant is uploaded).
    pub fn dev(&mut self, v: &Val) -> crate::Result<Dev> {
        match v {
            Val::D(d) => Ok(d.clone()),
            Val::C(c) => {
                let t = self.upload(c, DType::F32)?;
                Ok(Dev { t, shape: c.shape().to_vec(), elem: c.elem() })
            }
        }
    }

    /// A constant uploaded in canonical layout as `dtype`.
    pub fn upload(&mut self, c: &Const, dtype: DType) -> crate::Result<Arc<crate::tensor::Tensor>> {
        let key = c.key.clone();
        self.b.constant(key.as_deref(), dtype, ne_of(c.shape()), || c.f32s())
    }

    /// A host tensor uploaded (a constant made by a lowering: `key` for
    /// model-only constants, kept in the persistent pool).
    pub fn upload_host(&mut self, t: &HTensor, key: Option<String>, dtype: DType) -> crate::Result<Dev> {
        let vals = || Ok(t.f64s().iter().map(|&x| x as f32).collect());
        let tt = self.b.constant(key.as_deref(), dtype, ne_of(&t.shape), vals)?;
        Ok(Dev { t: tt, shape: t.shape.clone(), elem: t.elem })
    }

    /// The builder.
    pub fn eb(&mut self) -> &mut Builder {
        &mut self.b
    }
}

/// A key for a constant derived by a lowering from constants `srcs`
/// (None unless every source is model-only).
pub fn derived_key(tag: &str, srcs: &[&Val]) -> Option<String> {
    let mut parts = Vec::new();
    for v in srcs {
        match v {
            Val::C(c) if c.taint == Taint::Static => parts.push(c.key.clone()?),
            _ => return None,
        }
    }
    Some(format!("{tag}({})", parts.join(",")))
}

/// An ONNX axis attribute or input, normalised.
pub fn axis(a: i64, rank: usize) -> crate::Result<usize> {
    crate::models::onnx::host::norm_axis(a, rank, "axis")
}

/// Normalised, sorted, distinct axes.
pub fn axes(list: &[i64], rank: usize) -> crate::Result<Vec<usize>> {
    let mut out = Vec::with_capacity(list.len());
    for &a in list {
        let x = axis(a, rank)?;
        ensure!(!out.contains(&x), "axis {a} is given twice");
        out.push(x);
    }
    out.sort_unstable();
    Ok(out)
}

/// The element type results of a float computation on `e` get.
pub fn float_result(e: Elem) -> Elem {
    if e.is_float() {
        e
    } else {
        Elem::F32
    }
}
