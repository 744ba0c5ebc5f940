//! Normalizations: BatchNormalization (folded into a scale and a shift
//! when its statistics are constant; in training mode normalized by the
//! batch's statistics, with the updated running ones), Instance-, Layer-, Group- and
//! RMSNormalization on the engine's row norms, LpNormalization,
//! MeanVarianceNormalization and LRN.

use super::common::{arg, axis, derived_key, one, opt, Fold, Lower};
use crate::models::onnx::dev::{self, binary, reduce, reshape, unary};
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, MapFn, Op, PadMode, PoolOp, RowFn};
use anyhow::{bail, ensure};

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "BatchNormalization" => (Some(lower_batchnorm), None),
        "InstanceNormalization" | "GroupNormalization" => (Some(lower_groupnorm), None),
        "LayerNormalization" | "RMSNormalization" | "SimplifiedLayerNormalization" => (Some(lower_layernorm), None),
        "LpNormalization" => (Some(lower_lpnorm), None),
        "MeanVarianceNormalization" => (Some(lower_mvn), None),
        "LRN" => (Some(lower_lrn), None),
        _ => return None,
    })
}

/// `v` (a per-channel vector) shaped to broadcast over `x` [N, C, ...].
// BOUNDS-FN: shape has rank.max(2) >= 2 entries.
fn per_channel(p: &mut Planner, v: &Val, rank: usize) -> crate::Result<Dev> {
    let d = p.dev(v)?;
    let c = d.shape.iter().product();
    let mut shape = vec![1usize; rank.max(2)];
    shape[1] = c;
    reshape(p.eb(), &d, shape)
}

// BOUNDS-FN: shape has rank.max(2) >= 2 entries and index 0 or 1; s and t have c
// entries and i < c.
fn lower_batchnorm(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    let (sc, bi, mean, var) = (arg(ins, 1, "scale")?, arg(ins, 2, "B")?, arg(ins, 3, "mean")?, arg(ins, 4, "var")?);
    ensure!(x.shape.len() >= 2 || x.shape.len() == 1, "BatchNormalization needs an input [N, C, ...]");
    let eps = n.float("epsilon", 1e-5) as f64;
    let rank = x.shape.len();
    let extra = n.outputs.iter().skip(1).any(|o| !o.is_empty());
    if n.int("training_mode", 0) != 0 || (p.opset < 14 && extra) {
        return batchnorm_training(p, n, &x, [sc, bi, mean, var], eps);
    }
    if let (Val::C(a), Val::C(b), Val::C(m), Val::C(v)) = (sc, bi, mean, var) {
        // y = x * s + t with s = scale / sqrt(var + eps), t = B - mean * s.
        let (a, b, m, v) = (a.value()?, b.value()?, m.value()?, v.value()?);
        let c = a.numel();
        ensure!(b.numel() == c && m.numel() == c && v.numel() == c, "scale, B, mean and var must all have {c} values");
        let s: Vec<f64> = (0..c).map(|i| a.f(i) / (v.f(i) + eps).sqrt()).collect();
        let t: Vec<f64> = (0..c).map(|i| b.f(i) - m.f(i) * s[i]).collect();
        let mut shape = vec![1usize; rank.max(2)];
        shape[if rank == 1 { 0 } else { 1 }] = c;
        if rank == 1 {
            shape = vec![c];
        }
        let key = derived_key("bn", &[sc, bi, mean, var]).map(|k| format!("{k}/{eps}"));
        let sd = p.upload_host(&HTensor::from_f64(x.elem, shape.clone(), s)?, key.as_ref().map(|k| format!("{k}.s")), crate::base::dtype::DType::F32)?;
        let td = p.upload_host(&HTensor::from_f64(x.elem, shape, t)?, key.map(|k| format!("{k}.t")), crate::base::dtype::DType::F32)?;
        let y = binary(p.eb(), BinFn::Mul, &x, &sd, x.elem)?;
        return one(binary(p.eb(), BinFn::Add, &y, &td, x.elem)?);
    }
    let (a, b, m, v) = (per_channel(p, sc, rank)?, per_channel(p, bi, rank)?, per_channel(p, mean, rank)?, per_channel(p, var, rank)?);
    let ve = unary(p.eb(), Op::Map { f: MapFn::Affine, a: 1.0, b: eps as f32 }, &v, x.elem)?;
    let sd = unary(p.eb(), Op::Unary(crate::op::UnaryOp::Sqrt), &ve, x.elem)?;
    let y = binary(p.eb(), BinFn::Sub, &x, &m, x.elem)?;
    let y = binary(p.eb(), BinFn::Div, &y, &sd, x.elem)?;
    let y = binary(p.eb(), BinFn::Mul, &y, &a, x.elem)?;
    one(binary(p.eb(), BinFn::Add, &y, &b, x.elem)?)
}

