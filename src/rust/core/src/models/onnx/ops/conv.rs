//! Convolutions: Conv (1-D and 2-D, groups, dilations, strides, explicit or
//! automatic padding) as ggml does it, `im2col` then one `mul_mat` (batched
//! over groups); ConvTranspose as a convolution of the input spread by the
//! stride with the flipped kernel.

use super::common::{arg, one, opt, Fold, Lower};
use crate::base::dtype::DType;
use crate::models::onnx::dev::{self, binary, narrow, reshape};
use crate::models::onnx::host::{fmt_shape, strides, HTensor};
use crate::models::onnx::model::Node;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::{BinFn, Op, PadMode};
use crate::tensor::Tensor;
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Conv" => (Some(lower_conv), None),
        "ConvTranspose" => (Some(lower_conv_transpose), None),
        _ => return None,
    })
}

type T = Arc<Tensor>;

/// Per spatial dimension (H then W for 2-D): kernel, stride, dilation, pad before, pad after.
#[derive(Debug, Clone, Copy)]
pub struct Geo {
    pub k: usize,
    pub s: usize,
    pub d: usize,
    pub pb: usize,
    pub pe: usize,
}

fn list(n: &Node, name: &str, len: usize, default: i64) -> crate::Result<Vec<usize>> {
    let v = n.ints(name).unwrap_or_else(|| vec![default; len]);
    ensure!(v.len() == len, "`{name}` has {} values for {len} spatial dimensions", v.len());
    v.iter()
        .map(|&x| {
            ensure!(x >= 0, "`{name}` has a negative value {x}");
            Ok(x as usize)
        })
        .collect()
}

/// The geometry of a Conv / pooling node over input spatial sizes `sp` and kernel sizes `k`.
pub fn geometry(n: &Node, sp: &[usize], k: &[usize]) -> crate::Result<Vec<Geo>> {
    let r = sp.len();
    let s = list(n, "strides", r, 1)?;
    let d = list(n, "dilations", r, 1)?;
    ensure!(s.iter().all(|&x| x > 0) && d.iter().all(|&x| x > 0), "strides and dilations must be positive");
    let auto = n.string("auto_pad", "NOTSET");
    let mut g = Vec::with_capacity(r);
    for i in 0..r {
        let span = d[i] * (k[i].max(1) - 1) + 1;
        let (pb, pe) = match auto.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                let out = sp[i].div_ceil(s[i]);
                let total = ((out - 1) * s[i] + span).saturating_sub(sp[i]);
                if auto == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                }
            }
            "VALID" => (0, 0),
            "NOTSET" | "" => {
                let p = list(n, "pads", 2 * r, 0)?;
                (p[i], p[i + r])
            }
            other => bail!("auto_pad '{other}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"),
        };
        g.push(Geo { k: k[i], s: s[i], d: d[i], pb, pe });
    }
    Ok(g)
}

/// Output size of one spatial dimension (floor, or ceil with `ceil_mode`).
pub fn out_size(input: usize, g: &Geo, ceil: bool) -> crate::Result<usize> {
    let span = g.d * (g.k.max(1) - 1) + 1;
    let padded = input + g.pb + g.pe;
    ensure!(padded >= span, "the window ({span} wide) does not fit the padded input ({padded})");
    let n = padded - span;
    let mut o = if ceil { n.div_ceil(g.s) } else { n / g.s } + 1;
    // With ceil_mode the last window must start inside the input or the
    // leading padding (ONNX and PyTorch).
    if ceil && (o - 1) * g.s >= input + g.pb {
        o -= 1;
    }
    Ok(o)
}

/// The engine kernel of a constant or computed weight, as ggml sizes
/// [KW, KH, Cg, OC] (an ONNX [OC, Cg, KH, KW] tensor needs no reordering).
fn weight(p: &mut Planner, w: &Val, ne: [usize; 4]) -> crate::Result<T> {
    match w {
        Val::C(c) => {
            let big = c.shape().iter().product::<usize>() >= super::matmul::F16_MIN;
            let dtype = if p.b.f16 && big { DType::F16 } else { DType::F32 };
            let key = c.key.clone();
            let c2 = c.clone();
            p.b.constant(key.as_deref(), dtype, ne, move || c2.f32s())
        }
        Val::D(d) => dev::shaped(p.eb(), d, ne),
    }
}

