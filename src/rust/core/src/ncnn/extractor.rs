//! The extractor: one inference over a net (inputs in, blobs computed on
//! demand, in light mode released as soon as their consumer has run).

use crate::ncnn::fuse_concat;
use crate::ncnn::net::Net;
use crate::ncnn::{err, Mat};
use crate::ncnn_bail;

/// One inference over a net.
pub struct Extractor {
    blobs: Vec<Option<Mat>>,
    given: Vec<bool>,
    generation: u64,
    light_mode: bool,
    /// Per-layer forward times (layer index, seconds) and the clock that
    /// measures them, when profiling is on.
    timings: Option<(Vec<(usize, f64)>, fn() -> f64)>,
}

impl Extractor {
    /// A new extractor over `net`, which must have its model loaded.
    pub fn new(net: &Net) -> anyhow::Result<Extractor> {
        if !net.is_ready() {
            ncnn_bail!("the net has no model loaded; call load_param() and load_model() first");
        }
        let n = net.blob_count();
        Ok(Extractor {
            blobs: vec![None; n],
            given: vec![false; n],
            generation: net.generation(),
            light_mode: net.light_mode,
            timings: None,
        })
    }

    /// Record the forward time of every layer this extractor runs, read
    /// from `clock` (seconds), or stop recording with `None` (an internal
    /// profiling aid; see [`Extractor::timings`]).
    pub fn set_profiling(&mut self, clock: Option<fn() -> f64>) {
        self.timings = clock.map(|c| (Vec::new(), c));
    }

    /// (layer index, seconds) of every layer run so far, in run order.
    pub fn timings(&self) -> &[(usize, f64)] {
        self.timings.as_ref().map(|t| t.0.as_slice()).unwrap_or(&[])
    }

    pub fn check(&self, net: &Net) -> anyhow::Result<()> {
        if net.generation() != self.generation || !net.is_ready() {
            ncnn_bail!("this extractor belongs to an earlier state of its net (cleared or reloaded since); create a new one");
        }
        Ok(())
    }

    pub fn set_light_mode(&mut self, on: bool) {
        self.light_mode = on;
    }

    /// Set input `blob`. Everything computed so far came from the earlier
    /// inputs, so it is dropped; the other given inputs stay.
    pub fn input(&mut self, net: &Net, blob: usize, m: Mat) -> anyhow::Result<()> {
        self.check(net)?;
        if blob >= self.blobs.len() {
            ncnn_bail!("blob index {blob} is out of range: this net has {} blobs", self.blobs.len());
        }
        for (b, given) in self.blobs.iter_mut().zip(&self.given) {
            if !given {
                *b = None;
            }
        }
        // BOUNDS: blob < blobs.len() (checked above) == given.len() (both
        // made with the net's blob count in `new`).
        self.blobs[blob] = Some(m);
        self.given[blob] = true;
        Ok(())
    }

    /// Compute `blob` (and what it needs). A stop requested through
    /// [`crate::base::cancel`] ends the pass between layers.
    pub fn extract(&mut self, net: &Net, blob: usize) -> anyhow::Result<Mat> {
        self.check(net)?;
        match self.blobs.get(blob) {
            None => ncnn_bail!("blob index {blob} is out of range: this net has {} blobs", self.blobs.len()),
            Some(Some(m)) => return Ok(m.clone()),
            Some(None) => {}
        }
        match net.pool() {
            // Without custom layers the whole pass runs on the pool: one
            // hand-over instead of one per layer.
            Some(pool) if !net.has_custom() => {
                let job = AssertSend((self, net));
                pool.install(move || {
                    let job = job;
                    let (ex, net) = job.0;
                    ex.run(net, blob)
                })
            }
            _ => self.run(net, blob),
        }
    }

