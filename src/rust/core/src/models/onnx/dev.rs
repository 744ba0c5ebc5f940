//! N-dimensional tensors on the engine's 4-dimensional ones.
//!
//! An ONNX shape `[d0, .., d(r-1)]` (row-major) is a ggml tensor with the
//! dimensions reversed (`ne0 = d(r-1)`); ranks above 4 fold their leading
//! dimensions into `ne3`. Every operation here first merges neighbouring
//! dimensions that it treats alike (dimensions kept together by a
//! transpose, broadcast alike in a binary, all reduced or all kept), which
//! brings nearly every real case to 4 dimensions or fewer; transposes that
//! stay above 4 are split into 4-dimensional pieces.

use super::builder::Builder;
use super::elem::Elem;
use super::host::{broadcast_shape, fmt_shape};
use super::val::Dev;
use crate::base::dtype::DType;
use crate::op::{BinFn, Op, RowFn};
use crate::tensor::Tensor;
use anyhow::{bail, ensure};
use std::sync::Arc;

type T = Arc<Tensor>;

/// ggml sizes of ONNX dimensions given outermost first (at most 4 after
/// folding the leading ones).
// BOUNDS-FN: ne is a [usize; 4], indexed by k < 3 and by 3.
pub fn ne_of(dims: &[usize]) -> [usize; 4] {
    let mut ne = [1usize; 4];
    for (k, d) in dims.iter().rev().enumerate() {
        if k < 3 {
            ne[k] = *d;
        } else {
            ne[3] *= *d;
        }
    }
    ne
}

/// A tensor without elements of shape `shape` (nothing to compute).
pub fn empty(b: &mut Builder, shape: Vec<usize>, elem: Elem) -> crate::Result<Dev> {
    let t = b.leaf(DType::F32, ne_of(&shape))?;
    Ok(Dev { t, shape, elem })
}

/// `d`'s tensor with ggml sizes `ne` (a reshape; a copy first when strided).
pub fn shaped(b: &mut Builder, d: &Dev, ne: [usize; 4]) -> crate::Result<T> {
    if d.t.ne() == ne {
        return Ok(d.t.clone());
    }
    b.reshape(&d.t, ne)
}

/// `d` with its dimensions grouped: `groups` lists group sizes outermost first.
fn grouped(b: &mut Builder, d: &Dev, groups: &[usize]) -> crate::Result<T> {
    ensure!(groups.len() <= 4, "internal: {} groups", groups.len());
    shaped(b, d, ne_of(groups))
}

/// A tensor of shape `shape` from `t` (same number of elements).
pub fn dev(t: T, shape: Vec<usize>, elem: Elem) -> Dev {
    Dev { t, shape, elem }
}

/// The same values with ONNX shape `shape`.
pub fn reshape(b: &mut Builder, d: &Dev, shape: Vec<usize>) -> crate::Result<Dev> {
    ensure!(
        shape.iter().product::<usize>() == d.shape.iter().product::<usize>(),
        "cannot reshape a tensor of shape {} to {}",
        fmt_shape(&d.shape),
        fmt_shape(&shape)
    );
    let t = shaped(b, d, ne_of(&shape))?;
    Ok(Dev { t, shape, elem: d.elem })
}

/// A contiguous copy in canonical layout (itself when already so).
pub fn canonical(b: &mut Builder, d: &Dev) -> crate::Result<Dev> {
    let ne = ne_of(&d.shape);
    let t = if d.t.layout().is_contiguous() { d.t.clone() } else { b.op(Op::Cont, std::slice::from_ref(&d.t))? };
    let t = if t.ne() == ne { t } else { b.reshape(&t, ne)? };
    Ok(Dev { t, shape: d.shape.clone(), elem: d.elem })
}

