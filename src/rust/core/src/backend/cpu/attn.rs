//! Fused attention: every (query, head, batch) row of the result is one
//! pass over the keys with a running softmax (no score matrix is stored),
//! and the backward pass, which recomputes the probabilities per head.

use super::access::{alloc, Src};
use super::par::{par_rows, CpuPool};
use crate::base::float::Float;
use crate::op::attn::{alibi_slope, back_offsets};

fn dot<T: Float>(a: &[T], b: &[T]) -> T {
    let mut s = T::ZERO;
    for (x, y) in a.iter().zip(b) {
        s += *x * *y;
    }
    s
}

/// Contiguous row (`len` values) of `t` at (i1, i2, i3).
// BOUNDS-FN: `st` is a [usize; 4] indexed by literals; the callers (below)
// pass a contiguous `t` (a kernel's `Src`), i1 < ne[1], i2 < ne[2], i3 <
// ne[3] and len = ne[0], so the row ends inside `t.d`.
fn row<'a, T: Float>(t: &'a Src<'_, T>, i1: usize, i2: usize, i3: usize, len: usize) -> &'a [T] {
    let at = i1 * t.st[1] + i2 * t.st[2] + i3 * t.st[3];
    &t.d[at..at + len]
}

/// out [Dv, H, N, B] = softmax(scale q.k (softcapped) + slope mask) v.
// BOUNDS-FN: `ne` is a [usize; 4] indexed by literals. `op::attn` (Attn::
// FlashExt) checked q.ne[0] == k.ne[0], k and v of the same ne[1..4], k's
// heads and batches dividing q's, and a mask of [M, >= N, a divisor of H, a
// divisor of B], and made `out` [Dv, H, N, B]: a result row r has ih < H, iq
// < N, ib < B, so ikh = ih / (H / Hk) < Hk and ikb < Bk; rows read are q's
// (d = q.ne[0]), k's and v's key im < M, and the mask's row of M values.
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_ext<T: Float>(
    q: &Src<'_, T>,
    k: &Src<'_, T>,
    v: &Src<'_, T>,
    mask: Option<&Src<'_, T>>,
    scale: f32,
    max_bias: f32,
    softcap: f32,
    out: &mut [T],
    pool: &CpuPool,
) {
    let [d, n, h, _] = q.ne;
    let (m, hk, bk) = (k.ne[1], k.ne[2], k.ne[3]);
    let dv = v.ne[0];
    let (rh, rb) = (h / hk, q.ne[3] / bk);
    let cap = T::from_f32(softcap);
    let sc = T::from_f32(if softcap != 0.0 { scale / softcap } else { scale });
    par_rows(pool, out, dv, |r0, chunk| {
        let mut acc = vec![T::ZERO; dv];
        for (j, orow) in chunk.chunks_mut(dv.max(1)).enumerate() {
            let r = r0 + j;
            let (ih, iq, ib) = (r % h, (r / h) % n, r / (h * n));
            let (ikh, ikb) = (ih / rh, ib / rb);
            let qr = row(q, iq, ih, ib, d);
            let slope = T::from_f32(alibi_slope(ih, h, max_bias));
            let mrow = mask.map(|mk| row(mk, iq, ih % mk.ne[2], ib % mk.ne[3], m));
            acc.iter_mut().for_each(|a| *a = T::ZERO);
            let (mut mx, mut sum) = (T::NEG_INFINITY, T::ZERO);
            for im in 0..m {
                let mut s = dot(qr, row(k, im, ikh, ikb, d)) * sc;
                if softcap != 0.0 {
                    s = cap * s.tanh();
                }
                if let Some(mr) = mrow {
                    s += slope * mr[im];
                }
                if s == T::NEG_INFINITY {
                    continue;
                }
                let vr = row(v, im, ikh, ikb, dv);
                if s > mx {
                    // rescale what was accumulated under the old maximum
                    let f = (mx - s).exp();
                    sum *= f;
                    acc.iter_mut().for_each(|a| *a *= f);
                    mx = s;
                }
                let p = (s - mx).exp();
                sum += p;
                for (a, x) in acc.iter_mut().zip(vr) {
                    *a += p * *x;
                }
            }
            let inv = if sum > T::ZERO { T::ONE / sum } else { T::ZERO };
            for (o, a) in orow.iter_mut().zip(&acc) {
                *o = *a * inv;
            }
        }
    });
}

