//! Shape and movement operators: Shape, Size, Reshape, Flatten, Squeeze,
//! Unsqueeze, Transpose, Expand, Tile, Concat, Split, Slice, Pad,
//! DepthToSpace, SpaceToDepth and Trilu. On the engine most are views or
//! one copy; on the host they move indices.

use super::common::{arg, axes, axis, harg, hopt, one, opt, Fold, Lower};
use crate::models::onnx::dev::{self, binary, canonical, concat, expand, narrow, ne_of, permute, reshape};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{self, broadcast_index, broadcast_shape, fmt_shape, index_map, numel, strides, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Taint, Val};
use crate::op::{BinFn, Op, PadMode};
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Shape" => (Some(lower_shape), Some(fold_shape)),
        "Size" => (Some(lower_size), Some(fold_size)),
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => (Some(lower_reshape), Some(fold_reshape)),
        "Transpose" => (Some(lower_transpose), Some(fold_transpose)),
        "Expand" => (Some(lower_expand), Some(fold_expand)),
        "Tile" => (Some(lower_tile), Some(fold_tile)),
        "Concat" => (Some(lower_concat), Some(fold_concat)),
        "Split" => (Some(lower_split), Some(fold_split)),
        "Slice" => (Some(lower_slice), Some(fold_slice)),
        "Pad" => (Some(lower_pad), Some(fold_pad)),
        "DepthToSpace" | "SpaceToDepth" => (Some(lower_space), Some(fold_space)),
        "Trilu" => (Some(lower_trilu), Some(fold_trilu)),
        _ => return None,
    })
}

/// A lowering's constant result that depends on input shapes.
fn shape_const(t: HTensor) -> crate::Result<Vec<Val>> {
    Ok(vec![Val::c(t, Taint::Shape)])
}

// BOUNDS-FN: start and end are clamped to 0..=r and start < end.
fn shape_ints(shape: &[usize], n: &OnnxNode) -> HTensor {
    let r = shape.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(n.int("start", 0));
    let end = if n.has("end") { clamp(n.int("end", r)) } else { r as usize };
    let dims = if start < end { shape[start..end].iter().map(|&d| d as i64).collect() } else { Vec::new() };
    HTensor::ints(dims)
}

fn lower_shape(_p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    shape_const(shape_ints(arg(ins, 0, "data")?.shape(), n))
}

fn fold_shape(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    Ok(vec![shape_ints(&harg(ins, 0, "data")?.shape, n)])
}

fn size_of(shape: &[usize]) -> HTensor {
    // INVARIANT: a rank-0 shape holds exactly the one value given.
    HTensor::from_i64(Elem::I64, Vec::new(), vec![shape.iter().product::<usize>() as i64]).expect("a scalar")
}

fn lower_size(_p: &mut Planner, _n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    shape_const(size_of(arg(ins, 0, "data")?.shape()))
}

fn fold_size(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    Ok(vec![size_of(&harg(ins, 0, "data")?.shape)])
}

