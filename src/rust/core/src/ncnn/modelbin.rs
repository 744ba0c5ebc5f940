//! Weights: a data reader (bytes or zeros) and the arrays of a `.bin`, read
//! in file order as ncnn reads them: "tagged" arrays (a 4-byte flag, then
//! fp32, fp16, int8 or a 256-value table with byte indices) and raw fp32.

use crate::base::bytes::{array, groups};
use crate::ncnn::err;
use crate::ncnn_bail;
use std::sync::Arc;

/// Where weights come from.
#[derive(Clone)]
pub enum DataReader {
    /// The contents of a `.bin` file or a raw vector (shared, not copied,
    /// by every reader made from it).
    Bytes(Arc<[u8]>),
    /// Zeros for everything (every tag reads as fp32).
    Empty,
}

impl DataReader {
    pub fn from_bytes(b: Vec<u8>) -> DataReader {
        DataReader::Bytes(b.into())
    }
}

/// How a tagged array was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    F32,
    F16,
    /// Signed 8-bit integers (the values are whole numbers -128..127).
    Int8,
    /// A 256-value table with one byte index per value.
    Table,
}

/// A tagged array: its values (int8 ones as whole numbers) and storage.
#[derive(Clone, Debug)]
pub struct Weights {
    pub data: Vec<f32>,
    pub stored: Stored,
}

/// Reads weight arrays in order from a [`DataReader`] (a clone reads on
/// from the same place, independently).
#[derive(Clone)]
pub struct ModelBin {
    src: DataReader,
    pub pos: usize,
}

pub const TAG_FP16: u32 = 0x01306B47;
pub const TAG_INT8: u32 = 0x000D4B38;
/// Raw fp32 data (written by converters that scale weights on the way).
pub const TAG_RAW_SCALED: u32 = 0x0002C056;

/// The largest array (in bytes) the zero reader makes up: 4 GiB.
const EMPTY_LIMIT: usize = 1 << 32;

fn align4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// `n * size` bytes, or an error naming `what` when that overflows.
fn bytes_of(n: usize, size: usize, what: &str) -> anyhow::Result<usize> {
    n.checked_mul(size)
        .map(align4)
        .ok_or_else(|| err(format!("{what}: {n} values is too many")))
}

/// Room for `n` values, allocated fallibly (`n` comes from the param).
fn alloc(n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
    crate::base::alloc::try_with_capacity(n, what).map_err(|e| err(format!("{e:#}")))
}

impl ModelBin {
    pub fn new(src: &DataReader) -> ModelBin {
        ModelBin { src: src.clone(), pos: 0 }
    }

    fn take(&mut self, n: usize, what: &str) -> anyhow::Result<Option<&[u8]>> {
        match &self.src {
            DataReader::Empty => {
                if n > EMPTY_LIMIT {
                    ncnn_bail!("{what} asks for {n} bytes of zeros; the param declares an implausibly large layer");
                }
                self.pos += n;
                Ok(None)
            }
            DataReader::Bytes(b) => {
                if n > b.len().saturating_sub(self.pos) {
                    ncnn_bail!(
                        "weights end early: {what} needs {n} bytes at byte {}, but the model has {} bytes (wrong .bin for this param?)",
                        self.pos,
                        b.len()
                    );
                }
                let s = b.get(self.pos..self.pos + n).unwrap_or(&[]);
                self.pos += n;
                Ok(Some(s))
            }
        }
    }

    /// `n` fp32 values (zeros from the empty reader).
    fn f32s(&mut self, n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
        let nb = bytes_of(n, 4, what)?;
        let mut out = alloc(n, what)?;
        match self.take(nb, what)? {
            None => out.resize(n, 0.0),
            Some(s) => out.extend(groups(s).map(f32::from_le_bytes)),
        }
        Ok(out)
    }

    /// An untagged fp32 array of `n` values.
    pub fn raw(&mut self, n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
        self.f32s(n, what)
    }

    /// A tagged array of `n` values that must be floating point (fp32,
    /// fp16 or a table); int8 data is refused with a message naming `what`.
    pub fn tagged(&mut self, n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
        let at = self.pos;
        let w = self.tagged_any(n, what)?;
        if w.stored == Stored::Int8 {
            ncnn_bail!("{what} at byte {at} is stored as int8, which this layer does not read (only layers with int8_scale_term do)");
        }
        Ok(w.data)
    }

    /// A tagged array of `n` values in whichever storage its flag says.
    pub fn tagged_any(&mut self, n: usize, what: &str) -> anyhow::Result<Weights> {
        let flag = self.take(4, what)?.and_then(array::<4>).unwrap_or([0; 4]);
        let tag = u32::from_le_bytes(flag);
        match tag {
            TAG_FP16 => {
                let nb = bytes_of(n, 2, what)?;
                let mut out = alloc(n, what)?;
                match self.take(nb, what)? {
                    None => out.resize(n, 0.0),
                    Some(s) => out.extend(
                        groups(s).take(n).map(|c| half::f16::from_le_bytes(c).to_f32()),
                    ),
                }
                Ok(Weights { data: out, stored: Stored::F16 })
            }
            TAG_INT8 => {
                let nb = bytes_of(n, 1, what)?;
                let mut out = alloc(n, what)?;
                match self.take(nb, what)? {
                    None => out.resize(n, 0.0),
                    Some(s) => out.extend(s.iter().take(n).map(|&b| b as i8 as f32)),
                }
                Ok(Weights { data: out, stored: Stored::Int8 })
            }
            TAG_RAW_SCALED => Ok(Weights { data: self.f32s(n, what)?, stored: Stored::F32 }),
            _ if flag.iter().map(|&b| b as u32).sum::<u32>() != 0 => {
                let table = self.f32s(256, what)?;
                let entry = |i: u8| table.get(usize::from(i)).copied().unwrap_or(0.0);
                let nb = bytes_of(n, 1, what)?;
                let mut out = alloc(n, what)?;
                match self.take(nb, what)? {
                    None => out.resize(n, entry(0)),
                    Some(s) => out.extend(s.iter().take(n).map(|&i| entry(i))),
                }
                Ok(Weights { data: out, stored: Stored::Table })
            }
            _ => Ok(Weights { data: self.f32s(n, what)?, stored: Stored::F32 }),
        }
    }

    /// ncnn's `load(w, type)`: type 0 is a tagged array, 1 raw fp32.
    pub fn load(&mut self, n: usize, kind: i32, what: &str) -> anyhow::Result<Weights> {
        match kind {
            0 => self.tagged_any(n, what),
            1 => Ok(Weights { data: self.raw(n, what)?, stored: Stored::F32 }),
            _ => ncnn_bail!("{what}: weight type {kind} is not 0 (tagged) or 1 (raw fp32)"),
        }
    }
}
