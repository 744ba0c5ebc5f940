//! Where the driver writes a result: straight into its memory when no
//! source's bytes overlap it (even in the same buffer), aside and then
//! copied when they do. Views of one tensor of one buffer, against values
//! computed here by hand.

use crate::base::dtype::DType;
use crate::graph::Graph;
use crate::memory::BufferTag;
use crate::op::Op;
use crate::tensor::io::{get_values, set_values};
use crate::tensor::{Context, Tensor, TENSOR_OVERHEAD};
use std::sync::Arc;

const ROW: usize = 8;

/// A context whose tensors will share one buffer, and `a` [8, rows] in it.
fn setup(rows: usize) -> (Context, Arc<Tensor>) {
    let ctx = Context::new(64 * TENSOR_OVERHEAD, true).unwrap();
    let a = ctx.new_tensor(DType::F32, &[ROW, rows]).unwrap();
    (ctx, a)
}

/// Rows `r0..r0+n` of `a` as a view.
fn rows(ctx: &Context, a: &Arc<Tensor>, r0: usize, n: usize) -> Arc<Tensor> {
    ctx.view(a, &[ROW, n], &[ROW * 4], r0 * ROW * 4).unwrap()
}

/// Allocates the context (one buffer), fills `a` with distinct values and
/// computes `outs`; returns `a`'s values from before.
fn run(ctx: &Context, a: &Arc<Tensor>, outs: &[&Arc<Tensor>]) -> Vec<f64> {
    let buf = ctx.alloc_tensors(crate::backend::host().as_ref(), BufferTag::User).unwrap();
    assert!(buf.is_some(), "one buffer for every tensor");
    let v: Vec<f64> = (0..a.nelements()).map(|i| (i * 3 % 17) as f64 - 5.0).collect();
    set_values(a, &v, 0).unwrap();
    let mut g = Graph::new();
    for o in outs {
        g.expand(o).unwrap();
    }
    g.compute(crate::backend::host()).unwrap();
    v
}

fn row_of(v: &[f64], r: usize) -> &[f64] {
    &v[r * ROW..(r + 1) * ROW]
}

#[test]
fn disjoint_views_of_one_buffer_compute_in_place() {
    let (ctx, a) = setup(4);
    let (lo, hi) = (rows(&ctx, &a, 0, 2), rows(&ctx, &a, 2, 2));
    let sum = ctx.op(Op::Add, &[lo.clone(), hi.clone()]).unwrap();
    // a[8, 2] x a[8, 2]: the product of the two halves, also in the buffer.
    let prod = ctx.op(Op::MulMat, &[lo, hi]).unwrap();
    let v = run(&ctx, &a, &[&sum, &prod]);
    let want: Vec<f64> = (0..2 * ROW).map(|i| v[i] + v[i + 2 * ROW]).collect();
    assert_eq!(get_values(&sum, 0, None).unwrap(), want);
    let mut want = Vec::new();
    for n in 0..2 {
        for m in 0..2 {
            want.push(row_of(&v, m).iter().zip(row_of(&v, 2 + n)).map(|(x, y)| x * y).sum::<f64>());
        }
    }
    assert_eq!(get_values(&prod, 0, None).unwrap(), want);
}

#[test]
fn overlapping_views_compute_aside() {
    // In place over rows 1..3 from rows 1..3 and 0..2: row 2 reads row 1
    // before row 1 is overwritten only when the result is computed aside.
    let (ctx, a) = setup(3);
    let y = ctx.op_inplace(Op::Add, &[rows(&ctx, &a, 1, 2), rows(&ctx, &a, 0, 2)]).unwrap();
    let v = run(&ctx, &a, &[&y]);
    let want: Vec<f64> = (0..2 * ROW).map(|i| v[i + ROW] + v[i]).collect();
    assert_eq!(get_values(&y, 0, None).unwrap(), want);
    assert_eq!(get_values(&a, 0, Some(ROW)).unwrap(), row_of(&v, 0), "row 0 untouched");
}

#[test]
fn copies_within_one_buffer() {
    let (ctx, a) = setup(8);
    // Contiguous rows 0..2 into rows 2..4 (disjoint).
    let c1 = ctx.cpy(&rows(&ctx, &a, 0, 2), &rows(&ctx, &a, 2, 2)).unwrap();
    // Every other row (0 and 2: strided rows) into rows 4..6 (disjoint).
    let every_other = ctx.view(&a, &[ROW, 2], &[2 * ROW * 4], 0).unwrap();
    let c2 = ctx.cpy(&every_other, &rows(&ctx, &a, 4, 2)).unwrap();
    // Rows 0..2 transposed (element strides) into rows 6..8.
    let t = ctx.transpose(&rows(&ctx, &a, 0, 2)).unwrap();
    let c3 = ctx.cpy(&t, &ctx.view(&a, &[2 * ROW], &[], 6 * ROW * 4).unwrap()).unwrap();
    let v = run(&ctx, &a, &[&c1]);
    let mut g = Graph::new();
    g.expand(&c2).unwrap();
    g.expand(&c3).unwrap();
    g.compute(crate::backend::host()).unwrap();
    let got = get_values(&a, 0, None).unwrap();
    assert_eq!(&got[..2 * ROW], &v[..2 * ROW], "source rows untouched");
    assert_eq!(&got[2 * ROW..4 * ROW], &v[..2 * ROW]);
    // Rows 0 and 2 after the first copy: row 2 holds row 0.
    assert_eq!(row_of(&got, 4), row_of(&v, 0));
    assert_eq!(row_of(&got, 5), row_of(&v, 0));
    let want: Vec<f64> = (0..ROW).flat_map(|j| [v[j], v[ROW + j]]).collect();
    assert_eq!(&got[6 * ROW..], &want[..]);
}

#[test]
fn overlapping_copy_moves_as_a_whole() {
    // Rows 0..2 into rows 1..3: every row lands as it was before the copy.
    let (ctx, a) = setup(3);
    let c = ctx.cpy(&rows(&ctx, &a, 0, 2), &rows(&ctx, &a, 1, 2)).unwrap();
    let v = run(&ctx, &a, &[&c]);
    let got = get_values(&a, 0, None).unwrap();
    assert_eq!(row_of(&got, 0), row_of(&v, 0));
    assert_eq!(&got[ROW..], &v[..2 * ROW]);
}
