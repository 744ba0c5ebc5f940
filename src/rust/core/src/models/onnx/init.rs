//! Initializers and constant tensors of a model: the values of a
//! `TensorProto`, from its raw bytes, its typed fields or an external data
//! file, checked against its declared type and shape before anything is
//! allocated for them.

use super::elem::Elem;
use crate::base::bytes::{array, groups};
use super::host::{fmt_shape, numel, Data, HTensor};
use super::proto::TensorProto;
use anyhow::{bail, ensure, Context as _};
use prost::bytes::Bytes;
use std::path::{Component, Path};

/// A constant tensor of the model (an initializer or a `Constant`'s value).
#[derive(Debug, Clone)]
pub struct Init {
    pub name: String,
    pub elem: Elem,
    pub shape: Vec<usize>,
    data: Stored,
}

/// The values as the file holds them.
#[derive(Debug, Clone)]
enum Stored {
    /// Little-endian packed elements (`raw_data` or an external file).
    Raw(Bytes),
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// int32_data: int32 and the narrower integer types, bool, and the bit
    /// patterns of float16 / bfloat16.
    I32(Vec<i32>),
    I64(Vec<i64>),
    U64(Vec<u64>),
}

impl Init {
    /// The tensor of `t`; `dir` is the model's folder (for external data).
    pub fn from_proto(t: &TensorProto, dir: Option<&Path>, what: &str) -> crate::Result<Init> {
        let name = t.name.clone().unwrap_or_default();
        let what = if name.is_empty() { what.to_string() } else { format!("{what} '{name}'") };
        Init::decode(t, dir, name).with_context(|| format!("{what}"))
    }

