//! Building one graph in a place and computing it with a single call on the
//! place's backend (one queue submission on Vulkan).
//!
//! A [`GraphBuilder`] hands out a context with room for the next few nodes (the
//! pass pool's current one on device "gpu", contexts of its own on "cpu";
//! a new one when one fills up), keeps the scalar constants of the graph in
//! one small table (views into it, filled by one upload), and, once
//! computed, turns the results into *detached* leaves: tensors without an op
//! that alias the results' memory, so that a later graph reading them does
//! not compute their ancestors again (and on "cpu" the ancestors' memory is
//! freed with the graph).

use super::place::cpu_alloc;
use super::value::{Place, EngineVal};
use crate::backend::Backend;
use crate::base::dtype::DType;
use crate::graph::Graph;
use crate::op::Op as G;
use crate::residency::{self, Scope};
use crate::tensor::{Context, DataSlot, Tensor as ETensor, TENSOR_OVERHEAD};
use anyhow::Result;
use std::cell::Cell;
use std::sync::Arc;

thread_local! {
    /// Graphs computed by builders on this thread (counted per thread, so
    /// that tapes on other threads do not change the figure).
    static GRAPHS: Cell<u64> = const { Cell::new(0) };
}

/// Graphs computed by builders on this thread so far (each is one backend
/// compute call).
pub fn graphs_computed() -> u64 {
    GRAPHS.with(Cell::get)
}

/// Descriptors reserved before each rule appends its nodes.
const RULE_SLOTS: usize = 96;
/// Descriptors of each context of a device-"cpu" graph.
const CPU_CTX_SLOTS: usize = 512;
/// Scalars per constant table.
const TABLE: usize = 64;

type T = Arc<ETensor>;

pub struct GraphBuilder {
    place: Place,
    backend: Arc<Backend>,
    ctxs: Vec<Arc<Context>>,
    /// Constant tables and their values (a prefix of each table is used).
    tables: Vec<(T, Vec<f64>)>,
    /// Leaves filled with given values once they have memory.
    data: Vec<(T, Vec<f64>)>,
}

impl GraphBuilder {
    /// A builder of a graph in `place` (an error when "gpu" has no backend).
    pub fn new(place: Place) -> Result<GraphBuilder> {
        Ok(GraphBuilder { place, backend: place.backend()?, ctxs: Vec::new(), tables: Vec::new(), data: Vec::new() })
    }

    pub fn place(&self) -> Place {
        self.place
    }

    /// The type values are computed in (f64 on "cpu", f32 on "gpu").
    pub fn dtype(&self) -> DType {
        self.place.dtype()
    }

    /// Whether the place's backend computes `op` (fused ops are the CPU
    /// backend's: elsewhere rules build their unfused form).
    pub fn supports(&self, op: &G) -> bool {
        self.backend.supports(op, self.dtype())
    }

    /// Whether the backend's kernels read strided views of their sources
    /// themselves (the CPU backend's do), so rules need not copy them first.
    pub fn reads_views(&self) -> bool {
        !self.backend.is_vulkan()
    }

    /// A context with room for the next rule's nodes.
    pub fn ctx(&mut self) -> Result<Arc<Context>> {
        self.ctx_for(RULE_SLOTS)
    }

    fn ctx_for(&mut self, n: usize) -> Result<Arc<Context>> {
        let c = match self.place {
            Place::Pools => residency::state().ctx_ensure(n, Scope::Pass)?,
            Place::Cpu => match self.ctxs.last() {
                Some(c) if c.mem_size() - c.used_mem() >= n * TENSOR_OVERHEAD => return Ok(c.clone()),
                _ => Arc::new(Context::new(CPU_CTX_SLOTS.max(n) * TENSOR_OVERHEAD, true)?),
            },
        };
        if !self.ctxs.iter().any(|x| Arc::ptr_eq(x, &c)) {
            self.ctxs.push(c.clone());
        }
        Ok(c)
    }

    /// A `[1, 1]` tensor holding `v` (a view into the constant table).
    pub fn scalar(&mut self, c: &Context, v: f64) -> Result<T> {
        let dtype = self.dtype();
        let (tab, i) = match self.tables.last_mut() {
            Some((t, vals)) if vals.len() < TABLE => {
                if let Some(i) = vals.iter().position(|x| x.to_bits() == v.to_bits()) {
                    (t.clone(), i)
                } else {
                    vals.push(v);
                    (t.clone(), vals.len() - 1)
                }
            }
            _ => {
                let t = c.new_tensor(dtype, &[TABLE])?;
                self.tables.push((t.clone(), vec![v]));
                (t, 0)
            }
        };
        let es = dtype.size();
        c.view(&tab, &[1, 1], &[es], i * es)
    }

