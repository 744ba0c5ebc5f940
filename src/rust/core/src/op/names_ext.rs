//! Names and parameters of the transformer, convolution, row and index ops
//! (the families in [`super::glu`], [`super::rope`], [`super::attn`],
//! [`super::conv`], [`super::rows`] and [`super::index`]).

use super::attn::Attn;
use super::conv::Conv;
use super::glu::{Glu, GluKind};
use super::index::IndexOp;
use super::rows::RowOp;
use super::{rope, Op, PoolOp};
use anyhow::{bail, ensure};

struct P<'a> {
    name: &'a str,
    p: &'a [f64],
}

impl P<'_> {
    fn need(&self, n: usize) -> crate::Result<()> {
        ensure!(self.p.len() >= n, "internal: {} needs {n} parameters, got {}", self.name, self.p.len());
        Ok(())
    }

    /// Parameter `i` (checked: a short vector is an error).
    fn at(&self, i: usize) -> crate::Result<f64> {
        self.p.get(i).copied().ok_or_else(|| anyhow::anyhow!("internal: {} needs parameter {}, got {}", self.name, i + 1, self.p.len()))
    }

    fn f(&self, i: usize) -> crate::Result<f32> {
        let v = self.at(i)?;
        ensure!(!v.is_nan(), "{}: parameter {} is NA", self.name, i + 1);
        Ok(v as f32)
    }

    /// A whole number that fits an i32.
    fn int(&self, i: usize) -> crate::Result<i32> {
        let v = self.at(i)?;
        ensure!(
            v.is_finite() && v.fract() == 0.0 && v.abs() <= i32::MAX as f64,
            "{}: the integer parameters must be whole numbers, not {v}",
            self.name
        );
        Ok(v as i32)
    }

    fn ints<const N: usize>(&self, from: usize) -> crate::Result<[i32; N]> {
        self.need(from + N)?;
        let mut out = [0; N];
        for (k, o) in out.iter_mut().enumerate() {
            *o = self.int(from + k)?;
        }
        Ok(out)
    }

}

fn pool_op(code: i32) -> crate::Result<PoolOp> {
    match code {
        0 => Ok(PoolOp::Max),
        1 => Ok(PoolOp::Avg),
        o => bail!("`op` must be GGML_OP_POOL_MAX (0) or GGML_OP_POOL_AVG (1), not {o}"),
    }
}

