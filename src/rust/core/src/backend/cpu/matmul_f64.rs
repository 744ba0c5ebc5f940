//! The products of f64 tensors through `gemm_rt` (AVX-512 / AVX2 kernels,
//! on the pool's threads when the product is large enough), reading every
//! operand with its own strides. `linear` adds a bias and applies an
//! activation to each column of the result after the product.

use super::access::Src;
use super::dgemm_par::Post;
use super::gemm_rt::{self, Strided};
use super::matmul::{batched, bias_act, Gemm};
use super::par::{par_rows, Pool, PAR_MIN};
use crate::op::UnaryOp;

/// An `rows x cols` operand inside `d` with element strides `rs`, `cs`.
fn view(d: &[f64], rows: usize, cols: usize, rs: usize, cs: usize) -> Strided<f64> {
    if rows > 0 && cols > 0 {
        let last = (rows - 1) * rs + (cols - 1) * cs;
        assert!(last < d.len(), "f64 product operand bounds");
    }
    Strided { ptr: d.as_ptr(), rs: rs as isize, cs: cs as isize }
}

/// `C (m x n, column-major, contiguous) = op(A) (m x k) * op(B) (k x n)`
/// (`gemm_rt`, on the pool's threads when large), then `post` on every
/// column of C.
fn product(pool: &Pool, m: usize, k: usize, n: usize, a: Strided<f64>, b: Strided<f64>, c: &mut [f64], post: Post) {
    assert_eq!(c.len(), m * n, "f64 product result size");
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: `view` checked that op(A) (m x k) and op(B) (k x n) lie inside
    // their slices, which outlive the call; C is exactly the m x n
    // column-major block of `c`, borrowed exclusively.
    unsafe { gemm_rt::product(pool, m, k, n, a, b, c.as_mut_ptr(), 1, m as isize) };
    if m * n >= PAR_MIN && pool.n_threads > 1 {
        par_rows(pool, c, m, |j0, cols| {
            for (j, col) in cols.chunks_mut(m).enumerate() {
                post(0, j0 + j, col);
            }
        });
    } else {
        for (j, col) in c.chunks_mut(m).enumerate() {
            post(0, j, col);
        }
    }
}

fn no_post(_: usize, _: usize, _: &mut [f64]) {}

impl Gemm for f64 {
    fn extended(op: &crate::op::Op, _: &[Src<'_, f64>], _: &mut [f64], _: [usize; 4], _: &Pool) -> crate::Result<()> {
        anyhow::bail!("{} has no f64 kernel on the CPU backend (it computes in f32)", op.name())
    }
    fn mul_mat(a: &Src<'_, f64>, b: &Src<'_, f64>, out: &mut [f64], pool: &Pool) {
        let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
        let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
        batched(a, b, out, m * n, |sa, sb, c| {
            // op(A)(i, p) = a[p, i], op(B)(p, j) = b[p, j].
            product(pool, m, k, n, view(sa, m, k, a1, a0), view(sb, k, n, b0, b1), c, &no_post);
        });
    }

    fn out_prod(a: &Src<'_, f64>, b: &Src<'_, f64>, out: &mut [f64], pool: &Pool) {
        let (m, k, n) = (a.ne[0], a.ne[1], b.ne[0]);
        let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
        batched(a, b, out, m * n, |sa, sb, c| {
            // op(A)(i, p) = a[i, p], op(B)(p, j) = b[j, p].
            product(pool, m, k, n, view(sa, m, k, a0, a1), view(sb, k, n, b1, b0), c, &no_post);
        });
    }

    fn linear(a: &Src<'_, f64>, b: &Src<'_, f64>, c: &[f64], act: Option<UnaryOp>, out: &mut [f64], pool: &Pool) {
        let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
        let post = |i0: usize, _j: usize, col: &mut [f64]| bias_act(col, &c[i0..], act);
        let (av, bv) = (view(&a.d, m, k, a.st[1], a.st[0]), view(&b.d, k, n, b.st[0], b.st[1]));
        product(pool, m, k, n, av, bv, out, &post);
    }
}
