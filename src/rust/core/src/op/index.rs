//! Ops that place values by index (ggml's ROLL, PAD_REFLECT_1D, WIN_PART,
//! WIN_UNPART, GET_REL_POS, ADD_REL_POS, DIAG, DIAG_MASK_ZERO,
//! GET_ROWS_BACK, REPEAT_BACK, SET, ARANGE, TIMESTEP_EMBEDDING): every result
//! element is a function of its coordinates and a few source elements.

use super::rules::{can_repeat, f32_or_f64, float, sh, src, Out};
use crate::base::dtype::DType;
use crate::layout::Layout;
use anyhow::{bail, ensure};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IndexOp {
    /// srcs [a]: circular shift, out[i] = a[(i - shift) mod n] per dimension.
    Roll { shift: [i32; 4] },
    /// srcs [a]: p0 and p1 mirrored values before and after each row (the
    /// edge not repeated).
    PadReflect1d { p0: i32, p1: i32 },
    /// srcs [a [C, W, H, 1]]: non-overlapping w x w windows, zero-padded ->
    /// [C, w, w, windows] (row-major over windows).
    WinPart { w: i32 },
    /// srcs [a [C, w, w, windows]] -> [C, w0, h0, 1], the inverse of win_part.
    WinUnpart { w0: i32, h0: i32, w: i32 },
    /// srcs [a [C, 2 max(qh, kh) - 1]] -> [C, kh, qh]: relative position rows
    /// (out[., k, q] = a[., kh - k - 1 + q]).
    GetRelPos { qh: i32, kh: i32 },
    /// srcs [a [K*K, Q1*Q2, B], pw, ph [K, Q1, Q2, B]]:
    /// out[(kh, kw), q, b] = a + ph[kh, q, b] + pw[kw, q, b].
    AddRelPos,
    /// srcs [a [n, 1, c, d]] -> [n, n, c, d] with a on the diagonal.
    Diag,
    /// srcs [a]: entries with column index > n_past + row index set to 0.
    DiagMaskZero { n_past: i32 },
    /// srcs [grad [C, k], idx i32 [k], like [C, rows]] -> [C, rows]: the
    /// rows of grad added into the rows they were taken from.
    GetRowsBack,
    /// srcs [a, like]: a summed over its repetitions of like's shape.
    RepeatBack,
    /// srcs [a, b]: a copy of a with b written into the view of it that
    /// starts at element `offset` with element strides `nb` (dimensions 2
    /// to 4; ggml's byte values divided by a's element size).
    Set { nb: [usize; 3], offset: usize },
    /// No sources: start, start + step, ... below stop (f32).
    Arange { start: f32, stop: f32, step: f32 },
    /// srcs [t [N]] -> [dim (even), N]: cos(t f_j) then sin(t f_j) with
    /// f_j = max_period^(-j / (dim / 2)).
    TimestepEmbedding { dim: i32, max_period: i32 },
    /// srcs [a]: dimensions 0 and 1 upscaled by `factor` with bilinear (or,
    /// `bicubic`, cubic convolution with a = -0.75) interpolation at pixel
    /// centres, edges clamped (ggml's UPSCALE modes 1 and 2).
    Interpolate { factor: i32, bicubic: bool },
}

