//! Element types. The numeric codes are ggml's, so `GGML_TYPE_*` constants in
//! R keep their usual values. Quantized types store values in blocks
//! ([`super::quant`]): their `size` is the bytes of a block.

use super::quant::QType;
use anyhow::bail;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DType {
    /// A quantized block type (its code is the QType's).
    Quant(QType) = 2,
    F32 = 0,
    F16 = 1,
    I32 = 26,
    /// Double precision: the CPU backend computes in f64 on it (device
    /// "cpu" of the autograd API); other backends refuse it.
    F64 = 28,
    BF16 = 30,
}

impl DType {
    pub fn from_code(code: i64) -> crate::Result<DType> {
        if let Some(q) = QType::from_code(code) {
            return Ok(DType::Quant(q));
        }
        Ok(match code {
            0 => DType::F32,
            1 => DType::F16,
            26 => DType::I32,
            28 => DType::F64,
            30 => DType::BF16,
            other => bail!(
                "unsupported tensor type code {other}: use GGML_TYPE_F32 (0), GGML_TYPE_F16 (1), \
                 GGML_TYPE_I32 (26), GGML_TYPE_BF16 (30), 28 (f64, CPU backend only) or a quantized type (GGML_TYPE_Q4_0, ...)"
            ),
        })
    }

    pub fn code(self) -> i32 {
        match self {
            DType::Quant(q) => q.code(),
            DType::F32 => 0,
            DType::F16 => 1,
            DType::I32 => 26,
            DType::F64 => 28,
            DType::BF16 => 30,
        }
    }

    /// Bytes per element (per block for quantized types: ggml's `type_size`).
    pub fn size(self) -> usize {
        match self {
            DType::F64 => 8,
            DType::Quant(q) => q.type_size(),
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// ggml's name for the type ("f32", "f16", "i32", "bf16", "f64", "q4_0", ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Quant(q) => q.name(),
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
        }
    }

    /// Whether elements are stored one by one as floats (f32, f16, bf16).
    pub fn is_float(self) -> bool {
        !matches!(self, DType::I32 | DType::Quant(_))
    }

    /// The quantized type, for quantized tensors.
    pub fn quant(self) -> Option<QType> {
        match self {
            DType::Quant(q) => Some(q),
            _ => None,
        }
    }

    /// Elements per block (ggml's `blck_size`): 1 for element types.
    pub fn block_size(self) -> usize {
        self.quant().map_or(1, QType::block_size)
    }

    /// Bytes of a row of `n` elements (ggml's `row_size`); an error when `n`
    /// is not a whole number of blocks.
    pub fn row_size(self, n: usize) -> crate::Result<usize> {
        match self {
            DType::Quant(q) => q.row_size(n),
            t => n.checked_mul(t.size()).ok_or_else(|| anyhow::anyhow!("{n} {} values do not fit in memory", t.name())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for t in [DType::F32, DType::F16, DType::I32, DType::BF16, DType::F64] {
            assert_eq!(DType::from_code(t.code() as i64).unwrap(), t);
        }
        assert!(DType::from_code(4).unwrap_err().to_string().contains("GGML_TYPE_F32"));
        assert_eq!(DType::F16.size(), 2);
        assert_eq!(DType::BF16.name(), "bf16");
        assert_eq!((DType::F64.size(), DType::F64.name()), (8, "f64"));
        let q = DType::from_code(12).unwrap();
        assert_eq!((q, q.code(), q.size(), q.block_size(), q.name()), (DType::Quant(QType::Q4_K), 12, 144, 256, "q4_K"));
        assert_eq!(q.row_size(512).unwrap(), 288);
        assert!(q.row_size(100).is_err() && !q.is_float());
    }
}
