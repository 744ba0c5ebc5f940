//! Optimizer updates, in place on the weights: SGD with momentum, Adam and
//! AdamW (decoupled weight decay); and the global gradient norm for clipping.

use super::value::TensorRef;
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
}

impl Optimizer {
    pub fn new(kind: OptKind, n_params: usize) -> Optimizer {
        Optimizer { kind, t: 0, slots: vec![None; n_params] }
    }

    /// First moment (or velocity) of parameter `i`, once it has one.
    pub fn moment(&self, i: usize) -> Option<(&[f64], &[f64])> {
        self.slots.get(i)?.as_ref().map(|(m, v)| (m.as_slice(), v.as_slice()))
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
