//! Kernels that move values around: repeat, concat, get_rows, diag_mask_inf,
//! pad, nearest-neighbour upscale, and same-type copies (`dup`, `cont`,
//! `cpy`) split across the pool.

use super::access::{self, Src};
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::layout::Layout;
use crate::tensor::DataRef;
use anyhow::ensure;

/// out[i0, i1, i2, i3] = f(i0, i1, i2, i3) for sizes `ne`, rows split across the pool.
// BOUNDS-FN: ne is a [usize; 4] indexed by literals.
pub(super) fn fill<T: Float>(pool: &CpuPool, out: &mut [T], ne: [usize; 4], f: impl Fn(usize, usize, usize, usize) -> T + Sync + Send) {
    let (n0, n1, n2) = (ne[0], ne[1], ne[2]);
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, row) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let (i1, i2, i3) = (r % n1, (r / n1) % n2, r / (n1 * n2));
            for (i0, o) in row.iter_mut().enumerate() {
                *o = f(i0, i1, i2, i3);
            }
        }
    });
}

/// Row `(i1, i2, i3)` of a source whose elements along dimension 0 are
/// adjacent (every source but the products' is).
// BOUNDS-FN: callers pass i1 < ne[1], i2 < ne[2], i3 < ne[3] of a source
// gathered contiguous (st[0] = 1 tested), so the row's ne[0] values lie in d.
fn row_of<'s, T: Float>(a: &'s Src<'_, T>, i1: usize, i2: usize, i3: usize) -> &'s [T] {
    let o = i1 * a.st[1] + i2 * a.st[2] + i3 * a.st[3];
    &a.d[o..o + a.ne[0]]
}

/// Calls `f(i1, i2, i3, row)` for every row of `out` (sizes `ne`), rows
/// split across the pool.
// BOUNDS-FN: ne is a [usize; 4] indexed by literals.
fn each_row<T: Float>(pool: &CpuPool, out: &mut [T], ne: [usize; 4], f: impl Fn(usize, usize, usize, &mut [T]) + Sync + Send) {
    let (n0, n1, n2) = (ne[0], ne[1], ne[2]);
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, row) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            f(r % n1, (r / n1) % n2, r / (n1 * n2), row);
        }
    });
}

// BOUNDS-FN: the `Repeat` rule (op/shape.rs, `can_repeat`) shaped the node: out
// has b's sizes, each a multiple of a's (all above 0), so each i % an[d] < an[d];
// an is a [usize; 4]; src holds an[0] values, a piece at most an[0].
pub fn repeat<T: Float>(a: &Src<'_, T>, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let an = a.ne;
    if a.st[0] != 1 || an[0] == 0 {
        fill(pool, out, ne, |i0, i1, i2, i3| a.at(i0 % an[0], i1 % an[1], i2 % an[2], i3 % an[3]));
        return;
    }
    // Whole rows at a time: a value repeated along the row, or the source's row tiled.
    each_row(pool, out, ne, |i1, i2, i3, row| {
        let src = row_of(a, i1 % an[1], i2 % an[2], i3 % an[3]);
        if an[0] == 1 {
            row.fill(src[0]);
        } else {
            for piece in row.chunks_mut(an[0]) {
                piece.copy_from_slice(&src[..piece.len()]);
            }
        }
    });
}

