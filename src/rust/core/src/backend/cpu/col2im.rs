//! The adjoint of im2col (ggml's im2col_back, the input gradient of a
//! convolution): every value of the patches is added to the input position
//! it was read from.

use super::access::Src;
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;

/// Patches `a` `[C KW KH, OW, OH, N]` (a row runs kx fastest, then ky,
/// then the channel, as im2col writes them) summed into `out`
/// `[W, H, C, N]`; `p` is [s0, s1, p0, p1, d0, d1, kw, kh]. One sample per
/// task: the patches are read once, in order, and each sample's sums stay
/// in the cache.
// BOUNDS-FN: `ne`, `a.ne` and `p` are fixed-size arrays indexed by literals.
// `op::shape` (Op::Im2ColBack) checked that `a` is [C*KW*KH, OW, OH, N] for
// this kernel over a W x H input and made `out` [W, H, C, N]; `a` is
// contiguous (a kernel's `Src`). For sample n < N (a chunk of whole images)
// and output position (ox, oy), `col` is row ox + OW*(oy + OH*n) of `a`; `e`
// advances one per tap of each channel, C*KH*KW = the row in all; a write
// goes to channel c's row 0 <= y < H at 0 <= x < W, or to the kernel row
// x0..x0 + kw when it lies inside (x0 >= 0, x0 + kw <= W).
pub fn im2col_back<T: Float>(a: &Src<'_, T>, p: [i32; 8], out: &mut [T], ne: [usize; 4], pool: &CpuPool) {
    let [s0, s1, p0, p1, d0, d1, kw, kh] = p.map(|v| v as i64);
    let (w, h, ch) = (ne[0] as i64, ne[1] as i64, ne[2]);
    let img = ne[0] * ne[1] * ch;
    let (row, ow, oh) = (a.ne[0], a.ne[1], a.ne[2]);
    par_rows(pool, out, img, |r0, chunk| {
        for (j, dst) in chunk.chunks_mut(img.max(1)).enumerate() {
            let n = r0 + j;
            dst.fill(T::ZERO);
            for oy in 0..oh {
                let y0 = oy as i64 * s1 - p1;
                for ox in 0..ow {
                    let x0 = ox as i64 * s0 - p0;
                    let col = &a.d[row * (ox + ow * (oy + oh * n))..][..row];
                    let mut e = 0usize;
                    for c in 0..ch {
                        for ky in 0..kh {
                            let y = y0 + ky * d1;
                            if y < 0 || y >= h {
                                e += kw as usize;
                                continue;
                            }
                            let base = (c * h as usize + y as usize) * w as usize;
                            if d0 == 1 && x0 >= 0 && x0 + kw <= w {
                                // The whole kernel row is inside the image.
                                let at = base + x0 as usize;
                                let k = kw as usize;
                                for (d, &v) in dst[at..at + k].iter_mut().zip(&col[e..e + k]) {
                                    *d += v;
                                }
                                e += k;
                                continue;
                            }
                            for kx in 0..kw {
                                let x = x0 + kx * d0;
                                if x >= 0 && x < w {
                                    dst[base + x as usize] += col[e];
                                }
                                e += 1;
                            }
                        }
                    }
                }
            }
        }
    });
}
