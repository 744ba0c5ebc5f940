//! Eltwise: product, (weighted) sum or max of same-shaped bottoms.

use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Eltwise {
    op: i32,
    coeffs: Vec<f32>,
}

impl Eltwise {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Eltwise> {
        let op = pd.int(0, 0);
        if !(0..=2).contains(&op) {
            ncnn_bail!("Eltwise op {op} is not 0 (prod), 1 (sum) or 2 (max)");
        }
        Ok(Eltwise {
            op,
            coeffs: pd.floats(1),
        })
    }
}

impl Layer for Eltwise {
    fn one_blob_only(&self) -> bool {
        false
    }
    // BOUNDS-FN: bottoms is not empty (checked first).
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        if bottoms.is_empty() {
            ncnn_bail!("Eltwise needs at least one bottom blob");
        }
        for b in &bottoms[1..] {
            if !b.shape_eq(&bottoms[0]) {
                ncnn_bail!(
                    "Eltwise bottoms differ in shape: {} and {}",
                    bottoms[0].describe(),
                    b.describe()
                );
            }
        }
        if self.op == 1 && !self.coeffs.is_empty() && self.coeffs.len() != bottoms.len() {
            ncnn_bail!(
                "Eltwise has {} coefficients for {} bottoms",
                self.coeffs.len(),
                bottoms.len()
            );
        }
        let coef = |i: usize| self.coeffs.get(i).copied().unwrap_or(1.0);
        let mut out = bottoms[0].clone();
        if self.op == 1 && !self.coeffs.is_empty() {
            out.data.iter_mut().for_each(|x| *x *= coef(0));
        }
        for (i, b) in bottoms.iter().enumerate().skip(1) {
            let c = coef(i);
            for (o, v) in out.data.iter_mut().zip(b.data.iter()) {
                match self.op {
                    0 => *o *= v,
                    1 => *o += if self.coeffs.is_empty() { *v } else { v * c },
                    _ => *o = o.max(*v),
                }
            }
        }
        Ok(vec![out])
    }
}
