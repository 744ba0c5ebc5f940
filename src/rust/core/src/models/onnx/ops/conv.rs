//! Convolutions: Conv (1-D, 2-D and 3-D, groups, dilations, strides,
//! explicit or automatic padding). On the CPU a 2-D convolution without
//! groups is the engine's blocked convolution and one with a group per
//! channel its depthwise convolution (asymmetric padding added first);
//! other groupings, and Vulkan, unfold with `im2col` then take one
//! `mul_mat` (batched over groups). A 3-D convolution is a 2-D one over
//! the depth windows (each output depth's KD input slices stacked as
//! channels, the output depths as batch). ConvTranspose is a convolution
//! of the input spread by the stride with the flipped kernel.

use super::common::{arg, one, opt, Fold, Lower};
use crate::base::dtype::DType;
use crate::models::onnx::dev::{self, binary, narrow, reshape};
use crate::models::onnx::host::{fmt_shape, strides, HTensor};
use crate::models::onnx::model::OnnxNode;
use crate::models::onnx::plan::Planner;
use crate::models::onnx::val::{Dev, Val};
use crate::op::conv::Conv;
use crate::op::{BinFn, Op, PadMode, UnaryOp};
use crate::tensor::Tensor;
use anyhow::{bail, ensure};
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "Conv" => (Some(lower_conv), None),
        "Conv+Relu" => (Some(lower_conv_relu), None),
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

