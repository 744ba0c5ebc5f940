//! Reading tensor elements out of host memory as f32 (each source converted
//! once per node) and writing results back in the destination's type and strides.

use crate::base::dtype::DType;
use crate::layout::convert::{decode, encode};
use crate::layout::walk::for_each_offset;
use crate::memory::BufferMem;
use crate::tensor::DataRef;
use anyhow::{bail, ensure};
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

fn check_span(mem_len: usize, r: &DataRef) -> crate::Result<()> {
    ensure!(
        r.offset + r.layout.span_bytes() <= mem_len,
        "the tensor's data (offset {}, {} bytes) lies outside {}",
        r.offset,
        r.layout.span_bytes(),
        r.buf.describe()
    );
    Ok(())
}

fn host<'m>(mem: &'m BufferMem, r: &DataRef) -> crate::Result<&'m [u8]> {
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

/// The source's values as f32: borrowed in place when already contiguous f32.
pub fn gather<'m>(mem: &'m BufferMem, r: &DataRef) -> crate::Result<Src<'m>> {
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
pub fn scatter(mem: &mut BufferMem, r: &DataRef, vals: &[f32]) -> crate::Result<()> {
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
pub fn gather_bytes(mem: &BufferMem, r: &DataRef) -> crate::Result<Vec<u8>> {
    let b = host(mem, r)?;
    let es = r.layout.dtype.size();
    let mut out = vec![0u8; r.layout.nelements() * es];
    for_each_offset(&r.layout, r.offset, |i, o| out[i * es..(i + 1) * es].copy_from_slice(&b[o..o + es]));
    Ok(out)
}

/// Write packed element bytes into a tensor's (possibly strided) memory.
pub fn scatter_bytes(mem: &mut BufferMem, r: &DataRef, vals: &[u8]) -> crate::Result<()> {
    let Some(b) = mem.host_bytes_mut() else {
        bail!("the result lives in {}, which the CPU backend cannot write", r.buf.describe());
    };
    check_span(b.len(), r)?;
    let es = r.layout.dtype.size();
    for_each_offset(&r.layout, r.offset, |i, o| b[o..o + es].copy_from_slice(&vals[i * es..(i + 1) * es]));
    Ok(())
}

