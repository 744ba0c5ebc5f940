//! Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
//! and the quantized operators (QLinearMatMul, QLinearConv, QLinearAdd,
//! QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
//! QLinearGlobalAveragePool, MatMulInteger, ConvInteger), each computed as
//! dequantize, the float operator, quantize. Integer values are exact in
//! f32 (every quantized type fits in 24 bits); constant quantized weights
//! are dequantized once on the host.

use super::common::{arg, axis, derived_key, harg, hopt, opt, Fold, Lower};
use crate::models::onnx::dev::{binary, concat, reduce, reshape, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{broadcast_index, fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Const, Dev, Taint, Val};
use crate::op::{BinFn, MapFn, Op, RowFn, UnaryOp};
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "QuantizeLinear" => (Some(lower_quantize), Some(fold_quantize)),
        "DequantizeLinear" => (Some(lower_dequantize), Some(fold_dequantize)),
        "DynamicQuantizeLinear" => (Some(lower_dynamic), None),
        "QLinearMatMul" | "QLinearConv" | "QLinearAdd" | "QLinearMul" | "QLinearSigmoid" | "QLinearLeakyRelu"
        | "QLinearConcat" | "QLinearGlobalAveragePool" | "MatMulInteger" | "ConvInteger" => (Some(lower_qlinear), None),
        _ => return None,
    })
}

/// The shape a per-axis parameter (1-D, along `axis` of a rank-`r` tensor)
/// broadcasts with; a scalar stays a scalar.
/// A parameter of several values along an axis the input does not have (a
/// per-axis zero point beside a per-tensor scale, on a scalar input) is an
/// error.
fn param_shape(len: usize, scalar: bool, a: usize, r: usize) -> crate::Result<Vec<usize>> {
    if scalar {
        return Ok(Vec::new());
    }
    ensure!(a < r, "a scale or zero point of {len} values is per axis, but the input has rank {r}: give one value, or an input with axis {a}");
    let mut s = vec![1usize; r];
    // BOUNDS: a < r is checked just above.
    s[a] = len;
    Ok(s)
}

/// The axis of a per-axis scale (unused, 0, for a per-tensor one).
fn param_axis(a: i64, rank: usize, scale: &Val) -> crate::Result<usize> {
    if scale.shape().iter().product::<usize>() == 1 {
        return Ok(0);
    }
    axis(a, rank)
}

/// Per element of `x`, the index of its parameter in `t` (a scale or zero
/// point): broadcast per tensor or per axis, or with `block` > 0 one per
/// `block` consecutive elements along axis `a` (`t` then has x's shape
/// with that axis divided by `block`, rounded up).
// BOUNDS-FN: a < r is checked; t.shape == want is checked, so t holds numel(want)
// values; q, st and want have r entries and q[d] / block < want[d] for q[d] < x[d].
fn param_index(x: &[usize], t: &HTensor, a: usize, block: usize) -> crate::Result<Vec<usize>> {
    let r = x.len();
    if block == 0 {
        return broadcast_index(x, &param_shape(t.numel(), t.numel() == 1, a, r)?);
    }
    ensure!(a < r, "internal: a blocked parameter along axis {a} of an input of rank {r}");
    let mut want = x.to_vec();
    want[a] = x[a].div_ceil(block);
    ensure!(
        t.shape == want,
        "a blocked scale or zero point for an input of shape {} and block_size {block} needs shape {}, not {}",
        fmt_shape(x),
        fmt_shape(&want),
        fmt_shape(&t.shape)
    );
    let st = crate::models::onnx::host::strides(&want);
    crate::models::onnx::host::index_map(x, |q| (0..r).map(|d| if d == a { q[d] / block } else { q[d] } * st[d]).sum())
}

/// The host inputs of a node (all its inputs' values; on a run for
/// computed ones) and their highest taint.
fn host_inputs(p: &mut Planner, ins: &[Option<Val>], what: &str) -> crate::Result<(Vec<Option<Arc<HTensor>>>, Taint)> {
    let mut hs = Vec::with_capacity(ins.len());
    let mut taint = Taint::Static;
    for v in ins {
        hs.push(match v {
            Some(v) => {
                taint = taint.max(Planner::taint_of(v));
                Some(p.value_of(v, what)?)
            }
            None => None,
        });
    }
    Ok((hs, taint))
}

