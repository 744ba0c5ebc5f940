//! ggml's numeric codes of ops and unary ops, their names and symbols, and
//! the parameter block (`op_params`) ggml keeps on every tensor.
//!
//! Codes follow the ggml the R API follows (96 ops, 22 unary ops); an engine
//! op maps to its code through its name, so ops added later find their code
//! as long as they carry ggml's name.

use super::{Op, PoolOp, UnaryOp};

/// ggml's op names, indexed by op code.
pub const OP_NAMES: [&str; 96] = [
    "NONE", "DUP", "ADD", "ADD_ID", "ADD1", "ACC", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN", "COS",
    "SUM", "SUM_ROWS", "CUMSUM", "MEAN", "ARGMAX", "COUNT_EQUAL", "REPEAT", "REPEAT_BACK", "CONCAT",
    "SILU_BACK", "NORM", "RMS_NORM", "RMS_NORM_BACK", "GROUP_NORM", "L2_NORM", "MUL_MAT", "MUL_MAT_ID",
    "OUT_PROD", "SCALE", "SET", "CPY", "CONT", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "GET_ROWS",
    "GET_ROWS_BACK", "SET_ROWS", "DIAG", "DIAG_MASK_INF", "DIAG_MASK_ZERO", "SOFT_MAX", "SOFT_MAX_BACK",
    "ROPE", "ROPE_BACK", "CLAMP", "CONV_TRANSPOSE_1D", "IM2COL", "IM2COL_BACK", "IM2COL_3D", "CONV_2D",
    "CONV_3D", "CONV_2D_DW", "CONV_TRANSPOSE_2D", "POOL_1D", "POOL_2D", "POOL_2D_BACK", "UPSCALE", "PAD",
    "PAD_REFLECT_1D", "ROLL", "ARANGE", "TIMESTEP_EMBEDDING", "ARGSORT", "TOP_K", "LEAKY_RELU", "TRI",
    "FILL", "FLASH_ATTN_EXT", "FLASH_ATTN_BACK", "SSM_CONV", "SSM_SCAN", "WIN_PART", "WIN_UNPART",
    "GET_REL_POS", "ADD_REL_POS", "RWKV_WKV6", "GATED_LINEAR_ATTN", "RWKV_WKV7", "SOLVE_TRI", "UNARY",
    "MAP_CUSTOM1", "MAP_CUSTOM2", "MAP_CUSTOM3", "CUSTOM", "CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_LOSS_BACK",
    "OPT_STEP_ADAMW", "OPT_STEP_SGD", "GLU", "SCATTER_ELEMENTS",
];

/// ggml's op symbols (as its graph printer shows them), indexed by op code.
pub const OP_SYMBOLS: [&str; 96] = [
    "none", "x", "x+y", "x[i]+y", "x+y", "view(x,nb,offset)+=y->x", "x-y", "x*y", "x/y", "x^2", "√x",
    "log(x)", "sin(x)", "cos(x)", "Σx", "Σx_k", "cumsum(x)", "Σx/n", "argmax(x)", "count_equal(x)",
    "repeat(x)", "repeat_back(x)", "concat(x, y)", "silu_back(x)", "norm(x)", "rms_norm(x)",
    "rms_norm_back(x)", "group_norm(x)", "l2_norm(x)", "X*Y", "X[i]*Y", "X*Y", "x*v", "y-\\>view(x)",
    "x-\\>y", "cont(x)", "reshape(x)", "view(x)", "permute(x)", "transpose(x)", "get_rows(x)",
    "get_rows_back(x)", "set_rows(x)", "diag(x)", "diag_mask_inf(x)", "diag_mask_zero(x)", "soft_max(x)",
    "soft_max_back(x)", "rope(x)", "rope_back(x)", "clamp(x)", "conv_transpose_1d(x)", "im2col(x)",
    "im2col_back(x)", "im2col_3d(x)", "conv_2d(x)", "conv_3d(x)", "conv_2d_dw(x)", "conv_transpose_2d(x)",
    "pool_1d(x)", "pool_2d(x)", "pool_2d_back(x)", "upscale(x)", "pad(x)", "pad_reflect_1d(x)", "roll(x)",
    "arange(start, stop, step)", "timestep_embedding(timesteps, dim, max_period)", "argsort(x)", "top_k(x)",
    "leaky_relu(x)", "tri(x)", "fill(x, c)", "flash_attn_ext(x)", "flash_attn_back(x)", "ssm_conv(x)",
    "ssm_scan(x)", "win_part(x)", "win_unpart(x)", "get_rel_pos(x)", "add_rel_pos(x)",
    "rwkv_wkv6(k, v, r, tf, td, s)", "gated_linear_attn(k, v, q, gate, s)", "rwkv_wkv7(r, w, k, v, a, b, s)",
    "A X = B, A triangular, solve X", "unary(x)", "map_custom(x)", "map_custom(x,y)", "map_custom(x,y,z)",
    "custom(x)", "cross_entropy_loss(x,y)", "cross_entropy_loss_back(x,y)", "adamw(x)", "sgd(x)", "glu(x)",
    "scatter_elements(x)",
];

