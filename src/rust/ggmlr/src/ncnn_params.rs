//! What an R custom layer sees of its parameters and weights: a param dict
//! (`pd$get(id, default)`) and a model-bin reader (`mb$load(w, type)`),
//! each an external pointer wrapped in an environment by R/ncnn-layer.R.
//!
//! The param dict is the layer's own copy and may be kept. The reader is
//! the net's reader, lent for one `load_model()` call: afterwards its cell
//! is empty, and `load()` is an error instead of reading freed state.

use crate::conv::{scalar_i64, xptr};
use crate::guard;
use extendr_api::prelude::*;
use ggmlr_core::ncnn::modelbin::Stored;
use ggmlr_core::ncnn::param::{ArrayKind, ParamValue};
use ggmlr_core::ncnn::{err, ModelBin, ParamDict};
use std::cell::RefCell;
use std::rc::Rc;

pub struct RParamDict(pub ParamDict);

/// The net's weight reader while a custom layer's load_model() runs.
pub struct RModelBin(pub Rc<RefCell<Option<ModelBin>>>);

/// An int, or a float when the bits are a normal float (or zero) and the
/// reader did not ask for an int: binary params do not say which they hold.
fn raw_value(b: u32, want_int: bool) -> Robj {
    let f = f32::from_bits(b);
    if !want_int && (b == 0 || f.is_normal()) {
        Robj::from(f as f64)
    } else {
        Robj::from(b as i32)
    }
}

/// @noRd
#[extendr]
fn rs_ncnn_pd_get(p: Robj, id: Robj, default: Robj) -> Robj {
    guard(|| {
        let pd = &xptr::<RParamDict>(&p, "pd", "ncnn param dict")?.0;
        let id = scalar_i64(&id, "id")?;
        if !(0..32).contains(&id) {
            return Err(err(format!("pd$get(): parameter ids are 0 to 31, got {id}")));
        }
        let want_int = default.is_integer();
        Ok(match pd.values.get(id as usize).unwrap_or(&ParamValue::None) {
            ParamValue::None => default,
            ParamValue::Int(i) => Robj::from(*i),
            ParamValue::Float(f) => Robj::from(*f as f64),
            ParamValue::Raw(b) => raw_value(*b, want_int),
            ParamValue::Str(s) => Robj::from(s.as_str()),
            ParamValue::Array(_, ArrayKind::Int) => Robj::from(pd.ints(id as usize)),
            ParamValue::Array(_, ArrayKind::Float) => Robj::from(pd.floats(id as usize).iter().map(|&f| f as f64).collect::<Vec<f64>>()),
            ParamValue::Array(v, ArrayKind::Raw) => {
                let floats = !want_int && v.iter().all(|&b| b == 0 || f32::from_bits(b).is_normal());
                if floats {
                    Robj::from(v.iter().map(|&b| f32::from_bits(b) as f64).collect::<Vec<f64>>())
                } else {
                    Robj::from(v.iter().map(|&b| b as i32).collect::<Vec<i32>>())
                }
            }
        })
    })
}

/// @noRd
#[extendr]
fn rs_ncnn_mb_load(p: Robj, w: Robj, kind: Robj) -> Robj {
    guard(|| {
        let cell = &xptr::<RModelBin>(&p, "mb", "ncnn model bin")?.0;
        let mut slot = cell.borrow_mut();
        let Some(mb) = slot.as_mut() else {
            return Err(err("mb$load() works only inside the layer's load_model(); the reader is gone once it returns"));
        };
        let dims: Vec<usize> = crate::conv::usize_vec(&w, "w", 1)?;
        if dims.is_empty() || dims.len() > 4 {
            return Err(err(format!("mb$load(): give 1 to 4 extents (w first), got {}", dims.len())));
        }
        let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= 1 << 31)
            .ok_or_else(|| err(format!("mb$load(): {dims:?} values is too many")))?;
        let kind = scalar_i64(&kind, "type")?;
        let wts = mb.load(n, kind as i32, "the custom layer's weights")?;
        let mut r: Robj = if wts.stored == Stored::Int8 {
            wts.data.iter().map(|&v| v as i32).collect::<Vec<i32>>().into()
        } else {
            wts.data.iter().map(|&v| v as f64).collect::<Vec<f64>>().into()
        };
        if dims.len() > 1 {
            let d: Vec<i32> = dims.iter().map(|&v| v as i32).collect();
            r.set_attrib("dim", d).map_err(|e| err(format!("{e}")))?;
        }
        Ok(r)
    })
}

extendr_module! {
    mod ncnn_params;
    fn rs_ncnn_pd_get;
    fn rs_ncnn_mb_load;
}
