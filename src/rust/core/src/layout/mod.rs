//! How memory is seen as a tensor: element type, sizes (`ne`, ne0 fastest)
//! and byte strides (`nb`), ggml's conventions; the strided walk over
//! elements ([`walk`]) and element conversion ([`convert`]).

pub mod convert;
pub mod predicates;
pub mod walk;

use crate::base::dtype::DType;

/// The most dimensions a tensor has: ggml's four, and a fifth (`ne[4]`)
/// that the element-wise ops, the row ops and `concat` walk like the others.
pub const MAX_DIMS: usize = 5;

/// Sizes of all dimensions, ne0 fastest.
pub type Dims = [usize; MAX_DIMS];

/// Sizes given for the first four dimensions (the fifth is 1) or for all five.
pub trait IntoDims {
    fn into_dims(self) -> Dims;
}

impl IntoDims for [usize; 4] {
    // BOUNDS-FN: `self` is a [usize; 4] indexed by literals below 4.
    #[inline]
    fn into_dims(self) -> Dims {
        [self[0], self[1], self[2], self[3], 1]
    }
}

impl IntoDims for Dims {
    #[inline]
    fn into_dims(self) -> Dims {
        self
    }
}

/// How a backend kernel sees one tensor: type, sizes and byte strides
/// (ggml's `ne` and `nb`), relative to a byte offset in some buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub dtype: DType,
    pub ne: Dims,
    pub nb: Dims,
}

impl Layout {
    /// A contiguous layout of the given sizes. For quantized types `nb[0]` is
    /// the bytes of a block and rows hold `ne[0] / block_size` blocks, as in
    /// ggml (creating such a tensor checks that `ne[0]` is a whole number of blocks).
    // BOUNDS-FN: `ne` and `nb` are Dims ([usize; MAX_DIMS]); i in 2..MAX_DIMS,
    // so i - 1 and i are below MAX_DIMS.
    pub fn contiguous(dtype: DType, ne: impl IntoDims) -> Layout {
        let ne = ne.into_dims();
        let es = dtype.size();
        let row = es.saturating_mul(ne[0] / dtype.block_size());
        let mut nb = [es, row, 0, 0, 0];
        for i in 2..MAX_DIMS {
            // Saturates: a size that overflows is refused by the byte checks of
            // whoever allocates it, rather than wrapping to a small stride.
            nb[i] = nb[i - 1].saturating_mul(ne[i - 1]);
        }
        Layout { dtype, ne, nb }
    }

    /// The sizes of the first four dimensions, for kernels that work on up
    /// to four: a fifth dimension above 1 is walked by their driver, which
    /// hands them one slice of it at a time (or refused by the op's shape rule).
    // BOUNDS-FN: `ne` is a [usize; MAX_DIMS] indexed by literals below 4.
    #[inline]
    pub fn ne4(&self) -> [usize; 4] {
        [self.ne[0], self.ne[1], self.ne[2], self.ne[3]]
    }

    /// The byte strides of the first four dimensions (see [`Layout::ne4`]).
    // BOUNDS-FN: `nb` is a [usize; MAX_DIMS] indexed by literals below 4.
    #[inline]
    pub fn nb4(&self) -> [usize; 4] {
        [self.nb[0], self.nb[1], self.nb[2], self.nb[3]]
    }

    /// Slice `i` of the fifth dimension, as a layout of four dimensions and
    /// the byte offset of the slice from the start of this one.
    // BOUNDS-FN: `ne` and `nb` are [usize; MAX_DIMS] (MAX_DIMS = 5) indexed by
    // literals below 5.
    #[inline]
    pub fn slice4(&self, i: usize) -> (Layout, usize) {
        let mut l = *self;
        l.ne[4] = 1;
        l.nb[4] = l.nb[3] * l.ne[3];
        (l, i * self.nb[4])
    }