/// ggml's unary op names, indexed by unary op code.
pub const UNARY_NAMES: [&str; 22] = [
    "ABS", "SGN", "NEG", "STEP", "TANH", "ELU", "RELU", "SIGMOID", "GELU", "GELU_QUICK", "SILU", "HARDSWISH",
    "HARDSIGMOID", "EXP", "EXPM1", "SOFTPLUS", "GELU_ERF", "XIELU", "FLOOR", "CEIL", "ROUND", "TRUNC",
];

/// Bytes of a tensor's parameter block (ggml's GGML_MAX_OP_PARAMS).
pub const OP_PARAMS_BYTES: usize = 64;

fn code_of(name: &str) -> Option<u32> {
    OP_NAMES.iter().position(|n| *n == name).map(|i| i as u32)
}

/// The unary ops that ggml has as ops of their own (SQR, SQRT, LOG, SIN, COS).
fn own_op(u: UnaryOp) -> Option<&'static str> {
    match u {
        UnaryOp::Sqr => Some("SQR"),
        UnaryOp::Sqrt => Some("SQRT"),
        UnaryOp::Log => Some("LOG"),
        UnaryOp::Sin => Some("SIN"),
        UnaryOp::Cos => Some("COS"),
        _ => None,
    }
}

/// ggml's code of an engine op (ops without a ggml counterpart have none).
pub fn op_code(op: &Op) -> Option<u32> {
    match op {
        Op::Unary(u) => code_of(own_op(*u).unwrap_or("UNARY")),
        other => code_of(other.name()),
    }
}

/// ggml's unary op code of an engine unary op, for those ggml calls unary.
pub fn unary_code(u: UnaryOp) -> Option<u32> {
    if own_op(u).is_some() {
        return None;
    }
    let name = u.name().to_uppercase();
    UNARY_NAMES.iter().position(|n| *n == name).map(|i| i as u32)
}

/// The op name ggml's `ggml_op_desc()` gives a node: the unary op's name
/// for unary ops, else the op's name.
pub fn op_desc(op: &Op) -> String {
    match op {
        Op::Unary(u) => match own_op(*u) {
            Some(n) => n.to_string(),
            None => u.name().to_uppercase(),
        },
        other => other.name().to_string(),
    }
}

/// Whether ggml's graph allocator may compute op `code` in the memory of
/// one of its sources (ggml's `ggml_op_can_inplace`).
pub fn can_inplace(code: u32) -> bool {
    matches!(
        OP_NAMES.get(code as usize).copied(),
        Some(
            "SCALE" | "DIAG_MASK_ZERO" | "DIAG_MASK_INF" | "ADD" | "ADD_ID" | "ADD1" | "SUB" | "MUL" | "DIV"
                | "SQR" | "SQRT" | "LOG" | "UNARY" | "ROPE" | "ROPE_BACK" | "SILU_BACK" | "RMS_NORM"
                | "RMS_NORM_BACK" | "SOFT_MAX" | "SOFT_MAX_BACK"
        )
    )
}

/// Whether every result element of `op` depends only on the source
/// element at the same index, so the result may overwrite its first
/// source while it is computed (on every backend).
pub fn elementwise_in_place(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Scale { .. }
            | Op::LeakyRelu { .. }
            | Op::Clamp { .. }
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Add1
    )
}

