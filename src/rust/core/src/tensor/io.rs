//! Moving tensor values between the engine and the caller (R), as f64 in ggml
//! element order, converting to and from the tensor's type. Each transfer is
//! one upload or download on the tensor's buffer.

use super::descriptor::Tensor;
use crate::base::dtype::DType;
use crate::layout::convert::{decode_all, encode_all};
use crate::layout::walk::for_each_offset;
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
    if r.layout.dtype == DType::I32 {
        if let Some(bad) = vals.iter().find(|v| !v.is_finite() || v.abs() > i32::MAX as f64) {
            anyhow::bail!("{} holds 32-bit integers; {bad} is not one (NA, infinite or too large)", t.describe());
        }
    }
    let what = t.describe();
    let es = r.layout.dtype.size();
    if r.layout.is_contiguous() {
        return r.buf.write_bytes(r.offset + first * es, &encode_all(r.layout.dtype, vals), &what);
    }
    // Strided: update the spanned bytes element by element.
    let span = r.layout.span_bytes();
    let mut bytes = vec![0u8; span];
    r.buf.read_bytes(r.offset, &mut bytes, &what)?;
    let packed = encode_all(r.layout.dtype, vals);
    for_each_offset(&r.layout, 0, |i, o| {
        if i >= first && i < first + vals.len() {
            let k = i - first;
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
    for_each_offset(&r.layout, 0, |_, o| bytes[o..o + es].fill(0));
    r.buf.write_bytes(r.offset, &bytes, &what)
}

/// `n` values of `t` from element `first` (all when `n` is None).
pub fn get_values(t: &Tensor, first: usize, n: Option<usize>) -> crate::Result<Vec<f64>> {
    let r = t.resolve()?;
    let n = n.unwrap_or(t.nelements().saturating_sub(first));
    check_range(t, first, n)?;
    let what = t.describe();
    let es = r.layout.dtype.size();
    if r.layout.is_contiguous() {
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
            packed[k * es..(k + 1) * es].copy_from_slice(&span[o..o + es]);
        }
    });
    Ok(decode_all(r.layout.dtype, &packed))
}
