//! Forward graphs: the nodes needed for a result, in topological order, and
//! their resolution into what a backend computes.
//!
//! A backend receives, for every node that is not a view, the [`Op`] and for
//! each source and the destination a [`crate::tensor::DataRef`]: buffer, byte offset and
//! layout (views already resolved to their base buffer, offset and strides).

use crate::backend::{Backend, Node};
use crate::memory::{Buffer, BufferTag};
use crate::op::Op;
use crate::tensor::Tensor;
use anyhow::Context as _;
use std::collections::HashSet;
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Graph {
    nodes: Vec<Arc<Tensor>>,
    leafs: Vec<Arc<Tensor>>,
    seen: HashSet<u64>,
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
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
