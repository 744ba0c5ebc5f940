//! MatMul: numpy's matmul of two bottoms (0=transB transposes the last two
//! axes of B). A 1-d A is a row and a 1-d B a column, their axis dropped
//! from the result; leading axes broadcast (extent 1 against any). The
//! product of two vectors is a 1-d blob of one value.

use super::kernels::matmul::{matmul, MatView};
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct MatMul {
    trans_b: bool,
}

impl MatMul {
    pub fn new(pd: &ParamDict) -> anyhow::Result<MatMul> {
        Ok(MatMul { trans_b: pd.int(0, 0) != 0 })
    }
}

/// Offsets (in matrices) of batch `i` of an operand with leading extents
/// `own` under the broadcast extents `out` (right-aligned).
// BOUNDS-FN: callers pass own no longer than out (its batch axes are among the
// broadcast ones), so j < own.len().
fn batch_index(mut i: usize, own: &[usize], out: &[usize]) -> usize {
    let (mut at, mut stride) = (0, 1);
    for (k, &e) in out.iter().enumerate().rev() {
        let x = i % e;
        i /= e;
        let j = k as isize - (out.len() - own.len()) as isize;
        if j >= 0 {
            let o = own[j as usize];
            if o != 1 {
                at += x * stride;
            }
            stride *= o;
        }
    }
    at
}

impl Layer for MatMul {
    fn one_blob_only(&self) -> bool {
        false
    }

    // Bounds: two bottoms (checked) with 1 to 4 axes (la.len() - 2 and lb[r - 2]
    // only with two or more); batch i reads ba[i + ba.len() - nb] when that is >= 0;
    // batch_index picks matrix ao / (m * k) < a's batch count, so a's (b's) slices
    // end within its data.
    // BOUNDS-FN: every index is in range as said just above.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if bottoms.len() != 2 {
            ncnn_bail!("MatMul takes two bottoms, got {}", bottoms.len());
        }
        let (a, b) = (&bottoms[0], &bottoms[1]);
        let (la, lb) = (a.axes(), b.axes());
        let (m, k) = if la.len() == 1 { (1, la[0]) } else { (la[la.len() - 2], la[la.len() - 1]) };
        let (kb, n) = match lb.len() {
            1 => (lb[0], 1),
            r if self.trans_b => (lb[r - 1], lb[r - 2]),
            r => (lb[r - 2], lb[r - 1]),
        };
        if k != kb {
            ncnn_bail!("MatMul: A {} and B {} do not agree on the shared extent ({k} against {kb})", a.describe(), b.describe());
        }
        let ba = &la[..la.len().saturating_sub(2)];
        let bb = &lb[..lb.len().saturating_sub(2)];
        let nb = ba.len().max(bb.len());
        let mut batch = vec![1usize; nb];
        for i in 0..nb {
            let ea = if i + ba.len() >= nb { ba[i + ba.len() - nb] } else { 1 };
            let eb = if i + bb.len() >= nb { bb[i + bb.len() - nb] } else { 1 };
            if ea != eb && ea != 1 && eb != 1 {
                ncnn_bail!("MatMul: the leading axes of A {} and B {} do not broadcast", a.describe(), b.describe());
            }
            batch[i] = ea.max(eb);
        }
        let count: usize = batch.iter().product();
        let mut out = take_vec(count * m * n);
        out.resize(count * m * n, 0.0);
        for (i, c) in out.chunks_mut(m * n).enumerate() {
            let ao = batch_index(i, ba, &batch) * m * k;
            let bo = batch_index(i, bb, &batch) * k * n;
            let av = MatView::rows(&a.data[ao..ao + m * k], k);
            let bd = &b.data[bo..bo + k * n];
            let bv = if self.trans_b && lb.len() > 1 { MatView::transposed(bd, k) } else { MatView::rows(bd, n) };
            matmul(av, bv, c, m, k, n);
        }
        let mut axes = batch;
        if la.len() > 1 {
            axes.push(m);
        }
        if lb.len() > 1 {
            axes.push(n);
        }
        if axes.is_empty() {
            axes.push(1);
        }
        if axes.len() > 4 {
            ncnn_bail!("MatMul of {} and {} would have {} dimensions; a blob has at most 4", a.describe(), b.describe(), axes.len());
        }
        Ok(vec![Mat::from_axes(&axes, out)?])
    }
}
