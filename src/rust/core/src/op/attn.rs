//! Fused attention (ggml's FLASH_ATTN_EXT and FLASH_ATTN_BACK).
//!
//! Layouts are ggml's: q `[D, N, H, B]` (N queries, H heads), k `[D, M, Hk,
//! B]` and v `[Dv, M, Hk, B]` (M keys; H a multiple of Hk: grouped-query
//! attention), an optional mask `[M, >= N, *, *]` broadcast over heads and
//! batches. The forward result is permuted, `[Dv, H, N, B]`:
//! `softmax(scale q.k [softcapped] + slope * mask) . v` per query and head.

use super::rules::{divides, float, sh, src, Out};
use crate::layout::Layout;
use anyhow::ensure;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attn {
    /// srcs [q, k, v] or [q, k, v, mask].
    FlashExt { scale: f32, max_bias: f32, softcap: f32 },
    /// srcs [q, k, v, d] with d the gradient of the forward result
    /// (`[Dv, H, N, B]`, scale 1/sqrt(D), a causal mask when `masked`).
    /// The result is one f32 vector holding the gradients of q, k and v in
    /// their own layouts, each starting at a multiple of 4 values (ggml's
    /// 16-byte alignment): see [`back_offsets`].
    FlashBack { masked: bool },
}

/// Start of the gradients of q, k and v in flash_attn_back's result, and its length.
pub fn back_offsets(nq: usize, nk: usize, nv: usize) -> [usize; 4] {
    let pad = |n: usize| n.div_ceil(4) * 4;
    let k = pad(nq);
    let v = k + pad(nk);
    [0, k, v, v + pad(nv)]
}

// BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4
// (rustc rejects a constant index past a fixed array's end).
// `quant_kv`: k and v may also be quantized (flash_attn_ext reads them a row
// at a time, dequantized, as ggml does for a quantized KV cache).
fn check_qkv(q: &Layout, k: &Layout, v: &Layout, what: &str, quant_kv: bool) -> crate::Result<()> {
    float(q, "q")?;
    for (l, name) in [(k, "k"), (v, "v")] {
        if !(quant_kv && l.dtype.quant().is_some()) {
            float(l, name)?;
        }
    }
    ensure!(
        q.ne[0] == k.ne[0],
        "{what}: q ({}) and k ({}) need the same head size (first size)",
        sh(q),
        sh(k)
    );
    ensure!(
        k.ne[1] == v.ne[1] && k.ne[2] == v.ne[2] && k.ne[3] == v.ne[3],
        "{what}: k ({}) and v ({}) need the same number of keys, heads and batches (sizes 2 to 4)",
        sh(k),
        sh(v)
    );
    ensure!(
        k.ne[2] > 0 && divides(k.ne[2], q.ne[2]) && k.ne[3] > 0 && divides(k.ne[3], q.ne[3]),
        "{what}: the heads and batches of q ({}) must be multiples of k's ({})",
        sh(q),
        sh(k)
    );
    Ok(())
}

impl Attn {
    pub fn name(&self) -> &'static str {
        match self {
            Attn::FlashExt { .. } => "FLASH_ATTN_EXT",
            Attn::FlashBack { .. } => "FLASH_ATTN_BACK",
        }
    }

    pub fn arity(&self) -> (usize, usize) {
        match self {
            Attn::FlashExt { .. } => (3, 4),
            Attn::FlashBack { .. } => (4, 4),
        }
    }

    // BOUNDS-FN: ne is a Dims ([usize; 5]), Out::ne a [usize; 4]: indexed by literals below 4;
    // back_offsets returns a [usize; 4], indexed by 3; sources through src().
    pub fn infer(&self, s: &[Layout]) -> crate::Result<Out> {
        let (q, k, v) = (src(s, 0)?, src(s, 1)?, src(s, 2)?);
        match self {
            Attn::FlashExt { softcap, .. } => {
                check_qkv(q, k, v, "flash_attn_ext", true)?;
                ensure!(softcap.is_finite() && *softcap >= 0.0, "flash_attn_ext: `logit_softcap` must be >= 0, not {softcap}");
                if let Some(m) = s.get(3) {
                    float(m, "mask")?;
                    ensure!(
                        m.ne[0] == k.ne[1]
                            && m.ne[1] >= q.ne[1]
                            && divides(m.ne[2], q.ne[2])
                            && divides(m.ne[3], q.ne[3]),
                        "flash_attn_ext: the mask ({}) needs one column per key ({}), a row per query \
                         (at least {}), and sizes in dimensions 3 and 4 that divide q's ({})",
                        sh(m),
                        k.ne[1],
                        q.ne[1],
                        sh(q)
                    );
                }
                let dtype = super::shape::f32_or_f64(&[q, k, v]);
                Ok(Out { dtype, ne: [v.ne[0], q.ne[2], q.ne[1], q.ne[3]] })
            }
            Attn::FlashBack { .. } => {
                check_qkv(q, k, v, "flash_attn_back", false)?;
                let d = src(s, 3)?;
                float(d, "d")?;
                ensure!(
                    d.ne4() == [v.ne[0], q.ne[2], q.ne[1], q.ne[3]],
                    "flash_attn_back: the gradient d ({}) must have the shape of flash_attn_ext's result, \
                     [{}, {}, {}, {}]",
                    sh(d),
                    v.ne[0],
                    q.ne[2],
                    q.ne[1],
                    q.ne[3]
                );
                let n = back_offsets(q.nelements(), k.nelements(), v.nelements())[3];
                Ok(Out { dtype: super::shape::f32_or_f64(&[q, k, v, d]), ne: [n, 1, 1, 1] })
            }
        }
    }
}

/// ALiBi slope of head `h` of `n_head` (1 when `max_bias` is 0), as ggml.
pub fn alibi_slope(h: usize, n_head: usize, max_bias: f32) -> f32 {
    if max_bias <= 0.0 {
        return 1.0;
    }
    let n_log2 = 1usize << (31 - (n_head.max(1) as u32).leading_zeros());
    let m0 = 2f32.powf(-max_bias / n_log2 as f32);
    let m1 = 2f32.powf(-(max_bias / 2.0) / n_log2 as f32);
    if h < n_log2 {
        m0.powi(h as i32 + 1)
    } else {
        m1.powi(2 * (h - n_log2) as i32 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::dtype::DType;

    #[test]
    fn attention_shapes() {
        let l = |ne| Layout::contiguous(DType::F32, ne);
        let (q, k, v) = (l([8, 5, 4, 1]), l([8, 7, 2, 1]), l([6, 7, 2, 1]));
        let f = Attn::FlashExt { scale: 0.3, max_bias: 0.0, softcap: 0.0 };
        assert_eq!(f.infer(&[q, k, v]).unwrap().ne, [6, 4, 5, 1]);
        assert!(f.infer(&[q, k, v, l([7, 5, 1, 1])]).is_ok());
        assert!(f.infer(&[q, k, v, l([6, 5, 1, 1])]).unwrap_err().to_string().contains("mask"));
        assert!(f.infer(&[q, l([8, 7, 3, 1]), l([6, 7, 3, 1])]).is_err());
        let b = Attn::FlashBack { masked: true };
        assert_eq!(back_offsets(6, 5, 3), [0, 8, 16, 20]);
        let o = b.infer(&[q, k, v, l([6, 4, 5, 1])]).unwrap();
        assert_eq!(o.ne[0], back_offsets(160, 112, 84)[3]);
        assert!((alibi_slope(0, 8, 8.0) - 0.5).abs() < 1e-6);
    }
}
