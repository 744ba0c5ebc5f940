//! GGUF files: open, metadata, tensors (values or engine tensors over the
//! mapped file), free, and writing.

use crate::conv::{ctx_arg, f64_vec, scalar_i64, scalar_str, scalar_usize, usize_vec, xptr};
use crate::guard;
use crate::guard::out;
use crate::tensor::tensor_robj;
use anyhow::{anyhow, bail};
use extendr_api::prelude::*;
use ggmlr_core::gguf::{self, GgufFile, TensorType, GgufValue, ValueType, WriteTensor};
use std::sync::Mutex;

/// An open file, or None once freed.
pub struct Handle(Mutex<Option<GgufFile>>);

fn with<T>(x: &Robj, f: impl FnOnce(&GgufFile) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let h: &Handle = xptr(x, "x", "gguf")?;
    let g = h.0.lock().unwrap_or_else(|e| e.into_inner());
    match g.as_ref() {
        Some(file) => f(file),
        None => bail!("this gguf object was freed with gguf_free(); load the file again with gguf_load()"),
    }
}

/// @noRd
#[extendr]
fn rs_gguf_open(path: Robj) -> Robj {
    guard(|| {
        let file = GgufFile::open(&scalar_str(&path, "path")?)?;
        Ok(ExternalPtr::new(Handle(Mutex::new(Some(file)))).into())
    })
}

/// list(version, n_tensors, n_kv, alignment, data_offset, freed)
/// @noRd
#[extendr]
fn rs_gguf_info(x: Robj) -> Robj {
    guard(|| {
        let h: &Handle = xptr(&x, "x", "gguf")?;
        if h.0.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            return Ok(list!(freed = true).into());
        }
        with(&x, |f| {
            let hd = &f.header;
            Ok(list!(
                version = hd.version as i32,
                n_tensors = hd.tensors.len() as i32,
                n_kv = hd.kv.len() as i32,
                alignment = hd.alignment as i32,
                data_offset = hd.data_start as f64,
                freed = false
            )
            .into())
        })
    })
}

