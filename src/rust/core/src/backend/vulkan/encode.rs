//! Op encoders: turn one graph node into a shader dispatch, i.e. which shader,
//! its 64-word parameter block, the buffer ranges to bind and the workgroup
//! counts. The parameter layout is described in `shaders/common.wgsl`.

use super::context::VkContext;
use super::memory::VkBuffer;
use super::shaders::{Shader, Variant};
use crate::base::dtype::DType;
use crate::layout::Layout;
use crate::op::{Op, PoolOp, UnaryOp};
use ash::vk;

/// A tensor as a kernel sees it: a buffer, a byte offset and a layout
/// (ggml's ne and nb, nb in bytes).
#[derive(Debug, Clone, Copy)]
pub struct VkTensorRef<'a> {
    pub buf: &'a VkBuffer,
    pub offset: usize,
    pub layout: Layout,
}

/// One graph node: the op, its sources (in the order `Op` documents) and the
/// result. The result is contiguous except for `Cpy`, whose result is the
/// memory of its second source.
#[derive(Debug, Clone)]
pub struct VkNode<'a> {
    pub op: &'a Op,
    pub srcs: Vec<VkTensorRef<'a>>,
    pub dst: VkTensorRef<'a>,
}

/// Words per parameter block.
pub const PARAM_WORDS: usize = 128;
pub(super) const OPW: usize = 48;
/// First of the three words that hold the dispatch's whole grid of
/// workgroups (x, y, z), written when the graph runs: the shaders loop over
/// their work by it, not by the piece of the grid one `vkCmdDispatchBase`
/// runs (see `graph.rs`).
pub(crate) const GRID_WORD: usize = 125;
/// Source and result slots of a dispatch: sources 0 and 1, the result, sources 2 and 3.
pub const SLOTS: usize = 5;

/// First parameter word of tensor slot `slot` (see `shaders/common.wgsl`).
pub(super) fn slot_word(slot: usize) -> usize {
    if slot < 3 {
        slot * 16
    } else {
        slot * 16 + 16
    }
}

/// A buffer range bound to one binding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bind {
    pub buffer: vk::Buffer,
    pub offset: u64,
    pub range: u64,
    /// Bytes the kernel touches, for hazard tracking.
    pub touched: (u64, u64),
}

#[derive(Debug, Clone)]
pub(crate) struct Dispatch {
    pub variant: Variant,
    pub params: [u32; PARAM_WORDS],
    /// Source 0, source 1, result, source 2, source 3 (bindings 1 to 5).
    pub binds: [Bind; SLOTS],
    pub groups: [u32; 3],
    /// Constant words bound in place of source 2 (the grids of lattice IQ
    /// weights), uploaded with the parameter blocks.
    pub table: Option<&'static [u32]>,
    /// Work per workgroup relative to others of its variant, for sizing
    /// batches (`batch.rs`): a product's inner length, else 1.
    pub weight: u64,
}

/// The shaders' code of a storage type; f64 has no Vulkan kernels.
/// Quantized types (256 + ggml's code) are read only by `shaders/matmul_q.wgsl`,
/// and compute.rs refuses them elsewhere.
fn dtype_code(t: DType) -> Option<u32> {
    match t {
        DType::Quant(q) => Some(256 + q.code() as u32),
        DType::F32 => Some(0),
        DType::F16 => Some(1),
        DType::I32 => Some(2),
        DType::BF16 => Some(3),
        DType::F64 => None,
    }
}

fn unary_code(u: UnaryOp) -> u32 {
    UnaryOp::ALL.iter().position(|&x| x == u).unwrap_or(0) as u32
}

pub(super) struct Enc<'c> {
    pub ctx: &'c VkContext,
    pub op: &'static str,
    pub params: [u32; PARAM_WORDS],
    pub binds: Vec<Bind>,
}

