//! The products of f32 tensors (`gemm_rt`: AVX-512 / AVX2 kernels on the
//! backend's threads), and the [`GemmFloat`]
//! trait through which the driver reaches the products of each compute
//! type. Operands are read with their own strides, so a transposed view
//! needs no copy.
//!
//! ggml's `mul_mat(a[K,M], b[K,N]) -> [M,N]`: with ne0 fastest, a holds M rows of
//! length K, b holds N rows of length K and the result N rows of length M, so
//! in row-major terms `C (N x M) = B (N x K) * A^T (K x M)`.

use super::access::Src;
use super::gemm_rt::{product, Strided};
use super::gemv::gemv;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::UnaryOp;

/// A compute type with the products: f32 and f64 through `gemm_rt`
/// (`matmul_f64` for f64).
pub trait GemmFloat: Float {
    /// ggml's `mul_mat(a[K,M], b[K,N]) -> [M,N]`.
    fn mul_mat(a: &Src<'_, Self>, b: &Src<'_, Self>, out: &mut [Self], pool: &CpuPool);
    /// ggml's `out_prod(a[M,K], b[N,K]) -> [M,N]`.
    fn out_prod(a: &Src<'_, Self>, b: &Src<'_, Self>, out: &mut [Self], pool: &CpuPool);
    /// `act(mul_mat(a, b) + c)` for 2-D a and b, `c` one value per row of
    /// the result ([`Op::Linear`](crate::op::Op::Linear)).
    fn linear(a: &Src<'_, Self>, b: &Src<'_, Self>, c: &[Self], act: Option<UnaryOp>, out: &mut [Self], pool: &CpuPool);
    /// The full 2-D convolution `k [KW, KH, IC, OC]` over `x [IW, IH, IC, N]`
    /// into `out` of sizes `ne` (`super::conv_gemm`).
    fn conv_2d(k: &Src<'_, Self>, x: &Src<'_, Self>, p: [i32; 6], out: &mut [Self], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()>;
    /// The extended ops of ONNX import (`super::extended`), f32 only.
    fn extended(op: &crate::op::Op, s: &[Src<'_, Self>], out: &mut [Self], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()>;
}

impl GemmFloat for f32 {
    fn conv_2d(k: &Src<'_, f32>, x: &Src<'_, f32>, p: [i32; 6], out: &mut [f32], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
        let sh = super::conv_gemm::Shape::new(k, x, p, out, ne)?;
        if super::conv_pack::wanted(&sh) {
            // BOUNDS: `ne` is a [usize; 4].
            return super::conv_pack::conv_2d(&sh, &k.d, &x.d, out, ne[3], pool);
        }
        super::conv_gemm::conv_2d(k, x, p, out, ne, pool)
    }
    fn extended(op: &crate::op::Op, s: &[Src<'_, f32>], out: &mut [f32], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
        super::extended::kernel(op, s, out, ne, pool)
    }
    fn mul_mat(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &CpuPool) {
        mul_mat(a, b, out, pool)
    }
    fn out_prod(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &CpuPool) {
        out_prod(a, b, out, pool)
    }
    fn linear(a: &Src<'_, f32>, b: &Src<'_, f32>, c: &[f32], act: Option<UnaryOp>, out: &mut [f32], pool: &CpuPool) {
        mul_mat(a, b, out, pool);
        // BOUNDS: `ne` is a [usize; 4].
        let m = a.ne[1];
        par_rows(pool, out, m, |_, cols| {
            for col in cols.chunks_mut(m.max(1)) {
                bias_act(col, c, act);
            }
        });
    }
}

/// `col[i] = act(col[i] + bias[i])`: one loop per kind, so that each vectorises.
#[inline]
pub(super) fn bias_act<T: Float>(col: &mut [T], bias: &[T], act: Option<UnaryOp>) {
    fn each<T: Float>(col: &mut [T], bias: &[T], f: impl Fn(T) -> T) {
        for (v, b) in col.iter_mut().zip(bias) {
            *v = f(*v + *b);
        }
    }
    match act {
        None => each(col, bias, |z| z),
        Some(UnaryOp::Relu) => each(col, bias, |z| UnaryOp::Relu.apply(z)),
        Some(UnaryOp::Sigmoid) => each(col, bias, |z| UnaryOp::Sigmoid.apply(z)),
        Some(UnaryOp::Tanh) => each(col, bias, |z| UnaryOp::Tanh.apply(z)),
        Some(u) => each(col, bias, |z| u.apply(z)),
    }
}

/// Row-major strides of one operand.
#[derive(Clone, Copy)]
struct Mat<'a> {
    d: &'a [f32],
    rs: usize,
    cs: usize,
}

/// C (m x n, row-major, contiguous rows of n) = A (m x k) * B (k x n), on
/// the pool's threads when large (`gemm_rt`).
fn gemm(pool: &CpuPool, m: usize, k: usize, n: usize, a: Mat<'_>, b: Mat<'_>, c: &mut [f32]) {
    debug_assert_eq!(c.len(), m * n);
    if m == 0 || n == 0 {
        return;
    }
    if k > 0 {
        let a_last = (m - 1) * a.rs + (k - 1) * a.cs;
        let b_last = (k - 1) * b.rs + (n - 1) * b.cs;
        assert!(a_last < a.d.len() && b_last < b.d.len(), "gemm operand bounds");
    }
    let (av, bv) = (
        Strided { ptr: a.d.as_ptr(), rs: a.rs as isize, cs: a.cs as isize },
        Strided { ptr: b.d.as_ptr(), rs: b.rs as isize, cs: b.cs as isize },
    );
    // SAFETY: the last element each operand addresses is in bounds (checked
    // above; strides are non-negative), and C is exactly `c`, borrowed
    // exclusively, with contiguous rows of n.
    unsafe { product(Some(pool), m, k, n, av, bv, c.as_mut_ptr(), n as isize, 1) }
}

/// Batched product with ggml's broadcasting of a over b's dimensions 2 and 3.
/// `prod(a_slice, b_slice, c_slice)` computes one 2-D slice; the operand
/// slices start at the slice's first element and keep the source's strides
/// (an operand without elements, whose slices may start past its end, gives
/// empty ones). `out` holds `slice_out` values per slice of b, in b's order.
// BOUNDS-FN: `ne` and `st` are [usize; 4] indexed by literals.
pub(super) fn batched<'s, T: Float>(
    a: &'s Src<'_, T>,
    b: &'s Src<'_, T>,
    out: &mut [T],
    slice_out: usize,
    mut prod: impl FnMut(&'s [T], &'s [T], &mut [T]),
) {
    if slice_out == 0 {
        return;
    }
    let (r2, r3) = ((b.ne[2] / a.ne[2].max(1)).max(1), (b.ne[3] / a.ne[3].max(1)).max(1));
    let mut slices = out.chunks_exact_mut(slice_out);
    for i3 in 0..b.ne[3] {
        for i2 in 0..b.ne[2] {
            let ia = (i2 / r2) * a.st[2] + (i3 / r3) * a.st[3];
            let ib = i2 * b.st[2] + i3 * b.st[3];
            // Slice i2 + ne2 * i3 of the result: the next one.
            let Some(c) = slices.next() else { return };
            prod(a.d.get(ia..).unwrap_or(&[]), b.d.get(ib..).unwrap_or(&[]), c);
        }
    }
}

// BOUNDS-FN: `ne` and `st` are [usize; 4] indexed by literals; the gemv
// paths take `sb[..k]` (`sa[..k]`) of a contiguous column (row) of k values
// that starts the slice (b0 == 1, or a0 == 1 and a1 == k).
pub fn mul_mat(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &CpuPool) {
    let (k, m, n) = (a.ne[0], a.ne[1], b.ne[1]);
    if m * n == 0 {
        return;
    }
    let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
    batched(a, b, out, m * n, |sa, sb, c| {
        // (gemv reads contiguous rows: strided views take the general path.)
        if n == 1 && a0 == 1 && a1 == k && b0 == 1 {
            // One column of b: each result is a row of a times it.
            gemv(pool, sa, &sb[..k], c);
        } else if m == 1 && b0 == 1 && b1 == k && a0 == 1 {
            gemv(pool, sb, &sa[..k], c);
        } else {
            // C (N x M) = B (N x K) * A^T (K x M); `gemm_rt` splits the
            // longer side over the threads.
            let bm = Mat { d: sb, rs: b1, cs: b0 };
            let am = Mat { d: sa, rs: a0, cs: a1 };
            gemm(pool, n, k, m, bm, am, c);
        }
    });
}

/// out[m, n] = sum_k a[m, k] * b[n, k] for a [M,K], b [N,K].
// BOUNDS-FN: `ne` and `st` are [usize; 4] indexed by literals.
fn out_prod(a: &Src<'_, f32>, b: &Src<'_, f32>, out: &mut [f32], pool: &CpuPool) {
    let (m, k, n) = (a.ne[0], a.ne[1], b.ne[0]);
    if m * n == 0 {
        return;
    }
    let (a0, a1, b0, b1) = (a.st[0], a.st[1], b.st[0], b.st[1]);
    batched(a, b, out, m * n, |sa, sb, c| {
        // Row-major: a is K x M, b is K x N; C (N x M) = B^T (N x K) * A (K x M).
        let bm = Mat { d: sb, rs: b0, cs: b1 };
        let am = Mat { d: sa, rs: a1, cs: a0 };
        gemm(pool, n, k, m, bm, am, c);
    });
}
