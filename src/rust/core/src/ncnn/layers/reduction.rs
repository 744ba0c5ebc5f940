//! Reduction over some axes (or all): 0 sum, 1 sum of |x|, 2 sum of
//! squares, 3 mean, 4 max, 5 min, 6 product, 7 L1, 8 L2, 9 log of the sum,
//! 10 log-sum-exp; the result times `coeff`. Axes count from the outermost
//! (negative from the end); `keepdims` keeps reduced axes as extent 1.

use super::kernels::transpose::permute;
use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Reduction {
    op: i32,
    all: bool,
    coeff: f32,
    axes: Vec<i32>,
    keepdims: bool,
}

impl Reduction {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Reduction> {
        let op = pd.int(0, 0);
        if !(0..=10).contains(&op) {
            ncnn_bail!("Reduction operation {op} is not 0 to 10");
        }
        let axes = pd.ints(3);
        if !axes.is_empty() && pd.int(5, 0) == 0 {
            ncnn_bail!("this Reduction param counts axes with a batch axis (written before key 5 fixbug0 existed); regenerate the param with a current converter");
        }
        Ok(Reduction { op, all: pd.int(1, 1) != 0, coeff: pd.float(2, 1.0), axes, keepdims: pd.int(4, 0) != 0 })
    }

    fn reduce(&self, v: &[f32]) -> f32 {
        let r = match self.op {
            0 => v.iter().sum::<f32>(),
            1 | 7 => v.iter().map(|x| x.abs()).sum::<f32>(),
            2 => v.iter().map(|x| x * x).sum::<f32>(),
            3 => v.iter().sum::<f32>() / v.len() as f32,
            4 => v.iter().fold(f32::MIN, |m, &x| m.max(x)),
            5 => v.iter().fold(f32::MAX, |m, &x| m.min(x)),
            6 => v.iter().product::<f32>(),
            8 => v.iter().map(|x| x * x).sum::<f32>().sqrt(),
            9 => v.iter().sum::<f32>().ln(),
            _ => v.iter().map(|x| x.exp()).sum::<f32>().ln(),
        };
        r * self.coeff
    }
}

impl Layer for Reduction {
    // BOUNDS-FN: reduced has dims = axes.len() entries; k < dims is checked, and the
    // other indexes run over 0..dims.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Reduction")?;
        let axes = x.axes();
        let dims = axes.len();
        let mut reduced = vec![self.all || self.axes.is_empty(); dims];
        if !self.all && !self.axes.is_empty() {
            for &a in &self.axes {
                let k = if a < 0 { a + dims as i32 } else { a };
                if k < 0 || k as usize >= dims {
                    ncnn_bail!("Reduction axis {a} is out of range for a {dims}-d blob ({})", x.describe());
                }
                reduced[k as usize] = true;
            }
        }
        // Kept axes outermost, reduced ones innermost, in their order.
        let perm: Vec<usize> = (0..dims).filter(|&k| !reduced[k]).chain((0..dims).filter(|&k| reduced[k])).collect();
        let run: usize = (0..dims).filter(|&k| reduced[k]).map(|k| axes[k]).product();
        let src: Vec<f32> = if perm.iter().enumerate().all(|(i, &p)| i == p) {
            x.data.to_vec()
        } else {
            let mut t = vec![0.0; x.total()];
            permute(&x.data, &axes, &perm, &mut t);
            t
        };
        let out: Vec<f32> = if run == 0 { vec![] } else { src.chunks(run).map(|c| self.reduce(c)).collect() };
        let oaxes: Vec<usize> = if self.keepdims {
            (0..dims).map(|k| if reduced[k] { 1 } else { axes[k] }).collect()
        } else {
            let kept: Vec<usize> = (0..dims).filter(|&k| !reduced[k]).map(|k| axes[k]).collect();
            if kept.is_empty() {
                vec![1]
            } else {
                kept
            }
        };
        Ok(vec![Mat::from_axes(&oaxes, out)?])
    }
}
