//! Reductions and row-wise operators: ReduceSum / Mean / Max / Min / Prod /
//! L1 / L2 / LogSum / LogSumExp / SumSquare, ArgMax / ArgMin, Softmax,
//! LogSoftmax, Hardmax and CumSum. The engine reduces rows, so the reduced
//! axes are brought innermost first (a transpose only when they are not).

use super::common::{arg, axes, axis, harg, hopt, one, opt, Fold, Lower};
use crate::models::onnx::dev::{self, from_rows, reduce, rows_along};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{strides, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{Op, RowFn, ScanFn};
use anyhow::ensure;
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    if row_fn(op).is_some() {
        return Some((Some(lower_reduce), Some(fold_reduce)));
    }
    Some(match op {
        "ArgMax" | "ArgMin" => (Some(lower_arg), Some(fold_arg)),
        "Softmax" | "LogSoftmax" | "Hardmax" => (Some(lower_softmax), Some(fold_softmax)),
        "CumSum" | "CumProd" => (Some(lower_cumsum), Some(fold_cumsum)),
        _ => return None,
    })
}

fn row_fn(op: &str) -> Option<RowFn> {
    Some(match op {
        "ReduceSum" => RowFn::Sum,
        "ReduceMean" => RowFn::Mean,
        "ReduceMax" => RowFn::Max,
        "ReduceMin" => RowFn::Min,
        "ReduceProd" => RowFn::Prod,
        "ReduceL1" => RowFn::L1,
        "ReduceL2" => RowFn::L2,
        "ReduceLogSum" => RowFn::LogSum,
        "ReduceLogSumExp" => RowFn::LogSumExp,
        "ReduceSumSquare" => RowFn::SumSq,
        _ => return None,
    })
}

/// The reduced axes: the `axes` input (opset 13 ReduceSum, 18 the others)
/// or attribute; none means all, unless `noop_with_empty_axes`.
fn reduce_axes(n: &OnnxNode, given: Option<Vec<i64>>, rank: usize) -> crate::Result<Option<Vec<usize>>> {
    let list = given.or_else(|| n.ints("axes"));
    match list {
        Some(l) if !l.is_empty() => Ok(Some(axes(&l, rank)?)),
        _ if n.int("noop_with_empty_axes", 0) != 0 => Ok(None),
        _ => Ok(Some((0..rank).collect())),
    }
}

fn lower_reduce(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    // INVARIANT: registered only for operators row_fn() knows.
    let f = row_fn(&n.op).expect("a reduction");
    let x = p.dev(arg(ins, 0, "data")?)?;
    let given = match opt(ins, 1) {
        Some(v) => Some(p.ints_of(v, "axes")?),
        None => None,
    };
    let keep = n.int("keepdims", 1) != 0;
    match reduce_axes(n, given, x.shape.len())? {
        None => one(x),
        Some(ax) if ax.is_empty() => one(x),
        Some(ax) => {
            if x.shape.iter().product::<usize>() == 0 {
                return host_result(p, n, &x, &ax, keep);
            }
            one(reduce(p.eb(), f, &x, &ax, keep)?)
        }
    }
}

/// A reduction of an empty tensor: its identity, computed on the host.
fn host_result(_p: &mut Planner, n: &OnnxNode, x: &Dev, ax: &[usize], keep: bool) -> crate::Result<Vec<Val>> {
    let empty = HTensor::from_f64(x.elem, x.shape.clone(), Vec::new())?;
    // INVARIANT: registered only for operators row_fn() knows.
    let t = host_reduce(row_fn(&n.op).expect("a reduction"), &empty, ax, keep)?;
    Ok(vec![Val::c(t, crate::models::onnx::val::Taint::Shape)])
}

