//! The tape: each recorded node keeps its op, the values its backward rule
//! needs (shared, not copied) and which inputs want a gradient. `backward`
//! walks the nodes in reverse, accumulates gradients by tensor id and hands
//! the gradients of the leaves (tensors no recorded op produced) back.
//! The whole backward pass is one graph per place (see `mod.rs`).

use super::backward::backward as node_backward;
use super::forward::forward;
use super::graph::GraphBuilder;
use super::nodes::bin;
use super::op::AgOp;
use super::place;
use super::value::{HostMat, Place, Storage, AgTensor, AgTensorRef, EngineVal};
use crate::op::Op as G;
use crate::tensor::Tensor as ETensor;
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};
use std::rc::{Rc, Weak};
use std::sync::Arc;

struct Node {
    op: AgOp,
    inputs: Vec<EngineVal>,
    /// The input tensors that want a gradient (None for the others).
    targets: Vec<Option<AgTensorRef>>,
    out_id: u64,
    out: EngineVal,
    /// Values the backward rule reads (e.g. softmax output).
    saved: Vec<EngineVal>,
}

/// The result of applying an op.
pub struct Applied {
    pub tensor: AgTensorRef,
    pub requires_grad: bool,
    pub aux: Vec<f64>,
}

#[derive(Default)]
pub struct Tape {
    enabled: bool,
    nodes: Vec<Node>,
    next_id: u64,
    /// While a scratch scope is open: the tensors made in it (weakly; the
    /// caller's objects hold them), released when it closes.
    scratch: Option<Vec<Weak<AgTensor>>>,
}

impl Tape {
    pub fn new() -> Tape {
        Tape::default()
    }
    /// A new tensor holding `m`, with a fresh id.
    pub fn tensor(&mut self, m: HostMat) -> AgTensorRef {
        self.next_id += 1;
        self.track(AgTensor::new(self.next_id, m))
    }
    /// A new leaf holding the engine value `v` (a batch written into its place).
    pub fn tensor_engine(&mut self, v: super::value::EngineVal) -> AgTensorRef {
        self.next_id += 1;
        self.track(AgTensor::with_storage(self.next_id, super::value::Storage::Engine(v)))
    }

    fn track(&mut self, t: AgTensorRef) -> AgTensorRef {
        if let Some(s) = &mut self.scratch {
            s.push(Rc::downgrade(&t));
        }
        t
    }

    /// Opens a scratch scope (closing one that is open first): the tensors
    /// made from now on (op results, batches, values given as inputs) are
    /// the caller's intermediates, released by [`Tape::scratch_end`].
    pub fn scratch_begin(&mut self) -> Result<usize> {
        let n = self.scratch_end()?;
        self.scratch = Some(Vec::new());
        Ok(n)
    }

