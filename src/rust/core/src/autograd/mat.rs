//! Host matrices in double precision, column-major (R's layout), and the
//! dense kernels the autograd engine runs on the host.

use anyhow::{bail, Result};
use rayon::prelude::*;
use crate::backend::cpu::{dgemm, dgemm_par};

/// A column-major `rows x cols` matrix of f64: element (i, j) is
/// `data[i + j * rows]`, exactly as R stores a numeric matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Mat {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

/// Work (multiply-adds) above which a product is split over threads (about
/// where the time saved outweighs waking the other threads)...
const PAR_GEMM_WORK: usize = 1 << 20;
/// ...when it is also this deep (shallower ones mostly move memory).
const PAR_GEMM_DEPTH: usize = 64;
/// Elements above which element-wise loops run on several threads.
pub const PAR_ELEMS: usize = 1 << 16;

impl Mat {
    pub fn new(rows: usize, cols: usize, data: Vec<f64>) -> Result<Mat> {
        if rows.checked_mul(cols) != Some(data.len()) {
            bail!(
                "a {rows}x{cols} matrix needs {} values, got {}",
                rows.saturating_mul(cols),
                data.len()
            );
        }
        Ok(Mat { rows, cols, data })
    }
    pub fn zeros(rows: usize, cols: usize) -> Mat {
        Mat::filled(rows, cols, 0.0)
    }
    /// Sizes come from the user's tensors: a refused allocation unwinds
    /// (`base::alloc::Refused`) to the binding, which reports it as an error.
    pub fn filled(rows: usize, cols: usize, v: f64) -> Mat {
        Mat { rows, cols, data: checked_vec(rows, cols, v) }
    }
    pub fn scalar(v: f64) -> Mat {
        Mat { rows: 1, cols: 1, data: vec![v] }
    }
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn same_shape(&self, o: &Mat) -> bool {
        self.rows == o.rows && self.cols == o.cols
    }
    /// "3x4", for messages.
    pub fn shape_str(&self) -> String {
        format!("{}x{}", self.rows, self.cols)
    }
    pub fn col(&self, j: usize) -> &[f64] {
        &self.data[j * self.rows..(j + 1) * self.rows]
    }
    /// Element-wise map into a new matrix.
    pub fn map(&self, f: impl Fn(f64) -> f64 + Sync) -> Mat {
        let data = if self.len() >= PAR_ELEMS {
            self.data.par_iter().map(|&x| f(x)).collect()
        } else {
            self.data.iter().map(|&x| f(x)).collect()
        };
        Mat { rows: self.rows, cols: self.cols, data }
    }
    /// Element-wise combination of two matrices of the same shape.
    pub fn zip(&self, o: &Mat, f: impl Fn(f64, f64) -> f64 + Sync) -> Mat {
        debug_assert!(self.same_shape(o));
        let data = if self.len() >= PAR_ELEMS {
            self.data.par_iter().zip(o.data.par_iter()).map(|(&a, &b)| f(a, b)).collect()
        } else {
            self.data.iter().zip(&o.data).map(|(&a, &b)| f(a, b)).collect()
        };
        Mat { rows: self.rows, cols: self.cols, data }
    }
    /// Adds `o` (same shape) into `self`.
    pub fn add_assign(&mut self, o: &Mat) {
        for (a, b) in self.data.iter_mut().zip(&o.data) {
            *a += *b;
        }
    }
    pub fn transpose(&self) -> Mat {
        let (r, c) = (self.rows, self.cols);
        let mut out = checked_vec(r, c, 0.0);
        for j in 0..c {
            for i in 0..r {
                out[j + i * c] = self.data[i + j * r];
            }
        }
        Mat { rows: c, cols: r, data: out }
    }
    /// Sums over columns: a `rows x 1` matrix (R's `rowSums`).
    pub fn row_sums(&self) -> Mat {
        let mut out = vec![0.0; self.rows];
        for j in 0..self.cols {
            for (o, x) in out.iter_mut().zip(self.col(j)) {
                *o += *x;
            }
        }
        Mat { rows: self.rows, cols: 1, data: out }
    }
    /// Sums over rows: a `1 x cols` matrix (R's `colSums`).
    pub fn col_sums(&self) -> Mat {
        let data = (0..self.cols).map(|j| self.col(j).iter().sum()).collect();
        Mat { rows: 1, cols: self.cols, data }
    }
    pub fn sum(&self) -> f64 {
        self.data.iter().sum()
    }
}

/// `op(a) %*% op(b)` where `op` transposes when the flag is set.
pub fn gemm(a: &Mat, ta: bool, b: &Mat, tb: bool) -> Result<Mat> {
    gemm_post(a, ta, b, tb, &|_, _, _| {})
}