/// Host reduction of `x` over `ax` (f64).
// BOUNDS-FN: ax and kept hold axes below r (axes() normalises them), st has r entries
// and kst kept.len(); each kept coordinate is below its size, so o < n_out =
// groups.len() (an empty x, whose sizes or strides may be 0, runs no iteration).
pub fn host_reduce(f: RowFn, x: &HTensor, ax: &[usize], keep: bool) -> crate::Result<HTensor> {
    let r = x.rank();
    let mut out_shape = Vec::new();
    for i in 0..r {
        if !ax.contains(&i) {
            out_shape.push(x.shape[i]);
        } else if keep {
            out_shape.push(1);
        }
    }
    let kept: Vec<usize> = (0..r).filter(|i| !ax.contains(i)).collect();
    let n_out: usize = kept.iter().map(|&i| x.shape[i]).product();
    let st = strides(&x.shape);
    let v = x.f64s();
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); n_out];
    let kst = strides(&kept.iter().map(|&i| x.shape[i]).collect::<Vec<_>>());
    for (flat, &val) in v.iter().enumerate() {
        let mut o = 0;
        for (j, &i) in kept.iter().enumerate() {
            o += ((flat / st[i]) % x.shape[i]) * kst[j];
        }
        groups[o].push(val);
    }
    let res: Vec<f64> = groups
        .iter()
        .map(|g| {
            let s: f64 = g.iter().sum();
            match f {
                RowFn::Sum => s,
                RowFn::Mean => s / g.len() as f64,
                RowFn::Max => g.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                RowFn::Min => g.iter().copied().fold(f64::INFINITY, f64::min),
                RowFn::Prod => g.iter().product(),
                RowFn::SumSq => g.iter().map(|t| t * t).sum(),
                RowFn::L1 => g.iter().map(|t| t.abs()).sum(),
                RowFn::L2 => g.iter().map(|t| t * t).sum::<f64>().sqrt(),
                RowFn::LogSum => s.ln(),
                RowFn::LogSumExp => {
                    let m = g.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    if !m.is_finite() {
                        m
                    } else {
                        m + g.iter().map(|t| (t - m).exp()).sum::<f64>().ln()
                    }
                }
                _ => {
                    let row: Vec<f32> = g.iter().map(|&t| t as f32).collect();
                    f.apply(&row) as f64
                }
            }
        })
        .collect();
    if x.elem == Elem::Bool {
        let v = res.iter().map(|&t| if t.is_finite() { (t != 0.0) as i64 } else { (t > 0.0) as i64 }).collect();
        return HTensor::from_i64(Elem::Bool, out_shape, v);
    }
    if matches!(f, RowFn::ArgMax | RowFn::ArgMin | RowFn::ArgMaxLast | RowFn::ArgMinLast) {
        return HTensor::from_i64(Elem::I64, out_shape, res.iter().map(|&t| t as i64).collect());
    }
    HTensor::from_f64(x.elem, out_shape, res)
}

fn fold_reduce(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    // INVARIANT: registered only for operators row_fn() knows.
    let f = row_fn(&n.op).expect("a reduction");
    let x = harg(ins, 0, "data")?;
    let given = hopt(ins, 1).map(|t| t.i64s().to_vec());
    let keep = n.int("keepdims", 1) != 0;
    match reduce_axes(n, given, x.rank())? {
        None => Ok(vec![x.clone()]),
        Some(ax) if ax.is_empty() => Ok(vec![x.clone()]),
        Some(ax) => Ok(vec![host_reduce(f, x, &ax, keep)?]),
    }
}

fn arg_fn(n: &OnnxNode) -> RowFn {
    let last = n.int("select_last_index", 0) != 0;
    match (n.op.as_str(), last) {
        ("ArgMax", false) => RowFn::ArgMax,
        ("ArgMax", true) => RowFn::ArgMaxLast,
        ("ArgMin", false) => RowFn::ArgMin,
        _ => RowFn::ArgMinLast,
    }
}

fn lower_arg(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "data")?)?;
    let a = axis(n.int("axis", 0), x.shape.len())?;
    one(reduce(p.eb(), arg_fn(n), &x, &[a], n.int("keepdims", 1) != 0)?)
}

fn fold_arg(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "data")?;
    let a = axis(n.int("axis", 0), x.rank())?;
    Ok(vec![host_reduce(arg_fn(n), x, &[a], n.int("keepdims", 1) != 0)?])
}

/// Softmax-family axis handling: before opset 13 the input is flattened to
/// 2-D at `axis` (default 1); from 13 it works along `axis` (default -1).
fn softmax_layout(n: &OnnxNode, rank: usize, opset: i64) -> crate::Result<(bool, usize)> {
    let flatten = opset < 13;
    let a = n.int("axis", if flatten { 1 } else { -1 });
    let a = if rank == 0 { 0 } else { axis(a, rank)? };
    Ok((flatten, a))
}

