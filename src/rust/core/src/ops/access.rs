//! Reading tensor elements out of host memory in a kernel's compute type
//! (f32 or f64, each source converted once per node) and writing results
//! back in the destination's type and strides.

use crate::buffer::BufferMem;
use crate::dtype::DType;
use crate::float::Float;
use crate::op::Layout;
use crate::tensor::TensorRef;
use anyhow::{bail, ensure};
use half::{bf16, f16};
use std::borrow::Cow;

/// A zeroed vector, or an error (not an abort) when memory runs out.
pub fn alloc<T: Float>(n: usize) -> crate::Result<Vec<T>> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        bail!("out of memory: {n} {} values do not fit; use smaller tensors", T::DTYPE.name());
    }
    v.resize(n, T::ZERO);
    Ok(v)
}

/// A zeroed f32 vector (see [`alloc`]).
pub fn alloc_f32(n: usize) -> crate::Result<Vec<f32>> {
    alloc(n)
}

/// A source as kernels see it: values in ggml order and sizes. `st` are
/// the element strides of `d`: contiguous (`[1, ne0, ne0*ne1, ...]`) for
/// every kernel but the products, which also read strided sources in place.
pub struct Src<'a, T: Float = f32> {
    pub d: Cow<'a, [T]>,
    pub ne: [usize; 4],
    pub st: [usize; 4],
}

impl<'a, T: Float> Src<'a, T> {
    /// Contiguous values `d` of sizes `ne`.
    pub fn new(d: Cow<'a, [T]>, ne: [usize; 4]) -> Src<'a, T> {
        Src { d, ne, st: [1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]] }
    }

    /// Value at logical index (i0, i1, i2, i3).
    #[inline]
    pub fn at(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> T {
        self.d[i0 * self.st[0] + i1 * self.st[1] + i2 * self.st[2] + i3 * self.st[3]]
    }
}

fn check_span(mem_len: usize, r: &TensorRef) -> crate::Result<()> {
    ensure!(
        r.offset + r.layout.span_bytes() <= mem_len,
        "the tensor's data (offset {}, {} bytes) lies outside {}",
        r.offset,
        r.layout.span_bytes(),
        r.buf.describe()
    );
    Ok(())
}

fn host<'m>(mem: &'m BufferMem, r: &TensorRef) -> crate::Result<&'m [u8]> {
    match mem.host_bytes() {
        Some(b) => {
            check_span(b.len(), r)?;
            Ok(b)
        }
        None => bail!(
            "the tensor lives in {}, which the CPU backend cannot read",
            r.buf.describe()
        ),
    }
}

/// Calls `f(logical_index, byte_offset)` for every element, in ggml order.
#[inline]
pub fn for_each_offset(l: &Layout, base: usize, mut f: impl FnMut(usize, usize)) {
    let [n0, n1, n2, n3] = l.ne;
    let mut i = 0;
    for i3 in 0..n3 {
        for i2 in 0..n2 {
            for i1 in 0..n1 {
                let row = base + i1 * l.nb[1] + i2 * l.nb[2] + i3 * l.nb[3];
                for i0 in 0..n0 {
                    f(i, row + i0 * l.nb[0]);
                    i += 1;
                }
            }
        }
    }
}

/// The element of type `dt` at byte `o` of `b`, in the compute type.
#[inline]
fn decode<T: Float>(dt: DType, b: &[u8], o: usize) -> T {
    match dt {
        DType::F32 => T::from_f32(f32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])),
        DType::F16 => T::from_f32(f16::from_ne_bytes([b[o], b[o + 1]]).to_f32()),
        DType::BF16 => T::from_f32(bf16::from_ne_bytes([b[o], b[o + 1]]).to_f32()),
        DType::I32 => T::from_f64(i32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as f64),
        DType::F64 => T::from_f64(f64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"))),
    }
}

/// Stores `v` at byte `o` of `b` as type `dt` (rounded once).
#[inline]
fn encode<T: Float>(dt: DType, v: T, b: &mut [u8], o: usize) {
    match dt {
        DType::F32 => b[o..o + 4].copy_from_slice(&v.to_f32().to_ne_bytes()),
        DType::F16 => b[o..o + 2].copy_from_slice(&v.to_f16().to_ne_bytes()),
        DType::BF16 => b[o..o + 2].copy_from_slice(&v.to_bf16().to_ne_bytes()),
        DType::I32 => b[o..o + 4].copy_from_slice(&(v.round().to_f64() as i32).to_ne_bytes()),
        DType::F64 => b[o..o + 8].copy_from_slice(&v.to_f64().to_ne_bytes()),
    }
}

/// `n` values of type `T` at byte `offset` of `bytes`, read in place, when
/// they are there and aligned.
fn typed<T: Float>(bytes: &[u8], offset: usize, n: usize) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    let end = offset.checked_add(n.checked_mul(size)?)?;
    let region = bytes.get(offset..end)?;
    if region.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
        return None;
    }
    // SAFETY: the region holds exactly `n` values of `T` (length checked
    // above), it is aligned for `T` (checked), and every bit pattern is a
    // valid f32 or f64; the slice borrows `bytes`, so it lives no longer.
    Some(unsafe { std::slice::from_raw_parts(region.as_ptr() as *const T, n) })
}

