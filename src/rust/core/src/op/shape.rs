//! Shape and type rules of the computing ops (ggml's), separate from kernels.
//!
//! [`infer`] gets the layouts of a node's sources and returns the type and
//! sizes of its result, or an error that shows the offending shapes. View-like
//! ops and `cpy` take extra arguments and are shaped by the graph builder.

pub use super::rules::{can_repeat, Out, Shaped};
pub(crate) use super::rules::{divides, f32_or_f64, float, out_size, sh, src};
use super::Op;
use super::UnaryOp;
use crate::base::dtype::DType;
use crate::layout::Layout;
use anyhow::{bail, ensure};

/// Number of sources each computing op takes: (min, max).
pub fn arity(op: &Op) -> (usize, usize) {
    match op {
        Op::None => (0, 0),
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Add1 | Op::MulMat | Op::OutProd => (2, 2),
        Op::Cpy | Op::Repeat | Op::Concat { .. } | Op::GetRows | Op::Im2Col { .. } => (2, 2),
        Op::Binary { .. } | Op::GatherAxis { .. } | Op::ScatterFlat { .. } => (2, 2),
        Op::SoftMax { .. } => (1, 2),
        Op::Linear { .. } => (3, 3),
        Op::UnaryBack { .. } | Op::CrossEntropyLoss => (2, 2),
        Op::CrossEntropyLossBack => (3, 3),
        Op::AdamStep { .. } => (4, 4),
        Op::SgdStep { .. } => (2, 3),
        Op::Glu(_) => (1, 2),
        Op::SiluBack => (2, 2),
        Op::Rope(_) => (2, 3),
        Op::MulMatId => (3, 3),
        Op::Attn(a) => a.arity(),
        Op::Conv(c) => c.arity(),
        Op::Rows(r) => r.arity(),
        Op::Index(i) => i.arity(),
        Op::MaxPool(m) => m.arity(),
        Op::Recurrent(r) => r.arity(),
        Op::ConvAct { .. } => (2, 3),
        Op::ConvCl(c) => c.arity(),
        _ => (1, 1),
    }
}

/// The result of `op` on sources with layouts `s`.
// BOUNDS-FN: l.ne is a Dims ([usize; 5]) indexed by the literal 4.
pub fn infer(op: &Op, s: &[Layout]) -> crate::Result<Shaped> {
    let (lo, hi) = arity(op);
    ensure!(
        (lo..=hi).contains(&s.len()),
        "{} takes {lo}{} source tensor(s), got {}",
        op.name(),
        if hi > lo { format!(" to {hi}") } else { String::new() },
        s.len()
    );
    if s.iter().any(|l| l.ne[4] > 1) || matches!(op, Op::Concat { dim: 4 }) {
        return super::five::infer(op, s, infer4);
    }
    infer4(op, s).map(Shaped::from)
}

