//! Operators that run on the host: those whose output shape depends on
//! input values (NonZero, NonMaxSuppression, Unique, Compress), and TopK
//! and RoiAlign, which sort or sample at positions read from their inputs.
//! A plan that reaches one computes the graph so far, runs it here, and
//! goes on with its results.

use super::common::{axis, harg, hopt, Fold, Lower};
use crate::models::onnx::elem::Elem;
use crate::models::onnx::host::{fmt_shape, index_map, strides, HTensor};
use crate::models::onnx::model::OnnxNode;
use anyhow::{bail, ensure};
use std::cmp::Ordering;
use std::sync::Arc;

pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    Some(match op {
        "NonZero" => (None, Some(fold_nonzero)),
        "TopK" => (None, Some(fold_topk)),
        "NonMaxSuppression" => (None, Some(fold_nms)),
        "Unique" => (None, Some(fold_unique)),
        "Compress" => (None, Some(fold_compress)),
        "RoiAlign" => (None, Some(fold_roialign)),
        "ReverseSequence" => (None, Some(fold_reverse_sequence)),
        _ => return None,
    })
}

/// The `axis` attribute when the node has one (an empty list of ints, as a
/// file can give, is an error).
fn axis_attr(n: &OnnxNode, rank: usize) -> crate::Result<Option<usize>> {
    match n.ints("axis").filter(|_| n.has("axis")) {
        None => Ok(None),
        Some(v) => {
            let a = v.first().copied().ok_or_else(|| anyhow::anyhow!("{}'s axis attribute has no value", n.op))?;
            axis(a, rank).map(Some)
        }
    }
}

// BOUNDS-FN: st and x.shape have rank entries and d < rank; out has r * hits.len()
// entries and d * hits.len() + k is below it (an empty size leaves no hits).
fn fold_nonzero(_n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "X")?;
    let v = x.f64s();
    let st = strides(&x.shape);
    let hits: Vec<usize> = (0..v.len()).filter(|&i| v[i] != 0.0).collect();
    let r = x.rank().max(1);
    let mut out = vec![0i64; r * hits.len()];
    for (k, &flat) in hits.iter().enumerate() {
        for d in 0..x.rank() {
            out[d * hits.len() + k] = ((flat / st[d]) % x.shape[d]) as i64;
        }
    }
    Ok(vec![HTensor::from_i64(Elem::I64, vec![x.rank(), hits.len()], if x.rank() == 0 { Vec::new() } else { out })?])
}

// BOUNDS-FN: a < rank (normalised); st and ost agree at a (the sizes after a are the
// same), so base + i * st[a] < v.len() and obase + m * st[a] < rows * k for r < rows, i
// < len, m < k.
fn fold_topk(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "X")?;
    let k = match hopt(ins, 1) {
        Some(t) => t.scalar("K")? as i64,
        None => n.int("k", 1),
    };
    let a = axis(n.int("axis", -1), x.rank())?;
    let len = x.shape[a];
    ensure!(k >= 0 && (k as usize) <= len, "TopK: k = {k} for an axis of size {len}");
    let k = k as usize;
    let largest = n.int("largest", 1) != 0;
    let st = strides(&x.shape);
    let v = x.f64s();
    let mut out_shape = x.shape.clone();
    out_shape[a] = k;
    let rows = if len == 0 { 0 } else { v.len() / len };
    let mut vals = vec![0.0f64; rows * k];
    let mut idxs = vec![0i64; rows * k];
    let ost = strides(&out_shape);
    for r in 0..rows {
        let base = (r / st[a]) * st[a] * len + r % st[a];
        let obase = (r / st[a]) * ost[a] * k + r % st[a];
        let mut order: Vec<usize> = (0..len).collect();
        // Ties keep the smaller index first; NaN sorts as the largest.
        order.sort_by(|&i, &j| {
            let (p, q) = (v[base + i * st[a]], v[base + j * st[a]]);
            let c = p.partial_cmp(&q).unwrap_or_else(|| q.is_nan().cmp(&p.is_nan()));
            let c = if largest { c.reverse() } else { c };
            c.then(i.cmp(&j))
        });
        for (m, &i) in order.iter().take(k).enumerate() {
            vals[obase + m * st[a]] = v[base + i * st[a]];
            idxs[obase + m * st[a]] = i as i64;
        }
    }
    Ok(vec![HTensor::from_f64(x.elem, out_shape.clone(), vals)?, HTensor::from_i64(Elem::I64, out_shape, idxs)?])
}

