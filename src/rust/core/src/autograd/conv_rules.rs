//! The forward and backward rules of the 2-D convolution ([`Conv2d`]).
//!
//! Where the backend has the direct convolution (`Op::ConvCl`, the CPU) the
//! forward, the kernel's gradient and (stride 1) the input's gradient read
//! the channels-first values in place: no patches are made or saved; the
//! input gradient is the same convolution with its taps walked backwards
//! over the output's gradient and the kernel's channels swapped. Elsewhere
//! the engine's convolution pieces, `im2col` and a product (fused with the
//! bias and the activation where the backend has it):
//!
//! - Forward: the input `[C, W, H, N]` (channels first) is permuted to the
//!   engine's `[W, H, C, N]`, unfolded by `im2col` into patches
//!   `[KW KH C, OW OH N]`, and `out = kernel' %*% patches + bias` with the
//!   kernel permuted to `[KW KH C, filters]`; the product's result
//!   `[filters, OW OH N]` is already channels first.
//! - Kernel gradient: `gz %*% t(patches)`, permuted back to the kernel's
//!   layout; bias gradient: the row sums of `gz`.
//! - Input gradient: the transposed convolution. Where the backend has
//!   `im2col_back` (the CPU), the patches' gradient `t(kernel') %*% gz`
//!   summed back into the image by it; elsewhere a convolution with stride
//!   1 of `gz` (its values spread `stride` apart with zeros between) with
//!   the kernel flipped and its channels swapped, padded by `d (k - 1) - p`,
//!   whose product again gives channels first.

use super::conv::{Conv2d, NAME};
use super::graph::GraphBuilder;
use super::nodes::{act_grad, cast, contig, linear, row_sums};
use super::op::AgActivation;
use super::value::EngineVal;
use crate::base::dtype::DType;
use crate::op::conv_cl::{ClGeom, ConvCl};
use crate::op::Op as G;
use crate::tensor::Context;
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::sync::Arc;

type T = Arc<ETensor>;

/// `x` (contiguous) as the permuted copy `permute(x, axes)`, or a view
/// when the permutation moves only sizes of 1.
// BOUNDS-FN: `ne` and `axes` are [usize; 4] indexed by i in 0..4; every
// caller passes `axes` as a literal permutation of 0..4, so axes[i] < 4;
// `windows(2)` gives slices of 2.
fn permuted(c: &Context, x: &T, ne: [usize; 4], axes: [usize; 4]) -> Result<T> {
    let x4 = c.reshape(&contig(c, x)?, &ne)?;
    let mut out = [0; 4];
    for i in 0..4 {
        out[axes[i]] = ne[i];
    }
    let moved: Vec<usize> = (0..4).filter(|&i| ne[i] > 1).map(|i| axes[i]).collect();
    if moved.windows(2).all(|w| w[0] < w[1]) {
        return c.reshape(&x4, &out);
    }
    c.op(G::Cont, &[c.permute(&x4, axes)?])
}

/// The engine's 2-D `im2col` with strides `s`, paddings `p` and dilations `d`.
// BOUNDS-FN: `s`, `p` and `d` are [usize; 2] indexed by literals.
fn im2col(s: [usize; 2], p: [usize; 2], d: [usize; 2]) -> G {
    let i = |v: usize| v as i32;
    G::Im2Col { s0: i(s[0]), s1: i(s[1]), p0: i(p[0]), p1: i(p[1]), d0: i(d[0]), d1: i(d[1]), is_2d: true }
}

/// The adjoint of the forward's `im2col`.
// BOUNDS-FN: `stride`, `pad` and `dil` are [usize; 2] indexed by literals.
fn im2col_back(g: &Conv2d) -> G {
    let i = |v: usize| v as i32;
    let (s, p, d) = (g.stride, g.pad, g.dil);
    G::Im2ColBack {
        s0: i(s[0]),
        s1: i(s[1]),
        p0: i(p[0]),
        p1: i(p[1]),
        d0: i(d[0]),
        d1: i(d[1]),
        kw: i(g.kw),
        kh: i(g.kh),
        w: i(g.w),
        h: i(g.h),
    }
}

/// The geometry of the direct convolution for `g`.
fn geom(g: &Conv2d) -> Result<ClGeom> {
    ClGeom::conv(g.stride, g.pad, g.dil, [g.kw, g.kh], g.w, g.h)
}