/// The target shape of Reshape (`target` values), Flatten, Squeeze or Unsqueeze.
// BOUNDS-FN: Reshape: out has target's length and i indexes both (shape[i] after i <
// shape.len() is checked); Flatten: a <= r is checked; Squeeze: axes() gives axes below
// the rank.
fn new_shape(n: &OnnxNode, shape: &[usize], second: Option<&[i64]>, opset: i64) -> crate::Result<Vec<usize>> {
    let total: usize = shape.iter().product();
    match n.op.as_str() {
        "Reshape" => {
            let target = match second {
                Some(t) => t.to_vec(),
                None => n.ints("shape").ok_or_else(|| anyhow::anyhow!("Reshape needs its shape input"))?,
            };
            let allowzero = n.int("allowzero", 0) != 0;
            let mut out = Vec::with_capacity(target.len());
            let mut infer = None;
            for (i, &d) in target.iter().enumerate() {
                if d == -1 {
                    ensure!(infer.is_none(), "the shape {target:?} has more than one -1");
                    infer = Some(i);
                    out.push(1);
                } else if d == 0 && !allowzero {
                    ensure!(i < shape.len(), "the shape {target:?} copies dimension {i} (0), which the input {} lacks", fmt_shape(shape));
                    out.push(shape[i]);
                } else {
                    ensure!(d >= 0, "the shape {target:?} has a negative size {d}");
                    out.push(d as usize);
                }
            }
            if let Some(i) = infer {
                let known: usize = out.iter().enumerate().filter(|(k, _)| *k != i).map(|(_, &d)| d).product();
                ensure!(known > 0 && total % known == 0, "cannot reshape {} ({total} elements) to {target:?}", fmt_shape(shape));
                out[i] = total / known;
            }
            ensure!(
                out.iter().product::<usize>() == total,
                "cannot reshape a tensor of shape {} ({total} elements) to {} ({} elements)",
                fmt_shape(shape),
                fmt_shape(&out),
                out.iter().product::<usize>()
            );
            Ok(out)
        }
        "Flatten" => {
            let r = shape.len();
            let a = n.int("axis", 1);
            let a = if a < 0 { a + r as i64 } else { a };
            ensure!((0..=r as i64).contains(&a), "axis {} is out of range for rank {r}", n.int("axis", 1));
            let a = a as usize;
            Ok(vec![shape[..a].iter().product(), shape[a..].iter().product()])
        }
        "Squeeze" => {
            let list = match second {
                Some(v) => Some(v.to_vec()),
                None if opset < 13 || n.has("axes") => n.ints("axes"),
                None => None,
            };
            match list {
                None => Ok(shape.iter().copied().filter(|&d| d != 1).collect()),
                Some(l) => {
                    let ax = axes(&l, shape.len())?;
                    for &a in &ax {
                        ensure!(shape[a] == 1, "cannot squeeze axis {a} of shape {}: its size is not 1", fmt_shape(shape));
                    }
                    Ok(shape.iter().enumerate().filter(|(i, _)| !ax.contains(i)).map(|(_, &d)| d).collect())
                }
            }
        }
        _ => {
            let list = match second {
                Some(v) => v.to_vec(),
                None => n.ints("axes").ok_or_else(|| anyhow::anyhow!("Unsqueeze needs its axes"))?,
            };
            let r = shape.len() + list.len();
            let ax = axes(&list, r)?;
            let mut out = Vec::with_capacity(r);
            let mut it = shape.iter();
            for i in 0..r {
                if ax.contains(&i) {
                    out.push(1);
                } else {
                    out.push(*it.next().ok_or_else(|| anyhow::anyhow!("internal: unsqueeze"))?);
                }
            }
            Ok(out)
        }
    }
}

fn lower_reshape(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = arg(ins, 0, "data")?.clone();
    let second = match opt(ins, 1) {
        Some(v) => Some(p.ints_of(v, "shape")?),
        None => None,
    };
    let shape = new_shape(n, x.shape(), second.as_deref(), p.opset)?;
    let d = p.dev(&x)?;
    one(reshape(p.eb(), &d, shape)?)
}

fn fold_reshape(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "data")?;
    let second = hopt(ins, 1).map(|t| t.i64s().to_vec());
    Ok(vec![x.reshaped(new_shape(n, &x.shape, second.as_deref(), opset)?)?])
}

fn perm_of(n: &OnnxNode, rank: usize) -> crate::Result<Vec<usize>> {
    match n.ints("perm") {
        Some(p) => p.iter().map(|&a| axis(a, rank)).collect(),
        None => Ok((0..rank).rev().collect()),
    }
}

fn lower_transpose(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "data")?)?;
    let perm = perm_of(n, x.shape.len())?;
    one(permute(p.eb(), &x, &perm)?)
}

fn fold_transpose(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "data")?;
    Ok(vec![host::transpose(x, &perm_of(n, x.rank())?)?])
}

fn dims(v: &[i64], what: &str) -> crate::Result<Vec<usize>> {
    v.iter()
        .map(|&d| {
            ensure!(d >= 0, "the {what} {v:?} has a negative size");
            Ok(d as usize)
        })
        .collect()
}

fn lower_expand(p: &mut Planner, _n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let to = dims(&p.ints_of(arg(ins, 1, "shape")?, "shape")?, "shape")?;
    one(expand(p.eb(), &x, &to)?)
}

fn fold_expand(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let to = dims(&harg(ins, 1, "shape")?.i64s(), "shape")?;
    let out = broadcast_shape(&x.shape, &to)?;
    let idx = broadcast_index(&out, &x.shape)?;
    Ok(vec![x.pick(&idx, out)?])
}

