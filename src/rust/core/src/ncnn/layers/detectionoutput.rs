//! DetectionOutput (SSD): decodes box offsets (bottom 0) against prior
//! boxes and variances (bottom 2), keeps boxes whose class confidence
//! (bottom 1, num_prior x num_class) exceeds the threshold, suppresses
//! overlaps per class (nms_top_k first), and returns the keep_top_k best as
//! rows (label, score, xmin, ymin, xmax, ymax). Class 0 is the background.
//! num_class -233 reads MXNet's layout (confidence num_class x num_prior,
//! variances from the params).

use super::kernels::detect::{nms_sorted, qsort_descent, rows, BBox};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct DetectionOutput {
    num_class: i32,
    nms_threshold: f32,
    nms_top_k: i32,
    keep_top_k: i32,
    confidence_threshold: f32,
    variances: [f32; 4],
}

impl DetectionOutput {
    pub fn new(pd: &ParamDict) -> anyhow::Result<DetectionOutput> {
        let num_class = pd.int(0, 0);
        if num_class != -233 && num_class <= 0 {
            ncnn_bail!("DetectionOutput num_class must be positive (or -233), got {num_class}");
        }
        Ok(DetectionOutput {
            num_class,
            nms_threshold: pd.float(1, 0.05),
            nms_top_k: pd.int(2, 300),
            keep_top_k: pd.int(3, 100),
            confidence_threshold: pd.float(4, 0.5),
            variances: [pd.float(5, 0.1), pd.float(6, 0.1), pd.float(7, 0.2), pd.float(8, 0.2)],
        })
    }
}

impl Layer for DetectionOutput {
    fn one_blob_only(&self) -> bool {
        false
    }

    // Bounds: three bottoms (checked); loc holds num_prior * 4, conf num_prior *
    // num_class and prior num_prior * 8 (4 without variances) values (checked), so
    // box i's slices of 4 are inside them; l, p, v (the [f32; 4] variances too)
    // and b are fours (literals below 4); nms picks indices of cls.
    // BOUNDS-FN: every index is in range as said just above.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if bottoms.len() < 3 {
            ncnn_bail!("DetectionOutput takes three bottoms (locations, confidences, prior boxes), got {}", bottoms.len());
        }
        let (loc, conf, prior) = (&bottoms[0], &bottoms[1], &bottoms[2]);
        let mxnet = self.num_class == -233;
        let num_prior = prior.w / 4;
        let num_class = if mxnet { conf.h } else { self.num_class as usize };
        if loc.total() < num_prior * 4 || conf.total() < num_prior * num_class || (!mxnet && prior.total() < num_prior * 8) {
            ncnn_bail!(
                "DetectionOutput: {num_prior} prior boxes need {} locations, {} confidences{}; got {}, {} and {}",
                num_prior * 4,
                num_prior * num_class,
                if mxnet { "" } else { " and a variance row" },
                loc.describe(),
                conf.describe(),
                prior.describe()
            );
        }
        let pb = &prior.data[..num_prior * 4];
        let var = if mxnet { None } else { Some(&prior.data[num_prior * 4..num_prior * 8]) };
        let boxes: Vec<[f32; 4]> = (0..num_prior)
            .map(|i| {
                let l = &loc.data[i * 4..i * 4 + 4];
                let p = &pb[i * 4..i * 4 + 4];
                let v = var.map(|v| &v[i * 4..i * 4 + 4]).unwrap_or(&self.variances);
                let (pw, ph) = (p[2] - p[0], p[3] - p[1]);
                let (pcx, pcy) = ((p[0] + p[2]) * 0.5, (p[1] + p[3]) * 0.5);
                let cx = v[0] * l[0] * pw + pcx;
                let cy = v[1] * l[1] * ph + pcy;
                let bw = (v[2] * l[2]).exp() * pw;
                let bh = (v[3] * l[3]).exp() * ph;
                [cx - bw * 0.5, cy - bh * 0.5, cx + bw * 0.5, cy + bh * 0.5]
            })
            .collect();
        let mut all = Vec::new();
        for c in 1..num_class {
            let mut cls: Vec<BBox> = Vec::new();
            for (j, b) in boxes.iter().enumerate() {
                let score = if mxnet { conf.data[c * num_prior + j] } else { conf.data[j * num_class + c] };
                if score > self.confidence_threshold {
                    let area = (b[2] - b[0]) * (b[3] - b[1]);
                    cls.push(BBox { score, xmin: b[0], ymin: b[1], xmax: b[2], ymax: b[3], area, label: c as i32 });
                }
            }
            qsort_descent(&mut cls);
            if self.nms_top_k >= 0 && (self.nms_top_k as usize) < cls.len() {
                cls.truncate(self.nms_top_k as usize);
            }
            let picked = nms_sorted(&cls, self.nms_threshold, true);
            all.extend(picked.into_iter().map(|i| cls[i]));
        }
        qsort_descent(&mut all);
        if self.keep_top_k >= 0 && (self.keep_top_k as usize) < all.len() {
            all.truncate(self.keep_top_k as usize);
        }
        Ok(vec![rows(&all, 0)])
    }
}
