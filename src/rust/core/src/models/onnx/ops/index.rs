//! Indexing: Gather, GatherElements, GatherND, ScatterElements (and the
//! old Scatter), ScatterND and OneHot. On the engine a gather picks slices
//! along one dimension (`gather_axis`) by indices that may be computed in
//! the graph; element-wise gathers and scatters first turn their indices
//! into flat element indices (on the host for constant indices, with
//! element-wise ops otherwise).

use super::common::{arg, axis, harg, hopt, one, Fold, Lower};
use crate::models::onnx::dev::{self, binary, ne_of, reduce, reshape, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, index_map, numel, strides, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, MapFn, Op, RowFn, ScatterReduce};
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Gather" => (Some(lower_gather), Some(fold_gather)),
        "GatherElements" => (Some(lower_gather_elements), Some(fold_gather_elements)),
        "GatherND" => (Some(lower_gather_nd), Some(fold_gather_nd)),
        "ScatterElements" | "Scatter" => (Some(lower_scatter_elements), Some(fold_scatter_elements)),
        "ScatterND" => (Some(lower_scatter_nd), Some(fold_scatter_nd)),
        "OneHot" => (Some(lower_onehot), Some(fold_onehot)),
        _ => return None,
    })
}

/// An index in `-n..n` as a position in a dimension of size `n`.
fn pos(i: i64, n: usize, what: &str) -> crate::Result<usize> {
    let p = if i < 0 { i + n as i64 } else { i };
    ensure!((0..n as i64).contains(&p), "{what} {i} is out of range for a dimension of size {n}");
    Ok(p as usize)
}

/// `x` as a flat engine vector of its values (f32 indices).
fn flat(p: &mut Planner, v: &Val) -> crate::Result<Arc<crate::tensor::Tensor>> {
    let d = p.dev(v)?;
    let n = d.shape.iter().product();
    dev::shaped(p.eb(), &d, [n, 1, 1, 1])
}

// BOUNDS-FN: ds is checked non-empty and a < ds.len() (normalised), so ds[a] and ds[a +
// 1..] exist.
fn lower_gather(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (dv, iv) = (arg(ins, 0, "data")?.clone(), arg(ins, 1, "indices")?.clone());
    let ds = dv.shape().to_vec();
    ensure!(!ds.is_empty(), "Gather needs data of rank 1 or more");
    let a = axis(n.int("axis", 0), ds.len())?;
    let mut out: Vec<usize> = ds[..a].to_vec();
    out.extend_from_slice(iv.shape());
    out.extend_from_slice(&ds[a + 1..]);
    if let Val::C(c) = &iv {
        // Constant indices are checked here, where a message can say so.
        for &i in c.value()?.i64s().iter() {
            pos(i, ds[a], "Gather index")?;
        }
    }
    p.check_indices(&iv, ds[a], n);
    let inner: usize = ds[a + 1..].iter().product();
    let outer: usize = ds[..a].iter().product();
    let d = p.dev(&dv)?;
    let xt = dev::shaped(p.eb(), &d, [inner, ds[a], outer, 1])?;
    let it = flat(p, &iv)?;
    let t = p.b.op(Op::GatherAxis { dim: 1 }, &[xt, it])?;
    let t = p.b.reshape(&t, ne_of(&out))?;
    one(Dev { t, shape: out, elem: dv.elem() })
}

// BOUNDS-FN: a < rank (normalised); c has out.len() = a + ix.rank() + rank - a - 1
// entries; j is a flat index into ix (its strides) so j < idx.len(); d.pick checks map.
fn fold_gather(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let (d, ix) = (harg(ins, 0, "data")?, harg(ins, 1, "indices")?);
    let a = axis(n.int("axis", 0), d.rank())?;
    let mut out: Vec<usize> = d.shape[..a].to_vec();
    out.extend_from_slice(&ix.shape);
    out.extend_from_slice(&d.shape[a + 1..]);
    let inner: usize = d.shape[a + 1..].iter().product();
    let idx: Vec<usize> = ix.i64s().iter().map(|&i| pos(i, d.shape[a], "Gather index")).collect::<crate::Result<_>>()?;
    let (so, si, sr) = (strides(&d.shape[..a]), strides(&ix.shape), strides(&d.shape[a + 1..]));
    let map = index_map(&out, |c| {
        let o: usize = c[..a].iter().zip(&so).map(|(x, s)| x * s).sum();
        let j: usize = c[a..a + ix.rank()].iter().zip(&si).map(|(x, s)| x * s).sum();
        let r: usize = c[a + ix.rank()..].iter().zip(&sr).map(|(x, s)| x * s).sum();
        (o * d.shape[a] + idx[j]) * inner + r
    })?;
    Ok(vec![d.pick(&map, out)?])
}

