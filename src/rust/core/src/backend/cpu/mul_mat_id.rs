//! The indirect product of mixtures of experts: each result column is one
//! expert's matrix (chosen by an index) times one column of b.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use anyhow::ensure;

/// w [K, M, E], b [K, nb1, T], ids [n, T] -> out [M, n, T].
// BOUNDS-FN: `mul_mat_id` (op/shape.rs) shaped the node: w [K, M, E, 1] and
// b [K, nb1, T, 1] share K, ids is [n, T] (n = ne[1]), out [M, n, T]; all
// three are gathered contiguous (st are theirs). Column c < n * T of out
// gives i < n, t < T: experts (n * T ids) has entry i + n * t; the column of
// b at (i % nb1, t) and row r < M of expert ex < E (checked on entry) of w
// each hold K values.
pub fn mul_mat_id<T: Float>(w: &Src<'_, T>, b: &Src<'_, T>, ids: &Src<'_, T>, out: &mut [T], ne: [usize; 4], pool: &CpuPool) -> crate::Result<()> {
    let (k, m, e) = (w.ne[0], w.ne[1], w.ne[2]);
    let n = ne[1];
    let mut experts = Vec::with_capacity(ids.d.len());
    for &v in ids.d.iter() {
        let x = v.to_f64();
        ensure!(
            x >= 0.0 && (x as usize) < e,
            "mul_mat_id: expert id {x} is out of range: there are {e} experts (ids start at 0)"
        );
        experts.push(x as usize);
    }
    par_rows(pool, out, m, |c0, chunk| {
        for (j, col) in chunk.chunks_mut(m.max(1)).enumerate() {
            let c = c0 + j;
            let (i, t) = (c % n, c / n);
            let ex = experts[i + n * t];
            let bo = (i % b.ne[1]) * b.st[1] + t * b.st[2];
            let bc = &b.d[bo..bo + k];
            for (r, o) in col.iter_mut().enumerate() {
                let wo = r * w.st[1] + ex * w.st[2];
                let mut acc = T::ZERO;
                for (x, y) in w.d[wo..wo + k].iter().zip(bc) {
                    acc += *x * *y;
                }
                *o = acc;
            }
        }
    });
    Ok(())
}
