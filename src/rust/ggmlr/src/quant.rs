//! Quantized block formats: quantize, dequantize, type information, and
//! raw bytes of tensors.

use crate::conv::{f64_vec, scalar_i64, scalar_usize};
use crate::guard;
use crate::tensor::tensor;
use anyhow::bail;
use extendr_api::prelude::*;
use ggmlr_core::base::dtype::DType;
use ggmlr_core::base::quant::{self, QType};
use ggmlr_core::tensor::io;

fn qtype(x: &Robj) -> anyhow::Result<QType> {
    let code = scalar_i64(x, "type")?;
    match DType::from_code(code)? {
        DType::Quant(q) => Ok(q),
        t => bail!("type {} ({code}) is not a quantized type; use one of the GGML_TYPE_Q* or IQ* codes", t.name()),
    }
}

fn f32_values(x: &Robj, what: &str) -> anyhow::Result<Vec<f32>> {
    Ok(f64_vec(x, what)?.into_iter().map(|v| v as f32).collect())
}

fn raw(x: &Robj, what: &str) -> anyhow::Result<Vec<u8>> {
    match x.as_raw_slice() {
        Some(b) => Ok(b.to_vec()),
        None => bail!("`{what}` must be a raw vector (quantized bytes), not {:?}", x.rtype()),
    }
}

/// list(type_name, type_size, block_size, is_quantized) of any type code.
/// @noRd
#[extendr]
fn rs_quant_info(type_: Robj) -> Robj {
    guard(|| {
        let t = DType::from_code(scalar_i64(&type_, "type")?)?;
        Ok(list!(
            type_name = t.name(),
            type_size = t.size() as i32,
            block_size = t.block_size() as i32,
            is_quantized = t.quant().is_some()
        )
        .into())
    })
}

/// ggml_quantize_chunk: `n_rows` rows of `n_per_row` values, with an
/// importance matrix (one value per column) or NULL.
/// @noRd
#[extendr]
fn rs_quantize(type_: Robj, src: Robj, n_rows: Robj, n_per_row: Robj, imatrix: Robj) -> Robj {
    guard(|| {
        let q = qtype(&type_)?;
        let x = f32_values(&src, "src_data")?;
        let w = if imatrix.is_null() { None } else { Some(f32_values(&imatrix, "imatrix")?) };
        let bytes = quant::quantize_chunk(q, &x, scalar_usize(&n_rows, "n_rows")?, scalar_usize(&n_per_row, "n_per_row")?, w.as_deref())?;
        Ok(Robj::from(bytes.as_slice()))
    })
}

/// The reference quantizer of one row of `n` values.
/// @noRd
#[extendr]
fn rs_quantize_ref(type_: Robj, src: Robj, n: Robj) -> Robj {
    guard(|| {
        let q = qtype(&type_)?;
        let n = scalar_usize(&n, "n_elements")?;
        let x = f32_values(&src, "src_data")?;
        let Some(x) = x.get(..n) else {
            bail!("`src_data` has {} values, fewer than `n_elements` ({n})", x.len());
        };
        let mut y = vec![0u8; q.row_size(n)?];
        quant::quantize_row_ref(q, x, &mut y)?;
        Ok(Robj::from(y.as_slice()))
    })
}

/// `n` values dequantized from raw bytes.
/// @noRd
#[extendr]
fn rs_dequantize(type_: Robj, data: Robj, n: Robj) -> Robj {
    guard(|| {
        let q = qtype(&type_)?;
        let b = raw(&data, "raw_data")?;
        let mut y = vec![0f32; scalar_usize(&n, "n_elements")?];
        quant::dequantize_row(q, &b, &mut y)?;
        Ok(y.into_iter().map(f64::from).collect::<Vec<f64>>().into())
    })
}

/// Build the lattice tables of `type` (a no-op for other types).
/// @noRd
#[extendr]
fn rs_quantize_init(type_: Robj) -> Robj {
    guard(|| {
        if let DType::Quant(q) = DType::from_code(scalar_i64(&type_, "type")?)? {
            quant::init(q);
        }
        Ok(().into())
    })
}

/// Drop the lattice tables: all (NULL) or those of one type.
/// @noRd
#[extendr]
fn rs_quantize_free(type_: Robj) -> Robj {
    guard(|| {
        if type_.is_null() {
            quant::free();
        } else {
            quant::free_for(qtype(&type_)?);
        }
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_requires_imatrix(type_: Robj) -> Robj {
    guard(|| {
        let t = DType::from_code(scalar_i64(&type_, "type")?)?;
        Ok(t.quant().is_some_and(QType::requires_imatrix).into())
    })
}

/// The bytes of a contiguous tensor.
/// @noRd
#[extendr]
fn rs_tensor_bytes(t: Robj) -> Robj {
    guard(|| Ok(Robj::from(io::get_bytes(tensor(&t, "tensor")?)?.as_slice())))
}

/// Write raw bytes into a tensor from byte `offset`.
/// @noRd
#[extendr]
fn rs_tensor_set_bytes(t: Robj, data: Robj, offset: Robj) -> Robj {
    guard(|| {
        io::set_bytes(tensor(&t, "tensor")?, &raw(&data, "data")?, scalar_usize(&offset, "offset")?)?;
        Ok(().into())
    })
}

extendr_module! {
    mod quant;
    fn rs_quant_info;
    fn rs_quantize;
    fn rs_quantize_ref;
    fn rs_dequantize;
    fn rs_quantize_init;
    fn rs_quantize_free;
    fn rs_requires_imatrix;
    fn rs_tensor_bytes;
    fn rs_tensor_set_bytes;
}
