//! im2col, the unfolding under `conv_2d` (2-D pooling, re-exported here,
//! lives with the other sliding-window kernels in `window`).

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;

pub use super::window::pool_2d;

/// Unfold patches of `b` for kernel `k`: params are [s0, s1, p0, p1, d0, d1].
/// 2-D: b [IW, IH, IC, N] -> [IC*KH*KW, OW, OH, N]; 1-D: b [IW, IC, N] -> [IC*KW, OW, N].
// BOUNDS-FN: `ne`, `k.ne`, `b.ne` and `p` are fixed-size arrays indexed by
// literals. `op::shape` (Op::Im2Col) made `out` [KW*KH*IC, OW, OH, N] (1-D:
// [KW*IC, OW, N]) with IC the kernel's and the input's channel count, and `b`
// is contiguous (a kernel's `Src`): IW*IH*IC*N values (1-D: IW*IC*N). A row
// r < OW*OH*N has n = r / (OW*OH) < N; ics = IC, so cbase + IH*IW <=
// N*IC*IW*IH; `orow[e..e + kw]` advances kw per (ic, ky), IC*KH*KW = the row
// in all; `src` is one input row (0 <= iy < IH), read at ix0..ix0 + kw only
// when that lies inside it, else at 0 <= ix < IW.
pub fn im2col<T: Float>(
    k: &Src<'_, T>,
    b: &Src<'_, T>,
    p: [i32; 6],
    is_2d: bool,
    out: &mut [T],
    ne: [usize; 4],
    pool: &CpuPool,
) {
    let [s0, s1, p0, p1, d0, d1] = p.map(|v| v as i64);
    let (kw, kh) = if is_2d { (k.ne[0], k.ne[1]) } else { (k.ne[0], 1) };
    let (iw, ih) = if is_2d { (b.ne[0] as i64, b.ne[1] as i64) } else { (b.ne[0] as i64, 1) };
    let (ow, oh) = if is_2d { (ne[1], ne[2]) } else { (ne[1], 1) };
    let row = ne[0];
    // 1-D: b [IW, IC, N] is walked as [IW, 1, IC, N].
    let plane = if is_2d { b.ne[0] * b.ne[1] } else { b.ne[0] };
    par_rows(pool, out, row, |r0, chunk| {
        for (j, orow) in chunk.chunks_mut(row.max(1)).enumerate() {
            let r = r0 + j;
            let x = (r % ow) as i64;
            let y = ((r / ow) % oh) as i64;
            let n = r / (ow * oh);
            let (ix0, iy0) = (x * s0 - p0, if is_2d { y * s1 - p1 } else { 0 });
            // The row runs over (kx fastest, ky, ic): offsets advance without
            // a division per element.
            let ics = row / (kw * kh).max(1);
            let mut e = 0usize;
            for ic in 0..ics {
                let cbase = (n * ics + ic) * plane;
                for ky in 0..kh as i64 {
                    let iy = iy0 + ky * d1;
                    let seg = &mut orow[e..e + kw];
                    e += kw;
                    if iy < 0 || iy >= ih {
                        seg.fill(T::ZERO);
                        continue;
                    }
                    let rbase = cbase + iy as usize * iw as usize;
                    let src = &b.d[rbase..rbase + iw as usize];
                    if d0 == 1 && ix0 >= 0 && ix0 + kw as i64 <= iw {
                        let from = &src[ix0 as usize..ix0 as usize + kw];
                        // A 3-wide kernel's segment as three moves: a call
                        // to memcpy per segment would cost more than the copy.
                        if let ([o0, o1, o2], [v0, v1, v2]) = (&mut *seg, from) {
                            (*o0, *o1, *o2) = (*v0, *v1, *v2);
                        } else {
                            seg.copy_from_slice(from);
                        }
                        continue;
                    }
                    for (kx, o) in seg.iter_mut().enumerate() {
                        let ix = ix0 + kx as i64 * d0;
                        *o = if ix < 0 || ix >= iw { T::ZERO } else { src[ix as usize] };
                    }
                }
            }
        }
    });
}
