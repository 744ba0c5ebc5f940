//! Reading tensor elements out of host memory as f32 (each source converted
//! once per node) and writing results back in the destination's type and strides.

use crate::base::dtype::DType;
use crate::layout::convert::{decode, encode};
use crate::base::quant::{self, QType};
use crate::layout::walk::{for_each_offset, for_each_row};
use crate::layout::Layout;
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

pub fn host<'m>(mem: &'m BufferMem, r: &DataRef) -> crate::Result<&'m [u8]> {
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

/// Bytes of a row of a quantized layout, checking that its blocks follow
/// each other (a permuted view of quantized data cannot be read).
fn quant_row(q: QType, l: &Layout) -> crate::Result<usize> {
    ensure!(
        l.nb[0] == q.type_size(),
        "a {} tensor's values are read a row of blocks at a time; this view does not keep \
         its first dimension's blocks together (a transposed or permuted view); use a view \
         that keeps whole rows",
        q.name()
    );
    q.row_size(l.ne[0])
}

/// Quantized rows dequantized to f32, in ggml order.
fn gather_quant(q: QType, b: &[u8], r: &DataRef) -> crate::Result<Vec<f32>> {
    let l = &r.layout;
    let rs = quant_row(q, l)?;
    let n0 = l.ne[0];
    let mut out = alloc_f32(l.nelements())?;
    let mut res = Ok(());
    for_each_row(l, r.offset, |i, o| {
        if res.is_ok() {
            res = quant::dequantize_row(q, &b[o..o + rs], &mut out[i * n0..(i + 1) * n0]);
        }
    });
    res.map(|_| out)
}

/// f32 rows quantized into the destination's rows.
fn scatter_quant(q: QType, b: &mut [u8], r: &DataRef, vals: &[f32]) -> crate::Result<()> {
    let l = &r.layout;
    let rs = quant_row(q, l)?;
    let n0 = l.ne[0];
    ensure!(
        !q.requires_imatrix(),
        "{} is only made with an importance matrix: quantize the values with quantize_{}(x, \
         n_rows, n_per_row, imatrix) and set the tensor's bytes",
        q.name(),
        q.name()
    );
    let mut res = Ok(());
    for_each_row(l, r.offset, |i, o| {
        if res.is_ok() {
            let row = &vals[i * n0..(i + 1) * n0];
            res = quant::quantize_chunk(q, row, 1, n0, None).map(|bytes| b[o..o + rs].copy_from_slice(&bytes));
        }
    });
    res
}

/// The source's values as f32: borrowed in place when already contiguous f32.
pub fn gather<'m>(mem: &'m BufferMem, r: &DataRef) -> crate::Result<Src<'m>> {
    let l = &r.layout;
    let n = l.nelements();
    if let Some(q) = l.dtype.quant() {
        let b = host(mem, r)?;
        return Ok(Src { d: Cow::Owned(gather_quant(q, b, r)?), ne: l.ne });
    }
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
    if let Some(q) = l.dtype.quant() {
        return scatter_quant(q, b, r, vals);
    }
    let dt = l.dtype;
    for_each_offset(l, r.offset, |i, o| encode(dt, vals[i], b, o));
    Ok(())
}

/// (bytes per unit, the walk over units): elements, or rows of blocks.
fn units(l: &Layout) -> crate::Result<(usize, bool)> {
    match l.dtype.quant() {
        Some(q) => Ok((quant_row(q, l)?, true)),
        None => Ok((l.dtype.size(), false)),
    }
}

fn walk_units(l: &Layout, base: usize, rows: bool, f: impl FnMut(usize, usize)) {
    if rows {
        for_each_row(l, base, f)
    } else {
        for_each_offset(l, base, f)
    }
}

/// The element bytes of a tensor, packed in ggml order (no conversion).
pub fn gather_bytes(mem: &BufferMem, r: &DataRef) -> crate::Result<Vec<u8>> {
    let b = host(mem, r)?;
    let (es, rows) = units(&r.layout)?;
    let n = if rows { r.layout.nelements() / r.layout.ne[0].max(1) } else { r.layout.nelements() };
    let mut out = vec![0u8; n * es];
    walk_units(&r.layout, r.offset, rows, |i, o| out[i * es..(i + 1) * es].copy_from_slice(&b[o..o + es]));
    Ok(out)
}

/// Write packed element bytes into a tensor's (possibly strided) memory.
pub fn scatter_bytes(mem: &mut BufferMem, r: &DataRef, vals: &[u8]) -> crate::Result<()> {
    let Some(b) = mem.host_bytes_mut() else {
        bail!("the result lives in {}, which the CPU backend cannot write", r.buf.describe());
    };
    check_span(b.len(), r)?;
    let (es, rows) = units(&r.layout)?;
    walk_units(&r.layout, r.offset, rows, |i, o| b[o..o + es].copy_from_slice(&vals[i * es..(i + 1) * es]));
    Ok(())
}