/// Merges neighbouring dimensions of the same class (`None` fits any):
/// returns (group sizes, the class of each group).
fn merge<C: Copy + PartialEq>(dims: &[usize], class: &[Option<C>]) -> (Vec<usize>, Vec<Option<C>>) {
    let mut sizes: Vec<usize> = Vec::new();
    let mut cls: Vec<Option<C>> = Vec::new();
    for (&d, &c) in dims.iter().zip(class) {
        match (cls.last().copied(), c) {
            (Some(prev), c) if prev == c || c.is_none() || prev.is_none() => {
                // INVARIANT: sizes and cls grow together and cls.last() is Some in this arm.
                *sizes.last_mut().expect("a group") *= d;
                if prev.is_none() {
                    *cls.last_mut().expect("a group") = c;
                }
            }
            _ => {
                sizes.push(d);
                cls.push(c);
            }
        }
    }
    if sizes.is_empty() {
        sizes.push(1);
        cls.push(None);
    }
    (sizes, cls)
}

/// ONNX `Transpose`: output dimension i is input dimension `perm[i]`.
// BOUNDS-FN: perm is checked to be a permutation of 0..r (d.shape and seen have r
// entries); strides and sizes have k entries and j + 1 < k; groups are
// non-empty (each pushed with one element).
pub fn permute(b: &mut Builder, d: &Dev, perm: &[usize]) -> crate::Result<Dev> {
    let r = d.shape.len();
    ensure!(perm.len() == r, "the permutation {perm:?} does not fit a tensor of rank {r}");
    let mut seen = vec![false; r];
    for &p in perm {
        ensure!(p < r && !seen[p], "{perm:?} is not a permutation of 0..{r}");
        seen[p] = true;
    }
    let out_shape: Vec<usize> = perm.iter().map(|&p| d.shape[p]).collect();
    // Dimensions of size > 1, in input order, and their order in the output.
    let kept: Vec<usize> = (0..r).filter(|&i| d.shape[i] > 1).collect();
    let order: Vec<usize> = perm.iter().copied().filter(|&p| d.shape[p] > 1).collect();
    // Groups: runs of input dimensions that stay neighbours in the output.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    // INVARIANT: kept and order hold the same dimensions (those of size > 1).
    let pos = |x: usize| order.iter().position(|&o| o == x).expect("kept dimension");
    for &i in &kept {
        match groups.last_mut() {
            // INVARIANT: every group is pushed with one element.
            Some(g) if pos(*g.last().expect("non-empty")) + 1 == pos(i) => g.push(i),
            _ => groups.push(vec![i]),
        }
    }
    let k = groups.len();
    if k <= 1 {
        // Nothing moves (groups in order would have merged): only the shape changes.
        return reshape(b, d, out_shape);
    }
    let sizes: Vec<usize> = groups.iter().map(|g| g.iter().map(|&i| d.shape[i]).product()).collect();
    let mut strides = vec![1usize; k];
    for j in (0..k.saturating_sub(1)).rev() {
        strides[j] = strides[j + 1] * sizes[j + 1];
    }
    // The order of the groups in the output.
    let mut gorder: Vec<usize> = (0..k).collect();
    gorder.sort_by_key(|&j| pos(groups[j][0]));
    let base = canonical(b, d)?;
    let blocks: Vec<(usize, usize)> = sizes.iter().copied().zip(strides.iter().copied()).collect();
    let t = permute_blocks(b, &base.t, &blocks, &gorder, 0)?;
    let t = b.reshape(&t, ne_of(&out_shape))?;
    Ok(Dev { t, shape: out_shape, elem: d.elem })
}

