//! Axis permutation of a dense blob: output axis k (outermost first) is
//! input axis `perm[k]`.

use crate::ncnn::par;

/// The values of `src` (extents `axes`, outermost first) with its axes
/// permuted, into `out` (same length).
// BOUNDS-FN: perm is a permutation of 0..n and src and out hold the product
// of axes (asserted), so every offset of a row is below src.len().
pub fn permute(src: &[f32], axes: &[usize], perm: &[usize], out: &mut [f32]) {
    let n = axes.len();
    let mut seen = vec![false; n];
    let is_perm = perm.len() == n && perm.iter().all(|&p| p < n && !std::mem::replace(&mut seen[p], true));
    let total: usize = axes.iter().product();
    assert!(is_perm && src.len() >= total && out.len() == total, "permute: not a permutation of the axes, or buffers of the wrong size");
    // Strides of the input, outermost first.
    let mut stride = vec![1usize; n];
    for k in (0..n.saturating_sub(1)).rev() {
        stride[k] = stride[k + 1] * axes[k + 1];
    }
    let oext: Vec<usize> = perm.iter().map(|&p| axes[p]).collect();
    let ostr: Vec<usize> = perm.iter().map(|&p| stride[p]).collect();
    let inner = *oext.last().unwrap_or(&1);
    let istep = *ostr.last().unwrap_or(&1);
    if inner == 0 || out.is_empty() {
        return;
    }
    par::chunks_mut(out, inner, |row, o| {
        // Input offset of output row `row` (all axes but the innermost).
        let mut r = row;
        let mut at = 0;
        for k in (0..n - 1).rev() {
            at += (r % oext[k]) * ostr[k];
            r /= oext[k];
        }
        if istep == 1 {
            o.copy_from_slice(&src[at..at + inner]);
        } else {
            for (i, v) in o.iter_mut().enumerate() {
                *v = src[at + i * istep];
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn permutes_three_axes() {
        // axes (c=2, h=3, w=4) -> (w, c, h)
        let src: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let mut out = vec![0.0; 24];
        super::permute(&src, &[2, 3, 4], &[2, 0, 1], &mut out);
        for w in 0..4 {
            for c in 0..2 {
                for h in 0..3 {
                    assert_eq!(out[(w * 2 + c) * 3 + h], src[(c * 3 + h) * 4 + w]);
                }
            }
        }
    }
}
