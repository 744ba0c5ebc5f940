//! ggml's questions about layouts: contiguity in its several senses,
//! transposition and permutation, and comparisons of shapes and strides.
//! Written over however many dimensions a layout has.

use super::Layout;

/// Rows: ne1 * ne2 * ... (ggml's `ggml_nrows`).
pub fn nrows(l: &Layout) -> usize {
    l.ne.iter().skip(1).product()
}

/// ggml's `ggml_is_contiguous_n`: contiguous except that dimensions
/// 1..=n may have gaps between them (n = 0: fully contiguous).
// BOUNDS-FN: `ne` and `nb` are [usize; MAX_DIMS]; the literal 0 and i in
// 1..l.ne.len().
pub fn is_contiguous_n(l: &Layout, n: usize) -> bool {
    let es = l.dtype.size();
    if l.ne[0] != 1 && l.nb[0] != es {
        return false;
    }
    let mut next = es * l.ne[0];
    for i in 1..l.ne.len() {
        if l.ne[i] == 1 {
            continue;
        }
        if i > n {
            if l.nb[i] != next {
                return false;
            }
            next *= l.ne[i];
        } else {
            next = l.ne[i] * l.nb[i];
        }
    }
    true
}

/// Whether the elements fill exactly the bytes they span (no gaps).
pub fn is_contiguously_allocated(l: &Layout) -> bool {
    l.span_bytes() == l.nelements() * l.dtype.size()
}

/// Rows are contiguous (the first dimension is dense).
pub fn is_contiguous_rows(l: &Layout) -> bool {
    // BOUNDS: `ne` and `nb` are [usize; MAX_DIMS] indexed by the literal 0.
    l.ne[0] == 1 || l.nb[0] == l.dtype.size()
}

/// ggml's channel-contiguous layout: dimension 2 densest, then 0, then 1.
pub fn is_contiguous_channels(l: &Layout) -> bool {
    // BOUNDS: `nb` is a [usize; MAX_DIMS] (MAX_DIMS = 5) indexed below 3.
    l.ne.len() > 2 && l.nb[0] > l.nb[2] && l.nb[1] > l.nb[0] && l.nb[2] == l.dtype.size()
}

/// ggml's `ggml_is_transposed`: the first stride is larger than the second.
pub fn is_transposed(l: &Layout) -> bool {
    // BOUNDS: `nb` is a [usize; MAX_DIMS] indexed by the literals 0 and 1.
    l.nb[0] > l.nb[1]
}

/// ggml's `ggml_is_permuted`: some stride is larger than the next one.
pub fn is_permuted(l: &Layout) -> bool {
    // BOUNDS: `w` is a window of 2, indexed by 0 and 1.
    l.nb.windows(2).any(|w| w[0] > w[1])
}

pub fn same_shape(a: &Layout, b: &Layout) -> bool {
    a.ne == b.ne
}

pub fn same_stride(a: &Layout, b: &Layout) -> bool {
    a.nb == b.nb
}

/// Same type, sizes and strides.
pub fn same_layout(a: &Layout, b: &Layout) -> bool {
    a == b
}

/// Whether `b` is a whole repetition of `a` (ggml's `ggml_can_repeat`).
pub fn can_repeat(a: &Layout, b: &Layout) -> bool {
    if a.nelements() == 0 {
        return b.nelements() == 0;
    }
    a.ne.iter().zip(b.ne.iter()).all(|(&x, &y)| y % x == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn ggml_predicates() {
        let a = Layout::contiguous(DType::F32, [4, 8, 1, 1]);
        assert_eq!(nrows(&a), 8);
        for n in 0..3 {
            assert!(is_contiguous_n(&a, n));
        }
        assert!(is_contiguously_allocated(&a) && is_contiguous_rows(&a));
        assert!(!is_transposed(&a) && !is_permuted(&a));
        let t = Layout { ne: [8, 4, 1, 1, 1], nb: [16, 4, 128, 128, 128], ..a };
        assert!(is_transposed(&t) && is_permuted(&t) && !is_contiguous_n(&t, 0));
        assert!(!same_stride(&a, &t) && !same_layout(&a, &t));
        // rows of 4 taken every 8 elements: contiguous only when gaps after dim 1 are allowed
        let gappy = Layout { ne: [4, 3, 2, 1, 1], nb: [4, 32, 96, 192, 192], ..a };
        assert!(!is_contiguous_n(&gappy, 0) && is_contiguous_n(&gappy, 1));
        assert!(!is_contiguously_allocated(&gappy) && is_contiguous_rows(&gappy));
        let v = Layout::contiguous(DType::F32, [4, 1, 1, 1]);
        assert!(can_repeat(&v, &a));
        assert!(!can_repeat(&Layout::contiguous(DType::F32, [5, 1, 1, 1]), &a));
        let hwc = Layout { ne: [5, 6, 3, 1, 1], nb: [12, 60, 4, 360, 360], ..a };
        assert!(is_contiguous_channels(&hwc));
    }
}