/// GatherElements / ScatterElements indices of shape `is` for data of
/// shape `ds` along axis `a`: the same rank, and no larger than the data
/// along the other axes.
fn check_element_shape(ds: &[usize], is: &[usize], a: usize) -> crate::Result<()> {
    ensure!(is.len() == ds.len(), "the indices {} must have the data's rank ({})", fmt_shape(is), ds.len());
    ensure!(a < ds.len(), "internal: axis {a} of data of rank {}", ds.len());
    ensure!(
        is.iter().zip(ds).enumerate().all(|(i, (&n, &m))| i == a || n <= m),
        "the indices {} are larger than the data {} along an axis other than {a}",
        fmt_shape(is),
        fmt_shape(ds)
    );
    Ok(())
}

/// Flat element indices of data (shape `ds`) for GatherElements /
/// ScatterElements indices of shape `is` along `a`: constant when the
/// indices are, else computed on the engine.
// BOUNDS-FN: check_element_shape gives is.len() == ds.len() and a < ds.len(); dst and c
// have that many entries.
fn element_indices(p: &mut Planner, ds: &[usize], iv: &Val, a: usize) -> crate::Result<Val> {
    let is = iv.shape().to_vec();
    check_element_shape(ds, &is, a)?;
    let dst = strides(ds);
    // Flat index of each index position with its axis coordinate set to 0.
    let base = index_map(&is, |c| c.iter().enumerate().map(|(i, &x)| if i == a { 0 } else { x * dst[i] }).sum())?;
    if let Val::C(c) = iv {
        let iv = c.value()?;
        let v: Vec<i64> = iv
            .i64s()
            .iter()
            .zip(&base)
            .map(|(&i, &b)| Ok((b + pos(i, ds[a], "index")? * dst[a]) as i64))
            .collect::<crate::Result<_>>()?;
        return Ok(Val::c(HTensor::from_i64(Elem::I64, is, v)?, c.taint.max(crate::models::onnx::val::Taint::Shape)));
    }
    let idx = p.dev(iv)?;
    // i + (i < 0) * n, times the axis stride, plus the base.
    let b = p.eb();
    let neg = unary(b, Op::Map { f: MapFn::Affine, a: 1.0, b: 0.0 }, &idx, Elem::F32)?;
    let zero = b.data([1, 1, 1, 1], vec![0.0])?;
    let zero = Dev { t: zero, shape: vec![], elem: Elem::F32 };
    let lt = binary(b, BinFn::Less, &neg, &zero, Elem::F32)?;
    let wrap = unary(b, Op::Scale { s: f64::from(ds[a] as f32) }, &lt, Elem::F32)?;
    let norm = binary(b, BinFn::Add, &neg, &wrap, Elem::F32)?;
    let scaled = unary(b, Op::Scale { s: f64::from(dst[a] as f32) }, &norm, Elem::F32)?;
    let bt = b.data(ne_of(&is), base.iter().map(|&x| x as f32).collect())?;
    let bd = Dev { t: bt, shape: is.clone(), elem: Elem::F32 };
    Ok(Val::D(binary(b, BinFn::Add, &scaled, &bd, Elem::I64)?))
}

fn lower_gather_elements(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (dv, iv) = (arg(ins, 0, "data")?.clone(), arg(ins, 1, "indices")?.clone());
    let ds = dv.shape().to_vec();
    let a = axis(n.int("axis", 0), ds.len())?;
    let fi = element_indices(p, &ds, &iv, a)?;
    let d = p.dev(&dv)?;
    let xt = dev::shaped(p.eb(), &d, [numel(&ds)?, 1, 1, 1])?;
    let it = flat(p, &fi)?;
    let t = p.b.op(Op::GatherAxis { dim: 0 }, &[xt, it])?;
    let out = iv.shape().to_vec();
    let t = p.b.reshape(&t, ne_of(&out))?;
    one(Dev { t, shape: out, elem: dv.elem() })
}