    /// Closes the scratch scope: every tensor made in it that something
    /// still holds (an object the caller's garbage collector has not freed
    /// yet) loses its value and gradient at once, so that its memory goes
    /// back for reuse now: the next training step takes the same buffers
    /// instead of faulting in new pages. Reading such a tensor afterwards is
    /// an error, never a stale value. Returns how many were released.
    pub fn scratch_end(&mut self) -> Result<usize> {
        let Some(list) = self.scratch.take() else { return Ok(0) };
        let live: Vec<AgTensorRef> = list.iter().filter_map(Weak::upgrade).collect();
        if live.is_empty() {
            return Ok(0);
        }
        let c = crate::tensor::Context::new(live.len() * crate::tensor::TENSOR_OVERHEAD, true)?;
        for t in &live {
            t.release(&c)?;
        }
        Ok(live.len())
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
    pub fn apply(&mut self, op: AgOp, inputs: &[AgTensorRef], rg: &[bool]) -> Result<Applied> {
        self.apply_on(op, inputs, rg, false)
    }

    /// As `apply`; with `on_device` the op runs in the residency pools (host
    /// inputs are uploaded to the pass pool, the output lives there), as it
    /// does when an input is there. Otherwise it runs on the CPU in f64, and
    /// a host value it reads is uploaded once (the tensor keeps the copy).
    pub fn apply_on(&mut self, op: AgOp, inputs: &[AgTensorRef], rg: &[bool], on_device: bool) -> Result<Applied> {
        let shapes: Vec<(usize, usize)> = inputs.iter().map(|t| t.shape()).collect();
        op.check(&shapes)?;
        let values: Vec<_> = inputs.iter().map(|t| t.value()).collect();
        let at = Place::of_inputs(on_device, values.iter().map(|v| &**v));
        let mut xs = Vec::with_capacity(inputs.len());
        for t in inputs {
            let v = t.value();
            let x = place::to_place(&v, at)?;
            if at == Place::Cpu && v.host().is_some() {
                t.set_storage(Storage::Engine(x.clone()));
            }
            xs.push(x);
        }
        let f = forward(&op, &xs, at)?;
        let requires_grad = rg.iter().any(|&b| b);
        self.next_id += 1;
        let tensor = self.track(AgTensor::with_storage(self.next_id, Storage::Engine(f.out.clone())));
        if self.enabled && requires_grad {
            let targets = inputs.iter().zip(rg).map(|(t, &r)| r.then(|| t.clone())).collect();
            self.nodes.push(Node { op, inputs: xs, targets, out_id: tensor.id, out: f.out, saved: f.saved });
        }
        Ok(Applied { tensor, requires_grad, aux: f.aux })
    }

    /// Backward pass from `loss`: returns the gradients of the leaves (tensors
    /// no recorded op produced), ordered by id, and adds them to the leaves'
    /// accumulated gradients. Consumes the recorded nodes.
    ///
    /// Every node appends its rule to ONE graph of its place (gradients are
    /// nodes, summed with `add` nodes), computed once at the end: the leaves'
    /// gradients stay where they were computed.
    pub fn backward(&mut self, loss: &AgTensorRef) -> Result<Vec<(AgTensorRef, Storage)>> {
        // Checked before the tape is consumed: a wrong tensor leaves the
        // tape as it was, for backward() of the right one.
        if !self.nodes.iter().any(|n| n.out_id == loss.id) {
            bail!(
                "backward(): the loss was not recorded on the tape. Compute it inside \
                 with_grad_tape({{ ... }}) from tensors that require gradients (ag_param), \
                 and call backward() once per tape (the tape is kept)"
            );
        }
        // A pass that fails (an interrupt, a refused allocation) sets no
        // gradient, and the tape is put back for another backward().
        let nodes = std::mem::take(&mut self.nodes);
        let r = backward_nodes(&nodes, loss);
        if r.is_err() {
            self.nodes = nodes;
        }
        r
    }
}

/// The backward pass of [`Tape::backward`] over the taken `nodes`.
fn backward_nodes(nodes: &[Node], loss: &AgTensorRef) -> Result<Vec<(AgTensorRef, Storage)>> {
    let produced: HashSet<u64> = nodes.iter().map(|n| n.out_id).collect();
    let mut bs = Builders::default();
    let seed = {
        let (r, c) = loss.shape();
        let at = loss.value().engine().map_or(Place::Cpu, |v| v.place);
        let b = bs.get(at)?;
        let ctx = b.ctx()?;
        Grad { t: b.fill(&ctx, r, c, 1.0)?, shape: (r, c), place: at }
    };
    let mut grads: HashMap<u64, Grad> = HashMap::new();
    grads.insert(loss.id, seed);
    let mut leaves: HashMap<u64, AgTensorRef> = HashMap::new();
    for node in nodes.iter().rev() {
        let Some(g) = grads.remove(&node.out_id) else { continue };
        let at = node.out.place;
        let g = g.to(at, &mut bs)?;
        let need: Vec<bool> = node.targets.iter().map(|t| t.is_some()).collect();
        let b = bs.get(at)?;
        let ctx = b.ctx()?;
        let gs = node_backward(b, &ctx, &node.op, &node.inputs, &node.out, &node.saved, &g.t, &need)?;
        for ((t, gi), x) in node.targets.iter().zip(gs).zip(&node.inputs) {
            let (Some(t), Some(gi)) = (t, gi) else { continue };
            let gi = Grad { t: gi, shape: x.shape(), place: at };
            let sum = match grads.remove(&t.id) {
                Some(acc) => acc.add(gi, &mut bs)?,
                None => gi,
            };
            grads.insert(t.id, sum);
            if !produced.contains(&t.id) {
                leaves.entry(t.id).or_insert_with(|| t.clone());
            }
        }
    }
    let mut out: Vec<(AgTensorRef, Grad)> =
        leaves.into_values().filter_map(|t| grads.remove(&t.id).map(|g| (t, g))).collect();
    out.sort_by_key(|(t, _)| t.id);
    finish(bs, out)
}

/// The builder of each place the backward pass uses.
#[derive(Default)]
struct Builders {
    cpu: Option<GraphBuilder>,
    pools: Option<GraphBuilder>,
}

impl Builders {
    fn get(&mut self, at: Place) -> Result<&mut GraphBuilder> {
        let slot = match at {
            Place::Cpu => &mut self.cpu,
            Place::Pools => &mut self.pools,
        };
        if slot.is_none() {
            *slot = Some(GraphBuilder::new(at)?);
        }
        slot.as_mut().ok_or_else(|| anyhow::anyhow!("internal: no graph builder for this place"))
    }
}

/// A gradient during the backward pass: a node of its place's graph.
struct Grad {
    t: Arc<ETensor>,
    shape: (usize, usize),
    place: Place,
}

impl Grad {
    /// The gradient as a node of `at`'s graph: computed and moved there when
    /// it is a node of the other place.
    fn to(self, at: Place, bs: &mut Builders) -> Result<Grad> {
        if self.place == at {
            return Ok(self);
        }
        let (r, c) = self.shape;
        let done = bs.get(self.place)?.compute_keep(std::slice::from_ref(&self.t))?.remove(0);
        let host = place::host_values(&Storage::Engine(EngineVal::new(done, r, c, self.place)))?.into_owned();
        let b = bs.get(at)?;
        let ctx = b.ctx()?;
        Ok(Grad { t: b.data(&ctx, None, &[r, c], host.data)?, shape: self.shape, place: at })
    }

