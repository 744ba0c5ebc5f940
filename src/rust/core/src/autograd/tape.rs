//! The tape: each recorded node keeps its op, the values its backward rule
//! needs (shared, not copied) and which inputs want a gradient. `backward`
//! walks the nodes in reverse, accumulates gradients by tensor id and hands
//! the gradients of the leaves (tensors no recorded op produced) back.
//! On the device the whole backward pass is one graph (see `mod.rs`).

use super::backward::backward as node_backward;
use super::device::{self, Builder, Dev};
use super::{device_bwd, device_fwd};
use super::value::Storage;
use crate::tensor::Context;
use crate::base::dtype::DType;
use crate::residency::Scope;
use super::mat::Mat;
use super::ops::{forward, Op};
use super::value::{Tensor, TensorRef, Value};
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

struct Node {
    op: Op,
    inputs: Vec<Value>,
    /// The input tensors that want a gradient (None for the others).
    targets: Vec<Option<TensorRef>>,
    out_id: u64,
    out: Value,
    saved: Vec<Mat>,
    /// Device values the device backward rule reads (e.g. softmax output).
    dsaved: Vec<Dev>,
}

/// The result of applying an op.
pub struct Applied {
    pub tensor: TensorRef,
    pub requires_grad: bool,
    pub aux: Vec<f64>,
}

#[derive(Default)]
pub struct Tape {
    enabled: bool,
    nodes: Vec<Node>,
    next_id: u64,
}

impl Tape {
    pub fn new() -> Tape {
        Tape::default()
    }
    /// A new tensor holding `m`, with a fresh id.
    pub fn tensor(&mut self, m: Mat) -> TensorRef {
        self.next_id += 1;
        Tensor::new(self.next_id, m)
    }
    /// Starts recording on an empty tape.
    pub fn begin(&mut self) {
        self.nodes.clear();
        self.enabled = true;
    }
    /// Stops recording; recorded nodes stay for `backward`.
    pub fn end(&mut self) {
        self.enabled = false;
    }
    /// Drops every recorded node (and the values only they kept alive).
    pub fn clear(&mut self) {
        self.nodes.clear();
    }
    pub fn enabled(&self) -> bool {
        self.enabled
    }
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Runs `op` on `inputs`; `rg[i]` says whether input i requires a
    /// gradient. Records a node when the tape is on and any input requires one.
    /// On error nothing is recorded and nothing changes.
    pub fn apply(&mut self, op: Op, inputs: &[TensorRef], rg: &[bool]) -> Result<Applied> {
        self.apply_on(op, inputs, rg, false)
    }

    /// As `apply`; with `on_device` the op runs on the residency backend:
    /// host inputs are uploaded to the pass pool, the output lives there.
    pub fn apply_on(&mut self, op: Op, inputs: &[TensorRef], rg: &[bool], on_device: bool) -> Result<Applied> {
        let on_device = on_device || inputs.iter().any(|t| t.value().device().is_some());
        let vals: Vec<Value> = inputs.iter().map(|t| t.value()).collect();
        let (out, saved, dsaved, aux, vals) = if on_device { self.forward_device(&op, vals)? } else {
            let mats = vals.iter().map(|v| v.host()).collect::<Result<Vec<_>>>()?;
            let f = forward(&op, &mats)?;
            (Storage::Host(f.out), f.saved, Vec::new(), f.aux, vals)
        };
        let requires_grad = rg.iter().any(|&b| b);
        self.next_id += 1;
        let tensor = Tensor::with_storage(self.next_id, out);
        if self.enabled && requires_grad {
            let targets = inputs
                .iter()
                .zip(rg)
                .map(|(t, &r)| r.then(|| t.clone()))
                .collect();
            self.nodes.push(Node { op, inputs: vals, targets, out_id: tensor.id, out: tensor.value(), saved, dsaved });
        }
        Ok(Applied { tensor, requires_grad, aux })
    }