// BOUNDS-FN: the ranks are checked before the shapes are read; bv holds nb * nbox * 4
// values and sv nb * nc * nbox (the shapes are checked to agree), so o + 3 and the
// score index are in range for b < nb, c < nc, i < nbox; p, q, r are [f64; 4].
fn fold_nms(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let boxes = harg(ins, 0, "boxes")?;
    let scores = harg(ins, 1, "scores")?;
    ensure!(boxes.rank() == 3 && boxes.shape[2] == 4, "NonMaxSuppression: boxes must be [batch, boxes, 4], not {}", fmt_shape(&boxes.shape));
    ensure!(
        scores.rank() == 3 && scores.shape[0] == boxes.shape[0] && scores.shape[2] == boxes.shape[1],
        "NonMaxSuppression: scores {} do not fit boxes {}",
        fmt_shape(&scores.shape),
        fmt_shape(&boxes.shape)
    );
    let max_out = hopt(ins, 2).map(|t| t.first()).transpose()?.map_or(0, |v| v as i64).max(0) as usize;
    let iou_t = hopt(ins, 3).map(|t| t.first()).transpose()?.unwrap_or(0.0);
    let score_t = hopt(ins, 4).map(|t| t.first()).transpose()?;
    let center = n.int("center_point_box", 0) != 0;
    let (nb, nc, nbox) = (scores.shape[0], scores.shape[1], boxes.shape[1]);
    let bv = boxes.f64s();
    let sv = scores.f64s();
    let corners = |b: usize, i: usize| -> [f64; 4] {
        let o = (b * nbox + i) * 4;
        let (a0, a1, a2, a3) = (bv[o], bv[o + 1], bv[o + 2], bv[o + 3]);
        if center {
            // [x_center, y_center, width, height]
            [a1 - a3 / 2.0, a0 - a2 / 2.0, a1 + a3 / 2.0, a0 + a2 / 2.0]
        } else {
            // [y1, x1, y2, x2], any diagonal
            [a0.min(a2), a1.min(a3), a0.max(a2), a1.max(a3)]
        }
    };
    let iou = |p: [f64; 4], q: [f64; 4]| -> f64 {
        let ih = (p[2].min(q[2]) - p[0].max(q[0])).max(0.0);
        let iw = (p[3].min(q[3]) - p[1].max(q[1])).max(0.0);
        let inter = ih * iw;
        let area = |r: [f64; 4]| (r[2] - r[0]) * (r[3] - r[1]);
        let union = area(p) + area(q) - inter;
        if union <= 0.0 {
            0.0
        } else {
            inter / union
        }
    };
    let mut sel: Vec<i64> = Vec::new();
    for b in 0..nb {
        for c in 0..nc {
            let s = |i: usize| sv[(b * nc + c) * nbox + i];
            let mut cand: Vec<usize> = (0..nbox).filter(|&i| score_t.is_none_or(|t| s(i) > t)).collect();
            cand.sort_by(|&i, &j| s(j).partial_cmp(&s(i)).unwrap_or(Ordering::Equal).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| iou(corners(b, i), corners(b, k)) <= iou_t) {
                    kept.push(i);
                }
            }
            for k in kept {
                sel.extend_from_slice(&[b as i64, c as i64, k as i64]);
            }
        }
    }
    let count = sel.len() / 3;
    Ok(vec![HTensor::from_i64(Elem::I64, vec![count, 3], sel)?])
}