fn param(p: &mut Planner, v: &Val, a: usize, r: usize) -> crate::Result<Dev> {
    let scalar = v.shape().iter().product::<usize>() == 1;
    let len = v.shape().iter().product();
    let d = p.dev(v)?;
    reshape(p.eb(), &d, param_shape(len, scalar, a, r)?)
}

/// (x - zero_point) * scale, on the host for constants.
fn dequant(p: &mut Planner, x: &Val, s: &Val, zp: Option<&Val>, a: i64) -> crate::Result<Val> {
    let r = x.shape().len();
    let a = param_axis(a, r, s)?;
    if let (Val::C(xc), Val::C(sc)) = (x, s) {
        if zp.is_none_or(|z| z.konst().is_some()) {
            let zh = match zp {
                // INVARIANT: zp is None or constant (checked just above).
                Some(z) => Some(z.konst().expect("constant").value()?),
                None => None,
            };
            let t = host_dequant(&*xc.value()?, &*sc.value()?, zh.as_deref(), a, 0)?;
            let refs: Vec<&Val> = std::iter::once(x).chain(std::iter::once(s)).chain(zp).collect();
            let key = derived_key("dq", &refs).map(|k| format!("{k}/{a}"));
            let taint = refs.iter().map(|v| Planner::taint_of(v)).max().unwrap_or(Taint::Static);
            return Ok(Val::C(Arc::new(Const::host(t, taint, key))));
        }
    }
    let xd = p.dev(x)?;
    let elem = Elem::F32;
    let mut y = xd.clone();
    if let Some(z) = zp {
        let zd = param(p, z, a, r)?;
        y = binary(p.eb(), BinFn::Sub, &y, &zd, elem)?;
    }
    let sd = param(p, s, a, r)?;
    Ok(Val::D(binary(p.eb(), BinFn::Mul, &y, &sd, elem)?))
}

// BOUNDS-FN: si, zi (from broadcast_index or index_map over x's shape) have xv.len()
// entries, each an index into s or zp (of the shape they were checked against).
fn host_dequant(x: &HTensor, s: &HTensor, zp: Option<&HTensor>, a: usize, block: usize) -> crate::Result<HTensor> {
    let si = param_index(&x.shape, s, a, block)?;
    let xv = x.f64s();
    let sv = s.f64s();
    let zv = zp.map(|z| z.f64s().to_vec());
    let zi = match zp {
        Some(z) => Some(param_index(&x.shape, z, a, block)?),
        None => None,
    };
    let v: Vec<f64> = (0..xv.len())
        .map(|i| {
            let z = match (&zv, &zi) {
                (Some(zv), Some(zi)) => zv[zi[i]],
                _ => 0.0,
            };
            (xv[i] - z) * sv[si[i]]
        })
        .collect();
    HTensor::from_f64(Elem::F32, x.shape.clone(), v)
}

/// The type QuantizeLinear makes: output_dtype, else the zero point's,
/// else uint8.
fn quant_elem(n: &OnnxNode, zp: Option<Elem>) -> crate::Result<Elem> {
    if n.has("output_dtype") && n.int("output_dtype", 0) != 0 {
        return Elem::from_code(n.int("output_dtype", 0) as i32);
    }
    Ok(zp.unwrap_or(Elem::U8))
}

/// saturate(round(y / scale) + zero_point) for integer `out`; for a float
/// zero point (a float output type) y / scale + zero_point.
fn quant(p: &mut Planner, y: &Dev, s: &Val, zp: Option<&Val>, a: i64, out: Elem) -> crate::Result<Dev> {
    let r = y.shape.len();
    let a = param_axis(a, r, s)?;
    let sd = param(p, s, a, r)?;
    let mut q = binary(p.eb(), BinFn::Div, y, &sd, Elem::F32)?;
    if !out.is_float() {
        q = unary(p.eb(), Op::Map { f: MapFn::Round, a: 0.0, b: 0.0 }, &q, Elem::F32)?;
    }
    if let Some(z) = zp {
        let zd = param(p, z, a, r)?;
        q = binary(p.eb(), BinFn::Add, &q, &zd, Elem::F32)?;
    }
    if let Some((lo, hi)) = out.int_range() {
        q = unary(p.eb(), Op::Clamp { min: f64::from(lo as f32), max: f64::from(hi as f32) }, &q, out)?;
    }
    Ok(Dev { elem: out, ..q })
}

