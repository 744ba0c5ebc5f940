//! What a split policy is told and answers: ggml's split axis codes, the
//! policy trait (an R function in the R package), and the check that turns
//! an answer into a [`DeviceSplit`].

use super::memory::DeviceSplit;
use anyhow::{bail, ensure};

/// ggml's split axis codes: 0-3 a dimension, 10 mirrored, 11 partial sums.
pub const AXIS_MIRRORED: i64 = 10;
pub const AXIS_PARTIAL: i64 = 11;

/// What a policy is told about a tensor.
#[derive(Debug, Clone)]
pub struct SplitTensorInfo {
    pub name: String,
    pub type_code: i32,
    pub ne: [usize; 4],
    pub op: String,
    pub flags: u8,
}

/// A policy's answer: a split axis code and, for a dimension, the number of
/// indices each device holds.
#[derive(Debug, Clone)]
pub struct SplitAnswer {
    pub axis: i64,
    pub ne: Vec<i64>,
}

/// Decides how tensors lie over the devices.
pub trait SplitPolicy: Send + Sync + std::fmt::Debug {
    fn split(&self, info: &SplitTensorInfo, n_devices: usize) -> crate::Result<SplitAnswer>;
}

/// The split an answer describes, checked against the tensor and the number of devices.
// BOUNDS-FN: d is 0 to 3 (the match arm) and info.ne has four entries.
pub fn answer_split(a: &SplitAnswer, info: &SplitTensorInfo, n: usize) -> crate::Result<DeviceSplit> {
    match a.axis {
        AXIS_MIRRORED => Ok(DeviceSplit::Mirrored),
        AXIS_PARTIAL => bail!("axis 11 (partial sums) is for computed results, not for allocated tensors"),
        d @ 0..=3 => {
            let d = d as usize;
            ensure!(a.ne.len() == n, "`ne` gives {} sizes for {n} devices", a.ne.len());
            ensure!(a.ne.iter().all(|&x| x >= 0), "`ne` has negative sizes");
            let sizes: Vec<usize> = a.ne.iter().map(|&x| x as usize).collect();
            ensure!(
                sizes.iter().sum::<usize>() == info.ne[d],
                "`ne` = {:?} does not add up to the {} indices of dimension {d}",
                sizes,
                info.ne[d]
            );
            Ok(DeviceSplit::Axis { dim: d, sizes })
        }
        other => bail!("unknown split axis {other}: use 0 to 3 (a dimension) or 10 (mirrored)"),
    }
}
