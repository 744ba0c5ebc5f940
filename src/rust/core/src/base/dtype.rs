//! Element types. The numeric codes are ggml's, so `GGML_TYPE_*` constants in
//! R keep their usual values.

use anyhow::bail;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum DType {
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
        Ok(match code {
            0 => DType::F32,
            1 => DType::F16,
            26 => DType::I32,
            28 => DType::F64,
            30 => DType::BF16,
            other => bail!(
                "unsupported tensor type code {other}: use GGML_TYPE_F32 (0), GGML_TYPE_F16 (1), \
                 GGML_TYPE_I32 (26), GGML_TYPE_BF16 (30) or 28 (f64, CPU backend only)"
            ),
        })
    }

    pub fn code(self) -> i32 {
        self as i32
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
        }
    }

    /// ggml's name for the type ("f32", "f16", "i32", "bf16", "f64").
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
        }
    }

    pub fn is_float(self) -> bool {
        !matches!(self, DType::I32)
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
        assert!(DType::from_code(2).unwrap_err().to_string().contains("GGML_TYPE_F32"));
        assert_eq!(DType::F16.size(), 2);
        assert_eq!(DType::BF16.name(), "bf16");
        assert_eq!((DType::F64.size(), DType::F64.name()), (8, "f64"));
    }
}
