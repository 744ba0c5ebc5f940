//! YoloDetectionOutput (YOLOv2 region layer): per cell and anchor box,
//! sigmoid offsets, exp sizes times the anchor (`biases`, in cells), the
//! sigmoid box score times the best softmax class score; boxes at or above
//! the confidence threshold are sorted and suppressed, and returned as rows
//! (label + 1, score, xmin, ymin, xmax, ymax) in image fractions. ncnn
//! runs this layer in place, softmaxing the class channels of its bottom:
//! when nothing is detected its top is that bottom, so it is here too.

use super::kernels::detect::{nms_sorted, qsort_descent, rows, sigmoid, BBox};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct YoloDetectionOutput {
    num_class: usize,
    num_box: usize,
    confidence_threshold: f32,
    nms_threshold: f32,
    biases: Vec<f32>,
}

impl YoloDetectionOutput {
    pub fn new(pd: &ParamDict) -> anyhow::Result<YoloDetectionOutput> {
        let (nc, nb) = (pd.int(0, 20), pd.int(1, 5));
        if nc <= 0 || nb <= 0 {
            ncnn_bail!("YoloDetectionOutput num_class ({nc}) and num_box ({nb}) must be positive");
        }
        let biases = pd.floats(4);
        if biases.len() < 2 * nb as usize {
            ncnn_bail!("YoloDetectionOutput needs 2 biases per box ({}), got {}", 2 * nb, biases.len());
        }
        Ok(YoloDetectionOutput {
            num_class: nc as usize,
            num_box: nb as usize,
            confidence_threshold: pd.float(2, 0.01),
            nms_threshold: pd.float(3, 0.45),
            biases,
        })
    }
}

impl Layer for YoloDetectionOutput {
    fn one_blob_only(&self) -> bool {
        false
    }

    // BOUNDS-FN: new checks 2 biases per box (pp < num_box); x has num_box * (5 + nc)
    // channels (checked) of plane = w * h, at = i * w + j < plane; nms picks
    // indices of `all`.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let nc = self.num_class;
        let mut all = Vec::new();
        let mut bottoms = bottoms;
        for x in bottoms.iter_mut() {
            let (w, h) = (x.w, x.h);
            if x.dims != 3 || x.c != self.num_box * (5 + nc) {
                ncnn_bail!("YoloDetectionOutput expects {} channels ({} boxes of 4 + 1 + {nc}), got {}", self.num_box * (5 + nc), self.num_box, x.describe());
            }
            let plane = w * h;
            for pp in 0..self.num_box {
                let p = pp * (5 + nc);
                let (bw, bh) = (self.biases[pp * 2], self.biases[pp * 2 + 1]);
                let mut scores = vec![0.0f32; nc];
                for i in 0..h {
                    for j in 0..w {
                        let at = i * w + j;
                        // softmax over the class channels of this cell
                        let mut m = f32::MIN;
                        for (q, s) in scores.iter_mut().enumerate() {
                            *s = x.data[(p + 5 + q) * plane + at];
                            m = m.max(*s);
                        }
                        let mut sum = 0.0;
                        for s in scores.iter_mut() {
                            *s = (*s - m).exp();
                            sum += *s;
                        }
                        let (mut class_index, mut class_score) = (0usize, 0.0f32);
                        for (q, s) in scores.iter_mut().enumerate() {
                            *s /= sum;
                            if *s > class_score {
                                class_index = q;
                                class_score = *s;
                            }
                        }
                        for (q, s) in scores.iter().enumerate() {
                            x.data[(p + 5 + q) * plane + at] = *s;
                        }
                        let ch = |k: usize| x.channel(p + k);
                        let cx = (j as f32 + sigmoid(ch(0)[at])) / w as f32;
                        let cy = (i as f32 + sigmoid(ch(1)[at])) / h as f32;
                        let bww = ch(2)[at].exp() * bw / w as f32;
                        let bhh = ch(3)[at].exp() * bh / h as f32;
                        let confidence = sigmoid(ch(4)[at]) * class_score;
                        if confidence >= self.confidence_threshold {
                            let (xmin, ymin, xmax, ymax) = (cx - bww * 0.5, cy - bhh * 0.5, cx + bww * 0.5, cy + bhh * 0.5);
                            let area = (xmax - xmin) * (ymax - ymin);
                            all.push(BBox { score: confidence, xmin, ymin, xmax, ymax, area, label: class_index as i32 });
                        }
                    }
                }
            }
        }
        qsort_descent(&mut all);
        let picked = nms_sorted(&all, self.nms_threshold, true);
        if picked.is_empty() {
            bottoms.truncate(1);
            return Ok(bottoms);
        }
        let kept: Vec<BBox> = picked.into_iter().map(|i| all[i]).collect();
        Ok(vec![rows(&kept, 1)])
    }
}
