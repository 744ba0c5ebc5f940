//! Resize and Upsample: nearest, linear and cubic interpolation with every
//! coordinate transformation mode. Interpolation is separable, so each
//! resized axis becomes a few gathers along it (one per tap), weighted and
//! summed; the taps (indices and weights) are computed here on the host
//! from the shapes. Integer nearest upscaling of the two innermost axes is
//! the engine's `upscale`.

use super::common::{arg, harg, hopt, one, opt, Fold, Lower};
use crate::models::onnx::dev::{binary, ne_of};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, strides, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, Op};
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Resize" | "Upsample" => (Some(lower_resize), Some(fold_resize)),
        _ => return None,
    })
}

/// How one axis is resampled: per output index, (source index, weight)
/// taps, and whether it falls outside the input (tf_crop_and_resize).
struct AxisPlan {
    taps: Vec<Vec<(usize, f64)>>,
    outside: Vec<bool>,
}

struct Params {
    mode: String,
    coord: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    /// Linear and cubic downsampling with the filter widened by 1 / scale.
    antialias: bool,
}

fn params(n: &OnnxNode, opset: i64) -> crate::Result<Params> {
    let legacy = n.op == "Upsample" || opset < 11;
    let mode = n.string("mode", "nearest");
    let mode = match mode.as_str() {
        "nearest" | "linear" | "cubic" => mode,
        "bilinear" => "linear".to_string(),
        other => bail!("{} mode '{other}' is not supported (nearest, linear, cubic)", n.op),
    };
    let antialias = n.int("antialias", 0) != 0;
    ensure!(!antialias || mode != "nearest", "{} with antialias needs mode linear or cubic, not nearest", n.op);
    Ok(Params {
        mode,
        coord: if legacy { "asymmetric".into() } else { n.string("coordinate_transformation_mode", "half_pixel") },
        nearest: if legacy { "floor".into() } else { n.string("nearest_mode", "round_prefer_floor") },
        cubic_a: n.float("cubic_coeff_a", -0.75) as f64,
        exclude_outside: n.int("exclude_outside", 0) != 0,
        extrapolation: n.float("extrapolation_value", 0.0) as f64,
        antialias,
    })
}

fn cubic_coeffs(r: f64, a: f64) -> [f64; 4] {
    let w = |x: f64| {
        let x = x.abs();
        if x <= 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    };
    [w(r + 1.0), w(r), w(1.0 - r), w(2.0 - r)]
}

/// Antialiased taps around source coordinate `xo` for an axis scaled by
/// `scale`: the linear (triangle) or cubic filter stretched by 1 / scale
/// when downsampling, sampled at the input positions it covers and
/// normalised to sum 1 (as the ONNX reference: positions `base + i` with
/// `base` the integer below `xo`, or `xo - 1` when `xo` is an integer).
fn antialias_taps(xo: f64, scale: f64, cubic: bool, a: f64) -> Vec<(i64, f64)> {
    let s = scale.min(1.0);
    let mut base = xo.floor();
    let mut r = xo - base;
    if r == 0.0 {
        r = 1.0;
        base -= 1.0;
    }
    let base = base as i64;
    let reach = if cubic { 2.0 } else { 1.0 };
    let start = (-reach / s).floor() as i64 + 1;
    let end = 2 - start;
    let f = |x: f64| -> f64 {
        let x = x.abs();
        if !cubic {
            (1.0 - x).clamp(0.0, 1.0)
        } else if x <= 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    };
    let mut t: Vec<(i64, f64)> = (start..end).map(|i| (base + i, f(s * (i as f64 - r)))).collect();
    let sum: f64 = t.iter().map(|x| x.1).sum();
    if sum != 0.0 {
        for x in t.iter_mut() {
            x.1 /= sum;
        }
    }
    t
}

