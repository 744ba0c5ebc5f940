//! The products of f64 tensors, reading every operand with its own strides:
//! a large product on several threads runs the tuned kernel of `dgemm` split
//! over the pool (`dgemm_par`, which adds a bias and applies an activation
//! to each block while it is in the cache); a large shallow one (depth under
//! 64: convolution patches) runs `gemm_rt` split by `gemm` over the pool;
//! every other product runs `gemm_rt`'s kernels (AVX-512 / AVX2) on the
//! calling thread. Measured side by side (the autograd's MLP steps and
//! Keras-style fits, 2 threads): `gemm`'s own threading of deep f64 products
//! scaled 1.2x where `dgemm_par` scales 2x, it wins on shallow ones, and on
//! one thread `gemm_rt` is the faster.

use super::access::Src;
use super::dgemm::F64View;
use super::dgemm_par::{dgemm_par, Post};
use super::gemm_rt::{self, Strided};
use super::matmul::{batched, bias_act, GemmFloat};
use super::par::{threshold, CpuPool, PAR_PRODUCT};
use crate::op::UnaryOp;

/// A product of at least `PAR_PRODUCT` multiply-adds is split over threads
/// by `dgemm_par` when it is also this deep (shallower ones mostly move memory).
const PAR_GEMM_DEPTH: usize = 64;

/// An `rows x cols` operand inside `d` with element strides `rs`, `cs`.
fn view(d: &[f64], rows: usize, cols: usize, rs: usize, cs: usize) -> Strided<f64> {
    if rows > 0 && cols > 0 {
        let last = (rows - 1) * rs + (cols - 1) * cs;
        assert!(last < d.len(), "f64 product operand bounds");
    }
    Strided { ptr: d.as_ptr(), rs: rs as isize, cs: cs as isize }
}

/// `C (m x n, column-major, contiguous) = op(A) (m x k) * op(B) (k x n)`,
/// then `post` on every column segment of C.
fn product(pool: &CpuPool, m: usize, k: usize, n: usize, a: Strided<f64>, b: Strided<f64>, c: &mut [f64], post: Post) {
    assert_eq!(c.len(), m * n, "f64 product result size");
    if m == 0 || n == 0 {
        return;
    }
    let large = m * n * k >= threshold(PAR_PRODUCT) && pool.n_threads > 1;
    let big = large && k >= PAR_GEMM_DEPTH;
    // SAFETY: `view` checked that op(A) (m x k) and op(B) (k x n) lie inside
    // their slices, which outlive the call; C is exactly the m x n
    // column-major block (leading dimension m) of `c`, borrowed exclusively.
    unsafe {
        if big {
            let (a, b) = (F64View { ptr: a.ptr, rs: a.rs, cs: a.cs }, F64View { ptr: b.ptr, rs: b.rs, cs: b.cs });
            return dgemm_par(pool, m, k, n, a, b, c.as_mut_ptr(), m, post);
        }
        // shallow and large (convolution patches): `gemm`'s own split
        gemm_rt::product(large.then_some(pool), m, k, n, a, b, c.as_mut_ptr(), 1, m as isize);
    }
    for (j, col) in c.chunks_mut(m).enumerate() {
        post(0, j, col);
    }
}

fn no_post(_: usize, _: usize, _: &mut [f64]) {}

impl GemmFloat for f64 {
    fn conv_2d(k: &Src<'_, f64>, x: &Src<'_, f64>, p: [i32; 6], out: &mut [f64], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
        super::conv_gemm::conv_2d(k, x, p, out, ne, pool)
    }
    fn extended(op: &crate::op::Op, _: &[Src<'_, f64>], _: &mut [f64], _: [usize; 4], _: &CpuPool) -> crate::Result<()> {
        anyhow::bail!("{} has no f64 kernel on the CPU backend (it computes in f32)", op.name())
    }
    // BOUNDS-FN: `ne` and `st` are [usize; 4] indexed by literals.
    fn mul_mat(a: &Src<'_, f64>, b: &Src<'_, f64>, out: &mut [f64], pool: &CpuPool) {
        let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
        let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
        batched(a, b, out, m * n, |sa, sb, c| {
            // op(A)(i, p) = a[p, i], op(B)(p, j) = b[p, j].
            product(pool, m, k, n, view(sa, m, k, a1, a0), view(sb, k, n, b0, b1), c, &no_post);
        });
    }

    // BOUNDS-FN: `ne` and `st` are [usize; 4] indexed by literals.
    fn out_prod(a: &Src<'_, f64>, b: &Src<'_, f64>, out: &mut [f64], pool: &CpuPool) {
        let (m, k, n) = (a.ne[0], a.ne[1], b.ne[0]);
        let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
        batched(a, b, out, m * n, |sa, sb, c| {
            // op(A)(i, p) = a[i, p], op(B)(p, j) = b[j, p].
            product(pool, m, k, n, view(sa, m, k, a0, a1), view(sb, k, n, b1, b0), c, &no_post);
        });
    }

    // BOUNDS-FN: `ne` and `st` are [usize; 4] indexed by literals; the bias
    // `c` has M values (`op::shape`, Op::Linear) and a column segment starts
    // at row i0 < M.
    fn linear(a: &Src<'_, f64>, b: &Src<'_, f64>, c: &[f64], act: Option<UnaryOp>, out: &mut [f64], pool: &CpuPool) {
        let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
        let post = |i0: usize, _j: usize, col: &mut [f64]| bias_act(col, &c[i0..], act);
        let (av, bv) = (view(&a.d, m, k, a.st[1], a.st[0]), view(&b.d, k, n, b.st[0], b.st[1]));
        product(pool, m, k, n, av, bv, out, &post);
    }
}
