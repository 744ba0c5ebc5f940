//! The tape: each recorded node keeps its op, the values its backward rule
//! needs (shared, not copied) and which inputs want a gradient. `backward`
//! walks the nodes in reverse, accumulates gradients by tensor id and hands
//! the gradients of the leaves (tensors no recorded op produced) back.

use super::backward::backward as node_backward;
use super::mat::Mat;
use super::ops::{forward, Op};
use super::value::{Tensor, TensorRef, Value};
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};

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
        let vals: Vec<Value> = inputs.iter().map(|t| t.value()).collect();
        let mats = vals.iter().map(|v| v.host()).collect::<Result<Vec<_>>>()?;
        let f = forward(&op, &mats)?;
        let requires_grad = rg.iter().any(|&b| b);
        let tensor = self.tensor(f.out);
        if self.enabled && requires_grad {
            let targets = inputs
                .iter()
                .zip(rg)
                .map(|(t, &r)| r.then(|| t.clone()))
                .collect();
            self.nodes.push(Node { op, inputs: vals, targets, out_id: tensor.id, out: tensor.value(), saved: f.saved });
        }
        Ok(Applied { tensor, requires_grad, aux: f.aux })
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
            let xs = node.inputs.iter().map(|v| v.host()).collect::<Result<Vec<_>>>()?;
            let gs = node_backward(&node.op, &xs, node.out.host()?, &node.saved, &g, &need)?;
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
}
