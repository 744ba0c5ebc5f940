//! Rotary position embedding: every row (one head of one token) rotates its
//! pairs by the angles of its position ([`crate::op::rope`] has the rules).

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::rope::{Pairing, Rope};

/// srcs: a, positions, optional frequency factors.
// BOUNDS-FN: `Rope::infer` (op/rope.rs) shaped the node: out has a's shape
// (both contiguous), 0 < nd <= n0 (2 nd == n0 in the vision mode); the
// positions hold one (M-RoPE: four) per i2 < n2, so i2 + c n2 < 4 n2; the
// factors hold n_pairs values (nd / 2, nd in the vision mode) and theta one
// per pair. The pairs rotated: (2j, 2j + 1) with j < nd / 2, (j, j + nd / 2)
// with j < nd / 2, (j, j + nd) with j < nd = n0 / 2: all below n0.
pub fn rope<T: Float>(r: &Rope, a: &Src<'_, T>, pos: &Src<'_, T>, ff: Option<&Src<'_, T>>, out: &mut [T], pool: &CpuPool) {
    let [n0, n1, n2, _] = a.ne;
    let nd = r.n_dims as usize;
    let corr = r.corr_dims();
    let pairing = r.pairing();
    // pairs that carry an angle: vision rotates the whole row
    let n_pairs = if pairing == Pairing::Vision { nd } else { nd / 2 };
    par_rows(pool, out, n0, |r0, chunk| {
        let mut theta = Vec::with_capacity(n_pairs);
        let mut cs: Vec<(T, T)> = Vec::with_capacity(n_pairs);
        let mut last = usize::MAX;
        for (k, orow) in chunk.chunks_mut(n0.max(1)).enumerate() {
            let row = r0 + k;
            let (i2, i3) = ((row / n1) % n2, row / (n1 * n2));
            let plane = i2 + n2 * i3;
            if plane != last {
                // one token's angles serve all its heads
                let p = |c: usize| if r.is_mrope() { pos.d[i2 + c * n2] } else { pos.d[i2] };
                r.thetas([p(0), p(1), p(2), p(3)], n_pairs, &mut theta);
                cs.clear();
                for (j, &t) in theta.iter().enumerate() {
                    let f = ff.map_or(T::ONE, |f| f.d[j]);
                    cs.push(r.cos_sin(t / f, j, corr));
                }
                last = plane;
            }
            let x = &a.d[row * n0..(row + 1) * n0];
            let rot = |o: &mut [T], i: usize, j: usize, (c, s): (T, T)| {
                let (x0, x1) = (x[i], x[j]);
                o[i] = x0 * c - x1 * s;
                o[j] = x0 * s + x1 * c;
            };
            match pairing {
                Pairing::Adjacent => {
                    for (j, &c) in cs.iter().enumerate() {
                        rot(orow, 2 * j, 2 * j + 1, c);
                    }
                }
                Pairing::Halves => {
                    for (j, &c) in cs.iter().enumerate() {
                        rot(orow, j, j + nd / 2, c);
                    }
                }
                Pairing::Vision => {
                    for (j, &c) in cs.iter().enumerate() {
                        rot(orow, j, j + nd, c);
                    }
                }
            }
            if pairing != Pairing::Vision {
                orow[nd..].copy_from_slice(&x[nd..]);
            }
        }
    });
}