fn repeats(v: &[i64], rank: usize) -> crate::Result<Vec<usize>> {
    ensure!(v.len() == rank, "repeats {v:?} must have one entry per input dimension ({rank})");
    dims(v, "repeats")
}

// BOUNDS-FN: ne_of gives a [usize; 4], indexed by 0.
fn lower_tile(p: &mut Planner, _n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let reps = repeats(&p.ints_of(arg(ins, 1, "repeats")?, "repeats")?, x.shape.len())?;
    let out: Vec<usize> = x.shape.iter().zip(&reps).map(|(d, r)| d * r).collect();
    if reps.iter().all(|&r| r == 1) {
        return Ok(vec![Val::D(x)]);
    }
    if out.iter().product::<usize>() == 0 {
        return shape_const(HTensor::from_f64(x.elem, out.clone(), Vec::new())?);
    }
    // Groups: a dimension followed by the untiled ones after it.
    let mut src: Vec<usize> = Vec::new();
    let mut dst: Vec<usize> = Vec::new();
    for (i, (&d, &r)) in x.shape.iter().zip(&reps).enumerate() {
        if i == 0 || r != 1 || d == 1 && src.is_empty() {
            src.push(d);
            dst.push(d * r);
        } else {
            // INVARIANT: i == 0 pushed the first group, so src and dst are non-empty.
            *src.last_mut().expect("a group") *= d;
            *dst.last_mut().expect("a group") *= d;
        }
    }
    ensure!(src.len() <= 4, "Tile with repeats {reps:?} needs more than 4 dimensions");
    let b = p.eb();
    let xt = dev::shaped(b, &x, ne_of(&src))?;
    let row = b.leaf(crate::base::dtype::DType::F32, [ne_of(&dst)[0], 1, 1, 1])?;
    let shape_t = b.view(&row, ne_of(&dst), [4, 0, 0, 0], 0)?;
    let t = b.op(Op::Repeat, &[xt, shape_t])?;
    let t = b.reshape(&t, ne_of(&out))?;
    one(Dev { t, shape: out, elem: x.elem })
}

// BOUNDS-FN: c, st and x.shape have the rank's length (out zips x.shape with reps).
fn fold_tile(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let reps = repeats(&harg(ins, 1, "repeats")?.i64s(), x.rank())?;
    let out: Vec<usize> = x.shape.iter().zip(&reps).map(|(d, r)| d * r).collect();
    let st = strides(&x.shape);
    let idx = index_map(&out, |c| c.iter().enumerate().map(|(i, &ci)| (ci % x.shape[i]) * st[i]).sum())?;
    Ok(vec![x.pick(&idx, out)?])
}

// BOUNDS-FN: vals is checked non-empty.
fn lower_concat(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let vals: Vec<Val> = ins.iter().flatten().cloned().collect();
    ensure!(!vals.is_empty(), "Concat needs at least one input");
    let rank = vals[0].shape().len();
    let a = axis(n.int("axis", 0), rank)?;
    let mut parts = Vec::with_capacity(vals.len());
    for v in &vals {
        if v.shape().get(a) == Some(&0) && v.shape().len() == rank {
            continue;
        }
        parts.push(p.dev(v)?);
    }
    if parts.is_empty() {
        parts.push(p.dev(&vals[0])?);
    }
    one(concat(p.eb(), &parts, a)?)
}

// BOUNDS-FN: vals is checked non-empty and a < rank; every input is checked to have
// rank `rank` and vals[0]'s sizes off the axis, so it holds outer * chunk values and
// each o * chunk..(o + 1) * chunk is inside them.
fn fold_concat(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let vals: Vec<&HTensor> = ins.iter().flatten().map(|v| v.as_ref()).collect();
    ensure!(!vals.is_empty(), "Concat needs at least one input");
    let rank = vals[0].rank();
    let a = axis(n.int("axis", 0), rank)?;
    let mut shape = vals[0].shape.clone();
    shape[a] = 0;
    for v in &vals {
        ensure!(
            v.rank() == rank && (0..rank).all(|i| i == a || v.shape[i] == vals[0].shape[i]),
            "cannot concatenate shapes {} and {} along axis {a}",
            fmt_shape(&vals[0].shape),
            fmt_shape(&v.shape)
        );
        shape[a] += v.shape[a];
    }
    let outer: usize = shape[..a].iter().product();
    let is_int = vals.iter().all(|v| matches!(v.data, host::Data::I(_)));
    let mut fv = Vec::new();
    let mut iv = Vec::new();
    for o in 0..outer {
        for v in &vals {
            let chunk: usize = v.shape[a..].iter().product();
            if is_int {
                iv.extend_from_slice(&v.i64s()[o * chunk..(o + 1) * chunk]);
            } else {
                fv.extend_from_slice(&v.f64s()[o * chunk..(o + 1) * chunk]);
            }
        }
    }
    let elem = vals[0].elem;
    Ok(vec![if is_int { HTensor::from_i64(elem, shape, iv)? } else { HTensor::from_f64(elem, shape, fv)? }])
}