/// The rules of four dimensions (sources whose fifth size is 1).
// BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4,
// or by i in 0..4 (p of Pad is an [i32; 4]); sources through src().
pub(super) fn infer4(op: &Op, s: &[Layout]) -> crate::Result<Out> {
    if let Some(r) = super::extended_shape::infer(op, s) {
        return r;
    }
    if let Op::Index(i) = op {
        return i.infer(s);
    }
    let a = src(s, 0)?;
    let same = Out { dtype: a.dtype, ne: a.ne4() };
    Ok(match op {
        Op::Index(_) => bail!("internal: index ops are shaped above"),
        Op::Glu(g) => g.infer(s)?,
        Op::SiluBack => super::glu::infer_silu_back(s)?,
        Op::Rope(r) => r.infer(s)?,
        Op::Attn(t) => t.infer(s)?,
        Op::Conv(c) => c.infer(s)?,
        Op::Rows(r) => r.infer(s)?,
        Op::MaxPool(m) => m.infer(s)?,
        Op::Recurrent(r) => r.infer(s)?,
        Op::ConvAct { conv, .. } => super::conv_act::infer(conv, s)?,
        Op::ConvCl(c) => c.infer(s)?,
        Op::MulMatId => mul_mat_id(s)?,
        Op::None => bail!("a leaf tensor has no sources"),
        Op::Reshape | Op::View | Op::Transpose | Op::Permute { .. } | Op::Cpy => {
            bail!("{} is shaped by the graph builder", op.name())
        }
        Op::AdamStep { .. } | Op::SgdStep { .. } => {
            for (i, l) in s.iter().enumerate() {
                float(l, "an optimizer operand")?;
                ensure!(
                    l.is_contiguous() && l.nelements() == a.nelements() && l.dtype == a.dtype,
                    "{}: operand {} ({}) must be contiguous, of a's type and size ({})",
                    op.name(),
                    i + 1,
                    sh(l),
                    sh(a)
                );
            }
            same
        }
        Op::Map { .. }
        | Op::Binary { .. }
        | Op::ReduceRows { .. }
        | Op::ScanRows { .. }
        | Op::GatherAxis { .. }
        | Op::ScatterFlat { .. }
        | Op::PadEx { .. } => bail!("internal: {} is shaped by op::extended", op.name()),
        Op::Add | Op::Sub | Op::Mul | Op::Div => {
            let b = src(s, 1)?;
            float(a, "a")?;
            float(b, "b")?;
            ensure!(
                can_repeat(&b.ne, &a.ne),
                "b ({}) cannot be broadcast to a ({}): each size of a must be a multiple of \
                 the same size of b",
                sh(b),
                sh(a)
            );
            same
        }
        Op::Add1 => {
            float(a, "a")?;
            float(src(s, 1)?, "b")?;
            ensure!(src(s, 1)?.nelements() == 1, "b must have exactly one element, not {}", sh(src(s, 1)?));
            same
        }
        Op::Scale { .. } | Op::Unary(_) | Op::LeakyRelu { .. } | Op::Clamp { .. } => {
            float(a, "a")?;
            same
        }
        Op::Norm { .. } | Op::RmsNorm { .. } | Op::DiagMaskInf { .. } => {
            float(a, "a")?;
            same
        }
        Op::MulMat => {
            let b = src(s, 1)?;
            // Quantized weights are a's (ggml's convention).
            if a.dtype.quant().is_none() {
                float(a, "a")?;
            }
            float(b, "b")?;
            ensure!(
                a.ne[0] == b.ne[0] && divides(a.ne[2], b.ne[2]) && divides(a.ne[3], b.ne[3]),
                "a ({}) and b ({}) do not fit mul_mat: their first sizes (K) must be equal and \
                 the sizes of b in dimensions 3 and 4 multiples of a's; mul_mat(a[K,M], \
                 b[K,N]) gives [M,N]",
                sh(a),
                sh(b)
            );
            Out { dtype: f32_or_f64(&[a, b]), ne: [a.ne[1], b.ne[1], b.ne[2], b.ne[3]] }
        }
        Op::OutProd => {
            let b = src(s, 1)?;
            float(a, "a")?;
            float(b, "b")?;
            ensure!(
                a.ne[1] == b.ne[1] && divides(a.ne[2], b.ne[2]) && divides(a.ne[3], b.ne[3]),
                "a ({}) and b ({}) do not fit out_prod: their second sizes (K) must be equal; \
                 out_prod(a[M,K], b[N,K]) gives [M,N]",
                sh(a),
                sh(b)
            );
            Out { dtype: f32_or_f64(&[a, b]), ne: [a.ne[0], b.ne[0], b.ne[2], b.ne[3]] }
        }
        Op::Linear { .. } => {
            let (b, c) = (src(s, 1)?, src(s, 2)?);
            float(a, "a")?;
            float(b, "b")?;
            float(c, "the bias c")?;
            ensure!(
                a.ne[0] == b.ne[0] && a.ne[2] * a.ne[3] == 1 && b.ne[2] * b.ne[3] == 1,
                "a ({}) and b ({}) do not fit linear: both must be matrices with the same first \
                 size (K); linear(a[K,M], b[K,N], c[M]) gives [M,N]",
                sh(a),
                sh(b)
            );
            ensure!(
                c.ne[0] == a.ne[1] && c.nelements() == a.ne[1],
                "the bias c ({}) must have one value per row of the result ({})",
                sh(c),
                a.ne[1]
            );
            Out { dtype: f32_or_f64(&[a, b, c]), ne: [a.ne[1], b.ne[1], 1, 1] }
        }
        Op::UnaryBack { u } => {
            let y = src(s, 1)?;
            float(a, "the gradient g")?;
            float(y, "the activation's output y")?;
            ensure!(
                matches!(u, UnaryOp::Relu | UnaryOp::Sigmoid | UnaryOp::Tanh),
                "unary_back: the activation must be relu, sigmoid or tanh, not {}",
                u.name()
            );
            ensure!(a.ne == y.ne, "the gradient ({}) and the output ({}) must have the same shape", sh(a), sh(y));
            Out { dtype: f32_or_f64(&[a, y]), ne: a.ne4() }
        }
        Op::CrossEntropyLoss | Op::CrossEntropyLossBack => {
            let back = matches!(op, Op::CrossEntropyLossBack);
            let (l, t) = if back { (src(s, 1)?, src(s, 2)?) } else { (a, src(s, 1)?) };
            float(l, "the logits")?;
            float(t, "the targets")?;
            ensure!(l.ne == t.ne, "the logits ({}) and the targets ({}) must have the same shape", sh(l), sh(t));
            if back {
                float(a, "the loss gradient")?;
                ensure!(a.nelements() == 1, "the loss gradient must have one element, not {}", sh(a));
                Out { dtype: f32_or_f64(&[l]), ne: l.ne4() }
            } else {
                Out { dtype: f32_or_f64(&[l]), ne: [1, 1, 1, 1] }
            }
        }
        Op::Sum => {
            float(a, "a")?;
            Out { dtype: a.dtype, ne: [1, 1, 1, 1] }
        }
        Op::SumRows => {
            float(a, "a")?;
            Out { dtype: a.dtype, ne: [1, a.ne[1], a.ne[2], a.ne[3]] }
        }
        Op::Mean => {
            float(a, "a")?;
            Out { dtype: f32_or_f64(&[a]), ne: [1, a.ne[1], a.ne[2], a.ne[3]] }
        }
        Op::Argmax => {
            float(a, "a")?;
            ensure!(a.ne[2] == 1 && a.ne[3] == 1, "argmax needs a matrix, not {}", sh(a));
            Out { dtype: DType::I32, ne: [a.ne[1], 1, 1, 1] }
        }
        Op::SoftMax { .. } => {
            float(a, "a")?;
            if let Some(m) = s.get(1) {
                float(m, "mask")?;
                ensure!(
                    m.ne[0] == a.ne[0]
                        && m.ne[1] >= a.ne[1]
                        && divides(m.ne[2], a.ne[2])
                        && divides(m.ne[3], a.ne[3]),
                    "the mask ({}) does not fit a ({}): it needs the same first size, at least \
                     as many rows, and sizes in dimensions 3 and 4 that divide a's",
                    sh(m),
                    sh(a)
                );
            }
            same
        }
        Op::Dup | Op::Cont => same,
        Op::Repeat => {
            let b = src(s, 1)?;
            ensure!(
                can_repeat(&a.ne, &b.ne),
                "a ({}) cannot be repeated to the shape of b ({}): each size of b must be a \
                 multiple of a's",
                sh(a),
                sh(b)
            );
            Out { dtype: a.dtype, ne: b.ne4() }
        }
        Op::Concat { dim } => {
            let b = src(s, 1)?;
            ensure!(*dim < 5, "concat: `dim` must be 0 to 4, not {dim}");
            ensure!(a.dtype == b.dtype, "concat needs tensors of one type, not {} and {}", sh(a), sh(b));
            let mut ne = a.ne4();
            for i in 0..4 {
                if i != *dim {
                    ensure!(
                        a.ne[i] == b.ne[i],
                        "concat along dimension {dim}: a ({}) and b ({}) differ in dimension {i}",
                        sh(a),
                        sh(b)
                    );
                } else {
                    ne[i] = a.ne[i] + b.ne[i];
                }
            }
            Out { dtype: a.dtype, ne }
        }
        Op::GetRows => {
            let b = src(s, 1)?;
            ensure!(b.dtype == DType::I32, "the row indices must be an i32 tensor, not {}", sh(b));
            ensure!(
                a.ne[2] == b.ne[1] && a.ne[3] == b.ne[2] && b.ne[3] == 1,
                "get_rows: the indices ({}) do not fit a ({}): a's third and fourth sizes must \
                 equal the indices' second and third",
                sh(b),
                sh(a)
            );
            let dtype = if a.dtype == DType::I32 { DType::I32 } else { f32_or_f64(&[a]) };
            Out { dtype, ne: [a.ne[0], b.ne[0], b.ne[1], b.ne[2]] }
        }
        Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d } => {
            let (k, b) = (a, src(s, 1)?);
            float(b, "the input")?;
            if *is_2d {
                ensure!(
                    k.ne[2] == b.ne[2],
                    "im2col: the kernel ({}) and the input ({}) need the same number of \
                     channels (third size)",
                    sh(k),
                    sh(b)
                );
                let ow = out_size("im2col width", b.ne[0], k.ne[0], *s0, *p0 as i64, *d0)?;
                let oh = out_size("im2col height", b.ne[1], k.ne[1], *s1, *p1 as i64, *d1)?;
                Out { dtype: k.dtype, ne: [k.ne[0] * k.ne[1] * k.ne[2], ow, oh, b.ne[3]] }
            } else {
                ensure!(
                    k.ne[1] == b.ne[1],
                    "im2col (1-D): the kernel ({}) and the input ({}) need the same number of \
                     channels (second size)",
                    sh(k),
                    sh(b)
                );
                let ow = out_size("im2col width", b.ne[0], k.ne[0], *s0, *p0 as i64, *d0)?;
                Out { dtype: k.dtype, ne: [k.ne[0] * k.ne[1], ow, b.ne[2], 1] }
            }
        }
        Op::Im2ColBack { s0, s1, p0, p1, d0, d1, kw, kh, w, h } => {
            float(a, "the patches")?;
            ensure!(
                [*s0, *s1, *d0, *d1, *kw, *kh, *w, *h].iter().all(|&v| v > 0) && *p0 >= 0 && *p1 >= 0,
                "im2col_back: sizes, strides and dilations must be positive and paddings >= 0"
            );
            let taps = (*kw * *kh) as usize;
            let ow = out_size("im2col_back width", *w as usize, *kw as usize, *s0, *p0 as i64, *d0)?;
            let oh = out_size("im2col_back height", *h as usize, *kh as usize, *s1, *p1 as i64, *d1)?;
            ensure!(
                divides(taps, a.ne[0]) && a.ne[1] == ow && a.ne[2] == oh,
                "im2col_back: the patches ({}) are not those of a {kw}x{kh} kernel over a {w}x{h} input \
                 (expected [C * {taps}, {ow}, {oh}, N])",
                sh(a)
            );
            Out { dtype: f32_or_f64(&[a]), ne: [*w as usize, *h as usize, a.ne[0] / taps, a.ne[3]] }
        }
        Op::Pool2d { k0, k1, s0, s1, p0, p1, .. } => {
            float(a, "a")?;
            ensure!(*k0 > 0 && *k1 > 0, "pool_2d: kernel sizes must be positive (got {k0}, {k1})");
            ensure!(*s0 > 0 && *s1 > 0, "pool_2d: strides must be positive (got {s0}, {s1})");
            let ow = (a.ne[0] as f32 + 2.0 * p0 - *k0 as f32) / *s0 as f32 + 1.0;
            let oh = (a.ne[1] as f32 + 2.0 * p1 - *k1 as f32) / *s1 as f32 + 1.0;
            ensure!(
                ow >= 1.0 && oh >= 1.0,
                "pool_2d: a {k0}x{k1} window does not fit the input ({})",
                sh(a)
            );
            Out { dtype: f32_or_f64(&[a]), ne: [ow as usize, oh as usize, a.ne[2], a.ne[3]] }
        }
        Op::Pad { p } => {
            ensure!(p.iter().all(|&x| x >= 0), "pad: paddings must be >= 0, got {p:?}");
            let mut ne = a.ne4();
            for i in 0..4 {
                ne[i] += p[i] as usize;
            }
            Out { dtype: a.dtype, ne }
        }
        Op::Upscale { factor } => {
            float(a, "a")?;
            ensure!(*factor >= 1, "upscale: the factor must be at least 1, not {factor}");
            let f = *factor as usize;
            Out { dtype: a.dtype, ne: [a.ne[0] * f, a.ne[1] * f, a.ne[2], a.ne[3]] }
        }
    })
}

