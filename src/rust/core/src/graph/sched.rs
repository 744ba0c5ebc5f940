//! The scheduler (ggml's `ggml_backend_sched`): splits one graph between
//! several backends, listed by priority, the CPU last.
//!
//! Placement, for every tensor's memory (a view follows the tensor it views):
//! memory that exists already stays where it is, and the backend using it
//! computes the node; a tensor the user pinned goes to that backend; every
//! other node runs on the first backend that supports it (its op, element
//! types and sizes), so an op one backend lacks falls back to the next one,
//! in the end to the CPU; a leaf without memory goes where its first consumer
//! runs. Consecutive nodes on one backend form a split, run as one graph
//! there (one submission on Vulkan).
//!
//! Memory: each backend's tensors get one buffer planned by the graph
//! allocator ([`super::gallocr`], memory reused between lifetimes). A node
//! reading a tensor that lives on another backend reads a copy made in that
//! backend's copy buffer just before the node's split runs; every copy goes
//! through the ledger (`copy_bytes`, `copy_calls`).

use super::gallocr::{plan, root};
use super::Graph;
use crate::backend::{Backend, Node};
use crate::base::log;
use crate::memory::{align_up, Buffer, BufferTag};
use crate::tensor::{DataRef, DataSlot, Tensor};
use anyhow::{bail, Context as _};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One run of consecutive nodes on one backend.
#[derive(Debug, Clone)]
pub struct Split {
    pub backend: usize,
    /// Indices into the graph's nodes (computing nodes only).
    pub nodes: Vec<usize>,
    /// (node index, source index, copy slot) of the sources read through a copy.
    pub copies: Vec<(usize, usize, usize)>,
}

/// A source copied to another backend: the tensor, the backend, the bytes
/// and the offset in that backend's copy buffer.
#[derive(Debug, Clone)]
struct CopySlot {
    tensor: Arc<Tensor>,
    backend: usize,
    offset: usize,
}

/// What the scheduler decided for one graph.
#[derive(Debug, Clone, Default)]
struct Schedule {
    node_ids: Vec<u64>,
    /// Backend of each tensor's memory (by the id of the tensor owning it).
    placed: HashMap<u64, usize>,
    splits: Vec<Split>,
    slots: Vec<CopySlot>,
    copy_bytes: Vec<usize>,
}

#[derive(Debug, Default)]
struct State {
    pinned: HashMap<u64, usize>,
    schedule: Option<Schedule>,
    compute_bufs: Vec<Option<Arc<Buffer>>>,
    copy_bufs: Vec<Option<Arc<Buffer>>>,
    n_copies: usize,
    freed: bool,
}

#[derive(Debug)]
pub struct Scheduler {
    backends: Vec<Arc<Backend>>,
    graph_size: usize,
    parallel: bool,
    state: Mutex<State>,
}

impl Scheduler {
    /// A scheduler over `backends` (highest priority first); a CPU backend
    /// is added last when none of them is one.
    pub fn new(mut backends: Vec<Arc<Backend>>, graph_size: usize, parallel: bool) -> crate::Result<Scheduler> {
        anyhow::ensure!(!backends.is_empty(), "a scheduler needs at least one backend");
        for b in &backends {
            b.check_live()?;
        }
        if !backends.iter().any(|b| matches!(b.kind(), crate::backend::BackendKind::Cpu)) {
            backends.push(Arc::new(Backend::cpu()));
        }
        let n = backends.len();
        let state = State { compute_bufs: vec![None; n], copy_bufs: vec![None; n], ..State::default() };
        Ok(Scheduler { backends, graph_size, parallel, state: Mutex::new(state) })
    }

    pub fn backends(&self) -> &[Arc<Backend>] {
        &self.backends
    }

    pub fn graph_size(&self) -> usize {
        self.graph_size
    }