/// Sizes of Split's outputs along the axis of size `dim`.
fn split_sizes(n: &OnnxNode, given: Option<Vec<i64>>, dim: usize, outputs: usize) -> crate::Result<Vec<usize>> {
    let given = given.or_else(|| n.ints("split"));
    if let Some(s) = given {
        let s = dims(&s, "split")?;
        ensure!(s.iter().sum::<usize>() == dim, "the split sizes {s:?} do not add up to the dimension's size {dim}");
        return Ok(s);
    }
    let k = n.int("num_outputs", outputs as i64).max(1) as usize;
    let each = dim.div_ceil(k);
    let mut out = Vec::with_capacity(k);
    let mut left = dim;
    for _ in 0..k {
        let s = each.min(left);
        out.push(s);
        left -= s;
    }
    Ok(out)
}

// BOUNDS-FN: a < rank (normalised).
fn lower_split(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let a = axis(n.int("axis", 0), x.shape.len())?;
    let given = match opt(ins, 1) {
        Some(v) => Some(p.ints_of(v, "split")?),
        None => None,
    };
    let sizes = split_sizes(n, given, x.shape[a], n.outputs.len())?;
    let mut outs = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        outs.push(Val::D(narrow(p.eb(), &x, a, start, s)?));
        start += s;
    }
    Ok(outs)
}

// BOUNDS-FN: a < rank (normalised); c, st and shape have the rank's length; pick checks
// idx.
fn fold_split(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let a = axis(n.int("axis", 0), x.rank())?;
    let given = hopt(ins, 1).map(|t| t.i64s().to_vec());
    let sizes = split_sizes(n, given, x.shape[a], n.outputs.len())?;
    let st = strides(&x.shape);
    let mut outs = Vec::new();
    let mut start = 0;
    for s in sizes {
        let mut shape = x.shape.clone();
        shape[a] = s;
        let idx = index_map(&shape, |c| c.iter().enumerate().map(|(i, &ci)| (if i == a { ci + start } else { ci }) * st[i]).sum())?;
        outs.push(x.pick(&idx, shape)?);
        start += s;
    }
    Ok(outs)
}

/// Per-axis (start, count, step) of a Slice over `shape`.
// BOUNDS-FN: ax, steps, starts and ends are checked to have one length, k below it; a <
// r (normalised) and spec has r entries.
fn slice_spec(n: &OnnxNode, shape: &[usize], starts: Vec<i64>, ends: Vec<i64>, ax: Option<Vec<i64>>, steps: Option<Vec<i64>>) -> crate::Result<Vec<(i64, usize, i64)>> {
    let r = shape.len();
    ensure!(starts.len() == ends.len(), "Slice: {} starts but {} ends", starts.len(), ends.len());
    let ax = ax.unwrap_or_else(|| (0..starts.len() as i64).collect());
    ensure!(ax.len() == starts.len(), "Slice: {} axes for {} starts", ax.len(), starts.len());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    ensure!(steps.len() == starts.len(), "Slice: {} steps for {} starts", steps.len(), starts.len());
    let mut spec: Vec<(i64, usize, i64)> = shape.iter().map(|&d| (0, d, 1)).collect();
    let _ = n;
    for k in 0..starts.len() {
        let a = axis(ax[k], r)?;
        let d = shape[a] as i64;
        let step = steps[k];
        ensure!(step != 0, "Slice: a step is 0");
        let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (s, e) = (fix(starts[k]), fix(ends[k]));
        let (s, e) = if step > 0 { (s.clamp(0, d), e.clamp(0, d)) } else { (s.clamp(-1, d - 1), e.clamp(-1, d - 1)) };
        let count = if step > 0 {
            if e > s { (e - s + step - 1) / step } else { 0 }
        } else if s > e {
            (s - e + (-step) - 1) / (-step)
        } else {
            0
        };
        spec[a] = (s, count as usize, step);
    }
    Ok(spec)
}