/// The op named `name` (ggml's name, without `ggml_`), or an error for an unknown name.
pub(super) fn op_from_name(name: &str, p: &[f64]) -> crate::Result<Op> {
    let q = P { name, p };
    Ok(match name {
        "glu" => {
            q.need(4)?;
            let kind = GluKind::from_code(q.int(0)? as i64)?;
            Op::Glu(Glu { kind, swapped: q.at(1)? != 0.0, alpha: q.f(2)?, limit: q.f(3)? })
        }
        "silu_back" => Op::SiluBack,
        "rope" | "rope_back" => {
            if p.len() >= 9 {
                for i in [0, 1, 2] {
                    q.int(i)?;
                }
            }
            if p.len() >= 13 {
                q.ints::<4>(9)?;
            }
            Op::Rope(rope::from_params(p, name == "rope")?)
        }
        "flash_attn_ext" => {
            q.need(3)?;
            Op::Attn(Attn::FlashExt { scale: q.f(0)?, max_bias: q.f(1)?, softcap: q.f(2)? })
        }
        "flash_attn_back" => {
            q.need(1)?;
            Op::Attn(Attn::FlashBack { masked: q.at(0)? != 0.0 })
        }
        "conv_transpose_1d" => {
            let [s0, p0, d0] = q.ints(0)?;
            Op::Conv(Conv::Transpose1d { s0, p0, d0 })
        }
        "conv_transpose_2d_p0" => {
            let [stride] = q.ints(0)?;
            Op::Conv(Conv::Transpose2d { stride })
        }
        "conv_2d_dw_direct" | "conv_2d_direct" => {
            let [s0, s1, p0, p1, d0, d1] = q.ints(0)?;
            if name == "conv_2d_direct" {
                Op::Conv(Conv::Direct2d { s0, s1, p0, p1, d0, d1 })
            } else {
                Op::Conv(Conv::Depthwise2d { s0, s1, p0, p1, d0, d1 })
            }
        }
        "pool_1d" => {
            let [op, k0, s0, p0] = q.ints(0)?;
            Op::Conv(Conv::Pool1d { op: pool_op(op)?, k0, s0, p0 })
        }
        "l2_norm" => {
            q.need(1)?;
            Op::Rows(RowOp::L2Norm { eps: q.f(0)? })
        }
        "group_norm" => {
            q.need(2)?;
            Op::Rows(RowOp::GroupNorm { groups: q.int(0)?, eps: q.f(1)? })
        }
        "rms_norm_back" => {
            q.need(1)?;
            Op::Rows(RowOp::RmsNormBack { eps: q.f(0)? })
        }
        "soft_max_ext_back" => {
            q.need(2)?;
            Op::Rows(RowOp::SoftMaxBack { scale: q.f(0)?, max_bias: q.f(1)? })
        }
        "argsort" => {
            let [order] = q.ints(0)?;
            ensure!(
                order == 0 || order == 1,
                "argsort: `order` must be GGML_SORT_ORDER_ASC (0) or GGML_SORT_ORDER_DESC (1), not {order}"
            );
            Op::Rows(RowOp::Argsort { desc: order == 1 })
        }
        "top_k" => {
            let [k] = q.ints(0)?;
            Op::Rows(RowOp::TopK { k })
        }
        "count_equal" => Op::Rows(RowOp::CountEqual),
        "roll" => Op::Index(IndexOp::Roll { shift: q.ints(0)? }),
        "pad_reflect_1d" => {
            let [p0, p1] = q.ints(0)?;
            Op::Index(IndexOp::PadReflect1d { p0, p1 })
        }
        "win_part" => {
            let [w] = q.ints(0)?;
            Op::Index(IndexOp::WinPart { w })
        }
        "win_unpart" => {
            let [w0, h0, w] = q.ints(0)?;
            Op::Index(IndexOp::WinUnpart { w0, h0, w })
        }
        "get_rel_pos" => {
            let [qh, kh] = q.ints(0)?;
            Op::Index(IndexOp::GetRelPos { qh, kh })
        }
        "add_rel_pos" => Op::Index(IndexOp::AddRelPos),
        "diag" => Op::Index(IndexOp::Diag),
        "diag_mask_zero" => {
            let [n_past] = q.ints(0)?;
            Op::Index(IndexOp::DiagMaskZero { n_past })
        }
        "get_rows_back" => Op::Index(IndexOp::GetRowsBack),
        "repeat_back" => Op::Index(IndexOp::RepeatBack),
        "arange" => {
            q.need(3)?;
            Op::Index(IndexOp::Arange { start: q.f(0)?, stop: q.f(1)?, step: q.f(2)? })
        }
        "timestep_embedding" => {
            let [dim, max_period] = q.ints(0)?;
            Op::Index(IndexOp::TimestepEmbedding { dim, max_period })
        }
        "mul_mat_id" => Op::MulMatId,
        "upscale_bilinear" | "upscale_bicubic" => {
            let [factor] = q.ints(0)?;
            Op::Index(IndexOp::Interpolate { factor, bicubic: name == "upscale_bicubic" })
        }
        other => bail!("unknown op '{other}'"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_parameters() {
        let op = op_from_name("glu", &[2.0, 1.0, 1.702, 7.0]).unwrap();
        assert!(matches!(op, Op::Glu(Glu { kind: GluKind::Swiglu, swapped: true, .. })));
        assert!(op_from_name("glu", &[9.0, 0.0, 0.0, 0.0]).is_err());
        let e = op_from_name("roll", &[1.5, 0.0, 0.0, 0.0]).unwrap_err().to_string();
        assert!(e.contains("whole numbers"), "{e}");
        assert!(op_from_name("argsort", &[2.0]).is_err());
        assert!(matches!(op_from_name("rope_back", &[8.0, 0.0, 0.0, 1e4, 1.0, 0.0, 1.0, 32.0, 1.0]).unwrap(),
            Op::Rope(r) if !r.forward));
        assert!(op_from_name("nope", &[]).unwrap_err().to_string().contains("unknown op"));
    }
}
