//! Pooling: MaxPool, AveragePool and LpPool (1-D and 2-D; explicit,
//! automatic or ceil-mode padding, both averaging conventions) on the
//! engine's `pool_2d`, and the global poolings as row reductions.

use super::conv::{geometry, out_size, Geo};
use super::common::{arg, one, Fold, Lower};
use crate::models::onnx::dev::{self, binary, reduce, reshape, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::Node;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, MapFn, Op, PadMode, PoolOp, RowFn, UnaryOp};
use anyhow::{bail, ensure};

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "MaxPool" | "AveragePool" | "LpPool" => (Some(lower_pool), None),
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => (Some(lower_global), None),
        _ => return None,
    })
}

fn lower_pool(p: &mut Planner, n: &Node, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let mut x = p.dev(arg(ins, 0, "X")?)?;
    let r = x.shape.len();
    ensure!(r == 3 || r == 4, "{} with {} spatial dimensions is not supported (1 or 2)", n.op, r.saturating_sub(2));
    let nsp = r - 2;
    let k: Vec<usize> = n
        .ints("kernel_shape")
        .ok_or_else(|| anyhow::anyhow!("{} needs kernel_shape", n.op))?
        .iter()
        .map(|&v| v.max(1) as usize)
        .collect();
    ensure!(k.len() == nsp, "kernel_shape {k:?} does not fit {} spatial dimensions", nsp);
    let sp: Vec<usize> = x.shape[2..].to_vec();
    let g = geometry(n, &sp, &k)?;
    ensure!(g.iter().all(|g| g.d == 1), "{} with dilations is not supported", n.op);
    if nsp == 1 {
        x = reshape(p.eb(), &x, vec![x.shape[0], x.shape[1], 1, sp[0]])?;
    }
    let one_geo = Geo { k: 1, s: 1, d: 1, pb: 0, pe: 0 };
    let [gh, gw] = if nsp == 1 { [one_geo, g[0]] } else { [g[0], g[1]] };
    let ceil = n.int("ceil_mode", 0) != 0;
    let (h, w) = (x.shape[2], x.shape[3]);
    let (oh, ow) = (out_size(h, &gh, ceil)?, out_size(w, &gw, ceil)?);
    // Padded extents so that a floor computation gives (oh, ow).
    let need_h = (oh - 1) * gh.s + gh.k;
    let need_w = (ow - 1) * gw.s + gw.k;
    let extra_h = need_h.saturating_sub(h + gh.pb + gh.pe);
    let extra_w = need_w.saturating_sub(w + gw.pb + gw.pe);
    let kind = n.op.as_str();
    let lp = n.int("p", 2) as f32;
    let mut xt = dev::shaped(p.eb(), &x, [w, h, x.shape[1], x.shape[0]])?;
    if kind == "LpPool" {
        xt = p.b.op(Op::Unary(UnaryOp::Abs), &[xt])?;
        xt = p.b.op(Op::Map { f: MapFn::PowC, a: lp, b: 0.0 }, &[xt])?;
    }
    let fill = if kind == "MaxPool" { f32::NEG_INFINITY } else { 0.0 };
    let (pw0, pw1, ph0, ph1) = (gw.pb, gw.pe + extra_w, gh.pb, gh.pe + extra_h);
    if pw0 + pw1 + ph0 + ph1 > 0 {
        xt = p.b.op(Op::PadEx { lo: [pw0, ph0, 0, 0], hi: [pw1, ph1, 0, 0], mode: PadMode::Constant, value: fill }, &[xt])?;
    }
    let op = if kind == "MaxPool" { PoolOp::Max } else { PoolOp::Avg };
    let pool = Op::Pool2d { op, k0: gw.k as i32, k1: gh.k as i32, s0: gw.s as i32, s1: gh.s as i32, p0: 0.0, p1: 0.0 };
    let t = p.b.op(pool, &[xt])?;
    ensure!(t.ne()[0] == ow && t.ne()[1] == oh, "internal: pooling gave {:?}, expected {ow} x {oh}", t.ne());
    let elem = x.elem;
    let mut y = Dev { t, shape: vec![x.shape[0], x.shape[1], oh, ow], elem };
    if kind == "AveragePool" || kind == "LpPool" {
        // pool_2d divides by the window size; rescale where ONNX counts fewer.
        let include = kind == "LpPool" || n.int("count_include_pad", 0) != 0;
        let area = (gh.k * gw.k) as f64;
        let mut scale = Vec::with_capacity(oh * ow);
        let mut uniform = true;
        for oy in 0..oh {
            for ox in 0..ow {
                let count = |o: usize, g: &Geo, size: usize| -> usize {
                    let start = (o * g.s) as i64 - g.pb as i64;
                    let (lo, hi) = if include { (-(g.pb as i64), (size + g.pe) as i64) } else { (0, size as i64) };
                    let a = start.max(lo);
                    let b = (start + g.k as i64).min(hi);
                    (b - a).max(0) as usize
                };
                let c = (count(oy, &gh, h) * count(ox, &gw, w)) as f64;
                let s = if kind == "LpPool" { 1.0 * area } else if c > 0.0 { area / c } else { 0.0 };
                if (s - if kind == "LpPool" { area } else { 1.0 }).abs() > 0.0 {
                    uniform = false;
                }
                scale.push(s);
            }
        }
        if kind == "LpPool" {
            y = unary(p.eb(), Op::Scale { s: f64::from(area as f32) }, &y, elem)?;
            y = unary(p.eb(), Op::Map { f: MapFn::PowC, a: 1.0 / lp, b: 0.0 }, &y, elem)?;
        } else if !uniform {
            let m = HTensor::from_f64(Elem::F32, vec![oh, ow], scale)?;
            let md = p.upload_host(&m, None, crate::base::dtype::DType::F32)?;
            y = binary(p.eb(), BinFn::Mul, &y, &md, elem)?;
        }
    }
    if nsp == 1 {
        let s = vec![y.shape[0], y.shape[1], y.shape[3]];
        y = reshape(p.eb(), &y, s)?;
    }
    if n.outputs.len() > 1 && !n.outputs[1].is_empty() {
        bail!("MaxPool's Indices output is not supported");
    }
    one(y)
}

fn lower_global(p: &mut Planner, n: &Node, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    ensure!(x.shape.len() >= 3, "{} needs an input [N, C, spatial...], not {}", n.op, fmt_shape(&x.shape));
    let ax: Vec<usize> = (2..x.shape.len()).collect();
    match n.op.as_str() {
        "GlobalAveragePool" => one(reduce(p.eb(), RowFn::Mean, &x, &ax, true)?),
        "GlobalMaxPool" => one(reduce(p.eb(), RowFn::Max, &x, &ax, true)?),
        _ => {
            let lp = n.int("p", 2) as f32;
            let a = unary(p.eb(), Op::Unary(UnaryOp::Abs), &x, x.elem)?;
            let a = unary(p.eb(), Op::Map { f: MapFn::PowC, a: lp, b: 0.0 }, &a, x.elem)?;
            let s = reduce(p.eb(), RowFn::Sum, &a, &ax, true)?;
            one(unary(p.eb(), Op::Map { f: MapFn::PowC, a: 1.0 / lp, b: 0.0 }, &s, x.elem)?)
        }
    }
}
