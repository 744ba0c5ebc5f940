//! Optimizer updates, in place on the weights: SGD with momentum, Adam and
//! AdamW (decoupled weight decay); and the global gradient norm for clipping.

use super::device::{self, Dev};
use super::mat::Mat;
use super::value::TensorRef;
use crate::op::{Op as G, UnaryOp};
use crate::residency::Scope;
use anyhow::{bail, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum OptKind {
    Sgd { momentum: f64 },
    Adam { beta1: f64, beta2: f64, eps: f64 },
    AdamW { beta1: f64, beta2: f64, eps: f64, weight_decay: f64 },
}

/// An optimizer's state: the step count and, per parameter, its moments
/// (SGD keeps its velocity in the first).
#[derive(Debug)]
pub struct Optimizer {
    pub kind: OptKind,
    pub t: u64,
    slots: Vec<Option<(Vec<f64>, Vec<f64>)>>,
    /// Moments of parameters that live on the device (persistent pool).
    dev_slots: Vec<Option<(Dev, Dev)>>,
}

impl Optimizer {
    pub fn new(kind: OptKind, n_params: usize) -> Optimizer {
        Optimizer { kind, t: 0, slots: vec![None; n_params], dev_slots: vec![None; n_params] }
    }

    /// First moment (or velocity) of parameter `i`, once it has one.
    pub fn moment(&self, i: usize) -> Option<(Vec<f64>, Vec<f64>)> {
        if let Some(Some((m, v))) = self.dev_slots.get(i) {
            return Some((m.download().ok()?.data, v.download().ok()?.data));
        }
        self.slots.get(i)?.as_ref().map(|(m, v)| (m.clone(), v.clone()))
    }

    /// One step: `grads[i]` is the gradient of `params[i]` (None: skipped).
    pub fn step(&mut self, params: &[TensorRef], names: &[String], grads: &[Option<&[f64]>], lr: f64) -> Result<()> {
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
        self.t += 1;
        let t = self.t as f64;
        let kind = self.kind.clone();
        for (i, (p, g)) in params.iter().zip(grads).enumerate() {
            let Some(g) = g else { continue };
            if let Some(w) = p.value().device().cloned() {
                // Plain SGD keeps no moments: a 1x1 placeholder.
                let plain = matches!(kind, OptKind::Sgd { momentum } if momentum <= 0.0);
                let (mr, mc) = if plain { (1, 1) } else { (w.rows, w.cols) };
                let slot = match self.dev_slots[i].take() {
                    Some(s) if s.0.rows == mr && s.0.cols == mc => s,
                    _ => (Dev::zeros(mr, mc, Scope::Persistent)?, Dev::zeros(mr, mc, Scope::Persistent)?),
                };
                let r = update_device(&kind, &w, g, &slot, lr, t);
                self.dev_slots[i] = Some(slot);
                r?;
                continue;
            }
            let n = g.len();
            let slot = self.slots[i].get_or_insert_with(|| (vec![0.0; n], vec![0.0; n]));
            if slot.0.len() != n {
                *slot = (vec![0.0; n], vec![0.0; n]);
            }
            let (m, v) = (&mut slot.0, &mut slot.1);
            p.update_host(|w| {
                update(&kind, &mut w.data, g, m, v, lr, t);
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// One update of a weight on the device, in place: the new weight and
/// moments are computed by one graph and copied into their own memory (the
/// persistent pool does not grow; only the gradient goes to the pass pool).
fn update_device(kind: &OptKind, w: &Dev, g: &[f64], slot: &(Dev, Dev), lr: f64, t: f64) -> Result<()> {
    let gd = Dev::upload(&Mat::new(w.rows, w.cols, g.to_vec())?, Scope::Pass)?;
    let (wt, gt, mt, vt) = (w.t.clone(), gd.t, slot.0.t.clone(), slot.1.t.clone());
    let sc = |c: &crate::context::Context, x: &std::sync::Arc<crate::tensor::Tensor>, s: f64| {
        c.op(G::Scale { s: s as f32 }, &[x.clone()])
    };
    let kind = kind.clone();
    device::run_with(move |c| {
        let mut outs = Vec::new();
        let mut consts = Vec::new();
        match kind {
            OptKind::Sgd { momentum } => {
                let step = if momentum > 0.0 {
                    let m1 = c.op(G::Add, &[sc(c, &mt, momentum)?, gt.clone()])?;
                    outs.push(device::write_into(c, &m1, &mt)?);
                    m1
                } else {
                    gt.clone()
                };
                let w1 = c.op(G::Sub, &[wt.clone(), sc(c, &step, lr)?])?;
                outs.push(device::write_into(c, &w1, &wt)?);
            }
            OptKind::Adam { beta1, beta2, eps } | OptKind::AdamW { beta1, beta2, eps, .. } => {
                let (c1, c2) = (1.0 - beta1.powf(t), 1.0 - beta2.powf(t));
                let m1 = c.op(G::Add, &[sc(c, &mt, beta1)?, sc(c, &gt, 1.0 - beta1)?])?;
                let g2 = c.op(G::Unary(UnaryOp::Sqr), &[gt.clone()])?;
                let v1 = c.op(G::Add, &[sc(c, &vt, beta2)?, sc(c, &g2, 1.0 - beta2)?])?;
                // sqrt(v / c2) + eps, with eps added through a step-local constant.
                let den = c.op(G::Unary(UnaryOp::Sqrt), &[sc(c, &v1, 1.0 / c2)?])?;
                let e = c.new_tensor(crate::dtype::DType::F32, &[1, 1])?;
                let den = c.op(G::Add1, &[den, e.clone()])?;
                let upd = sc(c, &c.op(G::Div, &[m1.clone(), den])?, lr / c1)?;
                let w0 = match kind {
                    OptKind::AdamW { weight_decay, .. } => sc(c, &wt, 1.0 - lr * weight_decay)?,
                    _ => wt.clone(),
                };
                let w1 = c.op(G::Sub, &[w0, upd])?;
                outs.push(device::write_into(c, &m1, &mt)?);
                outs.push(device::write_into(c, &v1, &vt)?);
                outs.push(device::write_into(c, &w1, &wt)?);
                consts.push((e, eps));
            }
        }
        Ok((outs, consts))
    })
    .map(|_| ())
}

/// Elements per parallel chunk of an update.
const CHUNK: usize = 1 << 14;

/// Updates `w` (and the moments `m`, `v`) from the gradient `g`; large
/// tensors are split over threads.
fn update(kind: &OptKind, w: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64], lr: f64, t: f64) {
    if w.len() >= 4 * CHUNK {
        use rayon::prelude::*;
        w.par_chunks_mut(CHUNK)
            .zip(g.par_chunks(CHUNK))
            .zip(m.par_chunks_mut(CHUNK))
            .zip(v.par_chunks_mut(CHUNK))
            .for_each(|(((w, g), m), v)| update_serial(kind, w, g, m, v, lr, t));
    } else {
        update_serial(kind, w, g, m, v, lr, t);
    }
}

fn update_serial(kind: &OptKind, w: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64], lr: f64, t: f64) {
    match *kind {
        OptKind::Sgd { momentum } => {
            if momentum > 0.0 {
                for ((w, g), m) in w.iter_mut().zip(g).zip(m.iter_mut()) {
                    *m = momentum * *m + g;
                    *w -= lr * *m;
                }
            } else {
                for (w, g) in w.iter_mut().zip(g) {
                    *w -= lr * g;
                }
            }
        }
        OptKind::Adam { beta1, beta2, eps } | OptKind::AdamW { beta1, beta2, eps, .. } => {
            if let OptKind::AdamW { weight_decay, .. } = *kind {
                let f = 1.0 - lr * weight_decay;
                w.iter_mut().for_each(|x| *x *= f);
            }
            let (c1, c2) = (1.0 - beta1.powf(t), 1.0 - beta2.powf(t));
            for (((w, g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                *m = beta1 * *m + (1.0 - beta1) * g;
                *v = beta2 * *v + (1.0 - beta2) * g * g;
                *w -= lr * (*m / c1) / ((*v / c2).sqrt() + eps);
            }
        }
    }
}

/// The global L2 norm of `grads` and the factor that brings it to at most
/// `max_norm` (1 when it already is).
pub fn clip_factor(grads: &[&[f64]], max_norm: f64) -> (f64, f64) {
    let sq: f64 = grads.iter().flat_map(|g| g.iter()).map(|v| v * v).sum();
    let norm = sq.sqrt();
    let f = if norm > max_norm { max_norm / (norm + 1e-6) } else { 1.0 };
    (norm, f)
}
