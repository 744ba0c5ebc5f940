//! Reading tensor elements out of host memory in a kernel's compute type
//! (f32 or f64, each source converted once per node) and writing results
//! back in the destination's type and strides.

use crate::base::float::Float;
use crate::layout::convert::{decode, encode};
use crate::base::quant::{self, QType};
use crate::layout::walk::{for_each_offset, for_each_row};
use crate::layout::{Dims, Layout};
use crate::memory::BufferMem;
use crate::tensor::DataRef;
use anyhow::{bail, ensure};
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
    // BOUNDS-FN: ne is a [usize; 4] indexed by literals.
    pub fn new(d: Cow<'a, [T]>, ne: [usize; 4]) -> Src<'a, T> {
        Src { d, ne, st: [1, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]] }
    }

    /// Value at logical index (i0, i1, i2, i3).
    // BOUNDS-FN: st is a [usize; 4] indexed by literals; kernels pass ik < ne[k]
    // (the sizes their op's rule in op/shape.rs gave), and d holds every such
    // element at strides st: Src::new's d is contiguous with the product of ne
    // values, gather_strided_in's the layout's whole span.
    #[inline]
    pub fn at(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> T {
        self.d[i0 * self.st[0] + i1 * self.st[1] + i2 * self.st[2] + i3 * self.st[3]]
    }
}

/// An error unless `r`'s bytes lie in the first `mem_len` bytes of its buffer.
pub fn check_span(mem_len: usize, r: &DataRef) -> crate::Result<()> {
    ensure!(
        r.offset + r.layout.span_bytes() <= mem_len,
        "the tensor's data (offset {}, {} bytes) lies outside {}",
        r.offset,
        r.layout.span_bytes(),
        r.buf.describe()
    );
    Ok(())
}

/// The writable host bytes holding `r` (checked to lie in them).
pub fn host_mut<'m>(mem: &'m mut BufferMem, r: &DataRef) -> crate::Result<&'m mut [u8]> {
    let Some(b) = mem.host_bytes_mut() else {
        bail!("the result lives in {}, which the CPU backend cannot write", r.buf.describe());
    };
    check_span(b.len(), r)?;
    Ok(b)
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

/// Bytes of a row of a quantized layout, checking that its blocks follow
/// each other (a permuted view of quantized data cannot be read).
// BOUNDS-FN: nb and ne are Dims indexed by the literal 0.
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
// BOUNDS-FN: gather_in checked that l's span at off lies in b, and each row
// (rs bytes from its start o, quant_row checked the blocks follow each other)
// lies in that span; out holds nelements = rows * n0 values and i < rows.
fn gather_quant(q: QType, b: &[u8], off: usize, l: &Layout) -> crate::Result<Vec<f32>> {
    let rs = quant_row(q, l)?;
    let n0 = l.ne[0];
    let mut out = alloc_f32(l.nelements())?;
    let mut res = Ok(());
    for_each_row(l, off, |i, o| {
        if res.is_ok() {
            res = quant::dequantize_row(q, &b[o..o + rs], &mut out[i * n0..(i + 1) * n0]);
        }
    });
    res.map(|_| out)
}

/// Rows of values (rounded to f32) quantized into the destination's rows:
/// all rows at once, split over the threads (`quantize_chunk`), then each
/// quantized row copied to its place (the destination may be strided).
// BOUNDS-FN: host_mut checked that r's span lies in b (each row's rs bytes
// lie in it, as in gather_quant); scatter checked vals.len() == nelements, so
// the walk's i < rows and packed holds rows * rs bytes.
fn scatter_quant<T: Float>(q: QType, b: &mut [u8], r: &DataRef, vals: &[T]) -> crate::Result<()> {
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
    let rows = if n0 == 0 { 0 } else { vals.len() / n0 };
    let mut x = alloc_f32(rows * n0)?;
    for (d, v) in x.iter_mut().zip(vals) {
        *d = v.to_f32();
    }
    let packed = quant::quantize_chunk(q, &x, rows, n0, None)?;
    drop(x);
    for_each_row(l, r.offset, |i, o| b[o..o + rs].copy_from_slice(&packed[i * rs..(i + 1) * rs]));
    Ok(())
}

