//! Gemm: `out = alpha * (A * B + beta * C)`, with A (M x K), B (K x N) and C
//! either bottoms or constant weights, A and B optionally transposed
//! (2=transA, 3=transB: stored K x M / N x K). A 3-d operand is a column of
//! rows (w = K, c = rows). C broadcasts as a scalar, per row (M or M x 1),
//! per column (N or 1 x N) or elementwise (M x N); 10=the broadcast type of
//! a constant C (-1 none, 0 scalar, 1 M, 2 M x 1, 3 M x N, 4 N). The output
//! is N x M (w = N), or its transpose with 14=1, as a 3-d M x 1 x N column
//! with 11=1.
//!
//! With 18=int8_scale_term the product runs in int8 as ncnn's does: A is
//! quantized per row and B as a whole with `127 / absmax`, except constant
//! operands stored as int8, which come with their own scales (after C in
//! the file: one per row of A, one for B); the integer sums are scaled back
//! by `1 / (scale_A[row] * scale_B)` before C and alpha apply.

use super::kernels::matmul::{matmul, MatView};
use super::kernels::quant::quantize_view;
use crate::ncnn::modelbin::Stored;
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct GemmLayer {
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
    /// Which of A, B, C are weights.
    constant: [bool; 3],
    /// M, N, K of constant operands.
    mnk: [usize; 3],
    broadcast_c: i32,
    n1m: bool,
    transpose_out: bool,
    int8: bool,
    /// The scales of constant A (per row) and B stored as int8.
    a_scales: Option<Vec<f32>>,
    b_scale: Option<f32>,
    a: Option<Mat>,
    b: Option<Mat>,
    c: Option<Mat>,
}

impl GemmLayer {
    // BOUNDS-FN: constant is a [bool; 3] indexed by literals below 3.
    pub fn new(pd: &ParamDict) -> anyhow::Result<GemmLayer> {
        let dim = |id| -> anyhow::Result<usize> {
            let v = pd.int(id, 0);
            if v < 0 {
                ncnn_bail!("Gemm constant M, N and K must not be negative, got {v} for key {id}");
            }
            Ok(v as usize)
        };
        let g = GemmLayer {
            alpha: pd.float(0, 1.0),
            beta: pd.float(1, 1.0),
            trans_a: pd.int(2, 0) != 0,
            trans_b: pd.int(3, 0) != 0,
            constant: [pd.int(4, 0) != 0, pd.int(5, 0) != 0, pd.int(6, 0) != 0],
            mnk: [dim(7)?, dim(8)?, dim(9)?],
            broadcast_c: pd.int(10, 0),
            n1m: pd.int(11, 0) != 0,
            transpose_out: pd.int(14, 0) != 0,
            int8: pd.int(18, 0) != 0,
            a_scales: None,
            b_scale: None,
            a: None,
            b: None,
            c: None,
        };
        let [m, n, k] = g.mnk;
        if g.constant[0] && (m == 0 || k == 0) {
            ncnn_bail!("Gemm with a constant A needs constantM (7) and constantK (9)");
        }
        if g.constant[1] && (n == 0 || k == 0) {
            ncnn_bail!("Gemm with a constant B needs constantN (8) and constantK (9)");
        }
        if g.constant[2] && !(-1..=4).contains(&g.broadcast_c) {
            ncnn_bail!("Gemm constant_broadcast_type_C must be -1 to 4, got {}", g.broadcast_c);
        }
        let term = pd.int(18, 0);
        if !(0..100).contains(&term) || (4..=6).contains(&term) {
            ncnn_bail!("Gemm quantize_term {term} is not supported (0 for fp32, 1 to 3 for int8; block-quantized weights are not read)");
        }
        Ok(g)
    }

