//! InnerProduct: y = W x + b with fused activation. The input is flattened
//! channel-major; a 2-d input whose rows match the weights is treated as a batch.

use super::kernels::conv::{finish, gemm};
use crate::ncnn::layer::{one, Activation};
use crate::ncnn::{Layer, Mat, ModelBin, Opt, ParamDict};
use crate::ncnn_bail;

pub struct InnerProduct {
    num_output: usize,
    bias_term: bool,
    weight_data_size: usize,
    act: Activation,
    weight: Vec<f32>,
    bias: Vec<f32>,
}

impl InnerProduct {
    pub fn new(pd: &ParamDict) -> anyhow::Result<InnerProduct> {
        let n = pd.int(0, 0);
        let wds = pd.int(2, 0);
        if n <= 0 || wds <= 0 || wds % n != 0 {
            ncnn_bail!("num_output ({n}) and weight_data_size ({wds}) must be positive, the second a multiple of the first");
        }
        if pd.int(8, 0) != 0 {
            ncnn_bail!("int8 inner product (int8_scale_term) is not supported yet; export the model with fp32 or fp16 weights");
        }
        Ok(InnerProduct {
            num_output: n as usize,
            bias_term: pd.int(1, 0) != 0,
            weight_data_size: wds as usize,
            act: Activation::from_params(pd, 9, 10)?,
            weight: vec![],
            bias: vec![],
        })
    }
}

impl Layer for InnerProduct {
    fn load_model(&mut self, mb: &mut ModelBin) -> anyhow::Result<()> {
        self.weight = mb.tagged(self.weight_data_size, "inner product weights")?;
        self.bias = if self.bias_term {
            mb.raw(self.num_output, "inner product bias")?
        } else {
            vec![]
        };
        Ok(())
    }

    fn forward(&self, bottoms: Vec<Mat>, _ntop: usize, _opt: &Opt) -> anyhow::Result<Vec<Mat>> {
        let x = one(bottoms, "InnerProduct")?;
        let k = self.weight_data_size / self.num_output;
        if x.dims == 2 && x.w == k && x.h > 1 {
            // batch of rows: out[h][n] = x[h][k] * W^T
            let mut out = Mat::new_2d(self.num_output, x.h);
            let mut wt = vec![0.0f32; k * self.num_output];
            for o in 0..self.num_output {
                for i in 0..k {
                    wt[i * self.num_output + o] = self.weight[o * k + i];
                }
            }
            gemm(&x.data, &wt, &mut out.data, x.h, k, self.num_output);
            for row in out.data.chunks_mut(self.num_output) {
                for (v, b) in row
                    .iter_mut()
                    .zip(self.bias.iter().chain(std::iter::repeat(&0.0)))
                {
                    *v = self.act.apply1(*v + b);
                }
            }
            return Ok(vec![out]);
        }
        if x.total() != k {
            ncnn_bail!(
                "expects {k} input values, got a blob of shape {} ({} values)",
                x.describe(),
                x.total()
            );
        }
        let mut out = Mat::new_1d(self.num_output);
        gemm(&self.weight, &x.data, &mut out.data, self.num_output, k, 1);
        finish(&mut out.data, 1, &self.bias, &self.act);
        Ok(vec![out])
    }
}
