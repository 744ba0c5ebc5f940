//! Parsing a GGUF file's header from its bytes. Every count and length read
//! from the file is checked against the bytes that remain before anything
//! is allocated for it, and every failure says what was wrong and at which
//! byte; nothing here can panic on any input.

use super::value::{Header, GgufTensorInfo, TensorType, GgufValue, ValueType};
use anyhow::bail;

/// Arrays nested deeper than this are refused (no real file nests at all).
const MAX_DEPTH: usize = 16;
const MAX_DIMS: usize = 4;
pub const DEFAULT_ALIGNMENT: usize = 32;

/// A name from the file as shown in messages: control characters escaped,
/// at most 80 characters.
fn shown(s: &str) -> String {
    let e: String = s.chars().flat_map(char::escape_debug).collect();
    if e.chars().count() > 80 {
        format!("{}...", e.chars().take(80).collect::<String>())
    } else {
        e
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> crate::Result<&'a [u8]> {
        if n > self.remaining() {
            bail!(
                "at byte {}: {what} needs {n} bytes but the file ends after {} more (the file is \
                 truncated or not GGUF)",
                self.pos,
                self.remaining()
            );
        }
        let s = self.b.get(self.pos..self.pos + n).unwrap_or(&[]);
        self.pos += n;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> crate::Result<u32> {
        Ok(u32::from_le_bytes(self.fixed(what)?))
    }

    fn u64(&mut self, what: &str) -> crate::Result<u64> {
        Ok(u64::from_le_bytes(self.fixed(what)?))
    }

    /// The next `N` bytes as an array.
    fn fixed<const N: usize>(&mut self, what: &str) -> crate::Result<[u8; N]> {
        let s = self.take(N, what)?;
        crate::base::bytes::array(s).ok_or_else(|| anyhow::anyhow!("at byte {}: {what} is cut short", self.pos))
    }

    /// A count of items of at least `min_size` bytes each that must fit in the rest of the file.
    fn count(&mut self, min_size: usize, what: &str) -> crate::Result<usize> {
        let at = self.pos;
        let n = self.u64(what)?;
        let fits = (self.remaining() / min_size.max(1)) as u64;
        if n > fits {
            bail!(
                "at byte {at}: {what} is {n}, but the {} bytes left in the file hold at most {fits}; \
                 the file is corrupt",
                self.remaining()
            );
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> crate::Result<String> {
        let n = self.count(1, &format!("the length of {what}"))?;
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }

    fn value(&mut self, t: ValueType, depth: usize, what: &str) -> crate::Result<GgufValue> {
        use ValueType as T;
        Ok(match t {
            T::U8 => GgufValue::U8(u8::from_le_bytes(self.fixed(what)?)),
            T::I8 => GgufValue::I8(i8::from_le_bytes(self.fixed(what)?)),
            T::Bool => {
                let at = self.pos;
                match u8::from_le_bytes(self.fixed(what)?) {
                    0 => GgufValue::Bool(false),
                    1 => GgufValue::Bool(true),
                    v => bail!("at byte {at}: {what} is a bool stored as {v}; GGUF bools are 0 or 1"),
                }
            }
            T::U16 => GgufValue::U16(u16::from_le_bytes(self.fixed(what)?)),
            T::I16 => GgufValue::I16(i16::from_le_bytes(self.fixed(what)?)),
            T::U32 => GgufValue::U32(self.u32(what)?),
            T::I32 => GgufValue::I32(self.u32(what)? as i32),
            T::F32 => GgufValue::F32(f32::from_bits(self.u32(what)?)),
            T::U64 => GgufValue::U64(self.u64(what)?),
            T::I64 => GgufValue::I64(self.u64(what)? as i64),
            T::F64 => GgufValue::F64(f64::from_bits(self.u64(what)?)),
            T::Str => GgufValue::Str(self.string(what)?),
            T::Array => {
                if depth >= MAX_DEPTH {
                    bail!("at byte {}: {what} nests arrays more than {MAX_DEPTH} deep", self.pos);
                }
                let at = self.pos;
                let code = self.u32(&format!("the element type of {what}"))?;
                let Some(et) = ValueType::from_code(code) else {
                    bail!("at byte {at}: {what} has elements of unknown type {code} (GGUF types are 0 to 12)");
                };
                let n = self.count(et.min_size(), &format!("the length of {what}"))?;
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    v.push(self.value(et, depth + 1, &format!("element {} of {what}", i + 1))?);
                }
                GgufValue::Array(et, v)
            }
        })
    }

    fn value_type(&mut self, what: &str) -> crate::Result<ValueType> {
        let at = self.pos;
        let code = self.u32(what)?;
        ValueType::from_code(code)
            .ok_or_else(|| anyhow::anyhow!("at byte {at}: {what} is {code}, not a GGUF value type (0 to 12)"))
    }
}

/// The header of a GGUF file: version, metadata, tensor descriptions and
/// where the tensor data starts.
pub fn parse(b: &[u8]) -> crate::Result<Header> {
    let mut c = Cursor { b, pos: 0 };
    let magic = c.take(4, "the magic number")?;
    if magic != b"GGUF" {
        bail!("at byte 0: the file does not start with \"GGUF\" (it starts with {:02x?}); it is not a GGUF file", magic);
    }
    let version = c.u32("the version")?;
    match version {
        2 | 3 => {}
        1 => bail!("at byte 4: this is a GGUF version 1 file, an early format that is not read; convert it with a current llama.cpp"),
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
            bail!("at byte 4: this is a big-endian GGUF file, which is not read; convert it to little-endian")
        }
        v => bail!("at byte 4: GGUF version {v} is not known (versions 2 and 3 are read)"),
    }
    // A tensor description takes at least 8 + 4 + 8 + 4 + 8 bytes, a key-value pair 8 + 4 + 1.
    let n_tensors = c.count(32, "the number of tensors")?;
    let n_kv = c.count(13, "the number of metadata pairs")?;
    let mut kv: Vec<(String, GgufValue)> = Vec::with_capacity(n_kv);
    let mut alignment_at = 0;
    for i in 0..n_kv {
        let at = c.pos;
        let key = c.string(&format!("metadata key {}", i + 1))?;
        if kv.iter().any(|(k, _)| *k == key) {
            bail!("at byte {at}: the metadata key '{}' appears twice", shown(&key));
        }
        let t = c.value_type(&format!("the type of '{}'", shown(&key)))?;
        if key == "general.alignment" {
            alignment_at = c.pos;
        }
        let v = c.value(t, 0, &format!("the value of '{}'", shown(&key)))?;
        kv.push((key, v));
    }
    let alignment = match kv.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, GgufValue::U32(a))) if *a > 0 && a.is_power_of_two() => *a as usize,
        Some((_, v)) => {
            let is = match (v, v.as_f64()) {
                (GgufValue::U32(a), _) => format!("{a}"),
                (_, Some(x)) => format!("the {} {x}", v.type_name()),
                _ => format!("a value of type {}", v.type_name()),
            };
            bail!("at byte {alignment_at}: general.alignment is {is}; it must be a uint32 power of 2 (absent, it is 32)")
        }
    };
    let mut tensors: Vec<GgufTensorInfo> = Vec::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let at = c.pos;
        let name = c.string(&format!("the name of tensor {}", i + 1))?;
        if tensors.iter().any(|t| t.name == name) {
            bail!("at byte {at}: the tensor name '{}' appears twice", shown(&name));
        }
        let what = format!("tensor '{}'", shown(&name));
        let at = c.pos;
        let n_dims = c.u32(&format!("the number of dimensions of {what}"))? as usize;
        if n_dims > MAX_DIMS {
            bail!("at byte {at}: {what} has {n_dims} dimensions; ggml tensors have at most {MAX_DIMS}");
        }
        let mut ne = [1usize; 4];
        for d in ne.iter_mut().take(n_dims) {
            let at = c.pos;
            let v = c.u64(&format!("a size of {what}"))?;
            if v > i64::MAX as u64 {
                bail!("at byte {at}: {what} has size {v} in a dimension, more than any file holds");
            }
            *d = v as usize;
        }
        let at = c.pos;
        let code = c.u32(&format!("the type of {what}"))?;
        let Some(ty) = TensorType::from_code(code) else {
            bail!("at byte {at}: {what} has type code {code}, which is not a ggml tensor type");
        };
        let (bs, ts) = ty.block();
        let [row, rest @ ..] = ne;
        if row % bs.max(1) != 0 {
            bail!("{what} is {} with {row} values per row, not a whole number of its blocks of {bs}", ty.name());
        }
        let bytes = rest.iter().try_fold(row / bs.max(1), |b, &n| b.checked_mul(n)).and_then(|b| b.checked_mul(ts));
        let Some(nbytes) = bytes.filter(|&b| b as u64 <= i64::MAX as u64) else {
            bail!("{what} of sizes {:?} is too large to address", ne.get(..n_dims).unwrap_or(&ne));
        };
        let at = c.pos;
        let offset = c.u64(&format!("the data offset of {what}"))?;
        if offset % alignment as u64 != 0 {
            bail!("at byte {at}: {what} starts its data at offset {offset}, which is not a multiple of the alignment {alignment}");
        }
        tensors.push(GgufTensorInfo { name, n_dims, ne, ty, offset: offset as usize, nbytes });
    }
    let data_start = c.pos.div_ceil(alignment) * alignment;
    for t in &tensors {
        let end = data_start.checked_add(t.offset).and_then(|s| s.checked_add(t.nbytes));
        if end.is_none_or(|e| e > b.len()) {
            bail!(
                "the data of tensor '{}' ({} bytes at byte {}) lies past the end of the file ({} bytes); \
                 the file is truncated",
                shown(&t.name),
                t.nbytes,
                data_start.saturating_add(t.offset),
                b.len()
            );
        }
    }
    Ok(Header { version, alignment, kv, tensors, data_start })
}
