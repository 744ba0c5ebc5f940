//! The ONNX file format: the protobuf messages (generated once from
//! `onnx.proto` by `tools/onnx-proto`, checked in as `proto_gen.rs`) and
//! their decoding.
//!
//! Decoding is prost's: every length read from the file is checked against
//! the bytes that remain before anything is allocated, nesting is limited,
//! and strings must be UTF-8, so a malformed or truncated file is an error,
//! never a panic or an oversized allocation. Tensor bytes (`raw_data`) stay
//! slices of the file's buffer.

#[allow(clippy::all, missing_docs)]
#[rustfmt::skip]
#[path = "proto_gen.rs"]
mod proto_gen;

pub use proto_gen::*;

use prost::bytes::Bytes;
use prost::Message;

/// A model from the bytes of an `.onnx` file.
pub fn decode_model(bytes: Bytes) -> crate::Result<ModelProto> {
    ModelProto::decode(bytes).map_err(|e| anyhow::anyhow!("the protobuf is malformed or truncated ({e})"))
}

/// A tensor from the bytes of a serialized `TensorProto` (the `.pb` files
/// of ONNX test data).
pub fn decode_tensor(bytes: Bytes) -> crate::Result<TensorProto> {
    TensorProto::decode(bytes).map_err(|e| anyhow::anyhow!("the protobuf is malformed or truncated ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncated_and_garbage_bytes_are_errors() {
        let m = ModelProto {
            ir_version: Some(8),
            producer_name: Some("test".into()),
            graph: Some(GraphProto { name: Some("g".into()), ..Default::default() }),
            ..Default::default()
        };
        let bytes = m.encode_to_vec();
        assert_eq!(decode_model(Bytes::from(bytes.clone())).unwrap(), m);
        for cut in 1..bytes.len() {
            let _ = decode_model(Bytes::copy_from_slice(&bytes[..cut]));
        }
        assert!(decode_model(Bytes::from_static(&[0x0a, 0xff, 0xff, 0xff, 0x0f])).is_err());
        let e = decode_model(Bytes::from_static(b"\x3a\x05\x12")).unwrap_err().to_string();
        assert!(e.contains("malformed or truncated"), "{e}");
    }
}