    pub fn parallel(&self) -> bool {
        self.parallel
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An error once the scheduler was freed.
    pub fn check_live(&self) -> crate::Result<()> {
        anyhow::ensure!(!self.lock().freed, "this scheduler was freed (ggml_backend_sched_free())");
        Ok(())
    }

    pub fn is_freed(&self) -> bool {
        self.lock().freed
    }

    /// Free the scheduler's buffers (as [`Scheduler::reset`]); using it
    /// afterwards is an error.
    pub fn free(&self) {
        self.reset();
        self.lock().freed = true;
    }

    /// The name of backend `i` (`?` for an index that is not one: an
    /// internal error the message then shows).
    fn name_of(&self, i: usize) -> &str {
        self.backends.get(i).map_or("?", |b| b.name())
    }

    fn index_of(&self, b: &Backend) -> crate::Result<usize> {
        self.backends
            .iter()
            .position(|x| std::ptr::eq(x.as_ref(), b))
            .ok_or_else(|| anyhow::anyhow!("backend '{}' is not one of this scheduler's backends", b.name()))
    }

    /// Run `t` (its memory) on backend `b`, from the next allocation on.
    pub fn set_tensor_backend(&self, t: &Arc<Tensor>, b: &Backend) -> crate::Result<()> {
        self.check_live()?;
        let i = self.index_of(b)?;
        self.lock().pinned.insert(root(t).id(), i);
        Ok(())
    }

    /// The backend `t` was placed on (or pinned to), if any.
    pub fn tensor_backend(&self, t: &Arc<Tensor>) -> Option<Arc<Backend>> {
        let st = self.lock();
        let id = root(t).id();
        let i = st.schedule.as_ref().and_then(|s| s.placed.get(&id)).or_else(|| st.pinned.get(&id))?;
        self.backends.get(*i).cloned()
    }

    pub fn n_splits(&self) -> usize {
        self.lock().schedule.as_ref().map_or(0, |s| s.splits.len())
    }

    /// Tensor copies between backends made by the last compute.
    pub fn n_copies(&self) -> usize {
        self.lock().n_copies
    }

    /// Forget the last schedule and free the scheduler's buffers: the tensors
    /// that had memory in them have none any more.
    pub fn reset(&self) {
        let mut st = self.lock();
        st.schedule = None;
        let State { compute_bufs, copy_bufs, .. } = &mut *st;
        for b in compute_bufs.iter_mut().chain(copy_bufs.iter_mut()) {
            if let Some(b) = b.take() {
                b.free();
            }
        }
    }

    /// The backend (index) using `buf`'s memory.
    fn owner_of(&self, buf: &Buffer, t: &Tensor) -> crate::Result<usize> {
        self.backends.iter().position(|b| b.uses_buffer(buf)).ok_or_else(|| {
            anyhow::anyhow!(
                "{} lives in {}, which none of the scheduler's backends computes on",
                t.describe(),
                buf.describe()
            )
        })
    }

    fn place(&self, g: &Graph, pinned: &HashMap<u64, usize>) -> crate::Result<Schedule> {
        let mut placed: HashMap<u64, usize> = HashMap::new();
        for t in g.leafs().iter().chain(g.nodes()) {
            let r = root(t);
            if placed.contains_key(&r.id()) {
                continue;
            }
            if r.has_data() {
                let d = r.resolve()?;
                let i = self.owner_of(&d.buf, r)?;
                if let Some(&p) = pinned.get(&r.id()) {
                    anyhow::ensure!(
                        p == i,
                        "{} was set to run on backend '{}', but its memory is on '{}'",
                        r.describe(),
                        self.name_of(p),
                        self.name_of(i)
                    );
                }
                placed.insert(r.id(), i);
            } else if let Some(&p) = pinned.get(&r.id()) {
                placed.insert(r.id(), p);
            }
        }
        let mut node_backend: Vec<Option<usize>> = vec![None; g.n_nodes()];
        for (i, n) in g.nodes().iter().enumerate() {
            if n.op().is_view() {
                continue;
            }
            let srcs: Vec<_> = n.srcs().iter().map(|s| *s.layout()).collect();
            let fits = |b: usize| self.backends.get(b).is_some_and(|x| x.supports_node(n.op(), &srcs, n.layout()));
            let r = root(n);
            let b = match placed.get(&r.id()) {
                Some(&b) => {
                    if !fits(b) {
                        bail!(
                            "{} must be computed on backend '{}' (its memory is there), which cannot compute {}",
                            n.describe(),
                            self.name_of(b),
                            n.op().name()
                        );
                    }
                    b
                }
                None => {
                    let b = (0..self.backends.len()).find(|&b| fits(b)).ok_or_else(|| {
                        anyhow::anyhow!("no backend of the scheduler can compute {}", n.describe())
                    })?;
                    if b > 0 {
                        log::debug(&format!(
                            "scheduler: {} runs on '{}' ('{}' cannot compute {})",
                            n.describe(),
                            self.name_of(b),
                            self.name_of(0),
                            n.op().name()
                        ));
                    }
                    placed.insert(r.id(), b);
                    b
                }
            };
            // BOUNDS: node_backend has g.n_nodes() entries, and i
            // enumerates g.nodes().
            node_backend[i] = Some(b);
        }
        // Leaves without memory go where they are first read.
        let cpu = self.backends.len() - 1;
        for l in g.leafs() {
            if placed.contains_key(&l.id()) {
                continue;
            }
            let first = g.nodes().iter().enumerate().find_map(|(i, n)| {
                let reads = n.srcs().iter().any(|s| root(s).id() == l.id());
                if reads {
                    // BOUNDS: as above, i enumerates g.nodes().
                    node_backend[i]
                } else {
                    None
                }
            });
            placed.insert(l.id(), first.unwrap_or(cpu));
        }
        // Splits, and the sources each reads from another backend.
        let mut splits: Vec<Split> = Vec::new();
        let mut slots: Vec<CopySlot> = Vec::new();
        let mut copy_bytes = vec![0usize; self.backends.len()];
        for (n, (i, &b)) in g.nodes().iter().zip(node_backend.iter().enumerate()) {
            let Some(b) = b else { continue };
            if splits.last().is_none_or(|s| s.backend != b) {
                splits.push(Split { backend: b, nodes: Vec::new(), copies: Vec::new() });
            }
            // INVARIANT: a split was pushed just above when there was none.
            let split = splits.last_mut().expect("a split");
            split.nodes.push(i);
            for (j, s) in n.srcs().iter().enumerate() {
                let from = placed.get(&root(s).id()).copied().unwrap_or(cpu);
                if from == b {
                    continue;
                }
                let slot = match slots.iter().position(|c| c.tensor.id() == s.id() && c.backend == b) {
                    Some(k) => k,
                    None => {
                        // BOUNDS: copy_bytes has one entry per backend, and
                        // b is one: `fits` (get) accepted it, or it came
                        // from `index_of` / `owner_of` (positions in
                        // self.backends) through `placed`.
                        let at = &mut copy_bytes[b];
                        slots.push(CopySlot { tensor: s.clone(), backend: b, offset: *at });
                        *at = align_up(*at + s.layout().span_bytes().max(1));
                        slots.len() - 1
                    }
                };
                split.copies.push((i, j, slot));
            }
        }
        let node_ids = g.nodes().iter().map(|n| n.id()).collect();
        Ok(Schedule { node_ids, placed, splits, slots, copy_bytes })
    }

    /// Buffers of at least `sizes` bytes per backend, reusing those that fit
    /// when `reuse` (their tensors are given up otherwise).
    fn ensure(&self, bufs: &mut [Option<Arc<Buffer>>], sizes: &[usize], reuse: bool) -> crate::Result<()> {
        anyhow::ensure!(
            bufs.len() == sizes.len() && sizes.len() == self.backends.len(),
            "internal: the scheduler has {} buffers for {} sizes and {} backends",
            bufs.len(),
            sizes.len(),
            self.backends.len()
        );
        for ((slot, &n), backend) in bufs.iter_mut().zip(sizes).zip(&self.backends) {
            let fits = slot.as_ref().is_some_and(|b| b.size() >= n && !b.is_freed());
            if n > 0 && !(reuse && fits) {
                *slot = Some(Arc::new(Buffer::allocate(backend.as_ref(), n, BufferTag::User)?));
            }
        }
        Ok(())
    }

    /// Decide the placement of `g` and make sure the buffers it needs exist;
    /// with `assign`, give its tensors their memory.
    fn prepare(&self, g: &Graph, assign: bool) -> crate::Result<()> {
        self.check_live()?;
        for b in &self.backends {
            b.check_live()?;
        }
        for t in g.leafs().iter().chain(g.nodes()) {
            t.check_live()?;
        }
        let mut st = self.lock();
        let schedule = self.place(g, &st.pinned)?;
        let plans: Vec<_> = (0..self.backends.len())
            .map(|b| plan(g, &|t| schedule.placed.get(&t.id()) == Some(&b)))
            .collect();
        let sizes: Vec<usize> = plans.iter().map(|p| p.peak).collect();
        let State { compute_bufs, copy_bufs, .. } = &mut *st;
        // Memory already handed to tensors is not handed out again.
        let reuse = !assign || plans.iter().all(|p| p.offsets.is_empty());
        self.ensure(compute_bufs, &sizes, reuse)?;
        self.ensure(copy_bufs, &schedule.copy_bytes, true)?;
        if assign {
            for (b, p) in plans.iter().enumerate() {
                for (t, off) in &p.offsets {
                    let buf = compute_bufs
                        .get(b)
                        .cloned()
                        .flatten()
                        .ok_or_else(|| anyhow::anyhow!("internal: backend '{}' has no compute buffer for its plan", self.name_of(b)))?;
                    t.set_storage(DataSlot { buf, offset: *off });
                }
            }
        }
        st.schedule = Some(schedule);
        Ok(())
    }

    /// Plan `g` and allocate what it needs, without giving tensors memory.
    pub fn reserve(&self, g: &Graph) -> crate::Result<()> {
        self.prepare(g, false)
    }

    /// Place `g` and give every tensor without memory its place.
    pub fn alloc_graph(&self, g: &Graph) -> crate::Result<()> {
        self.prepare(g, true)
    }

    /// Compute `g`: allocated first when it was not the last graph
    /// allocated or some of its tensors lack memory.
    pub fn compute(&self, g: &Graph) -> crate::Result<()> {
        self.check_live()?;
        let same = {
            let st = self.lock();
            st.schedule.as_ref().is_some_and(|s| s.node_ids.iter().copied().eq(g.nodes().iter().map(|n| n.id())))
        };
        let complete = g.leafs().iter().chain(g.nodes()).all(|t| t.has_data());
        if !same || !complete {
            self.alloc_graph(g)?;
        }
        let (schedule, copy_bufs) = {
            let st = self.lock();
            let schedule = st
                .schedule
                .clone()
                .ok_or_else(|| anyhow::anyhow!("internal: the scheduler has no plan for this graph; call ggml_backend_sched_alloc_graph() first"))?;
            (schedule, st.copy_bufs.clone())
        };
        let mut n_copies = 0;
        let mut done = vec![false; schedule.slots.len()];
        for split in &schedule.splits {
            let mut copied: HashMap<usize, DataRef> = HashMap::new();
            for &(_, _, k) in &split.copies {
                let slot = schedule.slots.get(k).ok_or_else(|| anyhow::anyhow!("internal: copy slot {k} is not in the schedule"))?;
                let src = slot.tensor.resolve()?;
                let dst = copy_bufs
                    .get(slot.backend)
                    .cloned()
                    .flatten()
                    .ok_or_else(|| anyhow::anyhow!("internal: backend '{}' has no copy buffer", self.name_of(slot.backend)))?;
                let span = src.layout.span_bytes();
                // BOUNDS: done has one entry per slot, and k indexed
                // schedule.slots (get) just above.
                if !done[k] {
                    let what = format!("copying {} to backend '{}'", slot.tensor.describe(), self.name_of(slot.backend));
                    src.buf.copy_to(src.offset, &dst, slot.offset, span, &what).with_context(|| what.clone())?;
                    // BOUNDS: as above.
                    done[k] = true;
                    n_copies += 1;
                }
                copied.insert(k, DataRef { buf: dst, offset: slot.offset, layout: src.layout });
            }
            let mut nodes = Vec::with_capacity(split.nodes.len());
            for &i in &split.nodes {
                let t = g.nodes().get(i).ok_or_else(|| anyhow::anyhow!("internal: node {i} of the schedule is not in this graph"))?;
                let what = || format!("computing {}", t.describe());
                let mut srcs = t.srcs().iter().map(|s| s.resolve()).collect::<crate::Result<Vec<_>>>().with_context(what)?;
                for &(_, j, k) in split.copies.iter().filter(|c| c.0 == i) {
                    match (srcs.get_mut(j), copied.get(&k)) {
                        (Some(s), Some(c)) => *s = c.clone(),
                        _ => bail!("internal: source {j} of {} has no copy {k}", t.describe()),
                    }
                }
                let dst = t.resolve().with_context(what)?;
                nodes.push(Node { op: t.op().clone(), srcs, dst, tensor: t.clone() });
            }
            let backend = self.backends.get(split.backend).ok_or_else(|| anyhow::anyhow!("internal: split on backend {} of {}", split.backend, self.backends.len()))?;
            backend.compute(&nodes)?;
        }
        self.lock().n_copies = n_copies;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
