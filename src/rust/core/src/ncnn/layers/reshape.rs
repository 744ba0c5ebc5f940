//! Reshape: new extents w, h, d, c (-233 drops an axis, 0 copies the
//! input's extent, -1 infers it); the data order is unchanged.

use crate::ncnn::layer::one;
use crate::ncnn::{Layer, Mat, Opt, ParamDict};
use crate::ncnn_bail;

pub struct Reshape {
    w: i32,
    h: i32,
    d: i32,
    c: i32,
    ndim: usize,
}

impl Reshape {
    pub fn new(pd: &ParamDict) -> anyhow::Result<Reshape> {
        let (w, h, d, c) = (
            pd.int(0, -233),
            pd.int(1, -233),
            pd.int(11, -233),
            pd.int(2, -233),
        );
        if pd.int(3, 0) != 0 {
            ncnn_bail!("Reshape with permute=1 is not supported; regenerate the param with a current converter");
        }
        let ndim = if h == -233 {
            1
        } else if d == -233 && c == -233 {
            2
        } else if d == -233 {
            3
        } else {
            4
        };
        Ok(Reshape { w, h, d, c, ndim })
    }
}

impl Layer for Reshape {
    // BOUNDS-FN: src and want are [_; 4] indexed by order's entries (below 4); shape
    // has order.len() entries and infer is one of its positions k.
    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "Reshape")?;
        let total = x.total();
        let src = [x.w, x.h, x.d, x.c];
        let want = [self.w, self.h, self.d, self.c];
        let order: &[usize] = match self.ndim {
            1 => &[0],
            2 => &[0, 1],
            3 => &[0, 1, 3],
            _ => &[0, 1, 2, 3],
        };
        let mut shape = Vec::new();
        let mut infer = None;
        for (k, &i) in order.iter().enumerate() {
            let v = want[i];
            let e = match v {
                0 => src[i],
                -1 => {
                    if infer.is_some() {
                        ncnn_bail!("Reshape can infer (-1) only one extent");
                    }
                    infer = Some(k);
                    1
                }
                v if v > 0 => v as usize,
                v => ncnn_bail!("Reshape extent {v} is not positive, 0, -1 or -233"),
            };
            shape.push(e);
        }
        let known: usize = shape.iter().product();
        if let Some(k) = infer {
            if known == 0 || total % known != 0 {
                ncnn_bail!(
                    "cannot reshape {} ({} values) to {:?}",
                    x.describe(),
                    total,
                    want
                );
            }
            shape[k] = total / known;
        }
        if shape.iter().product::<usize>() != total {
            ncnn_bail!(
                "cannot reshape {} ({total} values) to extents {:?}",
                x.describe(),
                shape
            );
        }
        Ok(vec![Mat::from_shape(&shape, x.data)?])
    }
}
