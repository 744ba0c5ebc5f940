//! A dense matrix product over strided operands, threaded over rows of the
//! result: c[m x n] = a[m x k] * b[k x n], where element (i, j) of an
//! operand is at `i * rs + j * cs` (so a transpose is just other strides).

use crate::ncnn::par;

/// A strided view of a matrix.
#[derive(Clone, Copy)]
pub struct MatView<'a> {
    pub data: &'a [f32],
    pub rs: usize,
    pub cs: usize,
}

impl<'a> MatView<'a> {
    /// A row-major matrix with `cols` columns.
    pub fn rows(data: &'a [f32], cols: usize) -> MatView<'a> {
        MatView { data, rs: cols, cs: 1 }
    }
    /// The transpose of a row-major matrix with `cols` columns.
    pub fn transposed(data: &'a [f32], cols: usize) -> MatView<'a> {
        MatView { data, rs: 1, cs: cols }
    }
    /// Whether element (r - 1, c - 1) is inside the data.
    fn covers(&self, r: usize, c: usize) -> bool {
        r == 0 || c == 0 || (r - 1) * self.rs + (c - 1) * self.cs < self.data.len()
    }
}

/// c (row-major, n columns) = a * b.
// BOUNDS-FN: c.len() >= m * n and the views covering m x k and k x n are
// asserted on entry; r0 = i * rows < m for each chunk of c[..m * n].
pub fn matmul(a: MatView, b: MatView, c: &mut [f32], m: usize, k: usize, n: usize) {
    assert!(a.covers(m, k) && b.covers(k, n) && c.len() >= m * n, "matrix operands too small");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c[..m * n].fill(0.0);
        return;
    }
    let rows = if m * k * n < 1 << 16 { m } else { m.div_ceil(par::threads()).max(1) };
    par::chunks_mut(&mut c[..m * n], rows * n, |i, cc| {
        let r0 = i * rows;
        let mr = cc.len() / n;
        // SAFETY: the views cover rows r0..r0+mr of a (checked above), all
        // of b, and cc is mr x n; matrixmultiply reads and writes only those.
        unsafe {
            matrixmultiply::sgemm(
                mr,
                k,
                n,
                1.0,
                a.data[r0 * a.rs..].as_ptr(),
                a.rs as isize,
                a.cs as isize,
                b.data.as_ptr(),
                b.rs as isize,
                b.cs as isize,
                0.0,
                cc.as_mut_ptr(),
                n as isize,
                1,
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_products_match_sums() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|v| (v % 5) as f32 - 2.0).collect();
        let bt: Vec<f32> = (0..n * k).map(|v| (v % 3) as f32 * 0.5).collect(); // n x k
        let mut c = vec![0.0; m * n];
        matmul(MatView::rows(&a, k), MatView::transposed(&bt, k), &mut c, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|l| a[i * k + l] * bt[j * k + l]).sum();
                assert_eq!(c[i * n + j], want);
            }
        }
    }
}