    /// Bytes of the first dimension: one element, or a row of blocks
    /// (ggml's `nbytes` counts quantized rows whole).
    // BOUNDS-FN: `ne` and `nb` are [usize; MAX_DIMS] indexed by the literal 0.
    fn first_dim_bytes(&self) -> Option<usize> {
        let bs = self.dtype.block_size();
        if bs == 1 {
            Some(self.dtype.size())
        } else {
            self.ne[0].checked_mul(self.nb[0]).map(|b| b / bs)
        }
    }

    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Whether the strides are those of [`Layout::contiguous`] (compared
    /// one by one, without building that layout: every node asks this).
    // BOUNDS-FN: `ne` and `nb` are [usize; MAX_DIMS]; the literal 0, and i in
    // 2..MAX_DIMS so i - 1 and i are below MAX_DIMS.
    pub fn is_contiguous(&self) -> bool {
        let es = self.dtype.size();
        self.nb[0] == es
            && self.nb[1] == es * (self.ne[0] / self.dtype.block_size())
            && (2..MAX_DIMS).all(|i| self.nb[i] == self.nb[i - 1] * self.ne[i - 1])
    }

    /// `span_bytes`, or None when it does not fit in memory addresses.
    // BOUNDS-FN: `ne` and `nb` are [usize; MAX_DIMS] and i < MAX_DIMS.
    pub fn checked_span_bytes(&self) -> Option<usize> {
        let mut n: usize = 1;
        for &e in &self.ne {
            n = n.checked_mul(e)?;
        }
        if n == 0 {
            return Some(0);
        }
        let mut span = self.first_dim_bytes()?;
        let first = if self.dtype.block_size() == 1 { 0 } else { 1 };
        for i in first..MAX_DIMS {
            span = span.checked_add((self.ne[i] - 1).checked_mul(self.nb[i])?)?;
        }
        (span <= isize::MAX as usize / 2).then_some(span)
    }

    /// Bytes spanned from the first to one past the last element.
    pub fn span_bytes(&self) -> usize {
        self.checked_span_bytes().unwrap_or(usize::MAX)
    }
}

/// ggml's number of dimensions: 1 + the last dimension above 1 (at least 1).
pub fn n_dims(ne: &[usize]) -> usize {
    // BOUNDS: i in 1..ne.len().
    (1..ne.len()).rev().find(|&i| ne[i] > 1).map_or(1, |i| i + 1)
}

/// "[3, 4]": the sizes up to the last dimension above 1.
pub fn fmt_shape(ne: &[usize]) -> String {
    let d = n_dims(ne);
    let parts: Vec<String> = ne.iter().take(d).map(|n| n.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_basics() {
        let l = Layout::contiguous(DType::F32, [3, 2, 1, 1]);
        assert_eq!(l.nb, [4, 12, 24, 24, 24]);
        assert!(l.is_contiguous());
        assert_eq!(l.span_bytes(), 24);
        let t = Layout { ne: [2, 3, 1, 1, 1], nb: [12, 4, 24, 24, 24], ..l };
        assert!(!t.is_contiguous());
        assert_eq!(t.span_bytes(), 12 + 8 + 4);
    }

    #[test]
    fn quantized_rows_are_whole_blocks() {
        use crate::base::quant::QType;
        // ggml: nb = [18, 18 * 64 / 32, ...] for Q4_0 [64, 3, 2]; nbytes counts rows whole.
        let l = Layout::contiguous(DType::Quant(QType::Q4_0), [64, 3, 2, 1]);
        assert_eq!(l.nb, [18, 36, 108, 216, 216]);
        assert_eq!(l.span_bytes(), 216);
        assert!(l.is_contiguous());
        let v = Layout { ne: [64, 2, 1, 1, 1], nb: [18, 72, 144, 144, 144], ..l };
        assert_eq!(v.span_bytes(), 36 + 72);
    }

    #[test]
    fn five_dimensions() {
        let l = Layout::contiguous(DType::F32, [3, 2, 2, 2, 3]);
        assert_eq!(l.nb, [4, 12, 24, 48, 96]);
        assert_eq!((l.nelements(), l.span_bytes(), n_dims(&l.ne)), (72, 288, 5));
        assert_eq!(fmt_shape(&l.ne), "[3, 2, 2, 2, 3]");
        let (s, off) = l.slice4(2);
        assert_eq!((s.ne, off, s.nelements()), ([3, 2, 2, 2, 1], 192, 24));
        assert!(s.is_contiguous());
        // a 4-D tensor is one slice of itself
        let f = Layout::contiguous(DType::F32, [3, 2, 1, 1]);
        assert_eq!((f.slice4(0), n_dims(&f.ne)), ((f, 0), 2));
    }
}
