//! The tape: each recorded node keeps its op, the values its backward rule
//! needs (shared, not copied) and which inputs want a gradient. `backward`
//! walks the nodes in reverse, accumulates gradients by tensor id and hands
//! the gradients of the leaves (tensors no recorded op produced) back.

use super::backward::backward as node_backward;
use super::device::{self, Dev};
use super::value::Storage;
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
        let (out, saved, aux, vals) = if on_device { self.forward_device(&op, vals)? } else {
            let mats = vals.iter().map(|v| v.host()).collect::<Result<Vec<_>>>()?;
            let f = forward(&op, &mats)?;
            (Storage::Host(f.out), f.saved, f.aux, vals)
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
            self.nodes.push(Node { op, inputs: vals, targets, out_id: tensor.id, out: tensor.value(), saved });
        }
        Ok(Applied { tensor, requires_grad, aux })
    }

    /// The forward on the device: a graph when the op has one, else the host
    /// kernel on downloaded inputs, its output uploaded to the pass pool.
    /// Shapes are checked before anything is built.
    #[allow(clippy::type_complexity)]
    fn forward_device(&self, op: &Op, vals: Vec<Value>) -> Result<(Storage, Vec<Mat>, Vec<f64>, Vec<Value>)> {
        if op.arity_ok(vals.len()) && device::has_graph(op) {
            let devs = vals
                .iter()
                .map(|v| match v {
                    _ if v.device().is_some() => Ok(v.device().unwrap().clone()),
                    _ => Dev::upload(v.host()?, Scope::Pass),
                })
                .collect::<Result<Vec<_>>>()?;
            if let Some(r) = device::forward(op, &devs) {
                // The node keeps the device copies its backward rule reads.
                let vals = devs.into_iter().map(|d| Rc::new(Storage::Device(d))).collect();
                return Ok((Storage::Device(r?), Vec::new(), Vec::new(), vals));
            }
        }
        let hosts = vals.iter().map(|v| v.host_view()).collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Mat> = hosts.iter().map(|m| m.as_ref()).collect();
        let f = forward(op, &refs)?;
        Ok((Storage::Device(Dev::upload(&f.out, Scope::Pass)?), f.saved, f.aux, vals))
    }

    /// Backward pass from `loss`: fills the leaves' accumulated gradients and
    /// returns them (ordered by id). Consumes the recorded nodes.
    pub fn backward(&mut self, loss: &TensorRef) -> Result<Vec<(TensorRef, Mat)>> {
        let nodes = std::mem::take(&mut self.nodes);
        let produced: HashSet<u64> = nodes.iter().map(|n| n.out_id).collect();
        if !produced.contains(&loss.id) {
            bail!(
                "backward(): the loss was not recorded on the tape. Compute it inside \
                 with_grad_tape({{ ... }}) from tensors that require gradients (ag_param), \
                 and call backward() once per tape"
            );
        }
        let (r, c) = loss.shape();
        let mut grads: HashMap<u64, Mat> = HashMap::new();
        grads.insert(loss.id, Mat::filled(r, c, 1.0));
        let mut leaves: HashMap<u64, TensorRef> = HashMap::new();
        for node in nodes.iter().rev() {
            let Some(g) = grads.remove(&node.out_id) else { continue };
            let need: Vec<bool> = node.targets.iter().map(|t| t.is_some()).collect();
            let devs: Option<Vec<Dev>> = node.inputs.iter().map(|v| v.device().cloned()).collect();
            let on_dev = match (devs, node.out.device()) {
                (Some(xs), Some(o)) => device::backward(&node.op, &xs, o, &g, &need),
                _ => None,
            };
            let gs = match on_dev {
                Some(r) => r?,
                None => self.backward_host(node, &g, &need)?,
            };
            for (t, gi) in node.targets.iter().zip(gs) {
                let (Some(t), Some(gi)) = (t, gi) else { continue };
                match grads.get_mut(&t.id) {
                    Some(acc) => acc.add_assign(&gi),
                    None => {
                        grads.insert(t.id, gi);
                    }
                }
                if !produced.contains(&t.id) {
                    leaves.entry(t.id).or_insert_with(|| t.clone());
                }
            }
        }
        let mut out: Vec<(TensorRef, Mat)> = leaves
            .into_values()
            .filter_map(|t| grads.remove(&t.id).map(|g| (t, g)))
            .collect();
        out.sort_by_key(|(t, _)| t.id);
        for (t, g) in &out {
            t.accumulate_grad(g);
        }
        Ok(out)
    }

    /// A node's backward rule on the host (device values are downloaded).
    fn backward_host(&self, node: &Node, g: &Mat, need: &[bool]) -> Result<Vec<Option<Mat>>> {
        let hx = node.inputs.iter().map(|v| v.host_view()).collect::<Result<Vec<_>>>()?;
        let xs: Vec<&Mat> = hx.iter().map(|m| m.as_ref()).collect();
        let out = node.out.host_view()?;
        node_backward(&node.op, &xs, &out, &node.saved, g, need)
    }
}
