//! MultiHeadAttention over sequences stored as rows (w = features, h =
//! positions): q, k and v projected (bias, q times `scale`, by default
//! 1/sqrt(embed_dim / num_heads)), per head softmax(q k^T [+ mask]) v, the
//! heads joined and projected out. Bottoms: q [, k [, v]] [, mask]; k and v
//! default to the one before.

use super::kernels::matmul::{matmul, MatView};
use super::softmax::softmax_rows;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct MultiHeadAttention {
    embed: usize,
    heads: usize,
    qdim: usize,
    kdim: usize,
    vdim: usize,
    attn_mask: bool,
    scale: f32,
    w: [Vec<f32>; 4],
    b: [Vec<f32>; 4],
}

impl MultiHeadAttention {
    pub fn new(pd: &ParamDict) -> anyhow::Result<MultiHeadAttention> {
        let embed = pd.int(0, 0);
        let heads = pd.int(1, 1);
        let wds = pd.int(2, 0);
        if embed <= 0 || heads <= 0 || embed % heads != 0 || wds <= 0 || wds % embed != 0 {
            ncnn_bail!("MultiHeadAttention needs embed_dim ({embed}) a positive multiple of num_heads ({heads}) and weight_data_size ({wds}) a positive multiple of embed_dim");
        }
        if pd.int(7, 0) != 0 {
            ncnn_bail!("MultiHeadAttention with kv_cache (key 7) is not supported");
        }
        if pd.int(18, 0) != 0 {
            ncnn_bail!("int8 MultiHeadAttention (key 18) is not supported");
        }
        let (e, h) = (embed as usize, heads as usize);
        let (kdim, vdim) = (pd.int(3, embed), pd.int(4, embed));
        if kdim <= 0 || vdim <= 0 {
            ncnn_bail!("MultiHeadAttention kdim ({kdim}) and vdim ({vdim}) must be positive");
        }
        Ok(MultiHeadAttention {
            embed: e,
            heads: h,
            qdim: wds as usize / e,
            kdim: kdim as usize,
            vdim: vdim as usize,
            attn_mask: pd.int(5, 0) != 0,
            scale: pd.float(6, 1.0 / ((e / h) as f32).sqrt()),
            w: Default::default(),
            b: Default::default(),
        })
    }
}

/// rows x `out` = x (rows x `k`) W^T (W is out x k) + b, times `scale`.
fn project(x: &[f32], rows: usize, k: usize, w: &[f32], b: &[f32], out: usize, scale: f32) -> Vec<f32> {
    let mut y = vec![0.0; rows * out];
    matmul(MatView::rows(x, k), MatView::transposed(w, k), &mut y, rows, k, out);
    for r in y.chunks_mut(out) {
        for (v, bb) in r.iter_mut().zip(b) {
            *v = (*v + bb) * scale;
        }
    }
    y
}

impl Layer for MultiHeadAttention {
    fn one_blob_only(&self) -> bool {
        false
    }

    // BOUNDS-FN: w and b are [Vec<f32>; 4] and sizes has 4 entries (i < 4).
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        let e = self.embed;
        let sizes = [(e * self.qdim, e), (e * self.kdim, e), (e * self.vdim, e), (self.qdim * e, self.qdim)];
        for (i, (n, nb)) in sizes.into_iter().enumerate() {
            self.w[i] = mb.tagged(n, "attention weights")?;
            self.b[i] = mb.raw(nb, "attention bias")?;
        }
        Ok(())
    }

    // BOUNDS-FN: 1 <= nb <= 3 bottoms (checked); w and b are [_; 4] (literals); qa, ka
    // and va hold rows of e = heads * d (hh * d < e); a 3-d mask has heads channels (checked).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let nb = bottoms.len().saturating_sub(usize::from(self.attn_mask));
        if !(1..=3).contains(&nb) || bottoms.len() < 1 + usize::from(self.attn_mask) {
            ncnn_bail!("MultiHeadAttention takes q, k, v (k and v may be omitted){}, got {} bottoms", if self.attn_mask { " and a mask" } else { "" }, bottoms.len());
        }
        let (q, k, v) = (&bottoms[0], &bottoms[nb.min(2) - 1], &bottoms[nb - 1]);
        let (e, d) = (self.embed, self.embed / self.heads);
        let (l, s) = (q.h, k.h);
        for (m, dim, what) in [(q, self.qdim, "q"), (k, self.kdim, "k"), (v, self.vdim, "v")] {
            if m.dims > 2 || m.w != dim {
                ncnn_bail!("MultiHeadAttention: {what} must be rows of {dim} values, got {}", m.describe());
            }
        }
        if v.h != s {
            ncnn_bail!("MultiHeadAttention: k has {s} rows but v has {}", v.h);
        }
        let qa = project(&q.data, l, self.qdim, &self.w[0], &self.b[0], e, self.scale);
        let ka = project(&k.data, s, self.kdim, &self.w[1], &self.b[1], e, 1.0);
        let va = project(&v.data, s, self.vdim, &self.w[2], &self.b[2], e, 1.0);
        let mask = if self.attn_mask { bottoms.last() } else { None };
        if let Some(m) = mask {
            if m.w != s || m.h != l || (m.dims == 3 && m.c != self.heads) {
                ncnn_bail!("MultiHeadAttention: the mask must be {s} x {l} (or one per head), got {}", m.describe());
            }
        }
        let mut joined = vec![0.0f32; l * e];
        let mut scores = vec![0.0f32; l * s];
        let mut head = vec![0.0f32; l * d];
        for hh in 0..self.heads {
            let qv = MatView { data: &qa[hh * d..], rs: e, cs: 1 };
            let kt = MatView { data: &ka[hh * d..], rs: 1, cs: e };
            matmul(qv, kt, &mut scores, l, d, s);
            if let Some(m) = mask {
                let mm = if m.dims == 3 { m.channel(hh) } else { &m.data[..] };
                scores.iter_mut().zip(mm).for_each(|(x, y)| *x += y);
            }
            softmax_rows(&mut scores, s);
            matmul(MatView::rows(&scores, s), MatView { data: &va[hh * d..], rs: e, cs: 1 }, &mut head, l, s, d);
            for (dst, src) in joined.chunks_mut(e).zip(head.chunks(d)) {
                dst[hh * d..(hh + 1) * d].copy_from_slice(src);
            }
        }
        let y = project(&joined, l, e, &self.w[3], &self.b[3], self.qdim, 1.0);
        Ok(vec![Mat::from_shape(&[self.qdim, l], y)?])
    }
}
