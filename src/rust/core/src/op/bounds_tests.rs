//! Hostile input for the op rules: every op name with short, empty and
//! extreme parameter vectors, and every op with too few, too many and
//! degenerate sources, gives a value or an error, never a panic.

use super::extended::ScanFn;
use super::names::op_from_name;
use super::shape::infer;
use super::Op;
use crate::base::dtype::DType;
use crate::layout::Layout;

const NAMES: [&str; 60] = [
    "dup", "add", "sub", "mul", "div", "add1", "mul_mat", "out_prod", "sum", "sum_rows", "mean", "argmax",
    "cont", "repeat", "get_rows", "scale", "leaky_relu", "clamp", "soft_max", "norm", "rms_norm", "concat",
    "diag_mask_inf", "im2col", "pool_2d", "pad", "upscale", "glu", "silu_back", "rope", "rope_back",
    "flash_attn_ext", "flash_attn_back", "conv_transpose_1d", "conv_transpose_2d_p0", "conv_2d_direct",
    "conv_2d_dw_direct", "pool_1d", "l2_norm", "group_norm", "rms_norm_back", "soft_max_ext_back", "argsort",
    "top_k", "count_equal", "roll", "pad_reflect_1d", "win_part", "win_unpart", "get_rel_pos", "add_rel_pos",
    "diag", "diag_mask_zero", "get_rows_back", "repeat_back", "arange", "timestep_embedding", "mul_mat_id",
    "upscale_bilinear", "upscale_bicubic",
];

/// Parameter vectors: empty, each length up to 13 of one hostile value.
fn params() -> Vec<Vec<f64>> {
    let mut out = vec![vec![]];
    for v in [0.0, 1.0, -1.0, 2.0, f64::NAN, 2147483647.0, -2147483648.0, 1e300] {
        for n in [1, 2, 3, 4, 6, 7, 9, 12, 13, 20] {
            out.push(vec![v; n]);
        }
    }
    out
}

fn layouts() -> Vec<Layout> {
    vec![
        Layout::contiguous(DType::F32, [0usize, 0, 0, 0]),
        Layout::contiguous(DType::F32, [1usize, 1, 1, 1]),
        Layout::contiguous(DType::F32, [4usize, 3, 2, 1]),
        Layout::contiguous(DType::I32, [4usize, 1, 1, 1]),
        Layout::contiguous(DType::F32, [2usize, 2, 1, 1, 3]),
    ]
}

/// Every op on every list of up to four of `ls` (errors are fine).
fn shape_all(op: &Op, ls: &[Layout]) {
    let mut srcs: Vec<Vec<Layout>> = vec![vec![]];
    for _ in 0..4 {
        let longer: Vec<Vec<Layout>> = srcs
            .iter()
            .filter(|s| s.len() == srcs.last().map_or(0, Vec::len))
            .flat_map(|s| ls.iter().map(move |l| [s.as_slice(), &[*l]].concat()))
            .collect();
        srcs.extend(longer);
    }
    for s in &srcs {
        let _ = infer(op, s);
    }
}

#[test]
fn hostile_op_parameters_and_sources_never_panic() {
    let ls = layouts();
    let mut built = 0;
    for name in NAMES {
        for p in params() {
            if let Ok(op) = op_from_name(name, &p) {
                built += 1;
                shape_all(&op, &ls);
            }
        }
    }
    assert!(built > 300, "only {built} ops built");
    for op in [
        Op::None,
        Op::Concat { dim: 7 },
        Op::GatherAxis { dim: 9 },
        Op::PadEx { lo: [1, 0, 0, 0], hi: [0, 9, 0, 0], mode: super::extended::PadMode::Reflect, value: 0.0 },
    ] {
        shape_all(&op, &ls);
    }
    assert!(infer(&Op::None, &[]).is_err(), "a leaf has no rule");
    assert!(op_from_name("scale", &[]).unwrap_err().to_string().contains("parameter"));
}

#[test]
fn a_scan_into_a_shorter_row_stops_at_its_end() {
    let mut out = [0f32; 2];
    ScanFn::CumSum { exclusive: false, reverse: true }.apply(&[1.0, 2.0, 3.0], &mut out);
    assert_eq!(out, [3.0, 2.0]);
    ScanFn::CumProd { exclusive: true, reverse: false }.apply(&[2.0, 3.0, 4.0], &mut out);
    assert_eq!(out, [1.0, 2.0]);
}