/// The forward: the output `[filters, OW OH N]` and the saved patches
/// (none where the backend convolves directly).
pub fn forward(b: &GraphBuilder, c: &Context, g: &Conv2d, a: AgActivation, xs: &[EngineVal]) -> Result<(T, Vec<(T, usize, usize)>)> {
    let [k, x, bias] = xs else { bail!("{NAME}: expected 3 inputs (kernel, x, bias), got {}", xs.len()) };
    let f = k.rows;
    let n = x.len() / g.sample();
    let (ow, oh) = g.out_size()?;
    let (k, x, bias) = (cast(b, c, &k.t)?, cast(b, c, &x.t)?, cast(b, c, &bias.t)?);
    let direct = G::ConvCl(ConvCl::Forward { g: geom(g)?, act: a.unary() });
    if b.supports(&direct) {
        // Read straight from the channels-first input: no patches to save.
        let x4 = c.reshape(&contig(c, &x)?, &[g.c, g.w, g.h, n])?;
        let k4 = c.reshape(&contig(c, &k)?, &[f, g.c, g.kw, g.kh])?;
        let out = c.op(direct, &[k4, x4, bias])?;
        return Ok((c.reshape(&out, &[f, ow * oh * n])?, Vec::new()));
    }
    let img = permuted(c, &x, [g.c, g.w, g.h, n], [2, 0, 1, 3])?;
    // kernel [F, C, KW, KH] -> [KW, KH, C, F]
    let kp = permuted(c, &k, [f, g.c, g.kw, g.kh], [3, 2, 0, 1])?;
    let cols = c.op(im2col(g.stride, g.pad, g.dil), &[kp.clone(), img])?;
    let p = ow * oh * n;
    let cols = c.reshape(&cols, &[g.patch(), p])?;
    let kp2 = c.reshape(&kp, &[g.patch(), f])?;
    // linear() takes the kernel as [F, K]: a transposed view of kp2.
    let out = linear(b, c, &c.transpose(&kp2)?, &cols, &bias, a)?;
    Ok((out, vec![(cols, g.patch(), p)]))
}

/// The gradients of kernel, input and bias (where `need` asks) from the
/// output's gradient `gt` `[filters, OW OH N]`.
// BOUNDS-FN: `need` is [bool; 3] and `res` a Vec of 3, indexed by literals.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    b: &mut GraphBuilder,
    c: &Context,
    g: &Conv2d,
    a: AgActivation,
    xs: &[EngineVal],
    out: &EngineVal,
    saved: &[EngineVal],
    gt: &T,
    need: [bool; 3],
) -> Result<Vec<Option<T>>> {
    let [kernel, x, _] = xs else { bail!("{NAME}: expected 3 inputs (kernel, x, bias), got {}", xs.len()) };
    let f = kernel.rows;
    let n = x.len() / g.sample();
    let (ow, oh) = g.out_size()?;
    let gz = if a == AgActivation::None { gt.clone() } else { act_grad(b, c, a, gt, &out.t)? };
    let mut res = vec![None, None, None];
    if need[0] {
        let dk = match saved.first() {
            // The forward read the input directly (no patches): so does the gradient.
            None => {
                let x4 = c.reshape(&contig(c, &cast(b, c, &x.t)?)?, &[g.c, g.w, g.h, n])?;
                let gz4 = c.reshape(&contig(c, &gz)?, &[f, ow, oh, n])?;
                c.op(G::ConvCl(ConvCl::Weights(geom(g)?)), &[gz4, x4])?
            }
            // [F, KW KH C] in the patches' order -> the kernel's [F, C KW KH].
            Some(cols) => permuted(c, &c.op(G::OutProd, &[gz.clone(), cols.t.clone()])?, [f, g.kw, g.kh, g.c], [0, 2, 3, 1])?,
        };
        res[0] = Some(c.reshape(&dk, &[f, g.patch()])?);
    }
    if need[1] {
        res[1] = Some(input_grad(b, c, g, kernel, &gz, (f, ow, oh, n), x.shape())?);
    }
    if need[2] {
        res[2] = Some(row_sums(b, c, &gz, f)?);
    }
    Ok(res)
}

