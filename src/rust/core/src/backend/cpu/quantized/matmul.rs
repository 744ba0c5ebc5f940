//! `mul_mat(a, b)` with quantized weights `a[K, M]` and f32 activations
//! `b[K, N]`: the columns of b are quantized once to the weights' partner
//! format, then each thread takes a band of a's rows and computes their dot
//! products with every column (one column: the even split of
//! [`split_rows`], each thread streaming its own rows). With many columns (a matrix product rather
//! than matrix-vector work) the weights are dequantized once and the f32
//! sgemm kernel runs instead.

use super::dispatch::{dot_rows, dot_rows_col, Column, ColumnActs, QuantRows};
use super::dot::{partner, Partner};
use crate::backend::cpu::access::Src;
use crate::backend::cpu::gemv::split_rows;
use crate::backend::cpu::matmul;
use crate::backend::cpu::par::CpuPool;
use crate::base::quant::{self, QType};
use crate::layout::walk::for_each_row;
use crate::tensor::DataRef;
use anyhow::ensure;
use rayon::prelude::*;
use std::borrow::Cow;

/// From this many columns on, dequantize and use sgemm.
const GEMM_COLUMNS: usize = 32;
/// Rows of a per task at least (one task below that).
const MIN_ROWS: usize = 16;

/// Bytes of one row of `a`, checking that its blocks follow each other.
// BOUNDS-FN: `nb` and `ne` are Dims ([usize; 5]) indexed by the literal 0.
pub fn row_bytes(q: QType, a: &DataRef) -> crate::Result<usize> {
    ensure!(
        a.layout.nb[0] == q.type_size(),
        "the {} weights are a transposed or permuted view; quantized rows must keep their \
         blocks together",
        q.name()
    );
    q.row_size(a.layout.ne[0])
}

// BOUNDS-FN: `ne` and `nb` are Dims and b.ne a [usize; 4], indexed by literals
// below 4. `compute` read `bytes` through access::host, which checked that a's
// span lies in them, so each row that for_each_row numbers (r below a's
// nelements / k, the rows of `w`) spans o..o + rs inside them. The MulMat rule
// (op/shape.rs) gave a.ne[0] == b.ne[0] = k and out [m, n, b.ne[2], b.ne[3]];
// b is gathered contiguous (k n b.ne[2] b.ne[3] values) and `acts` holds
// b.d.len() / k rows of act_row bytes, so column col0 + j (j < n, col0 = n (i2 +
// b.ne[2] i3)) and the m n results of (i2, i3) lie in b.d, acts and out.
pub fn mul_mat(q: QType, a: &DataRef, bytes: &[u8], b: &Src<'_>, out: &mut [f32], pool: &CpuPool) -> crate::Result<()> {
    let rs = row_bytes(q, a)?;
    let l = &a.layout;
    let (k, m, n) = (l.ne[0], l.ne[1], b.ne[1]);
    if n >= GEMM_COLUMNS {
        let mut w = vec![0f32; l.nelements()];
        let mut res = Ok(());
        for_each_row(l, a.offset, |r, o| {
            if res.is_ok() {
                res = quant::dequantize_row(q, &bytes[o..o + rs], &mut w[r * k..(r + 1) * k]);
            }
        });
        res?;
        matmul::mul_mat(&Src::new(Cow::Owned(w), l.ne4()), b, out, pool);
        return Ok(());
    }
    let p = partner(q);
    let acts: Vec<u8> = match p.qtype() {
        Some(pq) => quant::quantize_chunk(pq, &b.d, b.d.len() / k.max(1), k, None)?,
        None => Vec::new(),
    };
    let act_row = p.qtype().map_or(0, |pq| pq.row_size(k).unwrap_or(0));
    let (r2, r3) = (b.ne[2] / l.ne[2], b.ne[3] / l.ne[3]);
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            let base = a.offset + (i2 / r2) * l.nb[2] + (i3 / r3) * l.nb[3];
            // Past the bytes only when a has no elements (its span is 0):
            // no rows then, or rows of 0 bytes that `dot_rows_col` finds missing.
            let w = QuantRows { q, data: bytes.get(base..).unwrap_or_default(), stride: l.nb[1], k };
            let col0 = (i2 + b.ne[2] * i3) * n;
            let act = |j: usize| match p {
                Partner::F32 => ColumnActs::F(&b.d[(col0 + j) * k..(col0 + j + 1) * k]),
                _ => ColumnActs::Q(&acts[(col0 + j) * act_row..(col0 + j + 1) * act_row]),
            };
            let c = &mut out[(i2 + b.ne[2] * i3) * m * n..][..m * n];
            product(w, m, n, &act, c, pool);
        }
    }
    Ok(())
}

/// c[j * m + i] = row i of `w` . column j, rows split across the pool.
// BOUNDS-FN: c holds the m n results (mul_mat's slice); band(r0, r1) has
// r0 <= r1 <= m and res holds (r1 - r0) n values, j < n; each band's
// len = r1 - r0 rows land at j m + r0 .. j m + r0 + len <= (j + 1) m.
fn product<'a>(w: QuantRows<'_>, m: usize, n: usize, act: &(impl Fn(usize) -> ColumnActs<'a> + Sync), c: &mut [f32], pool: &CpuPool) {
    let band = |r0: usize, r1: usize| -> Vec<f32> {
        let mut scratch = Vec::new();
        let mut res = vec![0f32; (r1 - r0) * n];
        let rows = QuantRows { data: w.data.get(r0 * w.stride..).unwrap_or_default(), ..w };
        for j in 0..n {
            dot_rows(QuantRows { ..rows }, act(j), &mut res[j * (r1 - r0)..(j + 1) * (r1 - r0)], &mut scratch);
        }
        res
    };
    if n == 1 {
        // Matrix-vector work: rows split evenly, each thread streaming its own.
        let col = Column::new(w.q, w.k, act(0));
        split_rows(pool, c, w.stride, |r0, o| {
            let rows = QuantRows { data: w.data.get(r0 * w.stride..).unwrap_or_default(), ..w };
            dot_rows_col(rows, &col, o, &mut Vec::new());
        });
        return;
    }
    let work = m * n * w.k;
    if pool.n_threads <= 1 || m < 2 * MIN_ROWS || work < 1 << 16 {
        c.copy_from_slice(&band(0, m));
        return;
    }
    let per = m.div_ceil(pool.n_threads * 4).max(MIN_ROWS);
    let bands: Vec<(usize, Vec<f32>)> = pool.install(|| {
        (0..m.div_ceil(per)).into_par_iter().map(|t| (t * per, band(t * per, ((t + 1) * per).min(m)))).collect()
    });
    for (r0, res) in bands {
        let len = res.len() / n;
        for j in 0..n {
            c[j * m + r0..j * m + r0 + len].copy_from_slice(&res[j * len..(j + 1) * len]);
        }
    }
}
