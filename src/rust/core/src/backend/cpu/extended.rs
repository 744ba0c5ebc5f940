//! CPU kernels of the ops in [`crate::op::extended`]: parameterised maps,
//! binaries broadcasting both operands, row reductions and scans, gathers
//! and scatters along a dimension, and padding with modes.

use super::access::Src;
use super::elementwise::map;
use super::par::{par_rows, CpuPool};
use crate::op::extended::erf;
use crate::op::{BinFn, MapFn, Op, PadMode, RowFn, ScatterReduce};
use anyhow::bail;
use rayon::prelude::*;

/// Compute one of this module's ops into `out` (sizes `ne`).
// BOUNDS-FN: `extended_shape::infer` (op/extended_shape.rs) shaped the node
// and gave each op its count of sources (`one`, `two`); ne is a [usize; 4]; a
// scan's out has x's rows of n0, handed out whole by par_rows.
pub fn kernel(op: &Op, s: &[Src<'_>], out: &mut [f32], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    match op {
        Op::Map { f, a, b } => {
            let (f, a, b) = (*f, *a, *b);
            // The common functions get loops of their own (no dispatch per element).
            match f {
                MapFn::Erf => map(&s[0], out, pool, erf),
                MapFn::GeluErf => map(&s[0], out, pool, move |x| 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))),
                MapFn::Affine => map(&s[0], out, pool, move |x| a * x + b),
                MapFn::PowC if a == 2.0 => map(&s[0], out, pool, move |x| x * x),
                _ => map(&s[0], out, pool, move |x| f.apply(x, a, b)),
            }
        }
        Op::Binary { f } => binary(*f, &s[0], &s[1], out, ne, pool),
        Op::ReduceRows { f } => reduce_rows(*f, &s[0], out, pool),
        Op::ScanRows { f } => {
            let f = *f;
            let (x, n0) = (&s[0].d, ne[0]);
            par_rows(pool, out, n0, |r0, chunk| {
                for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
                    let r = r0 + k;
                    f.apply(&x[r * n0..(r + 1) * n0], orow);
                }
            });
        }
        Op::GatherAxis { dim } => gather(&s[0], &s[1], *dim, out, ne, pool),
        Op::ScatterFlat { reduce } => scatter(*reduce, &s[0], &s[1], out),
        Op::PadEx { lo, mode, value, .. } => pad(&s[0], *lo, *mode, *value, out, ne, pool),
        other => bail!("internal: {} is not an extended op", other.name()),
    }
    Ok(())
}

/// Row `r` of a tensor of sizes `ne` broadcast from sizes `src`: the index
/// of the source row.
// BOUNDS-FN: ne and src are [usize; 4] indexed by literals.
#[inline]
fn bcast_row(r: usize, ne: [usize; 4], src: [usize; 4]) -> usize {
    let (i1, i2, i3) = (r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2]));
    let j1 = if src[1] == 1 { 0 } else { i1 };
    let j2 = if src[2] == 1 { 0 } else { i2 };
    let j3 = if src[3] == 1 { 0 } else { i3 };
    j1 + src[1] * (j2 + src[2] * j3)
}

// BOUNDS-FN: the `Binary` rule made each size of out a's or b's, the other
// one being 1: with equal shapes both hold out's values (chunk r0 of 1024-value
// rows ends by out.len()); else `bcast_row` gives a row of each source
// (j_d = 0 where its size is 1, i_d < ne[d] = its size elsewhere).
fn binary(f: BinFn, a: &Src<'_>, b: &Src<'_>, out: &mut [f32], ne: [usize; 4], pool: &CpuPool) {
    let n0 = ne[0];
    let (an, bn) = (a.ne, b.ne);
    if an == ne && bn == ne {
        // Same shapes: one flat loop.
        let (x, y) = (&a.d, &b.d);
        par_rows(pool, out, 1024, |r0, chunk| {
            let s = r0 * 1024;
            row(f, &x[s..s + chunk.len()], &y[s..s + chunk.len()], chunk);
        });
        return;
    }
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let ra = bcast_row(r, ne, an);
            let rb = bcast_row(r, ne, bn);
            let xa = &a.d[ra * an[0]..(ra + 1) * an[0]];
            let xb = &b.d[rb * bn[0]..(rb + 1) * bn[0]];
            row(f, xa, xb, orow);
        }
    });
}