/// The elements of `base` (contiguous) described by `blocks` (size and
/// element stride of each group, in input order, from element `offset`),
/// laid out contiguously with the groups in `order` (outermost first).
// BOUNDS-FN: ne, nb, axes and used are [_; 4]: shift + k - 1 - j < 4 and k - 1 - i < 4
// because k <= 4 - shift when fits and j, i < k; d < 4; on the other path
// order[0] and blocks[j0] exist since k > 3 (order lists 0..k).
fn permute_blocks(b: &mut Builder, base: &T, blocks: &[(usize, usize)], order: &[usize], offset: usize) -> crate::Result<T> {
    let k = blocks.len();
    let es = base.dtype().size();
    let inner_unit = blocks.last().is_some_and(|x| x.1 == 1);
    let fits = if inner_unit { k <= 4 } else { k <= 3 };
    if fits {
        let shift = usize::from(!inner_unit);
        let mut ne = [1usize; 4];
        let mut nb = [es; 4];
        for j in 0..k {
            ne[shift + k - 1 - j] = blocks[j].0;
            nb[shift + k - 1 - j] = blocks[j].1 * es;
        }
        let mut prev = es;
        for d in (shift + k)..4 {
            nb[d] = prev * ne[d - 1].max(1);
            prev = nb[d];
        }
        if shift == 1 {
            nb[0] = es;
        }
        let v = b.view(base, ne, nb, offset * es)?;
        // Input ggml dimension of group j is shift + k - 1 - j; its output
        // position i (order[i] == j) is ggml dimension k - 1 - i.
        let mut axes = [0usize; 4];
        let mut used = [false; 4];
        for (i, &j) in order.iter().enumerate() {
            axes[shift + k - 1 - j] = k - 1 - i;
            used[k - 1 - i] = true;
        }
        let mut free = (0..4).filter(|&x| !used[x]);
        for a in 0..4 {
            if a < shift || a >= shift + k {
                // INVARIANT: 4 - k dimensions are unused and 4 - k axes take one.
                axes[a] = free.next().expect("a free dimension");
            }
        }
        let p = b.permute(&v, axes)?;
        return b.op(Op::Cont, &[p]);
    }
    // Too many groups for one view: one piece per index of the outermost
    // output group, joined along it.
    let j0 = order[0];
    let rest_blocks: Vec<(usize, usize)> = blocks.iter().enumerate().filter(|(j, _)| *j != j0).map(|(_, x)| *x).collect();
    let rest_order: Vec<usize> = order[1..].iter().map(|&j| if j > j0 { j - 1 } else { j }).collect();
    let mut pieces = Vec::with_capacity(blocks[j0].0);
    for v in 0..blocks[j0].0 {
        let p = permute_blocks(b, base, &rest_blocks, &rest_order, offset + v * blocks[j0].1)?;
        let n = p.nelements();
        pieces.push(b.reshape(&p, [n, 1, 1, 1])?);
    }
    join(b, pieces, 1)
}

/// Joins tensors along ggml dimension `dim` (a balanced tree of concats).
pub fn join(b: &mut Builder, mut parts: Vec<T>, dim: usize) -> crate::Result<T> {
    ensure!(!parts.is_empty(), "internal: nothing to join");
    while parts.len() > 1 {
        let mut next = Vec::with_capacity(parts.len().div_ceil(2));
        let mut it = parts.into_iter();
        while let Some(a) = it.next() {
            match it.next() {
                Some(c) => next.push(b.op(Op::Concat { dim }, &[a, c])?),
                None => next.push(a),
            }
        }
        parts = next;
    }
    // INVARIANT: parts is non-empty (ensured above) and the loop leaves one.
    Ok(parts.pop().expect("one part"))
}

/// A tensor with ggml sizes `ne` whose values do not matter (the shape
/// operand of `repeat`): a view of one small row with zero strides above.
// BOUNDS-FN: ne is a [usize; 4] indexed by 0.
fn shape_operand(b: &mut Builder, ne: [usize; 4]) -> crate::Result<T> {
    let row = b.leaf(DType::F32, [ne[0], 1, 1, 1])?;
    b.view(&row, ne, [4, 0, 0, 0], 0)
}

/// Right-aligned copy of `shape` in rank `r`.
fn aligned(shape: &[usize], r: usize) -> Vec<usize> {
    let mut v = vec![1usize; r.saturating_sub(shape.len())];
    v.extend_from_slice(shape);
    v
}