fn lower_dequantize(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    if n.int("block_size", 0) > 0 {
        // Blocked scales (weights, mostly constants): on the host.
        let (hs, taint) = host_inputs(p, ins, "input of a blocked DequantizeLinear")?;
        let y = fold_dequantize(n, &hs, p.opset)?.remove(0);
        return Ok(vec![Val::c(y, taint)]);
    }
    let (x, s) = (arg(ins, 0, "x")?.clone(), arg(ins, 1, "x_scale")?.clone());
    Ok(vec![dequant(p, &x, &s, opt(ins, 2), n.int("axis", 1))?])
}

fn fold_dequantize(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "x")?;
    let s = harg(ins, 1, "x_scale")?;
    let block = n.int("block_size", 0).max(0) as usize;
    let a = if s.numel() == 1 && block == 0 { 0 } else { axis(n.int("axis", 1), x.rank())? };
    Ok(vec![host_dequant(x, s, hopt(ins, 2), a, block)?])
}

fn lower_quantize(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let xv = arg(ins, 0, "x")?;
    let s = arg(ins, 1, "y_scale")?.clone();
    let zp = opt(ins, 2).cloned();
    let out = quant_elem(n, zp.as_ref().map(|z| z.elem()))?;
    if (out.is_narrow() && out.is_float()) || n.int("block_size", 0) > 0 {
        // Rounding to float8 or float4, and blocked scales: on the host.
        let (hs, taint) = host_inputs(p, ins, "input of a QuantizeLinear")?;
        let y = fold_quantize(n, &hs, p.opset)?.remove(0);
        return Ok(vec![Val::c(y, taint)]);
    }
    let x = p.dev(xv)?;
    Ok(vec![Val::D(quant(p, &x, &s, zp.as_ref(), n.int("axis", 1), out)?)])
}

// BOUNDS-FN: si, zi (from broadcast_index or index_map over x's shape) have xv.len()
// entries, each an index into s or zp (of the shape they were checked against).
fn fold_quantize(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "x")?;
    let s = harg(ins, 1, "y_scale")?;
    let zp = hopt(ins, 2);
    let out = quant_elem(n, zp.map(|z| z.elem))?;
    let block = n.int("block_size", 0).max(0) as usize;
    let a = if s.numel() == 1 && block == 0 { 0 } else { axis(n.int("axis", 1), x.rank())? };
    let si = param_index(&x.shape, s, a, block)?;
    let zi = match zp {
        Some(z) => Some(param_index(&x.shape, z, a, block)?),
        None => None,
    };
    let (xv, sv) = (x.f64s(), s.f64s());
    let zv = zp.map(|z| z.f64s().to_vec());
    let saturate = n.int("saturate", 1) != 0;
    let v: Vec<f64> = (0..xv.len())
        .map(|i| {
            let q = xv[i] / sv[si[i]];
            let q = if out.is_float() { q } else { q.round_ties_even() };
            let q = q + zv.as_ref().zip(zi.as_ref()).map_or(0.0, |(z, zi)| z[zi[i]]);
            match out.int_range() {
                Some((lo, hi)) => q.clamp(lo as f64, hi as f64),
                None if out.is_narrow() => crate::models::onnx::host::round_to_sat(out, q, saturate),
                None => q,
            }
        })
        .collect();
    Ok(vec![HTensor::from_f64(out, x.shape.clone(), v)?])
}