/// One output row: each operand is a full row or a single value.
// BOUNDS-FN: an operand not as long as out is a single value (the `Binary`
// rule: its first size is 1 where out's is not; out's 0 makes it as long).
fn row(f: BinFn, a: &[f32], b: &[f32], out: &mut [f32]) {
    macro_rules! each {
        ($g:expr) => {{
            let g = $g;
            match (a.len() == out.len(), b.len() == out.len()) {
                (true, true) => {
                    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                        *o = g(x, y);
                    }
                }
                (true, false) => {
                    let y = b[0];
                    for (o, &x) in out.iter_mut().zip(a) {
                        *o = g(x, y);
                    }
                }
                (false, true) => {
                    let x = a[0];
                    for (o, &y) in out.iter_mut().zip(b) {
                        *o = g(x, y);
                    }
                }
                (false, false) => out.fill(g(a[0], b[0])),
            }
        }};
    }
    match f {
        BinFn::Add => each!(|x: f32, y: f32| x + y),
        BinFn::Sub => each!(|x: f32, y: f32| x - y),
        BinFn::Mul => each!(|x: f32, y: f32| x * y),
        BinFn::Div => each!(|x: f32, y: f32| x / y),
        other => each!(|x: f32, y: f32| other.apply(x, y)),
    }
}

// BOUNDS-FN: the `ReduceRows` rule gives out one value per row of a (rows of
// n0, contiguous).
fn reduce_rows(f: RowFn, a: &Src<'_>, out: &mut [f32], pool: &CpuPool) {
    let n0 = a.ne[0];
    let x = &a.d;
    let work = out.len() * n0;
    if pool.n_threads <= 1 || work < (1 << 15) || out.len() < 2 {
        for (r, o) in out.iter_mut().enumerate() {
            *o = f.apply(&x[r * n0..(r + 1) * n0]);
        }
        return;
    }
    pool.install(|| {
        out.par_iter_mut().enumerate().for_each(|(r, o)| *o = f.apply(&x[r * n0..(r + 1) * n0]));
    });
}

/// An index value as a position in a dimension of size `n` (negative counts
/// from the end), or None when out of range.
#[inline]
fn position(v: f32, n: usize) -> Option<usize> {
    let i = v.round() as i64;
    let i = if i < 0 { i + n as i64 } else { i };
    (0..n as i64).contains(&i).then_some(i as usize)
}

// BOUNDS-FN: the `GatherAxis` rule: dim < 4, idx a vector of ne[dim] values
// (pos has one per value), out a's sizes but ne[dim]; each position p is
// below an[dim] (`position`), and every other coordinate below a's size.
fn gather(a: &Src<'_>, idx: &Src<'_>, dim: usize, out: &mut [f32], ne: [usize; 4], pool: &CpuPool) {
    let an = a.ne;
    let pos: Vec<Option<usize>> = idx.d.iter().map(|&v| position(v, an[dim])).collect();
    let n0 = ne[0];
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let mut c = [0usize, r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2])];
            if dim == 0 {
                let base = an[0] * (c[1] + an[1] * (c[2] + an[2] * c[3]));
                for (o, p) in orow.iter_mut().zip(&pos) {
                    *o = p.map_or(0.0, |p| a.d[base + p]);
                }
                continue;
            }
            match pos[c[dim]] {
                Some(p) => {
                    c[dim] = p;
                    let s = an[0] * (c[1] + an[1] * (c[2] + an[2] * c[3]));
                    orow.copy_from_slice(&a.d[s..s + an[0]]);
                }
                None => orow.fill(0.0),
            }
        }
    });
}

// BOUNDS-FN: the `ScatterFlat` rule keeps a's shape in out; pairs are
// chunks_exact(2); i < n = out.len() (`position`).
fn scatter(reduce: ScatterReduce, a: &Src<'_>, p: &Src<'_>, out: &mut [f32]) {
    out.copy_from_slice(&a.d);
    let n = out.len();
    for pair in p.d.chunks_exact(2) {
        if let Some(i) = position(pair[0], n).filter(|_| pair[0] >= -0.5) {
            out[i] = reduce.apply(out[i], pair[1]);
        }
    }
}