    /// The forward on the device: a graph (`device_fwd`), or, for shapes
    /// that do not fit the op, the host kernel on downloaded inputs (which
    /// reports the error). Host inputs are uploaded to the pass pool.
    #[allow(clippy::type_complexity)]
    fn forward_device(&self, op: &Op, vals: Vec<Value>) -> Result<(Storage, Vec<Mat>, Vec<Dev>, Vec<f64>, Vec<Value>)> {
        if op.arity_ok(vals.len()) {
            let devs = vals
                .iter()
                .map(|v| match v.device() {
                    Some(d) => Ok(d.clone()),
                    None => Dev::upload(v.host()?, Scope::Pass),
                })
                .collect::<Result<Vec<_>>>()?;
            if let Some(r) = device_fwd::forward(op, &devs) {
                let f = r?;
                // The node keeps the device copies its backward rule reads.
                let vals = devs.into_iter().map(|d| Rc::new(Storage::Device(d))).collect();
                return Ok((Storage::Device(f.out), Vec::new(), f.saved, f.aux, vals));
            }
        }
        let hosts = vals.iter().map(|v| v.host_view()).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Mat> = hosts.iter().map(|m| m.as_ref()).collect();
        let f = forward(op, &refs)?;
        Ok((Storage::Device(Dev::upload(&f.out, Scope::Pass)?), f.saved, Vec::new(), f.aux, vals))
    }

    /// Backward pass from `loss`: returns the gradients of the leaves (tensors
    /// no recorded op produced), ordered by id, and adds them to the leaves'
    /// accumulated gradients. Consumes the recorded nodes.
    ///
    /// Nodes whose values are on the device append their rules to ONE graph
    /// in the pass pool (gradients are nodes, summed with `add` nodes), which
    /// is computed once at the end: the leaves' gradients stay on the device.
    /// Host nodes run their rules in f64 on the host.
    pub fn backward(&mut self, loss: &TensorRef) -> Result<Vec<(TensorRef, Storage)>> {
        // Checked before the tape is consumed: a wrong tensor leaves the
        // tape as it was, for backward() of the right one.
        if !self.nodes.iter().any(|n| n.out_id == loss.id) {
            bail!(
                "backward(): the loss was not recorded on the tape. Compute it inside \
                 with_grad_tape({{ ... }}) from tensors that require gradients (ag_param), \
                 and call backward() once per tape (the tape is kept)"
            );
        }
        let nodes = std::mem::take(&mut self.nodes);
        let produced: HashSet<u64> = nodes.iter().map(|n| n.out_id).collect();
        let mut b = Builder::new();
        let (r, c) = loss.shape();
        let seed = if loss.value().device().is_some() {
            let ctx = b.ctx()?;
            Grad::D(Dev::new(b.fill(&ctx, r, c, 1.0)?, r, c))
        } else {
            Grad::H(Mat::filled(r, c, 1.0))
        };
        let mut grads: HashMap<u64, Grad> = HashMap::new();
        grads.insert(loss.id, seed);
        let mut leaves: HashMap<u64, TensorRef> = HashMap::new();
        for node in nodes.iter().rev() {
            let Some(g) = grads.remove(&node.out_id) else { continue };
            let need: Vec<bool> = node.targets.iter().map(|t| t.is_some()).collect();
            let devs: Option<Vec<Dev>> = node.inputs.iter().map(|v| v.device().cloned()).collect();
            let gs: Vec<Option<Grad>> = match (devs, node.out.device()) {
                (Some(xs), Some(o)) if node.saved.is_empty() && node.dsaved.len() >= device_saved(&node.op) => {
                    let ctx = b.ctx()?;
                    let gd = g.on_device(&mut b, &ctx)?;
                    let r = device_bwd::backward(&mut b, &ctx, &node.op, &xs, o, &node.dsaved, &gd, &need)?;
                    r.into_iter().map(|x| x.map(Grad::D)).collect()
                }
                _ => {
                    let gm = g.on_host(&mut b)?;
                    self.backward_host(node, &gm, &need)?.into_iter().map(|x| x.map(Grad::H)).collect()
                }
            };
            for (t, gi) in node.targets.iter().zip(gs) {
                let (Some(t), Some(gi)) = (t, gi) else { continue };
                let sum = match grads.remove(&t.id) {
                    Some(acc) => acc.add(&mut b, gi)?,
                    None => gi,
                };
                grads.insert(t.id, sum);
                if !produced.contains(&t.id) {
                    leaves.entry(t.id).or_insert_with(|| t.clone());
                }
            }
        }
        let mut out: Vec<(TensorRef, Grad)> = leaves
            .into_values()
            .filter_map(|t| grads.remove(&t.id).map(|g| (t, g)))
            .collect();
        out.sort_by_key(|(t, _)| t.id);
        finish(b, out)
    }