fn lower_dynamic(p: &mut Planner, _n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "x")?)?;
    let all: Vec<usize> = (0..x.shape.len()).collect();
    let b = p.eb();
    let zero = Dev { t: b.data([1, 1, 1, 1], vec![0.0])?, shape: vec![], elem: Elem::F32 };
    let (mx, mn) = if all.is_empty() {
        (x.clone(), x.clone())
    } else {
        (reduce(b, RowFn::Max, &x, &all, false)?, reduce(b, RowFn::Min, &x, &all, false)?)
    };
    let mx = binary(b, BinFn::Max, &mx, &zero, Elem::F32)?;
    let mn = binary(b, BinFn::Min, &mn, &zero, Elem::F32)?;
    let range = binary(b, BinFn::Sub, &mx, &mn, Elem::F32)?;
    let scale = unary(b, Op::Scale { s: 1.0 / 255.0 }, &range, Elem::F32)?;
    // zero point: saturate(round(-min / scale))
    let zq = binary(b, BinFn::Div, &mn, &scale, Elem::F32)?;
    let zq = unary(b, Op::Unary(UnaryOp::Neg), &zq, Elem::F32)?;
    let zp = unary(b, Op::Map { f: MapFn::RoundClamp, a: 0.0, b: 255.0 }, &zq, Elem::U8)?;
    let q = binary(b, BinFn::Div, &x, &scale, Elem::F32)?;
    let q = unary(b, Op::Map { f: MapFn::Round, a: 0.0, b: 0.0 }, &q, Elem::F32)?;
    let q = binary(b, BinFn::Add, &q, &zp, Elem::F32)?;
    let y = unary(b, Op::Clamp { min: 0.0, max: 255.0 }, &q, Elem::U8)?;
    Ok(vec![Val::D(y), Val::D(scale), Val::D(zp)])
}

/// A node of operator `op` with `n`'s attributes (the float operator a
/// quantized one computes).
fn as_op(n: &OnnxNode, op: &str) -> OnnxNode {
    let mut m = n.clone();
    m.op = op.to_string();
    m
}

