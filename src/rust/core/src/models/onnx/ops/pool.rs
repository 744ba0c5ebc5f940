//! Pooling: MaxPool, AveragePool and LpPool (explicit, automatic or
//! ceil-mode padding, both averaging conventions). Windows of one or two
//! spatial dimensions without dilation are the engine's `pool_2d`; any
//! other (three or more spatial dimensions, dilations, MaxPool's Indices
//! output) pools one axis after the other, as a window's maximum or sum
//! is the maximum or sum along each of its axes in turn: per axis, the
//! padded input's strided views, one per kernel tap, are combined. The
//! global poolings are row reductions.

use super::conv::{geometry, out_size, Geo};
use super::common::{arg, one, Fold, Lower};
use crate::models::onnx::dev::{self, binary, reduce, reshape, unary};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, MapFn, Op, PadMode, PoolOp, RowFn, UnaryOp};
use anyhow::ensure;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "MaxPool" | "AveragePool" | "LpPool" => (Some(lower_pool), None),
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => (Some(lower_global), None),
        _ => return None,
    })
}

// BOUNDS-FN: r >= 3 is checked, sp has nsp = r - 2 entries and geometry() gives as many
// (kernel_shape's length is checked); nsp 1 is reshaped to rank 4; the result y has
// rank 4; n.outputs[1] is read after len() > 1.
fn lower_pool(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let mut x = p.dev(arg(ins, 0, "X")?)?;
    let r = x.shape.len();
    ensure!(r >= 3, "{} needs an input [N, C, spatial...], not {}", n.op, fmt_shape(&x.shape));
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
    let indices = n.outputs.len() > 1 && !n.outputs[1].is_empty();
    if nsp > 2 || g.iter().any(|g| g.d > 1) || indices {
        return pool_by_axes(p, n, &x, &g);
    }
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
    one(y)
}

/// Number of taps of window `o` along an axis (geometry `g`, input size
/// `size`) that fall inside the input, or inside the padded input when
/// `include_pad`.
fn taps_inside(o: usize, g: &Geo, size: usize, include_pad: bool) -> usize {
    let start = (o * g.s) as i64 - g.pb as i64;
    let (lo, hi) = if include_pad { (-(g.pb as i64), (size + g.pe) as i64) } else { (0, size as i64) };
    (0..g.k).filter(|&j| {
        let q = start + (j * g.d) as i64;
        q >= lo && q < hi
    })
    .count()
}

/// Pads `t` (canonical, ggml [inner, len, outer]) along its middle axis.
// BOUNDS-FN: axis < rank is checked first.
fn pad_axis(p: &mut Planner, t: &Dev, axis: usize, lo: usize, hi: usize, fill: f32) -> crate::Result<Dev> {
    ensure!(axis < t.shape.len(), "internal: padding axis {axis} of a tensor of rank {}", t.shape.len());
    if lo + hi == 0 {
        return Ok(t.clone());
    }
    let len = t.shape[axis];
    let inner: usize = t.shape[axis + 1..].iter().product();
    let outer: usize = t.shape[..axis].iter().product();
    let c = dev::canonical(p.eb(), t)?;
    let u = p.b.reshape(&c.t, [inner, len, outer, 1])?;
    let u = p.b.op(Op::PadEx { lo: [0, lo, 0, 0], hi: [0, hi, 0, 0], mode: PadMode::Constant, value: fill }, &[u])?;
    let mut shape = t.shape.clone();
    shape[axis] = len + lo + hi;
    let u = p.b.reshape(&u, dev::ne_of(&shape))?;
    Ok(Dev { t: u, shape, elem: t.elem })
}

