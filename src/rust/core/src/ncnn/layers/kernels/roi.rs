//! The region of interest shared by Crop and CopyTo: offsets and extents per
//! axis from explicit offsets (head and tail, -233 = the rest) or from
//! numpy-style starts / ends / axes (negative counts from the end, -233 =
//! the axis' bound).

use crate::ncnn::ParamDict;
use crate::ncnn_bail;

#[derive(Clone, Debug)]
pub struct RoiParams {
    /// Head offsets and extents, w h d c.
    off: [i32; 4],
    ext: [i32; 4],
    off2: [i32; 4],
    starts: Vec<i32>,
    ends: Vec<i32>,
    axes: Vec<i32>,
}

/// Offsets and extents of a region, outermost axis first.
#[derive(Clone, Debug, PartialEq)]
pub struct Roi {
    pub off: Vec<usize>,
    pub ext: Vec<usize>,
}

impl RoiParams {
    pub fn new(pd: &ParamDict) -> RoiParams {
        RoiParams {
            off: [pd.int(0, 0), pd.int(1, 0), pd.int(13, 0), pd.int(2, 0)],
            ext: [pd.int(3, 0), pd.int(4, 0), pd.int(14, 0), pd.int(5, 0)],
            off2: [pd.int(6, 0), pd.int(7, 0), pd.int(15, 0), pd.int(8, 0)],
            starts: pd.ints(9),
            ends: pd.ints(10),
            axes: pd.ints(11),
        }
    }

    /// Whether a numpy-style slice is given (it overrides the offsets).
    pub fn numpy(&self) -> bool {
        !self.starts.is_empty() && !self.ends.is_empty()
    }

    /// Whether the offsets are given as head offsets only (a second blob
    /// may then give the extents).
    pub fn offsets(&self) -> [i32; 4] {
        self.off
    }

    /// The region of a blob with extents `axes` (outermost first).
    // BOUNDS-FN: 1 <= dims <= 4 (checked): off, ext and axes have dims entries
    // and k < dims, the param arrays four (p <= 3); self.axes[i] with i < n =
    // self.axes.len(), starts and ends hold n (checked), axes[a] after a < dims.
    pub fn resolve(&self, axes: &[usize], what: &str) -> anyhow::Result<Roi> {
        let dims = axes.len();
        if !(1..=4).contains(&dims) {
            ncnn_bail!("{what}: a blob has 1 to 4 axes, got {dims}");
        }
        let mut off = vec![0i64; dims];
        let mut ext: Vec<i64> = axes.iter().map(|&v| v as i64).collect();
        if self.numpy() {
            let n = if self.axes.is_empty() { dims } else { self.axes.len() };
            if self.starts.len() < n || self.ends.len() < n {
                ncnn_bail!("{what}: {n} axes need as many starts and ends, got {} and {}", self.starts.len(), self.ends.len());
            }
            for i in 0..n {
                let a = if self.axes.is_empty() { i as i64 } else { self.axes[i] as i64 };
                let a = if a < 0 { a + dims as i64 } else { a };
                if a < 0 || a as usize >= dims {
                    ncnn_bail!("{what}: axis {} is out of range for a {dims}-d blob", self.axes.get(i).copied().unwrap_or(i as i32));
                }
                let a = a as usize;
                let len = axes[a] as i64;
                let (mut s, mut e) = (self.starts[i] as i64, self.ends[i] as i64);
                if s == -233 {
                    s = 0;
                }
                if e == -233 {
                    e = len;
                }
                off[a] = if s >= 0 { s } else { len + s };
                ext[a] = len.min(if e > 0 { e } else { len + e }) - off[a];
            }
        } else {
            // w h d c of the params onto the blob's axes, outermost first.
            let map: &[usize] = match dims {
                1 => &[0],
                2 => &[1, 0],
                3 => &[3, 1, 0],
                _ => &[3, 2, 1, 0],
            };
            for (k, &p) in map.iter().enumerate() {
                off[k] = self.off[p] as i64;
                ext[k] = axes[k] as i64 - self.off[p] as i64 - self.off2[p] as i64;
                if self.ext[p] != -233 {
                    ext[k] = ext[k].min(self.ext[p] as i64);
                }
            }
        }
        for k in 0..dims {
            if off[k] < 0 || ext[k] <= 0 || off[k] + ext[k] > axes[k] as i64 {
                ncnn_bail!(
                    "{what}: the region (offsets {:?}, extents {:?}, outermost axis first) is empty or outside a blob of extents {:?}",
                    off, ext, axes
                );
            }
        }
        Ok(Roi { off: off.iter().map(|&v| v as usize).collect(), ext: ext.iter().map(|&v| v as usize).collect() })
    }
}

/// Copy the region `roi` of `src` (extents `axes`) into `out`, or the
/// whole of `src` into region `roi` of `out` when `into` is set.
// BOUNDS-FN: asserted on entry: roi has dims >= 1 axes, each inside axes,
// the full blob holds the product of axes and the region side the product
// of the extents; a row's offset is then inside the full blob.
pub fn copy_region(src: &[f32], axes: &[usize], roi: &Roi, out: &mut [f32], into: bool) {
    let dims = axes.len();
    let inside = dims >= 1 && roi.off.len() == dims && roi.ext.len() == dims && (0..dims).all(|k| roi.off[k] + roi.ext[k] <= axes[k]);
    let (total, region): (usize, usize) = (axes.iter().product(), roi.ext.iter().product());
    let (full, part) = if into { (out.len(), src.len()) } else { (src.len(), out.len()) };
    assert!(inside && full >= total && part >= region, "copy_region: the region is not inside the blobs");
    let inner = roi.ext[dims - 1];
    let rows: usize = roi.ext[..dims - 1].iter().product();
    for r in 0..rows {
        // Index of row r inside the region, then its offset in the full blob.
        let mut rem = r;
        let mut at = 0;
        let mut stride = axes[dims - 1];
        at += roi.off[dims - 1];
        for k in (0..dims - 1).rev() {
            let i = rem % roi.ext[k];
            rem /= roi.ext[k];
            at += (i + roi.off[k]) * stride;
            stride *= axes[k];
        }
        if into {
            out[at..at + inner].copy_from_slice(&src[r * inner..(r + 1) * inner]);
        } else {
            out[r * inner..(r + 1) * inner].copy_from_slice(&src[at..at + inner]);
        }
    }
}
