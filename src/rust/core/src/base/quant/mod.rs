//! ggml's quantized block formats: pure functions over bytes.
//!
//! Every format stores a row of `k` values (a multiple of its block size) as
//! `k / block` blocks of `type_size` bytes, little-endian, with exactly the
//! field order and rounding of ggml (`ggml-quants.c`), so bytes written here
//! are read by llama.cpp and the reverse. Each family lives in its own file:
//! the quantizers (`*_ref` without an importance matrix, weighted ones with
//! it) and the dequantizers.
//!
//! Types that search a lattice (IQ1/IQ2/IQ3) need neighbour tables, built on
//! first use (or by [`init`]) and dropped by [`free`], as ggml's
//! `ggml_quantize_init` / `ggml_quantize_free`.

mod fp4;
pub(crate) mod grids;
mod iq1;
mod iq2;
mod iq3;
mod iq4;
mod kquants_hi;
mod kquants_lo;
mod legacy;
mod search;
mod tables;
mod ternary;
mod types;
mod util;

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod tests;

pub use types::{QType, QK_K};
pub use util::{f16_bits_to_f32, f32_to_f16_bits};

use anyhow::{bail, ensure};
use rayon::prelude::*;

/// Build the lookup tables `q` needs (a no-op for types that need none or
/// when they exist), as ggml's `ggml_quantize_init`.
pub fn init(q: QType) {
    tables::init(q)
}

/// Drop every lookup table built by [`init`] (they are built again on demand).
pub fn free() {
    tables::free_all()
}

/// Drop the lookup tables of one IQ family, as ggml's `iq2xs_free_impl` /
/// `iq3xs_free_impl`.
pub fn free_for(q: QType) {
    tables::free(q)
}

fn check_row(q: QType, x_len: usize, y_len: usize) -> crate::Result<()> {
    let need = q.row_size(x_len)?;
    ensure!(y_len == need, "internal: {} bytes for {x_len} values of {} (need {need})", y_len, q.name());
    Ok(())
}

/// ggml's `quantize_row_<type>_ref`: `x` (a whole number of blocks) into `y`
/// (exactly `row_size(x.len())` bytes), without an importance matrix.
pub fn quantize_row_ref(q: QType, x: &[f32], y: &mut [u8]) -> crate::Result<()> {
    check_row(q, x.len(), y.len())?;
    use QType::*;
    match q {
        Q4_0 => legacy::q4_0_ref(x, y),
        Q4_1 => legacy::q4_1_ref(x, y),
        Q5_0 => legacy::q5_0_ref(x, y),
        Q5_1 => legacy::q5_1_ref(x, y),
        Q8_0 => legacy::q8_0_ref(x, y),
        Q8_1 => legacy::q8_1_ref(x, y),
        Q1_0 => legacy::q1_0_ref(x, y),
        Q2_K => kquants_lo::q2_k_ref(x, y),
        Q3_K => kquants_lo::q3_k_ref(x, y),
        Q4_K => kquants_hi::q4_k_ref(x, y),
        Q5_K => kquants_hi::q5_k_ref(x, y),
        Q6_K => kquants_hi::q6_k_ref(x, y),
        Q8_K => kquants_hi::q8_k_ref(x, y),
        TQ1_0 => ternary::tq1_0_ref(x, y),
        TQ2_0 => ternary::tq2_0_ref(x, y),
        MXFP4 => fp4::mxfp4_ref(x, y),
        NVFP4 => fp4::nvfp4_ref(x, y),
        IQ4_NL => iq4::iq4_nl(x, y, None, -1),
        IQ4_XS => iq4::iq4_xs(x, y, None),
        IQ3_XXS => iq3::quantize(iq3::Grid::Xxs, x, y, None),
        IQ3_S => iq3::quantize(iq3::Grid::S, x, y, None),
        IQ2_S => iq2::quantize_s(x, y, None),
        IQ2_XXS | IQ2_XS | IQ1_S | IQ1_M => bail!(
            "{} has no reference quantizer: it needs an importance matrix; use quantize_{}() \
             with `imatrix`",
            q.name(),
            q.name()
        ),
    }
    Ok(())
}

/// One row of `n_per_row` values quantized as ggml's `quantize_<type>` does
/// for that row, with the importance matrix `qw` (one weight per column) or
/// without it.
fn quantize_one_row(q: QType, x: &[f32], y: &mut [u8], qw: Option<&[f32]>) -> crate::Result<()> {
    use QType::*;
    let Some(w) = qw else {
        return match q {
            IQ1_M => {
                iq1::quantize_m(x, y, None);
                Ok(())
            }
            // The chunk quantizer searches scales; the reference one does not.
            IQ4_NL => {
                iq4::iq4_nl(x, y, None, 7);
                Ok(())
            }
            _ => quantize_row_ref(q, x, y),
        };
    };
    match q {
        Q4_0 => legacy::q4_0_weighted(x, y, w),
        Q4_1 => legacy::q4_1_weighted(x, y, w),
        Q5_0 => legacy::q5_0_weighted(x, y, w),
        Q5_1 => legacy::q5_1_weighted(x, y, w),
        Q2_K => kquants_lo::q2_k_weighted(x, y, w),
        Q3_K => kquants_lo::q3_k_weighted(x, y, w),
        Q4_K => kquants_hi::q4_k_weighted(x, y, w),
        Q5_K => kquants_hi::q5_k_weighted(x, y, w),
        Q6_K => kquants_hi::q6_k_weighted(x, y, w),
        IQ4_NL => iq4::iq4_nl(x, y, Some(w), 7),
        IQ4_XS => iq4::iq4_xs(x, y, Some(w)),
        IQ3_XXS => iq3::quantize(iq3::Grid::Xxs, x, y, Some(w)),
        IQ3_S => iq3::quantize(iq3::Grid::S, x, y, Some(w)),
        IQ2_S => iq2::quantize_s(x, y, Some(w)),
        IQ2_XXS => iq2::quantize_xxs(x, y, w),
        IQ2_XS => iq2::quantize_xs(x, y, w),
        IQ1_S => iq1::quantize_s(x, y, w),
        IQ1_M => iq1::quantize_m(x, y, Some(w)),
        // ggml ignores the weights for these.
        Q8_0 | Q8_1 | Q8_K | Q1_0 | TQ1_0 | TQ2_0 | MXFP4 | NVFP4 => return quantize_row_ref(q, x, y),
    }
    Ok(())
}

