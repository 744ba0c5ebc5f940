//! The strided walk: every element of a layout, in ggml order (ne0 fastest),
//! with its byte offset.

use super::Layout;

/// Calls `f(logical_index, byte_offset)` for every element, in ggml order.
#[inline]
pub fn for_each_offset(l: &Layout, base: usize, mut f: impl FnMut(usize, usize)) {
    let [n0, n1, n2, n3] = l.ne;
    let mut i = 0;
    for i3 in 0..n3 {
        for i2 in 0..n2 {
            for i1 in 0..n1 {
                let row = base + i1 * l.nb[1] + i2 * l.nb[2] + i3 * l.nb[3];
                for i0 in 0..n0 {
                    f(i, row + i0 * l.nb[0]);
                    i += 1;
                }
            }
        }
    }
}