/// The source's values in type `T`: borrowed in place when already
/// contiguous values of that type, else converted (and packed) once.
pub fn gather<'m, T: Float>(mem: &'m BufferMem, r: &DataRef) -> crate::Result<Src<'m, T>> {
    gather_in(host(mem, r)?, r.offset, &r.layout)
}

/// [`gather`] of the tensor of layout `l` at byte `off` of `b` (whose span
/// has been checked to lie in `b`).
// BOUNDS-FN: the span of l at off is checked to lie in b first; out holds the
// n = nelements values that for_each_offset numbers (i < n).
pub fn gather_in<'m, T: Float>(b: &'m [u8], off: usize, l: &Layout) -> crate::Result<Src<'m, T>> {
    ensure!(
        off.checked_add(l.span_bytes()).is_some_and(|e| e <= b.len()),
        "internal: a source (offset {off}, {} bytes) lies outside its {} bytes",
        l.span_bytes(),
        b.len()
    );
    let n = l.nelements();
    if let Some(q) = l.dtype.quant() {
        let v = gather_quant(q, b, off, l)?;
        return Ok(Src::new(Cow::Owned(v.into_iter().map(T::from_f32).collect()), l.ne4()));
    }
    if l.dtype == T::DTYPE && l.is_contiguous() {
        if let Some(s) = typed::<T>(b, off, n) {
            return Ok(Src::new(Cow::Borrowed(s), l.ne4()));
        }
    }
    let es = std::mem::size_of::<T>();
    if l.dtype == T::DTYPE && n > 0 && l.nb.iter().all(|&x| x % es == 0) {
        if let Some(span) = typed::<T>(b, off, l.span_bytes() / es) {
            return Ok(Src::new(Cow::Owned(pack(span, l.ne, l.nb.map(|x| x / es))?), l.ne4()));
        }
    }
    let mut out = alloc::<T>(n)?;
    let dt = l.dtype;
    for_each_offset(l, off, |i, o| out[i] = decode(dt, b, o));
    Ok(Src::new(Cow::Owned(out), l.ne4()))
}

/// The elements of `span` (sizes `ne`, element strides `st`) packed in ggml order.
// BOUNDS-FN: ne and st are [usize; 5] indexed by literals; the caller's span
// holds span_bytes / es values, and the largest index, the sum of
// (ne[k] - 1) * st[k], is the last element's (span_bytes counts to its end).
fn pack<T: Float>(span: &[T], ne: Dims, st: Dims) -> crate::Result<Vec<T>> {
    let mut out = Vec::new();
    if out.try_reserve_exact(ne.iter().product()).is_err() {
        bail!("out of memory: {} {} values do not fit; use smaller tensors", ne.iter().product::<usize>(), T::DTYPE.name());
    }
    for i4 in 0..ne[4] {
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    let row = i1 * st[1] + i2 * st[2] + i3 * st[3] + i4 * st[4];
                    out.extend((0..ne[0]).map(|i0| span[row + i0 * st[0]]));
                }
            }
        }
    }
    Ok(out)
}

/// The source as [`gather`] gives it, except that values already of type
/// `T` are read in place whatever their (non-negative, element-aligned)
/// strides: `st` then holds them. For kernels that take strided operands.
pub fn gather_strided<'m, T: Float>(mem: &'m BufferMem, r: &DataRef) -> crate::Result<Src<'m, T>> {
    gather_strided_in(host(mem, r)?, r.offset, &r.layout)
}