impl<'c> Enc<'c> {
    /// Describe tensor `t` in slot `slot` (0, 1 = sources, 2 = result, 3, 4 = sources):
    /// offset and strides in elements, or in bytes for a quantized tensor.
    // BOUNDS-FN: callers pass the constant slots 0 to 4 (< SLOTS, the length of `binds` made by new_enc); slot_word(slot) + 9 < 96 <= PARAM_WORDS; `d` < 4 into the [usize; 5] ne and nb.
    pub fn tensor(&mut self, slot: usize, t: &VkTensorRef, role: &str) -> crate::Result<()> {
        let name = &self.ctx.info.name;
        let op = self.op;
        anyhow::ensure!(
            std::ptr::eq(std::sync::Arc::as_ptr(t.buf.context()), self.ctx),
            "{op}: the {role} lives on Vulkan device '{}', not on '{name}'",
            t.buf.context().name()
        );
        let l = &t.layout;
        let Some(code) = dtype_code(l.dtype) else {
            anyhow::bail!(
                "{op}: the {role} is an f64 tensor, and the Vulkan backend has no f64 kernels; \
                 use f32 tensors (GGML_TYPE_F32) on Vulkan, or compute f64 on the CPU backend"
            );
        };
        let es = if l.dtype.quant().is_some() { 1 } else { l.dtype.size() };
        let span = l.span_bytes();
        anyhow::ensure!(
            t.offset.checked_add(span).is_some_and(|e| e <= t.buf.size()),
            "{op}: the {role} ({} bytes at offset {}) does not fit its {}-byte buffer",
            span,
            t.offset,
            t.buf.size()
        );
        anyhow::ensure!(
            t.offset % es == 0 && l.nb.iter().all(|&b| b % es == 0),
            "{op}: the {role}'s offset and strides must be multiples of its element size ({es} bytes)"
        );
        let align = self.ctx.info.limits.min_storage_buffer_offset_alignment as usize;
        let base = t.offset / align * align;
        let rem = t.offset - base;
        let range = ((rem + span.max(1)).div_ceil(4) * 4).min(t.buf.size() - base);
        let max_range = self.ctx.info.limits.max_storage_buffer_range as usize;
        anyhow::ensure!(
            range <= max_range,
            "Vulkan device '{name}': {op}'s {role} spans {} bytes, more than the {} one kernel can address \
             (maxStorageBufferRange); split the tensor or use the CPU backend",
            range,
            max_range
        );
        let w = slot_word(slot);
        self.params[w] = code;
        self.params[w + 1] = u32::try_from(rem / es)?;
        for d in 0..4 {
            self.params[w + 2 + d] = u32::try_from(l.ne[d])
                .map_err(|_| anyhow::anyhow!("{op}: the {role} is too large for a Vulkan kernel"))?;
            self.params[w + 6 + d] = u32::try_from(l.nb[d] / es)
                .map_err(|_| anyhow::anyhow!("{op}: the {role}'s strides are too large for a Vulkan kernel"))?;
        }
        self.binds[slot] = Bind {
            buffer: t.buf.buffer,
            offset: base as u64,
            range: range as u64,
            touched: (t.offset as u64, (t.offset + span) as u64),
        };
        Ok(())
    }

    // BOUNDS-FN: callers pass constant words below PARAM_WORDS (the length of `params`).
    pub fn f(&mut self, word: usize, v: f32) {
        self.params[word] = v.to_bits();
    }

    // BOUNDS-FN: callers pass constant words below PARAM_WORDS (the length of `params`).
    pub fn i(&mut self, word: usize, v: i64) -> crate::Result<()> {
        self.params[word] = i32::try_from(v).map_err(|_| anyhow::anyhow!("{}: parameter {v} is out of range", self.op))? as u32;
        Ok(())
    }
}

pub(super) fn need_srcs(node: &VkNode, n: usize) -> crate::Result<()> {
    anyhow::ensure!(
        node.srcs.len() >= n,
        "{}: expected {n} source tensor(s), got {}",
        node.op.name(),
        node.srcs.len()
    );
    Ok(())
}

/// Row length up to which a reduction gives each row one invocation.
const SERIAL_ROW_MAX: usize = 64;

