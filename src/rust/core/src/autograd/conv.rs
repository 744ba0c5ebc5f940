//! The geometry of the 2-D convolution op ([`Conv2d`]): its parameters as
//! R passes them, the output size, and the shape rule with the errors
//! users see. Its forward and backward rules are in `conv_rules.rs`.
//!
//! Layout (the Keras-style layers'): one sample of `C` channels, `W`
//! columns and `H` rows is stored channels first, then width, then height
//! (`c + C (x + W y)`); a batch of `N` samples is any `[rows, cols]`
//! matrix holding `C W H N` values in that order. The kernel is
//! `[filters, C KW KH]` (a column per tap and channel: `c + C (kx + KW ky)`),
//! the bias `[filters, 1]`, and the result `[filters, OW OH N]`: the same
//! channels-first order, so convolutions stack without reordering.

use anyhow::{bail, ensure, Result};

fn shape_str((r, c): (usize, usize)) -> String {
    format!("{r}x{c}")
}

/// A 2-D convolution of a batch of images (a 1-D one is the case `H = 1`,
/// `KH = 1`). Sizes come in pairs (width, height).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2d {
    /// Channels, width and height of one input sample.
    pub c: usize,
    pub w: usize,
    pub h: usize,
    /// Kernel width and height.
    pub kw: usize,
    pub kh: usize,
    pub stride: [usize; 2],
    /// Zeros added on each side (the same number before and after).
    pub pad: [usize; 2],
    pub dil: [usize; 2],
}

pub(crate) const NAME: &str = "ggml_layer_conv_2d";

fn whole(v: f64, what: &str, min: usize) -> Result<usize> {
    ensure!(
        v.is_finite() && v.fract() == 0.0 && v >= min as f64 && v <= u32::MAX as f64,
        "{NAME}: `{what}` must be a whole number >= {min}, not {v}"
    );
    Ok(v as usize)
}

impl Conv2d {
    /// From R's parameters (after the activation code): C, W, H, KW, KH,
    /// stride, padding and dilation (each width, then height).
    // BOUNDS-FN: p.len() == 11 (checked first); `n` is called with literals 0..=10.
    pub fn parse(p: &[f64]) -> Result<Conv2d> {
        ensure!(p.len() == 11, "{NAME}: expected 11 convolution parameters, got {}", p.len());
        let n = |i: usize, what: &str, min: usize| whole(p[i], what, min);
        let g = Conv2d {
            c: n(0, "channels", 1)?,
            w: n(1, "width", 1)?,
            h: n(2, "height", 1)?,
            kw: n(3, "kernel width", 1)?,
            kh: n(4, "kernel height", 1)?,
            stride: [n(5, "stride", 1)?, n(6, "stride", 1)?],
            pad: [n(7, "padding", 0)?, n(8, "padding", 0)?],
            dil: [n(9, "dilation", 1)?, n(10, "dilation", 1)?],
        };
        g.out_size()?;
        Ok(g)
    }

    /// Taps of the kernel times channels: the rows of one patch.
    pub fn patch(&self) -> usize {
        self.c * self.kw * self.kh
    }

    /// Values of one input sample.
    pub fn sample(&self) -> usize {
        self.c * self.w * self.h
    }

    /// The kernel's reach along each axis: `d (k - 1) + 1`.
    // BOUNDS-FN: `dil` is [usize; 2] indexed by literals.
    fn reach(&self) -> [usize; 2] {
        [self.dil[0] * (self.kw - 1) + 1, self.dil[1] * (self.kh - 1) + 1]
    }

    /// Output width and height. Padding beyond the kernel's reach (which
    /// adds outputs that read only zeros) is refused.
    // BOUNDS-FN: `reach`, `out`, `pad`, `dil` and `stride` are [usize; 2],
    // indexed by literals or by i from enumerating a 2-element array.
    pub fn out_size(&self) -> Result<(usize, usize)> {
        let reach = self.reach();
        let mut out = [0; 2];
        for (i, (n, what)) in [(self.w, "width"), (self.h, "height")].into_iter().enumerate() {
            ensure!(
                self.pad[i] < reach[i],
                "{NAME}: a padding of {} is wider than the kernel reaches ({}) along the {what}",
                self.pad[i],
                reach[i]
            );
            let padded = n + 2 * self.pad[i];
            ensure!(
                padded >= reach[i],
                "{NAME}: the kernel ({} with dilation {}) does not fit the input's {what} ({n}, padded {padded})",
                if i == 0 { self.kw } else { self.kh },
                self.dil[i]
            );
            out[i] = (padded - reach[i]) / self.stride[i] + 1;
        }
        Ok((out[0], out[1]))
    }

    /// The result's shape for inputs kernel, x and bias, or the error that
    /// names the layer and the shapes.
    pub fn check(&self, x: &[(usize, usize)]) -> Result<(usize, usize)> {
        let &[k, xs, b] = x else {
            bail!("{NAME}: expected 3 inputs (kernel, x, bias), got {}", x.len());
        };
        let f = k.0;
        if k.1 != self.patch() {
            bail!(
                "{NAME}: the kernel is {} but {} channels and a {}x{} kernel need {} columns",
                shape_str(k),
                self.c,
                self.kh,
                self.kw,
                self.patch()
            );
        }
        if b != (f, 1) {
            bail!("{NAME}: the bias must be {f}x1, not {}", shape_str(b));
        }
        let len = xs.0 * xs.1;
        if len == 0 || len % self.sample() != 0 {
            bail!(
                "{NAME}: the input is {} ({len} values), not a whole batch of images of {}x{}x{} (height x width x channels)",
                shape_str(xs),
                self.h,
                self.w,
                self.c
            );
        }
        let (ow, oh) = self.out_size()?;
        Ok((f, ow * oh * (len / self.sample())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(extra: &[f64]) -> Vec<f64> {
        let mut v = vec![3.0, 8.0, 6.0, 3.0, 2.0];
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn geometry_and_errors() {
        let g = Conv2d::parse(&p(&[1.0, 1.0, 0.0, 0.0, 1.0, 1.0])).unwrap();
        assert_eq!(g.out_size().unwrap(), (6, 5));
        assert_eq!(g.check(&[(4, 18), (144, 2), (4, 1)]).unwrap(), (4, 60));
        let s = Conv2d::parse(&p(&[2.0, 2.0, 1.0, 1.0, 2.0, 1.0])).unwrap();
        // width (8 + 2 - 5) / 2 + 1 = 3, height (6 + 2 - 2) / 2 + 1 = 4
        assert_eq!(s.out_size().unwrap(), (3, 4));
        let e = g.check(&[(4, 17), (144, 2), (4, 1)]).unwrap_err().to_string();
        assert!(e.contains("kernel is 4x17") && e.contains("18 columns"), "{e}");
        let e = g.check(&[(4, 18), (143, 2), (4, 1)]).unwrap_err().to_string();
        assert!(e.contains("whole batch"), "{e}");
        let e = g.check(&[(4, 18), (144, 2), (3, 1)]).unwrap_err().to_string();
        assert!(e.contains("bias must be 4x1"), "{e}");
        assert!(Conv2d::parse(&p(&[1.0, 1.0, 3.0, 0.0, 1.0, 1.0])).is_err());
        assert!(Conv2d::parse(&p(&[0.0, 1.0, 0.0, 0.0, 1.0, 1.0])).is_err());
        let big = [1.0, 2.0, 2.0, 5.0, 5.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0];
        assert!(Conv2d::parse(&big).unwrap_err().to_string().contains("does not fit"));
    }
}
