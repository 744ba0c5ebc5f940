//! The f32 2-D convolution on CPUs with AVX-512, on the register kernels of
//! `sgemm`. The flattened kernel (B, depth x OC) is packed once per call
//! into the kernels' 8-column panels; each task takes a band of output
//! pixels of one image (ten 48-row panels, rows of the image run together)
//! and unfolds its input patches straight into the kernels' packed layout
//! of A, so that the unfolded values are written once and read from the
//! cache by the tiles, with no copy in between. `conv_gemm` unfolds into a
//! plain buffer that the `gemm` crate then packs again, and packs the
//! kernel again for every band.

use super::conv_gemm::{OutPtr, Shape};
use super::gemm_base::with_scratch;
use super::par::{for_bands, CpuPool};
use super::sgemm::{self, MR, NR};

/// Output pixels per task: ten panels of the register kernel's rows, whose
/// packed depth block (480 x 288 f32 values for a 3 x 3 x 64 kernel) stays
/// in the per-core cache while every column panel of B passes over it.
const BAND: usize = MR * 10;
/// Depth per packed block at most; a deeper kernel is cut into blocks of
/// equal depth, C summed over them.
const KC: usize = 512;

/// Whether a convolution of this shape goes to these kernels: AVX-512, and
/// enough channels and depth to fill the register tiles.
pub(super) fn wanted(sh: &Shape) -> bool {
    sh.depth() >= 16 && sh.oc >= NR && sh.ow * sh.oh >= 16 && sgemm::available()
}

/// `out [OW, OH, OC, N] = conv(x [IW, IH, IC, N], k [KW, KH, IC, OC])`;
/// the shape was checked against the slices by [`Shape::new`].
// BOUNDS-FN: image n < N starts at n * IW*IH*IC inside `x`, which holds
// IW*IH*IC*N values (`Shape::new`).
pub(super) fn conv_2d(sh: &Shape, k: &[f32], x: &[f32], out: &mut [f32], nb: usize, pool: &CpuPool) -> crate::Result<()> {
    let depth = sh.depth();
    anyhow::ensure!(k.len() >= depth * sh.oc && out.len() == sh.ow * sh.oh * sh.oc * nb, "internal: conv_pack sizes");
    if super::conv_shift::wanted(sh) {
        let kc_max = block_depth(depth, super::conv_shift::KC);
        return super::conv_shift::conv_2d(sh, &pack_kernel(sh, k, kc_max), kc_max, x, out, nb, pool);
    }
    let kc_max = block_depth(depth, KC);
    let np = sh.oc.div_ceil(NR) * NR;
    let bp = pack_kernel(sh, k, kc_max);
    let plane = sh.ow * sh.oh;
    let image = sh.iw * sh.ih * sh.ic;
    let dst = OutPtr(out.as_mut_ptr());
    let bp = &bp;
    for_bands(pool, nb, plane, BAND, |n, q0, px| {
        let img = &x[n * image..][..image];
        let c = dst;
        with_scratch(px.div_ceil(MR) * MR * kc_max, |ap| {
            let mut p0 = 0;
            while p0 < depth {
                let kc = kc_max.min(depth - p0);
                let ap = &mut ap[..px.div_ceil(MR) * MR * kc];
                unfold(sh, img, q0, px, p0, kc, ap);
                // SAFETY: `ap` holds the band's panels (px rounded up to MR
                // rows by kc), B's block np x kc values of `bp`; C is pixels
                // q0..q0+px of image n for every channel (column stride the
                // plane) inside `out`, which no other task writes; AVX-512F
                // (`wanted`).
                unsafe {
                    let c0 = c.0.add(n * plane * sh.oc + q0);
                    sgemm::tiles(px, kc, sh.oc, ap.as_ptr(), bp.as_ptr().add(p0 * np), c0, plane as isize, p0 > 0);
                }
                p0 += kc;
            }
        });
    });
    Ok(())
}

/// The depth of the blocks that a kernel of `depth` taps is cut into:
/// equal blocks of at most `max`.
pub(super) fn block_depth(depth: usize, max: usize) -> usize {
    depth.div_ceil(depth.div_ceil(max).max(1))
}

/// B (the kernel `k`, depth x OC, column stride depth) packed as the
/// register kernels read it, by depth blocks of `kc_max`: the block from
/// depth p0 holds the 8-column panels of its kc rows at p0 * np, np = OC
/// rounded up to 8 (columns past OC zero).
fn pack_kernel(sh: &Shape, k: &[f32], kc_max: usize) -> Vec<f32> {
    let depth = sh.depth();
    let np = sh.oc.div_ceil(NR) * NR;
    let mut bp = vec![0f32; depth * np];
    let mut p0 = 0;
    while p0 < depth && k.len() >= depth * sh.oc {
        let kc = kc_max.min(depth - p0);
        // SAFETY: B holds rows p0..p0+kc of every column (length checked
        // in the loop's condition); the block's np * kc values lie inside
        // `bp` (p0 + kc <= depth).
        unsafe { sgemm::pack(sh.oc, NR, kc, k.as_ptr().add(p0), depth as isize, 1, bp.as_mut_ptr().add(p0 * np)) };
        p0 += kc;
    }
    bp
}

