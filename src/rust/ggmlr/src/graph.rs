//! Graphs: building and computing.

use crate::conv::xptr;
use crate::guard;
use crate::tensor::tensor;
use extendr_api::prelude::*;
use ggmlr_core::backend::{self, Backend};
use ggmlr_core::tensor::Context;
use ggmlr_core::graph::Graph;
use ggmlr_core::op::Op;

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

/// Memory for the graph's tensors that have none, in one user buffer.
/// @noRd
#[extendr]
fn rs_graph_alloc(g: Robj, b: Robj) -> Robj {
    guard(|| {
        let g: &Graph = xptr(&g, "graph", "ggml_cgraph")?;
        let b: &Backend = crate::conv::backend_arg(&b, "backend")?;
        b.check_live()?;
        Ok(match g.alloc(b, ggmlr_core::memory::BufferTag::User)? {
            Some(buf) => ExternalPtr::new(buf).into(),
            None => ().into(),
        })
    })
}

/// The name and numeric parameters of an op, as R sees them.
fn op_desc(op: &Op) -> (String, Vec<f64>) {
    let f = |v: &[f64]| v.to_vec();
    let (name, p) = match op {
        Op::Unary(u) => (u.name().to_string(), vec![]),
        Op::Scale { s } => ("SCALE".into(), f(&[*s as f64])),
        Op::LeakyRelu { slope } => ("LEAKY_RELU".into(), f(&[*slope as f64])),
        Op::Clamp { min, max } => ("CLAMP".into(), f(&[*min as f64, *max as f64])),
        Op::SoftMax { scale, max_bias } => ("SOFT_MAX".into(), f(&[*scale as f64, *max_bias as f64])),
        Op::Norm { eps } => ("NORM".into(), f(&[*eps as f64])),
        Op::RmsNorm { eps } => ("RMS_NORM".into(), f(&[*eps as f64])),
        Op::Permute { axes } => ("PERMUTE".into(), axes.iter().map(|&a| a as f64).collect()),
        Op::Concat { dim } => ("CONCAT".into(), f(&[*dim as f64])),
        other => (other.name().to_string(), vec![]),
    };
    (name, p)
}

/// Every tensor of the graph, leafs then nodes in topological order:
/// list(list(tensor, id, op, params, srcs, ne, nb, offset, flags, type)).
/// @noRd
#[extendr]
fn rs_graph_nodes(g: Robj) -> Robj {
    guard(|| {
        let g: &Graph = xptr(&g, "graph", "ggml_cgraph")?;
        let out: Vec<Robj> = g
            .leafs()
            .iter()
            .chain(g.nodes().iter())
            .map(|t| {
                let (op, params) = op_desc(t.op());
                let l = t.layout();
                list!(
                    tensor = crate::tensor::tensor_robj(t.clone()),
                    id = t.id() as f64,
                    op = op,
                    params = params,
                    srcs = t.srcs().iter().map(|s| s.id() as f64).collect::<Vec<_>>(),
                    ne = l.ne.iter().map(|&n| n as f64).collect::<Vec<_>>(),
                    nb = l.nb.iter().map(|&n| n as f64).collect::<Vec<_>>(),
                    offset = t.view_base().map(|v| v.1 as f64).unwrap_or(0.0),
                    flags = t.flags() as i32,
                    type_code = t.dtype().code()
                )
                .into()
            })
            .collect();
        Ok(List::from_values(out).into())
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
    fn rs_graph_alloc;
    fn rs_graph_nodes;
    fn rs_graph_info;
}
