//! The encoder of products and row lookups whose first source holds
//! quantized weights (`shaders/matmul_q.wgsl`, one variant per type): the
//! weights are described in bytes and dequantized in the shader. The IQ
//! types of lattice grids read their grid from a table bound as the third
//! source (see [`lattice_table`]).

use super::context::VkContext;
use super::encode::{finish, groups_1d, need_srcs, new_enc, Dispatch, VkNode};
use super::shaders::Shader;
use super::support;
use crate::base::dtype::DType;
use crate::base::quant::grids;
use crate::base::quant::QType;
use crate::op::Op;
use std::sync::OnceLock;

/// The grid of a lattice IQ type as the shader reads it (binding 4): 64-bit
/// entries as two words (low word first), 32-bit entries as one; None for
/// the other types. The sign patterns of IQ2/IQ3 are computed in the shader.
// BOUNDS-FN: T has 5 slots, indexed by the constants 0 to 4 of the match.
pub(super) fn lattice_table(q: QType) -> Option<&'static [u32]> {
    fn words64(g: &[u64]) -> Vec<u32> {
        g.iter().flat_map(|&e| [e as u32, (e >> 32) as u32]).collect()
    }
    static T: [OnceLock<Vec<u32>>; 5] = [const { OnceLock::new() }; 5];
    let (slot, make): (usize, fn() -> Vec<u32>) = match q {
        QType::IQ2_XXS => (0, || words64(&grids::IQ2XXS_GRID)),
        QType::IQ2_XS => (1, || words64(&grids::IQ2XS_GRID)),
        QType::IQ2_S => (2, || words64(&grids::IQ2S_GRID)),
        QType::IQ1_S | QType::IQ1_M => (3, || words64(&grids::IQ1S_GRID)),
        QType::IQ3_XXS => return Some(&grids::IQ3XXS_GRID),
        QType::IQ3_S => (4, || grids::IQ3S_GRID.to_vec()),
        _ => return None,
    };
    Some(T[slot].get_or_init(make))
}

/// The dispatch of a mul_mat or get_rows node with `q` weights, or None when
/// it has nothing to compute.
// BOUNDS-FN: srcs 0 and 1 after need_srcs(node, 2); `params` [u32; PARAM_WORDS] at constant words below 64; ne/nb [usize; 5] and `g` [u32; 3] at constants.
pub(super) fn encode_quant(ctx: &VkContext, node: &VkNode, q: QType) -> crate::Result<Option<Dispatch>> {
    let op = node.op.name();
    let Some(mut e) = new_enc(ctx, node)? else { return Ok(None) };
    anyhow::ensure!(
        support::has_qtype(q) && matches!(node.op, Op::MulMat | Op::GetRows),
        "{op}: the Vulkan backend has no kernel for {} weights here",
        q.name()
    );
    need_srcs(node, 2)?;
    let (w, b, d) = (&node.srcs[0].layout, &node.srcs[1].layout, &node.dst.layout);
    let bs = q.block_size();
    anyhow::ensure!(
        w.ne[0] % bs == 0 && w.nb[0] == q.type_size() && w.nb[1] >= w.ne[0] / bs * q.type_size(),
        "{op}: the {} weights' rows must be whole, contiguous blocks of {bs} values",
        q.name()
    );
    anyhow::ensure!(b.dtype.quant().is_none() && d.dtype.quant().is_none(), "{op}: only the weights may be quantized");
    e.tensor(0, &node.srcs[0], "weights")?;
    e.params[63] = bs as u32;
    let (sub, groups) = if matches!(node.op, Op::MulMat) {
        anyhow::ensure!(w.ne[0] == b.ne[0], "MUL_MAT: a has {} columns but b has {}", w.ne[0], b.ne[0]);
        let (m, n) = (w.ne[1], b.ne[1]);
        anyhow::ensure!(d.ne[0] == m && d.ne[1] == n, "MUL_MAT: the result is {:?} but the sources give {m} x {n}", d.ne);
        for (t, l) in [("a", w), ("b", b)] {
            anyhow::ensure!(
                (2..4).all(|i| l.ne[i] > 0 && d.ne[i] % l.ne[i] == 0),
                "MUL_MAT: {t}'s batch dims {:?} do not divide the result's {:?}",
                &l.ne[2..],
                &d.ne[2..]
            );
        }
        e.tensor(1, &node.srcs[1], "b")?;
        let eb = b.dtype.size();
        for (word, v) in [(56, w.nb[0]), (57, w.nb[1]), (58, b.nb[0] / eb), (59, b.nb[1] / eb), (60, w.ne[0]), (61, m), (62, n)] {
            e.params[word] = u32::try_from(v)?;
        }
        // One invocation per row of the weights and four columns of b.
        let mut g = groups_1d(ctx, m * n.div_ceil(4), 256);
        g[2] = (d.ne[2] * d.ne[3]).clamp(1, ctx.max_groups(2)) as u32;
        (0, g)
    } else {
        anyhow::ensure!(b.dtype == DType::I32, "GET_ROWS: the row indices must be i32");
        anyhow::ensure!(d.ne[0] == w.ne[0], "GET_ROWS: the result's rows have {} values, the weights' {}", d.ne[0], w.ne[0]);
        e.tensor(1, &node.srcs[1], "row indices")?;
        (1, groups_1d(ctx, d.nelements(), 256))
    };
    let mut d = finish(e, node, Shader::MatmulQ, q.code() as u32, sub, groups);
    d.table = lattice_table(q);
    Ok(Some(d))
}
