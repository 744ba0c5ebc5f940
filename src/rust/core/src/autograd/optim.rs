//! Optimizer updates, in place on the weights: SGD with momentum, Adam and
//! AdamW (decoupled weight decay); and the global gradient norm for clipping.

use super::device::{self, Builder, Dev};
use super::value::TensorRef;
use crate::base::dtype::DType;
use crate::op::{Op as G, UnaryOp};
use crate::residency::Scope;
use crate::tensor::Tensor as ETensor;
use std::sync::Arc;
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
    /// Parameters on the device are updated together by one graph that
    /// reads their gradients where they are (device gradients directly).
    pub fn step(&mut self, params: &[TensorRef], names: &[String], grads: &[Option<GradIn>], lr: f64) -> Result<()> {
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
        let mut on_dev = Vec::new();
        for (i, (p, g)) in params.iter().zip(grads).enumerate() {
            let Some(g) = g else { continue };
            if let Some(w) = p.value().device().cloned() {
                // Plain SGD keeps no moments: a 1x1 placeholder.
                let plain = matches!(kind, OptKind::Sgd { momentum } if momentum <= 0.0);
                let (mr, mc) = if plain { (1, 1) } else { (w.rows, w.cols) };
                if !matches!(&self.dev_slots[i], Some(s) if s.0.rows == mr && s.0.cols == mc) {
                    self.dev_slots[i] = Some((Dev::zeros(mr, mc, Scope::Persistent)?, Dev::zeros(mr, mc, Scope::Persistent)?));
                }
                let slot = self.dev_slots[i].clone().expect("moments");
                on_dev.push((w, g, slot));
                continue;
            }
            let host;
            let g: &[f64] = match g {
                GradIn::Host(h) => h,
                GradIn::Device(d) => {
                    host = d.download()?;
                    &host.data
                }
            };
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
        if !on_dev.is_empty() {
            update_device(&kind, &on_dev, lr, t)?;
        }
        Ok(())
    }
}

/// A gradient handed to an optimizer: host values or a device tensor.
#[derive(Clone, Copy)]
pub enum GradIn<'a> {
    Host(&'a [f64]),
    Device(&'a Dev),
}

impl GradIn<'_> {
    pub fn len(&self) -> usize {
        match self {
            GradIn::Host(h) => h.len(),
            GradIn::Device(d) => d.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One update of the device weights, in place: the new weights and moments
/// are computed by ONE graph and copied into their own memory (the
/// persistent pool does not grow). Device gradients are read directly; host
/// ones are uploaded to the pass pool.
fn update_device(kind: &OptKind, items: &[(Dev, &GradIn, (Dev, Dev))], lr: f64, t: f64) -> Result<()> {
    let mut b = Builder::new();
    let mut outs = Vec::new();
    for (w, g, slot) in items {
        let c = b.ctx()?;
        let gt = match g {
            GradIn::Device(d) => device::f32_of(&c, &d.t)?,
            GradIn::Host(h) => b.data(&c, DType::F32, &[w.rows, w.cols], h.to_vec())?,
        };
        let (wt, mt, vt) = (w.t.clone(), slot.0.t.clone(), slot.1.t.clone());
        let sc = |x: &Arc<ETensor>, s: f64| device::scale(&c, x, s);
        match *kind {
            OptKind::Sgd { momentum } => {
                let step = if momentum > 0.0 {
                    let m1 = c.op(G::Add, &[sc(&mt, momentum)?, gt.clone()])?;
                    outs.push(device::write_into(&c, &m1, &mt)?);
                    m1
                } else {
                    gt.clone()
                };
                let w1 = c.op(G::Sub, &[wt.clone(), sc(&step, lr)?])?;
                outs.push(device::write_into(&c, &w1, &wt)?);
            }
            OptKind::Adam { beta1, beta2, eps } | OptKind::AdamW { beta1, beta2, eps, .. } => {
                let (c1, c2) = (1.0 - beta1.powf(t), 1.0 - beta2.powf(t));
                let m1 = c.op(G::Add, &[sc(&mt, beta1)?, sc(&gt, 1.0 - beta1)?])?;
                let g2 = c.op(G::Unary(UnaryOp::Sqr), std::slice::from_ref(&gt))?;
                let v1 = c.op(G::Add, &[sc(&vt, beta2)?, sc(&g2, 1.0 - beta2)?])?;
                // sqrt(v / c2) + eps, eps from the graph's constant table.
                let den = c.op(G::Unary(UnaryOp::Sqrt), &[sc(&v1, 1.0 / c2)?])?;
                let den = c.op(G::Add1, &[den, b.scalar(&c, eps)?])?;
                let upd = sc(&c.op(G::Div, &[m1.clone(), den])?, lr / c1)?;
                let w0 = match *kind {
                    OptKind::AdamW { weight_decay, .. } => sc(&wt, 1.0 - lr * weight_decay)?,
                    _ => wt.clone(),
                };
                let w1 = c.op(G::Sub, &[w0, upd])?;
                outs.push(device::write_into(&c, &m1, &mt)?);
                outs.push(device::write_into(&c, &v1, &vt)?);
                outs.push(device::write_into(&c, &w1, &wt)?);
            }
        }
    }
    b.run(&outs)
}

/// The sum of squares of device gradients (one graph, one scalar downloaded).
pub fn sq_norm_device(gs: &[Dev]) -> Result<f64> {
    let r = device::run_devs(|b, _| {
        let mut acc: Option<Arc<ETensor>> = None;
        for g in gs {
            let c = b.ctx()?;
            let s = device::total(&c, &c.op(G::Unary(UnaryOp::Sqr), &[device::f32_of(&c, &g.t)?])?)?;
            acc = Some(match acc {
                None => s,
                Some(a) => c.op(G::Add, &[a, s])?,
            });
        }
        let acc = acc.ok_or_else(|| anyhow::anyhow!("internal: no gradients"))?;
        Ok(vec![(acc, 1, 1)])
    })?;
    Ok(r[0].download()?.data[0])
}

/// Device gradients scaled by `f` (one graph; new tensors in the pass pool).
pub fn scale_device(gs: &[Dev], f: f64) -> Result<Vec<Dev>> {
    device::run_devs(|b, _| {
        let mut outs = Vec::with_capacity(gs.len());
        for g in gs {
            let c = b.ctx()?;
            outs.push((device::scale(&c, &g.t, f)?, g.rows, g.cols));
        }
        Ok(outs)
    })
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
            // Bias corrections as factors: one division (and one square
            // root) per element instead of three divisions.
            let (c1, c2) = (1.0 - beta1.powf(t), 1.0 - beta2.powf(t));
            let (step, inv_c2) = (lr / c1, 1.0 / c2);
            // Compiled for AVX where the CPU has it: four square roots and
            // divisions per instruction (the same operations, so the same
            // results).
            crate::base::simd::wide(|| {
                for (((w, g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                    *m = beta1 * *m + (1.0 - beta1) * g;
                    *v = beta2 * *v + (1.0 - beta2) * g * g;
                    *w -= step * *m / ((*v * inv_c2).sqrt() + eps);
                }
            });
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
