//! The saved-model file: a format tag, a version, the payload's length and
//! CRC-32, then the payload, a tree of plain values (vectors of logicals,
//! integers, doubles and strings, lists; with names and dims). Nothing in it
//! is code, and reading it runs none: the reader only decodes values, checks
//! every length against the bytes that are left before it allocates, and
//! refuses a corrupted, truncated or foreign file with an error that says so.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "GGMLRMDL"
//!      8     4  format version (u32, little-endian), currently 1
//!     12     8  payload length in bytes (u64)
//!     20     4  CRC-32 (IEEE) of the payload (u32)
//!     24     n  payload: one value
//! value:  tag (u8: 0 null, 1 logical, 2 integer, 3 double, 4 string, 5 list),
//!         then, except for null, a length (u64) and the elements
//!         (logical: u8 0/1/2 = NA; integer: i32, i32::MIN = NA; double: f64;
//!         string: u32 byte length, u32::MAX = NA, then UTF-8 bytes; list:
//!         values), then an attribute byte (bit 0: names follow, a string
//!         value of the same length; bit 1: dim follows, an integer value
//!         whose product is the length).
//! ```

pub mod read;
pub mod value;
pub mod write;

pub use read::decode;
pub use value::{checksum, Attrs, SaveValue, HEADER, MAGIC, MAX_DEPTH, VERSION};
pub use write::{encode, write_atomic};

#[cfg(test)]
mod tests;
