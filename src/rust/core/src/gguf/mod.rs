//! GGUF files (llama.cpp's weight format): reading every metadata value
//! type (nested arrays included), the alignment and tensors of every type,
//! with the file memory-mapped so tensor data is not copied; and writing
//! them ([`writer`]).
//!
//! A file's tensors can become engine tensors over the mapped bytes
//! ([`GgufFile::engine_tensor`]): one read-only buffer covers the data
//! section, counted by the ledger, and lives as long as any tensor using it.

mod reader;
mod value;
mod writer;

#[cfg(test)]
mod tests;

pub use reader::DEFAULT_ALIGNMENT;
pub use value::{Header, GgufTensorInfo, TensorType, GgufValue, ValueType};
pub use writer::{encode_values, to_bytes, write, WriteTensor};

use crate::base::quant;
use crate::memory::{Buffer, BufferTag, Mapped};
use crate::tensor::{Context, DataSlot, Tensor};
use anyhow::{bail, Context as _};
use half::{bf16, f16};
use std::sync::{Arc, OnceLock};

/// The bytes of a file: mapped, or (for files made in memory) owned.
enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// An open GGUF file.
pub struct GgufFile {
    pub path: String,
    pub header: Header,
    bytes: Arc<Bytes>,
    /// The buffer over the data section, made for the first engine tensor.
    data: OnceLock<Arc<Buffer>>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GgufFile({}, {} tensors, {} metadata pairs)", self.path, self.header.tensors.len(), self.header.kv.len())
    }
}

impl GgufFile {
    /// Open and map `path` and read its header.
    pub fn open(path: &str) -> crate::Result<GgufFile> {
        let file = std::fs::File::open(path).with_context(|| format!("cannot open '{path}'"))?;
        let len = file.metadata().with_context(|| format!("cannot read the size of '{path}'"))?.len();
        if len < 24 {
            bail!("'{path}' has {len} bytes, too few for a GGUF file (a GGUF header has at least 24)");
        }
        // SAFETY: the mapping is only read, through slices whose bounds are
        // checked against its length. Like every memory map, it assumes that
        // no other process truncates the file while it is mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("cannot map '{path}' into memory"))?;
        GgufFile::from_bytes(path, Bytes::Map(map))
    }

    /// A file's bytes held in memory (tests, and files written here).
    pub fn from_vec(name: &str, bytes: Vec<u8>) -> crate::Result<GgufFile> {
        GgufFile::from_bytes(name, Bytes::Owned(bytes))
    }

    fn from_bytes(path: &str, bytes: Bytes) -> crate::Result<GgufFile> {
        let header = reader::parse(bytes.as_ref()).with_context(|| format!("'{path}' is not a valid GGUF file"))?;
        Ok(GgufFile { path: path.to_string(), header, bytes: Arc::new(bytes), data: OnceLock::new() })
    }

    pub fn tensor(&self, name: &str) -> crate::Result<&GgufTensorInfo> {
        self.header.tensors.iter().find(|t| t.name == name).ok_or_else(|| {
            anyhow::anyhow!("'{}' has no tensor named '{name}' (see gguf_tensor_names())", self.path)
        })
    }

    pub fn value(&self, key: &str) -> Option<&GgufValue> {
        self.header.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The stored bytes of tensor `t` (bounds checked when the file was read).
    pub fn tensor_bytes(&self, t: &GgufTensorInfo) -> &[u8] {
        let all = (*self.bytes).as_ref();
        let start = self.header.data_start.saturating_add(t.offset);
        all.get(start..start.saturating_add(t.nbytes)).unwrap_or(&[])
    }

    /// The values of tensor `t`, dequantized or converted, in ggml order.
    pub fn tensor_values(&self, t: &GgufTensorInfo) -> crate::Result<Vec<f64>> {
        use crate::base::dtype::DType;
        let b = self.tensor_bytes(t);
        let n = t.nelements();
        fn each<const W: usize>(b: &[u8], f: impl Fn([u8; W]) -> f64) -> Vec<f64> {
            b.chunks_exact(W).map(|c| f(c.try_into().unwrap_or([0; W]))).collect()
        }
        Ok(match t.ty {
            TensorType::Engine(DType::Quant(q)) => {
                let mut v = crate::base::alloc::try_vec(n, 0f32, "the values of a GGUF tensor")?;
                let [n0, ..] = t.ne;
                let rs = q.row_size(n0)?;
                for (row, out) in b.chunks_exact(rs.max(1)).zip(v.chunks_exact_mut(n0.max(1))) {
                    quant::dequantize_row(q, row, out)?;
                }
                v.into_iter().map(f64::from).collect()
            }
            TensorType::Engine(DType::F32) => each::<4>(b, |c| f32::from_le_bytes(c) as f64),
            TensorType::Engine(DType::F16) => each::<2>(b, |c| f16::from_le_bytes(c).to_f64()),
            TensorType::Engine(DType::BF16) => each::<2>(b, |c| bf16::from_le_bytes(c).to_f64()),
            TensorType::Engine(DType::I32) => each::<4>(b, |c| i32::from_le_bytes(c) as f64),
            TensorType::I8 => each::<1>(b, |c| i8::from_le_bytes(c) as f64),
            TensorType::I16 => each::<2>(b, |c| i16::from_le_bytes(c) as f64),
            TensorType::I64 => each::<8>(b, |c| i64::from_le_bytes(c) as f64),
            TensorType::F64 | TensorType::Engine(DType::F64) => each::<8>(b, f64::from_le_bytes),
        })
    }

    /// Tensor `t` as an engine tensor of `ctx` over the mapped data (no copy).
    pub fn engine_tensor(&self, t: &GgufTensorInfo, ctx: &Context) -> crate::Result<Arc<Tensor>> {
        let TensorType::Engine(dtype) = t.ty else {
            bail!("tensor '{}' is {}, a type engine tensors do not have; read its values with gguf_tensor_data()", t.name, t.ty.name());
        };
        let buf = match self.data.get() {
            Some(b) => b.clone(),
            None => {
                let len = (*self.bytes).as_ref().len().saturating_sub(self.header.data_start);
                let mapped = Mapped { map: self.bytes.clone(), start: self.header.data_start, len };
                let b = Arc::new(Buffer::mapped(mapped, BufferTag::User)?);
                self.data.get_or_init(|| b).clone()
            }
        };
        let tensor = ctx.new_tensor_over(dtype, t.ne, DataSlot { buf, offset: t.offset })?;
        tensor.set_name(&t.name);
        Ok(tensor)
    }
}