/// [`gather_strided`] of the tensor of layout `l` at byte `off` of `b`.
pub fn gather_strided_in<'m, T: Float>(b: &'m [u8], off: usize, l: &Layout) -> crate::Result<Src<'m, T>> {
    let es = std::mem::size_of::<T>();
    if l.dtype == T::DTYPE && l.nelements() > 0 && l.nb.iter().all(|&b| b % es == 0) {
        if let Some(s) = typed::<T>(b, off, l.span_bytes() / es) {
            let st = l.nb4().map(|b| b / es);
            return Ok(Src { d: Cow::Borrowed(s), ne: l.ne4(), st });
        }
    }
    gather_in(b, off, l)
}

/// The byte just past the last one `r` addresses.
pub fn end(r: &DataRef) -> usize {
    r.offset.saturating_add(r.layout.span_bytes())
}

/// Whether the bytes of `a` and `b` overlap (same buffer, intersecting spans).
pub fn overlap(a: &DataRef, b: &DataRef) -> bool {
    a.buf.id() == b.buf.id() && a.offset < end(b) && b.offset < end(a)
}

/// The values of `T` in place over the whole of `b` (the result's own
/// span), when aligned.
pub fn span_slice<T: Float>(b: &mut [u8]) -> Option<&mut [T]> {
    let n = b.len() / std::mem::size_of::<T>();
    typed_mut::<T>(b, 0, n)
}

/// The destination's values in place, when it is contiguous, of type `T`
/// and aligned; None otherwise (the caller computes aside and scatters).
pub fn dst_slice<'m, T: Float>(mem: &'m mut BufferMem, r: &DataRef) -> crate::Result<Option<&'m mut [T]>> {
    if r.layout.dtype != T::DTYPE || !r.layout.is_contiguous() {
        return Ok(None);
    }
    let b = host_mut(mem, r)?;
    Ok(typed_mut::<T>(b, r.offset, r.layout.nelements()))
}

/// Write `vals` (ggml order) into the destination, converting to its type.
// BOUNDS-FN: vals.len() == nelements is checked first; for_each_offset numbers
// the elements i < nelements.
pub fn scatter<T: Float>(mem: &mut BufferMem, r: &DataRef, vals: &[T]) -> crate::Result<()> {
    let l = &r.layout;
    ensure!(vals.len() == l.nelements(), "internal: {} values for {} elements", vals.len(), l.nelements());
    if let Some(d) = dst_slice::<T>(mem, r)? {
        d.copy_from_slice(vals);
        return Ok(());
    }
    let b = host_mut(mem, r)?;
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
// BOUNDS-FN: ne is a Dims indexed by the literal 0; host checked that r's span
// lies in b (each unit's es bytes from its start o lie in it), and out holds
// n units of es bytes, i < n.
pub fn gather_bytes(mem: &BufferMem, r: &DataRef) -> crate::Result<Vec<u8>> {
    let b = host(mem, r)?;
    let (es, rows) = units(&r.layout)?;
    let n = if rows { r.layout.nelements() / r.layout.ne[0].max(1) } else { r.layout.nelements() };
    let mut out = vec![0u8; n * es];
    walk_units(&r.layout, r.offset, rows, |i, o| out[i * es..(i + 1) * es].copy_from_slice(&b[o..o + es]));
    Ok(out)
}

/// Write packed element bytes into a tensor's (possibly strided) memory.
// BOUNDS-FN: host_mut checked that r's span lies in b; vals is checked to hold
// a unit of es bytes for every unit the walk numbers (i < n).
pub fn scatter_bytes(mem: &mut BufferMem, r: &DataRef, vals: &[u8]) -> crate::Result<()> {
    let b = host_mut(mem, r)?;
    let (es, rows) = units(&r.layout)?;
    let n = if rows { r.layout.nelements() / r.layout.ne[0].max(1) } else { r.layout.nelements() };
    ensure!(n.checked_mul(es) == Some(vals.len()), "internal: {} bytes for {n} units of {es} bytes", vals.len());
    walk_units(&r.layout, r.offset, rows, |i, o| b[o..o + es].copy_from_slice(&vals[i * es..(i + 1) * es]));
    Ok(())
}
