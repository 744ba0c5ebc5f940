//! The full 2-D convolution as blocked products. Each task takes a band of
//! output rows of one image, unfolds the input patches it needs into a
//! buffer of its own, laid out pixel-fastest (so the unfolding is runs of
//! copies, and the buffer stays in the cache while it is read), and
//! multiplies it with the flattened kernel through `gemm_rt`, writing
//! straight into the result. The whole unfolded input (nine times the
//! image for a 3x3 kernel) never exists; bands run in parallel on the pool.

use super::access::Src;
use super::gemm_rt::{num_zero::Zero, product, Strided};
use super::par::CpuPool;
use crate::base::float::Float;
use rayon::prelude::*;

/// Unfolded values per band, about (the band's rows are whole output rows):
/// 64 Ki f32 values, 256 KiB, fit the per-core cache with the kernel's panel.
const BAND_VALUES: usize = 1 << 16;

/// The sizes of one convolution, as usizes and signed offsets.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    pub kw: usize,
    pub kh: usize,
    pub ic: usize,
    pub oc: usize,
    pub iw: usize,
    pub ih: usize,
    pub ow: usize,
    pub oh: usize,
    /// Strides, paddings, dilations: [s0, s1, p0, p1, d0, d1].
    pub p: [i64; 6],
}

impl Shape {
    /// The shape of `conv(x, k)` into `out` of sizes `ne`, checked against
    /// the lengths of the three.
    // BOUNDS-FN: `ne`, `k.ne` and `x.ne` are [usize; 4] indexed by literals.
    pub fn new<T: Float>(k: &Src<'_, T>, x: &Src<'_, T>, p: [i32; 6], out: &[T], ne: [usize; 4]) -> crate::Result<Shape> {
        let sh = Shape {
            kw: k.ne[0],
            kh: k.ne[1],
            ic: k.ne[2],
            oc: k.ne[3],
            iw: x.ne[0],
            ih: x.ne[1],
            ow: ne[0],
            oh: ne[1],
            p: p.map(|v| v as i64),
        };
        let nb = ne[3];
        anyhow::ensure!(
            out.len() == sh.ow * sh.oh * sh.oc * nb && x.d.len() >= sh.iw * sh.ih * sh.ic * nb && k.d.len() >= sh.depth() * sh.oc,
            "internal: conv_2d sizes"
        );
        Ok(sh)
    }

    /// Values of one output pixel's patch: KW * KH * IC.
    pub fn depth(&self) -> usize {
        self.kw * self.kh * self.ic
    }
}

/// The result pointer, shared by the tasks (each writes its own pixels).
#[derive(Clone, Copy)]
pub(super) struct OutPtr<T>(pub *mut T);
// SAFETY: tasks write disjoint elements (their own band's pixels of their
// own image) of a result that outlives the parallel loop.
unsafe impl<T> Send for OutPtr<T> {}
// SAFETY: as for Send; the pointer itself is only copied.
unsafe impl<T> Sync for OutPtr<T> {}