// BOUNDS-FN: lo, an, ne are [usize; 4], c and src [usize; 3], indexed by
// d + 1 < 4 and d < 3; `PadMode::source` returns positions below the size n
// it is given (the `PadEx` rule refuses non-constant padding of an empty
// dimension), so base + s indexes a (contiguous).
fn pad(a: &Src<'_>, lo: [usize; 4], mode: PadMode, value: f32, out: &mut [f32], ne: [usize; 4], pool: &CpuPool) {
    let an = a.ne;
    let n0 = ne[0];
    par_rows(pool, out, n0, |r0, chunk| {
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let r = r0 + k;
            let c = [r % ne[1], (r / ne[1]) % ne[2], r / (ne[1] * ne[2])];
            let mut src = [0usize; 3];
            let mut inside = true;
            for d in 0..3 {
                match mode.source(c[d], lo[d + 1], an[d + 1]) {
                    Some(s) => src[d] = s,
                    None => inside = false,
                }
            }
            if !inside {
                orow.fill(value);
                continue;
            }
            let base = an[0] * (src[0] + an[1] * (src[1] + an[2] * src[2]));
            for (x, o) in orow.iter_mut().enumerate() {
                *o = mode.source(x, lo[0], an[0]).map_or(value, |s| a.d[base + s]);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn src(d: Vec<f32>, ne: [usize; 4]) -> Src<'static> {
        Src::new(Cow::Owned(d), ne)
    }

    fn run(op: Op, s: &[Src<'_>], ne: [usize; 4]) -> Vec<f32> {
        let mut out = vec![0.0; ne.iter().product()];
        kernel(&op, s, &mut out, ne, &CpuPool::new(1).unwrap()).unwrap();
        out
    }

    #[test]
    fn binary_broadcasts_both_sides() {
        // a [3, 1] + b [1, 2] -> [3, 2]
        let a = src(vec![1.0, 2.0, 3.0], [3, 1, 1, 1]);
        let b = src(vec![10.0, 20.0], [1, 2, 1, 1]);
        let o = run(Op::Binary { f: BinFn::Add }, &[a, b], [3, 2, 1, 1]);
        assert_eq!(o, vec![11.0, 12.0, 13.0, 21.0, 22.0, 23.0]);
        let a = src(vec![1.0, 5.0], [2, 1, 1, 1]);
        let b = src(vec![3.0, 3.0], [2, 1, 1, 1]);
        assert_eq!(run(Op::Binary { f: BinFn::Less }, &[a, b], [2, 1, 1, 1]), vec![1.0, 0.0]);
    }

    #[test]
    fn rows_gather_scatter_pad() {
        let a = src(vec![1.0, 5.0, 2.0, -1.0, 0.0, 7.0], [3, 2, 1, 1]);
        assert_eq!(run(Op::ReduceRows { f: RowFn::Max }, &[a], [1, 2, 1, 1]), vec![5.0, 7.0]);
        let a = src(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [3, 2, 1, 1]);
        let i = src(vec![1.0, -1.0, 0.0], [3, 1, 1, 1]);
        assert_eq!(run(Op::GatherAxis { dim: 1 }, &[a, i], [3, 3, 1, 1]), vec![4.0, 5.0, 6.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0]);
        let a = src(vec![1.0, 2.0, 3.0], [3, 1, 1, 1]);
        let i = src(vec![2.0, 9.0], [2, 1, 1, 1]);
        assert_eq!(run(Op::GatherAxis { dim: 0 }, &[a, i], [2, 1, 1, 1]), vec![3.0, 0.0]);
        let a = src(vec![0.0; 3], [3, 1, 1, 1]);
        let p = src(vec![1.0, 5.0, 1.0, 2.0, 0.0, 1.0], [2, 3, 1, 1]);
        assert_eq!(run(Op::ScatterFlat { reduce: ScatterReduce::Add }, &[a, p], [3, 1, 1, 1]), vec![1.0, 7.0, 0.0]);
        let a = src(vec![1.0, 2.0], [2, 1, 1, 1]);
        let op = Op::PadEx { lo: [1, 1, 0, 0], hi: [1, 0, 0, 0], mode: PadMode::Edge, value: 0.0 };
        assert_eq!(run(op, &[a], [4, 2, 1, 1]), vec![1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
    }
}