// BOUNDS-FN: a < rank (axis_attr); xv[flat] with i < shape[a]; slices, inverse have len
// entries and firsts indexes them; rank has firsts.len() entries, as many as inverse's
// values; out has k * per entries indexed by the strides of yshape with r < k; every
// slice has per values (one per index_map call over sub), or one without an axis.
fn fold_unique(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "X")?;
    let sorted = n.int("sorted", 1) != 0;
    // Sub-tensors along `axis` (or single elements when it is absent).
    let (a, slices, len, shape_of) = match axis_attr(n, x.rank())? {
        Some(a) => {
            let st = strides(&x.shape);
            let count = x.shape[a];
            let per: usize = x.numel() / count.max(1);
            let xv = x.f64s();
            let mut sl = Vec::with_capacity(count);
            for i in 0..count {
                let mut s = Vec::with_capacity(per);
                let mut sub = x.shape.clone();
                sub[a] = 1;
                let _ = index_map(&sub, |c| {
                    let flat: usize = c.iter().enumerate().map(|(d, &ci)| (if d == a { i } else { ci }) * st[d]).sum();
                    s.push(xv[flat]);
                    0
                })?;
                sl.push(s);
            }
            (Some(a), sl, count, x.shape.clone())
        }
        None => (None, x.f64s().iter().map(|&v| vec![v]).collect::<Vec<_>>(), x.numel(), vec![x.numel()]),
    };
    let cmp = |p: &Vec<f64>, q: &Vec<f64>| p.partial_cmp(q).unwrap_or(Ordering::Equal);
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse = vec![0i64; len];
    for i in 0..len {
        match firsts.iter().position(|&f| slices[f] == slices[i]) {
            Some(u) => inverse[i] = u as i64,
            None => {
                inverse[i] = firsts.len() as i64;
                firsts.push(i);
            }
        }
    }
    let mut order: Vec<usize> = (0..firsts.len()).collect();
    if sorted {
        order.sort_by(|&u, &w| cmp(&slices[firsts[u]], &slices[firsts[w]]));
    }
    let mut rank = vec![0i64; firsts.len()];
    for (r, &u) in order.iter().enumerate() {
        rank[u] = r as i64;
    }
    let counts: Vec<i64> = order.iter().map(|&u| inverse.iter().filter(|&&v| v == u as i64).count() as i64).collect();
    let idx: Vec<i64> = order.iter().map(|&u| firsts[u] as i64).collect();
    let inv: Vec<i64> = inverse.iter().map(|&u| rank[u as usize]).collect();
    let mut yshape = shape_of;
    let k = order.len();
    let yv: Vec<f64> = match a {
        Some(ax) => {
            yshape[ax] = k;
            // Rebuild with the unique slices along the axis.
            let per = slices.first().map_or(0, |s| s.len());
            let mut sub = x.shape.clone();
            sub[ax] = 1;
            let sst = strides(&yshape);
            let mut out = vec![0.0; k * per];
            for (r, &u) in order.iter().enumerate() {
                let mut e = 0;
                let _ = index_map(&sub, |c| {
                    let flat: usize = c.iter().enumerate().map(|(d, &ci)| (if d == ax { r } else { ci }) * sst[d]).sum();
                    out[flat] = slices[firsts[u]][e];
                    e += 1;
                    0
                })?;
            }
            out
        }
        None => {
            yshape = vec![k];
            order.iter().map(|&u| slices[firsts[u]][0]).collect()
        }
    };
    Ok(vec![
        HTensor::from_f64(x.elem, yshape, yv)?,
        HTensor::ints(idx),
        HTensor::ints(inv),
        HTensor::ints(counts),
    ])
}

// BOUNDS-FN: cv and the kept indices stay below cv.len() and the axis size; a < rank
// (axis_attr); keep[qi] with qi < out[a] = keep.len(); pick checks idx.
fn fold_compress(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let c = harg(ins, 1, "condition")?;
    let cv = c.f64s();
    match axis_attr(n, x.rank())? {
        None => {
            let xv = x.f64s();
            let keep: Vec<usize> = (0..xv.len().min(cv.len())).filter(|&i| cv[i] != 0.0).collect();
            let k = keep.len();
            Ok(vec![x.pick(&keep, vec![k])?])
        }
        Some(a) => {
            let keep: Vec<usize> = (0..x.shape[a].min(cv.len())).filter(|&i| cv[i] != 0.0).collect();
            let mut out = x.shape.clone();
            out[a] = keep.len();
            let st = strides(&x.shape);
            let idx = index_map(&out, |q| q.iter().enumerate().map(|(d, &qi)| (if d == a { keep[qi] } else { qi }) * st[d]).sum())?;
            Ok(vec![x.pick(&idx, out)?])
        }
    }
}

// BOUNDS-FN: ta and ba are checked below the rank; c and st have rank entries; pick
// checks idx.
fn fold_reverse_sequence(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], _o: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "input")?;
    let lens = harg(ins, 1, "sequence_lens")?.i64s().to_vec();
    let (ta, ba) = (n.int("time_axis", 0) as usize, n.int("batch_axis", 1) as usize);
    ensure!(x.rank() >= 2 && ta < x.rank() && ba < x.rank() && ta != ba, "ReverseSequence: bad time/batch axes");
    let st = strides(&x.shape);
    let idx = index_map(&x.shape, |c| {
        let l = lens.get(c[ba]).copied().unwrap_or(0).clamp(0, x.shape[ta] as i64) as usize;
        c.iter()
            .enumerate()
            .map(|(d, &ci)| (if d == ta && ci < l { l - 1 - ci } else { ci }) * st[d])
            .sum()
    })?;
    Ok(vec![x.pick(&idx, x.shape.clone())?])
}

