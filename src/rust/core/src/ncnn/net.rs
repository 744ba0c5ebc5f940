//! The net (layers built from a param, weights from a model) and the
//! extractor (one inference: inputs in, blobs computed on demand).

use crate::ncnn::layer::{Builtin, Opt};
use crate::ncnn::layers;
use crate::ncnn::param::{self, NetSpec};
use crate::ncnn::registry::{RegKey, Registry};
use crate::ncnn::types::{self, CUSTOM_BIT};
use crate::ncnn::{err, DataReader, Layer, Mat, ModelBin};
use crate::ncnn_bail;
use std::sync::Arc;

enum Imp {
    Builtin(Builtin),
    /// A custom layer and the registry entry whose current destroyer releases it.
    Custom(Option<Box<dyn Layer>>, RegKey),
}

/// A summary row of one layer.
pub struct LayerInfo {
    pub name: String,
    pub type_name: String,
    pub type_index: i32,
    pub custom: bool,
    pub bottoms: Vec<usize>,
    pub tops: Vec<usize>,
}

pub struct Net {
    pub registry: Registry,
    spec: NetSpec,
    layers: Vec<Imp>,
    model_loaded: bool,
    opt: Opt,
    pub light_mode: bool,
    /// Bumped whenever the layers change, so stale extractors are refused.
    generation: u64,
    /// The worker threads of `opt`, started anew in a forked child.
    threads: crate::base::threads::Pool,
}

impl Net {
    pub fn new(num_threads: usize, light_mode: bool) -> anyhow::Result<Net> {
        let n = num_threads.max(1);
        // One thread: layers run on the calling thread, loops sequentially.
        let threads = crate::base::threads::Pool::new(n, "ncnn-worker")
            .map_err(|e| err(format!("{e:#}")))?;
        let pool = threads.get().map_err(|e| err(format!("{e:#}")))?;
        Ok(Net {
            registry: Registry::default(),
            spec: NetSpec::default(),
            layers: Vec::new(),
            model_loaded: false,
            opt: Opt {
                pool,
                num_threads: n,
            },
            light_mode,
            generation: 0,
            threads,
        })
    }

    pub fn num_threads(&self) -> usize {
        self.opt.num_threads
    }

    /// Destroy every layer (custom ones through their key's current destroyer).
    /// Registrations stay.
    pub fn clear(&mut self) {
        let layers = std::mem::take(&mut self.layers);
        for imp in layers {
            if let Imp::Custom(Some(layer), key) = imp {
                match self.registry.factory(key) {
                    Some(f) => f.destroy(layer),
                    None => drop(layer),
                }
            }
        }
        self.spec = NetSpec::default();
        self.model_loaded = false;
        self.generation += 1;
    }

    pub fn load_param_text(&mut self, text: &str) -> anyhow::Result<()> {
        self.clear();
        let spec = param::parse_text(text)?;
        self.build(spec)
    }

    pub fn load_param_binary(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.clear();
        let spec = param::parse_binary(bytes)?;
        self.build(spec)
    }

    fn build(&mut self, spec: NetSpec) -> anyhow::Result<()> {
        self.spec = spec;
        for i in 0..self.spec.layers.len() {
            match self.create(i) {
                Ok(imp) => self.layers.push(imp),
                Err(e) => {
                    let what = self.spec.layers[i].describe();
                    self.clear();
                    return Err(err(format!("{what}: {e:#}")));
                }
            }
        }
        Ok(())
    }

