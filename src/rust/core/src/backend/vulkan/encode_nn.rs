//! Encoders of the transformer, convolution, row and index ops: which
//! shader, its parameter words (documented at the top of each shader file)
//! and the workgroups. `set` is two copies (of a into the result, then of b
//! into the view of it), so it is encoded as two dispatches.

use super::context::VkContext;
use super::encode::{encode_one, finish, groups_1d, need_srcs, new_enc, Dispatch, Enc, VkNode, VkTensorRef, OPW};
use super::shaders::Shader;
use crate::layout::Layout;
use crate::op::attn::{back_offsets, Attn};
use crate::op::conv::Conv;
use crate::op::index::IndexOp;
use crate::op::rope::Pairing;
use crate::op::rows::{group_size, RowOp};
use crate::op::{Op, PoolOp};

static CPY: Op = Op::Cpy;

/// The dispatches of one node (none when it has nothing to compute), in order.
// BOUNDS-FN: `params` is [u32; PARAM_WORDS], read at the constants 48 and 49.
pub(crate) fn encode_node(ctx: &VkContext, node: &VkNode) -> crate::Result<Vec<Dispatch>> {
    let op = node.op;
    if let Some(q) = node.srcs.first().and_then(|s| s.layout.dtype.quant()) {
        return Ok(super::encode_q::encode_quant(ctx, node, q)?.into_iter().collect());
    }
    let ours = matches!(
        op,
        Op::Glu(_) | Op::SiluBack | Op::Rope(_) | Op::Attn(_) | Op::Conv(_) | Op::Rows(_) | Op::Index(_) | Op::MulMatId
    );
    if !ours {
        return Ok(encode_one(ctx, node)?.into_iter().collect());
    }
    if let Op::Index(IndexOp::Set { nb, offset }) = op {
        return encode_set(ctx, node, *nb, *offset);
    }
    let Some(mut e) = new_enc(ctx, node)? else { return Ok(Vec::new()) };
    let (shader, groups, sub) = encode(&mut e, node, op)?;
    let code = e.params[OPW];
    // the GLU kinds are the eltwise variants' sub-operations
    let sub = if shader == Shader::Eltwise && matches!(code, 14 | 15) { e.params[49] } else { sub };
    Ok(vec![finish(e, node, shader, code, sub, groups)])
}

/// set: a copied into the result (unless in place), then b into the view of it.
// BOUNDS-FN: srcs 0 and 1 after need_srcs(node, 2); `nb` is [usize; 3] and ne [usize; 5], indexed by constants.
fn encode_set(ctx: &VkContext, node: &VkNode, nb: [usize; 3], offset: usize) -> crate::Result<Vec<Dispatch>> {
    need_srcs(node, 2)?;
    let (a, b, dst) = (&node.srcs[0], &node.srcs[1], &node.dst);
    let mut out = Vec::new();
    let in_place = std::ptr::eq(a.buf, dst.buf) && a.offset == dst.offset && a.layout == dst.layout;
    if !in_place {
        out.extend(encode_one(ctx, &VkNode { op: &CPY, srcs: vec![*a], dst: *dst })?);
    }
    let es = dst.layout.dtype.size();
    anyhow::ensure!(dst.layout.is_contiguous(), "SET: the result must be contiguous on Vulkan");
    let view = Layout { dtype: dst.layout.dtype, ne: b.layout.ne, nb: [es, nb[0] * es, nb[1] * es, nb[2] * es, nb[2] * es * b.layout.ne[3]] };
    let target = VkTensorRef { buf: dst.buf, offset: dst.offset + offset * es, layout: view };
    out.extend(encode_one(ctx, &VkNode { op: &CPY, srcs: vec![*b], dst: target })?);
    Ok(out)
}