    fn decode(t: &TensorProto, dir: Option<&Path>, name: String) -> crate::Result<Init> {
        ensure!(t.segment.is_none(), "segmented tensors are not supported");
        let code = t.data_type.unwrap_or(0);
        ensure!(code != 0, "the tensor has no element type");
        let elem = Elem::from_code(code)?;
        let mut shape = Vec::with_capacity(t.dims.len().min(64));
        for &d in &t.dims {
            ensure!(d >= 0, "dimension {d} of the shape is negative");
            shape.push(usize::try_from(d)?);
        }
        let no_values = t.raw_data.is_none()
            && t.data_location != Some(1)
            && t.float_data.is_empty()
            && t.int32_data.is_empty()
            && t.int64_data.is_empty()
            && t.double_data.is_empty()
            && t.uint64_data.is_empty();
        if shape.is_empty() && no_values {
            // Some writers give an empty optional tensor no dimensions at
            // all; it is read as an empty vector rather than refused.
            shape.push(0);
        }
        let n = numel(&shape)?;
        let bytes = elem.raw_bytes(n).ok_or_else(|| anyhow::anyhow!("the tensor is too large"))?;
        let data = if t.data_location == Some(1) {
            Stored::Raw(external(t, dir, bytes)?)
        } else if let Some(raw) = &t.raw_data {
            ensure!(
                raw.len() == bytes,
                "its raw data has {} bytes, but a {} tensor of shape {} needs {bytes}",
                raw.len(),
                elem.name(),
                fmt_shape(&shape)
            );
            Stored::Raw(raw.clone())
        } else {
            let (have, stored) = match elem {
                Elem::F32 => (t.float_data.len(), Stored::F32(t.float_data.clone())),
                Elem::F64 => (t.double_data.len(), Stored::F64(t.double_data.clone())),
                Elem::I64 => (t.int64_data.len(), Stored::I64(t.int64_data.clone())),
                Elem::U32 | Elem::U64 => (t.uint64_data.len(), Stored::U64(t.uint64_data.clone())),
                _ => (t.int32_data.len(), Stored::I32(t.int32_data.clone())),
            };
            // int32_data holds 2 (4-bit) or 4 (2-bit) packed elements each.
            let per = if elem.bits() < 8 { 8 / elem.bits() } else { 1 };
            let want = n.div_ceil(per);
            ensure!(
                have == want,
                "it holds {have} values, but a {} tensor of shape {} has {n}",
                elem.name(),
                fmt_shape(&shape)
            );
            stored
        };
        Ok(Init { name, elem, shape, data })
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values as a host tensor.
    pub fn to_host(&self) -> crate::Result<HTensor> {
        let n = self.numel();
        let data = if self.elem.is_narrow() {
            let v: Vec<u8> = match &self.data {
                Stored::Raw(b) => (0..n).map(|i| narrow_at(self.elem, b, i)).collect(),
                Stored::I32(v) => {
                    // Packed 4- or 2-bit elements, or one element per value.
                    let bits = self.elem.bits();
                    let per = if bits < 8 { 8 / bits } else { 1 };
                    let bytes: Vec<u8> = v.iter().map(|&x| x as u8).collect();
                    if per == 1 {
                        bytes
                    } else {
                        (0..n).map(|i| narrow_at(self.elem, &bytes, i)).collect()
                    }
                }
                _ => bail!("internal: wide data for a {} tensor", self.elem.name()),
            };
            if self.elem.is_float() {
                Data::F(v.iter().map(|&b| crate::models::onnx::lowp::decode(self.elem, b)).collect())
            } else {
                Data::I(v.iter().map(|&b| narrow_int(self.elem, b)).collect())
            }
        } else if self.elem.is_float() {
            Data::F(self.floats()?)
        } else {
            let v: Vec<i64> = match &self.data {
                Stored::Raw(b) => (0..n).map(|i| int_at(self.elem, b, i)).collect(),
                Stored::I32(v) => v.iter().map(|&x| x as i64).collect(),
                Stored::I64(v) => v.clone(),
                Stored::U64(v) => v.iter().map(|&x| x as i64).collect(),
                Stored::F32(_) | Stored::F64(_) => bail!("internal: float data for an integer tensor"),
            };
            Data::I(v)
        };
        Ok(HTensor { elem: self.elem, shape: self.shape.clone(), data })
    }

    /// The values as f64 (a floating-point tensor).
    fn floats(&self) -> crate::Result<Vec<f64>> {
        let n = self.numel();
        Ok(match &self.data {
            Stored::Raw(b) => (0..n).map(|i| float_at(self.elem, b, i)).collect(),
            Stored::F32(v) => v.iter().map(|&x| x as f64).collect(),
            Stored::F64(v) => v.clone(),
            Stored::I32(v) => v.iter().map(|&x| bits_float(self.elem, x as u32 as u16)).collect(),
            Stored::I64(_) | Stored::U64(_) => bail!("internal: integer data for a float tensor"),
        })
    }

    /// The values converted to f32, in row-major order (for uploads).
    pub fn to_f32(&self) -> crate::Result<Vec<f32>> {
        if let (Elem::F32, Stored::Raw(b)) = (self.elem, &self.data) {
            return Ok(groups(b).map(f32::from_le_bytes).collect());
        }
        if let (Elem::F32, Stored::F32(v)) = (self.elem, &self.data) {
            return Ok(v.clone());
        }
        Ok(self.to_host()?.f64s().iter().map(|&x| x as f32).collect())
    }
}

/// Raw data from element `i * w` on (empty past the end: Init::decode
/// checked the raw length against the shape, so that is never reached, and
/// would read as zeros rather than panic).
fn from(b: &[u8], i: usize, w: usize) -> &[u8] {
    i.checked_mul(w).and_then(|k| b.get(k..)).unwrap_or(&[])
}

/// The bit pattern of element `i` of a narrow type's raw data (packed
/// lowest bits first for the 4- and 2-bit types).
fn narrow_at(e: Elem, b: &[u8], i: usize) -> u8 {
    let byte = |k: usize| b.get(k).copied().unwrap_or(0);
    match e.bits() {
        4 => (byte(i / 2) >> (4 * (i % 2))) & 0xf,
        2 => (byte(i / 4) >> (2 * (i % 4))) & 0x3,
        _ => byte(i),
    }
}

/// The value of a 4- or 2-bit integer's bit pattern.
fn narrow_int(e: Elem, b: u8) -> i64 {
    match e {
        Elem::I4 => ((b << 4) as i8 >> 4) as i64,
        Elem::I2 => ((b << 6) as i8 >> 6) as i64,
        _ => b as i64,
    }
}

fn float_at(e: Elem, b: &[u8], i: usize) -> f64 {
    match e {
        Elem::F32 => f32::from_le_bytes(array(from(b, i, 4)).unwrap_or_default()) as f64,
        Elem::F64 => f64::from_le_bytes(array(from(b, i, 8)).unwrap_or_default()),
        _ => bits_float(e, u16::from_le_bytes(array(from(b, i, 2)).unwrap_or_default())),
    }
}

fn bits_float(e: Elem, bits: u16) -> f64 {
    match e {
        Elem::BF16 => half::bf16::from_bits(bits).to_f64(),
        _ => half::f16::from_bits(bits).to_f64(),
    }
}

fn int_at(e: Elem, b: &[u8], i: usize) -> i64 {
    let c = from(b, i, e.size());
    match e {
        Elem::U8 => u8::from_le_bytes(array(c).unwrap_or_default()) as i64,
        Elem::Bool => (u8::from_le_bytes(array(c).unwrap_or_default()) != 0) as i64,
        Elem::I8 => i8::from_le_bytes(array(c).unwrap_or_default()) as i64,
        Elem::U16 => u16::from_le_bytes(array(c).unwrap_or_default()) as i64,
        Elem::I16 => i16::from_le_bytes(array(c).unwrap_or_default()) as i64,
        Elem::I32 => i32::from_le_bytes(array(c).unwrap_or_default()) as i64,
        Elem::U32 => u32::from_le_bytes(array(c).unwrap_or_default()) as i64,
        _ => i64::from_le_bytes(array(c).unwrap_or_default()),
    }
}

/// The bytes of a tensor stored in an external file (`location`, `offset`,
/// `length` entries; the path relative to the model's folder, inside it).
fn external(t: &TensorProto, dir: Option<&Path>, want: usize) -> crate::Result<Bytes> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let v = kv.value.clone().unwrap_or_default();
        match kv.key.as_deref() {
            Some("location") => location = Some(v),
            Some("offset") => offset = v.parse().with_context(|| format!("external data offset '{v}'"))?,
            Some("length") => length = Some(v.parse::<u64>().with_context(|| format!("external data length '{v}'"))?),
            _ => {}
        }
    }
    let loc = location.ok_or_else(|| anyhow::anyhow!("its external data names no file (no 'location')"))?;
    let rel = Path::new(&loc);
    ensure!(
        rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)),
        "its external data file '{loc}' must be a relative path inside the model's folder"
    );
    let Some(dir) = dir else {
        bail!("its data is in the external file '{loc}', but the model was not loaded from a file")
    };
    let path = dir.join(rel);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("cannot open its external data file '{}'", path.display()))?
        .len();
    let len = length.unwrap_or(size.saturating_sub(offset));
    ensure!(
        offset.checked_add(len).is_some_and(|e| e <= size),
        "its external data ({len} bytes at offset {offset}) lies beyond the end of '{}' ({size} bytes)",
        path.display()
    );
    ensure!(len == want as u64, "its external data has {len} bytes, but the tensor needs {want}");
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path).with_context(|| format!("cannot open '{}'", path.display()))?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = super::host::filled(want, 0u8)?;
    f.read_exact(&mut buf).with_context(|| format!("cannot read '{}'", path.display()))?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(dims: Vec<i64>, code: i32) -> TensorProto {
        TensorProto { dims, data_type: Some(code), name: Some("w".into()), ..Default::default() }
    }

    #[test]
    fn raw_typed_and_checked() {
        let mut t = tp(vec![2], 1);
        t.raw_data = Some(Bytes::from([1.5f32.to_le_bytes(), (-2f32).to_le_bytes()].concat()));
        let i = Init::from_proto(&t, None, "initializer").unwrap();
        assert_eq!(i.to_f32().unwrap(), vec![1.5, -2.0]);
        t.raw_data = Some(Bytes::from_static(&[0, 0, 0]));
        let e = format!("{:#}", Init::from_proto(&t, None, "initializer").unwrap_err());
        assert!(e.contains("initializer 'w'") && e.contains("3 bytes"), "{e}");
        let mut t = tp(vec![3], 7);
        t.int64_data = vec![1, -2, 3];
        assert_eq!(Init::from_proto(&t, None, "x").unwrap().to_host().unwrap().i64s().to_vec(), vec![1, -2, 3]);
        let mut t = tp(vec![2], 10);
        t.int32_data = vec![half::f16::from_f32(0.5).to_bits() as i32, half::f16::from_f32(-1.0).to_bits() as i32];
        assert_eq!(Init::from_proto(&t, None, "x").unwrap().to_f32().unwrap(), vec![0.5, -1.0]);
        let t = tp(vec![-1], 1);
        assert!(Init::from_proto(&t, None, "x").is_err());
        let t = tp(vec![1 << 40, 1 << 40], 1);
        assert!(Init::from_proto(&t, None, "x").is_err());
        let t = tp(vec![2], 8);
        assert!(format!("{:#}", Init::from_proto(&t, None, "x").unwrap_err()).contains("string"));
    }

    #[test]
    fn narrow_types_unpack() {
        // int4 [-8, 7, 1] packed low nibble first: 0x78, 0x01.
        let mut t = tp(vec![3], 22);
        t.raw_data = Some(Bytes::from_static(&[0x78, 0x01]));
        assert_eq!(Init::from_proto(&t, None, "x").unwrap().to_host().unwrap().i64s().to_vec(), vec![-8, 7, 1]);
        t.raw_data = Some(Bytes::from_static(&[0x78]));
        assert!(Init::from_proto(&t, None, "x").is_err());
        // uint2 [3, 0, 1, 2, 1] in int32_data, four to a value.
        let mut t = tp(vec![5], 25);
        t.int32_data = vec![0b1001_0011, 0b01];
        assert_eq!(Init::from_proto(&t, None, "x").unwrap().to_host().unwrap().i64s().to_vec(), vec![3, 0, 1, 2, 1]);
        // float8e4m3fn 1.0 (0x38) and -448 (0xfe); float4e2m1 6 and -0.5.
        let mut t = tp(vec![2], 17);
        t.raw_data = Some(Bytes::from_static(&[0x38, 0xfe]));
        assert_eq!(Init::from_proto(&t, None, "x").unwrap().to_f32().unwrap(), vec![1.0, -448.0]);
        let mut t = tp(vec![2], 23);
        t.raw_data = Some(Bytes::from_static(&[0x97]));
        assert_eq!(Init::from_proto(&t, None, "x").unwrap().to_f32().unwrap(), vec![6.0, -0.5]);
    }

    #[test]
    fn external_data_stays_in_the_folder() {
        let dir = std::env::temp_dir().join(format!("ggmlr-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("w.bin"), [0u8, 0, 128, 63, 0, 0, 0, 64]).unwrap();
        let mut t = tp(vec![2], 1);
        t.data_location = Some(1);
        let kv = |k: &str, v: &str| super::super::proto::StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
        t.external_data = vec![kv("location", "w.bin")];
        assert_eq!(Init::from_proto(&t, Some(&dir), "x").unwrap().to_f32().unwrap(), vec![1.0, 2.0]);
        t.external_data = vec![kv("location", "w.bin"), kv("offset", "4")];
        assert!(Init::from_proto(&t, Some(&dir), "x").is_err());
        t.external_data = vec![kv("location", "../w.bin")];
        let e = format!("{:#}", Init::from_proto(&t, Some(&dir), "x").unwrap_err());
        assert!(e.contains("inside the model's folder"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