    /// `prod` (m x n) = A * B in int8, scaled back to floats.
    // BOUNDS-FN: the fixed B scale is a [f32; 1] taken whole.
    fn int8_product(&self, av: MatView, bv: MatView, prod: &mut [f32], [m, k, n]: [usize; 3]) {
        let (qa, sa) = quantize_view(&av, m, k, true, self.a_scales.as_deref());
        let fixed_b = self.b_scale.map(|s| [s]);
        let (qb, sb) = quantize_view(&bv, k, n, false, fixed_b.as_ref().map(|s| &s[..]));
        matmul(MatView::rows(&qa, k), MatView::rows(&qb, n), prod, m, k, n);
        let sb = sb.first().copied().unwrap_or(1.0);
        for (row, &s) in prod.chunks_mut(n.max(1)).zip(&sa) {
            let descale = 1.0 / (s * sb);
            row.iter_mut().for_each(|v| *v *= descale);
        }
    }

    /// How many bottoms the layer takes.
    fn bottoms(&self) -> usize {
        self.constant.iter().filter(|c| !**c).count()
    }
}

/// (rows, row stride) of an operand.
fn rows_of(m: &Mat) -> (usize, usize) {
    if m.dims == 3 {
        (m.c, m.cstep())
    } else {
        (m.h, m.w)
    }
}

/// The broadcast type of a bottom C over an M x N product, as ncnn picks it
/// (a later match wins).
fn broadcast_kind(c: &Mat, m: usize, n: usize) -> anyhow::Result<i32> {
    let mut kind = None;
    for (ok, k) in [
        (c.dims == 1 && c.w == 1, 0),
        (c.dims == 1 && c.w == m, 1),
        (c.dims == 1 && c.w == n, 4),
        (c.dims == 2 && c.w == 1 && c.h == m, 2),
        (c.dims == 2 && c.w == n && c.h == m, 3),
        (c.dims == 2 && c.w == n && c.h == 1, 4),
    ] {
        if ok {
            kind = Some(k);
        }
    }
    match kind {
        Some(k) => Ok(k),
        None => ncnn_bail!("Gemm: C {} does not broadcast to {m} x {n} (a scalar, M, N, M x 1, 1 x N or M x N)", c.describe()),
    }
}

impl Layer for GemmLayer {
    fn one_blob_only(&self) -> bool {
        self.bottoms() == 1
    }

