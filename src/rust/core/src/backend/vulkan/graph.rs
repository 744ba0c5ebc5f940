//! Graph execution: every node's dispatch is recorded into one command
//! buffer, with a memory barrier only where a dispatch touches memory that an
//! earlier, not yet barriered dispatch wrote (or writes memory one read), and
//! the whole graph is submitted once when it is short. A long graph goes in
//! batches of about [`super::batch::BATCH_BUDGET_NS`] of device time each
//! (sized by the speed measured on the batches before), and a stop requested
//! through `base::cancel` (Ctrl-C) ends it between batches: every batch
//! submitted has completed, so buffers are left consistent. A batch may end
//! inside a long dispatch: the rest of its workgroups run in the next
//! batches (`vkCmdDispatchBase`), and every shader loops over its work by
//! the whole dispatch's grid, which its parameter block holds (words
//! [`GRID_WORD`]..+3), never by the piece's.

use super::context::VkContext;
use super::encode::{Bind, Dispatch, VkNode, GRID_WORD, PARAM_WORDS, SLOTS};
use super::encode_nn::encode_node;
use super::shaders::BINDINGS;
use ash::vk;
use gpu_allocator::MemoryLocation;
use super::batch::{boxes, next_batch, Cursor};
use super::shaders::Variant;

/// Byte ranges of buffers touched since the last barrier.
#[derive(Default)]
struct Hazards {
    written: Vec<(vk::Buffer, u64, u64)>,
    read: Vec<(vk::Buffer, u64, u64)>,
}

fn overlaps(list: &[(vk::Buffer, u64, u64)], b: &Bind) -> bool {
    let (s, e) = b.touched;
    s < e && list.iter().any(|&(buf, ls, le)| buf == b.buffer && s < le && ls < e)
}

impl Hazards {
    /// True when `d` must wait for earlier dispatches.
    // BOUNDS-FN: `binds` is [Bind; SLOTS], indexed by the constant 2.
    fn conflicts(&self, d: &Dispatch) -> bool {
        sources(d).any(|b| overlaps(&self.written, b))
            || overlaps(&self.written, &d.binds[2])
            || overlaps(&self.read, &d.binds[2])
    }

    // BOUNDS-FN: `binds` is [Bind; SLOTS], indexed by the constant 2.
    fn add(&mut self, d: &Dispatch) {
        for b in sources(d) {
            if b.touched.0 < b.touched.1 {
                self.read.push((b.buffer, b.touched.0, b.touched.1));
            }
        }
        let w = &d.binds[2];
        self.written.push((w.buffer, w.touched.0, w.touched.1));
    }

    fn clear(&mut self) {
        self.written.clear();
        self.read.clear();
    }
}

/// The source bindings of a dispatch (every slot but the result's).
fn sources(d: &Dispatch) -> impl Iterator<Item = &Bind> {
    d.binds.iter().enumerate().filter(|(i, _)| *i != 2).map(|(_, b)| b)
}

/// Workgroups of a dispatch (at least one: a dispatch costs something).
// BOUNDS-FN: `groups` is [u32; 3], indexed by constants.
pub(crate) fn groups(d: &Dispatch) -> u64 {
    (u64::from(d.groups[0]) * u64::from(d.groups[1]) * u64::from(d.groups[2])).max(1)
}

/// Destroys the per-run descriptor pool on every path.
struct PoolGuard<'a> {
    dev: &'a ash::Device,
    pool: vk::DescriptorPool,
}

impl Drop for PoolGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the run waited for its fence (or never submitted).
        unsafe { self.dev.destroy_descriptor_pool(self.pool, None) };
    }
}

