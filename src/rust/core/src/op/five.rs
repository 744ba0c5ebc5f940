//! The fifth dimension of the shape rules. The ops that act on each slice of
//! the fifth dimension alike (element-wise maps, the binary ops and their
//! broadcasting, the row ops, copies, `concat`) take tensors of five
//! dimensions: their rule of four dimensions shapes one slice, and the
//! fifth size comes from the sources. Every other op refuses them, naming
//! the source and the way back to four dimensions.

use super::rules::{sh, src, Out, Shaped};
use super::Op;
use crate::layout::Layout;
use anyhow::{bail, ensure};

/// How the sources' fifth sizes combine.
enum Fifth {
    /// All equal.
    Same,
    /// Each divides the first source's (the others are broadcast over it).
    OverFirst,
    /// Each divides the second source's (`repeat`: a is tiled to b).
    OverSecond,
    /// Each equal to the largest or 1 (numpy's broadcasting).
    Mutual,
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// The result of `op` on sources of which one has a fifth dimension above
/// 1 (or `concat` along the fifth dimension); `infer4` is the op's rule of
/// four dimensions.
// BOUNDS-FN: ne is a Dims ([usize; 5]) indexed by literals below 5, Out::ne a
// [usize; 4] by literals below 4; sources through src().
pub fn infer(op: &Op, s: &[Layout], infer4: fn(&Op, &[Layout]) -> crate::Result<Out>) -> crate::Result<Shaped> {
    if let Op::Concat { dim: 4 } = op {
        let (a, b) = (src(s, 0)?, src(s, 1)?);
        ensure!(a.dtype == b.dtype, "concat needs tensors of one type, not {} and {}", sh(a), sh(b));
        ensure!(
            a.ne4() == b.ne4(),
            "concat along dimension 4: a ({}) and b ({}) must have the same sizes in dimensions 0 to 3",
            sh(a),
            sh(b)
        );
        let mut ne = a.ne;
        ne[4] += b.ne[4];
        return Ok(Shaped { dtype: a.dtype, ne });
    }
    let fifth = match op {
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Add1 | Op::SoftMax { .. } => Fifth::OverFirst,
        Op::Repeat => Fifth::OverSecond,
        Op::Binary { .. } => Fifth::Mutual,
        Op::Unary(_)
        | Op::UnaryBack { .. }
        | Op::Scale { .. }
        | Op::LeakyRelu { .. }
        | Op::Clamp { .. }
        | Op::Norm { .. }
        | Op::RmsNorm { .. }
        | Op::Dup
        | Op::Cont
        | Op::SumRows
        | Op::Mean
        | Op::Sum
        | Op::Concat { .. }
        | Op::Glu(_)
        | Op::SiluBack
        | Op::Map { .. }
        | Op::ScanRows { .. }
        | Op::ReduceRows { .. } => Fifth::Same,
        _ => {
            let Some((i, l)) = s.iter().enumerate().find(|(_, l)| l.ne[4] > 1) else {
                bail!("{}: the five-dimension shape rule was asked about sources of at most four", op.name());
            };
            bail!(
                "{} works on tensors of up to four dimensions, and {} ({}) has five; \
                 fold its last two dimensions together with ggml_reshape_4d() first",
                op.name(),
                NAMES.get(i).unwrap_or(&"a source"),
                sh(l)
            );
        }
    };
    let n4 = match fifth {
        Fifth::OverSecond => src(s, 1)?.ne[4],
        Fifth::Mutual => s.iter().map(|l| l.ne[4]).max().unwrap_or(1),
        Fifth::Same | Fifth::OverFirst => src(s, 0)?.ne[4],
    };
    for (i, l) in s.iter().enumerate() {
        let ok = match fifth {
            Fifth::Same => l.ne[4] == n4,
            Fifth::Mutual => l.ne[4] == n4 || l.ne[4] == 1,
            Fifth::OverFirst | Fifth::OverSecond => l.ne[4] > 0 && n4 % l.ne[4] == 0,
        };
        ensure!(
            ok,
            "{}: the fifth size of {} ({}) {} the fifth size of the result ({n4})",
            op.name(),
            NAMES.get(i).unwrap_or(&"a source"),
            sh(l),
            match fifth {
                Fifth::Same => "must equal",
                _ => "must divide",
            }
        );
    }
    let slices: Vec<Layout> = s.iter().map(|l| l.slice4(0).0).collect();
    let o = infer4(op, &slices)?;
    let n4 = if matches!(op, Op::Sum) { 1 } else { n4 };
    Ok(Shaped { dtype: o.dtype, ne: [o.ne[0], o.ne[1], o.ne[2], o.ne[3], n4] })
}