/// Set by tests to send products and long rows through the shared-memory
/// kernels on a CPU-type device too, so the paths GPUs take are tested there.
pub(crate) static GPU_PATHS_ON_CPU: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `ctx` is a CPU-type device (lavapipe) taking its own kernels:
/// there a workgroup barrier switches between invocations, so kernels
/// without barriers are faster.
fn barrier_free(ctx: &VkContext) -> bool {
    ctx.info().device_type == "cpu" && !GPU_PATHS_ON_CPU.load(std::sync::atomic::Ordering::Relaxed)
}

pub(super) fn groups_1d(ctx: &VkContext, n: usize, per_group: usize) -> [u32; 3] {
    [n.div_ceil(per_group).clamp(1, ctx.max_groups(0)) as u32, 1, 1]
}

/// A parameter block for `node` with its result described, or None when the
/// node has nothing to compute.
pub(super) fn new_enc<'c>(ctx: &'c VkContext, node: &VkNode) -> crate::Result<Option<Enc<'c>>> {
    let op = node.op;
    if matches!(op, Op::None) || op.is_view() || node.dst.layout.nelements() == 0 {
        return Ok(None);
    }
    let empty = Bind { buffer: vk::Buffer::null(), offset: 0, range: 0, touched: (0, 0) };
    let mut e = Enc { ctx, op: op.name(), params: [0; PARAM_WORDS], binds: vec![empty; SLOTS] };
    e.tensor(2, &node.dst, "result")?;
    Ok(Some(e))
}

/// The dispatch of a filled parameter block: unused source slots repeat the
/// result's binding (never read); the variant has the operation codes as
/// constants and is f32-only when every tensor is.
// BOUNDS-FN: `binds` has SLOTS = 5 entries (new_enc) and `params` PARAM_WORDS; only the constants 0 to 4 and 60.
pub(super) fn finish(mut e: Enc, node: &VkNode, shader: Shader, op: u32, sub: u32, groups: [u32; 3]) -> Dispatch {
    let dst_bind = e.binds[2];
    for (i, b) in e.binds.iter_mut().enumerate() {
        if i != 2 && b.buffer == vk::Buffer::null() {
            *b = Bind { touched: (0, 0), ..dst_bind };
        }
    }
    let all_f32 = node.srcs.iter().chain(std::iter::once(&node.dst)).all(|t| t.layout.dtype == DType::F32);
    let variant = Variant { shader, op, sub, all_f32 };
    let binds = [e.binds[0], e.binds[1], e.binds[2], e.binds[3], e.binds[4]];
    // Products loop over K (word 60) in each workgroup.
    let weight = if matches!(shader, Shader::Matmul | Shader::MatmulQ) { u64::from(e.params[60]).max(1) } else { 1 };
    Dispatch { variant, params: e.params, binds, groups, table: None, weight }
}