// BOUNDS-FN: the `Concat` rule (op/shape.rs) shaped the node: a and b agree
// in every dimension but `dim` < 4 (the fifth is handled first), out holds
// their sum there; row r of out along dimension 0 holds a's row and then b's
// (split = a.ne[0]); along another, a row below split is a's, above it b's.
pub fn concat<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, dim: usize, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let Some(&split) = a.ne.get(dim) else {
        // Along the fifth dimension with a result of fifth size 1 (the
        // driver slices any other): one source is empty there, and the
        // result is the other one.
        let whole = if a.d.len() == out.len() { &a.d } else { &b.d };
        out.iter_mut().zip(whole.iter()).for_each(|(o, &v)| *o = v);
        return;
    };
    if a.st[0] != 1 || b.st[0] != 1 {
        fill(pool, out, ne, |i0, i1, i2, i3| {
            let mut idx = [i0, i1, i2, i3];
            if idx[dim] < split {
                a.at(i0, i1, i2, i3)
            } else {
                idx[dim] -= split;
                b.at(idx[0], idx[1], idx[2], idx[3])
            }
        });
        return;
    }
    // Whole rows at a time: along dimension 0 each row is a's row, then b's.
    each_row(pool, out, ne, |i1, i2, i3, row| {
        if dim == 0 {
            row[..split].copy_from_slice(row_of(a, i1, i2, i3));
            row[split..].copy_from_slice(row_of(b, i1, i2, i3));
            return;
        }
        let mut idx = [0, i1, i2, i3];
        if idx[dim] < split {
            row.copy_from_slice(row_of(a, i1, i2, i3));
        } else {
            idx[dim] -= split;
            row.copy_from_slice(row_of(b, idx[1], idx[2], idx[3]));
        }
    });
}

/// Calls `f(row, i11, i12, first output element)` for every index of
/// `get_rows` into a tensor of `n_rows` rows (per plane), checking each index.
// BOUNDS-FN: the `GetRows` rule (op/shape.rs) shaped the node: idx is
// [ne[1], ne[2], ne[3], 1] (gathered contiguous), and ne a [usize; 4].
pub fn for_each_pick<I: Float>(
    idx: &Src<'_, I>,
    n_rows: usize,
    ne: [usize; 4],
    mut f: impl FnMut(usize, usize, usize, usize) -> crate::Result<()>,
) -> crate::Result<()> {
    for i12 in 0..ne[3] {
        for i11 in 0..ne[2] {
            for i10 in 0..ne[1] {
                let r = idx.at(i10, i11, i12, 0).to_f64();
                ensure!(
                    r >= 0.0 && (r as usize) < n_rows,
                    "get_rows: row index {r:.0} is out of range: the tensor has {n_rows} rows (indices \
                     start at 0)"
                );
                f(r as usize, i11, i12, (i10 + ne[1] * (i11 + ne[2] * i12)) * ne[0])?;
            }
        }
    }
    Ok(())
}

/// Rows of `a` picked by `idx` (read in any type; f64 keeps every i32 exact).
// BOUNDS-FN: the `GetRows` rule: out is [n0, ne[1], a.ne[2], a.ne[3]]; the
// row r < a.ne[1] is checked by `for_each_pick`, i11 < a.ne[2], i12 < a.ne[3].
pub fn get_rows<T: Float, I: Float>(a: &Src<'_, T>, idx: &Src<'_, I>, out: &mut [T], ne: [usize; 4]) -> crate::Result<()> {
    let n0 = a.ne[0];
    for_each_pick(idx, a.ne[1], ne, |r, i11, i12, dst| {
        let src = (r + a.ne[1] * (i11 + a.ne[2] * i12)) * n0;
        copy_short(&mut out[dst..dst + n0], &a.d[src..src + n0]);
        Ok(())
    })
}

// BOUNDS-FN: chunks_exact(4) pieces have 4 values; both callers' rows have
// one length.
/// `dst.copy_from_slice(src)`, without a call to the C library for short
/// rows (the columns of a few channels, picked by the hundred thousand):
/// fixed-size pieces the compiler moves in registers.
#[inline]
fn copy_short<T: Float>(dst: &mut [T], src: &[T]) {
    if dst.len() > 32 {
        dst.copy_from_slice(src);
        return;
    }
    let mut d = dst.chunks_exact_mut(4);
    let mut s = src.chunks_exact(4);
    for (o, i) in (&mut d).zip(&mut s) {
        let v: [T; 4] = [i[0], i[1], i[2], i[3]];
        o[0] = v[0];
        o[1] = v[1];
        o[2] = v[2];
        o[3] = v[3];
    }
    for (o, i) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *o = *i;
    }
}

// BOUNDS-FN: `fill` walks out's sizes, a's (the rule keeps the shape).
pub fn diag_mask_inf<T: Float>(a: &Src<'_, T>, n_past: i32, out: &mut [T], pool: &CpuPool) {
    fill(pool, out, a.ne, |i0, i1, i2, i3| {
        if i0 as i64 > n_past as i64 + i1 as i64 {
            T::NEG_INFINITY
        } else {
            a.at(i0, i1, i2, i3)
        }
    });
}