impl IndexOp {
    pub fn name(&self) -> &'static str {
        match self {
            IndexOp::Roll { .. } => "ROLL",
            IndexOp::PadReflect1d { .. } => "PAD_REFLECT_1D",
            IndexOp::WinPart { .. } => "WIN_PART",
            IndexOp::WinUnpart { .. } => "WIN_UNPART",
            IndexOp::GetRelPos { .. } => "GET_REL_POS",
            IndexOp::AddRelPos => "ADD_REL_POS",
            IndexOp::Diag => "DIAG",
            IndexOp::DiagMaskZero { .. } => "DIAG_MASK_ZERO",
            IndexOp::GetRowsBack => "GET_ROWS_BACK",
            IndexOp::RepeatBack => "REPEAT_BACK",
            IndexOp::Set { .. } => "SET",
            IndexOp::Arange { .. } => "ARANGE",
            IndexOp::TimestepEmbedding { .. } => "TIMESTEP_EMBEDDING",
            IndexOp::Interpolate { .. } => "UPSCALE",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            IndexOp::Arange { .. } => (0, 0),
            IndexOp::AddRelPos | IndexOp::GetRowsBack => (3, 3),
            IndexOp::RepeatBack | IndexOp::Set { .. } => (2, 2),
            _ => (1, 1),
        }
    }

    /// Number of windows along each axis of win_part.
    pub fn windows(w: usize, width: usize, height: usize) -> (usize, usize) {
        (width.div_ceil(w), height.div_ceil(w))
    }

    // BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4,
    // or by i < 4 from enumerating a four-entry array; nb is a [usize; 3]
    // indexed by literals; sources through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        if let IndexOp::Arange { start, stop, step } = *self {
            ensure!(
                step != 0.0 && start.is_finite() && stop.is_finite() && step.is_finite(),
                "arange: start, stop and step must be finite and step non-zero (got {start}, {stop}, {step})"
            );
            let n = ((stop - start) / step).ceil();
            ensure!(n >= 1.0, "arange: [{start}, {stop}) with step {step} holds no values");
            ensure!(n < 1e9, "arange: {n} values are too many");
            return Ok(Out { dtype: DType::F32, ne: [n as usize, 1, 1, 1] });
        }
        let a = src(s, 0)?;
        let same = Out { dtype: a.dtype, ne: a.ne4() };
        Ok(match *self {
            IndexOp::Arange { .. } => bail!("internal: arange is shaped above"),
            IndexOp::Roll { .. } | IndexOp::Diag | IndexOp::DiagMaskZero { .. } if !a.dtype.is_float() => {
                bail!("{} needs a floating-point tensor, not {}", self.name().to_lowercase(), sh(a))
            }
            IndexOp::Roll { .. } | IndexOp::DiagMaskZero { .. } => same,
            IndexOp::PadReflect1d { p0, p1 } => {
                float(a, "a")?;
                ensure!(
                    p0 >= 0 && p1 >= 0 && (p0 as usize) < a.ne[0] && (p1 as usize) < a.ne[0],
                    "pad_reflect_1d: the paddings ({p0}, {p1}) must be >= 0 and smaller than the rows of a ({})",
                    sh(a)
                );
                Out { dtype: a.dtype, ne: [a.ne[0] + p0 as usize + p1 as usize, a.ne[1], a.ne[2], a.ne[3]] }
            }
            IndexOp::WinPart { w } => {
                float(a, "a")?;
                ensure!(w > 0, "win_part: the window size must be positive, not {w}");
                ensure!(a.ne[3] == 1, "win_part: a ({}) must be [C, W, H, 1]", sh(a));
                let (nx, ny) = IndexOp::windows(w as usize, a.ne[1], a.ne[2]);
                Out { dtype: a.dtype, ne: [a.ne[0], w as usize, w as usize, nx * ny] }
            }
            IndexOp::WinUnpart { w0, h0, w } => {
                float(a, "a")?;
                ensure!(w > 0 && w0 > 0 && h0 > 0, "win_unpart: w0, h0 and w must be positive (got {w0}, {h0}, {w})");
                let (nx, ny) = IndexOp::windows(w as usize, w0 as usize, h0 as usize);
                ensure!(
                    a.ne[1] == w as usize && a.ne[2] == w as usize && a.ne[3] == nx * ny,
                    "win_unpart: a ({}) must be [C, {w}, {w}, {}] to rebuild a {w0} x {h0} map from {w} x {w} windows",
                    sh(a),
                    nx * ny
                );
                Out { dtype: a.dtype, ne: [a.ne[0], w0 as usize, h0 as usize, 1] }
            }
            IndexOp::GetRelPos { qh, kh } => {
                float(a, "a")?;
                ensure!(qh > 0 && kh > 0, "get_rel_pos: qh and kh must be positive (got {qh}, {kh})");
                ensure!(qh == kh, "get_rel_pos: qh ({qh}) and kh ({kh}) must be equal");
                let rows = 2 * qh as usize - 1;
                ensure!(
                    a.ne[1] == rows && a.ne[2] == 1 && a.ne[3] == 1,
                    "get_rel_pos: a ({}) must be [C, {rows}] for qh = kh = {qh}",
                    sh(a)
                );
                Out { dtype: a.dtype, ne: [a.ne[0], kh as usize, qh as usize, 1] }
            }
            IndexOp::AddRelPos => {
                let (pw, ph) = (src(s, 1)?, src(s, 2)?);
                float(a, "a")?;
                float(pw, "pw")?;
                float(ph, "ph")?;
                ensure!(pw.ne == ph.ne, "add_rel_pos: pw ({}) and ph ({}) must have the same shape", sh(pw), sh(ph));
                ensure!(
                    pw.ne[0] * pw.ne[0] == a.ne[0] && pw.ne[1] * pw.ne[2] == a.ne[1] && pw.ne[3] == a.ne[2] && a.ne[3] == 1,
                    "add_rel_pos: a ({}) must be [K*K, Q1*Q2, B] for pw and ph of shape [K, Q1, Q2, B] ({})",
                    sh(a),
                    sh(pw)
                );
                Out { dtype: f32_or_f64(&[a, pw, ph]), ne: a.ne4() }
            }
            IndexOp::Diag => {
                ensure!(a.ne[1] == 1, "diag: a ({}) must have one row per matrix (second size 1)", sh(a));
                Out { dtype: a.dtype, ne: [a.ne[0], a.ne[0], a.ne[2], a.ne[3]] }
            }
            IndexOp::GetRowsBack => {
                let (idx, like) = (src(s, 1)?, src(s, 2)?);
                float(a, "the gradient a")?;
                ensure!(idx.dtype == DType::I32, "get_rows_back: the row indices b must be i32, not {}", sh(idx));
                ensure!(
                    a.ne[2] * a.ne[3] == 1 && idx.nelements() == a.ne[1] && like.ne[0] == a.ne[0] && like.ne[2] * like.ne[3] == 1,
                    "get_rows_back: the gradient a ({}) must be a matrix with one row per index in b ({}) and rows \
                     as long as c's ({})",
                    sh(a),
                    sh(idx),
                    sh(like)
                );
                Out { dtype: f32_or_f64(&[a]), ne: like.ne4() }
            }
            IndexOp::RepeatBack => {
                let like = src(s, 1)?;
                float(a, "a")?;
                ensure!(
                    can_repeat(&like.ne, &a.ne),
                    "repeat_back: each size of a ({}) must be a multiple of b's ({})",
                    sh(a),
                    sh(like)
                );
                Out { dtype: a.dtype, ne: like.ne4() }
            }
            IndexOp::Set { nb, offset } => {
                let b = src(s, 1)?;
                ensure!(
                    a.dtype == b.dtype || (a.dtype.is_float() && b.dtype.is_float()),
                    "set: a ({}) and b ({}) must both be floating-point, or of one type",
                    sh(a),
                    sh(b)
                );
                // the last element of a that b reaches
                let mut last = offset;
                for (i, &st) in [1, nb[0], nb[1], nb[2]].iter().enumerate() {
                    last = last.saturating_add((b.ne[i].max(1) - 1).saturating_mul(st));
                }
                ensure!(
                    b.nelements() == 0 || last < a.nelements(),
                    "set: b ({}) written from element {offset} of a with element strides {nb:?} reaches element \
                     {last}, past the end of a ({}, {} elements)",
                    sh(b),
                    sh(a),
                    a.nelements()
                );
                same
            }
            IndexOp::Interpolate { factor, .. } => {
                float(a, "a")?;
                ensure!(factor >= 1, "upscale: the factor must be at least 1, not {factor}");
                let f = factor as usize;
                let (Some(w), Some(h)) = (a.ne[0].checked_mul(f), a.ne[1].checked_mul(f)) else {
                    anyhow::bail!("upscale: a ({}) by a factor of {factor} is too large", sh(a));
                };
                Out { dtype: a.dtype, ne: [w, h, a.ne[2], a.ne[3]] }
            }
            IndexOp::TimestepEmbedding { dim, max_period } => {
                float(a, "the timesteps")?;
                ensure!(dim > 0 && max_period > 0, "timestep_embedding: dim and max_period must be positive (got {dim}, {max_period})");
                ensure!(a.ne[1] == 1 && a.ne[2] == 1 && a.ne[3] == 1, "timestep_embedding: the timesteps ({}) must be a vector", sh(a));
                let d = dim as usize + (dim % 2) as usize;
                Out { dtype: f32_or_f64(&[a]), ne: [d, a.ne[0], 1, 1] }
            }
        })
    }
}