/// BatchNormalization in training mode: `x` normalized by its own mean
/// and (biased) variance over every axis but the channels', then scaled
/// and shifted; the further outputs are the running mean and variance
/// updated with `momentum` (and before opset 14 the batch's own).
// BOUNDS-FN: rank >= 2 is checked; params is a [_; 4].
fn batchnorm_training(p: &mut Planner, n: &OnnxNode, x: &Dev, params: [&Val; 4], eps: f64) -> crate::Result<Vec<Val>> {
    let rank = x.shape.len();
    ensure!(rank >= 2, "BatchNormalization in training mode needs an input [N, C, ...], not {}", fmt_shape(&x.shape));
    let c = x.shape[1];
    let momentum = n.float("momentum", 0.9);
    let ax: Vec<usize> = std::iter::once(0).chain(2..rank).collect();
    let e = x.elem;
    let m = reduce(p.eb(), RowFn::Mean, x, &ax, true)?;
    let dx = binary(p.eb(), BinFn::Sub, x, &m, e)?;
    let sq = unary(p.eb(), Op::Unary(crate::op::UnaryOp::Sqr), &dx, e)?;
    let v = reduce(p.eb(), RowFn::Mean, &sq, &ax, true)?;
    let ve = unary(p.eb(), Op::Map { f: MapFn::Affine, a: 1.0, b: eps as f32 }, &v, e)?;
    let inv = unary(p.eb(), Op::Map { f: MapFn::PowC, a: -0.5, b: 0.0 }, &ve, e)?;
    let (a, b) = (per_channel(p, params[0], rank)?, per_channel(p, params[1], rank)?);
    let y = binary(p.eb(), BinFn::Mul, &dx, &inv, e)?;
    let y = binary(p.eb(), BinFn::Mul, &y, &a, e)?;
    let y = binary(p.eb(), BinFn::Add, &y, &b, e)?;
    let (m1, v1) = (reshape(p.eb(), &m, vec![c])?, reshape(p.eb(), &v, vec![c])?);
    let mut outs = vec![Val::D(y)];
    for (running, batch) in [(params[2], &m1), (params[3], &v1)] {
        let r = p.dev(running)?;
        let r = reshape(p.eb(), &r, vec![c])?;
        let r = unary(p.eb(), Op::Scale { s: f64::from(momentum) }, &r, e)?;
        let bt = unary(p.eb(), Op::Scale { s: f64::from(1.0 - momentum) }, batch, e)?;
        outs.push(Val::D(binary(p.eb(), BinFn::Add, &r, &bt, e)?));
    }
    if p.opset < 14 {
        outs.push(Val::D(m1));
        outs.push(Val::D(v1));
    }
    Ok(outs)
}

/// Normalizes `x` over its last dimensions as rows of length `n` (each
/// row to mean 0 and variance 1, or by its RMS).
fn norm_rows(p: &mut Planner, x: &Dev, n: usize, eps: f32, rms: bool) -> crate::Result<Dev> {
    let rows = x.shape.iter().product::<usize>() / n.max(1);
    let t = dev::shaped(p.eb(), x, [n, rows, 1, 1])?;
    let op = if rms { Op::RmsNorm { eps } } else { Op::Norm { eps } };
    let t = p.b.op(op, &[t])?;
    let t = p.b.reshape(&t, dev::ne_of(&x.shape))?;
    Ok(Dev { t, shape: x.shape.clone(), elem: x.elem })
}

// BOUNDS-FN: rank >= 2 is checked, so x.shape and shape (rank entries) have index 1.
fn lower_groupnorm(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    ensure!(x.shape.len() >= 2, "{} needs an input [N, C, ...], not {}", n.op, fmt_shape(&x.shape));
    let (nn, c) = (x.shape[0], x.shape[1]);
    let spatial: usize = x.shape[2..].iter().product();
    let groups = if n.op == "InstanceNormalization" { c } else { n.int("num_groups", 0).max(0) as usize };
    ensure!(groups > 0 && c % groups == 0, "{c} channels do not split into {groups} groups");
    let eps = n.float("epsilon", 1e-5);
    let g = reshape(p.eb(), &x, vec![nn * groups, (c / groups) * spatial])?;
    let g = norm_rows(p, &g, (c / groups) * spatial, eps, false)?;
    let mut y = reshape(p.eb(), &g, x.shape.clone())?;
    let rank = x.shape.len();
    for (i, what) in [(1, "scale"), (2, "bias")] {
        let Some(v) = opt(ins, i) else { continue };
        let len: usize = v.shape().iter().product();
        // Per channel, or per group (GroupNormalization before opset 21).
        let d = if len == c {
            per_channel(p, v, rank)?
        } else if len == groups {
            let d = p.dev(v)?;
            let d = reshape(p.eb(), &d, vec![groups, 1])?;
            let d = dev::expand(p.eb(), &d, &[groups, c / groups])?;
            let mut shape = vec![1usize; rank];
            shape[1] = c;
            reshape(p.eb(), &d, shape)?
        } else {
            bail!("{what} has {len} values; it needs one per channel ({c}) or per group ({groups})");
        };
        let f = if i == 1 { BinFn::Mul } else { BinFn::Add };
        y = binary(p.eb(), f, &y, &d, x.elem)?;
    }
    one(y)
}

