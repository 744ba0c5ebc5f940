//! The f32 2-D convolution of stride 1 on CPUs with AVX-512, with no
//! unfolding. The output is computed over "wide" rows of W' = OW + (KW-1)
//! d0 pixels, the width of the padded input, so that output pixel P =
//! oy W' + ox reads the padded input at P + ky d1 W' + kx d0 for tap (ky, kx):
//! for every tap, 48 consecutive output pixels read 48 consecutive input
//! values, across row ends. The register kernel (48 pixels x 8 output
//! channels) therefore loads its A vectors straight from the padded input
//! at a per-tap offset, where `conv_pack` writes each value nine times
//! into packed panels first. Each task pads the rows of one band of one
//! image into a buffer of its own (the band's rows and the kernel's halo,
//! every channel: a tenth of what the unfolding writes), computes the band
//! into a buffer of wide rows, and copies its OW real columns out; the
//! W' - OW extra columns per row are computed and dropped.

use super::conv_gemm::{OutPtr, Shape};
use super::gemm_base::with_scratch;
use super::par::{for_bands, CpuPool};
use super::sgemm::{MR, NR};

/// Wide pixels per task: ten register panels of rows.
const BAND: usize = MR * 10;
/// Depth per block of B at most (8 columns x 768 f32 values: 24 KiB, with
/// A's rows in the per-core L1 cache); a deeper kernel is cut into blocks
/// of equal depth, C summed over them.
pub(super) const KC: usize = 768;

/// Whether these kernels take a convolution of this shape: stride 1, no
/// negative padding, dilations of 1 or more (the caller checked AVX-512
/// and the channel counts).
// BOUNDS-FN: `p` is an [i64; 6] indexed by literals.
pub(super) fn wanted(sh: &Shape) -> bool {
    sh.p[0] == 1 && sh.p[1] == 1 && sh.p[2] >= 0 && sh.p[3] >= 0 && sh.p[4] >= 1 && sh.p[5] >= 1
}

/// The geometry of the wide rows.
struct Wide {
    /// W' and H': the padded input's width and the rows it needs.
    w: usize,
    h: usize,
    /// Values per channel of a band buffer: rows * W'.
    chan: usize,
}

/// `out = conv(x, k)` of stride 1, `bp` the kernel packed by depth blocks
/// of `kc_max` (`conv_pack::pack_kernel`).
// BOUNDS-FN: image n < N starts at n * IW*IH*IC inside `x`, which holds
// IW*IH*IC*N values (`Shape::new`); `offs` has one entry per tap (depth),
// and block p0..p0+kc lies inside it.
pub(super) fn conv_2d(sh: &Shape, bp: &[f32], kc_max: usize, x: &[f32], out: &mut [f32], nb: usize, pool: &CpuPool) -> crate::Result<()> {
    let [_, _, _, _, d0, d1] = sh.p.map(|v| v as usize);
    let depth = sh.depth();
    let np = sh.oc.div_ceil(NR) * NR;
    let ww = sh.ow + (sh.kw - 1) * d0;
    let hh = sh.oh + (sh.kh - 1) * d1;
    let halo = (sh.kh - 1) * d1 * ww + (sh.kw - 1) * d0;
    // A band's reads reach from its first row's start (at most W' - 1
    // before its first pixel) to its last panel's end plus the halo.
    let rows = (ww - 1 + BAND + halo).div_ceil(ww) + 1;
    let g = Wide { w: ww, h: hh, chan: rows * ww };
    anyhow::ensure!(bp.len() >= depth * np && out.len() == sh.ow * sh.oh * sh.oc * nb, "internal: conv_shift sizes");
    // Tap (c, ky, kx) reads a band buffer at this offset from the pixel.
    let offs: Vec<usize> = (0..depth)
        .map(|t| {
            let (c, ky, kx) = (t / (sh.kw * sh.kh), (t / sh.kw) % sh.kh, t % sh.kw);
            c * g.chan + ky * d1 * ww + kx * d0
        })
        .collect();
    let plane = sh.ow * sh.oh;
    let image = sh.iw * sh.ih * sh.ic;
    let dst = OutPtr(out.as_mut_ptr());
    let offs = &offs;
    for_bands(pool, nb, sh.oh * ww, BAND, |n, q0, px| {
        let rowsr = px.div_ceil(MR) * MR;
        let img = &x[n * image..][..image];
        let r0 = q0 / ww;
        let c = dst;
        with_scratch(sh.ic * g.chan + rowsr * np, |buf| {
            let (pad, cw) = buf.split_at_mut(sh.ic * g.chan);
            pad_rows(sh, &g, img, r0, pad);
            // The band's first pixel inside the buffer.
            let base = q0 - r0 * ww;
            let mut p0 = 0;
            while p0 < depth {
                let kc = kc_max.min(depth - p0);
                let mut i0 = 0;
                while i0 < rowsr {
                    let mut j0 = 0;
                    while j0 < np {
                        // SAFETY: the kernel reads pad[base + i0 + offs[p] ..][..48]
                        // for p in p0..p0+kc: base + i0 + 47 < W' + BAND, and
                        // offs[p] <= (IC-1) * chan + halo, so the reads end
                        // before (IC-1) * chan + W' + BAND + halo <= IC * chan
                        // (`rows`). B's block holds kc x np values from
                        // p0 * np; `cw` holds rowsr x np values, columns of
                        // stride rowsr; AVX-512F (the caller's `wanted`).
                        unsafe {
                            kernel(
                                kc,
                                pad.as_ptr().add(base + i0),
                                offs[p0..p0 + kc].as_ptr(),
                                bp.as_ptr().add(p0 * np + j0 * kc),
                                cw.as_mut_ptr().add(i0 + j0 * rowsr),
                                rowsr,
                                p0 > 0,
                            )
                        };
                        j0 += NR;
                    }
                    i0 += MR;
                }
                p0 += kc;
            }
            // SAFETY: the band's pixels of image n lie inside `out`, and no
            // other task writes them (see `copy_out`).
            unsafe { copy_out(sh, ww, q0, px, cw, rowsr, c.0.add(n * plane * sh.oc)) };
        });
    });
    Ok(())
}