// BOUNDS-FN: c is a [f64; 4] and k < 4; clamp keeps indices in 0..input (input > 0 is
// checked).
fn axis_plan(pr: &Params, input: usize, output: usize, scale: f64, roi: (f64, f64)) -> crate::Result<AxisPlan> {
    ensure!(input > 0, "cannot resize an empty dimension");
    // The resized length in coordinates: input * scale (not rounded), as
    // the ONNX reference computes it.
    let (inf, outf) = (input as f64, input as f64 * scale);
    let mut taps = Vec::with_capacity(output);
    let mut outside = Vec::with_capacity(output);
    for o in 0..output {
        let x = o as f64;
        let xo = match pr.coord.as_str() {
            "half_pixel" => (x + 0.5) / scale - 0.5,
            "half_pixel_symmetric" => {
                let adj = output as f64 / (scale * inf);
                let center = inf / 2.0;
                center * (1.0 - adj) + (x + 0.5) / scale - 0.5
            }
            "pytorch_half_pixel" => {
                if outf > 1.0 {
                    (x + 0.5) / scale - 0.5
                } else {
                    0.0
                }
            }
            "align_corners" => {
                if outf == 1.0 {
                    0.0
                } else {
                    x * (inf - 1.0) / (outf - 1.0)
                }
            }
            "asymmetric" => x / scale,
            "tf_half_pixel_for_nearest" => (x + 0.5) / scale,
            "tf_crop_and_resize" => {
                let (s, e) = roi;
                if outf > 1.0 {
                    s * (inf - 1.0) + x * (e - s) * (inf - 1.0) / (outf - 1.0)
                } else {
                    0.5 * (s + e) * (inf - 1.0)
                }
            }
            other => bail!("coordinate_transformation_mode '{other}' is not supported"),
        };
        let out_of_range = pr.coord == "tf_crop_and_resize" && (xo < 0.0 || xo > inf - 1.0);
        outside.push(out_of_range);
        let clamp = |i: i64| i.clamp(0, input as i64 - 1) as usize;
        let t = match pr.mode.as_str() {
            "linear" | "cubic" if pr.antialias => {
                let mut t = antialias_taps(xo, scale, pr.mode == "cubic", pr.cubic_a);
                if pr.exclude_outside {
                    renorm(&mut t, input);
                }
                t.into_iter().map(|(i, w)| (clamp(i), w)).collect()
            }
            "nearest" => {
                let fl = xo.floor();
                let frac = xo - fl;
                let i = match pr.nearest.as_str() {
                    "floor" => fl,
                    "ceil" => xo.ceil(),
                    "round_prefer_ceil" => {
                        if frac == 0.5 {
                            xo.ceil()
                        } else {
                            xo.round()
                        }
                    }
                    _ => {
                        if frac == 0.5 {
                            fl
                        } else {
                            xo.round()
                        }
                    }
                };
                vec![(clamp(i as i64), 1.0)]
            }
            "linear" => {
                let fl = xo.floor();
                let r = xo - fl;
                let i = fl as i64;
                let mut t = vec![(i, 1.0 - r), (i + 1, r)];
                if pr.exclude_outside {
                    renorm(&mut t, input);
                }
                t.into_iter().map(|(i, w)| (clamp(i), w)).collect()
            }
            _ => {
                let fl = xo.floor();
                let r = xo - fl;
                let i = fl as i64;
                let c = cubic_coeffs(r, pr.cubic_a);
                let mut t: Vec<(i64, f64)> = (0..4).map(|k| (i - 1 + k as i64, c[k])).collect();
                if pr.exclude_outside {
                    renorm(&mut t, input);
                }
                t.into_iter().map(|(i, w)| (clamp(i), w)).collect()
            }
        };
        taps.push(t);
    }
    Ok(AxisPlan { taps, outside })
}

/// Zeroes the weights of taps outside the input and renormalises.
fn renorm(t: &mut [(i64, f64)], input: usize) {
    for x in t.iter_mut() {
        if x.0 < 0 || x.0 >= input as i64 {
            x.1 = 0.0;
        }
    }
    let s: f64 = t.iter().map(|x| x.1).sum();
    if s != 0.0 {
        for x in t.iter_mut() {
            x.1 /= s;
        }
    }
}