fn slice_inputs(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<(Vec<i64>, Vec<i64>, Option<Vec<i64>>, Option<Vec<i64>>)> {
    if opt(ins, 1).is_none() {
        let s = n.ints("starts").ok_or_else(|| anyhow::anyhow!("Slice needs starts"))?;
        let e = n.ints("ends").ok_or_else(|| anyhow::anyhow!("Slice needs ends"))?;
        return Ok((s, e, n.ints("axes"), None));
    }
    let s = p.ints_of(arg(ins, 1, "starts")?, "starts")?;
    let e = p.ints_of(arg(ins, 2, "ends")?, "ends")?;
    let a = match opt(ins, 3) {
        Some(v) => Some(p.ints_of(v, "axes")?),
        None => None,
    };
    let st = match opt(ins, 4) {
        Some(v) => Some(p.ints_of(v, "steps")?),
        None => None,
    };
    Ok((s, e, a, st))
}

fn lower_slice(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "data")?)?;
    let (s, e, a, st) = slice_inputs(p, n, ins)?;
    let spec = slice_spec(n, &x.shape, s, e, a, st)?;
    one(slice_dev(p, &x, &spec)?)
}

/// The slice of `x` given per axis as (start, count, step).
// BOUNDS-FN: spec has one entry per dimension of x (slice_spec over x's shape) and cur
// keeps x's rank, so st and shape have as many; ne and nb are [_; 4] with k <= 4
// checked (k - 1 - j < k), groups[k - 1] when k > 0, d <= k <= 3 on the dummy path.
fn slice_dev(p: &mut Planner, x: &Dev, spec: &[(i64, usize, i64)]) -> crate::Result<Dev> {
    let out: Vec<usize> = spec.iter().map(|s| s.1).collect();
    if out.iter().product::<usize>() == 0 {
        return Ok(Dev { t: p.eb().leaf(crate::base::dtype::DType::F32, ne_of(&out))?, shape: out, elem: x.elem });
    }
    let mut cur = x.clone();
    // Reversed axes: a gather of the indices in order.
    for (a, &(s, c, step)) in spec.iter().enumerate() {
        if step < 0 {
            let idx: Vec<f32> = (0..c as i64).map(|i| (s + i * step) as f32).collect();
            cur = gather_axis(p, &cur, a, idx)?;
        }
    }
    // Positive steps: one strided view. Groups: a sliced dimension and the
    // untouched ones after it (step 1), or a strided dimension alone.
    let shape = cur.shape.clone();
    let st = strides(&shape);
    let mut groups: Vec<(usize, usize)> = Vec::new(); // (size, element stride)
    let mut offset = 0usize;
    for (a, &(s, c, step)) in spec.iter().enumerate() {
        let (s, step) = if step < 0 { (0, 1) } else { (s as usize, step as usize) };
        offset += s * st[a];
        if c == 1 {
            continue;
        }
        let untouched = s == 0 && c == shape[a] && step == 1;
        match groups.last_mut() {
            // The previous group steps over whole runs of this axis: one group.
            Some(g) if untouched && g.1 == st[a] * shape[a] => {
                g.0 *= c;
                g.1 = st[a];
            }
            _ => groups.push((c, st[a] * step)),
        }
    }
    ensure!(groups.len() <= 4, "this Slice needs more than 4 strided dimensions");
    let c = canonical(p.eb(), &cur)?;
    let es = c.t.dtype().size();
    let k = groups.len();
    let mut ne = [1usize; 4];
    let mut nb = [es; 4];
    for (j, g) in groups.iter().enumerate() {
        ne[k - 1 - j] = g.0;
        nb[k - 1 - j] = g.1 * es;
    }
    if k > 0 && groups[k - 1].1 != 1 {
        // The innermost group is strided: move it to ggml dim 1 behind a dummy.
        ensure!(k <= 3, "this Slice needs more than 4 strided dimensions");
        for d in (1..=k).rev() {
            ne[d] = ne[d - 1];
            nb[d] = nb[d - 1];
        }
        ne[0] = 1;
        nb[0] = es;
    }
    let total = c.t.nelements();
    let src = p.eb().reshape(&c.t, [total, 1, 1, 1])?;
    let v = p.eb().view(&src, ne, nb, offset * es)?;
    let t = p.eb().reshape(&v, ne_of(&out))?;
    Ok(Dev { t, shape: out, elem: x.elem })
}