/// The input's gradient `[rows, cols]` (the input's shape).
// BOUNDS-FN: `dil` and `pad` are [usize; 2], `ne()` is [usize; 4] and `nb`
// Dims ([usize; MAX_DIMS]), all indexed by literals.
fn input_grad(
    b: &mut GraphBuilder,
    c: &Context,
    g: &Conv2d,
    kernel: &EngineVal,
    gz: &T,
    (f, ow, oh, n): (usize, usize, usize, usize),
    (rows, cols): (usize, usize),
) -> Result<T> {
    if g.stride == [1, 1] {
        let geo = ClGeom::input_grad(&geom(g)?, g.w, g.h)?;
        let direct = G::ConvCl(ConvCl::Forward { g: geo, act: None });
        if b.supports(&direct) {
            // The taps walked backwards over the output's gradient, with the
            // kernel's channels swapped: [F, C, KW, KH] -> [C, F, KW, KH].
            let k = cast(b, c, &kernel.t)?;
            let kt = permuted(c, &k, [f, g.c, g.kw, g.kh], [1, 0, 2, 3])?;
            let gz4 = c.reshape(&contig(c, gz)?, &[f, ow, oh, n])?;
            let dx = c.op(direct, &[kt, gz4])?;
            return c.reshape(&dx, &[rows, cols]);
        }
    }
    let back = im2col_back(g);
    if b.supports(&back) {
        let k = cast(b, c, &kernel.t)?;
        // kernel [F, C, KW, KH] -> [F, KW, KH, C]: t(kernel') with F fastest.
        let kt = permuted(c, &k, [f, g.c, g.kw, g.kh], [0, 3, 1, 2])?;
        let kt = c.reshape(&kt, &[f, g.patch()])?;
        let dcols = c.op(G::MulMat, &[kt, gz.clone()])?;
        let dcols = c.reshape(&dcols, &[g.patch(), ow, oh, n])?;
        let img = c.op(back, &[dcols])?;
        let dx = permuted(c, &img, [g.w, g.h, g.c, n], [1, 2, 0, 3])?;
        return c.reshape(&dx, &[rows, cols]);
    }
    let [s0, s1] = g.stride;
    // gz as an image [OW, OH, F, N]...
    let mut dz = permuted(c, gz, [f, ow, oh, n], [2, 0, 1, 3])?;
    if s0 > 1 || s1 > 1 {
        // ...its values `stride` apart, zeros between: [1, OW, 1, OH F N]
        // padded to [s0, OW, s1, OH F N] is [s0 OW, s1 OH, F, N].
        let v = c.reshape(&dz, &[1, ow, 1, oh * f * n])?;
        let p = [(s0 - 1) as i32, 0, (s1 - 1) as i32, 0];
        dz = c.reshape(&c.op(G::Pad { p }, &[v])?, &[s0 * ow, s1 * oh, f, n])?;
    }
    // The flipped kernel [KW, KH, F, C]: element (kx, ky, o, i) is the
    // kernel's (o, i + C ((KW-1-kx) + KW (KH-1-ky))).
    let (kw, kh, ch) = (g.kw, g.kh, g.c);
    let mut idx = Vec::with_capacity(kw * kh * f * ch);
    for i in 0..ch {
        for o in 0..f {
            for ky in 0..kh {
                for kx in 0..kw {
                    let col = i + ch * ((kw - 1 - kx) + kw * (kh - 1 - ky));
                    idx.push((o + f * col) as f64);
                }
            }
        }
    }
    let ix = b.data(c, Some(DType::I32), &[idx.len()], idx)?;
    let k = cast(b, c, &kernel.t)?;
    let flat = c.reshape(&contig(c, &k)?, &[1, f * g.patch()])?;
    let kf = c.reshape(&c.op(G::GetRows, &[flat, ix])?, &[kw, kh, f, ch])?;
    let pad = [g.dil[0] * (kw - 1) - g.pad[0], g.dil[1] * (kh - 1) - g.pad[1]];
    let cols2 = c.op(im2col([1, 1], pad, g.dil), &[kf.clone(), dz])?;
    let (w2, h2) = (cols2.ne()[1], cols2.ne()[2]);
    let cols2 = c.reshape(&cols2, &[kw * kh * f, w2 * h2 * n])?;
    let kf2 = c.reshape(&kf, &[kw * kh * f, ch])?;
    let mut dx = c.op(G::MulMat, &[kf2, cols2])?;
    if (w2, h2) != (g.w, g.h) {
        // The spread gradient can reach past the input: keep [C, W, H, N].
        let d4 = c.reshape(&dx, &[ch, w2, h2, n])?;
        let l = d4.layout();
        let v = c.view(&d4, &[ch, g.w, g.h, n], &[l.nb[1], l.nb[2], l.nb[3]], 0)?;
        dx = c.op(G::Cont, &[v])?;
    }
    c.reshape(&dx, &[rows, cols])
}