/// 2-D convolution of `x` [N, C, H, W] by kernel `w` (ggml [KW, KH, Cg, OC])
/// in `group` groups, geometry `geo` (H, W) -> [N, OC, OH, OW].
pub fn conv2d(p: &mut Planner, x: &Dev, w: T, group: usize, geo: [Geo; 2]) -> crate::Result<Dev> {
    let [nn, c, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let [kw, kh, cg, oc] = w.ne();
    ensure!(group >= 1 && c == cg * group, "the input has {c} channels, the kernel {cg} per group in {group} groups");
    ensure!(oc % group == 0, "{oc} output channels do not split into {group} groups");
    let [gh, gw] = geo;
    let oh = out_size(h, &gh, false)?;
    let ow = out_size(wd, &gw, false)?;
    let b = p.eb();
    let mut xt = dev::shaped(b, x, [wd, h, c, nn])?;
    let (p0, p1) = if gh.pb != gh.pe || gw.pb != gw.pe {
        xt = b.op(Op::PadEx { lo: [gw.pb, gh.pb, 0, 0], hi: [gw.pe, gh.pe, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[xt])?;
        (0, 0)
    } else {
        (gw.pb, gh.pb)
    };
    // The kernel operand of im2col only gives sizes: a zero-stride view.
    let row = b.leaf(DType::F32, [kw, 1, 1, 1])?;
    let kshape = b.view(&row, [kw, kh, c, 1], [4, 0, 0, 0], 0)?;
    let op = Op::Im2Col { s0: gw.s as i32, s1: gh.s as i32, p0: p0 as i32, p1: p1 as i32, d0: gw.d as i32, d1: gh.d as i32, is_2d: true };
    let cols = b.ctx()?.im2col(&kshape, &xt, op, DType::F32)?; // [C*KH*KW, OW, OH, N]
    let kk = kw * kh * cg;
    let pix = ow * oh;
    let t = if group == 1 {
        let cols2 = b.reshape(&cols, [kk, pix * nn, 1, 1])?;
        let w2 = b.reshape(&w, [kk, oc, 1, 1])?;
        let prod = b.op(Op::MulMat, &[cols2, w2])?; // [P*N, OC]
        if nn == 1 {
            b.reshape(&prod, [ow, oh, oc, 1])?
        } else {
            let r = b.reshape(&prod, [pix, nn, oc, 1])?;
            let pm = b.permute(&r, [0, 2, 1, 3])?; // [P, OC, N]
            let cont = b.op(Op::Cont, &[pm])?;
            b.reshape(&cont, [ow, oh, oc, nn])?
        }
    } else {
        let ocg = oc / group;
        let cols4 = b.reshape(&cols, [kk, group, pix, nn])?;
        let colsp = b.permute(&cols4, [0, 2, 1, 3])?; // [Kg, P, G, N]
        let w3 = b.reshape(&w, [kk, ocg, group, 1])?;
        let prod = b.op(Op::MulMat, &[w3, colsp])?; // [OCg, P, G, N]
        let pm = b.permute(&prod, [1, 0, 2, 3])?; // [P, OCg, G, N]
        let cont = b.op(Op::Cont, &[pm])?;
        b.reshape(&cont, [ow, oh, oc, nn])?
    };
    Ok(Dev { t, shape: vec![nn, oc, oh, ow], elem: super::common::float_result(x.elem) })
}

/// `x` [N, C, L] as [N, C, 1, L] and back: 1-D convolutions are 2-D ones.
fn spatial(n: &Node, x: &Val, w: &Val) -> crate::Result<usize> {
    let r = x.shape().len();
    ensure!(r == w.shape().len(), "the input {} and the kernel {} differ in rank", fmt_shape(x.shape()), fmt_shape(w.shape()));
    match r {
        3 | 4 => Ok(r - 2),
        _ => bail!("{} with {} spatial dimensions is not supported (1 or 2)", n.op, r.saturating_sub(2)),
    }
}

pub(super) fn lower_conv(p: &mut Planner, n: &Node, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (xv, wv) = (arg(ins, 0, "X")?.clone(), arg(ins, 1, "W")?.clone());
    let nsp = spatial(n, &xv, &wv)?;
    let group = n.int("group", 1).max(1) as usize;
    let ws = wv.shape().to_vec();
    let kdims: Vec<usize> = ws[2..].to_vec();
    if let Some(k) = n.ints("kernel_shape") {
        ensure!(k.len() == nsp && k.iter().zip(&kdims).all(|(&a, &b)| a as usize == b), "kernel_shape {k:?} differs from the weights' shape {}", fmt_shape(&ws));
    }
    let mut x = p.dev(&xv)?;
    let sp: Vec<usize> = x.shape[2..].to_vec();
    let g = geometry(n, &sp, &kdims)?;
    let (geo, kne) = if nsp == 1 {
        x = reshape(p.eb(), &x, vec![x.shape[0], x.shape[1], 1, sp[0]])?;
        ([Geo { k: 1, s: 1, d: 1, pb: 0, pe: 0 }, g[0]], [ws[2], 1, ws[1], ws[0]])
    } else {
        ([g[0], g[1]], [ws[3], ws[2], ws[1], ws[0]])
    };
    let w = weight(p, &wv, kne)?;
    let mut y = conv2d(p, &x, w, group, geo)?;
    if let Some(bv) = opt(ins, 2) {
        let bd = p.dev(bv)?;
        let bd = reshape(p.eb(), &bd, vec![1, bd.shape.iter().product(), 1, 1])?;
        y = binary(p.eb(), BinFn::Add, &y, &bd, y.elem)?;
    }
    if nsp == 1 {
        let s = vec![y.shape[0], y.shape[1], y.shape[3]];
        y = reshape(p.eb(), &y, s)?;
    }
    one(y)
}

/// ConvTranspose weights [C, OCg, KH, KW] as a convolution kernel
/// [G*OCg, Cg, KH, KW]: channels swapped per group, taps flipped.
fn flip_kernel(w: &HTensor, group: usize) -> crate::Result<HTensor> {
    let s = &w.shape;
    let (c, ocg, kh, kw) = (s[0], s[1], s[2], s[3]);
    ensure!(c % group == 0, "{c} input channels do not split into {group} groups");
    let cg = c / group;
    let st = strides(s);
    let out = vec![group * ocg, cg, kh, kw];
    let idx = crate::models::onnx::host::index_map(&out, |q| {
        let (o, ci, y, x) = (q[0], q[1], q[2], q[3]);
        let (g, og) = (o / ocg, o % ocg);
        (g * cg + ci) * st[0] + og * st[1] + (kh - 1 - y) * st[2] + (kw - 1 - x) * st[3]
    })?;
    Ok(w.pick(&idx, out))
}

fn lower_conv_transpose(p: &mut Planner, n: &Node, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (xv, wv) = (arg(ins, 0, "X")?.clone(), arg(ins, 1, "W")?.clone());
    let nsp = spatial(n, &xv, &wv)?;
    let group = n.int("group", 1).max(1) as usize;
    let mut w = (*p.value_of(&wv, "weights")?).clone();
    let mut x = p.dev(&xv)?;
    if nsp == 1 {
        x = reshape(p.eb(), &x, vec![x.shape[0], x.shape[1], 1, x.shape[2]])?;
        w = w.reshaped(vec![w.shape[0], w.shape[1], 1, w.shape[2]])?;
    }
    let k = [w.shape[2], w.shape[3]];
    let sp = [x.shape[2], x.shape[3]];
    let r = nsp;
    let strides = list(n, "strides", r, 1)?;
    let dil = list(n, "dilations", r, 1)?;
    let opad = list(n, "output_padding", r, 0)?;
    let (s, d, op) = if nsp == 1 {
        ([1, strides[0]], [1, dil[0]], [0, opad[0]])
    } else {
        ([strides[0], strides[1]], [dil[0], dil[1]], [opad[0], opad[1]])
    };
    // Pads: explicit, or from auto_pad / output_shape.
    let auto = n.string("auto_pad", "NOTSET");
    let out_shape = n.ints("output_shape");
    let mut pads = [[0i64; 2]; 2];
    for i in 0..2 {
        let li = if nsp == 1 { 0 } else { i };
        if nsp == 1 && i == 0 {
            continue;
        }
        let full = (s[i] * (sp[i] - 1) + op[i] + d[i] * (k[i] - 1) + 1) as i64;
        let target = match &out_shape {
            Some(o) => {
                ensure!(o.len() >= r, "output_shape {o:?} has fewer than {r} values");
                Some(o[o.len() - r + li])
            }
            None if auto == "SAME_UPPER" || auto == "SAME_LOWER" => Some((sp[i] * s[i]) as i64),
            None => None,
        };
        pads[i] = match target {
            // As the ONNX reference: a negative total adds zeros.
            Some(t) => {
                let total = full - t;
                let half = total.div_euclid(2);
                if auto == "SAME_UPPER" {
                    [half, total - half]
                } else {
                    [total - half, half]
                }
            }
            None if auto == "VALID" => [0, 0],
            None => {
                let pv = list(n, "pads", 2 * r, 0)?;
                [pv[li] as i64, pv[li + r] as i64]
            }
        };
    }
    let kt = flip_kernel(&w, group)?;
    // Spread x by the stride: a zero after each element, per spatial dim.
    let [nn, c, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let b = p.eb();
    let mut t = dev::shaped(b, &x, [1, wd, h, c * nn])?;
    if s[1] > 1 {
        t = b.op(Op::PadEx { lo: [0; 4], hi: [s[1] - 1, 0, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[t])?;
    }
    let w2 = s[1] * wd;
    t = b.reshape(&t, [w2, 1, h, c * nn])?;
    if s[0] > 1 {
        t = b.op(Op::PadEx { lo: [0; 4], hi: [0, s[0] - 1, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[t])?;
    }
    let h2 = s[0] * h;
    let t = b.reshape(&t, [w2, h2, c, nn])?;
    let mut spread = Dev { t, shape: vec![nn, c, h2, w2], elem: x.elem };
    // Borders: (k-1)*d - pad before; the spread's trailing zeros count after.
    let mut geo = [Geo { k: 1, s: 1, d: 1, pb: 0, pe: 0 }; 2];
    for i in 0..2 {
        let span = d[i] * (k[i] - 1);
        let before = span as i64 - pads[i][0];
        let after = span as i64 - pads[i][1] + op[i] as i64 - (s[i] as i64 - 1);
        let axis = 2 + i;
        let (mut lo, mut hi) = (before, after);
        if lo < 0 || hi < 0 {
            let start = (-lo).max(0) as usize;
            let len = spread.shape[axis] as i64 - start as i64 - (-hi).max(0);
            ensure!(len > 0, "ConvTranspose: the pads remove the whole output");
            spread = narrow(p.eb(), &spread, axis, start, len as usize)?;
            lo = lo.max(0);
            hi = hi.max(0);
        }
        geo[i] = Geo { k: k[i], s: 1, d: d[i], pb: lo as usize, pe: hi as usize };
    }
    let kne = [kt.shape[3], kt.shape[2], kt.shape[1], kt.shape[0]];
    let key = super::common::derived_key("flip", &[&wv]).map(|k| format!("{k}/{group}"));
    let kv: Vec<f32> = kt.f64s().iter().map(|&v| v as f32).collect();
    let dtype = if p.b.f16 && kv.len() >= super::matmul::F16_MIN { DType::F16 } else { DType::F32 };
    let wt = p.b.constant(key.as_deref(), dtype, kne, move || Ok(kv))?;
    let spread = dev::canonical(p.eb(), &spread)?;
    let mut y = conv2d(p, &spread, wt, group, geo)?;
    if let Some(bv) = opt(ins, 2) {
        let bd = p.dev(bv)?;
        let bd = reshape(p.eb(), &bd, vec![1, bd.shape.iter().product(), 1, 1])?;
        y = binary(p.eb(), BinFn::Add, &y, &bd, y.elem)?;
    }
    if nsp == 1 {
        let sh = vec![y.shape[0], y.shape[1], y.shape[3]];
        y = reshape(p.eb(), &y, sh)?;
    }
    one(y)
}
