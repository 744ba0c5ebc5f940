//! Element conversion between a tensor's storage type and f32 / f64 values,
//! in native byte order. Quantized types have no single-element form: their
//! values move a row at a time through `base::quant` (callers route them
//! there; here they read as NaN and are not written).

use crate::base::dtype::DType;
use crate::base::float::Float;

/// The `N` bytes at byte `o` of `b`, if they lie in it.
#[inline]
fn bytes_at<const N: usize>(b: &[u8], o: usize) -> Option<[u8; N]> {
    b.get(o..).and_then(<[u8]>::first_chunk::<N>).copied()
}

/// Store `v` at byte `o` of `b` if its `N` bytes lie in it.
#[inline]
fn put_at<const N: usize>(b: &mut [u8], o: usize, v: [u8; N]) {
    if let Some(d) = b.get_mut(o..).and_then(<[u8]>::first_chunk_mut::<N>) {
        *d = v;
    }
}

/// The value at byte `o` of `b`, stored as `dt`, in the compute type `T`
/// (f32 for f32, f16 and bf16 storage read as before; f64 exact). Callers
/// check that the tensor's span lies in `b`; bytes outside it read as NaN.
#[inline]
pub fn decode<T: Float>(dt: DType, b: &[u8], o: usize) -> T {
    use half::{bf16, f16};
    let nan = T::from_f32(f32::NAN);
    match dt {
        DType::F32 => bytes_at(b, o).map_or(nan, |v| T::from_f32(f32::from_ne_bytes(v))),
        DType::F16 => bytes_at(b, o).map_or(nan, |v| T::from_f32(f16::from_ne_bytes(v).to_f32())),
        DType::BF16 => bytes_at(b, o).map_or(nan, |v| T::from_f32(bf16::from_ne_bytes(v).to_f32())),
        DType::I32 => bytes_at(b, o).map_or(nan, |v| T::from_f64(i32::from_ne_bytes(v) as f64)),
        DType::F64 => bytes_at(b, o).map_or(nan, |v| T::from_f64(f64::from_ne_bytes(v))),
        DType::Quant(_) => nan,
    }
}

/// Store `v` at byte `o` of `b` as `dt` (rounded once; to nearest for i32).
/// Callers check that the tensor's span lies in `b`; bytes outside it are
/// not written.
#[inline]
pub fn encode<T: Float>(dt: DType, v: T, b: &mut [u8], o: usize) {
    match dt {
        DType::F32 => put_at(b, o, v.to_f32().to_ne_bytes()),
        DType::F16 => put_at(b, o, v.to_f16().to_ne_bytes()),
        DType::BF16 => put_at(b, o, v.to_bf16().to_ne_bytes()),
        DType::I32 => put_at(b, o, (v.round().to_f64() as i32).to_ne_bytes()),
        DType::F64 => put_at(b, o, v.to_f64().to_ne_bytes()),
        DType::Quant(_) => {}
    }
}

/// f64 values of packed element bytes of type `dt` (for R): exact.
pub fn decode_all(dt: DType, bytes: &[u8]) -> Vec<f64> {
    let es = dt.size();
    match dt {
        // One loop per type (the type's test hoisted out of the loop).
        // BOUNDS: `c` is a chunks_exact(4) / chunks_exact(8) chunk indexed
        // below 4 / 8.
        DType::F32 => bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        DType::F64 => bytes.chunks_exact(8).map(|c| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect(),
        _ => (0..bytes.len() / es).map(|i| decode::<f64>(dt, bytes, i * es)).collect(),
    }
}

/// Packed element bytes of type `dt` from f64 values (from R). Values for
/// f32, f16 and bf16 tensors are rounded to f32 first, as ggml's setters do.
pub fn encode_all(dt: DType, vals: &[f64]) -> Vec<u8> {
    let mut out = vec![0u8; vals.len() * dt.size()];
    encode_into(dt, vals, &mut out);
    out
}

/// [`encode_all`] into `out`, which holds `vals.len()` elements of `dt`
/// (an upload writes them straight into host memory this way).
pub fn encode_into(dt: DType, vals: &[f64], out: &mut [u8]) {
    let es = dt.size();
    // One loop per type (the type's test hoisted out of the loop); f32 on
    // aligned bytes as f32 values, so that the conversion vectorises.
    match dt {
        DType::F64 => out.chunks_exact_mut(8).zip(vals).for_each(|(c, v)| c.copy_from_slice(&v.to_ne_bytes())),
        DType::F32 => match bytemuck::try_cast_slice_mut::<u8, f32>(out) {
            Ok(o) => o.iter_mut().zip(vals).for_each(|(o, &v)| *o = v as f32),
            Err(_) => out.chunks_exact_mut(4).zip(vals).for_each(|(c, &v)| c.copy_from_slice(&(v as f32).to_ne_bytes())),
        },
        DType::I32 => vals.iter().enumerate().for_each(|(i, &v)| encode(dt, v, out, i * es)),
        _ => vals.iter().enumerate().for_each(|(i, &v)| encode(dt, v as f32, out, i * es)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_round_trips_exactly_and_others_as_before() {
        let v = [0.1, -1.0 / 3.0, 1e300, 5e-324];
        assert_eq!(decode_all(DType::F64, &encode_all(DType::F64, &v)), v.to_vec());
        // f32 and half types round through f32; i32 rounds to nearest.
        let r = decode_all(DType::F16, &encode_all(DType::F16, &[0.1]))[0];
        assert_eq!(r, half::f16::from_f32(0.1f32).to_f64());
        assert_eq!(decode_all(DType::I32, &encode_all(DType::I32, &[2.6, -2.6])), vec![3.0, -3.0]);
        assert_eq!(decode_all(DType::F32, &encode_all(DType::F32, &[0.1]))[0], 0.1f32 as f64);
    }
}
