//! GGUF metadata values and their type codes, and the tensor types a GGUF
//! file can hold (ggml's type codes, with their block sizes).

use crate::base::dtype::DType;
use crate::base::quant::QType;

/// A metadata value type (GGUF's `gguf_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    Str = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub const ALL: [ValueType; 13] = {
        use ValueType::*;
        [U8, I8, U16, I16, U32, I32, F32, Bool, Str, Array, U64, I64, F64]
    };

    pub fn from_code(c: u32) -> Option<ValueType> {
        ValueType::ALL.into_iter().find(|t| *t as u32 == c)
    }

    /// "uint8", "int32", "float32", "bool", "string", "array", ...
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "uint8",
            I8 => "int8",
            U16 => "uint16",
            I16 => "int16",
            U32 => "uint32",
            I32 => "int32",
            F32 => "float32",
            Bool => "bool",
            Str => "string",
            Array => "array",
            U64 => "uint64",
            I64 => "int64",
            F64 => "float64",
        }
    }

    pub fn from_name(s: &str) -> Option<ValueType> {
        ValueType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Bytes of one value in a file (strings and arrays: their smallest size).
    pub fn min_size(self) -> usize {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | Str => 8,
            Array => 12,
        }
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    /// Element type and elements (all of that type; nested arrays allowed).
    Array(ValueType, Vec<GgufValue>),
}

impl GgufValue {
    pub fn kind(&self) -> ValueType {
        use GgufValue::*;
        match self {
            U8(_) => ValueType::U8,
            I8(_) => ValueType::I8,
            U16(_) => ValueType::U16,
            I16(_) => ValueType::I16,
            U32(_) => ValueType::U32,
            I32(_) => ValueType::I32,
            F32(_) => ValueType::F32,
            Bool(_) => ValueType::Bool,
            Str(_) => ValueType::Str,
            U64(_) => ValueType::U64,
            I64(_) => ValueType::I64,
            F64(_) => ValueType::F64,
            Array(..) => ValueType::Array,
        }
    }

    /// "uint32", "array[string]", "array[array[int32]]".
    pub fn type_name(&self) -> String {
        match self {
            GgufValue::Array(t, v) => match (t, v.first()) {
                (ValueType::Array, Some(inner)) => format!("array[{}]", inner.type_name()),
                _ => format!("array[{}]", t.name()),
            },
            v => v.kind().name().to_string(),
        }
    }

    /// The value as f64, for numbers and booleans.
    pub fn as_f64(&self) -> Option<f64> {
        use GgufValue::*;
        Some(match *self {
            U8(v) => v as f64,
            I8(v) => v as f64,
            U16(v) => v as f64,
            I16(v) => v as f64,
            U32(v) => v as f64,
            I32(v) => v as f64,
            F32(v) => v as f64,
            Bool(v) => v as u8 as f64,
            U64(v) => v as f64,
            I64(v) => v as f64,
            F64(v) => v,
            Str(_) | Array(..) => return None,
        })
    }
}

/// A tensor type of a GGUF file: an engine type, or one of the integer and
/// f64 types GGUF also defines (read as values, not as engine tensors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorType {
    Engine(DType),
    I8,
    I16,
    I64,
    F64,
}

impl TensorType {
    pub fn from_code(c: u32) -> Option<TensorType> {
        Some(match c {
            24 => TensorType::I8,
            25 => TensorType::I16,
            27 => TensorType::I64,
            28 => TensorType::F64,
            c => TensorType::Engine(DType::from_code(c as i64).ok()?),
        })
    }

    pub fn code(self) -> u32 {
        match self {
            TensorType::Engine(d) => d.code() as u32,
            TensorType::I8 => 24,
            TensorType::I16 => 25,
            TensorType::I64 => 27,
            TensorType::F64 => 28,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TensorType::Engine(d) => d.name(),
            TensorType::I8 => "i8",
            TensorType::I16 => "i16",
            TensorType::I64 => "i64",
            TensorType::F64 => "f64",
        }
    }

    /// (elements per block, bytes per block).
    pub fn block(self) -> (usize, usize) {
        match self {
            TensorType::Engine(d) => (d.block_size(), d.size()),
            TensorType::I8 => (1, 1),
            TensorType::I16 => (1, 2),
            TensorType::I64 | TensorType::F64 => (1, 8),
        }
    }

    pub fn quant(self) -> Option<QType> {
        match self {
            TensorType::Engine(d) => d.quant(),
            _ => None,
        }
    }
}

/// One tensor's description in a GGUF file.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensorInfo {
    pub name: String,
    pub n_dims: usize,
    /// Sizes, ne0 fastest (ggml's order), 1 beyond `n_dims`.
    pub ne: [usize; 4],
    pub ty: TensorType,
    /// Byte offset from the start of the data section.
    pub offset: usize,
    pub nbytes: usize,
}

impl GgufTensorInfo {
    pub fn nelements(&self) -> usize {
        self.ne.iter().fold(1usize, |a, &n| a.saturating_mul(n))
    }
}

/// Everything before the tensor data.
#[derive(Debug, Clone)]
pub struct Header {
    pub version: u32,
    pub alignment: usize,
    pub kv: Vec<(String, GgufValue)>,
    pub tensors: Vec<GgufTensorInfo>,
    /// Byte offset of the data section in the file.
    pub data_start: usize,
}
