//! Box helpers of the detection layers: ncnn's descending quicksort (whose
//! order of equal scores the outputs depend on, so it is the same
//! partitioning), intersection areas and greedy non-maximum suppression.

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// A detected box.
#[derive(Clone, Copy, Debug, Default)]
pub struct BBox {
    pub score: f32,
    pub xmin: f32,
    pub ymin: f32,
    pub xmax: f32,
    pub ymax: f32,
    pub area: f32,
    pub label: i32,
}

/// Sort by score, descending, with Hoare partitioning around the middle
/// element (the order ncnn leaves equal scores in).
pub fn qsort_descent(v: &mut [BBox]) {
    if v.len() > 1 {
        sort_range(v, 0, v.len() as isize - 1);
    }
}

// BOUNDS-FN: Hoare partition of left..=right: the pivot value stops both
// scans (a NaN only stops them sooner), so i and j stay within the range.
fn sort_range(v: &mut [BBox], left: isize, right: isize) {
    let (mut i, mut j) = (left, right);
    let p = v[((left + right) / 2) as usize].score;
    while i <= j {
        while v[i as usize].score > p {
            i += 1;
        }
        while v[j as usize].score < p {
            j -= 1;
        }
        if i <= j {
            v.swap(i as usize, j as usize);
            i += 1;
            j -= 1;
        }
    }
    if left < j {
        sort_range(v, left, j);
    }
    if i < right {
        sort_range(v, i, right);
    }
}

pub fn intersection_area(a: &BBox, b: &BBox) -> f32 {
    if a.xmin > b.xmax || a.xmax < b.xmin || a.ymin > b.ymax || a.ymax < b.ymin {
        return 0.0;
    }
    let w = a.xmax.min(b.xmax) - a.xmin.max(b.xmin);
    let h = a.ymax.min(b.ymax) - a.ymin.max(b.ymin);
    w * h
}

/// Indices of the boxes (sorted by score) that no higher one overlaps by
/// more than `threshold`: `ratio` compares intersection / union (SSD's
/// DetectionOutput), otherwise intersection > threshold * union (YOLO).
// BOUNDS-FN: picked holds indices i of boxes already visited.
pub fn nms_sorted(boxes: &[BBox], threshold: f32, ratio: bool) -> Vec<usize> {
    let mut picked: Vec<usize> = Vec::new();
    for (i, a) in boxes.iter().enumerate() {
        let keep = picked.iter().all(|&j| {
            let b = &boxes[j];
            let inter = intersection_area(a, b);
            let union = a.area + b.area - inter;
            if ratio {
                !(inter / union > threshold)
            } else {
                !(inter > threshold * union)
            }
        });
        if keep {
            picked.push(i);
        }
    }
    picked
}

/// Rows of (label, score, xmin, ymin, xmax, ymax); an empty blob when none.
pub fn rows(boxes: &[BBox], label_offset: i32) -> crate::ncnn::Mat {
    if boxes.is_empty() {
        return crate::ncnn::Mat::new_1d(0);
    }
    let mut m = crate::ncnn::Mat::new_2d(6, boxes.len());
    for (r, b) in m.data.chunks_mut(6).zip(boxes) {
        r.copy_from_slice(&[(b.label + label_offset) as f32, b.score, b.xmin, b.ymin, b.xmax, b.ymax]);
    }
    m
}
