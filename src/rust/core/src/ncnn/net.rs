//! The net: layers built from a param (through the registry for custom
//! types), weights read from a model, and how a layer runs (builtin ones on
//! the worker pool, custom ones on the calling thread).

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
    /// Layers whose create_pipeline succeeded (destroy_pipeline is owed).
    pipelines: Vec<bool>,
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
            pipelines: Vec::new(),
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
        self.destroy_pipelines();
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
                    // BOUNDS: i < self.spec.layers.len() (the loop's range).
                    let what = self.spec.layers[i].describe();
                    self.clear();
                    return Err(err(format!("{what}: {e:#}")));
                }
            }
        }
        Ok(())
    }

    fn create(&self, i: usize) -> anyhow::Result<Imp> {
        let l = self.spec.layers.get(i).ok_or_else(|| anyhow::anyhow!("internal: the net has no layer {i}"))?;
        let custom = |key: RegKey| -> anyhow::Result<Imp> {
            let f = self
                .registry
                .factory(key)
                .ok_or_else(|| err("custom layer has no creator"))?;
            let mut layer = f.create()?;
            if let Err(e) = layer.load_param(&l.params) {
                // Made, so destroyed like any other layer.
                f.destroy(layer);
                return Err(e);
            }
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

    /// Read every layer's weights, in order, then create every layer's
    /// pipeline (destroying those of an earlier load first).
    pub fn load_model(&mut self, reader: &DataReader) -> anyhow::Result<()> {
        if self.layers.is_empty() {
            ncnn_bail!("load_model: no layers; load a param first");
        }
        self.destroy_pipelines();
        self.model_loaded = false;
        self.generation += 1;
        let mut mb = ModelBin::new(reader);
        for (imp, l) in self.layers.iter_mut().zip(&self.spec.layers) {
            let r = match imp {
                Imp::Builtin(b) => b.load_model(&mut mb),
                Imp::Custom(Some(c), _) => c.load_model(&mut mb),
                Imp::Custom(None, _) => Ok(()),
            };
            if let Err(e) = r {
                return Err(err(format!("{}: {e:#}", l.describe())));
            }
        }
        self.pipelines = vec![false; self.layers.len()];
        for i in 0..self.layers.len() {
            let opt = &self.opt;
            // BOUNDS: i < self.layers.len() (the loop's range).
            let r = match &mut self.layers[i] {
                Imp::Builtin(b) => b.create_pipeline(opt),
                Imp::Custom(Some(c), _) => c.create_pipeline(opt),
                Imp::Custom(None, _) => Ok(()),
            };
            if let Err(e) = r {
                // BOUNDS: as many layers as the spec has; i < self.layers.len().
                let what = self.spec.layers[i].describe();
                self.destroy_pipelines();
                return Err(err(format!("{what}: {e:#}")));
            }
            // BOUNDS: pipelines has one entry per layer (set above), i < self.layers.len().
            self.pipelines[i] = true;
        }
        self.model_loaded = true;
        Ok(())
    }

    /// destroy_pipeline of every layer whose pipeline was created.
    fn destroy_pipelines(&mut self) {
        let created = std::mem::take(&mut self.pipelines);
        for (imp, made) in self.layers.iter_mut().zip(created) {
            if made {
                match imp {
                    Imp::Builtin(b) => b.destroy_pipeline(&self.opt),
                    Imp::Custom(Some(c), _) => c.destroy_pipeline(&self.opt),
                    Imp::Custom(None, _) => {}
                }
            }
        }
    }

    pub fn blob_count(&self) -> usize {
        self.spec.blobs.len()
    }

    /// The name of blob `i` ("" past the last blob).
    pub fn blob_name(&self, i: usize) -> &str {
        self.spec.blobs.get(i).map_or("", |b| b.name.as_str())
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
        self.spec
            .blobs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.producer.is_some() && b.consumer.is_none())
            .map(|(i, _)| i)
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

    /// Whether any layer is a custom one (those run on the calling thread).
    pub(super) fn has_custom(&self) -> bool {
        self.layers.iter().any(|l| matches!(l, Imp::Custom(..)))
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

    /// The worker pool in this process (None: one thread, layers run on
    /// the caller's; a forked child starts its own threads; none could
    /// start: the calling thread does the work).
    pub(super) fn pool(&self) -> Option<Arc<rayon::ThreadPool>> {
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

