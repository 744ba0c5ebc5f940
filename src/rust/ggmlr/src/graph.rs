//! Graphs: building and computing.

use crate::conv::xptr;
use crate::guard;
use crate::tensor::tensor;
use extendr_api::prelude::*;
use ggmlr_core::backend::{self, Backend};
use ggmlr_core::tensor::Context;
use ggmlr_core::graph::Graph;

/// @noRd
#[extendr]
fn rs_build_forward_expand(ctx: Robj, t: Robj) -> Robj {
    guard(|| {
        let c: &Context = crate::conv::ctx_arg(&ctx, "ctx")?;
        c.check_live()?;
        let t = tensor(&t, "tensor")?;
        Ok(ExternalPtr::new(Graph::build(t)?).into())
    })
}

/// Compute on the CPU (the context-allocated path).
/// @noRd
#[extendr]
fn rs_graph_compute(ctx: Robj, g: Robj) -> Robj {
    guard(|| {
        let c: &Context = crate::conv::ctx_arg(&ctx, "ctx")?;
        c.check_live()?;
        let g: &Graph = xptr(&g, "graph", "ggml_cgraph")?;
        g.compute(backend::host())?;
        Ok(().into())
    })
}

/// @noRd
#[extendr]
fn rs_backend_graph_compute(b: Robj, g: Robj) -> Robj {
    guard(|| {
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        let g: &Graph = xptr(&g, "graph", "ggml_cgraph")?;
        g.compute(b)?;
        Ok(0i32.into())
    })
}

/// list(n_nodes, n_leafs)
/// @noRd
#[extendr]
fn rs_graph_info(g: Robj) -> Robj {
    guard(|| {
        let g: &Graph = xptr(&g, "graph", "ggml_cgraph")?;
        Ok(list!(n_nodes = g.n_nodes() as i32, n_leafs = g.n_leafs() as i32).into())
    })
}

extendr_module! {
    mod graph;
    fn rs_build_forward_expand;
    fn rs_graph_compute;
    fn rs_backend_graph_compute;
    fn rs_graph_info;
}