/// x's slices along ONNX axis `a` picked by the index list `idx`.
// BOUNDS-FN: a < rank is checked first.
pub fn gather_axis(p: &mut Planner, x: &Dev, a: usize, idx: Vec<f32>) -> crate::Result<Dev> {
    ensure!(a < x.shape.len(), "internal: a gather along axis {a} of a tensor of rank {}", x.shape.len());
    let outer: usize = x.shape[..a].iter().product();
    let inner: usize = x.shape[a + 1..].iter().product();
    let n = idx.len();
    let b = p.eb();
    let xt = dev::shaped(b, x, [inner, x.shape[a], outer, 1])?;
    let it = b.data([n, 1, 1, 1], idx)?;
    let t = b.op(Op::GatherAxis { dim: 1 }, &[xt, it])?;
    let mut shape = x.shape.clone();
    shape[a] = n;
    let t = b.reshape(&t, ne_of(&shape))?;
    Ok(Dev { t, shape, elem: x.elem })
}

// BOUNDS-FN: spec, strd and c have x's rank; pick checks idx.
fn fold_slice(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "data")?;
    let (s, e, a, st) = if hopt(ins, 1).is_none() {
        (
            n.ints("starts").ok_or_else(|| anyhow::anyhow!("Slice needs starts"))?,
            n.ints("ends").ok_or_else(|| anyhow::anyhow!("Slice needs ends"))?,
            n.ints("axes"),
            None,
        )
    } else {
        (
            harg(ins, 1, "starts")?.i64s().to_vec(),
            harg(ins, 2, "ends")?.i64s().to_vec(),
            hopt(ins, 3).map(|t| t.i64s().to_vec()),
            hopt(ins, 4).map(|t| t.i64s().to_vec()),
        )
    };
    let spec = slice_spec(n, &x.shape, s, e, a, st)?;
    let out: Vec<usize> = spec.iter().map(|s| s.1).collect();
    let strd = strides(&x.shape);
    let idx = index_map(&out, |c| c.iter().enumerate().map(|(i, &ci)| ((spec[i].0 + ci as i64 * spec[i].2) as usize) * strd[i]).sum())?;
    Ok(vec![x.pick(&idx, out)?])
}

/// Pad's mode, per-dimension (before, after) and fill value.
// BOUNDS-FN: ax holds axes below rank (normalised) and per has rank entries; pads.len()
// == 2 * ax.len() is checked, so k + ax.len() is in range.
fn pad_spec(n: &OnnxNode, rank: usize, pads: Vec<i64>, value: f64, ax: Option<Vec<i64>>) -> crate::Result<(PadMode, Vec<(i64, i64)>, f64)> {
    let mode = match n.string("mode", "constant").as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => bail!("Pad mode '{other}' is not supported (constant, reflect, edge, wrap)"),
    };
    let ax: Vec<usize> = match ax {
        Some(a) => a.iter().map(|&v| axis(v, rank)).collect::<crate::Result<_>>()?,
        None => (0..rank).collect(),
    };
    ensure!(pads.len() == 2 * ax.len(), "Pad: {} pads for {} axes (2 per axis)", pads.len(), ax.len());
    let mut per = vec![(0i64, 0i64); rank];
    for (k, &a) in ax.iter().enumerate() {
        per[a] = (pads[k], pads[k + ax.len()]);
    }
    Ok((mode, per, value))
}