/// The single dispatch of one node of the ops encoded here, or None when it
/// has nothing to compute.
// BOUNDS-FN: `params` is [u32; PARAM_WORDS], written at constant words below 64 and at 56 + d for d < 4 (lo is [usize; 4]); layouts' ne and nb are [usize; 5], indexed by constants below 4 or by i < 4; `src(i)` is used only after need_srcs(node, n) with n > i in the same arm.
pub(super) fn encode_one(ctx: &VkContext, node: &VkNode) -> crate::Result<Option<Dispatch>> {
    let op = node.op;
    let dst = &node.dst;
    let Some(mut e) = new_enc(ctx, node)? else { return Ok(None) };
    let n = dst.layout.nelements();
    let mut shader = Shader::Eltwise;
    let mut groups = groups_1d(ctx, n, 256);
    let mut serial_rows = false;
    let mut register_blocks = false;
    let src = |i: usize| &node.srcs[i];
    let ew = |e: &mut Enc, code: u32| e.params[OPW] = code;
    match op {
        Op::Dup | Op::Cont | Op::Cpy => {
            need_srcs(node, 1)?;
            anyhow::ensure!(
                src(0).layout.nelements() == n,
                "{}: source has {} elements but the result has {n}",
                op.name(),
                src(0).layout.nelements()
            );
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 0);
        }
        Op::Unary(u) => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 1);
            e.params[49] = unary_code(*u);
        }
        Op::Scale { s } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 2);
            e.f(50, *s as f32);
        }
        Op::LeakyRelu { slope } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 3);
            e.f(50, *slope);
        }
        Op::Clamp { min, max } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 4);
            e.f(50, *min as f32);
            e.f(51, *max as f32);
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Add1 => {
            need_srcs(node, 2)?;
            let (a, b) = (&src(0).layout, &src(1).layout);
            anyhow::ensure!(
                (0..4).all(|i| b.ne[i] > 0 && a.ne[i] % b.ne[i] == 0),
                "{}: b {:?} cannot be broadcast to a {:?}",
                op.name(),
                b.ne,
                a.ne
            );
            e.tensor(0, src(0), "first source")?;
            e.tensor(1, src(1), "second source")?;
            ew(&mut e, 5);
            e.params[49] = match op {
                Op::Add | Op::Add1 => 0,
                Op::Sub => 1,
                Op::Mul => 2,
                _ => 3,
            };
        }
        Op::Repeat => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 6);
        }
        Op::Concat { dim } => {
            need_srcs(node, 2)?;
            anyhow::ensure!(*dim < 4, "CONCAT: dim must be 0..3, got {dim}");
            e.tensor(0, src(0), "first source")?;
            e.tensor(1, src(1), "second source")?;
            ew(&mut e, 7);
            e.params[56] = *dim as u32;
        }
        Op::GetRows => {
            need_srcs(node, 2)?;
            anyhow::ensure!(src(1).layout.dtype == DType::I32, "GET_ROWS: the row indices must be i32");
            e.tensor(0, src(0), "source")?;
            e.tensor(1, src(1), "row indices")?;
            ew(&mut e, 8);
        }
        Op::DiagMaskInf { n_past } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 9);
            e.i(56, *n_past as i64)?;
        }
        Op::Pad { .. } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 10);
        }
        Op::Upscale { factor } => {
            need_srcs(node, 1)?;
            anyhow::ensure!(*factor > 0, "UPSCALE: factor must be positive, got {factor}");
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 11);
            e.params[56] = *factor as u32;
        }
        Op::Im2Col { s0, s1, p0, p1, d0, d1, is_2d } => {
            need_srcs(node, 2)?;
            let k = &src(0).layout;
            e.tensor(0, src(1), "input")?;
            ew(&mut e, 12);
            for (w, v) in [(50, s0), (51, s1), (52, p0), (53, p1), (54, d0), (55, d1)] {
                e.i(w, *v as i64)?;
            }
            e.params[56] = k.ne[0] as u32;
            e.params[57] = if *is_2d { k.ne[1] as u32 } else { 1 };
            e.params[58] = *is_2d as u32;
        }
        Op::Pool2d { op: pop, k0, k1, s0, s1, p0, p1 } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            ew(&mut e, 13);
            e.params[49] = matches!(pop, PoolOp::Avg) as u32;
            for (w, v) in [(50, *k0), (51, *k1), (52, *s0), (53, *s1), (54, *p0 as i32), (55, *p1 as i32)] {
                e.i(w, v as i64)?;
            }
        }
        Op::MulMat | Op::OutProd => {
            need_srcs(node, 2)?;
            let (a, b) = (&src(0).layout, &src(1).layout);
            let d = &dst.layout;
            let (ea, eb) = (a.dtype.size(), b.dtype.size());
            // (K, M, N, A's k stride, A's m stride, B's k stride, B's n stride), in elements
            let (k, m, nn, sak, sam, sbk, sbn) = if matches!(op, Op::MulMat) {
                anyhow::ensure!(a.ne[0] == b.ne[0], "MUL_MAT: a has {} columns but b has {}", a.ne[0], b.ne[0]);
                (a.ne[0], a.ne[1], b.ne[1], a.nb[0] / ea, a.nb[1] / ea, b.nb[0] / eb, b.nb[1] / eb)
            } else {
                anyhow::ensure!(a.ne[1] == b.ne[1], "OUT_PROD: a has {} rows but b has {}", a.ne[1], b.ne[1]);
                (a.ne[1], a.ne[0], b.ne[0], a.nb[1] / ea, a.nb[0] / ea, b.nb[1] / eb, b.nb[0] / eb)
            };
            anyhow::ensure!(
                d.ne[0] == m && d.ne[1] == nn,
                "{}: the result is {:?} but the sources give {m} x {nn}",
                op.name(),
                d.ne
            );
            for (t, l) in [("a", a), ("b", b)] {
                anyhow::ensure!(
                    (2..4).all(|i| l.ne[i] > 0 && d.ne[i] % l.ne[i] == 0),
                    "{}: {t}'s batch dims {:?} do not divide the result's {:?}",
                    op.name(),
                    &l.ne[2..],
                    &d.ne[2..]
                );
            }
            e.tensor(0, src(0), "a")?;
            e.tensor(1, src(1), "b")?;
            shader = Shader::Matmul;
            for (w, v) in [(56, sak), (57, sam), (58, sbk), (59, sbn), (60, k), (61, m), (62, nn)] {
                e.params[w] = u32::try_from(v)?;
            }
            // 16 x 16 invocations per group, each one result (shared-memory
            // tiles) or a 4 x 4 block of results (barrier-free variant).
            register_blocks = barrier_free(ctx);
            let per = if register_blocks { 64 } else { 16 };
            groups = [
                m.div_ceil(per).clamp(1, ctx.max_groups(0)) as u32,
                nn.div_ceil(per).clamp(1, ctx.max_groups(1)) as u32,
                (d.ne[2] * d.ne[3]).clamp(1, ctx.max_groups(2)) as u32,
            ];
        }
        Op::SumRows | Op::Mean | Op::Sum | Op::Argmax | Op::Norm { .. } | Op::RmsNorm { .. } | Op::SoftMax { .. } => {
            need_srcs(node, 1)?;
            let a = src(0).layout;
            e.tensor(0, src(0), "source")?;
            shader = Shader::Reduce;
            let rows = a.ne[1] * a.ne[2] * a.ne[3];
            // Rows this short are reduced by one invocation each (variant
            // 1): a workgroup's tree reduction would idle most of its lanes
            // and pay for its barriers.
            // A CPU-type device (lavapipe) runs a workgroup's invocations as
            // coroutines and pays a switch per barrier, so there every row
            // is reduced by one invocation.
            serial_rows = !matches!(op, Op::Sum)
                && (a.ne[0] <= SERIAL_ROW_MAX || barrier_free(ctx));
            groups = if matches!(op, Op::Sum) {
                groups_1d(ctx, 1, 1)
            } else if serial_rows {
                groups_1d(ctx, rows, Shader::Reduce.local_size() as usize)
            } else {
                groups_1d(ctx, rows, 1)
            };
            e.params[OPW] = match op {
                Op::SumRows => 0,
                Op::Mean => 1,
                Op::SoftMax { .. } => 2,
                Op::Norm { .. } => 3,
                Op::RmsNorm { .. } => 4,
                Op::Argmax => 5,
                _ => 6,
            };
            match op {
                Op::Norm { eps } | Op::RmsNorm { eps } => e.f(50, *eps),
                Op::Argmax => anyhow::ensure!(dst.layout.dtype == DType::I32, "ARGMAX: the result must be i32"),
                Op::SoftMax { scale, max_bias } => {
                    e.f(50, *scale);
                    if let Some(mask) = node.srcs.get(1) {
                        anyhow::ensure!(
                            mask.layout.ne[0] == a.ne[0] && mask.layout.ne[1] >= a.ne[1],
                            "SOFT_MAX: the mask {:?} must have a's row length {} and at least {} rows",
                            mask.layout.ne,
                            a.ne[0],
                            a.ne[1]
                        );
                        e.tensor(1, mask, "mask")?;
                        e.params[56] = 1;
                    }
                    if *max_bias > 0.0 {
                        let n_head = a.ne[2].max(1) as u32;
                        let nhl2 = 1u32 << (31 - n_head.leading_zeros());
                        e.f(51, 2f32.powf(-max_bias / nhl2 as f32));
                        e.f(52, 2f32.powf(-(max_bias / 2.0) / nhl2 as f32));
                        e.params[57] = 1;
                        e.params[58] = nhl2;
                    }
                }
                _ => {}
            }
        }
        Op::Map { f, a, b } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            shader = Shader::Extended;
            ew(&mut e, 0);
            e.params[49] = f.code();
            e.f(50, *a);
            e.f(51, *b);
        }
        Op::Binary { f } => {
            need_srcs(node, 2)?;
            let (a, b) = (&src(0).layout, &src(1).layout);
            anyhow::ensure!(
                (0..4).all(|i| (a.ne[i] == dst.layout.ne[i] || a.ne[i] == 1) && (b.ne[i] == dst.layout.ne[i] || b.ne[i] == 1)),
                "BINARY: a {:?} and b {:?} do not broadcast to {:?}",
                a.ne,
                b.ne,
                dst.layout.ne
            );
            e.tensor(0, src(0), "first source")?;
            e.tensor(1, src(1), "second source")?;
            shader = Shader::Extended;
            ew(&mut e, 1);
            e.params[49] = f.code();
        }
        Op::GatherAxis { dim } => {
            need_srcs(node, 2)?;
            anyhow::ensure!(*dim < 4, "GATHER_AXIS: dim must be 0..3, got {dim}");
            e.tensor(0, src(0), "source")?;
            e.tensor(1, src(1), "indices")?;
            shader = Shader::Extended;
            ew(&mut e, 2);
            e.params[56] = *dim as u32;
        }
        Op::PadEx { lo, mode, value, .. } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            shader = Shader::Extended;
            ew(&mut e, 3);
            e.f(50, *value);
            for (d, &l) in lo.iter().enumerate() {
                e.params[56 + d] = u32::try_from(l)?;
            }
            e.params[60] = mode.code();
        }
        Op::ScatterFlat { reduce } => {
            need_srcs(node, 2)?;
            e.tensor(0, src(0), "source")?;
            e.tensor(1, src(1), "updates")?;
            shader = Shader::Extended;
            ew(&mut e, 4);
            e.params[49] = reduce.code();
        }
        Op::ReduceRows { f } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            shader = Shader::Extended;
            ew(&mut e, 5);
            e.params[49] = f.code();
            let a = src(0).layout;
            groups = groups_1d(ctx, a.ne[1] * a.ne[2] * a.ne[3], 256);
        }
        Op::ScanRows { f } => {
            need_srcs(node, 1)?;
            e.tensor(0, src(0), "source")?;
            shader = Shader::Extended;
            ew(&mut e, 6);
            e.params[49] = f.code();
            let (excl, rev) = f.flags();
            e.params[57] = excl as u32;
            e.params[58] = rev as u32;
            let a = src(0).layout;
            groups = groups_1d(ctx, a.ne[1] * a.ne[2] * a.ne[3], 256);
        }
        // An op without an arm here must be left out of `support::has_kernel`.
        other => anyhow::bail!("{} has no Vulkan kernel", other.name()),
    }
    // Contiguous same-shape element-wise work takes the shader's linear path.
    if shader == Shader::Eltwise && e.params[OPW] <= 5 {
        let same = |l: &Layout| l.is_contiguous() && l.ne == dst.layout.ne;
        let a_ok = node.srcs.first().is_some_and(|a| {
            a.layout.is_contiguous() && (same(&a.layout) || e.params[OPW] == 0)
        });
        let b = if e.params[OPW] == 5 { node.srcs.get(1) } else { None };
        let b_scalar = b.is_some_and(|b| b.layout.nelements() == 1);
        let b_ok = b.is_none_or(|b| b_scalar || same(&b.layout));
        if a_ok && b_ok && dst.layout.is_contiguous() {
            e.params[59] = 1;
            e.params[60] = b_scalar as u32;
        }
    }
    let (op_code, sub) = match shader {
        Shader::Matmul => (0, register_blocks as u32),
        Shader::Reduce => (e.params[OPW], serial_rows as u32),
        Shader::Extended => (e.params[OPW], 0),
        _ => {
            let op = e.params[OPW];
            (op, if matches!(op, 1 | 5 | 13) { e.params[49] } else { 0 })
        }
    };
    Ok(Some(finish(e, node, shader, op_code, sub, groups)))
}