/// (output shape, per-axis scales used for coordinates, roi per axis).
#[allow(clippy::type_complexity)]
// BOUNDS-FN: axes hold axes below r (normalised) and out, sc, shape, rois have r
// entries; sz, s and roi are checked to hold one (two for roi) value per axis, so k and
// k + axes.len() are in range; the attribute scales are checked to be r.
fn sizes_and_scales(
    n: &OnnxNode,
    shape: &[usize],
    roi: Option<Vec<f64>>,
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
) -> crate::Result<(Vec<usize>, Vec<f64>, Vec<(f64, f64)>)> {
    let r = shape.len();
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a.iter().map(|&x| super::common::axis(x, r)).collect::<crate::Result<_>>()?,
        None => (0..r).collect(),
    };
    let mut out = shape.to_vec();
    let mut sc = vec![1.0f64; r];
    if let Some(sz) = sizes.filter(|s| !s.is_empty()) {
        ensure!(sz.len() == axes.len(), "{} sizes for {} axes", sz.len(), axes.len());
        let policy = n.string("keep_aspect_ratio_policy", "stretch");
        let ratios: Vec<f64> = axes.iter().zip(&sz).map(|(&a, &s)| s as f64 / shape[a] as f64).collect();
        let uniform = match policy.as_str() {
            "not_larger" => Some(ratios.iter().copied().fold(f64::INFINITY, f64::min)),
            "not_smaller" => Some(ratios.iter().copied().fold(0.0, f64::max)),
            _ => None,
        };
        for (k, &a) in axes.iter().enumerate() {
            match uniform {
                Some(u) => {
                    sc[a] = u;
                    out[a] = (u * shape[a] as f64 + 0.5).floor() as usize;
                }
                None => {
                    ensure!(sz[k] >= 0, "negative size {}", sz[k]);
                    out[a] = sz[k] as usize;
                    sc[a] = sz[k] as f64 / shape[a] as f64;
                }
            }
        }
    } else if let Some(s) = scales.filter(|s| !s.is_empty()) {
        ensure!(s.len() == axes.len(), "{} scales for {} axes", s.len(), axes.len());
        for (k, &a) in axes.iter().enumerate() {
            ensure!(s[k] > 0.0, "scale {} must be positive", s[k]);
            sc[a] = s[k];
            out[a] = (shape[a] as f64 * s[k]).floor() as usize;
        }
    } else if let Some(s) = n.floats("scales") {
        ensure!(s.len() == r, "{} scales for rank {r}", s.len());
        for a in 0..r {
            sc[a] = s[a] as f64;
            out[a] = (shape[a] as f64 * s[a] as f64).floor() as usize;
        }
    } else {
        bail!("{} needs scales or sizes", n.op);
    }
    crate::models::onnx::host::numel(&out)?;
    let mut rois = vec![(0.0, 1.0); r];
    if let Some(v) = roi.filter(|v| !v.is_empty()) {
        ensure!(v.len() == 2 * axes.len(), "roi has {} values for {} axes", v.len(), axes.len());
        for (k, &a) in axes.iter().enumerate() {
            rois[a] = (v[k], v[k + axes.len()]);
        }
    }
    Ok((out, sc, rois))
}

/// The resize inputs by position: Upsample (X, scales), Resize-10 (X,
/// scales), Resize-11+ (X, roi, scales, sizes).
fn input_slots(n: &OnnxNode, opset: i64) -> (Option<usize>, Option<usize>, Option<usize>) {
    if n.op == "Upsample" || opset < 11 {
        (None, Some(1), None)
    } else {
        (Some(1), Some(2), Some(3))
    }
}

