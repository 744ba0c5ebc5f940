//! Element conversion between a tensor's storage type and f32 / f64 values,
//! in native byte order. Quantized types have no single-element form: their
//! values move a row at a time through `base::quant` (callers route them
//! there; here they read as NaN and are not written).

use crate::base::dtype::DType;
use half::{bf16, f16};

/// The value at byte `o` of `b`, stored as `dt`, as f32.
#[inline]
pub fn decode(dt: DType, b: &[u8], o: usize) -> f32 {
    match dt {
        DType::Quant(_) => f32::NAN,
        DType::F32 => f32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]),
        DType::F16 => f16::from_ne_bytes([b[o], b[o + 1]]).to_f32(),
        DType::BF16 => bf16::from_ne_bytes([b[o], b[o + 1]]).to_f32(),
        DType::I32 => i32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as f32,
    }
}

/// Store `v` at byte `o` of `b` as `dt` (rounded for i32).
#[inline]
pub fn encode(dt: DType, v: f32, b: &mut [u8], o: usize) {
    match dt {
        DType::Quant(_) => {}
        DType::F32 => b[o..o + 4].copy_from_slice(&v.to_ne_bytes()),
        DType::F16 => b[o..o + 2].copy_from_slice(&f16::from_f32(v).to_ne_bytes()),
        DType::BF16 => b[o..o + 2].copy_from_slice(&bf16::from_f32(v).to_ne_bytes()),
        DType::I32 => b[o..o + 4].copy_from_slice(&(v.round() as i32).to_ne_bytes()),
    }
}

/// f64 values of packed element bytes of type `dt` (for R).
pub fn decode_all(dt: DType, bytes: &[u8]) -> Vec<f64> {
    let es = dt.size();
    (0..bytes.len() / es)
        .map(|i| match dt {
            DType::I32 => i32::from_ne_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap()) as f64,
            _ => decode(dt, bytes, i * es) as f64,
        })
        .collect()
}

/// Packed element bytes of type `dt` from f64 values (from R).
pub fn encode_all(dt: DType, vals: &[f64]) -> Vec<u8> {
    let es = dt.size();
    let mut out = vec![0u8; vals.len() * es];
    for (i, &v) in vals.iter().enumerate() {
        match dt {
            DType::I32 => out[i * 4..i * 4 + 4].copy_from_slice(&(v.round() as i32).to_ne_bytes()),
            _ => encode(dt, v as f32, &mut out, i * es),
        }
    }
    out
}