/// `out [OW, OH, OC, N] = conv(x [IW, IH, IC, N], k [KW, KH, IC, OC])` with
/// `p` = [s0, s1, p0, p1, d0, d1]; `ne` are the result's sizes.
// BOUNDS-FN: `ne` is a [usize; 4] indexed by a literal; image n < N
// starts at n * IW*IH*IC inside `x.d`, which holds IW*IH*IC*N values
// (`Shape::new`); `buf` was resized to px * depth just before.
pub fn conv_2d<T: Float + Zero + 'static>(
    k: &Src<'_, T>,
    x: &Src<'_, T>,
    p: [i32; 6],
    out: &mut [T],
    ne: [usize; 4],
    pool: &CpuPool,
) -> crate::Result<()> {
    let sh = Shape::new(k, x, p, out, ne)?;
    let nb = ne[3];
    let depth = sh.depth();
    if out.is_empty() {
        return Ok(());
    }
    if depth == 0 {
        out.fill(<T as Float>::ZERO);
        return Ok(());
    }
    let rows = (BAND_VALUES / (depth * sh.ow).max(1)).clamp(1, sh.oh);
    let bands_per_image = sh.oh.div_ceil(rows);
    let tasks = bands_per_image * nb;
    let dst = OutPtr(out.as_mut_ptr());
    let band = |buf: &mut Vec<T>, t: usize| {
        if crate::base::cancel::requested() {
            return;
        }
        let (n, y0) = (t / bands_per_image, (t % bands_per_image) * rows);
        let y1 = (y0 + rows).min(sh.oh);
        let px = (y1 - y0) * sh.ow;
        buf.resize(px * depth, <T as Float>::ZERO);
        unfold(&sh, &x.d[n * sh.iw * sh.ih * sh.ic..], y0, y1, &mut buf[..px * depth]);
        let plane = sh.ow * sh.oh;
        let a = Strided { ptr: buf.as_ptr(), rs: 1, cs: px as isize };
        let b = Strided { ptr: k.d.as_ptr(), rs: 1, cs: depth as isize };
        let c = dst;
        // SAFETY: A is the px x depth buffer just filled (column stride px),
        // B the depth x OC kernel (checked above: k holds depth*OC values),
        // and C the band's pixels y0*OW.. of image n for every channel
        // (column stride OW*OH) inside `out`; no other task writes them.
        unsafe {
            let c0 = c.0.add(n * plane * sh.oc + y0 * sh.ow);
            product(None, px, depth, sh.oc, a, b, c0, 1, plane as isize);
        }
    };
    if pool.n_threads <= 1 || tasks < 2 {
        let mut buf = Vec::new();
        (0..tasks).for_each(|t| band(&mut buf, t));
    } else {
        pool.install(|| (0..tasks).into_par_iter().for_each_init(Vec::new, |buf, t| band(buf, t)));
    }
    Ok(())
}

/// Unfold output rows y0..y1 of one image `x` [IW, IH, IC] into `cols`:
/// column (ic, ky, kx) (kx fastest, the kernel's order) holds, for each
/// pixel of the band, the input value under that kernel tap (0 in padding).
// BOUNDS-FN: `x` holds at least one image, IW*IH*IC values (`conv_2d`'s
// check), so channel c < IC and its row 0 <= iy < IH lie inside it. Each
// `seg` is ow long and lo <= hi <= ow. lo = ceil(-off / s0) (0 when off >=
// 0) and hi = ceil((IW - off) / s0) make every ox in lo..hi read ix = ox *
// s0 + off in 0..IW: for s0 = 1, `src[lo + off..hi + off]`.
fn unfold<T: Float>(sh: &Shape, x: &[T], y0: usize, y1: usize, cols: &mut [T]) {
    let [s0, s1, p0, p1, d0, d1] = sh.p;
    let (iw, ih, ow) = (sh.iw as i64, sh.ih as i64, sh.ow);
    let px = (y1 - y0) * ow;
    let mut col = cols.chunks_exact_mut(px.max(1));
    for c in 0..sh.ic {
        let chan = &x[c * sh.iw * sh.ih..][..sh.iw * sh.ih];
        for ky in 0..sh.kh as i64 {
            for kx in 0..sh.kw as i64 {
                let Some(dst) = col.next() else { return };
                let off = kx * d0 - p0;
                // Output columns whose tap falls inside the row: ix = ox s0 + off in [0, IW).
                let lo = if off >= 0 { 0 } else { ((-off) + s0 - 1) / s0 };
                let hi = if iw - off <= 0 { 0 } else { ((iw - off + s0 - 1) / s0).min(ow as i64) };
                let (lo, hi) = (lo.min(hi) as usize, hi.max(0) as usize);
                for (r, seg) in dst.chunks_exact_mut(ow).enumerate() {
                    let iy = (y0 + r) as i64 * s1 + ky * d1 - p1;
                    if iy < 0 || iy >= ih || lo >= hi {
                        seg.fill(<T as Float>::ZERO);
                        continue;
                    }
                    let src = &chan[iy as usize * sh.iw..][..sh.iw];
                    seg[..lo].fill(<T as Float>::ZERO);
                    seg[hi..].fill(<T as Float>::ZERO);
                    if s0 == 1 {
                        let start = (lo as i64 + off) as usize;
                        seg[lo..hi].copy_from_slice(&src[start..start + (hi - lo)]);
                    } else {
                        for (ox, v) in seg[lo..hi].iter_mut().enumerate() {
                            *v = src[((lo + ox) as i64 * s0 + off) as usize];
                        }
                    }
                }
            }
        }
    }
}
