//! Tile: repeats the blob along its axes. The array 2 gives numpy-style
//! repeats (aligned to the innermost axes: w, then h, then c of a 3-d or d
//! of a 4-d blob, then c); without it the axis 0 (outermost first) is
//! repeated 1=tiles times. A repeat of an axis the blob lacks adds it.

use crate::ncnn::layer::{one, resolve_axis};
use crate::ncnn::mat::take_vec;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Tile {
    axis: i32,
    tiles: i32,
    repeats: Vec<i32>,
}

impl Tile {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Tile> {
        let t = Tile { axis: pd.int(0, 0), tiles: pd.int(1, 1), repeats: pd.ints(2) };
        if t.repeats.len() > 4 {
            ncnn_bail!("Tile takes 1 to 4 repeats, got {}", t.repeats.len());
        }
        if t.tiles < 1 || t.repeats.iter().any(|&r| r < 1) {
            ncnn_bail!("Tile repeats must be positive, got tiles {} and repeats {:?}", t.tiles, t.repeats);
        }
        Ok(t)
    }

    /// Repeats of w, h, d, c for a blob with `dims` axes.
    // BOUNDS-FN: r is a [usize; 4] (literals), v has the length its match arm names,
    // names = axis_names(dims) has dims entries and a < dims (resolve_axis).
    fn by_name(&self, dims: usize) -> anyhow::Result<[usize; 4]> {
        let mut r = [1usize; 4];
        if self.repeats.is_empty() {
            let names = super::squeeze::axis_names(dims);
            let a = if dims == 1 { 0 } else { resolve_axis(self.axis, dims, "Tile")? };
            r[names[a]] = self.tiles as usize;
            return Ok(r);
        }
        let v: Vec<usize> = self.repeats.iter().map(|&x| x as usize).collect();
        match v.len() {
            1 => r[0] = v[0],
            2 => (r[1], r[0]) = (v[0], v[1]),
            3 if dims == 4 => (r[2], r[1], r[0]) = (v[0], v[1], v[2]),
            3 => (r[3], r[1], r[0]) = (v[0], v[1], v[2]),
            _ => (r[3], r[2], r[1], r[0]) = (v[0], v[1], v[2], v[3]),
        }
        Ok(r)
    }
}

impl Layer for Tile {
    // BOUNDS-FN: r is a [usize; 4] (literals); q % c, z % d, y % h address a row of w
    // inside x (no iteration when an extent is 0: its output extent is 0 too).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Tile")?;
        let r = self.by_name(x.dims)?;
        if r == [1; 4] {
            return Ok(vec![x]);
        }
        // the output has the axes of the outermost repeated name at least
        let level = if r[2] != 1 { 4 } else if r[3] != 1 { 3 } else if r[1] != 1 { 2 } else { 1 };
        let dims = x.dims.max(level);
        let (w, h, d, c) = (x.w, x.h, x.d, x.c);
        let (ow, oh, od, oc) = (w * r[0], h * r[1], d * r[2], c * r[3]);
        let n = crate::base::alloc::product(&[ow, oh, od, oc], "a Tile output")?;
        let mut out = take_vec(n);
        for q in 0..oc {
            for z in 0..od {
                for y in 0..oh {
                    let at = (((q % c) * d + z % d) * h + y % h) * w;
                    let row = &x.data[at..at + w];
                    for _ in 0..r[0] {
                        out.extend_from_slice(row);
                    }
                }
            }
        }
        let shape: Vec<usize> = match dims {
            1 => vec![ow],
            2 => vec![ow, oh],
            3 => vec![ow, oh, oc],
            _ => vec![ow, oh, od, oc],
        };
        let mut m = Mat::from_shape(&shape, out)?;
        m.int8 = x.int8;
        Ok(vec![m])
    }
}
