//! Moving tensor values between the engine and the caller (R), as f64 in ggml
//! element order, converting to and from the tensor's type. Each transfer is
//! one upload or download on the tensor's buffer.

use super::descriptor::Tensor;
use crate::base::dtype::DType;
use crate::layout::convert::{decode_all, encode_all, encode_into};
use crate::base::quant::{self, QType};
use crate::layout::walk::{for_each_offset, for_each_row};
use anyhow::ensure;

fn check_range(t: &Tensor, first: usize, n: usize) -> crate::Result<()> {
    ensure!(
        first + n <= t.nelements(),
        "{} has {} elements; elements {}..{} do not exist",
        t.describe(),
        t.nelements(),
        first,
        first + n
    );
    Ok(())
}

/// Write `vals` into `t` starting at element `first`.
pub fn set_values(t: &Tensor, vals: &[f64], first: usize) -> crate::Result<()> {
    let r = t.resolve()?;
    check_range(t, first, vals.len())?;
    if let Some(q) = r.layout.dtype.quant() {
        return set_quantized(t, q, vals, first);
    }
    if r.layout.dtype == DType::I32 {
        if let Some(bad) = vals.iter().find(|v| !v.is_finite() || v.abs() > i32::MAX as f64) {
            anyhow::bail!("{} holds 32-bit integers; {bad} is not one (NA, infinite or too large)", t.describe());
        }
    }
    let what = t.describe();
    let es = r.layout.dtype.size();
    if r.layout.is_contiguous() {
        // f64 values into an f64 tensor are its bytes already: one copy.
        if r.layout.dtype == DType::F64 {
            return r.buf.write_bytes(r.offset + first * es, bytemuck::cast_slice(vals), &what);
        }
        let dt = r.layout.dtype;
        return r.buf.write_with(r.offset + first * es, vals.len() * es, &what, |to| encode_into(dt, vals, to));
    }
    // Strided: update the spanned bytes element by element.
    let span = r.layout.span_bytes();
    let mut bytes = vec![0u8; span];
    r.buf.read_bytes(r.offset, &mut bytes, &what)?;
    let packed = encode_all(r.layout.dtype, vals);
    for_each_offset(&r.layout, 0, |i, o| {
        if i >= first && i < first + vals.len() {
            let k = i - first;
            // BOUNDS: `bytes` holds the layout's span and o is an element's
            // offset in it (o + es <= span); k < vals.len(), packed's values.
            bytes[o..o + es].copy_from_slice(&packed[k * es..(k + 1) * es]);
        }
    });
    r.buf.write_bytes(r.offset, &bytes, &what)
}

/// Set every element of `t` to zero (all-zero bits, which is 0 in every type).
pub fn set_zero(t: &Tensor) -> crate::Result<()> {
    let r = t.resolve()?;
    let what = t.describe();
    let es = r.layout.dtype.size();
    if r.layout.is_contiguous() {
        return r.buf.write_bytes(r.offset, &vec![0u8; r.layout.nelements() * es], &what);
    }
    let mut bytes = vec![0u8; r.layout.span_bytes()];
    r.buf.read_bytes(r.offset, &mut bytes, &what)?;
    // BOUNDS: `bytes` holds the layout's span, o an element's offset in it.
    for_each_offset(&r.layout, 0, |_, o| bytes[o..o + es].fill(0));
    r.buf.write_bytes(r.offset, &bytes, &what)
}

/// `n` values of `t` from element `first` (all when `n` is None).
pub fn get_values(t: &Tensor, first: usize, n: Option<usize>) -> crate::Result<Vec<f64>> {
    let r = t.resolve()?;
    let n = n.unwrap_or(t.nelements().saturating_sub(first));
    check_range(t, first, n)?;
    if let Some(q) = r.layout.dtype.quant() {
        let all = get_quantized(t, q)?;
        // BOUNDS: check_range: first + n <= the element count, all's length.
        return Ok(all[first..first + n].iter().map(|&v| v as f64).collect());
    }
    let what = t.describe();
    let es = r.layout.dtype.size();
    if r.layout.is_contiguous() {
        if r.layout.dtype == DType::F64 {
            let mut vals = vec![0f64; n];
            r.buf.read_bytes(r.offset + first * es, bytemuck::cast_slice_mut(&mut vals), &what)?;
            return Ok(vals);
        }
        let mut bytes = vec![0u8; n * es];
        r.buf.read_bytes(r.offset + first * es, &mut bytes, &what)?;
        return Ok(decode_all(r.layout.dtype, &bytes));
    }
    let mut span = vec![0u8; r.layout.span_bytes()];
    r.buf.read_bytes(r.offset, &mut span, &what)?;
    let mut packed = vec![0u8; n * es];
    for_each_offset(&r.layout, 0, |i, o| {
        if i >= first && i < first + n {
            let k = i - first;
            // BOUNDS: k < n, packed's values; o an element's offset in the span.
            packed[k * es..(k + 1) * es].copy_from_slice(&span[o..o + es]);
        }
    });
    Ok(decode_all(r.layout.dtype, &packed))
}

