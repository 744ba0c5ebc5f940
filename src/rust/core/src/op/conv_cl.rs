//! 2-D convolutions on the channels-innermost layout of the Keras-style
//! layers (one sample of `C` channels, `W` columns and `H` rows is
//! `c + C (x + W y)`, a batch of `N` samples `[C, W, H, N]`), read straight
//! from the input: no unfolded patches are made. Computed by the CPU
//! backend only (elsewhere builders use im2col and products).
//!
//! Along each axis an output position `o` and a kernel tap `k` read the
//! input at `o s + a + k d` ([`ClGeom`]); a position outside the input
//! reads zero. With `s` the stride, `a = -pad` and `d` the dilation that is
//! a convolution; with `s = 1`, `a = pad`, `d = -dilation` and the kernel's
//! channels swapped, it is the input gradient of a stride-1 convolution.
//!
//! - [`ConvCl::Forward`]: srcs [kernel `[OC, IC, KW, KH]`, x `[IC, W, H, N]`,
//!   bias (`OC` values, optional)] -> `[OC, OW, OH, N]` (`OW`, `OH` from the
//!   geometry): `act(bias[o] + sum over i, kx, ky of kernel[o, i, kx, ky]
//!   x[i, ox s + a + kx d, oy s + a + ky d])`.
//! - [`ConvCl::Weights`]: srcs [g `[OC, OW, OH, N]`, x `[IC, W, H, N]`] ->
//!   `[OC, IC, KW, KH]`: the kernel's gradient, the sum over positions and
//!   samples of `g[o, ox, oy] x[i, ox s + a + kx d, oy s + a + ky d]`.

use super::rules::{f32_or_f64, float, out_size, sh, src, Out};
use crate::layout::Layout;
use anyhow::ensure;

/// The geometry: per axis (width, height) the stride `s`, the offset `a`
/// and the tap step `d` (source `o s + a + k d`), the kernel's size `k`
/// and the output's size `out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClGeom {
    pub s: [i32; 2],
    pub a: [i32; 2],
    pub d: [i32; 2],
    pub k: [i32; 2],
    pub out: [i32; 2],
}

impl ClGeom {
    /// The geometry of a convolution with strides `s`, paddings `p` and
    /// dilations `d` of a `k` kernel over a `w` x `h` input (its output
    /// size, or an error when the kernel does not fit).
    // BOUNDS-FN: `v`, `k`, `s`, `d` and `pad` are [_; 2] indexed by 0 and 1
    // (literals, or `i` of the two calls of `size`).
    pub fn conv(s: [usize; 2], p: [usize; 2], d: [usize; 2], k: [usize; 2], w: usize, h: usize) -> crate::Result<ClGeom> {
        let c = |v: [usize; 2]| -> crate::Result<[i32; 2]> { Ok([i32::try_from(v[0])?, i32::try_from(v[1])?]) };
        let (s, d, k, pad) = (c(s)?, c(d)?, c(k)?, c(p)?);
        let size = |what: &str, n: usize, i: usize| -> crate::Result<i32> {
            Ok(i32::try_from(out_size(what, n, k[i] as usize, s[i], pad[i].into(), d[i])?)?)
        };
        let out = [size("conv_cl width", w, 0)?, size("conv_cl height", h, 1)?];
        Ok(ClGeom { s, a: [-pad[0], -pad[1]], d, k, out })
    }

    /// The geometry of the input gradient of convolution `g` (stride 1) over
    /// a `w` x `h` input: the same taps walked backwards from the output's
    /// gradient.
    // BOUNDS-FN: the geometry's fields are [i32; 2] indexed by literals.
    pub fn input_grad(g: &ClGeom, w: usize, h: usize) -> crate::Result<ClGeom> {
        ensure!(g.s == [1, 1], "internal: the direct input gradient needs stride 1");
        Ok(ClGeom { s: [1, 1], a: [-g.a[0], -g.a[1]], d: [-g.d[0], -g.d[1]], k: g.k, out: [i32::try_from(w)?, i32::try_from(h)?] })
    }

    fn check(&self) -> crate::Result<()> {
        ensure!(
            self.s.iter().chain(&self.k).chain(&self.out).all(|&v| v > 0) && self.d.iter().all(|&v| v != 0),
            "conv_cl: strides, kernel and output sizes must be positive and steps non-zero ({self:?})"
        );
        Ok(())
    }
}

/// The two ops; `A` is the op set's activation (`UnaryOp`), a parameter so
/// that this module need not import the op set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConvCl<A> {
    Forward { g: ClGeom, act: Option<A> },
    Weights(ClGeom),
}

impl<A> ConvCl<A> {
    pub fn name(&self) -> &'static str {
        match self {
            ConvCl::Forward { .. } => "CONV_CL",
            ConvCl::Weights(_) => "CONV_CL_WEIGHTS",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            ConvCl::Forward { .. } => (2, 3),
            ConvCl::Weights(_) => (2, 2),
        }
    }

    // BOUNDS-FN: `ne` of a Layout is a Dims ([usize; 5]) and the geometry's
    // fields [i32; 2], all indexed by literals.
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let x = src(s, 1)?;
        float(x, "x")?;
        let n = x.ne[3];
        match self {
            ConvCl::Forward { g, .. } => {
                g.check()?;
                let k = src(s, 0)?;
                float(k, "the kernel")?;
                ensure!(
                    k.ne[1] == x.ne[0] && k.ne[2] == g.k[0] as usize && k.ne[3] == g.k[1] as usize,
                    "conv_cl: the kernel ({}) is not [OC, {}, {}, {}] for the input ({})",
                    sh(k),
                    x.ne[0],
                    g.k[0],
                    g.k[1],
                    sh(x)
                );
                if let Some(b) = s.get(2) {
                    float(b, "the bias")?;
                    ensure!(b.nelements() == k.ne[0], "conv_cl: the bias ({}) needs one value per output channel ({})", sh(b), k.ne[0]);
                }
                Ok(Out { dtype: f32_or_f64(&[k, x]), ne: [k.ne[0], g.out[0] as usize, g.out[1] as usize, n] })
            }
            ConvCl::Weights(g) => {
                g.check()?;
                let gz = src(s, 0)?;
                float(gz, "the gradient")?;
                ensure!(
                    gz.ne[1] == g.out[0] as usize && gz.ne[2] == g.out[1] as usize && gz.ne[3] == n,
                    "conv_cl_weights: the gradient ({}) is not [OC, {}, {}, {n}]",
                    sh(gz),
                    g.out[0],
                    g.out[1]
                );
                Ok(Out { dtype: f32_or_f64(&[gz, x]), ne: [gz.ne[0], x.ne[0], g.k[0] as usize, g.k[1] as usize] })
            }
        }
    }
}