/// ONNX `Expand` / numpy `broadcast_to`: `d` repeated to shape `to`.
// BOUNDS-FN: out, s and class have r entries (aligned pads s to r), i < r.
pub fn expand(b: &mut Builder, d: &Dev, to: &[usize]) -> crate::Result<Dev> {
    let out = broadcast_shape(&d.shape, to)?;
    if out == d.shape {
        return Ok(d.clone());
    }
    let r = out.len();
    let s = aligned(&d.shape, r);
    let class: Vec<Option<bool>> = (0..r).map(|i| if out[i] == 1 { None } else { Some(s[i] == out[i]) }).collect();
    let (sizes, cls) = merge(&out, &class);
    ensure!(
        sizes.len() <= 4,
        "broadcasting a tensor of shape {} to {} alternates broadcast dimensions more than 4 times",
        fmt_shape(&d.shape),
        fmt_shape(&out)
    );
    let src: Vec<usize> = sizes.iter().zip(&cls).map(|(&n, c)| if *c == Some(false) { 1 } else { n }).collect();
    let x = grouped(b, d, &src)?;
    let shape_t = shape_operand(b, ne_of(&sizes))?;
    let t = b.op(Op::Repeat, &[x, shape_t])?;
    let t = b.reshape(&t, ne_of(&out))?;
    Ok(Dev { t, shape: out, elem: d.elem })
}

/// `f(x, y)` element-wise with numpy broadcasting.
// BOUNDS-FN: out, xs and ys have r entries (aligned pads to r), i < r.
pub fn binary(b: &mut Builder, f: BinFn, x: &Dev, y: &Dev, elem: Elem) -> crate::Result<Dev> {
    let out = broadcast_shape(&x.shape, &y.shape)?;
    if out.contains(&0) {
        return empty(b, out, elem);
    }
    let r = out.len();
    let (xs, ys) = (aligned(&x.shape, r), aligned(&y.shape, r));
    let class: Vec<Option<(bool, bool)>> =
        (0..r).map(|i| if out[i] == 1 { None } else { Some((xs[i] == out[i], ys[i] == out[i])) }).collect();
    let (sizes, cls) = merge(&out, &class);
    if sizes.len() > 4 {
        // Materialise the broadcast of x first; then only y's pattern is left.
        let xe = expand(b, x, &out)?;
        if xe.shape == x.shape && y.shape != out {
            let ye = expand(b, y, &out)?;
            return binary(b, f, &xe, &ye, elem);
        }
        return binary(b, f, &xe, y, elem);
    }
    let part = |c: &Option<(bool, bool)>, n: usize, first: bool| match c {
        Some((px, py)) => {
            if if first { *px } else { *py } {
                n
            } else {
                1
            }
        }
        None => n,
    };
    let xg: Vec<usize> = sizes.iter().zip(&cls).map(|(&n, c)| part(c, n, true)).collect();
    let yg: Vec<usize> = sizes.iter().zip(&cls).map(|(&n, c)| part(c, n, false)).collect();
    let xt = grouped(b, x, &xg)?;
    let yt = grouped(b, y, &yg)?;
    let ggml = match f {
        BinFn::Add => Some(Op::Add),
        BinFn::Sub => Some(Op::Sub),
        BinFn::Mul => Some(Op::Mul),
        BinFn::Div => Some(Op::Div),
        _ => None,
    };
    let t = match ggml {
        // ggml's own ops when only y is broadcast (their fast paths).
        Some(op) if xg == sizes && xt.dtype().is_float() && yt.dtype().is_float() => b.op(op, &[xt, yt])?,
        _ => b.op(Op::Binary { f }, &[xt, yt])?,
    };
    let t = b.reshape(&t, ne_of(&out))?;
    Ok(Dev { t, shape: out, elem })
}

/// An element-wise op of one source (same shape).
pub fn unary(b: &mut Builder, op: Op, x: &Dev, elem: Elem) -> crate::Result<Dev> {
    if x.shape.contains(&0) {
        return empty(b, x.shape.clone(), elem);
    }
    let t = b.op(op, std::slice::from_ref(&x.t))?;
    Ok(Dev { t, shape: x.shape.clone(), elem })
}

