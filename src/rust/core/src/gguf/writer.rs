//! Writing GGUF files (version 3, little-endian): the header, the metadata
//! in the order given, the tensor descriptions, then each tensor's data
//! padded with zeros to the alignment, as the `gguf` Python package and
//! llama.cpp write them.

use super::reader::DEFAULT_ALIGNMENT;
use super::value::{TensorType, GgufValue};
use crate::base::dtype::DType;
use crate::base::quant;
use half::{bf16, f16};
use anyhow::{bail, ensure, Context as _};
use std::borrow::Cow;
use std::io::Write as _;

/// A tensor to write: its name, type, sizes (ne0 first) and stored bytes.
#[derive(Debug, Clone)]
pub struct WriteTensor<'a> {
    pub name: String,
    pub ty: TensorType,
    pub ne: Vec<usize>,
    pub data: Cow<'a, [u8]>,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &GgufValue, what: &str) -> crate::Result<()> {
    use GgufValue::*;
    match v {
        U8(x) => out.push(*x),
        I8(x) => out.push(*x as u8),
        U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Bool(x) => out.push(*x as u8),
        Str(s) => put_str(out, s),
        U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Array(t, items) => {
            out.extend_from_slice(&(*t as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for (i, item) in items.iter().enumerate() {
                ensure!(
                    item.kind() == *t,
                    "{what}: element {} is {}, but the array holds {} values (GGUF arrays have one type)",
                    i + 1,
                    item.type_name(),
                    t.name()
                );
                put_value(out, item, what)?;
            }
        }
    }
    Ok(())
}

fn pad(out: &mut Vec<u8>, alignment: usize) {
    out.resize(out.len().div_ceil(alignment) * alignment, 0);
}

/// The bytes of a GGUF file. A custom `alignment` is recorded as
/// `general.alignment` (added when the metadata lacks it).
pub fn to_bytes(kv: &[(String, GgufValue)], tensors: &[WriteTensor<'_>], alignment: usize) -> crate::Result<Vec<u8>> {
    ensure!(alignment > 0 && alignment.is_power_of_two(), "the alignment must be a power of 2, not {alignment}");
    let mut kv: Vec<(String, GgufValue)> = kv.to_vec();
    match kv.iter().find(|(k, _)| k == "general.alignment") {
        Some((_, GgufValue::U32(a))) => {
            ensure!(*a as usize == alignment, "general.alignment is {a} but the file is written with alignment {alignment}")
        }
        Some((_, v)) => bail!("general.alignment must be a uint32, not {}", v.type_name()),
        None if alignment != DEFAULT_ALIGNMENT => kv.push(("general.alignment".into(), GgufValue::U32(alignment as u32))),
        None => {}
    }
    for (i, (k, _)) in kv.iter().enumerate() {
        // BOUNDS: i comes from enumerate() over kv, so i < kv.len().
        ensure!(!kv[..i].iter().any(|(o, _)| o == k), "the metadata key '{k}' is given twice");
    }
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&(kv.len() as u64).to_le_bytes());
    for (k, v) in &kv {
        put_str(&mut out, k);
        out.extend_from_slice(&(v.kind() as u32).to_le_bytes());
        put_value(&mut out, v, &format!("the value of '{k}'"))?;
    }
    let mut offset = 0usize;
    for (i, t) in tensors.iter().enumerate() {
        // BOUNDS: i comes from enumerate() over tensors, so i < tensors.len().
        ensure!(!tensors[..i].iter().any(|o| o.name == t.name), "the tensor name '{}' is given twice", t.name);
        ensure!(t.ne.len() <= 4, "tensor '{}' has {} dimensions; ggml tensors have at most 4", t.name, t.ne.len());
        let (bs, ts) = t.ty.block();
        let ne0 = t.ne.first().copied().unwrap_or(1);
        ensure!(ne0 % bs == 0, "tensor '{}': {} values per row are not a whole number of {} blocks of {bs}", t.name, ne0, t.ty.name());
        let want = (ne0 / bs).checked_mul(ts).and_then(|w| t.ne.iter().skip(1).try_fold(w, |a, &n| a.checked_mul(n)));
        ensure!(
            want == Some(t.data.len()),
            "tensor '{}' ({} of sizes {:?}) needs {} bytes of data, not {}",
            t.name,
            t.ty.name(),
            t.ne,
            want.map_or("too many".into(), |w| w.to_string()),
            t.data.len()
        );
        put_str(&mut out, &t.name);
        out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
        for &n in &t.ne {
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
        out.extend_from_slice(&t.ty.code().to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        offset += t.data.len().div_ceil(alignment) * alignment;
    }
    pad(&mut out, alignment);
    for t in tensors {
        out.extend_from_slice(&t.data);
        pad(&mut out, alignment);
    }
    Ok(out)
}

/// Write a GGUF file at `path` (through a temporary file beside it, renamed
/// when complete, so a failed write leaves no partial file).
pub fn write(path: &str, kv: &[(String, GgufValue)], tensors: &[WriteTensor<'_>], alignment: usize) -> crate::Result<()> {
    let bytes = to_bytes(kv, tensors, alignment)?;
    let tmp = format!("{path}.tmp{}", std::process::id());
    let res = (|| -> crate::Result<()> {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create '{tmp}'"))?;
        f.write_all(&bytes).with_context(|| format!("cannot write '{tmp}'"))?;
        f.sync_all().ok();
        std::fs::rename(&tmp, path).with_context(|| format!("cannot move '{tmp}' to '{path}'"))
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Stored bytes of `vals` as tensor type `ty` (rows of `ne0` values for
/// quantized types, quantized without an importance matrix).
pub fn encode_values(ty: TensorType, ne0: usize, vals: &[f64]) -> crate::Result<Vec<u8>> {
    let whole = |lo: f64, hi: f64| -> crate::Result<()> {
        match vals.iter().find(|v| !(v.is_finite() && v.fract() == 0.0 && **v >= lo && **v <= hi)) {
            Some(v) => bail!("{} holds whole numbers from {lo} to {hi}; {v} is not one", ty.name()),
            None => Ok(()),
        }
    };
    let mut out = Vec::new();
    match ty {
        TensorType::Engine(DType::Quant(q)) => {
            ensure!(ne0 > 0 && vals.len() % ne0 == 0, "{} values do not make whole rows of {ne0}", vals.len());
            let x: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
            return quant::quantize_chunk(q, &x, vals.len() / ne0, ne0, None);
        }
        TensorType::Engine(DType::F32) => vals.iter().for_each(|&v| out.extend_from_slice(&(v as f32).to_le_bytes())),
        TensorType::Engine(DType::F16) => vals.iter().for_each(|&v| out.extend_from_slice(&f16::from_f64(v).to_le_bytes())),
        TensorType::Engine(DType::BF16) => vals.iter().for_each(|&v| out.extend_from_slice(&bf16::from_f64(v).to_le_bytes())),
        TensorType::F64 | TensorType::Engine(DType::F64) => vals.iter().for_each(|&v| out.extend_from_slice(&v.to_le_bytes())),
        TensorType::Engine(DType::I32) => {
            whole(i32::MIN as f64, i32::MAX as f64)?;
            vals.iter().for_each(|&v| out.extend_from_slice(&(v as i32).to_le_bytes()));
        }
        TensorType::I8 => {
            whole(-128.0, 127.0)?;
            vals.iter().for_each(|&v| out.push(v as i8 as u8));
        }
        TensorType::I16 => {
            whole(-32768.0, 32767.0)?;
            vals.iter().for_each(|&v| out.extend_from_slice(&(v as i16).to_le_bytes()));
        }
        TensorType::I64 => {
            whole(-9.2e18, 9.2e18)?;
            vals.iter().for_each(|&v| out.extend_from_slice(&(v as i64).to_le_bytes()));
        }
    }
    Ok(out)
}
