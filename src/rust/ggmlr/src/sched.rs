//! The scheduler over several backends, and the graph allocator.

use crate::conv::{backend_arg, scalar_bool, scalar_i64, scalar_usize, xptr};
use crate::guard;
use crate::tensor::tensor;
use extendr_api::prelude::*;
use ggmlr_core::backend::Backend;
use ggmlr_core::graph::gallocr::{GraphAllocator, Plan};
use ggmlr_core::graph::sched::Scheduler;
use ggmlr_core::graph::Graph;
use std::sync::Arc;

fn sched(x: &Robj) -> anyhow::Result<&Scheduler> {
    xptr::<Scheduler>(x, "sched", "ggml_backend_sched")
}

fn graph(x: &Robj) -> anyhow::Result<&Graph> {
    xptr::<Graph>(x, "graph", "ggml_cgraph")
}

fn galloc(x: &Robj) -> anyhow::Result<&GraphAllocator> {
    xptr::<GraphAllocator>(x, "galloc", "ggml_gallocr")
}

fn backend_robj(b: Arc<Backend>) -> Robj {
    ExternalPtr::new(b).into()
}

/// @noRd
#[extendr]
fn rs_sched_new(backends: Robj, parallel: Robj, graph_size: Robj) -> Robj {
    guard(|| {
        let list = backends.as_list().ok_or_else(|| anyhow::anyhow!("`backends` must be a list of backends"))?;
        let mut bs = Vec::with_capacity(list.len());
        for (i, (_, b)) in list.iter().enumerate() {
            bs.push(backend_arg(&b, &format!("backends[[{}]]", i + 1))?.clone());
        }
        let s = Scheduler::new(bs, scalar_usize(&graph_size, "graph_size")?, scalar_bool(&parallel, "parallel")?)?;
        Ok(ExternalPtr::new(s).into())
    })
}

/// @noRd
#[extendr]
fn rs_sched_n_backends(s: Robj) -> Robj {
    guard(|| Ok((sched(&s)?.backends().len() as i32).into()))
}

/// The backend at `i` (0-based), NULL past the end.
/// @noRd
#[extendr]
fn rs_sched_backend(s: Robj, i: Robj) -> Robj {
    guard(|| {
        let s = sched(&s)?;
        let i = scalar_i64(&i, "index")?;
        Ok(match usize::try_from(i).ok().and_then(|i| s.backends().get(i)) {
            Some(b) => backend_robj(b.clone()),
            None => ().into(),
        })
    })
}

/// What `what` asks: "reserve", "alloc", "compute".
/// @noRd
#[extendr]
fn rs_sched_graph(s: Robj, g: Robj, what: Robj) -> Robj {
    guard(|| {
        let (s, g) = (sched(&s)?, graph(&g)?);
        match crate::conv::scalar_str(&what, "what")?.as_str() {
            "reserve" => s.reserve(g)?,
            "alloc" => s.alloc_graph(g)?,
            "compute" => s.compute(g)?,
            other => anyhow::bail!("internal: unknown scheduler request '{other}'"),
        }
        Ok(().into())
    })
}

/// list(n_splits, n_copies)
/// @noRd
#[extendr]
fn rs_sched_stats(s: Robj) -> Robj {
    guard(|| {
        let s = sched(&s)?;
        Ok(list!(n_splits = s.n_splits() as i32, n_copies = s.n_copies() as i32, freed = s.is_freed()).into())
    })
}

/// @noRd
#[extendr]
fn rs_sched_reset(s: Robj) -> Robj {
    guard(|| {
        let s = sched(&s)?;
        s.check_live()?;
        s.reset();
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_sched_free(s: Robj) -> Robj {
    guard(|| {
        sched(&s)?.free();
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_sched_set_tensor_backend(s: Robj, t: Robj, b: Robj) -> Robj {
    guard(|| {
        sched(&s)?.set_tensor_backend(tensor(&t, "tensor")?, backend_arg(&b, "backend")?)?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_sched_tensor_backend(s: Robj, t: Robj) -> Robj {
    guard(|| {
        Ok(match sched(&s)?.tensor_backend(tensor(&t, "tensor")?) {
            Some(b) => backend_robj(b),
            None => ().into(),
        })
    })
}

/// A graph allocator on `backend` (NULL: the CPU).
/// @noRd
#[extendr]
fn rs_gallocr_new(b: Robj) -> Robj {
    guard(|| {
        let b = if b.is_null() { Arc::new(Backend::cpu()) } else { backend_arg(&b, "backend")?.clone() };
        Ok(ExternalPtr::new(GraphAllocator::new(b)?).into())
    })
}

fn plan_robj(p: &Plan, buffer: usize) -> Robj {
    list!(
        buffer_size = buffer as f64,
        peak = p.peak as f64,
        naive = p.naive as f64,
        n_tensors = p.offsets.len() as i32,
        reused = p.reused as i32,
        in_place = p.in_place as i32
    )
    .into()
}

/// "reserve" or "alloc" `g`; the plan's figures.
/// @noRd
#[extendr]
fn rs_gallocr_graph(a: Robj, g: Robj, what: Robj) -> Robj {
    guard(|| {
        let (a, g) = (galloc(&a)?, graph(&g)?);
        let p = match crate::conv::scalar_str(&what, "what")?.as_str() {
            "reserve" => a.reserve(g)?,
            "alloc" => a.alloc_graph(g)?,
            other => anyhow::bail!("internal: unknown allocator request '{other}'"),
        };
        Ok(plan_robj(&p, a.buffer_size()))
    })
}

/// The figures of the last plan (NULL before any), with the buffer's size.
/// @noRd
#[extendr]
fn rs_gallocr_stats(a: Robj) -> Robj {
    guard(|| {
        let a = galloc(&a)?;
        Ok(match a.last_plan() {
            Some(p) => plan_robj(&p, a.buffer_size()),
            None => list!(buffer_size = a.buffer_size() as f64).into(),
        })
    })
}

/// @noRd
#[extendr]
fn rs_gallocr_free(a: Robj) -> Robj {
    guard(|| {
        galloc(&a)?.free();
        Ok(().into())
    })
}

extendr_module! {
    mod sched;
    fn rs_sched_new;
    fn rs_sched_n_backends;
    fn rs_sched_backend;
    fn rs_sched_graph;
    fn rs_sched_stats;
    fn rs_sched_reset;
    fn rs_sched_free;
    fn rs_sched_set_tensor_backend;
    fn rs_sched_tensor_backend;
    fn rs_gallocr_new;
    fn rs_gallocr_graph;
    fn rs_gallocr_stats;
    fn rs_gallocr_free;
}