/// mul_mat_id: as [K, M, E], b [K, nb1, T], ids i32 [n, T] -> [M, n, T].
// BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4;
// sources through src().
fn mul_mat_id(s: &[Layout]) -> crate::Result<Out> {
    let (w, b, ids) = (src(s, 0)?, src(s, 1)?, src(s, 2)?);
    float(w, "the experts as")?;
    float(b, "b")?;
    ensure!(ids.dtype == DType::I32, "mul_mat_id: the expert ids must be an i32 tensor, not {}", sh(ids));
    ensure!(
        w.ne[0] == b.ne[0] && w.ne[3] == 1 && b.ne[3] == 1,
        "mul_mat_id: the experts ({}, [K, M, E]) and b ({}, [K, n, T]) need the same first size K",
        sh(w),
        sh(b)
    );
    ensure!(
        ids.ne[1] == b.ne[2] && ids.ne[2] * ids.ne[3] == 1 && b.ne[1] > 0 && divides(b.ne[1], ids.ne[0]),
        "mul_mat_id: the ids ({}) must be [n, T] with T the third size of b ({}) and n a multiple of its second",
        sh(ids),
        sh(b)
    );
    Ok(Out { dtype: f32_or_f64(&[w, b]), ne: [w.ne[1], ids.ne[0], b.ne[2], 1] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::UnaryOp;

    fn l(ne: [usize; 4]) -> Layout {
        Layout::contiguous(DType::F32, ne)
    }

    #[test]
    fn broadcasting_rules() {
        let a = l([6, 4, 1, 1]);
        assert_eq!(infer(&Op::Add, &[a, l([6, 1, 1, 1])]).unwrap().ne4(), [6, 4, 1, 1]);
        assert_eq!(infer(&Op::Mul, &[a, l([3, 2, 1, 1])]).unwrap().ne4(), [6, 4, 1, 1]);
        let e = infer(&Op::Add, &[a, l([4, 1, 1, 1])]).unwrap_err().to_string();
        assert!(e.contains("f32 [4]") && e.contains("f32 [6, 4]"), "{e}");
        assert!(infer(&Op::Add1, &[a, l([2, 1, 1, 1])]).is_err());
        let i = Layout::contiguous(DType::I32, [6, 4, 1, 1]);
        assert!(infer(&Op::Unary(UnaryOp::Exp), &[i]).unwrap_err().to_string().contains("i32"));
    }

    #[test]
    fn matmul_rules() {
        let o = infer(&Op::MulMat, &[l([5, 3, 1, 1]), l([5, 7, 2, 1])]).unwrap();
        assert_eq!(o.ne4(), [3, 7, 2, 1]);
        assert!(infer(&Op::MulMat, &[l([5, 3, 1, 1]), l([4, 7, 1, 1])]).is_err());
        let o = infer(&Op::OutProd, &[l([3, 5, 1, 1]), l([7, 5, 1, 1])]).unwrap();
        assert_eq!(o.ne4(), [3, 7, 1, 1]);
        // f64 sources give f64 results where ggml gives f32.
        let d = Layout::contiguous(DType::F64, [5, 3, 1, 1]);
        assert_eq!(infer(&Op::MulMat, &[d, l([5, 7, 1, 1])]).unwrap().dtype, DType::F64);
        assert_eq!(infer(&Op::Mean, &[d]).unwrap().dtype, DType::F64);
        assert_eq!(infer(&Op::Mean, &[l([5, 3, 1, 1])]).unwrap().dtype, DType::F32);
        let lin = Op::Linear { act: None };
        let o = infer(&lin, &[l([5, 3, 1, 1]), l([5, 7, 1, 1]), l([3, 1, 1, 1])]).unwrap();
        assert_eq!(o.ne4(), [3, 7, 1, 1]);
        let e = infer(&lin, &[l([5, 3, 1, 1]), l([5, 7, 1, 1]), l([7, 1, 1, 1])]).unwrap_err().to_string();
        assert!(e.contains("one value per row"), "{e}");
        assert!(infer(&lin, &[l([5, 3, 2, 1]), l([5, 7, 2, 1]), l([3, 1, 1, 1])]).is_err());
    }

    #[test]
    fn conv_and_pool_rules() {
        let k = l([3, 3, 2, 4]);
        let x = l([8, 6, 2, 1]);
        let op = Op::Im2Col { s0: 1, s1: 1, p0: 1, p1: 0, d0: 1, d1: 1, is_2d: true };
        assert_eq!(infer(&op, &[k, x]).unwrap().ne4(), [18, 8, 4, 1]);
        let p = Op::Pool2d { op: crate::op::PoolOp::Max, k0: 2, k1: 2, s0: 2, s1: 2, p0: 0.0, p1: 0.0 };
        assert_eq!(infer(&p, &[l([7, 6, 3, 1])]).unwrap().ne4(), [3, 3, 3, 1]);
        assert_eq!(infer(&Op::Concat { dim: 1 }, &[l([2, 3, 1, 1]), l([2, 4, 1, 1])]).unwrap().ne4(), [2, 7, 1, 1]);
        assert!(infer(&Op::Concat { dim: 0 }, &[l([2, 3, 1, 1]), l([2, 4, 1, 1])]).is_err());
    }

    #[test]
    fn fifth_dimension_rules() {
        let l5 = |ne: [usize; 5]| Layout::contiguous(DType::F32, ne);
        let a = l5([3, 2, 2, 2, 3]);
        let ne = |op: Op, s: &[Layout]| infer(&op, s).map(|o| o.ne);
        assert_eq!(ne(Op::Add, &[a, a]).unwrap(), a.ne);
        assert_eq!(ne(Op::Mul, &[a, l5([3, 1, 1, 1, 1])]).unwrap(), a.ne);
        assert!(ne(Op::Add, &[a, l5([3, 2, 2, 2, 2])]).is_err(), "2 does not divide 3");
        assert!(ne(Op::Add, &[l5([3, 2, 2, 2, 1]), a]).is_err(), "b is not broadcast over a");
        assert_eq!(ne(Op::Concat { dim: 4 }, &[a, a]).unwrap(), [3, 2, 2, 2, 6]);
        assert_eq!(ne(Op::Concat { dim: 4 }, &[l5([3, 1, 1, 1, 1]), l5([3, 1, 1, 1, 1])]).unwrap(), [3, 1, 1, 1, 2]);
        assert_eq!(ne(Op::Concat { dim: 1 }, &[a, a]).unwrap(), [3, 4, 2, 2, 3]);
        assert!(ne(Op::Concat { dim: 5 }, &[a, a]).is_err());
        assert!(ne(Op::Concat { dim: 4 }, &[a, l5([3, 2, 2, 1, 3])]).is_err());
        assert_eq!(ne(Op::SumRows, &[a]).unwrap(), [1, 2, 2, 2, 3]);
        assert_eq!(ne(Op::Sum, &[a]).unwrap(), [1, 1, 1, 1, 1]);
        assert_eq!(ne(Op::Repeat, &[l5([3, 1, 1, 1, 1]), a]).unwrap(), a.ne);
        let e = ne(Op::MulMat, &[a, a]).unwrap_err().to_string();
        assert!(e.contains("up to four dimensions") && e.contains("ggml_reshape_4d"), "{e}");
    }
}