/// Unfolds taps p0..p0+kc (the kernel's order: kx fastest, then ky, then
/// the input channel) of output pixels q0..q0+px of one image `x` [IW, IH,
/// IC] into `ap` as the register kernels' packed panels: pixel i under tap
/// t at `(i / MR) * MR * kc + t * MR + i % MR`, 0 in the padding and in the
/// lanes past px.
// BOUNDS-FN: `x` holds one image, IW*IH*IC values, so channel c < IC (tap
// p0 + t < depth) and its row 0 <= iy < IH lie inside it. For each row's
// run of `run` pixels starting at column ox0 (ox0 + run <= OW), a <= b lie
// in ox0..=ox0+run; lo = ceil(-off / s0) and hi = ceil((IW - off) / s0)
// bound the columns ox in lo..hi whose input column ox * s0 + off is in
// 0..IW, and a..b lies inside lo..hi when not empty, so for s0 = 1 `src[a + off..b +
// off]` is inside the row. `Panels::put` writes lane runs inside `ap`
// (its own proof), as does `put_strided`.
fn unfold(sh: &Shape, x: &[f32], q0: usize, px: usize, p0: usize, kc: usize, ap: &mut [f32]) {
    let [s0, s1, pw, ph, d0, d1] = sh.p;
    let (iw, ih, ow) = (sh.iw as i64, sh.ih as i64, sh.ow);
    let mut dst = Panels { ap, kc };
    for t in 0..kc {
        let d = p0 + t;
        let (c, ky, kx) = (d / (sh.kw * sh.kh), (d / sh.kw) % sh.kh, (d % sh.kw) as i64);
        let chan = &x[c * sh.iw * sh.ih..][..sh.iw * sh.ih];
        let off = kx * d0 - pw;
        let lo = if off >= 0 { 0 } else { ((-off) + s0 - 1) / s0 };
        let hi = if iw - off <= 0 { 0 } else { ((iw - off + s0 - 1) / s0).min(ow as i64) };
        let (lo, hi) = (lo.min(hi).max(0) as usize, hi.max(0) as usize);
        let mut i = 0;
        while i < px {
            let q = q0 + i;
            let (oy, ox0) = (q / ow, q % ow);
            let run = (ow - ox0).min(px - i);
            let iy = oy as i64 * s1 + ky as i64 * d1 - ph;
            if iy < 0 || iy >= ih {
                dst.zero(t, i, run);
            } else {
                let src = &chan[iy as usize * sh.iw..][..sh.iw];
                let a = lo.clamp(ox0, ox0 + run);
                let b = hi.clamp(a, ox0 + run);
                dst.zero(t, i, a - ox0);
                if b == a {
                    // No column of this run reads the input.
                } else if s0 == 1 {
                    let start = (a as i64 + off) as usize;
                    dst.put(t, i + a - ox0, &src[start..start + (b - a)]);
                } else {
                    let first = (a as i64 * s0 + off) as usize;
                    dst.put_strided(t, i + a - ox0, src, first, s0 as usize, b - a);
                }
                dst.zero(t, i + b - ox0, ox0 + run - b);
            }
            i += run;
        }
        dst.zero(t, px, px.div_ceil(MR) * MR - px);
    }
}

/// The packed panels of one depth block: pixel i under tap t at `(i / MR)
/// * MR * kc + t * MR + i % MR`.
struct Panels<'a> {
    ap: &'a mut [f32],
    kc: usize,
}

impl Panels<'_> {
    /// Pixels i..i+v.len() of tap t take the values `v`.
    // BOUNDS-FN: each piece is n <= MR - lane values from lane `lane` of
    // panel i / MR, at `at` = panel * MR * kc + t * MR + lane, inside `ap`
    // (it holds the band's panels, MR * kc values each, and i < px), read
    // with `get_mut`.
    fn put(&mut self, t: usize, mut i: usize, mut v: &[f32]) {
        while !v.is_empty() {
            let lane = i % MR;
            let n = (MR - lane).min(v.len());
            let at = (i / MR) * MR * self.kc + t * MR + lane;
            let (head, rest) = v.split_at(n);
            if let Some(d) = self.ap.get_mut(at..at + n) {
                d.copy_from_slice(head);
            }
            v = rest;
            i += n;
        }
    }

    /// Pixels i..i+n of tap t take every `step`-th value of `src` from
    /// `first` (the n values lie inside `src`).
    // BOUNDS-FN: as `put`; the source values are read through `get` and
    // `step_by`, so a short `src` leaves lanes unwritten, never reads past it.
    fn put_strided(&mut self, t: usize, mut i: usize, src: &[f32], first: usize, step: usize, mut n: usize) {
        let mut from = src.get(first..).unwrap_or(&[]).iter().step_by(step.max(1));
        while n > 0 {
            let lane = i % MR;
            let k = (MR - lane).min(n);
            let at = (i / MR) * MR * self.kc + t * MR + lane;
            if let Some(d) = self.ap.get_mut(at..at + k) {
                d.iter_mut().zip(from.by_ref()).for_each(|(d, v)| *d = *v);
            }
            n -= k;
            i += k;
        }
    }

    /// Pixels i..i+len of tap t are 0.
    // BOUNDS-FN: as `put`, the runs read with `get_mut`.
    fn zero(&mut self, t: usize, mut i: usize, mut len: usize) {
        while len > 0 {
            let lane = i % MR;
            let n = (MR - lane).min(len);
            let at = (i / MR) * MR * self.kc + t * MR + lane;
            if let Some(d) = self.ap.get_mut(at..at + n) {
                d.fill(0.0);
            }
            len -= n;
            i += n;
        }
    }
}
