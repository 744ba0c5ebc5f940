//! The strided walk: every element of a layout, in ggml order (ne0 fastest),
//! with its byte offset.

use super::Layout;

/// Calls `f(logical_index, byte_offset)` for every element, in ggml order.
// BOUNDS-FN: `ne` and `nb` are [usize; MAX_DIMS] indexed by the literal 0.
#[inline]
pub fn for_each_offset(l: &Layout, base: usize, mut f: impl FnMut(usize, usize)) {
    let n0 = l.ne[0];
    for_each_row(l, base, |r, row| {
        for i0 in 0..n0 {
            f(r * n0 + i0, row + i0 * l.nb[0]);
        }
    });
}

/// Calls `f(row_index, byte_offset)` for the start of every row (every
/// index of dimensions 1..4), in ggml order: the walk of types stored in
/// blocks along dimension 0.
// BOUNDS-FN: `nb` is a [usize; MAX_DIMS] (MAX_DIMS = 5) indexed by literals
// below 5.
#[inline]
pub fn for_each_row(l: &Layout, base: usize, mut f: impl FnMut(usize, usize)) {
    let [_, n1, n2, n3, n4] = l.ne;
    let mut r = 0;
    for i4 in 0..n4 {
        let b4 = base + i4 * l.nb[4];
        for i3 in 0..n3 {
            for i2 in 0..n2 {
                for i1 in 0..n1 {
                    f(r, b4 + i1 * l.nb[1] + i2 * l.nb[2] + i3 * l.nb[3]);
                    r += 1;
                }
            }
        }
    }
}