// BOUNDS-FN: a < rank (normalised), or a = 0 on a rank-0 input (an empty range of its
// empty shape).
fn lower_layernorm(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    let rank = x.shape.len();
    let a = if rank == 0 { 0 } else { axis(n.int("axis", -1), rank)? };
    let len: usize = x.shape[a..].iter().product();
    let rms = n.op != "LayerNormalization";
    let eps = n.float("epsilon", 1e-5);
    let mut y = norm_rows(p, &x, len, eps, rms)?;
    if let Some(s) = opt(ins, 1) {
        let sd = p.dev(s)?;
        y = binary(p.eb(), BinFn::Mul, &y, &sd, x.elem)?;
    }
    if let Some(b) = opt(ins, 2) {
        let bd = p.dev(b)?;
        y = binary(p.eb(), BinFn::Add, &y, &bd, x.elem)?;
    }
    let mut outs = vec![Val::D(y)];
    if n.outputs.iter().skip(1).any(|o| !o.is_empty()) {
        // Mean and 1 / sqrt(variance + epsilon) over the normalized axes.
        let ax: Vec<usize> = (a..rank).collect();
        let mean = reduce(p.eb(), RowFn::Mean, &x, &ax, true)?;
        let msq = if rms {
            let sq = unary(p.eb(), Op::Unary(crate::op::UnaryOp::Sqr), &x, x.elem)?;
            reduce(p.eb(), RowFn::Mean, &sq, &ax, true)?
        } else {
            let dv = binary(p.eb(), BinFn::Sub, &x, &mean, x.elem)?;
            let sq = unary(p.eb(), Op::Unary(crate::op::UnaryOp::Sqr), &dv, x.elem)?;
            reduce(p.eb(), RowFn::Mean, &sq, &ax, true)?
        };
        let v = unary(p.eb(), Op::Map { f: MapFn::Affine, a: 1.0, b: eps }, &msq, x.elem)?;
        let inv = unary(p.eb(), Op::Map { f: MapFn::PowC, a: -0.5, b: 0.0 }, &v, x.elem)?;
        outs.push(Val::D(mean));
        outs.push(Val::D(inv));
    }
    Ok(outs)
}

fn lower_lpnorm(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "input")?)?;
    let a = axis(n.int("axis", -1), x.shape.len())?;
    let f = match n.int("p", 2) {
        1 => RowFn::L1,
        2 => RowFn::L2,
        other => bail!("LpNormalization with p = {other} is not supported (1 or 2)"),
    };
    let norm = reduce(p.eb(), f, &x, &[a], true)?;
    let y = binary(p.eb(), BinFn::Div, &x, &norm, x.elem)?;
    // A zero norm gives zeros, not NaN.
    one(binary(p.eb(), BinFn::Mask, &y, &norm, x.elem)?)
}

// BOUNDS-FN: axes() gives axes below r, so perm lists indices below r and inv and
// x.shape have r entries.
fn lower_mvn(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    let r = x.shape.len();
    let ax = super::common::axes(&n.ints("axes").unwrap_or_else(|| vec![0, 2, 3]), r)?;
    // Normalized axes innermost, as rows.
    let mut perm: Vec<usize> = (0..r).filter(|i| !ax.contains(i)).collect();
    perm.extend(ax.iter().copied());
    let moved = dev::permute(p.eb(), &x, &perm)?;
    let len: usize = ax.iter().map(|&i| x.shape[i]).product();
    let y = norm_rows(p, &moved, len, 1e-9, false)?;
    let mut inv = vec![0usize; r];
    for (k, &i) in perm.iter().enumerate() {
        inv[i] = k;
    }
    one(dev::permute(p.eb(), &y, &inv)?)
}

// BOUNDS-FN: rank >= 3 is checked.
fn lower_lrn(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    ensure!(x.shape.len() >= 3, "LRN needs an input [N, C, ...]");
    let size = n.int("size", 0);
    ensure!(size > 0, "LRN needs a positive size");
    let size = size as usize;
    let (alpha, beta, bias) = (n.float("alpha", 1e-4), n.float("beta", 0.75), n.float("bias", 1.0));
    let (nn, c) = (x.shape[0], x.shape[1]);
    let sp: usize = x.shape[2..].iter().product();
    let sq = unary(p.eb(), Op::Unary(crate::op::UnaryOp::Sqr), &x, x.elem)?;
    let b = p.eb();
    let t = dev::shaped(b, &sq, [sp, c, nn, 1])?;
    let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let t = b.op(Op::PadEx { lo: [0, lo, 0, 0], hi: [0, hi, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[t])?;
    let t = b.op(Op::Pool2d { op: PoolOp::Avg, k0: 1, k1: size as i32, s0: 1, s1: 1, p0: 0.0, p1: 0.0 }, &[t])?;
    // bias + alpha / size * sum = bias + alpha * mean
    let t = b.op(Op::Map { f: MapFn::Affine, a: alpha, b: bias }, &[t])?;
    let t = b.op(Op::Map { f: MapFn::PowC, a: beta, b: 0.0 }, &[t])?;
    let t = b.reshape(&t, dev::ne_of(&x.shape))?;
    let den = Dev { t, shape: x.shape.clone(), elem: x.elem };
    one(binary(p.eb(), BinFn::Div, &x, &den, x.elem)?)
}
