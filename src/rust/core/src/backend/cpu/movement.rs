//! Kernels that move values around: repeat, concat, get_rows, diag_mask_inf,
//! pad and nearest-neighbour upscale.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use anyhow::ensure;

/// out[i0, i1, i2, i3] = f(i0, i1, i2, i3) for sizes `ne`, rows split across the pool.
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
fn row_of<'s, T: Float>(a: &'s Src<'_, T>, i1: usize, i2: usize, i3: usize) -> &'s [T] {
    let o = i1 * a.st[1] + i2 * a.st[2] + i3 * a.st[3];
    &a.d[o..o + a.ne[0]]
}

/// Calls `f(i1, i2, i3, row)` for every row of `out` (sizes `ne`), rows
/// split across the pool.
fn each_row<T: Float>(pool: &CpuPool, out: &mut [T], ne: [usize; 4], f: impl Fn(usize, usize, usize, &mut [T]) + Sync + Send) {
    let (n0, n1, n2) = (ne[0], ne[1], ne[2]);
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, row) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            f(r % n1, (r / n1) % n2, r / (n1 * n2), row);
        }
    });
}

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

pub fn concat<T: Float>(a: &Src<'_, T>, b: &Src<'_, T>, dim: usize, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let split = a.ne[dim];
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
pub fn get_rows<T: Float, I: Float>(a: &Src<'_, T>, idx: &Src<'_, I>, out: &mut [T], ne: [usize; 4]) -> crate::Result<()> {
    let n0 = a.ne[0];
    for_each_pick(idx, a.ne[1], ne, |r, i11, i12, dst| {
        let src = (r + a.ne[1] * (i11 + a.ne[2] * i12)) * n0;
        copy_short(&mut out[dst..dst + n0], &a.d[src..src + n0]);
        Ok(())
    })
}

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

pub fn diag_mask_inf<T: Float>(a: &Src<'_, T>, n_past: i32, out: &mut [T], pool: &CpuPool) {
    fill(pool, out, a.ne, |i0, i1, i2, i3| {
        if i0 as i64 > n_past as i64 + i1 as i64 {
            T::NEG_INFINITY
        } else {
            a.at(i0, i1, i2, i3)
        }
    });
}

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

pub fn upscale<T: Float>(a: &Src<'_, T>, f: usize, out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    fill(pool, out, ne, |i0, i1, i2, i3| a.at(i0 / f, i1 / f, i2, i3));
}