// BOUNDS-FN: an is a [usize; 4] indexed by literals; a.at is reached only
// inside a's sizes (tested).
pub fn pad<T: Float>(a: &Src<'_, T>, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let an = a.ne;
    fill(pool, out, ne, |i0, i1, i2, i3| {
        if i0 < an[0] && i1 < an[1] && i2 < an[2] && i3 < an[3] {
            a.at(i0, i1, i2, i3)
        } else {
            T::ZERO
        }
    });
}

// BOUNDS-FN: the `Upscale` rule (op/shape.rs) made out [a0 f, a1 f, a2, a3]
// with f >= 1, so i0 / f < a0 and i1 / f < a1.
pub fn upscale<T: Float>(a: &Src<'_, T>, f: usize, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    fill(pool, out, ne, |i0, i1, i2, i3| a.at(i0 / f, i1 / f, i2, i3));
}

/// Bytes per piece of a copy between contiguous tensors (the pieces are
/// split across the pool).
const COPY_PIECE: usize = 1 << 16;

/// The byte offset of row `r` (an index over dimensions 1..4 in ggml order)
/// of layout `l` starting at byte `base`.
// BOUNDS-FN: ne and nb are [usize; 5] indexed by literals below 5.
fn row_offset(l: &Layout, base: usize, r: usize) -> usize {
    let [_, n1, n2, n3, _] = l.ne;
    let (i1, i2, i3, i4) = (r % n1, (r / n1) % n2, (r / (n1 * n2)) % n3, r / (n1 * n2 * n3));
    base + i1 * l.nb[1] + i2 * l.nb[2] + i3 * l.nb[3] + i4 * l.nb[4]
}

/// Copies the elements of the tensor of layout `l` (not quantized) at byte
/// `from` of `src` into `dst`, packed in ggml order, split across the
/// pool: in pieces of [`COPY_PIECE`] bytes when the tensor is contiguous,
/// else whole rows at a time (one move per row when its elements are
/// adjacent, else one per element).
// BOUNDS-FN: the caller (`copy_direct`, tests) checked that `l`'s span lies at
// `from` of `src` (access::host / check_span) and gives `dst` n es bytes;
// every element's bytes lie in that span, and a piece p of d ends by n es.
pub fn copy_packed(pool: &CpuPool, src: &[u8], from: usize, l: &Layout, dst: &mut [u8]) {
    let es = l.dtype.size();
    let n = l.nelements();
    debug_assert_eq!(dst.len(), n * es);
    if n == 0 {
        return;
    }
    if l.is_contiguous() {
        let s = &src[from..from + n * es];
        par_rows(pool, dst, COPY_PIECE, |p, d| d.copy_from_slice(&s[p * COPY_PIECE..p * COPY_PIECE + d.len()]));
        return;
    }
    let row = l.ne[0] * es;
    par_rows(pool, dst, row, |r0, d| {
        for (k, out) in d.chunks_exact_mut(row).enumerate() {
            let o = row_offset(l, from, r0 + k);
            if l.nb[0] == es {
                out.copy_from_slice(&src[o..o + row]);
            } else {
                for (i0, e) in out.chunks_exact_mut(es).enumerate() {
                    let at = o + i0 * l.nb[0];
                    e.copy_from_slice(&src[at..at + es]);
                }
            }
        }
    });
}

