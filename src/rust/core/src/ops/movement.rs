//! Kernels that move values around: repeat, concat, get_rows, diag_mask_inf,
//! pad and nearest-neighbour upscale.

use super::access::Src;
use anyhow::ensure;

/// Calls `f(flat, i0, i1, i2, i3)` for every index of sizes `ne`, in ggml order.
#[inline]
fn each(ne: [usize; 4], mut f: impl FnMut(usize, usize, usize, usize, usize)) {
    let mut i = 0;
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    f(i, i0, i1, i2, i3);
                    i += 1;
                }
            }
        }
    }
}

pub fn repeat(a: &Src<'_>, out: &mut [f32], ne: [usize; 4]) {
    let an = a.ne;
    each(ne, |i, i0, i1, i2, i3| out[i] = a.at(i0 % an[0], i1 % an[1], i2 % an[2], i3 % an[3]));
}

pub fn concat(a: &Src<'_>, b: &Src<'_>, dim: usize, out: &mut [f32], ne: [usize; 4]) {
    let split = a.ne[dim];
    each(ne, |i, i0, i1, i2, i3| {
        let mut idx = [i0, i1, i2, i3];
        out[i] = if idx[dim] < split {
            a.at(i0, i1, i2, i3)
        } else {
            idx[dim] -= split;
            b.at(idx[0], idx[1], idx[2], idx[3])
        };
    });
}

pub fn get_rows(a: &Src<'_>, idx: &Src<'_>, out: &mut [f32], ne: [usize; 4]) -> crate::Result<()> {
    let n0 = a.ne[0];
    for i12 in 0..ne[3] {
        for i11 in 0..ne[2] {
            for i10 in 0..ne[1] {
                let r = idx.at(i10, i11, i12, 0);
                ensure!(
                    r >= 0.0 && (r as usize) < a.ne[1],
                    "get_rows: row index {r} is out of range: the tensor has {} rows (indices \
                     start at 0)",
                    a.ne[1]
                );
                let src = (r as usize + a.ne[1] * (i11 + a.ne[2] * i12)) * n0;
                let dst = (i10 + ne[1] * (i11 + ne[2] * i12)) * n0;
                out[dst..dst + n0].copy_from_slice(&a.d[src..src + n0]);
            }
        }
    }
    Ok(())
}

pub fn diag_mask_inf(a: &Src<'_>, n_past: i32, out: &mut [f32]) {
    each(a.ne, |i, i0, i1, _, _| {
        out[i] = if i0 as i64 > n_past as i64 + i1 as i64 { f32::NEG_INFINITY } else { a.d[i] };
    });
}

pub fn pad(a: &Src<'_>, out: &mut [f32], ne: [usize; 4]) {
    let an = a.ne;
    each(ne, |i, i0, i1, i2, i3| {
        out[i] = if i0 < an[0] && i1 < an[1] && i2 < an[2] && i3 < an[3] {
            a.at(i0, i1, i2, i3)
        } else {
            0.0
        };
    });
}

pub fn upscale(a: &Src<'_>, f: usize, out: &mut [f32], ne: [usize; 4]) {
    each(ne, |i, i0, i1, i2, i3| out[i] = a.at(i0 / f, i1 / f, i2, i3));
}
