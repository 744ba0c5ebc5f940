//! Optimizer updates, in place on the weights: SGD with momentum, Adam and
//! AdamW (decoupled weight decay). The step count and the moments live here.
//!
//! Each step is one graph per place the parameters are in. Where the
//! backend has them (the CPU backend), each parameter is one fused node
//! (`AdamStep`, `SgdStep`) that updates the weight and its moments in place
//! in one pass; elsewhere the same update is built from element-wise nodes
//! whose results are copied into the weights' and moments' own memory (the
//! persistent pool does not grow).

use super::graph::GraphBuilder;
use super::nodes::{scale, write_into};
use super::place;
use super::value::{HostMat, Place, Storage, AgTensorRef, EngineVal};
use crate::op::{Op as G, UnaryOp};
use crate::residency::Scope;
use crate::tensor::{Context, Tensor as ETensor};
use anyhow::{bail, Result};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub enum OptKind {
    Sgd { momentum: f64 },
    Adam { beta1: f64, beta2: f64, eps: f64 },
    AdamW { beta1: f64, beta2: f64, eps: f64, weight_decay: f64 },
}

/// A gradient handed to an optimizer: host values or a stored gradient.
#[derive(Clone, Copy)]
pub enum GradIn<'a> {
    Host(&'a [f64]),
    Stored(&'a Storage),
}

impl GradIn<'_> {
    pub fn len(&self) -> usize {
        match self {
            GradIn::Host(h) => h.len(),
            GradIn::Stored(s) => {
                let (r, c) = s.shape();
                r * c
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An optimizer's state: the step count and, per parameter, its moments
/// (SGD keeps its velocity in the first), in the parameter's place.
#[derive(Debug)]
pub struct Optimizer {
    pub kind: OptKind,
    pub t: u64,
    slots: Vec<Option<(EngineVal, EngineVal)>>,
}

type T = Arc<ETensor>;

impl Optimizer {
    pub fn new(kind: OptKind, n_params: usize) -> Optimizer {
        Optimizer { kind, t: 0, slots: vec![None; n_params] }
    }

    /// First and second moment (or velocity) of parameter `i`, once it has them.
    pub fn moment(&self, i: usize) -> Option<(Vec<f64>, Vec<f64>)> {
        let (m, v) = self.slots.get(i)?.as_ref()?;
        let get = |x: &EngineVal| place::host_values(&Storage::Engine(x.clone())).map(|m| m.into_owned().data);
        Some((get(m).ok()?, get(v).ok()?))
    }

    /// One step: `grads[i]` is the gradient of `params[i]` (None: skipped).
    /// The parameters of each place are updated together by one graph that
    /// reads their gradients where they are.
    pub fn step(&mut self, params: &[AgTensorRef], names: &[String], grads: &[Option<GradIn>], lr: f64) -> Result<()> {
        if params.len() != self.slots.len() || grads.len() != params.len() {
            bail!("the optimizer was made for {} parameters but got {}", self.slots.len(), params.len());
        }
        if !lr.is_finite() {
            bail!("the learning rate must be a finite number, not {lr}");
        }
        for (i, (p, g)) in params.iter().zip(grads).enumerate() {
            let Some(g) = g else { continue };
            let (r, c) = p.shape();
            if g.len() != r * c {
                bail!(
                    "the gradient of parameter '{}' has {} values but the parameter is {r}x{c}",
                    names.get(i).map(String::as_str).unwrap_or("?"),
                    g.len()
                );
            }
        }
        // Counted once the update is made (a failed step is not a step).
        let t = (self.t + 1) as f64;
        for at in [Place::Cpu, Place::Pools] {
            let mut b: Option<GraphBuilder> = None;
            let mut outs = Vec::new();
            for (i, (p, g)) in params.iter().zip(grads).enumerate() {
                let Some(g) = g else { continue };
                if (p.value().in_pools()) != (at == Place::Pools) {
                    continue;
                }
                let b = match &mut b {
                    Some(b) => b,
                    None => b.insert(GraphBuilder::new(at)?),
                };
                let w = weight(p, at)?;
                let slot = self.moments(i, &w)?;
                let c = b.ctx()?;
                let gt = match g {
                    GradIn::Stored(Storage::Engine(v)) if v.place == at => v.t.clone(),
                    GradIn::Stored(s) => b.data(&c, None, &[w.rows, w.cols], place::host_values(s)?.into_owned().data)?,
                    GradIn::Host(h) => b.data(&c, None, &[w.rows, w.cols], h.to_vec())?,
                };
                update(b, &c, &self.kind, &w, &gt, &slot, lr, t, &mut outs)?;
            }
            if let Some(mut b) = b {
                b.run(&outs)?;
            }
        }
        self.t += 1;
        Ok(())
    }

    /// The moments of parameter `i` (weight `w`), made (zero) when missing
    /// or of another shape. Plain SGD keeps none: 1x1 placeholders.
    fn moments(&mut self, i: usize, w: &EngineVal) -> Result<(EngineVal, EngineVal)> {
        let plain = matches!(self.kind, OptKind::Sgd { momentum } if momentum <= 0.0);
        let (mr, mc) = if plain { (1, 1) } else { (w.rows, w.cols) };
        let n = self.slots.len();
        let Some(slot) = self.slots.get_mut(i) else {
            bail!("internal: parameter {} of an optimizer made for {n} parameters", i + 1)
        };
        if !matches!(slot, Some(s) if s.0.shape() == (mr, mc) && s.0.place == w.place) {
            let zeros = HostMat::filled(mr, mc, 0.0);
            let z = || place::upload(&zeros, w.place, Scope::Persistent, crate::base::dtype::DType::F32);
            *slot = Some((z()?, z()?));
        }
        slot.clone().ok_or_else(|| anyhow::anyhow!("internal: parameter {i} has no moments"))
    }
}

/// The weight of `p` as a value of `at` that may be updated in place: on the
/// CPU a host value is uploaded first, and a value a tape still holds is
/// copied first (the tape keeps the old one). In the pools the weight is
/// updated where it is.
fn weight(p: &AgTensorRef, at: Place) -> Result<EngineVal> {
    let v = p.value();
    match &*v {
        Storage::Engine(w) if at == Place::Pools => Ok(w.clone()),
        Storage::Engine(w) if w.place == at && !w.is_shared() => Ok(w.clone()),
        s => {
            let w = place::upload(&*place::host_values(s)?, at, Scope::Persistent, crate::base::dtype::DType::F32)?;
            p.set_storage(Storage::Engine(w.clone()));
            Ok(w)
        }
    }
}

/// Appends the update of weight `w` from gradient `g` (a node of `b`'s
/// graph) and its moments to `outs`.
#[allow(clippy::too_many_arguments)]
fn update(b: &mut GraphBuilder, c: &Context, kind: &OptKind, w: &EngineVal, g: &T, slot: &(EngineVal, EngineVal), lr: f64, t: f64, outs: &mut Vec<T>) -> Result<()> {
    let (wt, mt, vt) = (w.t.clone(), slot.0.t.clone(), slot.1.t.clone());
    let fused = match *kind {
        OptKind::Sgd { momentum } => G::SgdStep { lr, momentum },
        OptKind::Adam { beta1, beta2, eps } | OptKind::AdamW { beta1, beta2, eps, .. } => {
            let decay = match *kind {
                OptKind::AdamW { weight_decay, .. } => 1.0 - lr * weight_decay,
                _ => 1.0,
            };
            let (c1, c2) = (1.0 - beta1.powf(t), 1.0 - beta2.powf(t));
            G::AdamStep { beta1, beta2, eps, decay, step: lr / c1, inv_c2: 1.0 / c2 }
        }
    };
    if b.supports(&fused) && wt.dtype() == b.dtype() {
        let srcs = match fused {
            G::SgdStep { momentum, .. } if momentum <= 0.0 => vec![wt, g.clone()],
            G::SgdStep { .. } => vec![wt, g.clone(), mt],
            _ => vec![wt, g.clone(), mt, vt],
        };
        outs.push(c.op(fused, &srcs)?);
        return Ok(());
    }
    let gt = super::nodes::cast(b, c, g)?;
    let sc = |x: &T, s: f64| scale(c, x, s);
    match *kind {
        OptKind::Sgd { momentum } => {
            let step = if momentum > 0.0 {
                let m1 = c.op(G::Add, &[sc(&mt, momentum)?, gt.clone()])?;
                outs.push(write_into(c, &m1, &mt)?);
                m1
            } else {
                gt.clone()
            };
            let w1 = c.op(G::Sub, &[wt.clone(), sc(&step, lr)?])?;
            outs.push(write_into(c, &w1, &wt)?);
        }
        OptKind::Adam { beta1, beta2, eps } | OptKind::AdamW { beta1, beta2, eps, .. } => {
            let (c1, c2) = (1.0 - beta1.powf(t), 1.0 - beta2.powf(t));
            let m1 = c.op(G::Add, &[sc(&mt, beta1)?, sc(&gt, 1.0 - beta1)?])?;
            let g2 = c.op(G::Unary(UnaryOp::Sqr), std::slice::from_ref(&gt))?;
            let v1 = c.op(G::Add, &[sc(&vt, beta2)?, sc(&g2, 1.0 - beta2)?])?;
            // sqrt(v / c2) + eps, eps from the graph's constant table.
            let den = c.op(G::Unary(UnaryOp::Sqrt), &[sc(&v1, 1.0 / c2)?])?;
            let den = c.op(G::Add1, &[den, b.scalar(c, eps)?])?;
            let upd = sc(&c.op(G::Div, &[m1.clone(), den])?, lr / c1)?;
            let w0 = match *kind {
                OptKind::AdamW { weight_decay, .. } => sc(&wt, 1.0 - lr * weight_decay)?,
                _ => wt.clone(),
            };
            let w1 = c.op(G::Sub, &[w0, upd])?;
            outs.push(write_into(c, &m1, &mt)?);
            outs.push(write_into(c, &v1, &vt)?);
            outs.push(write_into(c, &w1, &wt)?);
        }
    }
    Ok(())
}