// BOUNDS-FN: `host_mut` checked that dst's contiguous span of len bytes lies
// in d.
/// Copies `src`'s elements into `dst` (same type, no conversion) straight
/// from one place to the other when their bytes do not overlap and `dst` is
/// contiguous ([`copy_packed`], split across the pool; within one buffer
/// too). Returns false (nothing done) otherwise.
pub fn copy_direct(src: &DataRef, dst: &DataRef, pool: &CpuPool) -> crate::Result<bool> {
    let l = &src.layout;
    if access::overlap(src, dst) || !dst.layout.is_contiguous() || l.dtype.quant().is_some() || l.dtype != dst.layout.dtype {
        return Ok(false);
    }
    let n = l.nelements();
    ensure!(n == dst.layout.nelements(), "internal: a copy of {n} elements into {}", dst.layout.nelements());
    let len = n * l.dtype.size();
    if src.buf.id() == dst.buf.id() {
        let mut w = dst.buf.write("the result")?;
        let d = access::host_mut(&mut w, dst)?;
        access::check_span(d.len(), src)?;
        let base = d.as_mut_ptr();
        // SAFETY: both spans lie in `d` (checked by `host_mut` and
        // `check_span`) and do not overlap (`overlap` above), so the shared
        // source slice never aliases the result's; `d` stays borrowed
        // through `w` while both live.
        let (s, out) = unsafe {
            (
                std::slice::from_raw_parts(base.add(src.offset) as *const u8, l.span_bytes()),
                std::slice::from_raw_parts_mut(base.add(dst.offset), len),
            )
        };
        copy_packed(pool, s, 0, l, out);
        return Ok(true);
    }
    let g = src.buf.read("the source")?;
    let b = access::host(&g, src)?;
    let mut w = dst.buf.write("the result")?;
    let d = access::host_mut(&mut w, dst)?;
    copy_packed(pool, b, src.offset, l, &mut d[dst.offset..dst.offset + len]);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::walk::for_each_offset;
    use crate::base::dtype::DType;

    /// The packed bytes of layout `l` at `from` of `src`, one element at a time.
    fn serial(src: &[u8], from: usize, l: &Layout) -> Vec<u8> {
        let es = l.dtype.size();
        let mut out = vec![0u8; l.nelements() * es];
        for_each_offset(l, from, |i, o| out[i * es..(i + 1) * es].copy_from_slice(&src[o..o + es]));
        out
    }

    /// A concat along the fifth dimension that reaches the kernel (a result
    /// of fifth size 1: one source is empty there) is the other source,
    /// not an index past the four sizes a kernel sees.
    #[test]
    fn concat_along_the_fifth_dimension_copies_the_non_empty_source() {
        use std::borrow::Cow;
        let pool = CpuPool::single();
        let empty = Src::new(Cow::Owned(Vec::<f32>::new()), [2, 1, 1, 1]);
        let full = Src::new(Cow::Owned(vec![1f32, 2.0]), [2, 1, 1, 1]);
        for (a, b) in [(&empty, &full), (&full, &empty)] {
            let mut out = vec![0f32; 2];
            concat(a, b, 4, &mut out, [2, 1, 1, 1], &pool);
            assert_eq!(out, [1.0, 2.0]);
        }
    }

    /// Large copies split across threads give the bytes of the serial walk:
    /// contiguous, rows with gaps between them, transposed, and 5-D.
    #[test]
    fn parallel_copies_match_the_serial_walk() {
        let bytes: Vec<u8> = (0..8_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let f32c = Layout::contiguous(DType::F32, [300, 700, 1, 1, 1]);
        let gaps = Layout { nb: [4, 4 * 320, 4 * 320 * 700, 4 * 320 * 700, 4 * 320 * 700], ..f32c };
        let tr = Layout { ne: [700, 300, 1, 1, 1], nb: [4 * 300, 4, 4 * 300 * 700, 4 * 300 * 700, 4 * 300 * 700], ..f32c };
        let f16p = Layout { dtype: DType::F16, ne: [40, 30, 20, 5, 2], nb: [2 * 30, 2, 2 * 40 * 30, 2 * 40 * 30 * 20 * 2, 2 * 40 * 30 * 20] };
        for (l, from) in [(f32c, 4), (gaps, 8), (tr, 0), (f16p, 6)] {
            let want = serial(&bytes, from, &l);
            for threads in [1, 2, 3] {
                let pool = CpuPool::new(threads).unwrap();
                let mut got = vec![0u8; want.len()];
                copy_packed(&pool, &bytes, from, &l, &mut got);
                assert!(got == want, "{:?} on {threads} threads", l.ne);
            }
        }
    }
}