/// An R value for a GGUF value: 32-bit-or-narrower integers as integers,
/// other numbers as doubles, arrays as vectors, arrays of arrays as lists.
fn to_r(v: &GgufValue) -> Robj {
    use GgufValue::*;
    let int = |x: i32| Robj::from(x);
    match v {
        U8(x) => int(*x as i32),
        I8(x) => int(*x as i32),
        U16(x) => int(*x as i32),
        I16(x) => int(*x as i32),
        I32(x) => int(*x),
        Bool(b) => Robj::from(*b),
        Str(s) => Robj::from(out(s)),
        Array(t, items) => match t {
            ValueType::U8 | ValueType::I8 | ValueType::U16 | ValueType::I16 | ValueType::I32 => {
                items.iter().map(|i| i.as_f64().unwrap_or(0.0) as i32).collect::<Vec<i32>>().into()
            }
            ValueType::Bool => items.iter().map(|i| matches!(i, Bool(true))).collect::<Vec<bool>>().into(),
            ValueType::Str => items
                .iter()
                .map(|i| if let Str(s) = i { out(s) } else { String::new() })
                .collect::<Vec<String>>()
                .into(),
            ValueType::Array => List::from_values(items.iter().map(to_r)).into(),
            _ => items.iter().map(|i| i.as_f64().unwrap_or(f64::NAN)).collect::<Vec<f64>>().into(),
        },
        other => Robj::from(other.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Named list of every metadata value.
/// @noRd
#[extendr]
fn rs_gguf_metadata(x: Robj) -> Robj {
    guard(|| {
        with(&x, |f| {
            let names: Vec<String> = f.header.kv.iter().map(|(k, _)| out(k)).collect();
            let mut l = List::from_values(f.header.kv.iter().map(|(_, v)| to_r(v)));
            l.set_names(names).map_err(|e| anyhow!("could not name the metadata: {e}"))?;
            Ok(l.into())
        })
    })
}

/// Named character vector of the metadata values' GGUF types.
/// @noRd
#[extendr]
fn rs_gguf_metadata_types(x: Robj) -> Robj {
    guard(|| {
        with(&x, |f| {
            let mut r: Robj = f.header.kv.iter().map(|(_, v)| v.type_name()).collect::<Vec<String>>().into();
            r.set_names(f.header.kv.iter().map(|(k, _)| out(k)).collect::<Vec<_>>()).map_err(|e| anyhow!("could not name the types: {e}"))?;
            Ok(r)
        })
    })
}

/// @noRd
#[extendr]
fn rs_gguf_tensor_names(x: Robj) -> Robj {
    guard(|| with(&x, |f| Ok(f.header.tensors.iter().map(|t| out(&t.name)).collect::<Vec<String>>().into())))
}

/// list(name, shape, type, type_code, size_bytes, offset)
/// @noRd
#[extendr]
fn rs_gguf_tensor_info(x: Robj, name: Robj) -> Robj {
    guard(|| {
        let name = scalar_str(&name, "name")?;
        with(&x, |f| {
            let t = f.tensor(&name)?;
            let shape: Vec<f64> = t.ne.iter().take(t.n_dims.max(1)).map(|&n| n as f64).collect();
            let names = ["name", "shape", "type", "type_code", "size_bytes", "offset"];
            let values: [Robj; 6] = [
                out(&t.name).into(),
                shape.into(),
                t.ty.name().into(),
                (t.ty.code() as i32).into(),
                (t.nbytes as f64).into(),
                ((f.header.data_start + t.offset) as f64).into(),
            ];
            Ok(List::from_names_and_values(names, values).map_err(|e| anyhow!("could not build the tensor information: {e}"))?.into())
        })
    })
}

/// The tensor's values (dequantized), with dim = shape for 2+ dimensions.
/// @noRd
#[extendr]
fn rs_gguf_tensor_data(x: Robj, name: Robj) -> Robj {
    guard(|| {
        let name = scalar_str(&name, "name")?;
        with(&x, |f| {
            let t = f.tensor(&name)?;
            let mut r: Robj = f.tensor_values(t)?.into();
            if t.n_dims >= 2 {
                r.set_attrib("dim", t.ne.iter().take(t.n_dims).map(|&n| n as i32).collect::<Vec<i32>>())
                    .map_err(|e| anyhow!("could not set dimensions: {e}"))?;
            }
            Ok(r)
        })
    })
}

/// The tensor as an engine tensor of `ctx`, over the mapped file.
/// @noRd
#[extendr]
fn rs_gguf_tensor(x: Robj, name: Robj, ctx: Robj) -> Robj {
    guard(|| {
        let name = scalar_str(&name, "name")?;
        let c = ctx_arg(&ctx, "ctx")?;
        with(&x, |f| Ok(tensor_robj(f.engine_tensor(f.tensor(&name)?, c)?)))
    })
}

/// @noRd
#[extendr]
fn rs_gguf_free(x: Robj) -> Robj {
    guard(|| {
        let h: &Handle = xptr(&x, "x", "gguf")?;
        *h.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(().into())
    })
}

/// A GGUF value from an R value and a type name ("uint32", "array[string]", ...).
fn from_r(x: &Robj, ty: &str, key: &str) -> anyhow::Result<GgufValue> {
    if let Some(inner) = ty.strip_prefix("array[").and_then(|s| s.strip_suffix(']')) {
        let elems: Vec<GgufValue> = if inner.starts_with("array[") {
            let l = x.as_list().ok_or_else(|| anyhow!("'{key}' is declared {ty}, so its value must be a list of vectors"))?;
            l.values().map(|v| from_r(&v, inner, key)).collect::<anyhow::Result<_>>()?
        } else {
            (0..x.len()).map(|i| scalar_of(x, i, inner, key)).collect::<anyhow::Result<_>>()?
        };
        let et = if inner.starts_with("array[") { ValueType::Array } else { value_type(inner, key)? };
        return Ok(GgufValue::Array(et, elems));
    }
    if x.len() != 1 {
        bail!("'{key}' is declared {ty} but has {} values; declare it \"array[{ty}]\"", x.len());
    }
    scalar_of(x, 0, ty, key)
}

fn value_type(name: &str, key: &str) -> anyhow::Result<ValueType> {
    ValueType::from_name(name).filter(|t| *t != ValueType::Array).ok_or_else(|| {
        anyhow!("'{key}': '{name}' is not a GGUF value type (uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64, bool, string, or array[...] of one)")
    })
}

fn scalar_of(x: &Robj, i: usize, ty: &str, key: &str) -> anyhow::Result<GgufValue> {
    let t = value_type(ty, key)?;
    if t == ValueType::Str {
        let s = x.as_str_vector().and_then(|v| v.get(i).map(|s| s.to_string()));
        return s.map(GgufValue::Str).ok_or_else(|| anyhow!("'{key}' is declared string, so its value must be character"));
    }
    let v = *f64_vec(x, key)?.get(i).ok_or_else(|| anyhow!("internal: value {i} of '{key}'"))?;
    let whole = |lo: f64, hi: f64| -> anyhow::Result<f64> {
        if v.is_finite() && v.fract() == 0.0 && v >= lo && v <= hi {
            Ok(v)
        } else {
            bail!("'{key}' is declared {ty}; {v} is not a whole number from {lo} to {hi}")
        }
    };
    use ValueType as T;
    Ok(match t {
        T::U8 => GgufValue::U8(whole(0.0, 255.0)? as u8),
        T::I8 => GgufValue::I8(whole(-128.0, 127.0)? as i8),
        T::U16 => GgufValue::U16(whole(0.0, 65535.0)? as u16),
        T::I16 => GgufValue::I16(whole(-32768.0, 32767.0)? as i16),
        T::U32 => GgufValue::U32(whole(0.0, u32::MAX as f64)? as u32),
        T::I32 => GgufValue::I32(whole(i32::MIN as f64, i32::MAX as f64)? as i32),
        T::U64 => GgufValue::U64(whole(0.0, u64::MAX as f64)? as u64),
        T::I64 => GgufValue::I64(whole(i64::MIN as f64, i64::MAX as f64)? as i64),
        T::F32 => GgufValue::F32(v as f32),
        T::F64 => GgufValue::F64(v),
        T::Bool => {
            if v.is_nan() {
                bail!("'{key}' is declared bool; NA is not TRUE or FALSE");
            }
            GgufValue::Bool(v != 0.0)
        }
        T::Str | T::Array => bail!("internal: '{key}'"),
    })
}

/// Write a GGUF file: metadata (a named list) with the declared types
/// (`types`, a character vector in the same order), and tensors (a list of
/// list(name, type, ne, data) with data raw bytes or numbers to encode).
/// @noRd
#[extendr]
fn rs_gguf_write(path: Robj, metadata: Robj, types: Robj, tensors: Robj, alignment: Robj) -> Robj {
    guard(|| {
        let path = scalar_str(&path, "path")?;
        let meta = metadata.as_list().ok_or_else(|| anyhow!("`metadata` must be a named list"))?;
        let tys: Vec<String> = types.as_str_vector().map(|v| v.iter().map(|s| s.to_string()).collect()).unwrap_or_default();
        let mut kv = Vec::new();
        for (i, (k, v)) in meta.iter().enumerate() {
            let ty = tys.get(i).ok_or_else(|| anyhow!("internal: no type for metadata value {}", i + 1))?;
            kv.push((k.to_string(), from_r(&v, ty, k)?));
        }
        let specs = tensors.as_list().ok_or_else(|| anyhow!("`tensors` must be a list"))?;
        let mut out = Vec::new();
        for spec in specs.values() {
            let s = spec.as_list().ok_or_else(|| anyhow!("internal: tensor spec"))?;
            let get = |k: &str| s.iter().find(|(n, _)| *n == k).map(|(_, v)| v).ok_or_else(|| anyhow!("internal: tensor spec lacks {k}"));
            let name = scalar_str(&get("name")?, "name")?;
            let code = scalar_i64(&get("type")?, "type")?;
            let ty = TensorType::from_code(code as u32).ok_or_else(|| anyhow!("tensor '{name}': {code} is not a ggml type code"))?;
            let ne = usize_vec(&get("ne")?, "ne", 0)?;
            let data = get("data")?;
            let bytes = match data.as_raw_slice() {
                Some(b) => b.to_vec(),
                None => gguf::encode_values(ty, ne.first().copied().unwrap_or(1), &f64_vec(&data, &name)?)
                    .map_err(|e| e.context(format!("tensor '{name}'")))?,
            };
            out.push(WriteTensor { name, ty, ne, data: bytes.into() });
        }
        gguf::write(&path, &kv, &out, scalar_usize(&alignment, "alignment")?)?;
        Ok(().into())
    })
}

extendr_module! {
    mod gguf;
    fn rs_gguf_open;
    fn rs_gguf_info;
    fn rs_gguf_metadata;
    fn rs_gguf_metadata_types;
    fn rs_gguf_tensor_names;
    fn rs_gguf_tensor_info;
    fn rs_gguf_tensor_data;
    fn rs_gguf_tensor;
    fn rs_gguf_free;
    fn rs_gguf_write;
}
