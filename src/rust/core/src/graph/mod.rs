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

use crate::backend::{Backend, Node};
use crate::memory::{Buffer, BufferTag};
use crate::op::Op;
use crate::tensor::Tensor;
use anyhow::Context as _;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Graph {
    nodes: Vec<Arc<Tensor>>,
    leafs: Vec<Arc<Tensor>>,
    seen: HashSet<u64, BuildHasherDefault<IdHash>>,
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
        Graph { nodes, leafs, seen }
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
        let nodes = self.plan()?;
        backend.compute(&nodes)
    }
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
