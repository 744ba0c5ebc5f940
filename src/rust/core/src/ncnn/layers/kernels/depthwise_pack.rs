//! The depthwise convolution of 16 channels at once on AVX-512: the
//! bordered input planes interleaved so that one 16-lane register holds the
//! same pixel of the 16 channels, each kernel tap one multiply-add per
//! output pixel, then the result split back into planes. For small planes
//! (a few output columns) this fills the registers that the one-channel
//! kernel leaves mostly empty, and pays the per-channel setup once per 16.

use super::conv::{Border, ConvParams};

/// Channels convolved together.
pub const LANES: usize = 16;

thread_local! {
    /// The interleaved bordered input, then the interleaved output.
    static SCRATCH: std::cell::RefCell<(Vec<f32>, Vec<f32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Whether the CPU runs the 16-channel kernel (AVX-512F).
pub fn available() -> bool {
    crate::base::simd::avx512f()
}

/// Input and output extents of one call.
#[derive(Clone, Copy)]
pub struct Extents {
    pub w: usize,
    pub h: usize,
    pub outw: usize,
    pub outh: usize,
}

/// Convolve the 16 planes `src` (channel c at `c * w * h`) bordered as
/// `pad` says with their kernels `k` (channel c's kh * kw taps at
/// `c * kh * kw`) and biases (`bias`, empty: none) into `out` (channel c at
/// `c * outw * outh`), with the clamp of the activation fused (the other
/// activations are the caller's). Call only where `available()`.
// Bounds: src, k and out are asserted to hold 16 planes, kernels and
// outputs; the bordered plane has ph rows of pw pixels of 16 lanes, and every
// read (oy * sh + ky * dh) * pw + ox * sw + kx * dw is below ph * pw because
// the output size was computed from the bordered extents (asserted below for
// the bottom right tap); ib and ob are grown to their sizes before use.
// BOUNDS-FN: every index is in range as said just above.
pub fn dw16(src: &[f32], e: Extents, pad: Border, k: &[f32], bias: &[f32], p: &ConvParams, out: &mut [f32]) {
    let Extents { w, h, outw, outh } = e;
    let kk = p.kh * p.kw;
    let (n, plane) = (outw * outh, w * h);
    assert!(src.len() >= LANES * plane && k.len() >= LANES * kk && out.len() >= LANES * n, "dw16: short buffers");
    assert!(bias.is_empty() || bias.len() >= LANES, "dw16: short bias");
    let (pw, ph) = (w + pad.l + pad.r, h + pad.t + pad.b);
    if n == 0 {
        return;
    }
    let last = ((outh - 1) * p.sh + (p.kh - 1) * p.dh) * pw + (outw - 1) * p.sw + (p.kw - 1) * p.dw;
    assert!(last < pw * ph, "dw16: the output reads past the bordered plane");
    SCRATCH.with(|cell| {
        let mut s = cell.borrow_mut();
        let (ib, ob) = &mut *s;
        ib.clear();
        ib.resize(pw * ph * LANES, pad.value);
        if ob.len() < n * LANES {
            ob.resize(n * LANES, 0.0);
        }
        for c in 0..LANES {
            let sp = &src[c * plane..(c + 1) * plane];
            for y in 0..h {
                let row = &sp[y * w..(y + 1) * w];
                let at = ((y + pad.t) * pw + pad.l) * LANES + c;
                for (x, v) in row.iter().enumerate() {
                    ib[at + x * LANES] = *v;
                }
            }
        }
        // Taps interleaved: tap t's 16 weights at t * 16; their offsets.
        let mut wk = vec![0.0f32; kk * LANES];
        for c in 0..LANES {
            for t in 0..kk {
                wk[t * LANES + c] = k[c * kk + t];
            }
        }
        let offs: Vec<usize> = (0..kk).map(|t| ((t / p.kw) * p.dh * pw + (t % p.kw) * p.dw) * LANES).collect();
        let mut b16 = [0.0f32; LANES];
        if !bias.is_empty() {
            b16.copy_from_slice(&bias[..LANES]);
        }
        let clamp = match p.act.kind {
            1 => Some((0.0, f32::INFINITY)),
            3 => Some((p.act.params.first().copied().unwrap_or(f32::NEG_INFINITY), p.act.params.get(1).copied().unwrap_or(f32::INFINITY))),
            _ => None,
        };
        let job = Job { ib, wk: &wk, offs: &offs, bias: &b16, clamp, pw, sw: p.sw, sh: p.sh, outw, outh };
        // SAFETY: only called where available() (AVX-512F); the reads are
        // inside ib as asserted above, the writes inside ob (n pixels).
        unsafe { job.run(&mut ob[..n * LANES]) };
        for c in 0..LANES {
            for (i, o) in out[c * n..(c + 1) * n].iter_mut().enumerate() {
                *o = ob[i * LANES + c];
            }
        }
    })
}

/// One call's interleaved operands.
struct Job<'a> {
    ib: &'a [f32],
    wk: &'a [f32],
    offs: &'a [usize],
    bias: &'a [f32; LANES],
    clamp: Option<(f32, f32)>,
    pw: usize,
    sw: usize,
    sh: usize,
    outw: usize,
    outh: usize,
}

impl Job<'_> {
    /// Every output pixel, four at a time along the rows.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; every tap read of every output pixel
    /// lies inside `ib` and `ob` holds outw * outh pixels.
    // BOUNDS-FN: `a` holds the 4 sums of 4 pixels, indexed 0 to 3.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn run(&self, ob: &mut [f32]) {
        use std::arch::x86_64::*;
        let ip = self.ib.as_ptr();
        let wp = self.wk.as_ptr();
        let op = ob.as_mut_ptr();
        let bias = _mm512_loadu_ps(self.bias.as_ptr());
        let (lo, hi) = match self.clamp {
            Some((l, h)) => (_mm512_set1_ps(l), _mm512_set1_ps(h)),
            None => (_mm512_set1_ps(f32::NEG_INFINITY), _mm512_set1_ps(f32::INFINITY)),
        };
        let clamp = self.clamp.is_some();
        let step = self.sw * LANES;
        for oy in 0..self.outh {
            let row = oy * self.sh * self.pw * LANES;
            let orow = oy * self.outw * LANES;
            let mut ox = 0;
            while ox + 4 <= self.outw {
                let base = row + ox * step;
                let mut a = [bias; 4];
                for (t, &o) in self.offs.iter().enumerate() {
                    let kv = _mm512_loadu_ps(wp.add(t * LANES));
                    let s = ip.add(base + o);
                    a[0] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(s), a[0]);
                    a[1] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(s.add(step)), a[1]);
                    a[2] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(s.add(2 * step)), a[2]);
                    a[3] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(s.add(3 * step)), a[3]);
                }
                for (j, v) in a.iter().enumerate() {
                    let v = if clamp { _mm512_min_ps(_mm512_max_ps(*v, lo), hi) } else { *v };
                    _mm512_storeu_ps(op.add(orow + (ox + j) * LANES), v);
                }
                ox += 4;
            }
            while ox < self.outw {
                let base = row + ox * step;
                let mut a = bias;
                for (t, &o) in self.offs.iter().enumerate() {
                    a = _mm512_fmadd_ps(_mm512_loadu_ps(wp.add(t * LANES)), _mm512_loadu_ps(ip.add(base + o)), a);
                }
                let v = if clamp { _mm512_min_ps(_mm512_max_ps(a, lo), hi) } else { a };
                _mm512_storeu_ps(op.add(orow + ox * LANES), v);
                ox += 1;
            }
        }
    }

    /// # Safety
    /// Never called off x86-64 (`available()` is false there).
    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn run(&self, _ob: &mut [f32]) {
        // INVARIANT: available() is false off x86-64, so nothing calls this.
        unreachable!("AVX-512 kernels run only on x86-64")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::layer::Activation;

    #[test]
    fn matches_the_one_channel_kernel() {
        if !available() {
            return;
        }
        // (k, stride, dilation, w, h, pads t b l r, activation)
        let acts = [
            Activation { kind: 0, params: vec![] },
            Activation { kind: 1, params: vec![] },
            Activation { kind: 3, params: vec![0.0, 6.0] },
        ];
        for (ci, &(kn, s, d, w, h, t, b, l, r)) in [
            (3, 1, 1, 7, 7, 1, 1, 1, 1),
            (5, 1, 1, 7, 7, 2, 2, 2, 2),
            (5, 2, 1, 14, 14, 1, 2, 1, 2),
            (3, 2, 1, 13, 9, 1, 1, 1, 1),
            (3, 1, 2, 10, 6, 2, 2, 2, 2),
            (3, 1, 1, 3, 3, 0, 0, 0, 0),
            (1, 1, 1, 5, 4, 0, 0, 0, 0),
            (3, 2, 1, 6, 6, 0, 1, 0, 1),
        ]
        .iter()
        .enumerate()
        {
            let text = format!("7767517\n1 1\nConvolutionDepthWise c 0 1 x 0=16 1={kn} 6={} 7=16\n", 16 * kn * kn);
            let spec = crate::ncnn::param::parse_text(&text).unwrap();
            let mut p = ConvParams::new(&spec.layers[0].params, true).unwrap();
            (p.sw, p.sh, p.dw, p.dh, p.act) = (s, s, d, d, acts[ci % 3].clone());
            let pad = Border { t, b, l, r, value: 0.25 * (ci % 2) as f32 };
            let (pw, ph) = (w + l + r, h + t + b);
            let ext = d * (kn - 1) + 1;
            let (outw, outh) = ((pw - ext) / s + 1, (ph - ext) / s + 1);
            let n = outw * outh;
            let src: Vec<f32> = (0..16 * w * h).map(|i| ((i * 37 % 101) as f32) * 0.05 - 2.5).collect();
            let kk = kn * kn;
            let k: Vec<f32> = (0..16 * kk).map(|i| ((i * 13 % 29) as f32) * 0.1 - 1.4).collect();
            let bias: Vec<f32> = (0..16).map(|i| i as f32 * 0.1 - 0.8).collect();
            let mut got = vec![f32::NAN; 16 * n];
            dw16(&src, Extents { w, h, outw, outh }, pad, &k, &bias, &p, &mut got);
            for c in 0..16 {
                let mut want = vec![0.0f32; n];
                super::super::depthwise::dw_channel(&src[c * w * h..(c + 1) * w * h], w, h, pad, &k[c * kk..(c + 1) * kk], bias[c], &p, &mut want, outw, false);
                for (i, (g, e)) in got[c * n..(c + 1) * n].iter().zip(&want).enumerate() {
                    assert!((g - e).abs() < 1e-4, "case {ci} channel {c} at {i}: {g} vs {e}");
                }
            }
        }
    }
}