/// Fills `pad` with padded rows r0..r0+rows of every channel of the image
/// `x` [IW, IH, IC]: padded row pr, column pc holds x[pc - p0, pr - p1] (0
/// outside the image, and in rows at or past H').
// BOUNDS-FN: `pad` holds IC * chan values and row lr < rows of channel c
// starts at c * chan + lr * W', W' values long; the input row iy < IH of
// channel c < IC lies inside `x` (one image); len = min(IW, W' - p0) when
// p0 < W', so `row[p0..p0 + len]` and `src[..len]` are in range.
fn pad_rows(sh: &Shape, g: &Wide, x: &[f32], r0: usize, pad: &mut [f32]) {
    let (pw, ph) = (sh.p[2] as usize, sh.p[3] as usize);
    for (c, chan) in pad.chunks_exact_mut(g.chan).enumerate().take(sh.ic) {
        let xc = &x[c * sh.iw * sh.ih..][..sh.iw * sh.ih];
        for (lr, row) in chan.chunks_exact_mut(g.w).enumerate() {
            let pr = r0 + lr;
            if pr >= g.h || pr < ph || pr - ph >= sh.ih || pw >= g.w {
                row.fill(0.0);
                continue;
            }
            let src = &xc[(pr - ph) * sh.iw..][..sh.iw];
            let len = sh.iw.min(g.w - pw);
            row[..pw].fill(0.0);
            row[pw..pw + len].copy_from_slice(&src[..len]);
            row[pw + len..].fill(0.0);
        }
    }
}

/// Copies the real columns (ox < OW) of wide pixels q0..q0+px from `cw`
/// (column o at o * rs) into the image's output `out` [OW, OH, OC].
///
/// # Safety
/// `out` addresses OW * OH * OC values that no other thread writes at these
/// pixels; `cw` holds OC columns of `rs` >= px values.
unsafe fn copy_out(sh: &Shape, ww: usize, q0: usize, px: usize, cw: &[f32], rs: usize, out: *mut f32) {
    let plane = sh.ow * sh.oh;
    let mut q = q0;
    while q < q0 + px {
        let (oy, ox) = (q / ww, q % ww);
        let run = (ww - ox).min(q0 + px - q);
        if ox < sh.ow {
            let len = (sh.ow - ox).min(run);
            for (o, col) in cw.chunks(rs).take(sh.oc).enumerate() {
                if let Some(src) = col.get(q - q0..q - q0 + len) {
                    // SAFETY: pixel (ox.., oy) of channel o: oy < OH and
                    // ox + len <= OW, inside `out` (the caller's contract).
                    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), out.add(o * plane + oy * sh.ow + ox), len) };
                }
            }
        }
        q += run;
    }
}

/// One tile of 48 wide pixels x 8 output channels: `C (+)= A * Bp`, A's
/// row p (48 pixels under tap p) at `a + offs[p]`, Bp kc x 8 by rows; C's
/// 48 x 8 values at `c`, columns of stride `c_cs`.
///
/// # Safety
/// `a + offs[p] .. + 48` are valid for p < kc, `offs` holds kc values, `b`
/// kc * 8, `c` addresses 48 x 8 values; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel(kc: usize, a: *const f32, offs: *const usize, b: *const f32, c: *mut f32, c_cs: usize, add: bool) {
    use std::arch::x86_64::*;
    let z = _mm512_setzero_ps();
    let mut acc = [[z; 3]; NR];
    for p in 0..kc {
        let ap = a.add(*offs.add(p));
        let av = [_mm512_loadu_ps(ap), _mm512_loadu_ps(ap.add(16)), _mm512_loadu_ps(ap.add(32))];
        let bp = b.add(p * NR);
        for (j, row) in acc.iter_mut().enumerate() {
            let bj = _mm512_set1_ps(*bp.add(j));
            for (x, v) in row.iter_mut().zip(av) {
                *x = _mm512_fmadd_ps(v, bj, *x);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        let cj = c.add(j * c_cs);
        for (r, v) in row.iter().enumerate() {
            let d = cj.add(16 * r);
            let v = if add { _mm512_add_ps(_mm512_loadu_ps(d), *v) } else { *v };
            _mm512_storeu_ps(d, v);
        }
    }
}

/// Never called: the caller's `wanted` is false off x86-64.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel(_: usize, _: *const f32, _: *const usize, _: *const f32, _: *mut f32, _: usize, _: bool) {}