/// ggml's `ggml_quantize_chunk` from the start: `nrows` rows of `n_per_row`
/// values into `nrows * row_size(n_per_row)` bytes. `imatrix`, when given,
/// holds one importance per column (`n_per_row` values).
pub fn quantize_chunk(
    q: QType,
    src: &[f32],
    nrows: usize,
    n_per_row: usize,
    imatrix: Option<&[f32]>,
) -> crate::Result<Vec<u8>> {
    let row = q.row_size(n_per_row)?;
    let n = nrows.checked_mul(n_per_row).filter(|&n| n == src.len());
    ensure!(
        n.is_some(),
        "{} values were given for {nrows} rows of {n_per_row}; give exactly n_rows * n_per_row values",
        src.len()
    );
    if let Some(w) = imatrix {
        ensure!(
            w.len() == n_per_row,
            "the importance matrix has {} values; it needs one per column ({n_per_row})",
            w.len()
        );
    } else if q.requires_imatrix() {
        bail!(
            "{} cannot be quantized without an importance matrix; pass `imatrix` (one value per \
             column, e.g. rep(1, n_per_row))",
            q.name()
        );
    }
    init(q);
    let total = nrows.checked_mul(row).ok_or_else(|| anyhow::anyhow!("the quantized data does not fit in memory"))?;
    let mut out = Vec::new();
    ensure!(out.try_reserve_exact(total).is_ok(), "out of memory: {total} bytes of quantized data do not fit");
    out.resize(total, 0u8);
    if n_per_row == 0 || nrows == 0 {
        return Ok(out);
    }
    // BOUNDS: `out` has nrows rows of `row` > 0 bytes (n_per_row > 0 here), so
    // r < nrows and (r + 1) * n_per_row <= nrows * n_per_row = src.len().
    let work = |(r, y): (usize, &mut [u8])| quantize_one_row(q, &src[r * n_per_row..(r + 1) * n_per_row], y, imatrix);
    if src.len() >= 1 << 16 && nrows > 1 {
        out.par_chunks_mut(row).enumerate().try_for_each(work)?;
    } else {
        out.chunks_mut(row).enumerate().try_for_each(work)?;
    }
    Ok(out)
}

/// ggml's `dequantize_row_<type>`: the `y.len()` values (a whole number of
/// blocks) stored in the first `row_size(y.len())` bytes of `x`.
pub fn dequantize_row(q: QType, x: &[u8], y: &mut [f32]) -> crate::Result<()> {
    let need = q.row_size(y.len())?;
    ensure!(
        x.len() >= need,
        "{} values of {} need {need} bytes; the data has {}",
        y.len(),
        q.name(),
        x.len()
    );
    // BOUNDS: x.len() >= need is checked just above.
    let x = &x[..need];
    use QType::*;
    match q {
        Q4_0 => legacy::q4_0_deq(x, y),
        Q4_1 => legacy::q4_1_deq(x, y),
        Q5_0 => legacy::q5_0_deq(x, y),
        Q5_1 => legacy::q5_1_deq(x, y),
        Q8_0 => legacy::q8_0_deq(x, y),
        Q8_1 => legacy::q8_1_deq(x, y),
        Q1_0 => legacy::q1_0_deq(x, y),
        Q2_K => kquants_lo::q2_k_deq(x, y),
        Q3_K => kquants_lo::q3_k_deq(x, y),
        Q4_K => kquants_hi::q4_k_deq(x, y),
        Q5_K => kquants_hi::q5_k_deq(x, y),
        Q6_K => kquants_hi::q6_k_deq(x, y),
        Q8_K => kquants_hi::q8_k_deq(x, y),
        TQ1_0 => ternary::tq1_0_deq(x, y),
        TQ2_0 => ternary::tq2_0_deq(x, y),
        MXFP4 => fp4::mxfp4_deq(x, y),
        NVFP4 => fp4::nvfp4_deq(x, y),
        IQ4_NL => iq4::iq4_nl_deq(x, y),
        IQ4_XS => iq4::iq4_xs_deq(x, y),
        IQ2_XXS => iq2::xxs_deq(x, y),
        IQ2_XS => iq2::xs_deq(x, y),
        IQ2_S => iq2::s_deq(x, y),
        IQ3_XXS => iq3::xxs_deq(x, y),
        IQ3_S => iq3::s_deq(x, y),
        IQ1_S => iq1::s_deq(x, y),
        IQ1_M => iq1::m_deq(x, y),
    }
    Ok(())
}