// BOUNDS-FN: a < rank, or a = 0 on a rank-0 input (empty ranges of its empty shape).
fn lower_softmax(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let (flatten, a) = softmax_layout(n, x.shape.len(), p.opset)?;
    let op = match n.op.as_str() {
        "Softmax" => Op::SoftMax { scale: 1.0, max_bias: 0.0 },
        "LogSoftmax" => Op::ScanRows { f: ScanFn::LogSoftmax },
        _ => Op::ScanRows { f: ScanFn::Hardmax },
    };
    // A scalar is one row of one value.
    if flatten || x.shape.is_empty() {
        let rows: usize = x.shape[..a].iter().product();
        let cols: usize = x.shape[a..].iter().product();
        let t = dev::shaped(p.eb(), &x, [cols, rows, 1, 1])?;
        let t = p.b.op(op, &[t])?;
        let t = p.b.reshape(&t, dev::ne_of(&x.shape))?;
        return one(Dev { t, shape: x.shape.clone(), elem: x.elem });
    }
    let (rows, perm) = rows_along(p.eb(), &x, a)?;
    let t = p.b.op(op, &[rows])?;
    one(from_rows(p.eb(), t, &x, perm, x.elem)?)
}

// BOUNDS-FN: a < rank when the rank is not 0 (else a = 0 and only the ranges shape[0..]
// are taken); every row's base + i * stride is below outer * stride * len = v.len() =
// out.len() (r / stride < outer, i < len), and idx[0] exists since len > 0 when rows >
// 0.
fn fold_softmax(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let (flatten, a) = softmax_layout(n, x.rank(), opset)?;
    let v = x.f64s();
    let mut out = v.to_vec();
    let st = strides(&x.shape);
    let (len, stride) = if flatten || x.rank() == 0 { (x.shape[a..].iter().product::<usize>(), 1) } else { (x.shape[a], st[a]) };
    ensure!(len > 0 || v.is_empty(), "softmax over an empty axis");
    let rows = if len == 0 { 0 } else { v.len() / len };
    for r in 0..rows {
        // First element of row r: the coordinate along the axis is 0.
        let base = if flatten { r * len } else { (r / stride) * stride * len + r % stride };
        let idx: Vec<usize> = (0..len).map(|i| base + i * stride).collect();
        let m = idx.iter().map(|&i| v[i]).fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = idx.iter().map(|&i| (v[i] - m).exp()).sum();
        let best = idx.iter().copied().fold(idx[0], |b, i| if v[i] > v[b] { i } else { b });
        for &i in &idx {
            out[i] = match n.op.as_str() {
                "Softmax" => (v[i] - m).exp() / s,
                "LogSoftmax" => v[i] - m - s.ln(),
                _ => (i == best) as i64 as f64,
            };
        }
    }
    Ok(vec![HTensor::from_f64(x.elem, x.shape.clone(), out)?])
}

fn scan_fn(n: &OnnxNode) -> ScanFn {
    let (exclusive, reverse) = (n.int("exclusive", 0) != 0, n.int("reverse", 0) != 0);
    if n.op == "CumProd" {
        ScanFn::CumProd { exclusive, reverse }
    } else {
        ScanFn::CumSum { exclusive, reverse }
    }
}

fn lower_cumsum(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "x")?)?;
    let a = p.value_of(arg(ins, 1, "axis")?, "axis")?.scalar("axis")? as i64;
    let a = axis(a, x.shape.len())?;
    let (rows, perm) = rows_along(p.eb(), &x, a)?;
    let t = p.b.op(Op::ScanRows { f: scan_fn(n) }, &[rows])?;
    one(from_rows(p.eb(), t, &x, perm, x.elem)?)
}

// BOUNDS-FN: a < rank (normalised); base + i * st[a] < v.len() = out.len() as in
// fold_softmax (r / st[a] < outer, i < len; an empty x runs no row).
fn fold_cumsum(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "x")?;
    let a = axis(harg(ins, 1, "axis")?.scalar("axis")? as i64, x.rank())?;
    let f = scan_fn(n);
    let (exclusive, reverse) = f.flags();
    let prod = matches!(f, ScanFn::CumProd { .. });
    let st = strides(&x.shape);
    let len = x.shape[a];
    let v = x.f64s();
    let mut out = v.to_vec();
    let rows = if len == 0 { 0 } else { v.len() / len };
    for r in 0..rows {
        let base = (r / st[a]) * st[a] * len + r % st[a];
        let mut acc = if prod { 1.0 } else { 0.0 };
        for k in 0..len {
            let i = if reverse { len - 1 - k } else { k };
            let e = base + i * st[a];
            if exclusive {
                out[e] = acc;
            }
            acc = if prod { acc * v[e] } else { acc + v[e] };
            if !exclusive {
                out[e] = acc;
            }
        }
    }
    Ok(vec![HTensor::from_f64(x.elem, x.shape.clone(), out)?])
}
