//! The shape rule of the extended ops ([`super::extended`]).

use super::extended::PadMode;
use super::rules::{src, Out};
use super::Op;
use crate::base::dtype::DType;
use crate::layout::{fmt_shape, Layout};
use anyhow::{bail, ensure};

fn sh(l: &Layout) -> String {
    format!("{} {}", l.dtype.name(), fmt_shape(&l.ne))
}

/// Shape rule of the ops of this module; None for other ops.
// BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4
// or by i in 0..4 (lo and hi are [usize; 4]); ne[*dim] after dim < 4 is checked.
pub fn infer(op: &Op, s: &[Layout]) -> Option<crate::Result<Out>> {
    let r = match op {
        Op::Map { .. } => one(s).map(|a| Out { dtype: DType::F32, ne: a.ne4() }),
        Op::Binary { .. } => two(s).and_then(|(a, b)| {
            let mut ne = [1usize; 4];
            for i in 0..4 {
                ne[i] = match (a.ne[i], b.ne[i]) {
                    (x, y) if x == y => x,
                    (1, y) => y,
                    (x, 1) => x,
                    _ => bail!(
                        "a ({}) and b ({}) cannot be broadcast together: each size must be equal or 1",
                        sh(a),
                        sh(b)
                    ),
                };
            }
            Ok(Out { dtype: DType::F32, ne })
        }),
        Op::ReduceRows { .. } => one(s).map(|a| Out { dtype: DType::F32, ne: [1, a.ne[1], a.ne[2], a.ne[3]] }),
        Op::ScanRows { .. } => one(s).map(|a| Out { dtype: DType::F32, ne: a.ne4() }),
        Op::GatherAxis { dim } => two(s).and_then(|(a, idx)| {
            ensure!(*dim < 4, "gather: `dim` must be 0 to 3, not {dim}");
            ensure!(
                idx.ne[1] == 1 && idx.ne[2] == 1 && idx.ne[3] == 1,
                "gather: the indices ({}) must be a vector",
                sh(idx)
            );
            let mut ne = a.ne4();
            ne[*dim] = idx.ne[0];
            Ok(Out { dtype: if a.dtype == DType::I32 { DType::I32 } else { DType::F32 }, ne })
        }),
        Op::ScatterFlat { .. } => two(s).and_then(|(a, p)| {
            ensure!(
                p.ne[0] == 2 && p.ne[2] == 1 && p.ne[3] == 1,
                "scatter: the updates ({}) must be [2, n]: (flat index, value) pairs",
                sh(p)
            );
            Ok(Out { dtype: DType::F32, ne: a.ne4() })
        }),
        Op::PadEx { lo, hi, mode, .. } => one(s).and_then(|a| {
            let mut ne = a.ne4();
            for i in 0..4 {
                ensure!(
                    *mode == PadMode::Constant || a.ne[i] > 0 || lo[i] + hi[i] == 0,
                    "pad: an empty dimension cannot be padded by {mode:?}"
                );
                ensure!(
                    *mode != PadMode::Reflect || (lo[i] < a.ne[i].max(1) && hi[i] < a.ne[i].max(1)),
                    "pad: reflect padding ({} before, {} after) must be smaller than the size {} of dimension {i}",
                    lo[i],
                    hi[i],
                    a.ne[i]
                );
                ne[i] = a.ne[i] + lo[i] + hi[i];
            }
            Ok(Out { dtype: a.dtype, ne })
        }),
        _ => return None,
    };
    Some(r)
}

fn one(s: &[Layout]) -> crate::Result<&Layout> {
    ensure!(s.len() == 1, "takes 1 source tensor, got {}", s.len());
    Ok(src(s, 0)?)
}

fn two(s: &[Layout]) -> crate::Result<(&Layout, &Layout)> {
    ensure!(s.len() == 2, "takes 2 source tensors, got {}", s.len());
    Ok((src(s, 0)?, src(s, 1)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::extended::BinFn;

    #[test]
    fn shape_rules() {
        let l = |ne| Layout::contiguous(DType::F32, ne);
        let b = Op::Binary { f: BinFn::Add };
        assert_eq!(infer(&b, &[l([3, 1, 2, 1]), l([1, 4, 2, 1])]).unwrap().unwrap().ne, [3, 4, 2, 1]);
        assert!(infer(&b, &[l([3, 1, 1, 1]), l([2, 1, 1, 1])]).unwrap().is_err());
        let g = Op::GatherAxis { dim: 1 };
        assert_eq!(infer(&g, &[l([3, 5, 1, 1]), l([2, 1, 1, 1])]).unwrap().unwrap().ne, [3, 2, 1, 1]);
        let p = Op::PadEx { lo: [1, 0, 0, 0], hi: [2, 0, 0, 0], mode: PadMode::Reflect, value: 0.0 };
        assert_eq!(infer(&p, &[l([3, 2, 1, 1])]).unwrap().unwrap().ne, [6, 2, 1, 1]);
        let p = Op::PadEx { lo: [3, 0, 0, 0], hi: [0, 0, 0, 0], mode: PadMode::Reflect, value: 0.0 };
        assert!(infer(&p, &[l([3, 2, 1, 1])]).unwrap().is_err());
        assert!(infer(&Op::Sum, &[l([1, 1, 1, 1])]).is_none());
    }
}