// BOUNDS-FN: QLinearConcat: vals.len() >= 5 is checked, so parts has at least one
// entry.
fn lower_qlinear(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let a = |i: usize, w: &str| arg(ins, i, w).cloned();
    let o = |i: usize| opt(ins, i).cloned();
    let (y, ys, yz): (Val, Val, Option<Val>) = match n.op.as_str() {
        "QLinearMatMul" => {
            let x = dequant(p, &a(0, "a")?, &a(1, "a_scale")?, o(2).as_ref(), -1)?;
            let w = dequant(p, &a(3, "b")?, &a(4, "b_scale")?, o(5).as_ref(), -1)?;
            (Val::D(super::matmul::matmul(p, &x, &w)?), a(6, "y_scale")?, o(7))
        }
        "QLinearConv" => {
            let x = dequant(p, &a(0, "x")?, &a(1, "x_scale")?, o(2).as_ref(), 1)?;
            let w = dequant(p, &a(3, "w")?, &a(4, "w_scale")?, o(5).as_ref(), 0)?;
            // Bias: int32 in units of x_scale * w_scale.
            let bias = match o(8) {
                Some(bv) => {
                    let xs = a(1, "x_scale")?;
                    let ws = a(4, "w_scale")?;
                    let prod = mul_vals(p, &xs, &ws)?;
                    Some(mul_vals(p, &bv, &prod)?)
                }
                None => None,
            };
            let conv = super::conv::lower_conv(p, &as_op(n, "Conv"), &[Some(x), Some(w), bias])?;
            let conv = conv.into_iter().next().ok_or_else(|| anyhow::anyhow!("internal: Conv gave no output"))?;
            (conv, a(6, "y_scale")?, o(7))
        }
        "QLinearAdd" | "QLinearMul" => {
            let x = dequant(p, &a(0, "A")?, &a(1, "A_scale")?, o(2).as_ref(), 1)?;
            let z = dequant(p, &a(3, "B")?, &a(4, "B_scale")?, o(5).as_ref(), 1)?;
            let (xd, zd) = (p.dev(&x)?, p.dev(&z)?);
            let f = if n.op == "QLinearAdd" { BinFn::Add } else { BinFn::Mul };
            (Val::D(binary(p.eb(), f, &xd, &zd, Elem::F32)?), a(6, "C_scale")?, o(7))
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" => {
            let x = dequant(p, &a(0, "X")?, &a(1, "X_scale")?, o(2).as_ref(), 1)?;
            let xd = p.dev(&x)?;
            let op = if n.op == "QLinearSigmoid" { Op::Unary(UnaryOp::Sigmoid) } else { Op::LeakyRelu { slope: n.float("alpha", 0.01) } };
            (Val::D(unary(p.eb(), op, &xd, Elem::F32)?), a(3, "Y_scale")?, o(4))
        }
        "QLinearGlobalAveragePool" => {
            ensure!(n.int("channels_last", 0) == 0, "QLinearGlobalAveragePool with channels_last is not supported");
            let x = dequant(p, &a(0, "X")?, &a(1, "x_scale")?, o(2).as_ref(), 1)?;
            let xd = p.dev(&x)?;
            let ax: Vec<usize> = (2..xd.shape.len()).collect();
            (Val::D(reduce(p.eb(), RowFn::Mean, &xd, &ax, true)?), a(3, "y_scale")?, o(4))
        }
        "QLinearConcat" => {
            let vals: Vec<&Option<Val>> = ins.iter().collect();
            ensure!(vals.len() >= 5 && (vals.len() - 2) % 3 == 0, "QLinearConcat needs y_scale, y_zero_point and (x, scale, zero_point) triples");
            let mut parts = Vec::new();
            for k in 0..(vals.len() - 2) / 3 {
                let i = 2 + 3 * k;
                let x = dequant(p, &a(i, "x")?, &a(i + 1, "x_scale")?, o(i + 2).as_ref(), 1)?;
                parts.push(p.dev(&x)?);
            }
            let ax = axis(n.int("axis", 0), parts[0].shape.len())?;
            (Val::D(concat(p.eb(), &parts, ax)?), a(0, "y_scale")?, o(1))
        }
        "MatMulInteger" | "ConvInteger" => {
            let (x, w) = (a(0, "A")?, a(1, "B")?);
            let sub = |p: &mut Planner, v: &Val, z: Option<Val>, ax: i64| -> crate::Result<Val> {
                match z {
                    None => Ok(v.clone()),
                    Some(z) => {
                        let one = Val::c(HTensor::scalar_f(Elem::F32, 1.0), Taint::Static);
                        dequant(p, v, &one, Some(&z), ax)
                    }
                }
            };
            let conv = n.op == "ConvInteger";
            let x = sub(p, &x, o(2), if conv { 1 } else { -1 })?;
            let w = sub(p, &w, o(3), if conv { 0 } else { -1 })?;
            let y = if conv {
                let y = super::conv::lower_conv(p, &as_op(n, "Conv"), &[Some(x), Some(w)])?;
                y.into_iter().next().ok_or_else(|| anyhow::anyhow!("internal: Conv gave no output"))?
            } else {
                Val::D(super::matmul::matmul(p, &x, &w)?)
            };
            let yd = p.dev(&y)?;
            return Ok(vec![Val::D(Dev { elem: Elem::I32, ..yd })]);
        }
        other => bail!("internal: {other} is not a quantized operator"),
    };
    let out = yz.as_ref().map(|z| z.elem()).unwrap_or(Elem::U8);
    let yd = p.dev(&y)?;
    Ok(vec![Val::D(quant(p, &yd, &ys, yz.as_ref(), 1, out)?)])
}

/// a * b (broadcast), on the host for constants.
// BOUNDS-FN: ix and iy index x and y (broadcast_index of the shapes they broadcast
// from).
fn mul_vals(p: &mut Planner, a: &Val, b: &Val) -> crate::Result<Val> {
    if let (Val::C(x), Val::C(y)) = (a, b) {
        let (x, y) = (x.value()?, y.value()?);
        let shape = crate::models::onnx::host::broadcast_shape(&x.shape, &y.shape)?;
        let (ix, iy) = (broadcast_index(&shape, &x.shape)?, broadcast_index(&shape, &y.shape)?);
        let (xv, yv) = (x.f64s(), y.f64s());
        let v = ix.iter().zip(&iy).map(|(&i, &j)| xv[i] * yv[j]).collect();
        let key = derived_key("mul", &[a, b]);
        let taint = Planner::taint_of(a).max(Planner::taint_of(b));
        return Ok(Val::C(Arc::new(Const::host(HTensor::from_f64(Elem::F32, shape, v)?, taint, key))));
    }
    let (x, y) = (p.dev(a)?, p.dev(b)?);
    Ok(Val::D(binary(p.eb(), BinFn::Mul, &x, &y, Elem::F32)?))
}