impl VkContext {
    /// Run `nodes` in order: one command buffer, one queue submission per
    /// batch (one for a short graph), waiting for each. Nodes with nothing
    /// to compute are skipped. Stops with the interrupt error between
    /// batches when a stop is requested.
    // BOUNDS-FN: `bytes` has `end` bytes: stride * dispatches.len() for the blocks (i < len, 4 * j + 4 <= PARAM_WORDS * 4 <= stride) and each table's words after its offset, counted into `end`; `words` is [u32; PARAM_WORDS] and GRID_WORD + 3 = PARAM_WORDS; `info` has 1 + SLOTS entries (k < SLOTS, b < 1 + SLOTS, and 4); `groups`, `b` and `c` are [u32; 3].
    pub fn run_graph(&self, nodes: &[VkNode]) -> crate::Result<()> {
        self.check_live()?;
        let mut dispatches = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let d = encode_node(self, n).map_err(|e| e.context(format!("graph node {} ({})", i + 1, n.op.name())))?;
            dispatches.extend(d);
        }
        let Some(first) = nodes.iter().find(|n| std::ptr::eq(std::sync::Arc::as_ptr(n.dst.buf.context()), self))
        else {
            return Ok(());
        };
        if dispatches.is_empty() {
            return Ok(());
        }
        let dev = &self.device;
        let vkerr = |what: &'static str| move |e: vk::Result| self.vk_error(what, e);
        let (set_layout, layout) = self.pipelines.layouts(dev).map_err(vkerr("creating pipeline layouts"))?;
        let mut pipes = Vec::with_capacity(dispatches.len());
        for d in &dispatches {
            pipes.push(self.pipelines.get(dev, d.variant).map_err(vkerr("creating a compute pipeline"))?);
        }

