//! The shared pieces of the ops' shape rules: the result description, how
//! tensors are named in messages, and the common checks.

use crate::base::dtype::DType;
use crate::layout::{fmt_shape, Dims, Layout};
use anyhow::ensure;

/// Type and sizes of a node's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Out {
    pub dtype: DType,
    pub ne: [usize; 4],
}

/// Type and sizes of a node's result, all five dimensions (what
/// [`crate::op::shape::infer`] gives; the rules of four give an [`Out`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shaped {
    pub dtype: DType,
    pub ne: Dims,
}

impl Shaped {
    /// The sizes of the first four dimensions.
    // BOUNDS-FN: ne is a Dims ([usize; 5]) indexed by literals below 5
    // (rustc rejects a constant index past a fixed array's end).
    pub fn ne4(&self) -> [usize; 4] {
        [self.ne[0], self.ne[1], self.ne[2], self.ne[3]]
    }
}

impl From<Out> for Shaped {
    // BOUNDS-FN: Out::ne is a [usize; 4] indexed by literals below 4 (rustc
    // rejects a constant index past a fixed array's end).
    fn from(o: Out) -> Shaped {
        Shaped { dtype: o.dtype, ne: [o.ne[0], o.ne[1], o.ne[2], o.ne[3], 1] }
    }
}

/// Source `i` of an op's sources: [`crate::op::shape::infer`] checks their
/// number first, and the rules take each through here all the same, so a
/// rule called with too few is an error, never a panic.
pub(crate) fn src(s: &[Layout], i: usize) -> crate::Result<&Layout> {
    s.get(i).ok_or_else(|| anyhow::anyhow!("internal: source {} of {} asked for", i + 1, s.len()))
}

/// Whether `d` divides `n` (false for `d` = 0: an empty size divides nothing).
pub(crate) fn divides(d: usize, n: usize) -> bool {
    d > 0 && n % d == 0
}

pub(crate) fn sh(l: &Layout) -> String {
    format!("{} {}", l.dtype.name(), fmt_shape(&l.ne))
}

/// ggml's `can_repeat`: `b` tiles `a` when every size of `a` is a multiple of `b`'s.
pub fn can_repeat(b: &[usize], a: &[usize]) -> bool {
    b.len() == a.len() && b.iter().zip(a).all(|(&x, &y)| x > 0 && y % x == 0)
}

pub(crate) fn float(l: &Layout, what: &str) -> crate::Result<()> {
    ensure!(
        l.dtype.is_float(),
        "{what} must be a floating-point tensor (f32, f16, bf16 or f64), not {}",
        sh(l)
    );
    Ok(())
}

/// The type of a result ggml computes in f32: f64 when a source is f64.
pub(crate) fn f32_or_f64(srcs: &[&Layout]) -> DType {
    if srcs.iter().any(|l| l.dtype == DType::F64) {
        DType::F64
    } else {
        DType::F32
    }
}

pub(crate) fn out_size(what: &str, input: usize, k: usize, s: i32, p: i64, d: i32) -> crate::Result<usize> {
    ensure!(s > 0 && d > 0, "{what}: stride and dilation must be positive (got {s} and {d})");
    let span = d as i64 * (k as i64 - 1) + 1;
    let n = input as i64 + 2 * p - span;
    ensure!(
        n >= 0,
        "{what}: the window ({k} wide, dilation {d}) does not fit an input of size {input} \
         with padding {p}"
    );
    Ok((n / s as i64 + 1) as usize)
}
