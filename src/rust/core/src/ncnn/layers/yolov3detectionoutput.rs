//! Yolov3DetectionOutput: one bottom per scale, each num_box anchors of
//! 4 + 1 + num_class channels. The anchor of box b of scale s is
//! `biases[2 * mask[s * num_box + b]..]` (mask entries read as floats);
//! sizes are relative to the net input, `anchors_scale[s]` times the map.
//! The class is the largest raw class score; confidence combines both
//! scores through exponentials as ncnn does. Boxes at or above the
//! threshold are sorted, suppressed and returned as rows (label + 1, score,
//! xmin, ymin, xmax, ymax).

use super::kernels::detect::{nms_sorted, qsort_descent, rows, sigmoid, BBox};
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Yolov3DetectionOutput {
    num_class: usize,
    num_box: usize,
    confidence_threshold: f32,
    nms_threshold: f32,
    biases: Vec<f32>,
    mask: Vec<usize>,
    anchors_scale: Vec<f32>,
}

impl Yolov3DetectionOutput {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Yolov3DetectionOutput> {
        let (nc, nb) = (pd.int(0, 20), pd.int(1, 5));
        if nc <= 0 || nb <= 0 {
            ncnn_bail!("Yolov3DetectionOutput num_class ({nc}) and num_box ({nb}) must be positive");
        }
        let biases = pd.floats(4);
        let raw_mask = pd.floats_raw(5);
        let anchors_scale = pd.floats(6);
        if biases.is_empty() || raw_mask.is_empty() || anchors_scale.is_empty() {
            ncnn_bail!("Yolov3DetectionOutput needs biases (key 4), mask (key 5) and anchors_scale (key 6)");
        }
        let mut mask = Vec::with_capacity(raw_mask.len());
        for &m in &raw_mask {
            if !(m >= 0.0 && m.fract() == 0.0 && (m as usize) * 2 + 1 < biases.len()) {
                ncnn_bail!("Yolov3DetectionOutput mask entry {m} is not the index of an anchor among the {} biases", biases.len() / 2);
            }
            mask.push(m as usize);
        }
        Ok(Yolov3DetectionOutput {
            num_class: nc as usize,
            num_box: nb as usize,
            confidence_threshold: pd.float(2, 0.01),
            nms_threshold: pd.float(3, 0.45),
            biases,
            mask,
            anchors_scale,
        })
    }
}

impl Layer for Yolov3DetectionOutput {
    fn one_blob_only(&self) -> bool {
        false
    }

    // BOUNDS-FN: new checks every mask entry bi has biases[bi * 2 + 1]; x has num_box
    // * (5 + nc) channels (checked) of plane = w * h, at = i * w + j < plane; nms
    // picks indices of `all`.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let nc = self.num_class;
        let mut all = Vec::new();
        for (b, x) in bottoms.iter().enumerate() {
            let (w, h) = (x.w, x.h);
            if x.dims != 3 || x.c != self.num_box * (5 + nc) {
                ncnn_bail!("Yolov3DetectionOutput expects {} channels ({} boxes of 4 + 1 + {nc}), got {}", self.num_box * (5 + nc), self.num_box, x.describe());
            }
            let Some(&scale) = self.anchors_scale.get(b) else {
                ncnn_bail!("Yolov3DetectionOutput has {} bottoms but {} anchors_scale entries", bottoms.len(), self.anchors_scale.len());
            };
            let net_w = (scale * w as f32) as i32 as f32;
            let net_h = (scale * h as f32) as i32 as f32;
            let plane = w * h;
            for pp in 0..self.num_box {
                let p = pp * (5 + nc);
                let Some(&bi) = self.mask.get(pp + b * self.num_box) else {
                    ncnn_bail!("Yolov3DetectionOutput mask has {} entries, scale {b} box {pp} needs more", self.mask.len());
                };
                let (bias_w, bias_h) = (self.biases[bi * 2], self.biases[bi * 2 + 1]);
                let ch = |k: usize| &x.data[(p + k) * plane..(p + k + 1) * plane];
                for i in 0..h {
                    for j in 0..w {
                        let at = i * w + j;
                        let (mut class_index, mut class_score) = (0usize, f32::MIN);
                        for q in 0..nc {
                            let s = x.data[(p + 5 + q) * plane + at];
                            if s > class_score {
                                class_index = q;
                                class_score = s;
                            }
                        }
                        let confidence = 1.0 / (1.0 + (-ch(4)[at]).exp() * (1.0 + (-class_score).exp()));
                        if confidence >= self.confidence_threshold {
                            let cx = (j as f32 + sigmoid(ch(0)[at])) / w as f32;
                            let cy = (i as f32 + sigmoid(ch(1)[at])) / h as f32;
                            let bw = ch(2)[at].exp() * bias_w / net_w;
                            let bh = ch(3)[at].exp() * bias_h / net_h;
                            let (xmin, ymin, xmax, ymax) = (cx - bw * 0.5, cy - bh * 0.5, cx + bw * 0.5, cy + bh * 0.5);
                            all.push(BBox { score: confidence, xmin, ymin, xmax, ymax, area: bw * bh, label: class_index as i32 });
                        }
                    }
                }
            }
        }
        qsort_descent(&mut all);
        let picked = nms_sorted(&all, self.nms_threshold, false);
        let kept: Vec<BBox> = picked.into_iter().map(|i| all[i]).collect();
        Ok(vec![rows(&kept, 1)])
    }
}