/// `gemm`, then `post(first_row, column, values)` on every column segment
/// of the result (each element once), while the product is in the cache.
pub fn gemm_post(a: &Mat, ta: bool, b: &Mat, tb: bool, post: dgemm_par::Post) -> Result<Mat> {
    let (m, ka) = if ta { (a.cols, a.rows) } else { (a.rows, a.cols) };
    let (kb, n) = if tb { (b.cols, b.rows) } else { (b.rows, b.cols) };
    if ka != kb {
        bail!(
            "non-conformable matrices: {}{} %*% {}{} (the columns of the left must equal the rows of the right)",
            a.shape_str(),
            if ta { " transposed" } else { "" },
            b.shape_str(),
            if tb { " transposed" } else { "" }
        );
    }
    let k = ka;
    if m == 0 || n == 0 || k == 0 {
        let mut c = checked_vec(m, n, 0.0);
        for j in 0..n {
            post(0, j, &mut c[j * m..(j + 1) * m]);
        }
        return Ok(Mat { rows: m, cols: n, data: c });
    }
    // Column-major strides of op(a) and op(b).
    let (rsa, csa) = if ta { (a.rows as isize, 1) } else { (1, a.rows as isize) };
    let (rsb, csb) = if tb { (b.rows as isize, 1) } else { (1, b.rows as isize) };
    let av = dgemm::View { ptr: a.data.as_ptr(), rs: rsa, cs: csa };
    let bv = dgemm::View { ptr: b.data.as_ptr(), rs: rsb, cs: csb };
    // The host CPU backend's threads (`ggml_backend_cpu_set_n_threads()`).
    let pool = match crate::backend::host().imp() {
        crate::backend::BackendImpl::Cpu(c) => c.pool(),
        crate::backend::BackendImpl::Vulkan(_) => unreachable!("the host backend is a CPU backend"),
    };
    let big = m * n * k > PAR_GEMM_WORK && k >= PAR_GEMM_DEPTH && pool.n_threads > 1;
    // Not zeroed first: the product writes every element of C.
    let mut c: Vec<f64> = crate::base::alloc::try_with_capacity(m.saturating_mul(n), "an autograd matrix")?;
    // SAFETY: the views address op(a) (m x k) and op(b) (k x n) inside their
    // matrices; C has room for m x n values, all of which the product
    // writes before the length is set.
    unsafe {
        if big {
            dgemm_par::dgemm_par(&pool, m, k, n, av, bv, c.as_mut_ptr(), m, post);
        } else {
            dgemm::dgemm(m, k, n, av, bv, c.as_mut_ptr(), m);
        }
        c.set_len(m * n);
    }
    if !big {
        for j in 0..n {
            post(0, j, &mut c[j * m..(j + 1) * m]);
        }
    }
    Ok(Mat { rows: m, cols: n, data: c })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &Mat, b: &Mat) -> Mat {
        let mut c = Mat::zeros(a.rows, b.cols);
        for i in 0..a.rows {
            for j in 0..b.cols {
                let mut s = 0.0;
                for l in 0..a.cols {
                    s += a.data[i + l * a.rows] * b.data[l + j * b.rows];
                }
                c.data[i + j * a.rows] = s;
            }
        }
        c
    }

    fn seq(r: usize, c: usize, s: f64) -> Mat {
        Mat::new(r, c, (0..r * c).map(|i| ((i as f64) * s).sin()).collect()).unwrap()
    }

    #[test]
    fn gemm_all_transposes() {
        let a = seq(5, 3, 0.7);
        let b = seq(3, 4, 1.3);
        let want = naive(&a, &b);
        let at = a.transpose();
        let bt = b.transpose();
        for (x, tx, y, ty) in [(&a, false, &b, false), (&at, true, &b, false), (&a, false, &bt, true), (&at, true, &bt, true)] {
            let got = gemm(x, tx, y, ty).unwrap();
            assert_eq!(got.rows, 5);
            assert_eq!(got.cols, 4);
            for (g, w) in got.data.iter().zip(&want.data) {
                assert!((g - w).abs() < 1e-12);
            }
        }
        assert!(gemm(&a, false, &a, false).is_err());
    }

    #[test]
    fn gemm_parallel_split_matches() {
        let a = seq(130, 200, 0.01);
        let b = seq(200, 170, 0.02);
        let got = gemm(&a, false, &b, false).unwrap();
        let want = naive(&a, &b);
        for (g, w) in got.data.iter().zip(&want.data) {
            assert!((g - w).abs() < 1e-9);
        }
        let got_t = gemm(&b, true, &a, true).unwrap().transpose();
        for (g, w) in got_t.data.iter().zip(&want.data) {
            assert!((g - w).abs() < 1e-9);
        }
    }

    #[test]
    fn gemm_splits_rows_and_columns() {
        // Tall (rows split), wide (columns split) and odd block remainders.
        for (m, k, n) in [(1100, 60, 70), (70, 60, 1100), (600, 90, 600)] {
            let a = seq(m, k, 0.013);
            let b = seq(k, n, 0.007);
            let want = naive(&a, &b);
            for (ta, tb) in [(false, false), (true, true)] {
                let at = if ta { a.transpose() } else { a.clone() };
                let bt = if tb { b.transpose() } else { b.clone() };
                let got = gemm(&at, ta, &bt, tb).unwrap();
                for (g, w) in got.data.iter().zip(&want.data) {
                    assert!((g - w).abs() < 1e-9 * (1.0 + w.abs()), "{m}x{k}x{n}");
                }
            }
        }
    }

    #[test]
    fn sums() {
        let m = Mat::new(2, 3, vec![1., 2., 3., 4., 5., 6.]).unwrap();
        assert_eq!(m.row_sums().data, vec![9., 12.]);
        assert_eq!(m.col_sums().data, vec![3., 7., 11.]);
        assert_eq!(m.transpose().data, vec![1., 3., 5., 2., 4., 6.]);
    }
}

/// `rows x cols` copies of `v`, or a refusal that unwinds to the binding.
fn checked_vec(rows: usize, cols: usize, v: f64) -> Vec<f64> {
    crate::base::alloc::or_unwind(crate::base::alloc::try_vec(rows.saturating_mul(cols), v, "an autograd matrix"))
}