// BOUNDS-FN: need_srcs(node, src + 1) just before the index.
fn bind(e: &mut Enc, node: &VkNode, pairs: &[(usize, usize, &str)]) -> crate::Result<()> {
    for &(src, slot, role) in pairs {
        need_srcs(node, src + 1)?;
        e.tensor(slot, &node.srcs[src], role)?;
    }
    Ok(())
}

/// Fills `e` for `op`; returns the shader, the workgroups and the variant's sub-operation.
// BOUNDS-FN: `params` is [u32; PARAM_WORDS], written at constant words below 97 and at 54 + k for k < 4 (sections is [i32; 4]); node.srcs[i] only after bind() of source i (which checks the count) in the same arm; layouts' ne are [usize; 5] and corr a [f32; 2], indexed by constants.
fn encode(e: &mut Enc, node: &VkNode, op: &Op) -> crate::Result<(Shader, [u32; 3], u32)> {
    let ctx = e.ctx;
    let n = node.dst.layout.nelements();
    let per_elem = groups_1d(ctx, n, 256);
    match op {
        Op::Glu(g) => {
            if node.srcs.len() > 1 {
                bind(e, node, &[(0, 0, "values"), (1, 1, "gates")])?;
                e.params[OPW] = 15;
            } else {
                bind(e, node, &[(0, 0, "source")])?;
                e.params[OPW] = 14;
                e.params[56] = g.swapped as u32;
            }
            e.params[49] = g.kind.code();
            e.f(50, g.alpha);
            e.f(51, g.limit);
            Ok((Shader::Eltwise, per_elem, 0))
        }
        Op::SiluBack => {
            bind(e, node, &[(0, 0, "gradient"), (1, 1, "input")])?;
            e.params[OPW] = 16;
            Ok((Shader::Eltwise, per_elem, 0))
        }
        Op::Rope(r) => {
            bind(e, node, &[(0, 0, "source"), (1, 1, "positions")])?;
            if node.srcs.len() > 2 {
                bind(e, node, &[(2, 3, "frequency factors")])?;
                e.params[53] = 1;
            }
            let a = node.srcs[0].layout;
            let pairing = r.pairing();
            let nd = r.n_dims as usize;
            let n_pairs = if pairing == Pairing::Vision { nd } else { nd / 2 };
            e.params[OPW] = 0;
            e.params[49] = nd as u32;
            e.params[50] = match pairing {
                Pairing::Adjacent => 0,
                Pairing::Halves => 1,
                Pairing::Vision => 2,
            };
            e.params[51] = r.is_mrope() as u32;
            e.params[52] = r.forward as u32;
            for (k, s) in r.sections.iter().enumerate() {
                e.params[54 + k] = (*s).max(0) as u32;
            }
            let corr = r.corr_dims();
            for (w, v) in [(58, r.freq_scale), (59, r.ext_factor), (60, r.attn_factor), (61, corr[0]), (62, corr[1])] {
                e.f(w, v);
            }
            e.f(63, r.theta_scale::<f32>());
            e.params[96] = n_pairs as u32;
            let per_row = n_pairs + (a.ne[0] - 2 * n_pairs);
            Ok((Shader::Rope, groups_1d(ctx, per_row * a.ne[1] * a.ne[2] * a.ne[3], 256), 0))
        }
        Op::Attn(Attn::FlashExt { scale, max_bias, softcap }) => {
            bind(e, node, &[(0, 0, "q"), (1, 1, "k"), (2, 3, "v")])?;
            if node.srcs.len() > 3 {
                bind(e, node, &[(3, 4, "mask")])?;
                e.params[49] = 1;
            }
            e.params[OPW] = 0;
            e.f(50, if *softcap != 0.0 { scale / softcap } else { *scale });
            e.f(51, *softcap);
            if *max_bias > 0.0 {
                let n_head = node.srcs[0].layout.ne[2].max(1) as u32;
                let nhl2 = 1u32 << (31 - n_head.leading_zeros());
                e.params[52] = 1;
                e.f(53, 2f32.powf(-max_bias / nhl2 as f32));
                e.f(54, 2f32.powf(-(max_bias / 2.0) / nhl2 as f32));
                e.params[55] = nhl2;
            }
            Ok((Shader::Attn, per_elem, 0))
        }
        Op::Attn(Attn::FlashBack { masked }) => {
            bind(e, node, &[(0, 0, "q"), (1, 1, "k"), (2, 3, "v"), (3, 4, "gradient d")])?;
            let (q, k, v) = (&node.srcs[0].layout, &node.srcs[1].layout, &node.srcs[2].layout);
            let offs = back_offsets(q.nelements(), k.nelements(), v.nelements());
            e.params[OPW] = 1;
            e.params[49] = *masked as u32;
            e.f(50, 1.0 / (q.ne[0] as f32).sqrt());
            e.params[56] = u32::try_from(offs[1])?;
            e.params[57] = u32::try_from(offs[2])?;
            Ok((Shader::Attn, per_elem, 0))
        }
        Op::Index(i) => encode_index(e, node, i, per_elem),
        Op::Conv(c) => {
            let mut sub = 0;
            match *c {
                Conv::Pool1d { op, k0, s0, p0 } => {
                    bind(e, node, &[(0, 0, "source")])?;
                    e.params[OPW] = 4;
                    sub = matches!(op, PoolOp::Avg) as u32;
                    for (w, v) in [(56, k0), (57, s0), (58, p0)] {
                        e.i(w, v as i64)?;
                    }
                }
                Conv::Transpose1d { s0, p0, d0 } => {
                    bind(e, node, &[(0, 0, "kernel"), (1, 1, "input")])?;
                    e.params[OPW] = 0;
                    for (w, v) in [(56, s0), (57, p0), (58, d0)] {
                        e.i(w, v as i64)?;
                    }
                }
                Conv::Transpose2d { stride } => {
                    bind(e, node, &[(0, 0, "kernel"), (1, 1, "input")])?;
                    e.params[OPW] = 1;
                    e.i(56, stride as i64)?;
                }
                Conv::Depthwise2d { s0, s1, p0, p1, d0, d1 } | Conv::Direct2d { s0, s1, p0, p1, d0, d1 } => {
                    bind(e, node, &[(0, 0, "kernel"), (1, 1, "input")])?;
                    e.params[OPW] = if matches!(c, Conv::Depthwise2d { .. }) { 2 } else { 3 };
                    for (w, v) in [(56, s0), (57, s1), (58, p0), (59, p1), (60, d0), (61, d1)] {
                        e.i(w, v as i64)?;
                    }
                }
            }
            Ok((Shader::ConvDirect, per_elem, sub))
        }
        Op::MulMatId => {
            bind(e, node, &[(0, 0, "experts"), (1, 1, "b"), (2, 3, "expert ids")])?;
            e.params[OPW] = 5;
            Ok((Shader::ConvDirect, per_elem, 0))
        }
        Op::Rows(r) => {
            let a = node.srcs.first().map(|s| s.layout).unwrap_or(node.dst.layout);
            let rows = a.ne[1] * a.ne[2] * a.ne[3];
            let mut groups = groups_1d(ctx, rows, 256);
            match *r {
                RowOp::L2Norm { eps } => {
                    bind(e, node, &[(0, 0, "source")])?;
                    e.params[OPW] = 0;
                    e.f(50, eps);
                }
                RowOp::GroupNorm { groups: g, eps } => {
                    bind(e, node, &[(0, 0, "source")])?;
                    let per = group_size(a.ne[2], g);
                    e.params[OPW] = 1;
                    e.f(50, eps);
                    e.params[56] = per as u32;
                    groups = groups_1d(ctx, a.ne[2].div_ceil(per) * a.ne[3], 256);
                }
                RowOp::RmsNormBack { eps } => {
                    bind(e, node, &[(0, 0, "gradient"), (1, 1, "input")])?;
                    e.params[OPW] = 2;
                    e.f(50, eps);
                }
                RowOp::SoftMaxBack { scale, .. } => {
                    bind(e, node, &[(0, 0, "gradient"), (1, 1, "softmax result")])?;
                    e.params[OPW] = 3;
                    e.f(50, scale);
                }
                RowOp::Argsort { desc } => {
                    bind(e, node, &[(0, 0, "source")])?;
                    e.params[OPW] = 4;
                    e.params[57] = desc as u32;
                    groups = groups_1d(ctx, a.nelements(), 256);
                }
                RowOp::TopK { k } => {
                    bind(e, node, &[(0, 0, "source")])?;
                    e.params[OPW] = 5;
                    e.params[57] = 1;
                    e.params[58] = k as u32;
                    groups = groups_1d(ctx, a.nelements(), 256);
                }
                RowOp::CountEqual => {
                    bind(e, node, &[(0, 0, "a"), (1, 1, "b")])?;
                    e.params[OPW] = 6;
                    groups = [1, 1, 1];
                }
            }
            Ok((Shader::Rows, groups, 0))
        }
        other => anyhow::bail!("{} has no Vulkan kernel", other.name()),
    }
}