/// Reduction of `x` over `axes` (sorted, distinct) by `f`.
// BOUNDS-FN: red has r = x.shape.len() entries and every i < r.
pub fn reduce(b: &mut Builder, f: RowFn, x: &Dev, axes: &[usize], keepdims: bool) -> crate::Result<Dev> {
    let r = x.shape.len();
    let red: Vec<bool> = (0..r).map(|i| axes.contains(&i)).collect();
    let mut out: Vec<usize> = Vec::new();
    for i in 0..r {
        if !red[i] {
            out.push(x.shape[i]);
        } else if keepdims {
            out.push(1);
        }
    }
    let n: usize = (0..r).filter(|&i| red[i]).map(|i| x.shape[i]).product();
    let rows: usize = (0..r).filter(|&i| !red[i]).map(|i| x.shape[i]).product();
    // Reduced dimensions last (a transpose when they are not already).
    // Reduced dimensions last (a transpose unless they already are).
    let big = |i: usize| x.shape[i] > 1;
    let last_kept = (0..r).filter(|&i| !red[i] && big(i)).max();
    let first_red = (0..r).filter(|&i| red[i] && big(i)).min();
    let in_place = match (last_kept, first_red) {
        (Some(k), Some(f)) => k < f,
        _ => true,
    };
    let moved = if in_place {
        x.clone()
    } else {
        let mut perm: Vec<usize> = (0..r).filter(|&i| !red[i]).collect();
        perm.extend((0..r).filter(|&i| red[i]));
        permute(b, x, &perm)?
    };
    let t = shaped(b, &moved, [n, rows, 1, 1])?;
    let t = b.op(Op::ReduceRows { f }, &[t])?;
    let t = b.reshape(&t, ne_of(&out))?;
    let elem = if matches!(f, RowFn::ArgMax | RowFn::ArgMin | RowFn::ArgMaxLast | RowFn::ArgMinLast) {
        Elem::I64
    } else {
        x.elem
    };
    Ok(Dev { t, shape: out, elem })
}

/// `x` with `axis` moved last, as [n, rows] ggml rows; and the permutation
/// used (None when nothing moved).
// BOUNDS-FN: axis < r is checked; i < r.
pub fn rows_along(b: &mut Builder, x: &Dev, axis: usize) -> crate::Result<(T, Option<Vec<usize>>)> {
    let r = x.shape.len();
    ensure!(axis < r, "internal: axis {axis} of a tensor of rank {r}");
    let n = x.shape[axis];
    let rows = x.shape.iter().product::<usize>() / n.max(1);
    if (axis + 1..r).all(|i| x.shape[i] == 1) {
        return Ok((shaped(b, x, [n, rows, 1, 1])?, None));
    }
    let mut perm: Vec<usize> = (0..r).filter(|&i| i != axis).collect();
    perm.push(axis);
    let m = permute(b, x, &perm)?;
    Ok((shaped(b, &m, [n, rows, 1, 1])?, Some(perm)))
}

/// The inverse of [`rows_along`]: rows `t` back to `x`'s layout.
// BOUNDS-FN: p is checked to hold r indices below r; inv has p.len() entries.
pub fn from_rows(b: &mut Builder, t: T, x: &Dev, perm: Option<Vec<usize>>, elem: Elem) -> crate::Result<Dev> {
    match perm {
        None => {
            let t = b.reshape(&t, ne_of(&x.shape))?;
            Ok(Dev { t, shape: x.shape.clone(), elem })
        }
        Some(p) => {
            let r = x.shape.len();
            ensure!(p.len() == r && p.iter().all(|&i| i < r), "internal: {p:?} does not permute rank {r}");
            let moved: Vec<usize> = p.iter().map(|&i| x.shape[i]).collect();
            let t = b.reshape(&t, ne_of(&moved))?;
            let d = Dev { t, shape: moved, elem };
            let mut inv = vec![0usize; p.len()];
            for (k, &i) in p.iter().enumerate() {
                inv[i] = k;
            }
            permute(b, &d, &inv)
        }
    }
}

