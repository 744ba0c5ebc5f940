//! Looking into graphs (nodes, names, views, text, DOT), graph plans, events
//! and computing with a chosen number of threads.

use crate::conv::{backend_arg, scalar_i64, scalar_str, scalar_usize, xptr};
use crate::guard;
use crate::tensor::tensor_robj;
use extendr_api::prelude::*;
use ggmlr_core::backend::event::Event;
use ggmlr_core::backend::Backend;
use ggmlr_core::graph::{Graph, GraphPlan};
use std::sync::Arc;

fn graph(x: &Robj) -> anyhow::Result<&Graph> {
    xptr::<Graph>(x, "graph", "ggml_cgraph")
}

/// @noRd
#[extendr]
fn rs_graph_node(g: Robj, i: Robj) -> Robj {
    guard(|| Ok(tensor_robj(graph(&g)?.node(scalar_i64(&i, "i")?)?)))
}

/// @noRd
#[extendr]
fn rs_graph_get_tensor(g: Robj, name: Robj) -> Robj {
    guard(|| {
        Ok(match graph(&g)?.tensor_by_name(&scalar_str(&name, "name")?) {
            Some(t) => tensor_robj(t),
            None => ().into(),
        })
    })
}

/// @noRd
#[extendr]
fn rs_graph_view(g: Robj, i0: Robj, i1: Robj) -> Robj {
    guard(|| {
        let v = graph(&g)?.view(scalar_usize(&i0, "i0")?, scalar_usize(&i1, "i1")?)?;
        Ok(ExternalPtr::new(v).into())
    })
}

/// The graph as text ("print") or DOT ("dot").
/// @noRd
#[extendr]
fn rs_graph_text(g: Robj, what: Robj) -> Robj {
    guard(|| {
        let g = graph(&g)?;
        Ok(match scalar_str(&what, "what")?.as_str() {
            "dot" => g.dot(),
            _ => g.print(),
        }
        .into())
    })
}

/// Compute on the CPU with `n` threads (0: the default CPU backend's).
/// @noRd
#[extendr]
fn rs_graph_compute_threads(g: Robj, n: Robj) -> Robj {
    guard(|| {
        let g = graph(&g)?;
        let n = scalar_usize(&n, "n_threads")?;
        let host = ggmlr_core::backend::host();
        if n == 0 || n == host.n_threads() {
            g.compute(host)?;
        } else {
            let b = Backend::cpu();
            b.set_n_threads(n)?;
            g.compute(&b)?;
        }
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_graph_plan_create(b: Robj, g: Robj) -> Robj {
    guard(|| Ok(ExternalPtr::new(GraphPlan::new(graph(&g)?, backend_arg(&b, "backend")?.clone())?).into()))
}

/// @noRd
#[extendr]
fn rs_graph_plan_compute(b: Robj, p: Robj) -> Robj {
    guard(|| {
        let p: &GraphPlan = xptr(&p, "plan", "ggml_backend_graph_plan")?;
        p.compute(backend_arg(&b, "backend")?)?;
        Ok(0i32.into())
    })
}

/// @noRd
#[extendr]
fn rs_event_new(d: Robj) -> Robj {
    guard(|| Ok(ExternalPtr::new(Arc::new(Event::new(crate::devices::device_arg(&d, "device")?.clone()))).into()))
}

/// "record" (with a backend), "synchronize" or "wait" (with a backend).
/// @noRd
#[extendr]
fn rs_event(e: Robj, what: Robj, b: Robj) -> Robj {
    guard(|| {
        let e: &Arc<Event> = xptr(&e, "event", "ggml_backend_event")?;
        match scalar_str(&what, "what")?.as_str() {
            "record" => e.record(backend_arg(&b, "backend")?)?,
            "wait" => e.wait(backend_arg(&b, "backend")?)?,
            _ => e.synchronize()?,
        }
        Ok(().into())
    })
}

extendr_module! {
    mod graph_tools;
    fn rs_graph_node;
    fn rs_graph_get_tensor;
    fn rs_graph_view;
    fn rs_graph_text;
    fn rs_graph_compute_threads;
    fn rs_graph_plan_create;
    fn rs_graph_plan_compute;
    fn rs_event_new;
    fn rs_event;
}
