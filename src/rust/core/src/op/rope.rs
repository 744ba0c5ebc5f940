//! Rotary position embedding (ggml's ROPE and ROPE_BACK): each pair of
//! values of a row is rotated by an angle set by the row's position and the
//! pair's frequency, with YaRN's interpolation of long contexts, optional
//! frequency factors, multi-section positions (M-RoPE) and the vision
//! variant. The backward pass is the inverse rotation (the sine negated).

use super::rules::{float, sh, src, Out};
use crate::base::dtype::DType;
use crate::base::float::Float;
use crate::layout::Layout;
use anyhow::{bail, ensure};

/// `mode` bits, as ggml's `GGML_ROPE_TYPE_*`.
pub const MODE_NEOX: i32 = 2;
pub const MODE_MROPE: i32 = 8;
pub const MODE_VISION: i32 = 24;

/// srcs [a, positions (i32)] or [a, positions, frequency factors (f32)].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    pub n_dims: i32,
    pub mode: i32,
    pub n_ctx_orig: i32,
    pub freq_base: f32,
    pub freq_scale: f32,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// M-RoPE: pairs per position component (time, height, width, extra).
    pub sections: [i32; 4],
    /// false: the backward pass (inverse rotation).
    pub forward: bool,
}

/// How the pairs of a row are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pairing {
    /// (2k, 2k + 1)
    Adjacent,
    /// (k, k + n_dims / 2), k < n_dims / 2
    Halves,
    /// (k, k + n_dims), k < n_dims (the whole row of 2 n_dims rotates)
    Vision,
}

impl Rope {
    /// A forward rope with ggml_rope()'s defaults (base 10000, no scaling).
    pub fn new(n_dims: i32, mode: i32) -> Rope {
        Rope {
            n_dims,
            mode,
            n_ctx_orig: 0,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            sections: [0; 4],
            forward: true,
        }
    }

    pub fn is_mrope(&self) -> bool {
        self.mode & MODE_MROPE != 0
    }

    pub fn pairing(&self) -> Pairing {
        if self.mode == MODE_VISION {
            Pairing::Vision
        } else if self.mode & MODE_NEOX != 0 || self.is_mrope() {
            Pairing::Halves
        } else {
            Pairing::Adjacent
        }
    }

    /// YaRN's correction dimensions (ggml_rope_yarn_corr_dims).
    pub fn corr_dims(&self) -> [f32; 2] {
        let dim = |n_rot: f32| {
            self.n_dims as f32 * (self.n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * self.freq_base.ln())
        };
        let start = dim(self.beta_fast).floor();
        let end = dim(self.beta_slow).ceil();
        [start.max(0.0), end.min(self.n_dims as f32 - 1.0)]
    }

    /// Per-pair multiplier of the angle: freq_base^(-2 / n_dims).
    pub fn theta_scale<F: Float>(&self) -> F {
        F::from_f32(self.freq_base).powf(F::from_f64(-2.0) / F::from_f64(self.n_dims as f64))
    }

    /// cos and sin (times the magnitude scale, sin negated backwards) of
    /// pair `k` at unscaled angle `theta` (position times the pair's frequency,
    /// already divided by its frequency factor).
    // BOUNDS-FN: corr is a [f32; 2] indexed by literals 0 and 1.
    pub fn cos_sin<F: Float>(&self, theta: F, k: usize, corr: [f32; 2]) -> (F, F) {
        let fs = F::from_f32(self.freq_scale);
        let interp = fs * theta;
        let mut angle = interp;
        let mut mscale = F::from_f32(self.attn_factor);
        if self.ext_factor != 0.0 {
            let y = ((k as f32) - corr[0]) / (corr[1] - corr[0]).max(0.001);
            let ramp = F::from_f32((1.0 - y.clamp(0.0, 1.0)) * self.ext_factor);
            angle = interp * (F::ONE - ramp) + theta * ramp;
            mscale *= F::ONE + F::from_f64(0.1) * (F::ONE / fs).ln();
        }
        let sign = if self.forward { F::ONE } else { -F::ONE };
        (angle.cos() * mscale, sign * angle.sin() * mscale)
    }