// BOUNDS-FN: check_element_shape gives ix.rank() == ds.len() and a < ds.len(); dst and
// c have that many entries; index_map calls the closure once per index, so k < v.len().
fn host_element_indices(ds: &[usize], ix: &HTensor, a: usize) -> crate::Result<Vec<usize>> {
    check_element_shape(ds, &ix.shape, a)?;
    let dst = strides(ds);
    let v = ix.i64s();
    let mut k = 0;
    let mut err = None;
    let out = index_map(&ix.shape, |c| {
        let p = match pos(v[k], ds[a], "index") {
            Ok(p) => p,
            Err(e) => {
                err.get_or_insert(e);
                0
            }
        };
        k += 1;
        c.iter().enumerate().map(|(i, &x)| if i == a { p * dst[i] } else { x * dst[i] }).sum()
    })?;
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn fold_gather_elements(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let (d, ix) = (harg(ins, 0, "data")?, harg(ins, 1, "indices")?);
    let a = axis(n.int("axis", 0), d.rank())?;
    let idx = host_element_indices(&d.shape, ix, a)?;
    Ok(vec![d.pick(&idx, ix.shape.clone())?])
}

fn scatter_reduce(n: &OnnxNode) -> crate::Result<ScatterReduce> {
    Ok(match n.string("reduction", "none").as_str() {
        "none" => ScatterReduce::None,
        "add" => ScatterReduce::Add,
        "mul" => ScatterReduce::Mul,
        "max" => ScatterReduce::Max,
        "min" => ScatterReduce::Min,
        other => bail!("reduction '{other}' is not one of none, add, mul, max, min"),
    })
}

/// data with `updates` written at flat element indices `fi` (same shapes).
fn scatter_flat(p: &mut Planner, dv: &Val, fi: &Val, uv: &Val, reduce: ScatterReduce) -> crate::Result<Dev> {
    let ds = dv.shape().to_vec();
    let count: usize = fi.shape().iter().product();
    ensure!(uv.shape().iter().product::<usize>() == count, "the updates {} do not match the indices {}", fmt_shape(uv.shape()), fmt_shape(fi.shape()));
    let d = p.dev(dv)?;
    let xt = dev::shaped(p.eb(), &d, [numel(&ds)?, 1, 1, 1])?;
    let it = flat(p, fi)?;
    let ut = flat(p, uv)?;
    let b = p.eb();
    let i2 = b.reshape(&it, [1, count, 1, 1])?;
    let u2 = b.reshape(&ut, [1, count, 1, 1])?;
    let pairs = b.op(Op::Concat { dim: 0 }, &[i2, u2])?;
    let t = b.op(Op::ScatterFlat { reduce }, &[xt, pairs])?;
    let t = b.reshape(&t, ne_of(&ds))?;
    Ok(Dev { t, shape: ds, elem: dv.elem() })
}

fn lower_scatter_elements(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (dv, iv, uv) = (arg(ins, 0, "data")?.clone(), arg(ins, 1, "indices")?.clone(), arg(ins, 2, "updates")?.clone());
    let ds = dv.shape().to_vec();
    let a = axis(n.int("axis", 0), ds.len())?;
    let fi = element_indices(p, &ds, &iv, a)?;
    one(scatter_flat(p, &dv, &fi, &uv, scatter_reduce(n)?)?)
}

fn host_scatter(d: &HTensor, idx: &[usize], u: &HTensor, r: ScatterReduce) -> crate::Result<HTensor> {
    ensure!(idx.len() == u.numel(), "the updates do not match the indices");
    let mut v = d.f64s().to_vec();
    let n = v.len();
    let uv = u.f64s();
    for (&i, &w) in idx.iter().zip(uv.iter()) {
        let slot = v.get_mut(i).ok_or_else(|| anyhow::anyhow!("internal: scatter index {i} past the {n} values of the data"))?;
        *slot = match r {
            ScatterReduce::None => w,
            ScatterReduce::Add => *slot + w,
            ScatterReduce::Mul => *slot * w,
            ScatterReduce::Max => slot.max(w),
            ScatterReduce::Min => slot.min(w),
        };
    }
    HTensor::from_f64(d.elem, d.shape.clone(), v)
}

fn fold_scatter_elements(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let (d, ix, u) = (harg(ins, 0, "data")?, harg(ins, 1, "indices")?, harg(ins, 2, "updates")?);
    let a = axis(n.int("axis", 0), d.rank())?;
    let idx = host_element_indices(&d.shape, ix, a)?;
    Ok(vec![host_scatter(d, &idx, u, scatter_reduce(n)?)?])
}

/// GatherND / ScatterND: (batch, k, slice) of data `ds` and indices `is`.
// BOUNDS-FN: is is checked non-empty; batch + k <= ds.len() and is.len() > batch are
// checked before the slices at batch and batch + k.
fn nd_layout(ds: &[usize], is: &[usize], batch: usize) -> crate::Result<(usize, usize)> {
    ensure!(!is.is_empty(), "the indices must have rank 1 or more");
    let k = is[is.len() - 1];
    ensure!(batch + k <= ds.len(), "indices of depth {k} (batch_dims {batch}) do not fit data of rank {}", ds.len());
    ensure!(is.len() > batch && is[..batch] == ds[..batch], "the batch dimensions of the indices and the data differ");
    let slice: usize = ds[batch + k..].iter().product();
    Ok((k, slice))
}

/// Row (slice) index into data viewed as [rows, slice] for every index tuple.
// BOUNDS-FN: nd_layout gives is.len() > batch, batch + k <= ds.len() and k = the
// indices' last size, so t * k + j < numel for t < numel / k, j < k; rst has k entries.
fn host_nd_rows(ds: &[usize], ix: &HTensor, batch: usize) -> crate::Result<Vec<usize>> {
    let (k, _) = nd_layout(ds, &ix.shape, batch)?;
    let v = ix.i64s();
    let tuples = if k == 0 { ix.numel() } else { ix.numel() / k };
    let per_batch: usize = ix.shape[batch..ix.rank() - 1].iter().product::<usize>().max(1);
    let rows_per_batch: usize = ds[batch..batch + k].iter().product();
    let rst = strides(&ds[batch..batch + k]);
    (0..tuples)
        .map(|t| {
            let mut r = (t / per_batch) * rows_per_batch;
            for j in 0..k {
                r += pos(v[t * k + j], ds[batch + j], "index")? * rst[j];
            }
            Ok(r)
        })
        .collect()
}

// BOUNDS-FN: nd_layout gives is.len() > batch and batch + k <= ds.len(); prod has the
// indices' rank, at least 1.
fn nd_rows(p: &mut Planner, ds: &[usize], iv: &Val, batch: usize) -> crate::Result<Val> {
    let is = iv.shape().to_vec();
    let (k, _) = nd_layout(ds, &is, batch)?;
    if let Val::C(c) = iv {
        let rows = host_nd_rows(ds, &*c.value()?, batch)?;
        let n = rows.len();
        return Ok(Val::c(HTensor::from_i64(Elem::I64, vec![n], rows.iter().map(|&r| r as i64).collect())?, c.taint.max(crate::models::onnx::val::Taint::Shape)));
    }
    let idx = p.dev(iv)?;
    let rst: Vec<f64> = strides(&ds[batch..batch + k]).iter().map(|&s| s as f64).collect();
    let sizes: Vec<f64> = ds[batch..batch + k].iter().map(|&s| s as f64).collect();
    let b = p.eb();
    let zero = Dev { t: b.data([1, 1, 1, 1], vec![0.0])?, shape: vec![], elem: Elem::F32 };
    let lt = binary(b, BinFn::Less, &idx, &zero, Elem::F32)?;
    let szv = Dev { t: b.data([k, 1, 1, 1], sizes.iter().map(|&x| x as f32).collect())?, shape: vec![k], elem: Elem::F32 };
    let wrap = binary(b, BinFn::Mul, &lt, &szv, Elem::F32)?;
    let norm = binary(b, BinFn::Add, &idx, &wrap, Elem::F32)?;
    let stv = Dev { t: b.data([k, 1, 1, 1], rst.iter().map(|&x| x as f32).collect())?, shape: vec![k], elem: Elem::F32 };
    let prod = binary(b, BinFn::Mul, &norm, &stv, Elem::F32)?;
    let r = prod.shape.len();
    let rows = reduce(b, RowFn::Sum, &prod, &[r - 1], false)?;
    if batch == 0 {
        return Ok(Val::D(rows));
    }
    // Each batch element starts at its own block of rows.
    let per_batch: usize = is[batch..is.len() - 1].iter().product::<usize>().max(1);
    let rows_per_batch: usize = ds[batch..batch + k].iter().product();
    let tuples: usize = rows.shape.iter().product();
    let base: Vec<f32> = (0..tuples).map(|t| ((t / per_batch) * rows_per_batch) as f32).collect();
    let bd = Dev { t: b.data(ne_of(&rows.shape), base)?, shape: rows.shape.clone(), elem: Elem::F32 };
    Ok(Val::D(binary(b, BinFn::Add, &rows, &bd, Elem::I64)?))
}

// BOUNDS-FN: nd_layout gives is non-empty and batch + k <= ds.len().
fn lower_gather_nd(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (dv, iv) = (arg(ins, 0, "data")?.clone(), arg(ins, 1, "indices")?.clone());
    let batch = n.int("batch_dims", 0).max(0) as usize;
    let ds = dv.shape().to_vec();
    let is = iv.shape().to_vec();
    let (k, slice) = nd_layout(&ds, &is, batch)?;
    let rows = nd_rows(p, &ds, &iv, batch)?;
    let mut out: Vec<usize> = is[..is.len() - 1].to_vec();
    out.extend_from_slice(&ds[batch + k..]);
    let d = p.dev(&dv)?;
    let total_rows = numel(&ds)? / slice.max(1);
    let xt = dev::shaped(p.eb(), &d, [slice, total_rows, 1, 1])?;
    let it = flat(p, &rows)?;
    let t = p.b.op(Op::GatherAxis { dim: 1 }, &[xt, it])?;
    let t = p.b.reshape(&t, ne_of(&out))?;
    one(Dev { t, shape: out, elem: dv.elem() })
}

// BOUNDS-FN: nd_layout gives rank >= 1 and batch + k <= rank of the data; d.pick checks
// idx.
fn fold_gather_nd(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let (d, ix) = (harg(ins, 0, "data")?, harg(ins, 1, "indices")?);
    let batch = n.int("batch_dims", 0).max(0) as usize;
    let (k, slice) = nd_layout(&d.shape, &ix.shape, batch)?;
    let rows = host_nd_rows(&d.shape, ix, batch)?;
    let mut out: Vec<usize> = ix.shape[..ix.rank() - 1].to_vec();
    out.extend_from_slice(&d.shape[batch + k..]);
    let idx: Vec<usize> = rows.iter().flat_map(|&r| (0..slice).map(move |j| r * slice + j)).collect();
    Ok(vec![d.pick(&idx, out)?])
}

fn lower_scatter_nd(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (dv, iv, uv) = (arg(ins, 0, "data")?.clone(), arg(ins, 1, "indices")?.clone(), arg(ins, 2, "updates")?.clone());
    let ds = dv.shape().to_vec();
    let (_, slice) = nd_layout(&ds, iv.shape(), 0)?;
    let rows = nd_rows(p, &ds, &iv, 0)?;
    // Element indices: row * slice + j for j in 0..slice.
    let fi = match &rows {
        Val::C(c) => {
            let r = c.value()?;
            let v: Vec<i64> = r.i64s().iter().flat_map(|&x| (0..slice as i64).map(move |j| x * slice as i64 + j)).collect();
            let count = v.len();
            Val::c(HTensor::from_i64(Elem::I64, vec![count], v)?, c.taint)
        }
        Val::D(d) => {
            let nrows: usize = d.shape.iter().product();
            let b = p.eb();
            let r2 = reshape(b, d, vec![nrows, 1])?;
            let r2 = unary(b, Op::Scale { s: f64::from(slice as f32) }, &r2, Elem::F32)?;
            let ar = Dev { t: b.data([slice, 1, 1, 1], (0..slice).map(|j| j as f32).collect())?, shape: vec![1, slice], elem: Elem::F32 };
            Val::D(binary(b, BinFn::Add, &r2, &ar, Elem::I64)?)
        }
    };
    one(scatter_flat(p, &dv, &fi, &uv, scatter_reduce(n)?)?)
}

fn fold_scatter_nd(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let (d, ix, u) = (harg(ins, 0, "data")?, harg(ins, 1, "indices")?, harg(ins, 2, "updates")?);
    let (_, slice) = nd_layout(&d.shape, &ix.shape, 0)?;
    let rows = host_nd_rows(&d.shape, ix, 0)?;
    let idx: Vec<usize> = rows.iter().flat_map(|&r| (0..slice).map(move |j| r * slice + j)).collect();
    Ok(vec![host_scatter(d, &idx, u, scatter_reduce(n)?)?])
}

/// OneHot's (depth, off, on) and output axis.
// BOUNDS-FN: values.len() == 2 is checked.
fn onehot_params(n: &OnnxNode, rank: usize, depth: f64, values: &[f64]) -> crate::Result<(usize, f64, f64, usize)> {
    ensure!(depth >= 1.0, "OneHot depth {depth} must be at least 1");
    ensure!(values.len() == 2, "OneHot values must be [off, on]");
    let a = n.int("axis", -1);
    let a = if a < 0 { a + rank as i64 + 1 } else { a };
    ensure!((0..=rank as i64).contains(&a), "OneHot axis {} is out of range", n.int("axis", -1));
    Ok((depth as usize, values[0], values[1], a as usize))
}

// BOUNDS-FN: a <= rank (onehot_params), and rs has rank + 1 entries.
fn lower_onehot(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let iv = arg(ins, 0, "indices")?.clone();
    let depth = p.value_of(arg(ins, 1, "depth")?, "depth")?.scalar("depth")?;
    let vv = arg(ins, 2, "values")?.clone();
    let values = p.floats_of(&vv, "values")?;
    let (depth, off, on, a) = onehot_params(n, iv.shape().len(), depth, &values)?;
    let idx = p.dev(&iv)?;
    let mut s1 = idx.shape.clone();
    s1.insert(a, 1);
    let b = p.eb();
    let x = reshape(b, &idx, s1.clone())?;
    // Negative indices count from the end: i + (i < 0) * depth.
    let zero = Dev { t: b.data([1, 1, 1, 1], vec![0.0])?, shape: vec![], elem: Elem::F32 };
    let lt = binary(b, BinFn::Less, &x, &zero, Elem::F32)?;
    let w = unary(b, Op::Scale { s: f64::from(depth as f32) }, &lt, Elem::F32)?;
    let x = binary(b, BinFn::Add, &x, &w, Elem::F32)?;
    let mut rs = vec![1usize; s1.len()];
    rs[a] = depth;
    let r = Dev { t: b.data(ne_of(&rs), (0..depth).map(|j| j as f32).collect())?, shape: rs, elem: Elem::F32 };
    let eq = binary(b, BinFn::Equal, &x, &r, Elem::F32)?;
    one(unary(b, Op::Map { f: MapFn::Affine, a: (on - off) as f32, b: off as f32 }, &eq, vv.elem())?)
}

// BOUNDS-FN: a <= rank (onehot_params); out and c have rank + 1 entries, the other rank
// coordinates of c zip with ist into a flat index below iv.len().
fn fold_onehot(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let ix = harg(ins, 0, "indices")?;
    let vals = harg(ins, 2, "values")?;
    let (depth, off, on, a) = onehot_params(n, ix.rank(), harg(ins, 1, "depth")?.scalar("depth")?, &vals.f64s())?;
    let mut out = ix.shape.clone();
    out.insert(a, depth);
    let iv = ix.f64s();
    let ist = strides(&ix.shape);
    let v: Vec<f64> = index_map(&out, |c| {
        let flat: usize = c.iter().enumerate().filter(|(i, _)| *i != a).map(|(_, &x)| x).zip(&ist).map(|(x, s)| x * s).sum();
        let mut i = iv[flat].trunc() as i64;
        if i < 0 {
            i += depth as i64;
        }
        (i == c[a] as i64) as usize
    })?
    .into_iter()
    .map(|h| if h == 1 { on } else { off })
    .collect();
    let _ = hopt(ins, 3);
    Ok(vec![HTensor::from_f64(vals.elem, out, v)?])
}