    // BOUNDS-FN: constant is a [bool; 3], int8 a [bool; 2], indexed by literals.
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let [m, n, k] = self.mnk;
        let mut int8 = [false; 2];
        let mut load = |w: usize, h: usize, what: &str| -> anyhow::Result<(Mat, bool)> {
            let wt = mb.load(w * h, 0, what)?;
            Ok((Mat::from_shape(&[w, h], wt.data)?, wt.stored == Stored::Int8))
        };
        if self.constant[0] {
            let (a, q) = if self.trans_a { load(m, k, "Gemm A")? } else { load(k, m, "Gemm A")? };
            (self.a, int8[0]) = (Some(a), q);
        }
        if self.constant[1] {
            let (b, q) = if self.trans_b { load(k, n, "Gemm B")? } else { load(n, k, "Gemm B")? };
            (self.b, int8[1]) = (Some(b), q);
        }
        let load = |w: usize, h: usize, what: &str, mb: &mut ModelBin| -> anyhow::Result<Mat> { Mat::from_shape(&[w, h], mb.load(w * h, 0, what)?.data) };
        if self.constant[2] {
            self.c = match self.broadcast_c {
                0 => Some(Mat::from_shape(&[1], mb.load(1, 0, "Gemm C")?.data)?),
                1 => Some(Mat::from_shape(&[m], mb.load(m, 0, "Gemm C")?.data)?),
                2 => Some(load(1, m, "Gemm C", mb)?),
                3 => Some(load(n, m, "Gemm C", mb)?),
                4 => Some(load(n, 1, "Gemm C", mb)?),
                _ => None,
            };
        }
        if self.int8 {
            // ncnn reads the scales of constant operands whatever their
            // storage, and uses them only for int8 ones
            if self.constant[0] {
                let s = mb.raw(m, "Gemm A int8 scales")?;
                self.a_scales = int8[0].then_some(s);
            }
            if self.constant[1] {
                let s = mb.raw(1, "Gemm B int8 scale")?;
                self.b_scale = if int8[1] { s.first().copied() } else { None };
            }
        } else if int8.contains(&true) {
            ncnn_bail!("Gemm: a constant operand is stored as int8 but int8_scale_term (18) is 0");
        }
        Ok(())
    }

    // BOUNDS-FN: constant is a [bool; 3] (literals); prod holds m * n (i < m,
    // j < n, x < n * m); C holds what its broadcast kind reads (checked).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let need = self.bottoms();
        let with_c = !self.constant[2] && bottoms.len() == need;
        if bottoms.len() != need && bottoms.len() + 1 != need {
            ncnn_bail!("Gemm takes {} or {need} bottoms here, got {}", need.saturating_sub(1), bottoms.len());
        }
        let mut it = bottoms.into_iter();
        let a = if self.constant[0] { self.a.clone().unwrap_or_default() } else { it.next().unwrap_or_default() };
        let b = if self.constant[1] { self.b.clone().unwrap_or_default() } else { it.next().unwrap_or_default() };
        let c = if self.constant[2] { self.c.clone() } else if with_c { it.next() } else { None };
        let ((ar, ahs), (br, bhs)) = (rows_of(&a), rows_of(&b));
        let (m, k) = if self.trans_a { (a.w, ar) } else { (ar, a.w) };
        let (kb, n) = if self.trans_b { (b.w, br) } else { (br, b.w) };
        if k != kb {
            ncnn_bail!("Gemm: A {} and B {} do not agree on K ({k} against {kb})", a.describe(), b.describe());
        }
        if a.total() == 0 || b.total() == 0 || (ar - 1) * ahs + a.w > a.total() || (br - 1) * bhs + b.w > b.total() {
            ncnn_bail!("Gemm: an operand is empty or not a matrix (A {}, B {})", a.describe(), b.describe());
        }
        let av = if self.trans_a { MatView { data: &a.data, rs: 1, cs: ahs } } else { MatView { data: &a.data, rs: ahs, cs: 1 } };
        let bv = if self.trans_b { MatView { data: &b.data, rs: 1, cs: bhs } } else { MatView { data: &b.data, rs: bhs, cs: 1 } };
        let mut prod = take_vec(m * n);
        prod.resize(m * n, 0.0);
        if self.int8 {
            self.int8_product(av, bv, &mut prod, [m, k, n]);
        } else {
            matmul(av, bv, &mut prod, m, k, n);
        }
        if let Some(c) = &c {
            let kind = if self.constant[2] { self.broadcast_c } else { broadcast_kind(c, m, n)? };
            let need = [1, m, m, m * n, n].get(kind as usize).copied().unwrap_or(0);
            if c.total() < need {
                ncnn_bail!("Gemm: C {} is too small for broadcast type {kind} over {m} x {n}", c.describe());
            }
            for i in 0..m {
                let row = &mut prod[i * n..(i + 1) * n];
                for (j, v) in row.iter_mut().enumerate() {
                    let cv = match kind {
                        0 => c.data[0],
                        1 | 2 => c.data[i],
                        3 => c.data[i * n + j],
                        _ => c.data[j],
                    };
                    *v += self.beta * cv;
                }
            }
        }
        if self.alpha != 1.0 {
            prod.iter_mut().for_each(|v| *v *= self.alpha);
        }
        let (rows, cols, data) = if self.transpose_out {
            let mut t = take_vec(m * n);
            t.extend((0..n * m).map(|x| prod[(x % m) * n + x / m]));
            (n, m, t)
        } else {
            (m, n, prod)
        };
        let shape: Vec<usize> = if self.n1m { vec![cols, 1, rows] } else { vec![cols, rows] };
        Ok(vec![Mat::from_shape(&shape, data)?])
    }
}