// BOUNDS-FN: per, lo, hi and x.shape have rank entries (narrow keeps the rank); glo and
// ghi are [_; 4] with k <= 4 checked.
fn lower_pad(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let mut x = p.dev(arg(ins, 0, "data")?)?;
    let rank = x.shape.len();
    let pads = match opt(ins, 1) {
        Some(v) => p.ints_of(v, "pads")?,
        None => n.ints("pads").ok_or_else(|| anyhow::anyhow!("Pad needs pads"))?,
    };
    let value = match opt(ins, 2) {
        Some(v) => p.value_of(v, "constant_value")?.scalar("constant_value")?,
        None => n.float("value", 0.0) as f64,
    };
    let ax = match opt(ins, 3) {
        Some(v) => Some(p.ints_of(v, "axes")?),
        None => None,
    };
    let (mode, per, value) = pad_spec(n, rank, pads, value, ax)?;
    // Negative pads crop first.
    for a in 0..rank {
        let (lo, hi) = per[a];
        if lo < 0 || hi < 0 {
            let s = (-lo).max(0) as usize;
            let e = x.shape[a] as i64 - (-hi).max(0);
            ensure!(e >= s as i64, "Pad: the negative pads crop more than the size of axis {a}");
            x = narrow(p.eb(), &x, a, s, e as usize - s)?;
        }
    }
    let lo: Vec<usize> = per.iter().map(|v| v.0.max(0) as usize).collect();
    let hi: Vec<usize> = per.iter().map(|v| v.1.max(0) as usize).collect();
    let out: Vec<usize> = (0..rank).map(|a| x.shape[a] + lo[a] + hi[a]).collect();
    if lo.iter().chain(&hi).all(|&v| v == 0) {
        return one(x);
    }
    // Groups: a padded dimension stands alone; unpadded neighbours merge.
    let mut groups: Vec<(usize, usize, usize)> = Vec::new(); // (size, lo, hi)
    for a in 0..rank {
        let padded = lo[a] + hi[a] > 0;
        match groups.last_mut() {
            Some(g) if !padded && g.1 + g.2 == 0 => g.0 *= x.shape[a],
            _ => groups.push((x.shape[a], lo[a], hi[a])),
        }
    }
    ensure!(groups.len() <= 4, "this Pad pads more than 4 separate dimensions");
    let k = groups.len();
    let mut glo = [0usize; 4];
    let mut ghi = [0usize; 4];
    let sizes: Vec<usize> = groups.iter().map(|g| g.0).collect();
    for (j, g) in groups.iter().enumerate() {
        glo[k - 1 - j] = g.1;
        ghi[k - 1 - j] = g.2;
    }
    let b = p.eb();
    let xt = dev::shaped(b, &x, ne_of(&sizes))?;
    let t = b.op(Op::PadEx { lo: glo, hi: ghi, mode, value: value as f32 }, &[xt])?;
    let t = b.reshape(&t, ne_of(&out))?;
    one(Dev { t, shape: out, elem: x.elem })
}

// BOUNDS-FN: out, per, st, x.shape and c have x's rank; each source coordinate is below
// its size d (PadMode::source gives 0..d for d > 0), so flat < numel = xv.len().
fn fold_pad(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "data")?;
    let pads = match hopt(ins, 1) {
        Some(t) => t.i64s().to_vec(),
        None => n.ints("pads").ok_or_else(|| anyhow::anyhow!("Pad needs pads"))?,
    };
    let value = match hopt(ins, 2) {
        Some(t) => t.scalar("constant_value")?,
        None => n.float("value", 0.0) as f64,
    };
    let (mode, per, value) = pad_spec(n, x.rank(), pads, value, hopt(ins, 3).map(|t| t.i64s().to_vec()))?;
    let out: Vec<usize> = (0..x.rank()).map(|a| (x.shape[a] as i64 + per[a].0 + per[a].1).max(0) as usize).collect();
    let st = strides(&x.shape);
    let xv = x.f64s();
    let mut vals = Vec::with_capacity(numel(&out)?);
    let _ = index_map(&out, |c| {
        let mut flat = 0usize;
        let mut inside = true;
        for a in 0..c.len() {
            let o = c[a] as i64 - per[a].0;
            let d = x.shape[a];
            let src = if (0..d as i64).contains(&o) {
                Some(o as usize)
            } else if d == 0 {
                None
            } else {
                // Source of a padded position (o relative to the data).
                let lo = per[a].0.max(0) as usize;
                mode.source((o + lo as i64) as usize, lo, d)
            };
            match src {
                Some(s) => flat += s * st[a],
                None => inside = false,
            }
        }
        vals.push(if inside { xv[flat] } else { value });
        0
    })?;
    Ok(vec![HTensor::from_f64(x.elem, out, vals)?])
}

