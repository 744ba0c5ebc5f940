//! Cast: converts between storage types (0=type_from, 1=type_to: 1 fp32,
//! 2 fp16, 3 int8, 4 bf16). Values stay f32 here, so a cast to fp16 rounds
//! them to fp16 (nearest, ties to even), to bf16 rounds them to bf16 (the
//! same way), and a cast back to fp32 keeps them.

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Cast {
    from: i32,
    to: i32,
}

impl Cast {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Cast> {
        let (from, to) = (pd.int(0, 0), pd.int(1, 0));
        if !(0..=4).contains(&from) || !(0..=4).contains(&to) {
            ncnn_bail!("Cast types must be 0 (auto) to 4 (bf16), got type_from {from} and type_to {to}");
        }
        if (from == 3) != (to == 3) && from != 0 && to != 0 {
            ncnn_bail!("Cast between int8 and a floating point type is not supported (type_from {from}, type_to {to})");
        }
        Ok(Cast { from, to })
    }
}

impl Layer for Cast {
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let mut x = one(bottoms, "Cast")?;
        if self.from == self.to {
            return Ok(vec![x]);
        }
        match self.to {
            2 => x.data.iter_mut().for_each(|v| *v = half::f16::from_f32(*v).to_f32()),
            4 => x.data.iter_mut().for_each(|v| *v = half::bf16::from_f32(*v).to_f32()),
            _ => {}
        }
        Ok(vec![x])
    }
}