/// A view of `x` keeping `[start, start + len)` of `axis` (step 1).
// BOUNDS-FN: axis < rank is checked; st has r entries: r - 1 - k for 1 <= k < r,
// st[0] and x.shape[0] only when k >= r >= 1 (r = 0 takes no index: axis < 0
// is impossible), st[axis] with axis < r; ne and nb are [usize; 4] read at k - 1
// and k for 1 <= k < 4.
pub fn narrow(b: &mut Builder, x: &Dev, axis: usize, start: usize, len: usize) -> crate::Result<Dev> {
    let mut shape = x.shape.clone();
    ensure!(axis < shape.len(), "internal: narrow along axis {axis} of rank {}", shape.len());
    ensure!(start.saturating_add(len) <= shape[axis], "internal: narrow beyond the dimension");
    if start == 0 && len == shape[axis] {
        return Ok(x.clone());
    }
    shape[axis] = len;
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let c = canonical(b, x)?;
    let es = c.t.dtype().size();
    let r = shape.len();
    if r <= 4 || axis + 3 >= r {
        // A view with the result's own ggml sizes (the original strides):
        // no copy, also when the kept range is not whole rows.
        let st = super::host::strides(&x.shape);
        let ne = ne_of(&shape);
        let mut nb = [es; 4];
        for (k, n) in nb.iter_mut().enumerate().skip(1) {
            *n = if k < r { st[r - 1 - k] * es } else { st[0] * x.shape[0] * es };
        }
        // A dimension of size 1 takes the stride a packed tensor would
        // have (its stride is never used), so that a range of whole inner
        // rows counts as contiguous and is used without a copy.
        for k in 1..4 {
            if ne[k] == 1 {
                nb[k] = nb[k - 1] * ne[k - 1];
            }
        }
        return Ok(Dev { t: b.view(&c.t, ne, nb, start * st[axis] * es)?, shape, elem: x.elem });
    }
    let src = b.reshape(&c.t, [inner, x.shape[axis], outer, 1])?;
    let ne = [inner, len, outer, 1];
    let nb = [es, inner * es, inner * x.shape[axis] * es, inner * x.shape[axis] * outer * es];
    let v = b.view(&src, ne, nb, start * inner * es)?;
    let t = b.reshape(&v, ne_of(&shape))?;
    Ok(Dev { t, shape, elem: x.elem })
}

/// Concatenation along `axis` of tensors of equal shapes elsewhere.
// BOUNDS-FN: parts is non-empty and axis < first.len() are checked; every part has
// first's rank (checked before shape[axis] is read from it).
pub fn concat(b: &mut Builder, parts: &[Dev], axis: usize) -> crate::Result<Dev> {
    ensure!(!parts.is_empty(), "nothing to concatenate");
    let first = &parts[0].shape;
    ensure!(axis < first.len(), "cannot concatenate along axis {axis} of shapes of rank {}", first.len());
    let mut shape = first.clone();
    shape[axis] = 0;
    for p in parts {
        ensure!(
            p.shape.len() == first.len() && (0..first.len()).all(|i| i == axis || p.shape[i] == first[i]),
            "cannot concatenate shapes {} and {} along axis {axis}",
            fmt_shape(first),
            fmt_shape(&p.shape)
        );
        shape[axis] += p.shape[axis];
    }
    let outer: usize = first[..axis].iter().product();
    let inner: usize = first[axis + 1..].iter().product();
    let mut ts = Vec::new();
    for p in parts.iter().filter(|p| p.shape[axis] > 0) {
        ts.push(shaped(b, p, [inner, p.shape[axis], outer, 1])?);
    }
    if ts.is_empty() {
        bail!("concatenation of empty tensors only");
    }
    let t = join(b, ts, 1)?;
    let t = b.reshape(&t, ne_of(&shape))?;
    Ok(Dev { t, shape, elem: parts[0].elem })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_and_merging() {
        assert_eq!(ne_of(&[2, 3, 4]), [4, 3, 2, 1]);
        assert_eq!(ne_of(&[2, 3, 4, 5, 6]), [6, 5, 4, 6]);
        assert_eq!(ne_of(&[]), [1, 1, 1, 1]);
        let (s, c) = merge(&[2, 1, 3, 4], &[Some(true), None, Some(true), Some(false)]);
        assert_eq!(s, vec![6, 4]);
        assert_eq!(c, vec![Some(true), Some(false)]);
    }
}