    fn add(self, o: Grad, bs: &mut Builders) -> Result<Grad> {
        let at = self.place;
        let o = o.to(at, bs)?;
        let ctx = bs.get(at)?.ctx()?;
        Ok(Grad { t: bin(&ctx, G::Add, &self.t, &o.t)?, ..self })
    }
}

/// Computes the leaves' gradients (and their sums with the gradients the
/// leaves already hold) in one graph per place, and hands them to the leaves.
// BOUNDS-FN: `outs` and `done` are [_; 2] indexed by `Place as usize` (two
// variants: 0, 1). Each plan entry `at` was `outs[slot].len()` before one
// push (two when `has_acc`), and `compute_keep` returns one tensor per
// output, so `done[slot]` holds `at` (and `at + 1`).
fn finish(mut bs: Builders, out: Vec<(AgTensorRef, Grad)>) -> Result<Vec<(AgTensorRef, Storage)>> {
    // Per gradient: where its result and its sum with the held one are among
    // its place's outputs.
    let mut plan = Vec::with_capacity(out.len());
    let mut outs: [Vec<Arc<ETensor>>; 2] = [Vec::new(), Vec::new()];
    for (t, g) in &out {
        let slot = g.place as usize;
        let b = bs.get(g.place)?;
        // A held gradient of another shape is replaced.
        let acc = match t.grad_storage().filter(|p| p.shape() == g.shape) {
            None => None,
            Some(prev) => {
                let ctx = b.ctx()?;
                let p = match prev.engine() {
                    Some(v) if v.place == g.place => v.t.clone(),
                    _ => b.data(&ctx, None, &[g.shape.0, g.shape.1], place::host_values(&prev)?.into_owned().data)?,
                };
                Some(bin(&ctx, G::Add, &p, &g.t)?)
            }
        };
        let at = outs[slot].len();
        outs[slot].push(g.t.clone());
        if let Some(a) = acc {
            outs[slot].push(a);
        }
        plan.push((at, outs[slot].len() - at == 2));
    }
    let mut done: [Vec<Arc<ETensor>>; 2] = [Vec::new(), Vec::new()];
    for at in [Place::Cpu, Place::Pools] {
        let slot = at as usize;
        if !outs[slot].is_empty() {
            done[slot] = bs.get(at)?.compute_keep(&outs[slot])?;
        }
    }
    let mut res = Vec::with_capacity(out.len());
    for ((t, g), (at, has_acc)) in out.into_iter().zip(plan) {
        let d = &done[g.place as usize];
        let (r, c) = g.shape;
        let gd = EngineVal::new(d[at].clone(), r, c, g.place);
        let acc = if has_acc { EngineVal::new(d[at + 1].clone(), r, c, g.place) } else { gd.clone() };
        t.set_grad_storage(Some(Storage::Engine(acc)));
        res.push((t, Storage::Engine(gd)));
    }
    Ok(res)
}