// BOUNDS-FN: out, sc, rois, x.shape and plans have r entries (r - 2 only when r >= 2);
// an empty output returns early, so every plan has out[a] > 0 tap lists, all of one
// length (fixed per mode, antialias's from the scale alone) and non-empty (1, 2, 4 or
// at least 2 taps).
fn lower_resize(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let x = p.dev(arg(ins, 0, "X")?)?;
    let pr = params(n, p.opset)?;
    let (ri, si, zi) = input_slots(n, p.opset);
    let get_f = |p: &mut Planner, i: Option<usize>| -> crate::Result<Option<Vec<f64>>> {
        match i.and_then(|i| opt(ins, i)) {
            Some(v) => Ok(Some(p.floats_of(v, "resize parameter")?)),
            None => Ok(None),
        }
    };
    let roi = get_f(p, ri)?;
    let scales = get_f(p, si)?;
    let sizes = match zi.and_then(|i| opt(ins, i)) {
        Some(v) => Some(p.ints_of(v, "sizes")?),
        None => None,
    };
    let (out, sc, rois) = sizes_and_scales(n, &x.shape, roi, scales, sizes)?;
    let r = x.shape.len();
    if out.contains(&0) || x.shape.contains(&0) {
        ensure!(out.contains(&0), "cannot resize an empty tensor of shape {} to {}", fmt_shape(&x.shape), fmt_shape(&out));
        return one(crate::models::onnx::dev::empty(p.eb(), out, x.elem)?);
    }
    let mut plans: Vec<Option<AxisPlan>> = Vec::with_capacity(r);
    for a in 0..r {
        let identity = out[a] == x.shape[a] && sc[a] == 1.0 && pr.coord != "tf_crop_and_resize";
        plans.push(if identity { None } else { Some(axis_plan(&pr, x.shape[a], out[a], sc[a], rois[a])?) });
    }
    // Integer nearest upscaling of the last two axes: the engine's upscale.
    if r >= 2 && pr.mode == "nearest" && (0..r - 2).all(|a| plans[a].is_none()) {
        let f = out[r - 1] / x.shape[r - 1].max(1);
        let is_up = |a: usize| {
            plans[a].as_ref().is_some_and(|pl| {
                out[a] == x.shape[a] * f && pl.taps.iter().enumerate().all(|(o, t)| t[0].0 == o / f) && !pl.outside.iter().any(|&b| b)
            })
        };
        if f >= 2 && is_up(r - 1) && is_up(r - 2) {
            let b = p.eb();
            let t = crate::models::onnx::dev::shaped(b, &x, [x.shape[r - 1], x.shape[r - 2], x.shape[..r - 2].iter().product(), 1])?;
            let t = b.op(Op::Upscale { factor: f as i32 }, &[t])?;
            let t = b.reshape(&t, ne_of(&out))?;
            return one(Dev { t, shape: out, elem: x.elem });
        }
    }
    let mut cur = x.clone();
    for a in 0..r {
        let Some(pl) = &plans[a] else { continue };
        let ntaps = pl.taps[0].len();
        let mut acc: Option<Dev> = None;
        for k in 0..ntaps {
            let idx: Vec<f32> = pl.taps.iter().map(|t| t[k].0 as f32).collect();
            let g = super::shape::gather_axis(p, &cur, a, idx)?;
            let term = if pr.mode == "nearest" {
                g
            } else {
                let mut ws = vec![1usize; r];
                ws[a] = out[a];
                let wv: Vec<f64> = pl.taps.iter().map(|t| t[k].1).collect();
                let w = HTensor::from_f64(Elem::F32, ws, wv)?;
                let wd = p.upload_host(&w, None, crate::base::dtype::DType::F32)?;
                binary(p.eb(), BinFn::Mul, &g, &wd, x.elem)?
            };
            acc = Some(match acc {
                None => term,
                Some(s) => binary(p.eb(), BinFn::Add, &s, &term, x.elem)?,
            });
        }
        cur = acc.ok_or_else(|| anyhow::anyhow!("internal: resizing axis {a} with no interpolation taps"))?;
        if pl.outside.iter().any(|&b| b) {
            let mut ms = vec![1usize; r];
            ms[a] = out[a];
            let inside: Vec<f64> = pl.outside.iter().map(|&o| if o { 0.0 } else { 1.0 }).collect();
            let fill: Vec<f64> = pl.outside.iter().map(|&o| if o { pr.extrapolation } else { 0.0 }).collect();
            let md = p.upload_host(&HTensor::from_f64(Elem::F32, ms.clone(), inside)?, None, crate::base::dtype::DType::F32)?;
            let fd = p.upload_host(&HTensor::from_f64(Elem::F32, ms, fill)?, None, crate::base::dtype::DType::F32)?;
            let masked = binary(p.eb(), BinFn::Mul, &cur, &md, x.elem)?;
            cur = binary(p.eb(), BinFn::Add, &masked, &fd, x.elem)?;
        }
    }
    ensure!(cur.shape == out, "internal: resize gave {}, not {}", fmt_shape(&cur.shape), fmt_shape(&out));
    one(cur)
}

// BOUNDS-FN: shape, out, sc, rois have r entries; oa < ns[a] = the plan's length; each
// tap source s < shape[a] (axis_plan clamps), so src0 + s * st[a] = (outer * shape[a] +
// s) * st[a] + inner < numel(shape) = cur.len() (outer below the outer product, inner <
// st[a]); an empty ns runs no iteration.
fn fold_resize(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "X")?;
    let pr = params(n, opset)?;
    let (ri, si, zi) = input_slots(n, opset);
    let get = |i: Option<usize>| i.and_then(|i| hopt(ins, i));
    let (out, sc, rois) = sizes_and_scales(
        n,
        &x.shape,
        get(ri).map(|t| t.f64s().to_vec()),
        get(si).map(|t| t.f64s().to_vec()),
        get(zi).map(|t| t.i64s().to_vec()),
    )?;
    let mut cur = x.f64s().to_vec();
    let mut shape = x.shape.clone();
    for a in 0..shape.len() {
        if out[a] == shape[a] && sc[a] == 1.0 && pr.coord != "tf_crop_and_resize" {
            continue;
        }
        let pl = axis_plan(&pr, shape[a], out[a], sc[a], rois[a])?;
        let mut ns = shape.clone();
        ns[a] = out[a];
        let (st, nst) = (strides(&shape), strides(&ns));
        let total: usize = ns.iter().product();
        let mut next = vec![0.0f64; total];
        for (i, v) in next.iter_mut().enumerate() {
            let oa = (i / nst[a]) % ns[a];
            let base = i - oa * nst[a];
            // The same element in `cur` with the axis coordinate taken out.
            let outer = base / (nst[a] * ns[a]);
            let inner = base % nst[a];
            let src0 = outer * st[a] * shape[a] + inner;
            *v = if pl.outside[oa] {
                pr.extrapolation
            } else {
                pl.taps[oa].iter().map(|&(s, w)| w * cur[src0 + s * st[a]]).sum()
            };
        }
        cur = next;
        shape = ns;
    }
    Ok(vec![HTensor::from_f64(x.elem, shape, cur)?])
}
