//! Ops by ggml's names: the function name of an op for messages
//! ("ggml_mul_mat"), and an op from its name and numeric parameters (as the
//! R API passes them).

use super::{Op, PoolOp, UnaryOp};
use anyhow::{bail, ensure};

/// ggml's function name of an op, for messages ("ggml_mul_mat").
pub fn fn_name(op: &Op) -> String {
    match op {
        Op::Unary(u) => format!("ggml_{}", u.name()),
        Op::SoftMax { .. } => "ggml_soft_max".into(),
        Op::Glu(g) => format!("ggml_{}", g.kind.name()),
        _ => format!("ggml_{}", op.name().to_lowercase()),
    }
}

/// An op from its ggml name and numeric parameters (as passed from R).
pub fn op_from_name(name: &str, p: &[f64]) -> crate::Result<Op> {
    let need = |n: usize| -> crate::Result<()> {
        ensure!(p.len() >= n, "internal: {name} needs {n} parameters, got {}", p.len());
        Ok(())
    };
    // Checked access: a short parameter vector is an error, never a panic.
    let at = |i: usize| -> crate::Result<f64> {
        p.get(i).copied().ok_or_else(|| anyhow::anyhow!("internal: {name} needs parameter {}, got {}", i + 1, p.len()))
    };
    let f = |i: usize| -> crate::Result<f32> { Ok(at(i)? as f32) };
    let int = |i: usize| -> crate::Result<i32> { Ok(at(i)? as i32) };
    if let Some(u) = UnaryOp::ALL.iter().find(|u| u.name() == name) {
        return Ok(Op::Unary(*u));
    }
    Ok(match name {
        "dup" => Op::Dup,
        "add" => Op::Add,
        "sub" => Op::Sub,
        "mul" => Op::Mul,
        "div" => Op::Div,
        "add1" => Op::Add1,
        "mul_mat" => Op::MulMat,
        "out_prod" => Op::OutProd,
        "sum" => Op::Sum,
        "sum_rows" => Op::SumRows,
        "mean" => Op::Mean,
        "argmax" => Op::Argmax,
        "cont" => Op::Cont,
        "repeat" => Op::Repeat,
        "get_rows" => Op::GetRows,
        "scale" => {
            need(1)?;
            Op::Scale { s: at(0)? }
        }
        "leaky_relu" => {
            need(1)?;
            Op::LeakyRelu { slope: f(0)? }
        }
        "clamp" => {
            need(2)?;
            Op::Clamp { min: at(0)?, max: at(1)? }
        }
        "soft_max" => {
            need(2)?;
            Op::SoftMax { scale: f(0)?, max_bias: f(1)? }
        }
        "norm" => {
            need(1)?;
            Op::Norm { eps: f(0)? }
        }
        "rms_norm" => {
            need(1)?;
            Op::RmsNorm { eps: f(0)? }
        }
        "concat" => {
            need(1)?;
            ensure!((0.0..5.0).contains(&at(0)?) && at(0)?.fract() == 0.0, "concat: `dim` must be 0, 1, 2, 3 or 4, not {}", at(0)?);
            Op::Concat { dim: at(0)? as usize }
        }
        "diag_mask_inf" => {
            need(1)?;
            Op::DiagMaskInf { n_past: int(0)? }
        }
        "im2col" => {
            need(7)?;
            Op::Im2Col { s0: int(0)?, s1: int(1)?, p0: int(2)?, p1: int(3)?, d0: int(4)?, d1: int(5)?, is_2d: at(6)? != 0.0 }
        }
        "pool_2d" => {
            need(7)?;
            let op = match int(0)? {
                0 => PoolOp::Max,
                1 => PoolOp::Avg,
                o => bail!("pool_2d: `op` must be GGML_OP_POOL_MAX (0) or GGML_OP_POOL_AVG (1), not {o}"),
            };
            Op::Pool2d { op, k0: int(1)?, k1: int(2)?, s0: int(3)?, s1: int(4)?, p0: f(5)?, p1: f(6)? }
        }
        "pad" => {
            need(4)?;
            Op::Pad { p: [int(0)?, int(1)?, int(2)?, int(3)?] }
        }
        "upscale" => {
            need(1)?;
            Op::Upscale { factor: int(0)? }
        }
        other => return super::names_ext::op_from_name(other, p),
    })
}
