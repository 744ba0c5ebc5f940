//! Gradient clipping by the global norm: the norm of all the gradients
//! together and, when it exceeds the limit, the gradients scaled (in their
//! cells) so that it is the limit. Gradients on a backend are summed and
//! scaled by one graph per place; only the sums of squares are read back.

use super::graph::run_vals;
use super::nodes::{cast, scale, total};
use super::value::{set_cell, GradCell, Place, Storage};
use crate::op::{Op as G, UnaryOp};
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::sync::Arc;

/// The global L2 norm of `grads` and the factor that brings it to at most
/// `max_norm` (1 when it already is).
pub fn clip_factor(grads: &[&[f64]], max_norm: f64) -> Result<(f64, f64)> {
    check_max_norm(max_norm)?;
    let sq: f64 = grads.iter().flat_map(|g| g.iter()).map(|v| v * v).sum();
    Ok(factor(sq.sqrt(), max_norm))
}

fn check_max_norm(max_norm: f64) -> Result<()> {
    if max_norm.is_nan() || max_norm < 0.0 {
        bail!("`max_norm` must be a non-negative number, not {max_norm}");
    }
    Ok(())
}

fn factor(norm: f64, max_norm: f64) -> (f64, f64) {
    let f = if norm > max_norm { max_norm / (norm + 1e-6) } else { 1.0 };
    (norm, f)
}

/// Clips the gradients in `cells` to a global norm of `max_norm`; returns
/// the norm before clipping.
pub fn clip_grads(cells: &[GradCell], max_norm: f64) -> Result<f64> {
    check_max_norm(max_norm)?;
    let mut sq = 0.0;
    for at in [Place::Cpu, Place::Pools] {
        let vals = engine_values(cells, at);
        if vals.is_empty() {
            continue;
        }
        let r = run_vals(at, |b, _| {
            let mut acc: Option<Arc<ETensor>> = None;
            for v in &vals {
                let c = b.ctx()?;
                let s = total(&c, &c.op(G::Unary(UnaryOp::Sqr), &[cast(b, &c, &v.t)?])?)?;
                acc = Some(match acc {
                    None => s,
                    Some(a) => c.op(G::Add, &[a, s])?,
                });
            }
            Ok(vec![(acc.ok_or_else(|| anyhow::anyhow!("internal: a norm over no gradients"))?, 1, 1)])
        })?;
        // BOUNDS: the build returns one 1x1 output, `run_vals` gives one value
        // per output, and a 1x1 HostMat holds one value (`HostMat::new`).
        sq += r[0].download()?.data[0];
    }
    for c in cells {
        if let Storage::Host(m) = &*c.borrow() {
            sq += m.data.iter().map(|v| v * v).sum::<f64>();
        }
    }
    let (norm, f) = factor(sq.sqrt(), max_norm);
    if f < 1.0 {
        for at in [Place::Cpu, Place::Pools] {
            let vals = engine_values(cells, at);
            if vals.is_empty() {
                continue;
            }
            let scaled = run_vals(at, |b, _| {
                let mut outs = Vec::with_capacity(vals.len());
                for v in &vals {
                    let c = b.ctx()?;
                    outs.push((scale(&c, &v.t, f)?, v.rows, v.cols));
                }
                Ok(outs)
            })?;
            let mut scaled = scaled.into_iter();
            for c in cells {
                let here = matches!(&*c.borrow(), Storage::Engine(v) if v.place == at);
                if here {
                    set_cell(c, Storage::Engine(scaled.next().ok_or_else(|| anyhow::anyhow!("internal: fewer scaled gradients than gradients"))?));
                }
            }
        }
        for c in cells {
            if let Storage::Host(m) = &mut *c.borrow_mut() {
                m.data.iter_mut().for_each(|x| *x *= f);
            }
        }
    }
    Ok(norm)
}

fn engine_values(cells: &[GradCell], at: Place) -> Vec<super::value::EngineVal> {
    cells
        .iter()
        .filter_map(|c| match &*c.borrow() {
            Storage::Engine(v) if v.place == at => Some(v.clone()),
            _ => None,
        })
        .collect()
}