// BOUNDS-FN: the ranks are checked before the shapes are read; bv has r values
// (checked), rv 4 * r; b < N is checked, so the plane slice is inside xv; h, w > 0 are
// checked and y0, x0, y1i, x1i are clamped below them; v and wt are [f64; 4]; out has r
// * c * oh * ow entries.
fn fold_roialign(n: &OnnxNode, ins: &[Option<Arc<HTensor>>], opset: i64) -> crate::Result<Vec<HTensor>> {
    let x = harg(ins, 0, "X")?;
    let rois = harg(ins, 1, "rois")?;
    let bi = harg(ins, 2, "batch_indices")?;
    ensure!(x.rank() == 4, "RoiAlign needs X [N, C, H, W], not {}", fmt_shape(&x.shape));
    ensure!(rois.rank() == 2 && rois.shape[1] == 4, "RoiAlign needs rois [R, 4], not {}", fmt_shape(&rois.shape));
    let (c, h, w) = (x.shape[1], x.shape[2], x.shape[3]);
    ensure!(h > 0 && w > 0, "RoiAlign needs a feature map of at least 1 x 1, not {}", fmt_shape(&x.shape));
    let r = rois.shape[0];
    ensure!(bi.numel() == r, "RoiAlign: {} batch indices for {r} rois", bi.numel());
    let (oh, ow) = (n.int("output_height", 1).max(1) as usize, n.int("output_width", 1).max(1) as usize);
    let ratio = n.int("sampling_ratio", 0).max(0) as usize;
    let scale = n.float("spatial_scale", 1.0) as f64;
    let max_mode = match n.string("mode", "avg").as_str() {
        "avg" => false,
        "max" => true,
        other => bail!("RoiAlign mode '{other}' is not avg or max"),
    };
    let default_ct = if opset >= 16 { "half_pixel" } else { "output_half_pixel" };
    let offset = if n.string("coordinate_transformation_mode", default_ct) == "half_pixel" { 0.5 } else { 0.0 };
    let xv = x.f64s();
    let rv = rois.f64s();
    let bv = bi.i64s();
    let total = crate::models::onnx::host::numel(&[r, c, oh, ow])?;
    let mut out = crate::models::onnx::host::filled(total, 0.0f64)?;
    for k in 0..r {
        let b = bv[k];
        ensure!((0..x.shape[0] as i64).contains(&b), "RoiAlign: batch index {b} is out of range");
        let b = b as usize;
        let (x1, y1, x2, y2) = (rv[k * 4] * scale - offset, rv[k * 4 + 1] * scale - offset, rv[k * 4 + 2] * scale - offset, rv[k * 4 + 3] * scale - offset);
        let (mut rw, mut rh) = (x2 - x1, y2 - y1);
        if offset == 0.0 {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / oh as f64, rw / ow as f64);
        let gh = if ratio > 0 { ratio } else { bh.ceil().max(1.0) as usize };
        let gw = if ratio > 0 { ratio } else { bw.ceil().max(1.0) as usize };
        let count = (gh * gw) as f64;
        for ch in 0..c {
            let plane = &xv[(b * c + ch) * h * w..(b * c + ch + 1) * h * w];
            let sample = |yy: f64, xx: f64| -> f64 {
                if yy < -1.0 || yy > h as f64 || xx < -1.0 || xx > w as f64 {
                    return 0.0;
                }
                let (yy, xx) = (yy.max(0.0), xx.max(0.0));
                let (mut y0, mut x0) = (yy.floor() as usize, xx.floor() as usize);
                let (mut yy, mut xx) = (yy, xx);
                if y0 >= h - 1 {
                    y0 = h - 1;
                    yy = y0 as f64;
                }
                if x0 >= w - 1 {
                    x0 = w - 1;
                    xx = x0 as f64;
                }
                let (y1i, x1i) = ((y0 + 1).min(h - 1), (x0 + 1).min(w - 1));
                let (ly, lx) = (yy - y0 as f64, xx - x0 as f64);
                let (hy, hx) = (1.0 - ly, 1.0 - lx);
                let v = [plane[y0 * w + x0], plane[y0 * w + x1i], plane[y1i * w + x0], plane[y1i * w + x1i]];
                let wt = [hy * hx, hy * lx, ly * hx, ly * lx];
                if max_mode {
                    (0..4).map(|i| wt[i] * v[i]).fold(f64::NEG_INFINITY, f64::max)
                } else {
                    (0..4).map(|i| wt[i] * v[i]).sum()
                }
            };
            for py in 0..oh {
                for px in 0..ow {
                    let mut acc = if max_mode { f64::NEG_INFINITY } else { 0.0 };
                    for iy in 0..gh {
                        let yy = y1 + py as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                        for ix in 0..gw {
                            let xx = x1 + px as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                            let s = sample(yy, xx);
                            if max_mode {
                                acc = acc.max(s);
                            } else {
                                acc += s;
                            }
                        }
                    }
                    out[((k * c + ch) * oh + py) * ow + px] = if max_mode { acc } else { acc / count };
                }
            }
        }
    }
    Ok(vec![HTensor::from_f64(x.elem, vec![r, c, oh, ow], out)?])
}