fn list(n: &OnnxNode, name: &str, len: usize, default: i64) -> crate::Result<Vec<usize>> {
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
// BOUNDS-FN: s and d have r entries, p has 2 * r, k.len() == r is checked; i < r.
pub fn geometry(n: &OnnxNode, sp: &[usize], k: &[usize]) -> crate::Result<Vec<Geo>> {
    let r = sp.len();
    ensure!(k.len() == r, "the kernel has {} spatial dimensions, the input {r}", k.len());
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
    ensure!(o > 0, "no window starts inside an input of size {input} (padding {} before)", g.pb);
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
// BOUNDS-FN: x's rank 4 is checked first.
pub fn conv2d(p: &mut Planner, x: &Dev, w: T, group: usize, geo: [Geo; 2]) -> crate::Result<Dev> {
    Ok(conv2d_act(p, x, w, group, geo, None, None)?.0)
}

/// [`conv2d`], and on the CPU, where the convolution is the engine's own,
/// the bias `bias` (`[OC]`) and the activation `act` in the same node
/// (`ConvAct`). The flag says whether they were: when false the caller
/// adds the bias and applies the activation.
// BOUNDS-FN: x's rank 4 is checked first.
pub fn conv2d_act(p: &mut Planner, x: &Dev, w: T, group: usize, geo: [Geo; 2], bias: Option<&Dev>, act: Option<UnaryOp>) -> crate::Result<(Dev, bool)> {
    ensure!(x.shape.len() == 4, "internal: a 2-D convolution of an input of shape {}", fmt_shape(&x.shape));
    let [nn, c, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
    let [kw, kh, cg, oc] = w.ne();
    ensure!(group >= 1 && c == cg * group, "the input has {c} channels, the kernel {cg} per group in {group} groups");
    ensure!(oc % group == 0, "{oc} output channels do not split into {group} groups");
    let [gh, gw] = geo;
    let oh = out_size(h, &gh, false)?;
    let ow = out_size(wd, &gw, false)?;
    let cpu = !p.b.backend.is_vulkan();
    let b = p.eb();
    let mut xt = dev::shaped(b, x, [wd, h, c, nn])?;
    let (p0, p1) = if gh.pb != gh.pe || gw.pb != gw.pe {
        xt = b.op(Op::PadEx { lo: [gw.pb, gh.pb, 0, 0], hi: [gw.pe, gh.pe, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[xt])?;
        (0, 0)
    } else {
        (gw.pb, gh.pb)
    };
    let elem = super::common::float_result(x.elem);
    // On the CPU the engine's convolutions: the blocked one (which unfolds
    // a band of rows at a time into the cache) without groups, the
    // depthwise one with a group per channel.
    let [s0, s1, d0, d1] = [gw.s, gh.s, gw.d, gh.d].map(|v| v as i32);
    let (p0, p1) = (p0 as i32, p1 as i32);
    let direct = match (group, cg, oc) {
        (1, _, _) => Some(Conv::Direct2d { s0, s1, p0, p1, d0, d1 }),
        (g, 1, o) if o == g => Some(Conv::Depthwise2d { s0, s1, p0, p1, d0, d1 }),
        _ => None,
    };
    if let Some(op) = direct.filter(|_| cpu) {
        let fuse = bias.is_some() || act.is_some();
        let t = if fuse {
            let mut srcs = vec![w, xt];
            if let Some(bd) = bias {
                srcs.push(dev::shaped(b, bd, [oc, 1, 1, 1])?);
            }
            b.op(Op::ConvAct { conv: op, act }, &srcs)?
        } else {
            b.op(Op::Conv(op), &[w, xt])?
        }; // [OW, OH, OC, N]
        ensure!(t.ne() == [ow, oh, oc, nn], "internal: the convolution's result {:?} is not [{ow}, {oh}, {oc}, {nn}]", t.ne());
        return Ok((Dev { t, shape: vec![nn, oc, oh, ow], elem }, fuse));
    }
    // The kernel operand of im2col only gives sizes: a zero-stride view.
    let row = b.leaf(DType::F32, [kw, 1, 1, 1])?;
    let kshape = b.view(&row, [kw, kh, c, 1], [4, 0, 0, 0], 0)?;
    let op = Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d: true };
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
    Ok((Dev { t, shape: vec![nn, oc, oh, ow], elem }, false))
}

/// 3-D convolution of `x` [N, C, D, H, W] by kernel `w` (ggml [KW, KH,
/// Cg*KD, OC], an ONNX [OC, Cg, KD, KH, KW] tensor as it is) with depth
/// `kd`, geometry `geo` (D, H, W) -> [N, OC, OD, OH, OW].
// BOUNDS-FN: x's rank 5 is checked first; geo is a [Geo; 3]; conv2d's result has rank 4
// ([N*OD, OC, OH, OW]).
pub fn conv3d(p: &mut Planner, x: &Dev, w: T, kd: usize, group: usize, geo: [Geo; 3]) -> crate::Result<Dev> {
    ensure!(x.shape.len() == 5, "internal: a 3-D convolution of an input of shape {}", fmt_shape(&x.shape));
    ensure!(kd > 0, "the kernel has depth 0");
    let [nn, c, d] = [x.shape[0], x.shape[1], x.shape[2]];
    let (h, wd) = (x.shape[3], x.shape[4]);
    let gd = geo[0];
    let od = out_size(d, &gd, false)?;
    // Depth padded with zeros, then per tap the strided depth slices.
    let xt = dev::canonical(p.eb(), x)?;
    let plane = h * wd;
    let lo = gd.pb;
    let need = (od - 1) * gd.s + gd.d * (kd - 1) + 1;
    let hi = need.saturating_sub(d + lo);
    let dp = d + lo + hi;
    let b = p.eb();
    let mut t = b.reshape(&xt.t, [plane, d, c * nn, 1])?;
    if lo + hi > 0 {
        t = b.op(Op::PadEx { lo: [0, lo, 0, 0], hi: [0, hi, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[t])?;
    }
    let es = t.dtype().size();
    let mut taps = Vec::with_capacity(kd);
    for j in 0..kd {
        let v = b.view(&t, [plane, od, c * nn, 1], [es, plane * gd.s * es, plane * dp * es, plane * dp * c * nn * es], j * gd.d * plane * es)?;
        let v = b.contig(&v)?;
        taps.push(Dev { t: b.reshape(&v, dev::ne_of(&[nn, c, 1, od, h, wd]))?, shape: vec![nn, c, 1, od, h, wd], elem: x.elem });
    }
    let st = dev::concat(b, &taps, 2)?; // [N, C, KD, OD, H, W]
    let st = dev::permute(b, &st, &[0, 3, 1, 2, 4, 5])?; // [N, OD, C, KD, H, W]
    let st = reshape(b, &st, vec![nn * od, c * kd, h, wd])?;
    let y = conv2d(p, &st, w, group, [geo[1], geo[2]])?; // [N*OD, OC, OH, OW]
    let (oc, oh, ow) = (y.shape[1], y.shape[2], y.shape[3]);
    let y = reshape(p.eb(), &y, vec![nn, od, oc, oh, ow])?;
    dev::permute(p.eb(), &y, &[0, 2, 1, 3, 4])
}

/// `x` [N, C, L] as [N, C, 1, L] and back: 1-D convolutions are 2-D ones.
fn spatial(n: &OnnxNode, x: &Val, w: &Val) -> crate::Result<usize> {
    let r = x.shape().len();
    ensure!(r == w.shape().len(), "the input {} and the kernel {} differ in rank", fmt_shape(x.shape()), fmt_shape(w.shape()));
    match r {
        3..=5 => Ok(r - 2),
        _ => bail!("{} with {} spatial dimensions is not supported (1, 2 or 3)", n.op, r.saturating_sub(2)),
    }
}

pub(super) fn lower_conv(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    lower_conv_act(p, n, ins, None)
}

/// A Conv node whose only reader is a Relu, as the two in one (the
/// planner asks for the pair "Conv+Relu").
fn lower_conv_relu(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    lower_conv_act(p, n, ins, Some(UnaryOp::Relu))
}

/// A Conv node, then the activation `act` on its result.
// BOUNDS-FN: spatial() gives nsp with x and w both of rank nsp + 2 (3 to 5), so ws[2..]
// and sp have nsp entries and geometry() gives nsp; ws[4] and g[2] only when nsp == 3;
// conv2d's result has rank 4; ws[0] exists (rank 3 or more).
fn lower_conv_act(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>], act: Option<UnaryOp>) -> crate::Result<Vec<Val>> {
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
    if nsp == 3 {
        let w = weight(p, &wv, [ws[4], ws[3], ws[1] * ws[2], ws[0]])?;
        let mut y = conv3d(p, &x, w, ws[2], group, [g[0], g[1], g[2]])?;
        if let Some(bv) = opt(ins, 2) {
            let bd = p.dev(bv)?;
            let bd = reshape(p.eb(), &bd, vec![1, bd.shape.iter().product(), 1, 1, 1])?;
            y = binary(p.eb(), BinFn::Add, &y, &bd, y.elem)?;
        }
        return one(activate(p, y, act)?);
    }
    let (geo, kne) = if nsp == 1 {
        x = reshape(p.eb(), &x, vec![x.shape[0], x.shape[1], 1, sp[0]])?;
        ([Geo { k: 1, s: 1, d: 1, pb: 0, pe: 0 }, g[0]], [ws[2], 1, ws[1], ws[0]])
    } else {
        ([g[0], g[1]], [ws[3], ws[2], ws[1], ws[0]])
    };
    let w = weight(p, &wv, kne)?;
    let bias = match opt(ins, 2) {
        Some(bv) => Some(p.dev(bv)?),
        None => None,
    };
    let bias_ok = bias.as_ref().is_none_or(|b| b.shape.iter().product::<usize>() == ws[0]);
    let fused = if bias_ok { (bias.as_ref(), act) } else { (None, None) };
    let (mut y, done) = conv2d_act(p, &x, w, group, geo, fused.0, fused.1)?;
    if !done {
        if let Some(bd) = &bias {
            let bd = reshape(p.eb(), bd, vec![1, bd.shape.iter().product(), 1, 1])?;
            y = binary(p.eb(), BinFn::Add, &y, &bd, y.elem)?;
        }
        y = activate(p, y, act)?;
    }
    if nsp == 1 {
        let s = vec![y.shape[0], y.shape[1], y.shape[3]];
        y = reshape(p.eb(), &y, s)?;
    }
    one(y)
}

/// `act` applied to `y` (none: `y` itself).
fn activate(p: &mut Planner, y: Dev, act: Option<UnaryOp>) -> crate::Result<Dev> {
    match act {
        Some(u) => crate::models::onnx::dev::unary(p.eb(), Op::Unary(u), &y, y.elem),
        None => Ok(y),
    }
}

/// ConvTranspose weights [C, OCg, K...] as a convolution kernel
/// [G*OCg, Cg, K...]: channels swapped per group, taps flipped.
// BOUNDS-FN: w has the rank of the input, 3 to 5 (spatial(); 1-D reshaped to 4), so
// s[0], s[1] and s[2..] exist; q has out.len() = s.len() entries and q[a] < s[a]; st
// has s.len(); idx is checked by pick.
fn flip_kernel(w: &HTensor, group: usize) -> crate::Result<HTensor> {
    let s = &w.shape;
    let (c, ocg) = (s[0], s[1]);
    ensure!(c % group == 0, "{c} input channels do not split into {group} groups");
    let cg = c / group;
    let st = strides(s);
    let mut out = vec![group * ocg, cg];
    out.extend_from_slice(&s[2..]);
    let idx = crate::models::onnx::host::index_map(&out, |q| {
        let (o, ci) = (q[0], q[1]);
        let (g, og) = (o / ocg, o % ocg);
        let mut i = (g * cg + ci) * st[0] + og * st[1];
        for a in 2..s.len() {
            i += (s[a] - 1 - q[a]) * st[a];
        }
        i
    })?;
    w.pick(&idx, out)
}

// BOUNDS-FN: strides, dil, opad have r = nsp entries (list checks), s, d, op have ns (2
// for 1-D); x and w have rank ns + 2, so k, sp have ns; li < r, o.len() >= r is
// checked, pv has 2 * r; pads and geo have ns; ks has rank ns + 2 (flip_kernel keeps
// it); the result has rank ns + 2.
fn lower_conv_transpose(p: &mut Planner, n: &OnnxNode, ins: &[Option<Val>]) -> crate::Result<Vec<Val>> {
    let (xv, wv) = (arg(ins, 0, "X")?.clone(), arg(ins, 1, "W")?.clone());
    let nsp = spatial(n, &xv, &wv)?;
    let group = n.int("group", 1).max(1) as usize;
    let mut w = (*p.value_of(&wv, "weights")?).clone();
    let mut x = p.dev(&xv)?;
    let r = nsp;
    let strides = list(n, "strides", r, 1)?;
    let dil = list(n, "dilations", r, 1)?;
    let opad = list(n, "output_padding", r, 0)?;
    // 1-D as 2-D with a unit height; `off` maps engine axes to the node's.
    let (s, d, op, off) = if nsp == 1 {
        x = reshape(p.eb(), &x, vec![x.shape[0], x.shape[1], 1, x.shape[2]])?;
        w = w.reshaped(vec![w.shape[0], w.shape[1], 1, w.shape[2]])?;
        (vec![1, strides[0]], vec![1, dil[0]], vec![0, opad[0]], 1)
    } else {
        (strides, dil, opad, 0)
    };
    let ns = s.len();
    let k: Vec<usize> = w.shape[2..].to_vec();
    let sp: Vec<usize> = x.shape[2..].to_vec();
    ensure!(
        sp.iter().chain(&k).all(|&v| v > 0),
        "ConvTranspose needs positive input and kernel sizes, not input {} and weights {}",
        fmt_shape(&x.shape),
        fmt_shape(&w.shape)
    );
    // Pads: explicit, or from auto_pad / output_shape.
    let auto = n.string("auto_pad", "NOTSET");
    let out_shape = n.ints("output_shape");
    let mut pads = vec![[0i64; 2]; ns];
    for i in off..ns {
        let li = i - off;
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
    // Spread x by the stride: s - 1 zeros after each element, per spatial
    // axis (the axis viewed as [outer, L, 1, inner], the unit axis padded).
    let mut spread = dev::canonical(p.eb(), &x)?;
    for i in 0..ns {
        if s[i] == 1 {
            continue;
        }
        let a = 2 + i;
        let inner: usize = spread.shape[a + 1..].iter().product();
        let outer: usize = spread.shape[..a].iter().product();
        let l = spread.shape[a];
        let b = p.eb();
        let t = dev::shaped(b, &spread, [inner, 1, l, outer])?;
        let t = b.op(Op::PadEx { lo: [0; 4], hi: [0, s[i] - 1, 0, 0], mode: PadMode::Constant, value: 0.0 }, &[t])?;
        let mut shape = spread.shape.clone();
        shape[a] = l * s[i];
        let t = b.reshape(&t, dev::ne_of(&shape))?;
        spread = Dev { t, shape, elem: x.elem };
    }
    // Borders: (k-1)*d - pad before; the spread's trailing zeros count after.
    let mut geo = vec![Geo { k: 1, s: 1, d: 1, pb: 0, pe: 0 }; ns];
    for i in 0..ns {
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
    let ks = &kt.shape;
    // ggml [KW, KH, Cg*KD, OC]: the flipped [OC, Cg, (KD,) KH, KW] as it is.
    let kne = if ns == 3 { [ks[4], ks[3], ks[1] * ks[2], ks[0]] } else { [ks[3], ks[2], ks[1], ks[0]] };
    let key = super::common::derived_key("flip", &[&wv]).map(|k| format!("{k}/{group}"));
    let kv: Vec<f32> = kt.f64s().iter().map(|&v| v as f32).collect();
    let dtype = if p.b.f16 && kv.len() >= super::matmul::F16_MIN { DType::F16 } else { DType::F32 };
    let wt = p.b.constant(key.as_deref(), dtype, kne, move || Ok(kv))?;
    let spread = dev::canonical(p.eb(), &spread)?;
    let mut y = if ns == 3 {
        conv3d(p, &spread, wt, ks[2], group, [geo[0], geo[1], geo[2]])?
    } else {
        conv2d(p, &spread, wt, group, [geo[0], geo[1]])?
    };
    if let Some(bv) = opt(ins, 2) {
        let bd = p.dev(bv)?;
        let mut bs = vec![1usize; y.shape.len()];
        bs[1] = bd.shape.iter().product();
        let bd = reshape(p.eb(), &bd, bs)?;
        y = binary(p.eb(), BinFn::Add, &y, &bd, y.elem)?;
    }
    if nsp == 1 {
        let sh = vec![y.shape[0], y.shape[1], y.shape[3]];
        y = reshape(p.eb(), &y, sh)?;
    }
    one(y)
}
