//! Building one ggml graph in the pass pool and computing it with a single
//! call on the residency backend (one queue submission on Vulkan).
//!
//! A [`Builder`] hands out the pass pool's current context with room for
//! the next few nodes (starting a new context when one fills up), keeps the
//! scalar constants of the graph in one small table (views into it, filled by
//! one upload), and, once computed, turns the results into *detached* leaves:
//! tensors without an op that alias the results' memory, so that a later
//! graph reading them does not compute their ancestors again.

use super::device::Dev;
use crate::tensor::Context;
use crate::base::dtype::DType;
use crate::graph::Graph;
use crate::op::Op as G;
use crate::residency::{self, Scope};
use crate::tensor::{DataSlot as Mem, Tensor as ETensor};
use anyhow::{anyhow, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static GRAPHS: AtomicU64 = AtomicU64::new(0);

/// Graphs computed by builders so far (each is one backend compute call).
pub fn graphs_computed() -> u64 {
    GRAPHS.load(Ordering::SeqCst)
}

/// Descriptors reserved before each rule appends its nodes.
const RULE_SLOTS: usize = 96;
/// Scalars per constant table.
const TABLE: usize = 64;

type T = Arc<ETensor>;

#[derive(Default)]
pub struct Builder {
    ctxs: Vec<Arc<Context>>,
    /// Constant tables and their values (a prefix of each table is used).
    tables: Vec<(T, Vec<f64>)>,
    /// Leaves filled with given values once they have memory.
    data: Vec<(T, Vec<f64>)>,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// The pass pool's context, with room for the next rule's nodes.
    pub fn ctx(&mut self) -> Result<Arc<Context>> {
        let c = {
            let mut s = residency::state();
            if s.backend().is_none() {
                return Err(no_backend());
            }
            s.ctx_ensure(RULE_SLOTS, Scope::Pass)?
        };
        if !self.ctxs.iter().any(|x| Arc::ptr_eq(x, &c)) {
            self.ctxs.push(c.clone());
        }
        Ok(c)
    }

    /// A `[1, 1]` tensor holding `v` (a view into the constant table).
    pub fn scalar(&mut self, c: &Context, v: f64) -> Result<T> {
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
                let t = c.new_tensor(DType::F32, &[TABLE])?;
                self.tables.push((t.clone(), vec![v]));
                (t, 0)
            }
        };
        c.view(&tab, &[1, 1], &[4], i * 4)
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

    /// A new leaf of `dtype` and sizes `ne` holding `vals` (uploaded once the
    /// graph has memory).
    pub fn data(&mut self, c: &Context, dtype: DType, ne: &[usize], vals: Vec<f64>) -> Result<T> {
        let t = c.new_tensor(dtype, ne)?;
        self.data.push((t.clone(), vals));
        Ok(t)
    }

    /// Gives every new tensor memory in the pass pool and fills the constants.
    fn alloc(&mut self) -> Result<()> {
        {
            let mut s = residency::state();
            for c in &self.ctxs {
                s.ctx_flush(c, Scope::Pass)?;
            }
        }
        for (t, vals) in self.tables.iter().chain(&self.data) {
            crate::tensor::io::set_values(t, vals, 0)?;
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
        let c = residency::state().ctx_ensure(outs.len().max(1), Scope::Pass)?;
        outs.iter().map(|o| detach(&c, o)).collect()
    }

    /// Computes `outs` for their effect (in-place updates); nothing is kept.
    pub fn run(&mut self, outs: &[T]) -> Result<()> {
        self.alloc()?;
        let backend = residency::state().backend().cloned().ok_or_else(no_backend)?;
        let mut g = Graph::new();
        for o in outs {
            g.expand(o)?;
        }
        if g.n_nodes() > 0 {
            g.compute(&backend)?;
            GRAPHS.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

fn no_backend() -> anyhow::Error {
    anyhow!(
        "no compute backend is installed for the device: call ag_device(\"gpu\") \
         (it installs the best backend) before computing on \"gpu\""
    )
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
    leaf.set_storage(Mem { buf: r.buf, offset: r.offset });
    Ok(leaf)
}

/// Computes the graph of `build` (one output per returned tensor) and gives
/// the results as device values of the given shapes.
pub fn run_devs(
    build: impl FnOnce(&mut Builder, &Context) -> Result<Vec<(T, usize, usize)>>,
) -> Result<Vec<Dev>> {
    let mut b = Builder::new();
    let c = b.ctx()?;
    let outs = build(&mut b, &c)?;
    let ts: Vec<T> = outs.iter().map(|o| o.0.clone()).collect();
    let done = b.compute(&ts)?;
    Ok(done.into_iter().zip(outs).map(|(t, (_, rows, cols))| Dev { t, rows, cols }).collect())
}