// BOUNDS-FN: `params` written at constant words below 64 and 56 + k for k < 4 (shift is [i32; 4]); srcs[0] after need_srcs(node, 1); ne is [usize; 5].
fn encode_index(e: &mut Enc, node: &VkNode, op: &IndexOp, groups: [u32; 3]) -> crate::Result<(Shader, [u32; 3], u32)> {
    let mut sub = 0;
    let code = match *op {
        IndexOp::Roll { shift } => {
            for (k, s) in shift.iter().enumerate() {
                e.i(56 + k, *s as i64)?;
            }
            0
        }
        IndexOp::PadReflect1d { p0, .. } => {
            e.i(56, p0 as i64)?;
            1
        }
        IndexOp::WinPart { w } => {
            need_srcs(node, 1)?;
            let a = &node.srcs[0].layout;
            e.params[56] = w as u32;
            e.params[57] = IndexOp::windows(w as usize, a.ne[1], a.ne[2]).0 as u32;
            2
        }
        IndexOp::WinUnpart { w0, h0, w } => {
            e.params[56] = w as u32;
            e.params[57] = IndexOp::windows(w as usize, w0 as usize, h0 as usize).0 as u32;
            3
        }
        IndexOp::GetRelPos { kh, .. } => {
            e.params[56] = kh as u32;
            4
        }
        IndexOp::AddRelPos => 5,
        IndexOp::Diag => 6,
        IndexOp::DiagMaskZero { n_past } => {
            e.i(56, n_past as i64)?;
            7
        }
        IndexOp::Arange { start, step, .. } => {
            e.f(50, start);
            e.f(51, step);
            8
        }
        IndexOp::TimestepEmbedding { dim, max_period } => {
            e.params[56] = (dim / 2) as u32;
            e.f(50, (max_period as f32).ln());
            9
        }
        IndexOp::Interpolate { factor, bicubic } => {
            e.f(50, factor as f32);
            sub = bicubic as u32;
            10
        }
        IndexOp::GetRowsBack => 11,
        IndexOp::RepeatBack => 12,
        IndexOp::Set { .. } => anyhow::bail!("internal: SET is encoded as copies"),
    };
    match op {
        IndexOp::Arange { .. } => {}
        IndexOp::AddRelPos => bind(e, node, &[(0, 0, "source"), (1, 1, "pw"), (2, 3, "ph")])?,
        IndexOp::GetRowsBack => bind(e, node, &[(0, 0, "gradient"), (1, 1, "row indices")])?,
        _ => bind(e, node, &[(0, 0, "source")])?,
    }
    e.params[OPW] = code;
    Ok((Shader::Index, groups, sub))
}