/// DepthToSpace / SpaceToDepth as (reshape, transpose, reshape) shapes.
// BOUNDS-FN: rank 4 is checked first.
fn space_plan(n: &OnnxNode, shape: &[usize]) -> crate::Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    ensure!(shape.len() == 4, "{} needs a 4-D input, not {}", n.op, fmt_shape(shape));
    let b = n.int("blocksize", 0);
    ensure!(b > 0, "{} needs a positive blocksize", n.op);
    let b = b as usize;
    let (nn, c, h, w) = (shape[0], shape[1], shape[2], shape[3]);
    if n.op == "DepthToSpace" {
        ensure!(c % (b * b) == 0, "DepthToSpace: {c} channels are not a multiple of blocksize^2 = {}", b * b);
        let cc = c / (b * b);
        let out = vec![nn, cc, h * b, w * b];
        if n.string("mode", "DCR") == "CRD" {
            Ok((vec![nn, cc, b, b, h, w], vec![0, 1, 4, 2, 5, 3], out))
        } else {
            Ok((vec![nn, b, b, cc, h, w], vec![0, 3, 4, 1, 5, 2], out))
        }
    } else {
        ensure!(h % b == 0 && w % b == 0, "SpaceToDepth: {h} x {w} is not a multiple of the blocksize {b}");
        let perm = if n.string("mode", "DCR") == "CRD" { vec![0, 1, 3, 5, 2, 4] } else { vec![0, 3, 5, 1, 2, 4] };
        Ok((vec![nn, c, h / b, b, w / b, b], perm, vec![nn, c * b * b, h / b, w / b]))
    }
}

fn lower_space(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let (s1, perm, out) = space_plan(n, &x.shape)?;
    let b = p.eb();
    let r = reshape(b, &x, s1)?;
    let t = permute(b, &r, &perm)?;
    one(reshape(b, &t, out)?)
}

fn fold_space(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let (s1, perm, out) = space_plan(n, &x.shape)?;
    Ok(vec![host::transpose(&x.reshaped(s1)?, &perm)?.reshaped(out)?])
}

/// Trilu's keep mask of the last two dimensions.
// BOUNDS-FN: rank >= 2 is checked first.
fn trilu_mask(n: &OnnxNode, shape: &[usize], k: i64) -> crate::Result<HTensor> {
    ensure!(shape.len() >= 2, "Trilu needs at least 2 dimensions");
    let (r, c) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let upper = n.int("upper", 1) != 0;
    let v: Vec<i64> = (0..r * c)
        .map(|i| {
            let (y, x) = ((i / c) as i64, (i % c) as i64);
            (if upper { x - y >= k } else { x - y <= k }) as i64
        })
        .collect();
    HTensor::from_i64(Elem::Bool, vec![r, c], v)
}

fn lower_trilu(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let k = match opt(ins, 1) {
        Some(v) => p.value_of(v, "k")?.scalar("k")? as i64,
        None => 0,
    };
    let mask = trilu_mask(n, &x.shape, k)?;
    let m = p.upload_host(&mask, None, crate::base::dtype::DType::F32)?;
    one(binary(p.eb(), BinFn::Mask, &x, &m, x.elem)?)
}

// BOUNDS-FN: mask has shape [r, c] and r * c values, and i % (r * c) < r * c (an empty
// x, where r * c may be 0, runs no iteration).
fn fold_trilu(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let k = hopt(ins, 1).map(|t| t.first()).transpose()?.map_or(0, |v| v as i64);
    let mask = trilu_mask(n, &x.shape, k)?;
    let (r, c) = (mask.shape[0], mask.shape[1]);
    let mv = mask.i64s();
    let idx: Vec<usize> = (0..x.numel()).collect();
    let mut t = x.pick(&idx, x.shape.clone())?;
    match &mut t.data {
        host::Data::F(v) => v.iter_mut().enumerate().for_each(|(i, e)| {
            if mv[i % (r * c)] == 0 {
                *e = 0.0
            }
        }),
        host::Data::I(v) => v.iter_mut().enumerate().for_each(|(i, e)| {
            if mv[i % (r * c)] == 0 {
                *e = 0
            }
        }),
    }
    Ok(vec![t])
}