    /// A `[rows, cols]` tensor filled with `v`.
    pub fn fill(&mut self, c: &Context, rows: usize, cols: usize, v: f64) -> Result<T> {
        let s = self.scalar(c, v)?;
        if rows * cols == 1 {
            return Ok(s);
        }
        let shape = blank(c, rows, cols)?;
        c.op(G::Repeat, &[s, shape])
    }

    /// A new leaf of `dtype` (None: the compute type) and sizes `ne` holding
    /// `vals` (uploaded once the graph has memory).
    pub fn data(&mut self, c: &Context, dtype: Option<DType>, ne: &[usize], vals: Vec<f64>) -> Result<T> {
        let t = c.new_tensor(dtype.unwrap_or(self.dtype()), ne)?;
        self.data.push((t.clone(), vals));
        Ok(t)
    }

    /// Gives every tensor of `g` memory (on "cpu" a buffer each; on "gpu"
    /// one new pass-pool buffer per context) and fills the constants.
    fn alloc(&mut self, g: &Graph) -> Result<()> {
        match self.place {
            Place::Pools => {
                let mut s = residency::state();
                for c in &self.ctxs {
                    s.ctx_flush(c, Scope::Pass)?;
                }
            }
            Place::Cpu => {
                for t in g.leafs().iter().chain(g.nodes()) {
                    cpu_alloc(t)?;
                }
            }
        }
        for (t, vals) in self.tables.iter().chain(&self.data) {
            if t.has_data() {
                crate::tensor::io::set_values(t, vals, 0)?;
            }
        }
        Ok(())
    }

    /// Computes `outs` (and what they depend on) in one graph; returns them
    /// as detached leaves.
    pub fn compute(mut self, outs: &[T]) -> Result<Vec<T>> {
        self.compute_keep(outs)
    }

    /// As `compute`, keeping the builder for more nodes (results computed
    /// here are computed again if a later graph reaches them through
    /// their ancestors: use the returned leaves instead).
    pub fn compute_keep(&mut self, outs: &[T]) -> Result<Vec<T>> {
        self.run(outs)?;
        let c = self.ctx_for(outs.len().max(1))?;
        outs.iter().map(|o| detach(&c, o)).collect()
    }

    /// Computes `outs` for their effect (in-place updates); nothing is kept.
    pub fn run(&mut self, outs: &[T]) -> Result<()> {
        let mut g = Graph::new();
        for o in outs {
            g.expand(o)?;
        }
        self.alloc(&g)?;
        if g.n_nodes() > 0 {
            g.compute(&self.backend)?;
            GRAPHS.with(|n| n.set(n.get() + 1));
        }
        Ok(())
    }
}

/// A tensor of sizes `[rows, cols]` whose values do not matter (the shape
/// operand of `repeat`).
pub fn blank(c: &Context, rows: usize, cols: usize) -> Result<T> {
    c.new_tensor(DType::F32, &[rows, cols])
}

/// A leaf aliasing the memory of the computed tensor `t`.
pub fn detach(c: &Context, t: &T) -> Result<T> {
    if *t.op() == G::None {
        return Ok(t.clone());
    }
    let r = t.resolve()?;
    let leaf = c.push(r.layout, G::None, Vec::new(), None)?;
    leaf.set_storage(DataSlot { buf: r.buf, offset: r.offset });
    Ok(leaf)
}

/// Computes the graph of `build` in `place` (one output per returned tensor)
/// and gives the results as values of the given shapes.
pub fn run_vals(
    place: Place,
    build: impl FnOnce(&mut GraphBuilder, &Context) -> Result<Vec<(T, usize, usize)>>,
) -> Result<Vec<EngineVal>> {
    let mut b = GraphBuilder::new(place)?;
    let c = b.ctx()?;
    let outs = build(&mut b, &c)?;
    let ts: Vec<T> = outs.iter().map(|o| o.0.clone()).collect();
    let done = b.compute(&ts)?;
    Ok(done.into_iter().zip(outs).map(|(t, (_, rows, cols))| EngineVal::new(t, rows, cols, place)).collect())
}
