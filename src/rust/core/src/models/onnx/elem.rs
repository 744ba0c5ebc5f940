//! ONNX element types (`TensorProto.DataType`) as the importer knows them.
//!
//! Values are held on the host as f64 (floating-point types) or i64
//! (integers and booleans); on a backend every type is computed in f32, so
//! integers are exact up to 2^24 there. Host folding keeps i64 exact, so
//! shape arithmetic never loses a digit. The narrow types (float8, float4,
//! 4- and 2-bit integers) are held the same way, their values rounded to
//! what the type can hold (module `lowp`).

use anyhow::bail;

/// A supported ONNX element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    F32,
    U8,
    I8,
    U16,
    I16,
    I32,
    I64,
    Bool,
    F16,
    F64,
    U32,
    U64,
    BF16,
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    U4,
    I4,
    F4E2M1,
    F8E8M0,
    U2,
    I2,
}

impl Elem {
    /// The type of ONNX code `code`, or an error naming it.
    pub fn from_code(code: i32) -> crate::Result<Elem> {
        Ok(match code {
            1 => Elem::F32,
            2 => Elem::U8,
            3 => Elem::I8,
            4 => Elem::U16,
            5 => Elem::I16,
            6 => Elem::I32,
            7 => Elem::I64,
            9 => Elem::Bool,
            10 => Elem::F16,
            11 => Elem::F64,
            12 => Elem::U32,
            13 => Elem::U64,
            16 => Elem::BF16,
            17 => Elem::F8E4M3FN,
            18 => Elem::F8E4M3FNUZ,
            19 => Elem::F8E5M2,
            20 => Elem::F8E5M2FNUZ,
            21 => Elem::U4,
            22 => Elem::I4,
            23 => Elem::F4E2M1,
            24 => Elem::F8E8M0,
            25 => Elem::U2,
            26 => Elem::I2,
            other => bail!("element type {} is not supported", code_name(other)),
        })
    }

    pub fn code(self) -> i32 {
        match self {
            Elem::F32 => 1,
            Elem::U8 => 2,
            Elem::I8 => 3,
            Elem::U16 => 4,
            Elem::I16 => 5,
            Elem::I32 => 6,
            Elem::I64 => 7,
            Elem::Bool => 9,
            Elem::F16 => 10,
            Elem::F64 => 11,
            Elem::U32 => 12,
            Elem::U64 => 13,
            Elem::BF16 => 16,
            Elem::F8E4M3FN => 17,
            Elem::F8E4M3FNUZ => 18,
            Elem::F8E5M2 => 19,
            Elem::F8E5M2FNUZ => 20,
            Elem::U4 => 21,
            Elem::I4 => 22,
            Elem::F4E2M1 => 23,
            Elem::F8E8M0 => 24,
            Elem::U2 => 25,
            Elem::I2 => 26,
        }
    }

    pub fn name(self) -> &'static str {
        code_name(self.code())
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            Elem::F32
                | Elem::F16
                | Elem::F64
                | Elem::BF16
                | Elem::F8E4M3FN
                | Elem::F8E4M3FNUZ
                | Elem::F8E5M2
                | Elem::F8E5M2FNUZ
                | Elem::F4E2M1
                | Elem::F8E8M0
        )
    }

    /// Whether the type is narrower than a byte or a float8 (values held
    /// through module `lowp`).
    pub fn is_narrow(self) -> bool {
        self.bits() < 16 && !matches!(self, Elem::U8 | Elem::I8 | Elem::Bool)
    }

    /// Bits per element in a tensor's raw data (4- and 2-bit types are
    /// packed, the first element in the lowest bits).
    pub fn bits(self) -> usize {
        match self {
            Elem::U4 | Elem::I4 | Elem::F4E2M1 => 4,
            Elem::U2 | Elem::I2 => 2,
            other => 8 * other.size(),
        }
    }

    /// Bytes of raw data of `n` elements.
    pub fn raw_bytes(self, n: usize) -> Option<usize> {
        n.checked_mul(self.bits()).map(|b| b.div_ceil(8))
    }

    /// Bytes per element in a tensor's raw data (1 for the packed types:
    /// see [`Elem::bits`]).
    pub fn size(self) -> usize {
        match self {
            Elem::U8 | Elem::I8 | Elem::Bool => 1,
            Elem::F8E4M3FN | Elem::F8E4M3FNUZ | Elem::F8E5M2 | Elem::F8E5M2FNUZ | Elem::F8E8M0 => 1,
            Elem::U4 | Elem::I4 | Elem::F4E2M1 | Elem::U2 | Elem::I2 => 1,
            Elem::U16 | Elem::I16 | Elem::F16 | Elem::BF16 => 2,
            Elem::F32 | Elem::I32 | Elem::U32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 => 8,
        }
    }

    /// The range of an integer type (saturation bounds), None for floats.
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            Elem::U8 => (0, 255),
            Elem::I8 => (-128, 127),
            Elem::U16 => (0, 65535),
            Elem::I16 => (-32768, 32767),
            Elem::I32 => (i32::MIN as i64, i32::MAX as i64),
            Elem::U32 => (0, u32::MAX as i64),
            Elem::I64 | Elem::U64 => (i64::MIN, i64::MAX),
            Elem::Bool => (0, 1),
            Elem::U4 => (0, 15),
            Elem::I4 => (-8, 7),
            Elem::U2 => (0, 3),
            Elem::I2 => (-2, 1),
            _ => return None,
        })
    }
}

/// The ONNX name of type code `code` ("float", "int64", ...).
pub fn code_name(code: i32) -> &'static str {
    match code {
        1 => "float",
        2 => "uint8",
        3 => "int8",
        4 => "uint16",
        5 => "int16",
        6 => "int32",
        7 => "int64",
        8 => "string",
        9 => "bool",
        10 => "float16",
        11 => "double",
        12 => "uint32",
        13 => "uint64",
        14 => "complex64",
        15 => "complex128",
        16 => "bfloat16",
        17 => "float8e4m3fn",
        18 => "float8e4m3fnuz",
        19 => "float8e5m2",
        20 => "float8e5m2fnuz",
        21 => "uint4",
        22 => "int4",
        23 => "float4e2m1",
        24 => "float8e8m0",
        25 => "uint2",
        26 => "int2",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for c in [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26] {
            assert_eq!(Elem::from_code(c).unwrap().code(), c);
        }
        let e = Elem::from_code(8).unwrap_err().to_string();
        assert!(e.contains("string"), "{e}");
        assert_eq!(Elem::U8.int_range(), Some((0, 255)));
        assert!(Elem::F16.is_float() && !Elem::Bool.is_float());
    }
}