    /// A node's backward rule on the host (device values are downloaded).
    fn backward_host(&self, node: &Node, g: &Mat, need: &[bool]) -> Result<Vec<Option<Mat>>> {
        let hx = node.inputs.iter().map(|v| v.host_view()).collect::<Result<Vec<_>>>()?;
        let xs: Vec<&Mat> = hx.iter().map(|m| m.as_ref()).collect();
        let out = node.out.host_view()?;
        node_backward(&node.op, &xs, &out, &node.saved, g, need)
    }
}

/// How many device values the device backward rule of `op` reads.
fn device_saved(op: &Op) -> usize {
    match op {
        Op::SoftmaxCrossEntropyLoss => 1,
        Op::BatchNorm { .. } => 2,
        _ => 0,
    }
}

/// A gradient during the backward pass: on the host, or a node of the
/// backward graph.
enum Grad {
    H(Mat),
    D(Dev),
}

impl Grad {
    fn on_device(self, b: &mut Builder, c: &Context) -> Result<Dev> {
        Ok(match self {
            Grad::D(d) => d,
            Grad::H(m) => Dev::new(b.data(c, DType::F32, &[m.rows, m.cols], m.data)?, m.rows, m.cols),
        })
    }
    fn on_host(self, b: &mut Builder) -> Result<Mat> {
        match self {
            Grad::H(m) => Ok(m),
            Grad::D(d) => {
                let t = b.compute_keep(std::slice::from_ref(&d.t))?.remove(0);
                Dev::new(t, d.rows, d.cols).download()
            }
        }
    }
    fn add(self, b: &mut Builder, o: Grad) -> Result<Grad> {
        Ok(match (self, o) {
            (Grad::H(mut x), Grad::H(y)) => {
                x.add_assign(&y);
                Grad::H(x)
            }
            (x, y) => {
                let c = b.ctx()?;
                let (x, y) = (x.on_device(b, &c)?, y.on_device(b, &c)?);
                Grad::D(Dev::new(device::bin(&c, crate::op::Op::Add, &x.t, &y.t)?, x.rows, x.cols))
            }
        })
    }
}

/// Computes the leaves' device gradients (and their sums with the gradients
/// the leaves already hold) in one graph, and hands them to the leaves.
fn finish(mut b: Builder, out: Vec<(TensorRef, Grad)>) -> Result<Vec<(TensorRef, Storage)>> {
    let mut outs = Vec::new();
    let mut plan = Vec::with_capacity(out.len());
    for (t, g) in &out {
        let Grad::D(d) = g else {
            plan.push(None);
            continue;
        };
        // A held gradient of another shape is replaced, as on the host.
        let acc = match t.grad_storage().filter(|p| p.shape() == (d.rows, d.cols)) {
            None => None,
            Some(prev) => {
                let c = b.ctx()?;
                let p = match prev {
                    Storage::Device(pd) if pd.same_shape(d) => pd,
                    other => Grad::H(other.to_host()?).on_device(&mut b, &c)?,
                };
                Some(device::bin(&c, crate::op::Op::Add, &p.t, &d.t)?)
            }
        };
        outs.push(d.t.clone());
        plan.push(Some(acc.is_some()));
        if let Some(a) = acc {
            outs.push(a);
        }
    }
    let mut done = if outs.is_empty() { Vec::new() } else { b.compute_keep(&outs)? }.into_iter();
    let mut res = Vec::with_capacity(out.len());
    for ((t, g), p) in out.into_iter().zip(plan) {
        let s = match (g, p) {
            (Grad::H(m), _) => {
                t.accumulate_grad(&m)?;
                Storage::Host(m)
            }
            (Grad::D(d), Some(has_acc)) => {
                let gd = Dev::new(done.next().expect("a gradient"), d.rows, d.cols);
                let acc = if has_acc { Dev::new(done.next().expect("a sum"), d.rows, d.cols) } else { gd.clone() };
                t.set_grad_storage(Some(Storage::Device(acc)));
                Storage::Device(gd)
            }
            (Grad::D(_), None) => unreachable!("device gradients are planned"),
        };
        res.push((t, s));
    }
    Ok(res)
}
