//! The graph allocator (ggml's `ggml_gallocr`): gives a graph's tensors that
//! have no memory a place in ONE buffer, reusing the bytes of a tensor once
//! its last consumer has run, so tensors whose lifetimes do not overlap share
//! memory. An element-wise node may also take over the memory of its first
//! source when that source dies at this node (computing in place).
//!
//! Kept for the whole graph: leaves (inputs and weights, set by the user
//! after allocation), tensors flagged input or output, and results nothing in
//! the graph consumes. [`plan`] works out the offsets and the peak; the
//! [`GraphAllocator`] allocates the buffer and hands out the memory.

use super::Graph;
use crate::backend::Backend;
use crate::memory::{align_up, Buffer, BufferTag};
use crate::op::codes::elementwise_in_place;
use crate::op::Op;
use crate::tensor::{DataSlot, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The tensor whose memory `t` is (itself, or the tensor a view views).
pub fn root(t: &Arc<Tensor>) -> &Arc<Tensor> {
    match t.view_base() {
        Some((base, _)) => base,
        None => t,
    }
}

/// Where each tensor goes and how much memory that takes.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Tensors and their byte offsets in the buffer.
    pub offsets: Vec<(Arc<Tensor>, usize)>,
    /// Bytes the buffer needs: the highest end of any tensor.
    pub peak: usize,
    /// Bytes without reuse: every tensor in memory of its own.
    pub naive: usize,
    /// Tensors placed in memory freed by another tensor.
    pub reused: usize,
    /// Nodes computed in the memory of their first source.
    pub in_place: usize,
}

/// Free blocks of a growing address range, best fit first.
#[derive(Default)]
struct Blocks {
    free: Vec<(usize, usize)>,
    top: usize,
}

impl Blocks {
    /// An offset for `size` bytes, and whether it is reused memory.
    fn take(&mut self, size: usize) -> (usize, bool) {
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, &(_, s))| s >= size)
            .min_by_key(|(_, &(_, s))| s)
            .map(|(i, _)| i);
        if let Some(i) = best {
            // BOUNDS: i enumerates self.free just above, unchanged since.
            let (off, s) = self.free[i];
            if s == size {
                self.free.remove(i);
            } else {
                // BOUNDS: as above.
                self.free[i] = (off + size, s - size);
            }
            return (off, true);
        }
        // Grow from a free block that ends at the top, if there is one.
        if let Some(i) = self.free.iter().position(|&(o, s)| o + s == self.top) {
            let (off, _) = self.free.remove(i);
            self.top = off + size;
            return (off, true);
        }
        let off = self.top;
        self.top += size;
        (off, false)
    }

    fn give(&mut self, off: usize, size: usize) {
        self.free.push((off, size));
        self.free.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.free.len());
        for &(o, s) in &self.free {
            match merged.last_mut() {
                Some((mo, ms)) if *mo + *ms == o => *ms += s,
                _ => merged.push((o, s)),
            }
        }
        self.free = merged;
    }
}

