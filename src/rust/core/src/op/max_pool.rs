//! 2-D max pooling that remembers where each maximum came from, and its
//! gradient, on the channels-first layout of the Keras-style layers: one
//! sample of `C` channels, `W` columns and `H` rows is `c + C (x + W y)`,
//! a batch of `N` samples `C W H N` values in that order ("valid" windows,
//! no padding).
//!
//! - [`MaxPool::Forward`]: srcs [x (`C W H N` values)] -> `[P, 2]` with
//!   `P = C OW OH N`: the first `P` values are the maxima (channels first,
//!   `[C, OW, OH, N]`), the next `P` the tap of each window that held it
//!   (`kx + KW ky`, as a float: exact for any window), the first one where
//!   several taps hold the maximum (a NaN counts as the maximum).
//! - [`MaxPool::Back`]: srcs [g (`P` values), the forward's `[P, 2]`] ->
//!   `[C W H, N]`: each value of g added to the input position its window's
//!   tap points to (zero elsewhere).

use super::rules::{f32_or_f64, float, sh, src, Out};
use crate::layout::Layout;
use anyhow::ensure;

/// The geometry of a pooling: channels, width and height of one sample,
/// window width and height, strides along the width and the height.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolGeom {
    pub c: usize,
    pub w: usize,
    pub h: usize,
    pub kw: usize,
    pub kh: usize,
    pub sw: usize,
    pub sh: usize,
}

impl PoolGeom {
    /// Output width and height, or the error when the window does not fit.
    pub fn out_size(&self) -> crate::Result<(usize, usize)> {
        ensure!(
            self.c > 0 && self.kw > 0 && self.kh > 0 && self.sw > 0 && self.sh > 0,
            "max pooling: channels, window and strides must be positive ({self:?})"
        );
        ensure!(
            self.kw <= self.w && self.kh <= self.h,
            "max pooling: a {}x{} window does not fit a {}x{} input (height x width)",
            self.kh,
            self.kw,
            self.h,
            self.w
        );
        Ok(((self.w - self.kw) / self.sw + 1, (self.h - self.kh) / self.sh + 1))
    }

    /// Values of one input sample.
    pub fn sample(&self) -> usize {
        self.c * self.w * self.h
    }

    /// Values of one output sample.
    pub fn out_sample(&self) -> crate::Result<usize> {
        let (ow, oh) = self.out_size()?;
        Ok(self.c * ow * oh)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxPool {
    Forward(PoolGeom),
    Back(PoolGeom),
}

impl MaxPool {
    pub fn name(&self) -> &'static str {
        match self {
            MaxPool::Forward(_) => "MAX_POOL_ARG",
            MaxPool::Back(_) => "MAX_POOL_BACK",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            MaxPool::Forward(_) => (1, 1),
            MaxPool::Back(_) => (2, 2),
        }
    }

    pub fn geom(&self) -> &PoolGeom {
        match self {
            MaxPool::Forward(g) | MaxPool::Back(g) => g,
        }
    }

    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let g = self.geom();
        let per = g.out_sample()?;
        let a = src(s, 0)?;
        float(a, "a")?;
        match self {
            MaxPool::Forward(_) => {
                let n = a.nelements();
                ensure!(
                    n > 0 && n % g.sample() == 0,
                    "max pooling: the input ({}) is not a whole batch of {}x{}x{} images",
                    sh(a),
                    g.h,
                    g.w,
                    g.c
                );
                Ok(Out { dtype: f32_or_f64(&[a]), ne: [per * (n / g.sample()), 2, 1, 1] })
            }
            MaxPool::Back(_) => {
                let arg = src(s, 1)?;
                float(arg, "the pooling's result")?;
                let p = a.nelements();
                ensure!(
                    p > 0 && p % per == 0 && arg.nelements() == 2 * p,
                    "max pooling gradient: g ({}) and the pooling's result ({}) do not match",
                    sh(a),
                    sh(arg)
                );
                Ok(Out { dtype: f32_or_f64(&[a, arg]), ne: [g.sample(), p / per, 1, 1] })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn shapes_and_errors() {
        let g = PoolGeom { c: 3, w: 5, h: 4, kw: 2, kh: 2, sw: 2, sh: 1 };
        assert_eq!(g.out_size().unwrap(), (2, 3));
        let x = Layout::contiguous(DType::F32, [60, 2, 1, 1]);
        assert_eq!(MaxPool::Forward(g).infer(&[x]).unwrap().ne, [36, 2, 1, 1]);
        let gr = Layout::contiguous(DType::F32, [18, 2, 1, 1]);
        let arg = Layout::contiguous(DType::F32, [36, 2, 1, 1]);
        assert_eq!(MaxPool::Back(g).infer(&[gr, arg]).unwrap().ne, [60, 2, 1, 1]);
        assert!(MaxPool::Forward(g).infer(&[Layout::contiguous(DType::F32, [61, 1, 1, 1])]).is_err());
        let big = PoolGeom { kw: 6, ..g };
        assert!(big.out_size().unwrap_err().to_string().contains("does not fit"));
    }
}
