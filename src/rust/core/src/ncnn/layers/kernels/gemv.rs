//! Matrix times vector, y = W x, for an inner product of one input,
//! threaded over runs of rows; each run is [`crate::base::vdot::rows`].

use crate::ncnn::par;

pub use crate::base::vdot::WeightRows;

/// Rows per task: enough weights (about 256 KiB of f32) to be worth a
/// thread hand-over.
const TASK_VALUES: usize = 64 << 10;

/// y[o] = sum_i w[o][i] * x[i] for every row o (y has `w.len() / k` values).
pub fn gemv(w: WeightRows, x: &[f32], k: usize, y: &mut [f32]) {
    let m = y.len();
    assert!(w.len() >= m * k && x.len() >= k, "gemv operands too small");
    if m == 0 {
        return;
    }
    let rows = (TASK_VALUES / k.max(1)).clamp(4, m.max(4)) / 4 * 4;
    par::chunks_mut(y, rows, |t, yy| crate::base::vdot::rows(w, x, k, t * rows, yy));
}