    // BOUNDS-FN: `blob` < the blob count (`extract` looked it up). Every
    // other blob index is a bottom or top of the spec's layers, which
    // `param::link` checked against the spec's blobs, whose count sized
    // `self.blobs` and `self.given` in `new`, for the net state that `check`
    // confirmed; every layer index is `first` or a blob's producer (set by
    // `link` to a layer's position), below the layer count that sizes
    // `state`.
    fn run(&mut self, net: &Net, blob: usize) -> anyhow::Result<Mat> {
        let spec = net.spec();
        let first = match spec.blobs[blob].producer {
            Some(p) => p,
            None => ncnn_bail!(
                "blob {} has no producer; give it with input()",
                describe_blob(net, blob)
            ),
        };
        let nl = spec.layers.len();
        let mut state = vec![0u8; nl]; // 0 new, 1 on stack, 2 done
        let mut stack = vec![first];
        while let Some(&li) = stack.last() {
            if state[li] == 2 {
                stack.pop();
                continue;
            }
            crate::base::cancel::check()?;
            state[li] = 1;
            let l = &spec.layers[li];
            // A channel Concat of convolutions runs them itself, into its
            // output: it waits on their inputs instead.
            let fused = if self.light_mode {
                fuse_concat::convs_of_concat(net, li, &self.blobs, &self.given)
            } else {
                None
            };
            let needs: Vec<(usize, usize)> = match &fused {
                Some(convs) => convs.iter().map(|&p| (spec.layers[p].bottoms[0], p)).collect(),
                None => l.bottoms.iter().map(|&b| (b, li)).collect(),
            };
            let mut pending = false;
            for &(b, user) in &needs {
                let l = &spec.layers[user];
                if self.blobs[b].is_some() {
                    continue;
                }
                if self.given[b] {
                    ncnn_bail!(
                        "input blob {} was released after use (light mode); set it again with input(), or create the net with light_mode = FALSE to extract earlier blobs after later ones",
                        describe_blob(net, b)
                    );
                }
                match spec.blobs[b].producer {
                    None => ncnn_bail!(
                        "blob {} needed by {} was not given; set it with input()",
                        describe_blob(net, b),
                        l.describe()
                    ),
                    Some(p) if state[p] == 1 => {
                        ncnn_bail!(
                            "{} depends on its own output (a cycle in the param)",
                            l.describe()
                        )
                    }
                    Some(p) if state[p] == 2 => ncnn_bail!(
                        "blob {} was released by light mode before {} used it",
                        describe_blob(net, b),
                        l.describe()
                    ),
                    Some(p) => {
                        stack.push(p);
                        pending = true;
                    }
                }
            }
            if pending {
                continue;
            }
            if let Some(convs) = fused {
                let blobs: Vec<usize> = needs.iter().map(|&(b, _)| b).collect();
                let xs = self.take_bottoms(net, &blobs)?;
                let clock = self.timings.as_ref().map(|t| t.1);
                let mut times = Vec::new();
                let top = crate::base::alloc::catch_refusal(|| fuse_concat::run(net, li, &convs, xs, clock, &mut times))?;
                if let Some(t) = self.timings.as_mut() {
                    t.0.extend(times);
                }
                self.blobs[l.tops[0]] = Some(top);
                for p in convs {
                    state[p] = 2;
                }
                state[li] = 2;
                stack.pop();
                continue;
            }
            let is_input = l.bottoms.is_empty()
                && net.builtin_layer(li).is_some()
                && (l.type_name == "Input" || l.type_index == Some(16));
            if is_input {
                let names: Vec<String> = l.tops.iter().map(|&t| describe_blob(net, t)).collect();
                ncnn_bail!(
                    "input blob {} was not set; call input() first",
                    names.join(", ")
                );
            }
            let bottoms = self.take_bottoms(net, &l.bottoms)?;
            let t0 = self.timings.as_ref().map(|t| (t.1)());
            let tops = net.run_layer(li, bottoms, l.tops.len()).map_err(|e| {
                if crate::base::cancel::is_interrupt(&e) {
                    e
                } else {
                    err(format!("{}: {e:#}", l.describe()))
                }
            })?;
            if let (Some(t), Some(t0)) = (self.timings.as_mut(), t0) {
                let now = (t.1)();
                t.0.push((li, now - t0));
            }
            if tops.len() != l.tops.len() {
                ncnn_bail!(
                    "{} produced {} blobs but declares {} tops",
                    l.describe(),
                    tops.len(),
                    l.tops.len()
                );
            }
            for (&t, m) in l.tops.iter().zip(tops) {
                self.blobs[t] = Some(m);
            }
            state[li] = 2;
            stack.pop();
        }
        self.blobs[blob].clone().ok_or_else(|| {
            err(format!(
                "blob {} was not computed",
                describe_blob(net, blob)
            ))
        })
    }
}

impl Extractor {
    /// The bottoms of a layer, in order. Light mode releases every blob
    /// once its consumer has run: the last mention of a blob takes it, an
    /// earlier one (a layer listing the same bottom twice) copies it.
    fn take_bottoms(&mut self, net: &Net, list: &[usize]) -> anyhow::Result<Vec<Mat>> {
        let mut out = Vec::with_capacity(list.len());
        for (j, &b) in list.iter().enumerate() {
            // BOUNDS: j < list.len(), so j + 1 <= list.len().
            let last = !list[j + 1..].contains(&b);
            let slot = self.blobs.get_mut(b);
            let m = match slot {
                Some(s) if self.light_mode && last => s.take(),
                Some(s) => s.clone(),
                None => None,
            };
            out.push(m.ok_or_else(|| err(format!("blob {} is missing", describe_blob(net, b))))?);
        }
        Ok(out)
    }
}

/// Moves a pass over a net without custom layers to a worker thread. The pass
/// touches only the param spec, builtin layers (Send + Sync) and its own
/// blobs, never the registry's callbacks, which stay on the calling thread.
struct AssertSend<T>(T);
// SAFETY: the wrapped pass reaches no `Rc` or R callback (see above): the
// caller runs it on the pool only when `net.has_custom()` is false.
unsafe impl<T> Send for AssertSend<T> {}

fn describe_blob(net: &Net, b: usize) -> String {
    let n = net.blob_name(b);
    if n.is_empty() {
        format!("#{b}")
    } else {
        format!("'{n}'")
    }
}