        // Parameter blocks, one per dispatch, at offsets the device accepts.
        let align = self.info.limits.min_storage_buffer_offset_alignment.max(256) as usize;
        let stride = (PARAM_WORDS * 4).div_ceil(align) * align;
        // The dispatches' constant tables follow, each once, at offsets the
        // device accepts: (table, byte offset).
        let mut tables: Vec<(&'static [u32], usize)> = Vec::new();
        let mut end = stride * dispatches.len();
        for t in dispatches.iter().filter_map(|d| d.table) {
            if !tables.iter().any(|(u, _)| std::ptr::eq(*u, t)) {
                tables.push((t, end));
                end += (4 * t.len()).div_ceil(align) * align;
            }
        }
        let params = first.dst.buf.context().alloc_at(end, MemoryLocation::CpuToGpu, "graph parameter buffer")?;
        let mut bytes = vec![0u8; end];
        for (i, d) in dispatches.iter().enumerate() {
            let mut words = d.params;
            words[GRID_WORD..GRID_WORD + 3].copy_from_slice(&d.groups);
            for (j, w) in words.iter().enumerate() {
                bytes[i * stride + 4 * j..i * stride + 4 * j + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
        for &(t, at) in &tables {
            for (j, w) in t.iter().enumerate() {
                bytes[at + 4 * j..at + 4 * j + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
        self.write(&params, 0, &bytes)?;
        let table_info = |t: &'static [u32]| {
            let at = tables.iter().find(|(u, _)| std::ptr::eq(*u, t)).map_or(0, |&(_, at)| at);
            vk::DescriptorBufferInfo { buffer: params.buffer, offset: at as u64, range: (4 * t.len()) as u64 }
        };

        let n = dispatches.len() as u32;
        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: BINDINGS * n }];
        let pinfo = vk::DescriptorPoolCreateInfo::default().max_sets(n).pool_sizes(&sizes);
        // SAFETY: valid device; the guard destroys the pool.
        let pool = unsafe { dev.create_descriptor_pool(&pinfo, None) }.map_err(vkerr("creating descriptor pools"))?;
        let _pool = PoolGuard { dev, pool };
        let layouts = vec![set_layout; dispatches.len()];
        let ainfo = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
        // SAFETY: `pool` was sized for one set per dispatch; `layouts` outlives the call.
        let sets = unsafe { dev.allocate_descriptor_sets(&ainfo) }.map_err(vkerr("allocating descriptor sets"))?;
        let infos: Vec<[vk::DescriptorBufferInfo; 1 + SLOTS]> = dispatches
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let bi = |b: &Bind| vk::DescriptorBufferInfo { buffer: b.buffer, offset: b.offset, range: b.range };
                // binding 0: parameters; bindings 1 to 5: the slots in order
                let mut info = [vk::DescriptorBufferInfo { buffer: params.buffer, offset: (i * stride) as u64, range: (PARAM_WORDS * 4) as u64 }; 1 + SLOTS];
                for (k, b) in d.binds.iter().enumerate() {
                    info[1 + k] = bi(b);
                }
                // binding 4 (source 2): the dispatch's table, when it has one
                if let Some(t) = d.table {
                    info[4] = table_info(t);
                }
                info
            })
            .collect();
        let writes: Vec<vk::WriteDescriptorSet> = sets
            .iter()
            .zip(&infos)
            .flat_map(|(&set, info)| {
                (0..1 + SLOTS).map(move |b| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(std::slice::from_ref(&info[b]))
                })
            })
            .collect();
        // SAFETY: every buffer in `infos` is alive until the run completes.
        unsafe { dev.update_descriptor_sets(&writes, &[]) };

        let s = self.lock_submitter();
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        let between = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
        let at_end = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::HOST_READ | vk::AccessFlags::TRANSFER_READ)];
        let costs: Vec<(Variant, u64, u64)> = dispatches.iter().map(|d| (d.variant, groups(d), d.weight)).collect();
        let split = self.pipelines.dispatch_base();
        let mut start = Cursor::default();
        while start.at < dispatches.len() {
            crate::base::cancel::check()?;
            let pieces = next_batch(&costs, start, &self.lock_speeds(), split);
            let Some(&last) = pieces.last() else { break };
            let t0 = std::time::Instant::now();
            let mut hazards = Hazards::default();
            // SAFETY: exclusive use of the command buffer (submitter lock); all
            // bound objects outlive the wait in submit_and_wait.
            unsafe {
                dev.reset_command_buffer(s.cmd, vk::CommandBufferResetFlags::empty()).map_err(vkerr("recording"))?;
                dev.begin_command_buffer(s.cmd, &begin).map_err(vkerr("recording"))?;
                let barrier = || {
                    dev.cmd_pipeline_barrier(
                        s.cmd,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::PipelineStageFlags::COMPUTE_SHADER,
                        vk::DependencyFlags::empty(),
                        &between,
                        &[],
                        &[],
                    );
                    self.count_barrier();
                };
                if start != Cursor::default() {
                    // A barrier's first scope holds every command submitted
                    // earlier on the queue: the batches before this one.
                    barrier();
                }
                let mut bound = vk::Pipeline::null();
                for p in &pieces {
                    let (Some(d), Some(&set), Some(&pipe)) = (dispatches.get(p.at), sets.get(p.at), pipes.get(p.at)) else {
                        continue;
                    };
                    if hazards.conflicts(d) {
                        barrier();
                        hazards.clear();
                    }
                    hazards.add(d);
                    if pipe != bound {
                        dev.cmd_bind_pipeline(s.cmd, vk::PipelineBindPoint::COMPUTE, pipe);
                        bound = pipe;
                    }
                    dev.cmd_bind_descriptor_sets(s.cmd, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
                    if p.from == 0 && p.to >= groups(d) {
                        dev.cmd_dispatch(s.cmd, d.groups[0], d.groups[1], d.groups[2]);
                    } else {
                        // Only where the pipelines were made with DISPATCH_BASE (`split`).
                        for (b, c) in boxes(d.groups, p.from, p.to) {
                            dev.cmd_dispatch_base(s.cmd, b[0], b[1], b[2], c[0], c[1], c[2]);
                        }
                    }
                }
                dev.cmd_pipeline_barrier(
                    s.cmd,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::HOST | vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &at_end,
                    &[],
                    &[],
                );
                dev.end_command_buffer(s.cmd).map_err(vkerr("recording"))?;
            }
            self.submit_and_wait(&s, "running a graph")?;
            let ran: Vec<(Variant, u64)> =
                pieces.iter().filter_map(|p| costs.get(p.at).map(|&(v, _, w)| (v, (p.to - p.from).saturating_mul(w.max(1))))).collect();
            self.lock_speeds().learn(&ran, t0.elapsed().as_nanos().saturating_mul(1000));
            start = match costs.get(last.at) {
                Some(&(_, g, _)) if last.to < g => Cursor { at: last.at, group: last.to },
                _ => Cursor { at: last.at + 1, group: 0 },
            };
        }
        Ok(())
    }
}
