//! The windowed pooling (row kernels where they fit, per-window code at
//! the edges) against a direct evaluation of every window.

use crate::ncnn::layers::kernels::pool_rows::{windows, SLACK};
use super::Pooling;
use crate::base::simd;
use crate::ncnn::Mat;

/// Pooling parameters of one case.
#[derive(Clone, Copy, Debug)]
struct Case {
    kind: usize,
    kw: usize,
    kh: usize,
    sw: usize,
    sh: usize,
    pads: [usize; 4], // left, right, top, bottom
    mode: usize,
    include_pad: usize,
}

/// Every output of `c` on `x` (w x h x ch), window by window; None when the
/// kernel does not fit.
fn direct(c: Case, x: &[f32], w: usize, h: usize, ch: usize) -> Option<(usize, usize, Vec<f32>)> {
    let [mut pl, mut pr, mut pt, mut pb] = c.pads;
    let (mut tw, mut th) = (0, 0);
    match c.mode {
        0 => {
            let (ww, hh) = (w + pl + pr, h + pt + pb);
            if ww >= c.kw && (ww - c.kw) % c.sw != 0 {
                tw = c.sw - (ww - c.kw) % c.sw;
            }
            if hh >= c.kh && (hh - c.kh) % c.sh != 0 {
                th = c.sh - (hh - c.kh) % c.sh;
            }
        }
        1 => {}
        _ => {
            let wpad = (c.kw + (w - 1) / c.sw * c.sw).saturating_sub(w);
            let hpad = (c.kh + (h - 1) / c.sh * c.sh).saturating_sub(h);
            let (sl, st) = if c.mode == 2 { (wpad / 2, hpad / 2) } else { (wpad - wpad / 2, hpad - hpad / 2) };
            (pl, pr, pt, pb) = (sl, wpad - sl, st, hpad - st);
        }
    }
    let (ww, hh) = (w + pl + pr + tw, h + pt + pb + th);
    if ww < c.kw || hh < c.kh {
        return None;
    }
    let (ow, oh) = ((ww - c.kw) / c.sw + 1, (hh - c.kh) / c.sh + 1);
    let include_pad = c.include_pad == 1 || c.mode >= 2;
    let mut out = Vec::with_capacity(ow * oh * ch);
    for q in 0..ch {
        for i in 0..oh {
            for j in 0..ow {
                let (mut m, mut s, mut n_in, mut n_pad) = (f32::NEG_INFINITY, 0.0f32, 0, 0);
                for ky in 0..c.kh {
                    for kx in 0..c.kw {
                        let (py, px) = (i * c.sh + ky, j * c.sw + kx);
                        if py < pt + h + pb && px < pl + w + pr {
                            n_pad += 1; // inside the explicit (not tail) padding
                        }
                        if (pt..pt + h).contains(&py) && (pl..pl + w).contains(&px) {
                            let v = x[(q * h + py - pt) * w + px - pl];
                            m = m.max(v);
                            s += v;
                            n_in += 1;
                        }
                    }
                }
                out.push(if c.kind == 0 {
                    m
                } else if n_in == 0 {
                    0.0
                } else {
                    s / (if include_pad { n_pad } else { n_in }) as f32
                });
            }
        }
    }
    Some((ow, oh, out))
}

fn layer(c: Case) -> Pooling {
    let [pl, pr, pt, pb] = c.pads;
    let text = format!(
        "7767517\n1 2\nPooling p 1 1 x y 0={} 1={} 11={} 2={} 12={} 3={pl} 14={pr} 13={pt} 15={pb} 5={} 6={}\n",
        c.kind, c.kw, c.kh, c.sw, c.sh, c.mode, c.include_pad
    );
    let spec = crate::ncnn::param::parse_text(&text).unwrap();
    Pooling::new(&spec.layers[0].params).unwrap()
}

#[test]
fn windowed_pooling_matches_direct_windows_on_both_paths() {
    let mut seed = 12345u32;
    let mut rand = move || {
        seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
        (seed >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
    };
    // (kw, kh, sw, sh): the row kernels' shapes, then some the general code takes.
    let shapes = [
        (2, 2, 2, 2), (3, 3, 2, 2), (3, 3, 1, 1), (2, 2, 1, 1), (3, 2, 2, 1), (2, 3, 1, 2),
        (4, 4, 2, 2), (3, 3, 3, 3), (1, 1, 1, 1), (5, 3, 2, 1),
    ];
    let pads = [[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 0], [2, 1, 0, 2]];
    let mut checked = 0;
    for (si, &(kw, kh, sw, sh)) in shapes.iter().enumerate() {
        for w in [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 18, 24, 33, 40, 111] {
            let h = 1 + (w + si) % 9;
            let ch = 2;
            let x: Vec<f32> = (0..w * h * ch).map(|_| rand()).collect();
            let xm = Mat::from_shape(&[w, h, ch], x.clone()).unwrap();
            for kind in 0..2 {
                for mode in 0..4 {
                    for (pi, &p) in pads.iter().enumerate() {
                        if mode >= 2 && pi > 0 {
                            continue; // SAME modes compute their own pads
                        }
                        let c = Case { kind, kw, kh, sw, sh, pads: p, mode, include_pad: (w + pi) % 2 };
                        let Some((ow, oh, want)) = direct(c, &x, w, h, ch) else {
                            assert!(layer(c).windowed(&xm, false).is_err(), "{c:?} w={w} h={h}");
                            continue;
                        };
                        let portable = layer(c).windowed(&xm, false).unwrap();
                        assert_eq!((portable.w, portable.h, portable.c), (ow, oh, ch), "{c:?} w={w} h={h}");
                        for (k, (g, e)) in portable.data.iter().zip(&want).enumerate() {
                            let ok = g == e || (g - e).abs() <= 1e-6 * e.abs().max(1.0);
                            assert!(ok, "{c:?} w={w} h={h} at {k}: {g} vs {e}");
                        }
                        if simd::avx2_fma() {
                            let fast = layer(c).windowed(&xm, true).unwrap();
                            assert_eq!(fast.data.to_vec(), portable.data.to_vec(), "{c:?} w={w} h={h}: AVX2 vs portable");
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} cases ran");
}

#[test]
fn row_kernel_takes_only_widths_two_and_three_at_strides_one_and_two() {
    let a = vec![1.0f32; 64 + SLACK];
    let mut out = vec![0.0f32; 8];
    for (kw, sw, takes) in [(2, 1, true), (3, 2, true), (4, 2, false), (3, 3, false), (1, 1, false)] {
        for fast in [false, simd::avx2_fma()] {
            assert_eq!(windows(&a, &mut out, kw, sw, false, 1.0, fast), takes, "kw {kw} sw {sw}");
        }
    }
}