/// Pooling along each spatial axis in turn, innermost first (so that
/// MaxPool's index is of the first maximum in row-major window order).
// BOUNDS-FN: lower_pool checks r >= 3 and gives g with r - 2 entries; a in 2..r, so g[a
// - 2], and every pooled value keeps rank r (padded, shape, ms have r entries); coord
// has sp.len() entries; n.outputs[1] is read after len() > 1.
fn pool_by_axes(p: &mut Planner, n: &OnnxNode, x: &Dev, g: &[Geo]) -> crate::Result<Vec<Val>> {
    let kind = n.op.as_str();
    let ceil = n.int("ceil_mode", 0) != 0;
    let include = n.int("count_include_pad", 0) != 0;
    let lp = n.int("p", 2) as f32;
    let r = x.shape.len();
    let elem = x.elem;
    let want_idx = kind == "MaxPool" && n.outputs.len() > 1 && !n.outputs[1].is_empty();
    let mut cur = x.clone();
    if kind == "LpPool" {
        cur = unary(p.eb(), Op::Unary(UnaryOp::Abs), &cur, elem)?;
        cur = unary(p.eb(), Op::Map { f: MapFn::PowC, a: lp, b: 0.0 }, &cur, elem)?;
    }
    // MaxPool's indices: every input element's flat index (the spatial
    // part row-major, or column-major with storage_order 1).
    let mut idx = if want_idx {
        let total = crate::models::onnx::host::numel(&x.shape)?;
        ensure!(total <= 1 << 24, "MaxPool's Indices output needs an input of at most 2^24 elements, not {total}");
        let sp = &x.shape[2..];
        let step: usize = sp.iter().product();
        let col_major = n.int("storage_order", 0) != 0;
        let mut v = Vec::with_capacity(total);
        for i in 0..total {
            let (c, mut rem) = (i / step, i % step);
            let mut k = 0usize;
            if col_major {
                // Spatial coordinates from row-major `rem`, weighed column-major.
                let mut coord = vec![0usize; sp.len()];
                for a in (0..sp.len()).rev() {
                    coord[a] = rem % sp[a];
                    rem /= sp[a];
                }
                let mut w = 1usize;
                for a in 0..sp.len() {
                    k += coord[a] * w;
                    w *= sp[a];
                }
            } else {
                k = rem;
            }
            v.push((c * step + k) as f64);
        }
        let h = HTensor::from_f64(Elem::F32, x.shape.clone(), v)?;
        Some(p.upload_host(&h, None, crate::base::dtype::DType::F32)?)
    } else {
        None
    };
    let fill = if kind == "MaxPool" { f32::NEG_INFINITY } else { 0.0 };
    for a in (2..r).rev() {
        let ga = g[a - 2];
        let size = x.shape[a];
        let o = out_size(size, &ga, ceil)?;
        let need = (o - 1) * ga.s + ga.d * (ga.k - 1) + 1;
        let hi = need.saturating_sub(size + ga.pb);
        let padded = pad_axis(p, &cur, a, ga.pb, hi, fill)?;
        let pidx = match &idx {
            Some(t) => Some(pad_axis(p, t, a, ga.pb, hi, 0.0)?),
            None => None,
        };
        let len = padded.shape[a];
        let inner: usize = padded.shape[a + 1..].iter().product();
        let outer: usize = padded.shape[..a].iter().product();
        let mut shape = padded.shape.clone();
        shape[a] = o;
        let tap = |p: &mut Planner, t: &Dev, j: usize| -> crate::Result<Dev> {
            let c = dev::canonical(p.eb(), t)?;
            let es = c.t.dtype().size();
            let src = p.b.reshape(&c.t, [inner, len, outer, 1])?;
            let ne = [inner, o, outer, 1];
            let nb = [es, inner * ga.s * es, inner * len * es, inner * len * outer * es];
            let v = p.b.view(&src, ne, nb, j * ga.d * inner * es)?;
            let v = p.b.contig(&v)?;
            let v = p.b.reshape(&v, dev::ne_of(&shape))?;
            Ok(Dev { t: v, shape: shape.clone(), elem })
        };
        let mut acc = tap(p, &padded, 0)?;
        let mut acc_idx = match &pidx {
            Some(t) => Some(tap(p, t, 0)?),
            None => None,
        };
        for j in 1..ga.k {
            let v = tap(p, &padded, j)?;
            if kind == "MaxPool" {
                if let (Some(ai), Some(pi)) = (&acc_idx, &pidx) {
                    let vi = tap(p, pi, j)?;
                    let gt = binary(p.eb(), BinFn::Greater, &v, &acc, elem)?;
                    let take = binary(p.eb(), BinFn::Mask, &vi, &gt, elem)?;
                    let keep = binary(p.eb(), BinFn::MaskNot, ai, &gt, elem)?;
                    acc_idx = Some(binary(p.eb(), BinFn::Add, &take, &keep, elem)?);
                }
                acc = binary(p.eb(), BinFn::Max, &acc, &v, elem)?;
            } else {
                acc = binary(p.eb(), BinFn::Add, &acc, &v, elem)?;
            }
        }
        if kind == "AveragePool" {
            let scale: Vec<f64> = (0..o)
                .map(|i| {
                    let c = taps_inside(i, &ga, size, include);
                    if c > 0 { 1.0 / c as f64 } else { 0.0 }
                })
                .collect();
            let mut ms = vec![1usize; r];
            ms[a] = o;
            let m = HTensor::from_f64(Elem::F32, ms, scale)?;
            let md = p.upload_host(&m, None, crate::base::dtype::DType::F32)?;
            acc = binary(p.eb(), BinFn::Mul, &acc, &md, elem)?;
        }
        cur = acc;
        idx = acc_idx;
    }
    if kind == "LpPool" {
        cur = unary(p.eb(), Op::Map { f: MapFn::PowC, a: 1.0 / lp, b: 0.0 }, &cur, elem)?;
    }
    let mut outs = vec![Val::D(cur)];
    if let Some(i) = idx {
        outs.push(Val::D(Dev { elem: Elem::I64, ..i }));
    }
    Ok(outs)
}

fn lower_global(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
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
