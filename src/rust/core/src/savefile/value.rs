//! The values a saved-model file holds, and the constants of its header.

pub const MAGIC: &[u8; 8] = b"GGMLRMDL";
pub const VERSION: u32 = 1;
/// Bytes of the header before the payload.
pub const HEADER: usize = 24;
/// Nesting deeper than this is refused (a model's architecture is shallow).
pub const MAX_DEPTH: usize = 64;

/// A value of the payload.
#[derive(Debug, Clone, PartialEq)]
pub enum SaveValue {
    Null,
    /// `None` is NA.
    Logical(Vec<Option<bool>>, Attrs),
    /// `i32::MIN` is NA, as in R.
    Integer(Vec<i32>, Attrs),
    Double(Vec<f64>, Attrs),
    String(Vec<Option<String>>, Attrs),
    List(Vec<SaveValue>, Attrs),
}

/// Names and dims of a vector.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attrs {
    pub names: Option<Vec<Option<String>>>,
    pub dim: Option<Vec<i32>>,
}

impl SaveValue {
    /// Number of elements (0 for null).
    pub fn len(&self) -> usize {
        match self {
            SaveValue::Null => 0,
            SaveValue::Logical(v, _) => v.len(),
            SaveValue::Integer(v, _) => v.len(),
            SaveValue::Double(v, _) => v.len(),
            SaveValue::String(v, _) => v.len(),
            SaveValue::List(v, _) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn attrs(&self) -> Option<&Attrs> {
        match self {
            SaveValue::Null => None,
            SaveValue::Logical(_, a) | SaveValue::Integer(_, a) | SaveValue::Double(_, a) | SaveValue::String(_, a) | SaveValue::List(_, a) => Some(a),
        }
    }
}

/// The checksum of a payload (CRC-32, IEEE).
pub fn checksum(payload: &[u8]) -> u32 {
    crc32fast::hash(payload)
}