/// Plan memory for the tensors of `g` that have none and that `want` accepts
/// (all of them for a plain allocator; one backend's for the scheduler).
pub fn plan(g: &Graph, want: &dyn Fn(&Arc<Tensor>) -> bool) -> Plan {
    let needs = |t: &Arc<Tensor>| t.view_base().is_none() && !t.has_data() && want(t);
    // Last node (index in g.nodes()) reading each tensor's memory.
    let mut last: HashMap<u64, usize> = HashMap::new();
    for (i, n) in g.nodes().iter().enumerate() {
        for s in n.srcs() {
            last.insert(root(s).id(), i);
        }
    }
    let kept = |t: &Arc<Tensor>| {
        *t.op() == Op::None || t.flags() & (Tensor::INPUT | Tensor::OUTPUT) != 0 || !last.contains_key(&t.id())
    };
    let mut plan = Plan::default();
    let mut blocks = Blocks::default();
    let mut at: HashMap<u64, (usize, usize)> = HashMap::new();
    let place = |t: &Arc<Tensor>, plan: &mut Plan, blocks: &mut Blocks, at: &mut HashMap<u64, (usize, usize)>| {
        let size = align_up(t.nbytes().max(1));
        let (off, reused) = blocks.take(size);
        plan.naive += size;
        plan.reused += reused as usize;
        at.insert(t.id(), (off, size));
        plan.offsets.push((t.clone(), off));
    };
    for l in g.leafs() {
        if needs(l) {
            place(l, &mut plan, &mut blocks, &mut at);
        }
    }
    for (i, n) in g.nodes().iter().enumerate() {
        if needs(n) {
            let src = n.srcs().first().map(root);
            let inherit = src.filter(|s| {
                elementwise_in_place(n.op())
                    && last.get(&s.id()) == Some(&i)
                    && !kept(s)
                    && at.contains_key(&s.id())
                    && s.layout() == n.layout()
                    && n.layout().is_contiguous()
            });
            match inherit {
                Some(s) => {
                    let (off, size) = at.remove(&s.id()).unwrap_or((0, 0));
                    plan.naive += align_up(n.nbytes().max(1));
                    plan.in_place += 1;
                    at.insert(n.id(), (off, size));
                    plan.offsets.push((n.clone(), off));
                }
                None => place(n, &mut plan, &mut blocks, &mut at),
            }
        }
        // Free what dies here.
        for s in n.srcs() {
            let r = root(s);
            if last.get(&r.id()) == Some(&i) && !kept(r) {
                if let Some((off, size)) = at.remove(&r.id()) {
                    blocks.give(off, size);
                }
            }
        }
    }
    plan.peak = blocks.top;
    plan
}

/// A graph allocator on one backend.
#[derive(Debug)]
pub struct GraphAllocator {
    backend: Arc<Backend>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The current buffer and whether tensors were given memory in it.
    buffer: Option<(Arc<Buffer>, bool)>,
    last: Option<Plan>,
}

impl GraphAllocator {
    pub fn new(backend: Arc<Backend>) -> crate::Result<GraphAllocator> {
        backend.check_live()?;
        Ok(GraphAllocator { backend, state: Mutex::new(State::default()) })
    }

    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of at least `bytes` that no tensor uses yet (the current one
    /// when it fits and is unused; a new one otherwise).
    fn fresh_buffer(&self, st: &mut State, bytes: usize) -> crate::Result<Option<Arc<Buffer>>> {
        if bytes == 0 {
            return Ok(None);
        }
        if let Some((b, false)) = &st.buffer {
            if b.size() >= bytes && !b.is_freed() {
                return Ok(Some(b.clone()));
            }
        }
        // A buffer in use stays with its tensors (they hold it); this
        // allocator moves on to a new one.
        let b = Arc::new(Buffer::allocate(self.backend.as_ref(), bytes, BufferTag::User)?);
        st.buffer = Some((b.clone(), false));
        Ok(Some(b))
    }

    /// Make sure a buffer large enough for `g` exists (nothing is given memory).
    pub fn reserve(&self, g: &Graph) -> crate::Result<Plan> {
        self.backend.check_live()?;
        let p = plan(g, &|_| true);
        let mut st = self.lock();
        self.fresh_buffer(&mut st, p.peak)?;
        st.last = Some(p.clone());
        Ok(p)
    }

    /// Give every tensor of `g` without memory its place.
    pub fn alloc_graph(&self, g: &Graph) -> crate::Result<Plan> {
        self.backend.check_live()?;
        for t in g.leafs().iter().chain(g.nodes()) {
            t.check_live()?;
        }
        let p = plan(g, &|_| true);
        let mut st = self.lock();
        if let Some(buf) = self.fresh_buffer(&mut st, p.peak)? {
            for (t, off) in &p.offsets {
                t.set_storage(DataSlot { buf: buf.clone(), offset: *off });
            }
            st.buffer = Some((buf, true));
        }
        st.last = Some(p.clone());
        Ok(p)
    }

    /// Bytes of the current buffer (0 when there is none).
    pub fn buffer_size(&self) -> usize {
        match &self.lock().buffer {
            Some((b, _)) if !b.is_freed() => b.size(),
            _ => 0,
        }
    }

    /// The plan of the last reserve or allocation.
    pub fn last_plan(&self) -> Option<Plan> {
        self.lock().last.clone()
    }

    /// Free the buffer: tensors that had memory in it have none any more.
    pub fn free(&self) {
        if let Some((b, _)) = self.lock().buffer.take() {
            b.free();
        }
    }
}

#[cfg(test)]
mod tests;
