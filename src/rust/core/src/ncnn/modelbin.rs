//! Weights: a data reader (bytes or zeros) and the tagged/untagged arrays of a `.bin`.

use crate::ncnn::err;
use crate::ncnn_bail;

/// Where weights come from.
pub enum DataReader {
    /// The contents of a `.bin` file or a raw vector.
    Bytes(Vec<u8>),
    /// Zeros for everything (every tag reads as fp32).
    Empty,
}

/// Reads weight arrays in order from a [`DataReader`].
pub struct ModelBin<'a> {
    src: &'a DataReader,
    pub pos: usize,
}

pub const TAG_FP16: u32 = 0x01306B47;
pub const TAG_INT8: u32 = 0x000D4B38;

/// The largest array (in bytes) the zero reader makes up: 4 GiB.
const EMPTY_LIMIT: usize = 1 << 32;

fn align4(n: usize) -> usize {
    (n + 3) / 4 * 4
}

impl<'a> ModelBin<'a> {
    pub fn new(src: &'a DataReader) -> ModelBin<'a> {
        ModelBin { src, pos: 0 }
    }

    fn take(&mut self, n: usize, what: &str) -> anyhow::Result<Option<&'a [u8]>> {
        match self.src {
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
                let s = &b[self.pos..self.pos + n];
                self.pos += n;
                Ok(Some(s))
            }
        }
    }

    /// `n` weights from `bytes` (zeros when the reader is empty), allocated
    /// fallibly: `n` comes from the param.
    fn f32s(bytes: Option<&[u8]>, n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
        let mut v = crate::base::alloc::try_with_capacity(n, what).map_err(|e| err(format!("{e:#}")))?;
        match bytes {
            None => v.resize(n, 0.0),
            Some(s) => v.extend(s.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        }
        Ok(v)
    }

    /// An untagged fp32 array of `n` values.
    pub fn raw(&mut self, n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
        let b = self.take(n.checked_mul(4).unwrap_or(usize::MAX), what)?;
        Self::f32s(b, n, what)
    }

    /// A tagged array of `n` values (fp32 or fp16).
    pub fn tagged(&mut self, n: usize, what: &str) -> anyhow::Result<Vec<f32>> {
        let at = self.pos;
        let tag = match self.take(4, what)? {
            None => 0,
            Some(t) => u32::from_le_bytes(t.try_into().unwrap()),
        };
        match tag {
            0 => self.raw(n, what),
            TAG_FP16 => {
                let b = self.take(align4(n.checked_mul(2).unwrap_or(usize::MAX - 8)), what)?;
                let mut v = crate::base::alloc::try_with_capacity(n, what).map_err(|e| err(format!("{e:#}")))?;
                match b {
                    None => v.resize(n, 0.0),
                    Some(s) => v.extend(s.chunks_exact(2).take(n).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())),
                }
                Ok(v)
            }
            TAG_INT8 => ncnn_bail!(
                "{what} at byte {at} is stored as int8, which this package does not support yet; export the model with fp32 or fp16 weights"
            ),
            other => ncnn_bail!(
                "{what} at byte {at} uses a quantization table (tag 0x{other:08X}), which this package does not support yet; export the model with fp32 or fp16 weights"
            ),
        }
    }
}