/// Source position of output `i` of an upscale by `f` at pixel centres.
#[inline]
pub fn source_pos(i: usize, f: f64) -> f64 {
    (i as f64 + 0.5) / f - 0.5
}

/// The cubic convolution weights (a = -0.75) of the four neighbours of a
/// position `t` in [0, 1) past the second.
pub fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.75;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// The source index of output index `i` of pad_reflect_1d (`n` the row length).
#[inline]
pub fn reflect(i: i64, p0: i64, n: i64) -> usize {
    let j = i - p0;
    let j = if j < 0 { -j } else if j >= n { 2 * (n - 1) - j } else { j };
    j as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_shapes() {
        let l = |ne| Layout::contiguous(DType::F32, ne);
        assert_eq!(IndexOp::WinPart { w: 2 }.infer(&[l([2, 4, 4, 1])]).unwrap().ne, [2, 2, 2, 4]);
        assert_eq!(IndexOp::WinPart { w: 3 }.infer(&[l([2, 4, 5, 1])]).unwrap().ne, [2, 3, 3, 4]);
        let u = IndexOp::WinUnpart { w0: 4, h0: 4, w: 2 };
        assert_eq!(u.infer(&[l([2, 2, 2, 4])]).unwrap().ne, [2, 4, 4, 1]);
        assert_eq!(IndexOp::GetRelPos { qh: 2, kh: 2 }.infer(&[l([3, 3, 1, 1])]).unwrap().ne, [3, 2, 2, 1]);
        let ar = IndexOp::Arange { start: 2.0, stop: 10.0, step: 2.0 };
        assert_eq!(ar.infer(&[]).unwrap().ne, [4, 1, 1, 1]);
        let set = IndexOp::Set { nb: [4, 16, 16], offset: 1 };
        assert!(set.infer(&[l([4, 4, 1, 1]), l([2, 2, 1, 1])]).is_ok());
        let far = IndexOp::Set { nb: [4, 16, 16], offset: 12 };
        assert!(far.infer(&[l([4, 4, 1, 1]), l([2, 2, 1, 1])]).unwrap_err().to_string().contains("past the end"));
        let ts = IndexOp::TimestepEmbedding { dim: 7, max_period: 10000 };
        assert_eq!(ts.infer(&[l([2, 1, 1, 1])]).unwrap().ne, [8, 2, 1, 1]);
        assert_eq!((0..8).map(|i| reflect(i, 2, 4)).collect::<Vec<_>>(), vec![2, 1, 0, 1, 2, 3, 2, 1]);
    }
}
