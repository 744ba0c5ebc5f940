//! Padding: borders on w/h and front/behind (channels of a 3-d blob, depth
//! of a 4-d one), constant (optionally per channel), replicate or reflect.

use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Padding {
    top: usize,
    bottom: usize,
    left: usize,
    right: usize,
    front: usize,
    behind: usize,
    kind: i32,
    value: f32,
    per_channel: usize,
    channel_values: Vec<f32>,
}

impl Padding {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Padding> {
        let get = |id: usize, def: i32, what: &str| -> anyhow::Result<usize> {
            let v = pd.int(id, def);
            if v < 0 {
                ncnn_bail!("Padding {what} must not be negative, got {v}");
            }
            Ok(v as usize)
        };
        let front = get(7, 0, "front")?;
        let p = Padding {
            top: get(0, 0, "top")?,
            bottom: get(1, 0, "bottom")?,
            left: get(2, 0, "left")?,
            right: get(3, 0, "right")?,
            front,
            behind: get(8, front as i32, "behind")?,
            kind: pd.int(4, 0),
            value: pd.float(5, 0.0),
            per_channel: get(6, 0, "per_channel_pad_data_size")?,
            channel_values: vec![],
        };
        if !(0..=2).contains(&p.kind) {
            ncnn_bail!(
                "Padding type {} is not 0 (constant), 1 (replicate) or 2 (reflect)",
                p.kind
            );
        }
        Ok(p)
    }
}

fn src_index(i: i64, n: usize, kind: i32) -> Option<usize> {
    let n = n as i64;
    if i >= 0 && i < n {
        return Some(i as usize);
    }
    match kind {
        0 => None,
        1 => Some(i.clamp(0, n - 1) as usize),
        _ => {
            let mut j = i;
            if j < 0 {
                j = -j;
            }
            if j >= n {
                j = 2 * (n - 1) - j;
            }
            Some(j.clamp(0, n - 1) as usize)
        }
    }
}

impl Layer for Padding {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        if self.per_channel > 0 {
            self.channel_values = mb.raw(self.per_channel, "padding per-channel values")?;
        }
        Ok(())
    }

    // BOUNDS-FN: src_index maps into 0..n of its extent, so planes < x.d, rows <
    // x.h, cols < x.w; channel cq < x.c holds x.d planes of plane values; an output
    // row has left + iw + right = w values.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Padding")?;
        let four = x.dims == 4;
        let (front, behind) = if x.dims >= 3 { (self.front, self.behind) } else { (0, 0) };
        let (top, bottom) = if x.dims >= 2 { (self.top, self.bottom) } else { (0, 0) };
        if self.kind == 2 && (self.left >= x.w.max(1) || self.right >= x.w.max(1) || top >= x.h.max(1) || bottom >= x.h.max(1) || (four && (front >= x.d || behind >= x.d))) {
            ncnn_bail!("reflect padding must be smaller than the input extent ({})", x.describe());
        }
        let (w, h) = (x.w.saturating_add(self.left).saturating_add(self.right), x.h.saturating_add(top).saturating_add(bottom));
        // front/behind pad the depth of a 4-d blob, the channels of a 3-d one
        let pad = |n: usize| n.saturating_add(front).saturating_add(behind);
        let (d, c) = if four { (pad(x.d), x.c) } else { (1, pad(x.c)) };
        if (w, h, d, c) == (x.w, x.h, x.d, x.c) {
            return Ok(vec![x]);
        }
        // The sizes come from the param: checked before the allocation.
        let n = crate::base::alloc::product(&[w, h, d, c], "the Padding output")?;
        crate::base::alloc::check(n, 4, "the Padding output")?;
        // Every value is written below.
        let mut out = Mat::for_overwrite_3d(w, h, d * c);
        (out.dims, out.d, out.c) = (x.dims, d, c);
        // Where each output plane, row and column reads (None: the fill
        // value); the columns left..left + x.w are the input row as it is.
        let planes: Vec<Option<usize>> = (0..d).map(|z| if four { src_index(z as i64 - front as i64, x.d, self.kind) } else { Some(0) }).collect();
        let rows: Vec<Option<usize>> = (0..h).map(|y| src_index(y as i64 - top as i64, x.h, self.kind)).collect();
        let cols: Vec<Option<usize>> = (0..w).map(|xx| src_index(xx as i64 - self.left as i64, x.w, self.kind)).collect();
        let (left, iw, plane) = (self.left, x.w, x.w * x.h);
        let front_c = if four { 0 } else { front };
        par::chunks_mut(&mut out.data, w * h * d, |q, o| {
            let fill = if self.per_channel > 0 { self.channel_values.get(q).copied().unwrap_or(self.value) } else { self.value };
            let Some(cq) = q.checked_sub(front_c).filter(|&v| v < x.c) else {
                o.fill(fill);
                return;
            };
            let src = x.channel(cq);
            for (oz, sz) in o.chunks_mut(w * h).zip(&planes) {
                let Some(sz) = *sz else {
                    oz.fill(fill);
                    continue;
                };
                let src = &src[sz * plane..(sz + 1) * plane];
                for (row, sy) in oz.chunks_mut(w).zip(&rows) {
                    let Some(sy) = *sy else {
                        row.fill(fill);
                        continue;
                    };
                    let s = &src[sy * iw..(sy + 1) * iw];
                    row[left..left + iw].copy_from_slice(s);
                    for xx in (0..left).chain(left + iw..w) {
                        row[xx] = cols[xx].map_or(fill, |sx| s[sx]);
                    }
                }
            }
        });
        Ok(vec![out])
    }
}