    /// The unscaled angles of the `n_pairs` pairs of one row, for positions
    /// `pos` (time, height, width, extra; only the first without M-RoPE),
    /// before the frequency factors.
    // BOUNDS-FN: s, pos and th are four-entry arrays, indexed by literals below 4,
    // by i < 4 from enumerating a four-entry array, and by which in 0..=3.
    pub fn thetas<F: Float>(&self, pos: [F; 4], n_pairs: usize, out: &mut Vec<F>) {
        out.clear();
        let ts: F = self.theta_scale();
        if !self.is_mrope() {
            let mut th = pos[0];
            for _ in 0..n_pairs {
                out.push(th);
                th *= ts;
            }
            return;
        }
        let s = self.sections.map(|v| v.max(0) as usize);
        let total = (s[0] + s[1] + s[2] + s[3]).max(1);
        let (sec_w, sec_e) = (s[0] + s[1], s[0] + s[1] + s[2]);
        let vision = self.mode == MODE_VISION;
        let mut th = pos;
        for k in 0..n_pairs {
            let sector = k % total;
            if vision {
                // each section starts again from its position
                for (i, start) in [0, s[0], sec_w, sec_e].into_iter().enumerate() {
                    if sector == start {
                        th[i] = pos[i];
                    }
                }
            }
            let which = if sector < s[0] {
                0
            } else if sector < sec_w {
                1
            } else if sector < sec_e {
                2
            } else {
                3
            };
            out.push(th[which]);
            for t in th.iter_mut() {
                *t *= ts;
            }
        }
    }

    // BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4;
    // sources through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let (a, pos) = (src(s, 0)?, src(s, 1)?);
        let name = if self.forward { "rope" } else { "rope_back" };
        float(a, "a")?;
        ensure!(
            matches!(self.mode, 0 | MODE_NEOX | MODE_MROPE | MODE_VISION),
            "{name}: `mode` must be GGML_ROPE_TYPE_NORM (0), NEOX (2), MROPE (8) or VISION (24), not {}",
            self.mode
        );
        ensure!(
            self.n_dims > 0 && self.n_dims % 2 == 0 && self.n_dims as usize <= a.ne[0],
            "{name}: `n_dims` must be a positive even number no larger than the rows of a ({}), not {}",
            sh(a),
            self.n_dims
        );
        ensure!(self.freq_base > 0.0, "{name}: `freq_base` must be positive, not {}", self.freq_base);
        ensure!(self.freq_scale > 0.0, "{name}: `freq_scale` must be positive, not {}", self.freq_scale);
        if self.mode == MODE_VISION {
            ensure!(
                2 * self.n_dims as usize == a.ne[0],
                "{name}: the vision mode rotates whole rows, so `n_dims` ({}) must be half their length ({})",
                self.n_dims,
                a.ne[0]
            );
        }
        ensure!(
            pos.dtype == DType::I32 && pos.ne[1] * pos.ne[2] * pos.ne[3] == 1,
            "{name}: the positions b must be a 1-D i32 tensor, not {}",
            sh(pos)
        );
        let per = if self.is_mrope() { 4 } else { 1 };
        ensure!(
            pos.ne[0] == per * a.ne[2],
            "{name}: {} needs {} position(s), {per} per entry of a's third dimension ({}), not {}",
            if self.is_mrope() { "M-RoPE" } else { "RoPE" },
            per * a.ne[2],
            sh(a),
            pos.ne[0]
        );
        if self.is_mrope() {
            let sec: i64 = self.sections.iter().map(|&v| v as i64).sum();
            ensure!(
                self.sections.iter().all(|&v| v >= 0) && sec > 0 && sec as usize <= a.ne[0] / 2,
                "{name}: the M-RoPE `sections` {:?} must be >= 0, not all 0, and sum to at most half the rows ({})",
                self.sections,
                a.ne[0]
            );
        }
        if let Some(ff) = s.get(2) {
            // One factor per rotated pair: n_dims / 2 pairs, n_dims in the
            // vision mode (which rotates whole rows).
            let (need, of) = if self.mode == MODE_VISION { (self.n_dims as usize, "n_dims") } else { (self.n_dims as usize / 2, "n_dims / 2") };
            ensure!(
                ff.dtype == DType::F32 && ff.nelements() >= need,
                "{name}: the frequency factors c must be an f32 tensor of at least {of} = {need} values, not {}",
                sh(ff)
            );
        }
        Ok(Out { dtype: a.dtype, ne: a.ne4() })
    }
}

