//! How memory is seen as a tensor: element type, sizes (`ne`, ne0 fastest)
//! and byte strides (`nb`), ggml's conventions; the strided walk over
//! elements ([`walk`]) and element conversion ([`convert`]).

pub mod convert;
pub mod walk;

use crate::base::dtype::DType;

/// How a backend kernel sees one tensor: type, sizes and byte strides
/// (ggml's `ne` and `nb`), relative to a byte offset in some buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub dtype: DType,
    pub ne: [usize; 4],
    pub nb: [usize; 4],
}

impl Layout {
    /// A contiguous layout of the given sizes. For quantized types `nb[0]` is
    /// the bytes of a block and rows hold `ne[0] / block_size` blocks, as in
    /// ggml (creating such a tensor checks that `ne[0]` is a whole number of blocks).
    pub fn contiguous(dtype: DType, ne: [usize; 4]) -> Layout {
        let es = dtype.size();
        let row = es * (ne[0] / dtype.block_size());
        let nb = [es, row, row * ne[1], row * ne[1] * ne[2]];
        Layout { dtype, ne, nb }
    }

    /// Bytes of the first dimension: one element, or a row of blocks
    /// (ggml's `nbytes` counts quantized rows whole).
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

    pub fn is_contiguous(&self) -> bool {
        *self == Layout::contiguous(self.dtype, self.ne)
    }

    /// `span_bytes`, or None when it does not fit in memory addresses.
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
        for i in first..4 {
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
pub fn n_dims(ne: &[usize; 4]) -> usize {
    (1..4).rev().find(|&i| ne[i] > 1).map_or(1, |i| i + 1)
}

/// "[3, 4]": the sizes up to the last dimension above 1.
pub fn fmt_shape(ne: &[usize; 4]) -> String {
    let d = n_dims(ne);
    let parts: Vec<String> = ne[..d].iter().map(|n| n.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_basics() {
        let l = Layout::contiguous(DType::F32, [3, 2, 1, 1]);
        assert_eq!(l.nb, [4, 12, 24, 24]);
        assert!(l.is_contiguous());
        assert_eq!(l.span_bytes(), 24);
        let t = Layout { ne: [2, 3, 1, 1], nb: [12, 4, 24, 24], ..l };
        assert!(!t.is_contiguous());
        assert_eq!(t.span_bytes(), 12 + 8 + 4);
    }

    #[test]
    fn quantized_rows_are_whole_blocks() {
        use crate::base::quant::QType;
        // ggml: nb = [18, 18 * 64 / 32, ...] for Q4_0 [64, 3, 2]; nbytes counts rows whole.
        let l = Layout::contiguous(DType::Quant(QType::Q4_0), [64, 3, 2, 1]);
        assert_eq!(l.nb, [18, 36, 108, 216]);
        assert_eq!(l.span_bytes(), 216);
        assert!(l.is_contiguous());
        let v = Layout { ne: [64, 2, 1, 1], nb: [18, 72, 144, 144], ..l };
        assert_eq!(v.span_bytes(), 36 + 72);
    }
}