    fn create(&self, i: usize) -> anyhow::Result<Imp> {
        let l = &self.spec.layers[i];
        let custom = |key: RegKey| -> anyhow::Result<Imp> {
            let f = self
                .registry
                .factory(key)
                .ok_or_else(|| err("custom layer has no creator"))?;
            let layer = f.create()?;
            Ok(Imp::Custom(Some(layer), key))
        };
        let builtin = |name: &str| -> anyhow::Result<Imp> {
            match layers::create(name, &l.params) {
                Some(r) => Ok(Imp::Builtin(r?)),
                None => ncnn_bail!(
                    "layer type {name} is not supported by this package; register a custom layer for it with register_custom_layer()"
                ),
            }
        };
        match l.type_index {
            None => {
                if let Some(key) = self.registry.lookup_name(&l.type_name) {
                    return custom(key);
                }
                if types::index_of(&l.type_name).is_some() {
                    return builtin(&l.type_name);
                }
                ncnn_bail!(
                    "unknown layer type '{}'; register it first with register_custom_layer()",
                    l.type_name
                )
            }
            Some(idx) => {
                if idx & CUSTOM_BIT == 0 {
                    if let Some(key) = self.registry.lookup_override(idx) {
                        return custom(key);
                    }
                    if let Some(name) = types::name_of(idx) {
                        return builtin(name);
                    }
                }
                if idx >= 0 {
                    if let Some(key) = self.registry.lookup_slot(idx) {
                        return custom(key);
                    }
                }
                ncnn_bail!("unknown layer type index {idx}; register it first with register_custom_layer()")
            }
        }
    }

    /// Read every layer's weights, in order.
    pub fn load_model(&mut self, reader: &DataReader) -> anyhow::Result<()> {
        if self.layers.is_empty() {
            ncnn_bail!("load_model: no layers; load a param first");
        }
        self.model_loaded = false;
        self.generation += 1;
        let mut mb = ModelBin::new(reader);
        for (i, imp) in self.layers.iter_mut().enumerate() {
            let r = match imp {
                Imp::Builtin(b) => b.load_model(&mut mb),
                Imp::Custom(Some(c), _) => c.load_model(&mut mb),
                Imp::Custom(None, _) => Ok(()),
            };
            if let Err(e) = r {
                return Err(err(format!("{}: {e:#}", self.spec.layers[i].describe())));
            }
        }
        self.model_loaded = true;
        Ok(())
    }

    pub fn blob_count(&self) -> usize {
        self.spec.blobs.len()
    }

    pub fn blob_name(&self, i: usize) -> &str {
        &self.spec.blobs[i].name
    }

    /// Resolve a blob name to its index.
    pub fn find_blob(&self, name: &str) -> anyhow::Result<usize> {
        self.spec
            .blobs
            .iter()
            .position(|b| b.name == name)
            .ok_or_else(|| {
                err(format!(
                    "no blob named '{name}' in this net; see input_names() and output_names()"
                ))
            })
    }

    pub fn check_blob(&self, i: i64) -> anyhow::Result<usize> {
        if i < 0 || i as usize >= self.spec.blobs.len() {
            ncnn_bail!(
                "blob index {i} is out of range: this net has {} blobs (0-based)",
                self.spec.blobs.len()
            );
        }
        Ok(i as usize)
    }

    /// Tops of Input layers.
    pub fn input_indexes(&self) -> Vec<usize> {
        let mut v = Vec::new();
        for l in &self.spec.layers {
            let is_input = l.type_name == "Input" || l.type_index == Some(16);
            if is_input {
                v.extend(l.tops.iter().copied());
            }
        }
        v
    }

    /// Blobs with a producer and no consumer.
    pub fn output_indexes(&self) -> Vec<usize> {
        (0..self.spec.blobs.len())
            .filter(|&i| {
                self.spec.blobs[i].producer.is_some() && self.spec.blobs[i].consumer.is_none()
            })
            .collect()
    }