/// The parameter block ggml stores for `op`: its numeric parameters as
/// 32-bit values in ggml's order (zeros for ops without parameters).
pub fn op_params(op: &Op) -> [u8; OP_PARAMS_BYTES] {
    let mut p = [0u8; OP_PARAMS_BYTES];
    // The slots below are literals under OP_PARAMS_BYTES / 4; checked access
    // all the same, so a slot past the block is dropped, never a panic.
    let mut put = |slot: usize, bytes: [u8; 4]| {
        if let Some(d) = p.get_mut(4 * slot..4 * slot + 4) {
            d.copy_from_slice(&bytes);
        }
    };
    match op {
        Op::Unary(u) => {
            if let Some(c) = unary_code(*u) {
                put(0, (c as i32).to_ne_bytes());
            }
        }
        Op::Scale { s } => {
            put(0, (*s as f32).to_ne_bytes());
            put(1, 0f32.to_ne_bytes());
        }
        Op::LeakyRelu { slope } => put(0, slope.to_ne_bytes()),
        Op::Clamp { min, max } => {
            put(0, (*min as f32).to_ne_bytes());
            put(1, (*max as f32).to_ne_bytes());
        }
        Op::SoftMax { scale, max_bias } => {
            put(0, scale.to_ne_bytes());
            put(1, max_bias.to_ne_bytes());
        }
        Op::Norm { eps } | Op::RmsNorm { eps } => put(0, eps.to_ne_bytes()),
        Op::Concat { dim } => put(0, (*dim as i32).to_ne_bytes()),
        Op::DiagMaskInf { n_past } => put(0, n_past.to_ne_bytes()),
        Op::Permute { axes } => {
            for (i, a) in axes.iter().enumerate() {
                put(i, (*a as i32).to_ne_bytes());
            }
        }
        Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d } => {
            for (i, v) in [*s0, *s1, *p0, *p1, *d0, *d1, *is_2d as i32].iter().enumerate() {
                put(i, v.to_ne_bytes());
            }
        }
        Op::Pool2d { op, k0, k1, s0, s1, p0, p1 } => {
            let code = match op {
                PoolOp::Max => 0i32,
                PoolOp::Avg => 1,
            };
            for (i, v) in [code, *k0, *k1, *s0, *s1].iter().enumerate() {
                put(i, v.to_ne_bytes());
            }
            put(5, p0.to_ne_bytes());
            put(6, p1.to_ne_bytes());
        }
        Op::Pad { p: pads } => {
            // ggml's order: left and right padding of each dimension.
            for (d, v) in pads.iter().enumerate() {
                put(2 * d + 1, v.to_ne_bytes());
            }
        }
        Op::Upscale { .. } => put(0, 0i32.to_ne_bytes()),
        _ => {}
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_ggml() {
        assert_eq!(op_code(&Op::None), Some(0));
        assert_eq!(op_code(&Op::Add), Some(2));
        assert_eq!(op_code(&Op::MulMat), Some(29));
        assert_eq!(op_code(&Op::Unary(UnaryOp::Relu)), Some(85));
        assert_eq!(op_code(&Op::Unary(UnaryOp::Sqr)), Some(9));
        assert_eq!(OP_NAMES[95], "SCATTER_ELEMENTS");
        assert_eq!(unary_code(UnaryOp::Relu), Some(6));
        assert_eq!(unary_code(UnaryOp::Hardsigmoid), Some(12));
        assert_eq!(unary_code(UnaryOp::Sqrt), None);
        assert_eq!(op_desc(&Op::Unary(UnaryOp::Gelu)), "GELU");
        assert_eq!(op_desc(&Op::Unary(UnaryOp::Log)), "LOG");
        assert!(can_inplace(2) && !can_inplace(0) && !can_inplace(29) && !can_inplace(999));
        for u in UnaryOp::ALL {
            assert!(op_code(&Op::Unary(u)).is_some(), "{u:?}");
            assert!(own_op(u).is_some() || unary_code(u).is_some(), "{u:?}");
        }
        let p = op_params(&Op::Clamp { min: -1.5, max: 2.0 });
        assert_eq!(f32::from_ne_bytes(p[4..8].try_into().unwrap()), 2.0);
        let p = op_params(&Op::Unary(UnaryOp::Silu));
        assert_eq!(i32::from_ne_bytes(p[0..4].try_into().unwrap()), 10);
    }
}
