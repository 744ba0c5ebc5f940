//! Forward graphs: the nodes needed for a result, in topological order, and
//! their resolution into what a backend computes.
//!
//! A backend receives, for every node that is not a view, the [`Op`] and for
//! each source and the destination a [`crate::tensor::DataRef`]: buffer, byte offset and
//! layout (views already resolved to their base buffer, offset and strides).
//!
//! Beside the graph itself: [`gallocr`], the graph allocator (memory reused
//! between tensors whose lifetimes do not overlap); [`sched`], the scheduler
//! that splits a graph between backends; [`inspect`], lookups, views and
//! printing.

pub mod gallocr;
pub mod inspect;
pub mod sched;
#[cfg(test)]
mod tests;

use crate::backend::{Backend, Node};
use crate::memory::{Buffer, BufferTag};
use crate::op::Op;
use crate::tensor::Tensor;
use anyhow::Context as _;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
pub struct Graph {
    nodes: Vec<Arc<Tensor>>,
    leafs: Vec<Arc<Tensor>>,
    seen: HashSet<u64, BuildHasherDefault<IdHash>>,
    /// The nodes as last resolved, and the storage generation then: computed
    /// again without resolving while no tensor was given other memory.
    resolved: Mutex<Option<(u64, Arc<[Node]>)>>,
}

/// Hashes tensor ids (unique integers) with one multiplication, not
/// SipHash: graphs are built for every op of a training step.
#[derive(Debug, Default)]
struct IdHash(u64);

impl Hasher for IdHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    /// A graph of given nodes (topological order) and leaves.
    pub fn from_parts(nodes: Vec<Arc<Tensor>>, leafs: Vec<Arc<Tensor>>) -> Graph {
        let seen = nodes.iter().chain(&leafs).map(|t| t.id()).collect();
        Graph { nodes, leafs, seen, resolved: Mutex::default() }
    }

    /// A graph computing `out`.
    pub fn build(out: &Arc<Tensor>) -> crate::Result<Graph> {
        let mut g = Graph::new();
        g.expand(out)?;
        Ok(g)
    }

    /// Add `out` and everything it depends on (iteratively: deep chains are fine).
    pub fn expand(&mut self, out: &Arc<Tensor>) -> crate::Result<()> {
        out.check_live()?;
        *self.resolved.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        let mut stack: Vec<(Arc<Tensor>, bool)> = vec![(out.clone(), false)];
        while let Some((t, done)) = stack.pop() {
            if done {
                if *t.op() == Op::None {
                    self.leafs.push(t);
                } else {
                    self.nodes.push(t);
                }
                continue;
            }
            if !self.seen.insert(t.id()) {
                continue;
            }
            t.check_live()?;
            stack.push((t.clone(), true));
            for s in t.srcs().iter().rev() {
                if !self.seen.contains(&s.id()) {
                    stack.push((s.clone(), false));
                }
            }
        }
        Ok(())
    }

    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }
    pub fn n_leafs(&self) -> usize {
        self.leafs.len()
    }
    pub fn nodes(&self) -> &[Arc<Tensor>] {
        &self.nodes
    }
    pub fn leafs(&self) -> &[Arc<Tensor>] {
        &self.leafs
    }

    /// Resolve every computing node: checks liveness and that all data exists.
    pub fn plan(&self) -> crate::Result<Vec<Node>> {
        let mut out = Vec::with_capacity(self.nodes.len());
        for t in &self.nodes {
            if t.op().is_view() {
                continue;
            }
            let what = || format!("computing {}", t.describe());
            let srcs = t
                .srcs()
                .iter()
                .map(|s| s.resolve())
                .collect::<crate::Result<Vec<_>>>()
                .with_context(what)?;
            let dst = t.resolve().with_context(what)?;
            out.push(Node { op: t.op().clone(), srcs, dst, tensor: t.clone() });
        }
        Ok(out)
    }

    /// Give every tensor of the graph that has no memory yet (views aside:
    /// they use their base's) a place in ONE new buffer on `backend`. `None`
    /// when every tensor already has memory.
    pub fn alloc(&self, backend: &Backend, tag: BufferTag) -> crate::Result<Option<Arc<Buffer>>> {
        crate::tensor::alloc_group(self.leafs.iter().chain(self.nodes.iter()), backend, tag)
    }

    /// Compute the graph on `backend`.
    pub fn compute(&self, backend: &Backend) -> crate::Result<()> {
        let nodes = self.resolved()?;
        backend.compute(&nodes)
    }

    /// [`Graph::plan`], kept between computes: the kept nodes are used
    /// again while no tensor was given memory since (the storage
    /// generation), every context involved is live and no buffer was freed;
    /// otherwise resolved again (which reports what is wrong).
    fn resolved(&self) -> crate::Result<Arc<[Node]>> {
        let generation = crate::tensor::storage_generation();
        let mut kept = self.resolved.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((g, nodes)) = kept.as_ref() {
            if *g == generation && still_valid(nodes) {
                return Ok(nodes.clone());
            }
        }
        *kept = None;
        let nodes: Arc<[Node]> = self.plan()?.into();
        *kept = Some((generation, nodes.clone()));
        Ok(nodes)
    }
}

/// Whether resolved nodes still hold: their tensors' and sources' contexts
/// (and those of the tensors they view) live, their buffers not freed.
fn still_valid(nodes: &[Node]) -> bool {
    let live = |t: &Tensor| t.check_live().is_ok() && t.view_base().is_none_or(|(b, _)| b.check_live().is_ok());
    // Graphs mostly live in one buffer or a few: each run of one is checked once.
    let mut last = None;
    nodes.iter().all(|n| {
        live(&n.tensor)
            && n.tensor.srcs().iter().all(|s| live(s))
            && n.srcs.iter().chain(std::iter::once(&n.dst)).all(|r| {
                let id = r.buf.id();
                let ok = last == Some(id) || !r.buf.is_freed();
                last = Some(id);
                ok
            })
    })
}

/// A graph resolved once for one backend and computed as often as wanted
/// (ggml's graph plan). Freed memory is still detected at every compute.
#[derive(Debug)]
pub struct GraphPlan {
    backend: Arc<Backend>,
    nodes: Vec<Node>,
}

impl GraphPlan {
    pub fn new(g: &Graph, backend: Arc<Backend>) -> crate::Result<GraphPlan> {
        backend.check_live()?;
        Ok(GraphPlan { nodes: g.plan()?, backend })
    }

    /// Compute on `backend`, which must be the plan's.
    pub fn compute(&self, backend: &Backend) -> crate::Result<()> {
        anyhow::ensure!(
            std::ptr::eq(backend, self.backend.as_ref()),
            "the plan was made for backend '{}', not for '{}'",
            self.backend.name(),
            backend.name()
        );
        for n in &self.nodes {
            n.tensor.check_live()?;
        }
        backend.compute(&self.nodes)
    }
}
