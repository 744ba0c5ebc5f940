//! UnaryOp: one of 20 elementwise functions (op_type 0 abs, 1 neg, 2 floor,
//! 3 ceil, 4 square, 5 sqrt, 6 rsqrt, 7 exp, 8 log, 9 sin, 10 cos, 11 tan,
//! 12 asin, 13 acos, 14 atan, 15 reciprocal, 16 tanh, 17 log10, 18 round
//! (to even), 19 trunc).

use crate::ncnn::layer::one;
use crate::ncnn::par;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct UnaryOpLayer {
    op: i32,
}

impl UnaryOpLayer {
    pub fn new(pd: &ParamDict) -> anyhow::Result<UnaryOpLayer> {
        let op = pd.int(0, 0);
        if !(0..=19).contains(&op) {
            ncnn_bail!("UnaryOp op_type {op} is not 0 to 19");
        }
        Ok(UnaryOpLayer { op })
    }
}

fn apply(op: i32, x: f32) -> f32 {
    match op {
        0 => x.abs(),
        1 => -x,
        2 => x.floor(),
        3 => x.ceil(),
        4 => x * x,
        5 => x.sqrt(),
        6 => 1.0 / x.sqrt(),
        7 => x.exp(),
        8 => x.ln(),
        9 => x.sin(),
        10 => x.cos(),
        11 => x.tan(),
        12 => x.asin(),
        13 => x.acos(),
        14 => x.atan(),
        15 => 1.0 / x,
        16 => x.tanh(),
        17 => x.log10(),
        18 => x.round_ties_even(),
        _ => x.trunc(),
    }
}

impl Layer for UnaryOpLayer {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut m = one(bottoms, "UnaryOp")?;
        m.int8 = false;
        let op = self.op;
        par::chunks_mut(&mut m.data, 16384, |_, c| c.iter_mut().for_each(|x| *x = apply(op, *x)));
        Ok(vec![m])
    }
}