    pub fn layer_info(&self) -> Vec<LayerInfo> {
        self.spec
            .layers
            .iter()
            .zip(self.layers.iter())
            .map(|(l, imp)| {
                let type_index = l.type_index.unwrap_or_else(|| {
                    types::index_of(&l.type_name)
                        .map(|i| i as i32)
                        .unwrap_or(-1)
                });
                let type_name = if l.type_name.is_empty() {
                    types::name_of(type_index).unwrap_or("").to_string()
                } else {
                    l.type_name.clone()
                };
                LayerInfo {
                    name: l.name.clone(),
                    type_name,
                    type_index,
                    custom: matches!(imp, Imp::Custom(..)),
                    bottoms: l.bottoms.clone(),
                    tops: l.tops.clone(),
                }
            })
            .collect()
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_ready(&self) -> bool {
        self.model_loaded
    }

    pub fn create_extractor(&self) -> anyhow::Result<Extractor> {
        if !self.model_loaded {
            ncnn_bail!("the net has no model loaded; call load_param() and load_model() first");
        }
        Ok(Extractor {
            blobs: vec![None; self.spec.blobs.len()],
            given: vec![false; self.spec.blobs.len()],
            generation: self.generation,
            light_mode: self.light_mode,
            timings: None,
        })
    }

    /// The parsed param.
    pub(super) fn spec(&self) -> &NetSpec {
        &self.spec
    }

    /// Layer `li` when it is a builtin one.
    pub(super) fn builtin_layer(&self, li: usize) -> Option<&(dyn Layer + Send + Sync)> {
        match self.layers.get(li)? {
            Imp::Builtin(b) => Some(b.as_ref()),
            Imp::Custom(..) => None,
        }
    }

    /// Runs `f` where builtin layers run: on the worker pool, or on this
    /// thread with sequential loops.
    pub(super) fn on_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match self.pool() {
            Some(p) => p.install(f),
            None => crate::ncnn::par::run_sequential(f),
        }
    }

    /// The worker pool in this process (a forked child starts its own
    /// threads; none could start: the calling thread does the work).
    fn pool(&self) -> Option<Arc<rayon::ThreadPool>> {
        self.threads.get().ok().flatten()
    }

    /// Run layer `li`. An allocation a layer's sizes make impossible is
    /// refused as this layer's error (see `alloc::Refused`).
    pub(super) fn run_layer(&self, li: usize, bottoms: Vec<Mat>, ntop: usize) -> anyhow::Result<Vec<Mat>> {
        match self.layers.get(li) {
            Some(Imp::Builtin(b)) => {
                let opt = &self.opt;
                crate::base::alloc::catch_refusal(|| self.on_pool(|| b.forward(bottoms, ntop, opt)))
            }
            // Custom layers run on the calling thread.
            Some(Imp::Custom(Some(c), _)) => crate::base::alloc::catch_refusal(|| c.forward(bottoms, ntop, &self.opt)),
            Some(Imp::Custom(None, _)) | None => ncnn_bail!("layer was destroyed"),
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.clear();
    }
}

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
    /// Record the forward time of every layer this extractor runs, read
    /// from `clock` (seconds), or stop recording with `None` (an internal
    /// profiling aid; see [`Extractor::timings`]).
    pub fn set_profiling(&mut self, clock: Option<fn() -> f64>) {
        self.timings = clock.map(|c| (Vec::new(), c));
    }

    /// (layer index, seconds) of every layer run so far, in run order.
    pub fn timings(&self) -> &[(usize, f64)] {
        self.timings.as_ref().map(|t| &t.0[..]).unwrap_or(&[])
    }

    pub fn check(&self, net: &Net) -> anyhow::Result<()> {
        if net.generation != self.generation || !net.model_loaded {
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
        let has_custom = net.layers.iter().any(|l| matches!(l, Imp::Custom(..)));
        match &net.pool() {
            // Without custom layers the whole pass runs on the pool: one
            // hand-over instead of one per layer.
            Some(pool) if !has_custom => {
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

    fn run(&mut self, net: &Net, blob: usize) -> anyhow::Result<Mat> {
        let spec = &net.spec;
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
                super::fuse_concat::convs_of_concat(net, li, &self.blobs, &self.given)
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
                let top = crate::base::alloc::catch_refusal(|| super::fuse_concat::run(net, li, &convs, xs, clock, &mut times))?;
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
                && matches!(net.layers[li], Imp::Builtin(_))
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
unsafe impl<T> Send for AssertSend<T> {}

fn describe_blob(net: &Net, b: usize) -> String {
    let n = net.blob_name(b);
    if n.is_empty() {
        format!("#{b}")
    } else {
        format!("'{n}'")
    }
}