/// Copy the values of `src` into `dst` (same number of elements): one copy
/// between buffers when both are contiguous and of one type, else a
/// download and an upload through f64 (converting the type).
pub fn copy(dst: &Tensor, src: &Tensor) -> crate::Result<()> {
    ensure!(
        dst.nelements() == src.nelements(),
        "cannot copy {} into {}: they have {} and {} elements",
        src.describe(),
        dst.describe(),
        src.nelements(),
        dst.nelements()
    );
    let (s, d) = (src.resolve()?, dst.resolve()?);
    if s.layout.dtype == d.layout.dtype && s.layout.is_contiguous() && d.layout.is_contiguous() {
        let what = format!("copying {} into {}", src.describe(), dst.describe());
        return s.buf.copy_to(s.offset, &d.buf, d.offset, s.layout.span_bytes(), &what);
    }
    set_values(dst, &get_values(src, 0, None)?, 0)
}

/// Values into a quantized tensor: whole rows, quantized as ggml's
/// reference quantizer does (the types that need an importance matrix are
/// refused: quantize those with `quant::quantize_chunk` and set the bytes).
fn set_quantized(t: &Tensor, q: QType, vals: &[f64], first: usize) -> crate::Result<()> {
    let r = t.resolve()?;
    // BOUNDS: ne is a Dims, indexed by the literal 0.
    let n0 = r.layout.ne[0];
    ensure!(
        r.layout.is_contiguous() && first % n0 == 0 && vals.len() % n0 == 0,
        "{} is quantized: its values are set a whole row ({n0} values) at a time, into a \
         tensor that is not a view; give a multiple of {n0} values from a row start",
        t.describe()
    );
    let x: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
    let bytes = quant::quantize_chunk(q, &x, vals.len() / n0, n0, None).map_err(|e| e.context(format!("setting {}", t.describe())))?;
    r.buf.write_bytes(r.offset + first / n0 * q.row_size(n0)?, &bytes, &t.describe())
}

/// All values of a quantized tensor, dequantized.
fn get_quantized(t: &Tensor, q: QType) -> crate::Result<Vec<f32>> {
    let r = t.resolve()?;
    let l = &r.layout;
    // BOUNDS: nb and ne are Dims indexed by the literal 0 (also below).
    ensure!(l.nb[0] == q.type_size(), "{} is a transposed view of quantized data; read the tensor it views", t.describe());
    let mut span = vec![0u8; l.span_bytes()];
    r.buf.read_bytes(r.offset, &mut span, &t.describe())?;
    let (n0, rs) = (l.ne[0], q.row_size(l.ne[0])?);
    let mut out = vec![0f32; l.nelements()];
    let mut res = Ok(());
    for_each_row(l, 0, |i, o| {
        if res.is_ok() {
            // BOUNDS: rows are rs bytes from o (nb[0] is the block size, checked)
            // inside the span; row i < the row count, out's n0-value rows.
            res = quant::dequantize_row(q, &span[o..o + rs], &mut out[i * n0..(i + 1) * n0]);
        }
    });
    res.map(|_| out)
}

/// The bytes of a contiguous tensor.
pub fn get_bytes(t: &Tensor) -> crate::Result<Vec<u8>> {
    let r = t.resolve()?;
    ensure!(r.layout.is_contiguous(), "{} is a view with gaps; its bytes are read from a contiguous tensor (ggml_cont())", t.describe());
    let mut out = vec![0u8; r.layout.span_bytes()];
    r.buf.read_bytes(r.offset, &mut out, &t.describe())?;
    Ok(out)
}

/// Write raw bytes into a contiguous tensor from byte `offset`.
pub fn set_bytes(t: &Tensor, bytes: &[u8], offset: usize) -> crate::Result<()> {
    let r = t.resolve()?;
    ensure!(r.layout.is_contiguous(), "{} is a view with gaps; raw bytes are written to contiguous tensors", t.describe());
    let size = r.layout.span_bytes();
    ensure!(
        offset.checked_add(bytes.len()).is_some_and(|e| e <= size),
        "{} holds {size} bytes; {} bytes at offset {offset} do not fit",
        t.describe(),
        bytes.len()
    );
    r.buf.write_bytes(r.offset + offset, bytes, &t.describe())
}
