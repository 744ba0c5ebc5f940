//! PriorBox: SSD anchor boxes for every cell of a feature map (first
//! bottom) relative to the image (second bottom, or image_width/height):
//! row 0 holds the boxes (xmin, ymin, xmax, ymax), row 1 their variances.
//! With one bottom, no image size and no max sizes it makes MXNet's
//! MultiBoxPrior boxes (no variance row).

use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct PriorBox {
    min_sizes: Vec<f32>,
    max_sizes: Vec<f32>,
    ratios: Vec<f32>,
    variances: [f32; 4],
    flip: bool,
    clip: bool,
    image_w: i32,
    image_h: i32,
    step_w: f32,
    step_h: f32,
    offset: f32,
}

impl PriorBox {
    pub fn new(pd: &ParamDict) -> anyhow::Result<PriorBox> {
        let p = PriorBox {
            min_sizes: pd.floats(0),
            max_sizes: pd.floats(1),
            ratios: pd.floats(2),
            variances: [pd.float(3, 0.1), pd.float(4, 0.1), pd.float(5, 0.2), pd.float(6, 0.2)],
            flip: pd.int(7, 1) != 0,
            clip: pd.int(8, 0) != 0,
            image_w: pd.int(9, 0),
            image_h: pd.int(10, 0),
            step_w: pd.float(11, -233.0),
            step_h: pd.float(12, -233.0),
            offset: pd.float(13, 0.0),
        };
        if pd.int(14, 0) != 0 || pd.int(15, 0) != 0 {
            ncnn_bail!("PriorBox step_mmdetection / center_mmdetection (keys 14, 15) are not supported");
        }
        if p.min_sizes.is_empty() {
            ncnn_bail!("PriorBox needs at least one min size (key 0)");
        }
        if !p.max_sizes.is_empty() && p.max_sizes.len() != p.min_sizes.len() {
            ncnn_bail!("PriorBox has {} max sizes for {} min sizes; give one per min size or none", p.max_sizes.len(), p.min_sizes.len());
        }
        Ok(p)
    }

    // BOUNDS-FN: min_sizes is not empty (checked in new), ratios neither ([1.0]).
    fn mxnet(&self, w: usize, h: usize) -> anyhow::Result<Mat> {
        let step_w = if self.step_w == -233.0 { 1.0 / w as f32 } else { self.step_w };
        let step_h = if self.step_h == -233.0 { 1.0 / h as f32 } else { self.step_h };
        let ratios: &[f32] = if self.ratios.is_empty() { &[1.0] } else { &self.ratios };
        let num_prior = self.min_sizes.len() - 1 + ratios.len();
        let mut out = Mat::new_1d(checked_len(w, h, num_prior)?);
        let mut b = out.data.chunks_mut(4);
        for i in 0..h {
            let cy = self.offset * step_h + i as f32 * step_h;
            let mut cx = self.offset * step_w;
            for _ in 0..w {
                let mut put = |bw: f32, bh: f32| {
                    if let Some(r) = b.next() {
                        r.copy_from_slice(&[cx - bw, cy - bh, cx + bw, cy + bh]);
                    }
                };
                // Every size with the first ratio, then the other ratios
                // with the first size.
                let ratio = ratios[0].sqrt();
                for &size in &self.min_sizes {
                    put(size * h as f32 / w as f32 * ratio * 0.5, size / ratio * 0.5);
                }
                let size = self.min_sizes[0];
                for &ar in &ratios[1..] {
                    let ratio = ar.sqrt();
                    put(size * h as f32 / w as f32 * ratio * 0.5, size / ratio * 0.5);
                }
                cx += step_w;
            }
        }
        if self.clip {
            out.data.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
        }
        Ok(out)
    }
}

fn checked_len(w: usize, h: usize, num_prior: usize) -> anyhow::Result<usize> {
    w.checked_mul(h)
        .and_then(|v| v.checked_mul(num_prior))
        .and_then(|v| v.checked_mul(4))
        .filter(|&v| v <= 1 << 28)
        .ok_or_else(|| crate::ncnn::err(format!("PriorBox: {w} x {h} cells of {num_prior} boxes is too many")))
}

impl Layer for PriorBox {
    fn one_blob_only(&self) -> bool {
        false
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let Some(feat) = bottoms.first() else {
            ncnn_bail!("PriorBox needs the feature map as its first bottom");
        };
        let (w, h) = (feat.w, feat.h);
        if bottoms.len() == 1 && self.image_w == -233 && self.image_h == -233 && self.max_sizes.is_empty() {
            return Ok(vec![self.mxnet(w, h)?]);
        }
        let (iw, ih) = match (self.image_w, self.image_h, bottoms.get(1)) {
            (-233, _, Some(img)) | (_, -233, Some(img)) => (
                if self.image_w == -233 { img.w as f32 } else { self.image_w as f32 },
                if self.image_h == -233 { img.h as f32 } else { self.image_h as f32 },
            ),
            (-233, _, None) | (_, -233, None) => ncnn_bail!("PriorBox takes the image size from a second bottom (image_width/height are -233), but has one bottom"),
            (a, b, _) => (a as f32, b as f32),
        };
        let step_w = if self.step_w == -233.0 { iw / w as f32 } else { self.step_w };
        let step_h = if self.step_h == -233.0 { ih / h as f32 } else { self.step_h };
        let nmin = self.min_sizes.len();
        let mut num_prior = nmin * self.ratios.len() + nmin + self.max_sizes.len();
        if self.flip {
            num_prior += nmin * self.ratios.len();
        }
        let n = checked_len(w, h, num_prior)?;
        let mut out = Mat::new_2d(n, 2);
        {
            let (boxes, vars) = out.data.split_at_mut(n);
            let mut b = boxes.chunks_mut(4);
            for i in 0..h {
                let cy = self.offset * step_h + i as f32 * step_h;
                let mut cx = self.offset * step_w;
                for _ in 0..w {
                    let mut put = |bw: f32, bh: f32| {
                        if let Some(r) = b.next() {
                            r.copy_from_slice(&[
                                (cx - bw * 0.5) / iw,
                                (cy - bh * 0.5) / ih,
                                (cx + bw * 0.5) / iw,
                                (cy + bh * 0.5) / ih,
                            ]);
                        }
                    };
                    for (k, &min_size) in self.min_sizes.iter().enumerate() {
                        put(min_size, min_size);
                        if let Some(&max_size) = self.max_sizes.get(k) {
                            let s = (min_size * max_size).sqrt();
                            put(s, s);
                        }
                        for &ar in &self.ratios {
                            let r = ar.sqrt();
                            put(min_size * r, min_size / r);
                            if self.flip {
                                put(min_size / r, min_size * r);
                            }
                        }
                    }
                    cx += step_w;
                }
            }
            if self.clip {
                boxes.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
            }
            for v in vars.chunks_mut(4) {
                v.copy_from_slice(&self.variances);
            }
        }
        Ok(vec![out])
    }
}