/// The gradients of q, k and v (packed as [`back_offsets`] says) of
/// flash_attn_ext with scale 1/sqrt(D), no mask but an optional causal one,
/// given the gradient `g` of its result.
// BOUNDS-FN: `ne`, `st` and `offs` are fixed-size arrays indexed by literals.
// `op::attn` (Attn::FlashBack) checked q, k, v as for flash_attn_ext and g
// of [Dv, H, N, B], and `out` holds back_offsets(...)[3] values (checked
// again below), so gq, gk and gv hold at least q's, k's and v's element
// counts, and qo + x, ko + x, vo + x (offsets of an element of the
// contiguous q, k, v) fall inside them; g's row (ih, iq, ib) is Dv values
// inside g; `p` and `dp` hold M values and im < lim <= M.
pub fn flash_attn_back<T: Float>(
    q: &Src<'_, T>,
    k: &Src<'_, T>,
    v: &Src<'_, T>,
    g: &Src<'_, T>,
    masked: bool,
    out: &mut [T],
) -> crate::Result<()> {
    let [d, n, h, nb] = q.ne;
    let (m, hk, bk) = (k.ne[1], k.ne[2], k.ne[3]);
    let dv = v.ne[0];
    let (rh, rb) = (h / hk, nb / bk);
    let scale = T::from_f64(1.0 / (d as f64).sqrt());
    let offs = back_offsets(q.d.len(), k.d.len(), v.d.len());
    anyhow::ensure!(out.len() >= offs[3], "internal: flash_attn_back's result is too small");
    out.iter_mut().for_each(|o| *o = T::ZERO);
    let (gq, rest) = out.split_at_mut(offs[1]);
    let (gk, gv) = rest.split_at_mut(offs[2] - offs[1]);
    let mut p = alloc::<T>(m)?;
    let mut dp = alloc::<T>(m)?;
    // key index limit of query iq under the causal mask
    let limit = |iq: usize| if masked { (iq as i64 + m as i64 - n as i64 + 1).clamp(0, m as i64) as usize } else { m };
    for ib in 0..nb {
        for ih in 0..h {
            let (ikh, ikb) = (ih / rh, ib / rb);
            for iq in 0..n {
                let qr = row(q, iq, ih, ib, d);
                let go = &g.d[dv * (ih + h * (iq + n * ib))..][..dv];
                let lim = limit(iq);
                if lim == 0 {
                    continue;
                }
                let mut mx = T::NEG_INFINITY;
                for im in 0..lim {
                    p[im] = dot(qr, row(k, im, ikh, ikb, d)) * scale;
                    mx = mx.max(p[im]);
                }
                let mut sum = T::ZERO;
                for pv in p[..lim].iter_mut() {
                    *pv = (*pv - mx).exp();
                    sum += *pv;
                }
                let mut pdp = T::ZERO;
                for im in 0..lim {
                    p[im] /= sum;
                    dp[im] = dot(go, row(v, im, ikh, ikb, dv));
                    pdp += p[im] * dp[im];
                }
                let qo = iq * q.st[1] + ih * q.st[2] + ib * q.st[3];
                for im in 0..lim {
                    let ds = p[im] * (dp[im] - pdp) * scale;
                    let ko = im * k.st[1] + ikh * k.st[2] + ikb * k.st[3];
                    let kr = &k.d[ko..ko + d];
                    for x in 0..d {
                        gq[qo + x] += ds * kr[x];
                        gk[ko + x] += ds * qr[x];
                    }
                    let vo = im * v.st[1] + ikh * v.st[2] + ikb * v.st[3];
                    for x in 0..dv {
                        gv[vo + x] += p[im] * go[x];
                    }
                }
            }
        }
    }
    Ok(())
}
