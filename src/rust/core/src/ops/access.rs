//! Reading tensor elements out of host memory as f32 (each source converted
//! once per node) and writing results back in the destination's type and strides.

use crate::buffer::BufferMem;
use crate::dtype::DType;
use crate::op::Layout;
use crate::tensor::TensorRef;
use anyhow::{bail, ensure};
use half::{bf16, f16};
use std::borrow::Cow;

/// A zeroed f32 vector, or an error (not an abort) when memory runs out.
pub fn alloc_f32(n: usize) -> crate::Result<Vec<f32>> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        bail!("out of memory: {n} f32 values do not fit; use smaller tensors");
    }
    v.resize(n, 0.0);
    Ok(v)
}

/// A source as kernels see it: contiguous f32 values in ggml order, and sizes.
pub struct Src<'a> {
    pub d: Cow<'a, [f32]>,
    pub ne: [usize; 4],
}

impl Src<'_> {
    /// Value at logical index (i0, i1, i2, i3).
    #[inline]
    pub fn at(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f32 {
        self.d[i0 + self.ne[0] * (i1 + self.ne[1] * (i2 + self.ne[2] * i3))]
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

#[inline]
fn decode(dt: DType, b: &[u8], o: usize) -> f32 {
    match dt {
        DType::F32 => f32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]),
        DType::F16 => f16::from_ne_bytes([b[o], b[o + 1]]).to_f32(),
        DType::BF16 => bf16::from_ne_bytes([b[o], b[o + 1]]).to_f32(),
        DType::I32 => i32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as f32,
    }
}

#[inline]
fn encode(dt: DType, v: f32, b: &mut [u8], o: usize) {
    match dt {
        DType::F32 => b[o..o + 4].copy_from_slice(&v.to_ne_bytes()),
        DType::F16 => b[o..o + 2].copy_from_slice(&f16::from_f32(v).to_ne_bytes()),
        DType::BF16 => b[o..o + 2].copy_from_slice(&bf16::from_f32(v).to_ne_bytes()),
        DType::I32 => b[o..o + 4].copy_from_slice(&(v.round() as i32).to_ne_bytes()),
    }
}

/// The source's values as f32: borrowed in place when already contiguous f32.
pub fn gather<'m>(mem: &'m BufferMem, r: &TensorRef) -> crate::Result<Src<'m>> {
    let l = &r.layout;
    let n = l.nelements();
    if l.dtype == DType::F32 && l.is_contiguous() {
        if let Some(s) = mem.host_f32(r.offset, n) {
            return Ok(Src { d: Cow::Borrowed(s), ne: l.ne });
        }
    }
    let b = host(mem, r)?;
    let mut out = alloc_f32(n)?;
    let dt = l.dtype;
    for_each_offset(l, r.offset, |i, o| out[i] = decode(dt, b, o));
    Ok(Src { d: Cow::Owned(out), ne: l.ne })
}

/// Write `vals` (ggml order) into the destination, converting to its type.
pub fn scatter(mem: &mut BufferMem, r: &TensorRef, vals: &[f32]) -> crate::Result<()> {
    let l = &r.layout;
    ensure!(vals.len() == l.nelements(), "internal: {} values for {} elements", vals.len(), l.nelements());
    if l.dtype == DType::F32 && l.is_contiguous() {
        if let Some(d) = mem.host_f32_mut(r.offset, vals.len()) {
            d.copy_from_slice(vals);
            return Ok(());
        }
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