/// A rope from ggml's parameters as R passes them: n_dims, mode,
/// n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast,
/// beta_slow, then (optionally) four sections.
// BOUNDS-FN: p.len() >= 9 is checked on entry (indexes 0 to 8); p[9 + k] with k < 4
// is read only when p.len() >= 13.
pub fn from_params(p: &[f64], forward: bool) -> crate::Result<Rope> {
    if p.len() < 9 {
        bail!("internal: rope takes 9 or 13 parameters, got {}", p.len());
    }
    let i = |k: usize| p[k] as i32;
    let mut sections = [0; 4];
    if p.len() >= 13 {
        for (k, s) in sections.iter_mut().enumerate() {
            *s = p[9 + k] as i32;
        }
    }
    Ok(Rope {
        n_dims: i(0),
        mode: i(1),
        n_ctx_orig: i(2),
        freq_base: p[3] as f32,
        freq_scale: p[4] as f32,
        ext_factor: p[5] as f32,
        attn_factor: p[6] as f32,
        beta_fast: p[7] as f32,
        beta_slow: p[8] as f32,
        sections,
        forward,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn angles_and_rules() {
        let r = Rope::new(8, 0);
        let mut th = Vec::new();
        r.thetas([3.0f64, 0.0, 0.0, 0.0], 4, &mut th);
        let ts = 10000f64.powf(-2.0 / 8.0);
        assert!((th[2] - 3.0 * ts * ts).abs() < 1e-12);
        let (c, s) = r.cos_sin(1.0f64, 0, r.corr_dims());
        assert!((c - 1f64.cos()).abs() < 1e-15 && (s - 1f64.sin()).abs() < 1e-15);
        let back = Rope { forward: false, ..r };
        assert!((back.cos_sin(1.0f64, 0, r.corr_dims()).1 + 1f64.sin()).abs() < 1e-15);
        // M-RoPE: sections pick the position component per pair
        let m = Rope { sections: [1, 1, 1, 1], ..Rope::new(8, MODE_MROPE) };
        m.thetas([1.0f64, 2.0, 3.0, 4.0], 4, &mut th);
        assert_eq!(th[0], 1.0);
        assert!((th[1] - 2.0 * ts).abs() < 1e-6 && (th[3] - 4.0 * ts * ts * ts).abs() < 1e-6);
        assert_eq!(m.pairing(), Pairing::Halves);
        let a = Layout::contiguous(DType::F32, [8, 2, 3, 1]);
        let p3 = Layout::contiguous(DType::I32, [3, 1, 1, 1]);
        assert_eq!(r.infer(&[a, p3]).unwrap().ne, a.ne4());
        assert!(m.infer(&[a, p3]).unwrap_err().to_string().contains("12 position"));
        assert!(Rope::new(7, 0).infer(&[a, p3]).is_err());
        assert!(Rope::new(8, 5).infer(&[a, p3]).unwrap_err().to_string().contains("mode"));
    }

    /// The vision mode rotates n_dims pairs, each divided by its own
    /// frequency factor: n_dims / 2 factors are too few (the kernel would
    /// read past them).
    #[test]
    fn vision_needs_a_factor_per_pair() {
        let v = Rope { sections: [1, 1, 0, 0], ..Rope::new(4, MODE_VISION) };
        let a = Layout::contiguous(DType::F32, [8, 2, 3, 1]);
        let p = Layout::contiguous(DType::I32, [12, 1, 1, 1]);
        let ff = |n| Layout::contiguous(DType::F32, [n, 1, 1, 1]);
        let e = v.infer(&[a, p, ff(2)]).unwrap_err().to_string();
        assert!(e.contains("at least n_dims = 4 values"), "{e}");
        assert_eq!(v.infer(&[a, p, ff(4)]).unwrap().ne, a.ne4());
        assert!(Rope::new(4, 0).infer(&[a, Layout::contiguous(DType::I32, [3, 1, 1, 1]), ff(2)]).is_ok());
    }
}
