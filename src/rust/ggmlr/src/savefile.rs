//! Saved-model files for R: plain R values (NULL, logical, integer, double,
//! character vectors and lists, with names and dim) to and from the engine's
//! checksummed format (`ggmlr_core::savefile`), and atomic writes of bytes.
//! Nothing else can be stored, so nothing read back can be code.

use crate::conv::scalar_str;
use crate::guard;
use anyhow::bail;
use extendr_api::prelude::*;
use ggmlr_core::savefile::{self, Attrs, SaveValue};

const MAX_DEPTH: usize = savefile::MAX_DEPTH;

fn attrs_of(x: &Robj, what: &str) -> anyhow::Result<Attrs> {
    let names = match x.get_attrib("names") {
        Some(n) if !n.is_null() => Some(crate::rstr::strings(&n, &format!("the names in {what}"))?),
        _ => None,
    };
    let dim = match x.get_attrib("dim") {
        Some(d) if !d.is_null() => match d.as_integer_slice() {
            Some(s) => Some(s.to_vec()),
            None => bail!("{what} has a dim that is not integer"),
        },
        _ => None,
    };
    Ok(Attrs { names, dim })
}

/// An R value as a saved value; `what` names it in errors.
fn to_value(x: &Robj, what: &str, depth: usize) -> anyhow::Result<SaveValue> {
    if depth > MAX_DEPTH {
        bail!("{what} is nested deeper than {MAX_DEPTH} levels");
    }
    if x.is_null() {
        return Ok(SaveValue::Null);
    }
    let a = attrs_of(x, what)?;
    Ok(match x.rtype() {
        Rtype::Logicals => {
            let s = x.as_logical_slice().unwrap_or(&[]);
            SaveValue::Logical(s.iter().map(|b| if b.is_na() { None } else { Some(b.is_true()) }).collect(), a)
        }
        Rtype::Integers => SaveValue::Integer(x.as_integer_slice().unwrap_or(&[]).to_vec(), a),
        Rtype::Doubles => SaveValue::Double(x.as_real_slice().unwrap_or(&[]).to_vec(), a),
        Rtype::Strings => SaveValue::String(crate::rstr::strings(x, what)?, a),
        Rtype::List => {
            let l = x.as_list().ok_or_else(|| anyhow::anyhow!("{what} is not a list"))?;
            let names = a.names.clone();
            let items = l
                .values()
                .enumerate()
                .map(|(i, v)| {
                    let nm = names.as_ref().and_then(|n| n.get(i).cloned().flatten()).unwrap_or_else(|| (i + 1).to_string());
                    to_value(&v, &format!("{what}${nm}"), depth + 1)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            SaveValue::List(items, a)
        }
        other => bail!("{what} is of type {other:?}; a saved model holds only numbers, strings, logicals and lists"),
    })
}

fn strings_robj(v: &[Option<String>]) -> Robj {
    let s: Strings = v
        .iter()
        .map(|x| match x {
            Some(s) => Rstr::from(crate::guard::out(s)),
            None => Rstr::na(),
        })
        .collect::<Vec<Rstr>>()
        .into_iter()
        .collect();
    s.into()
}

fn to_robj(v: &SaveValue) -> anyhow::Result<Robj> {
    let (mut r, a) = match v {
        SaveValue::Null => return Ok(Robj::from(())),
        SaveValue::Logical(x, a) => {
            let l: Logicals = x
                .iter()
                .map(|b| match b {
                    Some(b) => Rbool::from(*b),
                    None => Rbool::na(),
                })
                .collect();
            (Robj::from(l), a)
        }
        SaveValue::Integer(x, a) => (Robj::from(x.clone()), a),
        SaveValue::Double(x, a) => (Robj::from(x.clone()), a),
        SaveValue::String(x, a) => (strings_robj(x), a),
        SaveValue::List(x, a) => {
            let items = x.iter().map(to_robj).collect::<anyhow::Result<Vec<_>>>()?;
            (List::from_values(items).into(), a)
        }
    };
    if let Some(n) = &a.names {
        r.set_attrib("names", strings_robj(n)).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if let Some(d) = &a.dim {
        r.set_attrib("dim", d.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(r)
}

/// Write `x` (plain values only) to `path` as a saved-model file, atomically.
/// @noRd
#[extendr]
fn rs_savefile_write(path: Robj, x: Robj) -> Robj {
    guard(|| {
        let path = scalar_str(&path, "path")?;
        let v = to_value(&x, "the model", 0)?;
        savefile::write_atomic(std::path::Path::new(&path), &savefile::encode(&v))?;
        Ok(().into())
    })
}

/// Read a saved-model file back into plain R values.
/// @noRd
#[extendr]
fn rs_savefile_read(path: Robj) -> Robj {
    guard(|| {
        let path = scalar_str(&path, "path")?;
        let p = std::path::Path::new(&path);
        let meta = std::fs::metadata(p).map_err(|e| anyhow::anyhow!("cannot read '{path}': {e}"))?;
        if !meta.is_file() {
            bail!("'{path}' is not a regular file");
        }
        ggmlr_core::base::alloc::check(meta.len() as usize, 1, &format!("reading '{path}'"))?;
        let bytes = std::fs::read(p).map_err(|e| anyhow::anyhow!("cannot read '{path}': {e}"))?;
        let v = savefile::decode(&bytes).map_err(|e| anyhow::anyhow!("'{path}' cannot be loaded: {e:#}"))?;
        to_robj(&v)
    })
}

/// Write raw bytes to `path` atomically (the previous file stays whole on failure).
/// @noRd
#[extendr]
fn rs_write_atomic(path: Robj, bytes: Robj) -> Robj {
    guard(|| {
        let path = scalar_str(&path, "path")?;
        let b = bytes.as_raw_slice().ok_or_else(|| anyhow::anyhow!("`bytes` must be a raw vector"))?;
        savefile::write_atomic(std::path::Path::new(&path), b)?;
        Ok(().into())
    })
}

/// The bytes of a saved-model container holding `x` (plain values only).
/// @noRd
#[extendr]
fn rs_savefile_encode(x: Robj) -> Robj {
    guard(|| {
        let v = to_value(&x, "the value", 0)?;
        Ok(Raw::from_bytes(&savefile::encode(&v)).into())
    })
}

/// The plain R values held by the container bytes `bytes`.
/// @noRd
#[extendr]
fn rs_savefile_decode(bytes: Robj) -> Robj {
    guard(|| {
        let b = bytes.as_raw_slice().ok_or_else(|| anyhow::anyhow!("`bytes` must be a raw vector"))?;
        to_robj(&savefile::decode(b)?)
    })
}

extendr_module! {
    mod savefile;
    fn rs_savefile_write;
    fn rs_savefile_read;
    fn rs_savefile_encode;
    fn rs_savefile_decode;
    fn rs_write_atomic;
}