/// As [`typed`], mutable.
fn typed_mut<T: Float>(bytes: &mut [u8], offset: usize, n: usize) -> Option<&mut [T]> {
    let size = std::mem::size_of::<T>();
    let end = offset.checked_add(n.checked_mul(size)?)?;
    let region = bytes.get_mut(offset..end)?;
    if region.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
        return None;
    }
    // SAFETY: as in `typed`; the borrow of `bytes` is exclusive.
    Some(unsafe { std::slice::from_raw_parts_mut(region.as_mut_ptr() as *mut T, n) })
}

/// The source's values in type `T`: borrowed in place when already
/// contiguous values of that type, else converted (and packed) once.
pub fn gather<'m, T: Float>(mem: &'m BufferMem, r: &TensorRef) -> crate::Result<Src<'m, T>> {
    let l = &r.layout;
    let n = l.nelements();
    let b = host(mem, r)?;
    if l.dtype == T::DTYPE && l.is_contiguous() {
        if let Some(s) = typed::<T>(b, r.offset, n) {
            return Ok(Src::new(Cow::Borrowed(s), l.ne));
        }
    }
    let mut out = alloc::<T>(n)?;
    let dt = l.dtype;
    for_each_offset(l, r.offset, |i, o| out[i] = decode(dt, b, o));
    Ok(Src::new(Cow::Owned(out), l.ne))
}

/// The source as [`gather`] gives it, except that values already of type
/// `T` are read in place whatever their (non-negative, element-aligned)
/// strides: `st` then holds them. For kernels that take strided operands.
pub fn gather_strided<'m, T: Float>(mem: &'m BufferMem, r: &TensorRef) -> crate::Result<Src<'m, T>> {
    let l = &r.layout;
    let es = std::mem::size_of::<T>();
    if l.dtype == T::DTYPE && l.nelements() > 0 && l.nb.iter().all(|&b| b % es == 0) {
        let b = host(mem, r)?;
        if let Some(s) = typed::<T>(b, r.offset, l.span_bytes() / es) {
            let st = l.nb.map(|b| b / es);
            return Ok(Src { d: Cow::Borrowed(s), ne: l.ne, st });
        }
    }
    gather(mem, r)
}

/// The destination's values in place, when it is contiguous, of type `T`
/// and aligned; None otherwise (the caller computes aside and scatters).
pub fn dst_slice<'m, T: Float>(mem: &'m mut BufferMem, r: &TensorRef) -> crate::Result<Option<&'m mut [T]>> {
    if r.layout.dtype != T::DTYPE || !r.layout.is_contiguous() {
        return Ok(None);
    }
    let Some(b) = mem.host_bytes_mut() else {
        bail!("the result lives in {}, which the CPU backend cannot write", r.buf.describe());
    };
    check_span(b.len(), r)?;
    Ok(typed_mut::<T>(b, r.offset, r.layout.nelements()))
}

/// Write `vals` (ggml order) into the destination, converting to its type.
pub fn scatter<T: Float>(mem: &mut BufferMem, r: &TensorRef, vals: &[T]) -> crate::Result<()> {
    let l = &r.layout;
    ensure!(vals.len() == l.nelements(), "internal: {} values for {} elements", vals.len(), l.nelements());
    if let Some(d) = dst_slice::<T>(mem, r)? {
        d.copy_from_slice(vals);
        return Ok(());
    }
    let Some(b) = mem.host_bytes_mut() else {
        bail!("the result lives in {}, which the CPU backend cannot write", r.buf.describe());
    };
    check_span(b.len(), r)?;
    let dt = l.dtype;
    for_each_offset(l, r.offset, |i, o| encode(dt, vals[i], b, o));
    Ok(())
}

/// The element bytes of a tensor, packed in ggml order (no conversion).
pub fn gather_bytes(mem: &BufferMem, r: &TensorRef) -> crate::Result<Vec<u8>> {
    let b = host(mem, r)?;
    let es = r.layout.dtype.size();
    let mut out = vec![0u8; r.layout.nelements() * es];
    for_each_offset(&r.layout, r.offset, |i, o| out[i * es..(i + 1) * es].copy_from_slice(&b[o..o + es]));
    Ok(out)
}

/// Write packed element bytes into a tensor's (possibly strided) memory.
pub fn scatter_bytes(mem: &mut BufferMem, r: &TensorRef, vals: &[u8]) -> crate::Result<()> {
    let Some(b) = mem.host_bytes_mut() else {
        bail!("the result lives in {}, which the CPU backend cannot write", r.buf.describe());
    };
    check_span(b.len(), r)?;
    let es = r.layout.dtype.size();
    for_each_offset(&r.layout, r.offset, |i, o| b[o..o + es].copy_from_slice(&vals[i * es..(i + 1) * es]));
    Ok(())
}

/// f64 values of packed element bytes of type `dt` (for R): exact.
pub fn decode_all(dt: DType, bytes: &[u8]) -> Vec<f64> {
    let es = dt.size();
    (0..bytes.len() / es).map(|i| decode::<f64>(dt, bytes, i * es)).collect()
}

/// Packed element bytes of type `dt` from f64 values (from R). Values for
/// f16 and bf16 tensors are rounded to f32 first, as ggml's setters do.
pub fn encode_all(dt: DType, vals: &[f64]) -> Vec<u8> {
    let es = dt.size();
    let mut out = vec![0u8; vals.len() * es];
    for (i, &v) in vals.iter().enumerate() {
        match dt {
            DType::I32 | DType::F64 => encode(dt, v, &mut out, i * es),
            _ => encode(dt, v as f32, &mut out, i * es),
        }
    }
    out
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
