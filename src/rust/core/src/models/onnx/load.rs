//! Reading a model: the protobuf decoded into a graph of nodes with typed
//! attributes, its inputs (those that are not initializers), outputs and
//! initializers, and the check that every operator in it is supported,
//! listing all the unsupported ones at once.

use super::elem::Elem;
use super::init::Init;
use super::proto::{self, GraphProto, ModelProto};
use super::ops;
use anyhow::{bail, ensure, Context as _};
use prost::bytes::Bytes;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

pub use super::model::{Attr, OnnxDim, OnnxGraph, Model, OnnxNode, ValueInfo, OPSET_RANGE};

impl Model {
    /// Reads the model in `bytes`; `dir` is its folder (for external data).
    pub fn from_bytes(bytes: Bytes, dir: Option<&Path>) -> crate::Result<Model> {
        ensure!(!bytes.is_empty(), "the file is empty");
        let m: ModelProto = proto::decode_model(bytes)?;
        let mut opset = None;
        for o in &m.opset_import {
            let d = o.domain.as_deref().unwrap_or("");
            if d.is_empty() || d == "ai.onnx" {
                opset = Some(o.version.unwrap_or(1));
            }
        }
        // IR versions before 3 had no opset_import; those models are opset 1.
        let opset = opset.unwrap_or(if m.opset_import.is_empty() { 1 } else { OPSET_RANGE.1 });
        ensure!(
            (OPSET_RANGE.0..=OPSET_RANGE.1).contains(&opset),
            "the model uses opset {opset} of the default domain; ggmlR reads opsets {} to {}",
            OPSET_RANGE.0,
            OPSET_RANGE.1
        );
        let g = m.graph.as_ref().ok_or_else(|| anyhow::anyhow!("the file holds no graph (is it an ONNX model?)"))?;
        let graph = read_graph(g, dir, 0)?;
        let producer = [m.producer_name.clone().unwrap_or_default(), m.producer_version.clone().unwrap_or_default()]
            .join(" ")
            .trim()
            .to_string();
        let model = Model { ir_version: m.ir_version.unwrap_or(0), opset, producer, graph: Arc::new(graph) };
        model.check_supported()?;
        Ok(model)
    }

    /// Distinct operator types of the main graph, in order of first use.
    pub fn op_types(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        self.graph.nodes.iter().filter(|n| seen.insert(n.op.clone())).map(|n| n.op.clone()).collect()
    }

    /// An error listing every unsupported operator (with its nodes) of the
    /// model and its subgraphs.
    fn check_supported(&self) -> crate::Result<()> {
        let mut bad: BTreeMap<String, Vec<String>> = BTreeMap::new();
        walk(&self.graph, &mut |n| {
            if !ops::supported(&n.domain, &n.op) {
                let key = if n.domain.is_empty() || n.domain == "ai.onnx" {
                    n.op.clone()
                } else {
                    format!("{}.{}", n.domain, n.op)
                };
                bad.entry(key).or_default().push(n.name.clone());
            }
        });
        if bad.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = bad
            .iter()
            .map(|(op, nodes)| {
                let shown: Vec<String> = nodes.iter().take(3).map(|s| format!("'{s}'")).collect();
                let more = if nodes.len() > 3 { format!(" and {} more", nodes.len() - 3) } else { String::new() };
                format!("{op} ({} {}{more})", if nodes.len() == 1 { "node" } else { "nodes" }, shown.join(", "))
            })
            .collect();
        bail!(
            "the model uses {} operator{} that ggmlR does not support: {}",
            bad.len(),
            if bad.len() == 1 { "" } else { "s" },
            list.join("; ")
        )
    }
}

/// Calls `f` on every node of `g` and of its subgraphs.
pub fn walk(g: &OnnxGraph, f: &mut dyn FnMut(&OnnxNode)) {
    for n in &g.nodes {
        f(n);
        for a in n.attrs.values() {
            if let Attr::G(sub) = a {
                walk(sub, f);
            }
        }
    }
}

/// Subgraphs nested deeper than this are refused.
const MAX_DEPTH: usize = 32;

fn read_graph(g: &GraphProto, dir: Option<&Path>, depth: usize) -> crate::Result<OnnxGraph> {
    ensure!(depth <= MAX_DEPTH, "subgraphs are nested more than {MAX_DEPTH} deep");
    ensure!(g.sparse_initializer.is_empty(), "sparse initializers are not supported");
    let mut inits = HashMap::new();
    for t in &g.initializer {
        let init = Init::from_proto(t, dir, "initializer")?;
        ensure!(!init.name.is_empty(), "an initializer has no name");
        inits.insert(init.name.clone(), Arc::new(init));
    }
    let inputs = g
        .input
        .iter()
        .map(value_info)
        .collect::<crate::Result<Vec<_>>>()?
        .into_iter()
        .filter(|v| !inits.contains_key(&v.name))
        .collect();
    let outputs = g.output.iter().map(value_info).collect::<crate::Result<Vec<_>>>()?;
    let mut nodes = Vec::with_capacity(g.node.len());
    for (i, n) in g.node.iter().enumerate() {
        let name = match n.name.as_deref() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => format!("#{i}"),
        };
        let op = n.op_type.clone().unwrap_or_default();
        let what = || format!("{op} node '{name}'");
        ensure!(!op.is_empty(), "node '{name}' has no operator type");
        let mut attrs = HashMap::new();
        for a in &n.attribute {
            let an = a.name.clone().unwrap_or_default();
            let v = attr(a, dir, depth).with_context(|| format!("attribute '{an}' of {}", what()))?;
            if let Some(v) = v {
                attrs.insert(an, v);
            }
        }
        nodes.push(OnnxNode {
            name,
            op,
            domain: n.domain.clone().unwrap_or_default(),
            inputs: n.input.clone(),
            outputs: n.output.clone(),
            attrs,
        });
    }
    Ok(OnnxGraph { name: g.name.clone().unwrap_or_default(), nodes, inputs, outputs, inits })
}

fn value_info(v: &proto::ValueInfoProto) -> crate::Result<ValueInfo> {
    let name = v.name.clone().unwrap_or_default();
    let mut info = ValueInfo { name, elem: None, dims: None };
    if let Some(proto::type_proto::TypeValue::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        info.elem = t.elem_type.and_then(|c| Elem::from_code(c).ok());
        if let Some(s) = &t.shape {
            let dims = s
                .dim
                .iter()
                .map(|d| match &d.value {
                    Some(proto::tensor_shape_proto::dimension::DimensionValue::DimValue(v)) if *v >= 0 => {
                        OnnxDim::Fixed(*v as usize)
                    }
                    Some(proto::tensor_shape_proto::dimension::DimensionValue::DimParam(p)) => OnnxDim::Dynamic(p.clone()),
                    _ => OnnxDim::Dynamic(String::new()),
                })
                .collect();
            info.dims = Some(dims);
        }
    }
    Ok(info)
}

fn attr(a: &proto::AttributeProto, dir: Option<&Path>, depth: usize) -> crate::Result<Option<Attr>> {
    use proto::attribute_proto::AttributeType as T;
    let utf8 = |b: &Vec<u8>| String::from_utf8_lossy(b).into_owned();
    // Older writers leave `type` unset; then the field that is present decides.
    let ty = a.r#type.and_then(|t| T::try_from(t).ok());
    let v = match ty {
        Some(T::Float) => a.f.map(Attr::F),
        Some(T::Int) => a.i.map(Attr::I),
        Some(T::String) => a.s.as_ref().map(|s| Attr::S(utf8(s))),
        Some(T::Tensor) => a.t.as_ref().map(|t| Init::from_proto(t, dir, "tensor").map(|i| Attr::T(Arc::new(i)))).transpose()?,
        Some(T::Graph) => a.g.as_ref().map(|g| read_graph(g, dir, depth + 1).map(|g| Attr::G(Arc::new(g)))).transpose()?,
        Some(T::Floats) => Some(Attr::Fs(a.floats.clone())),
        Some(T::Ints) => Some(Attr::Is(a.ints.clone())),
        Some(T::Strings) => Some(Attr::Ss(a.strings.iter().map(utf8).collect())),
        Some(_) => None,
        None => {
            if let Some(f) = a.f {
                Some(Attr::F(f))
            } else if let Some(i) = a.i {
                Some(Attr::I(i))
            } else if let Some(s) = &a.s {
                Some(Attr::S(utf8(s)))
            } else if let Some(t) = &a.t {
                Some(Attr::T(Arc::new(Init::from_proto(t, dir, "tensor")?)))
            } else if let Some(g) = &a.g {
                Some(Attr::G(Arc::new(read_graph(g, dir, depth + 1)?)))
            } else if !a.ints.is_empty() {
                Some(Attr::Is(a.ints.clone()))
            } else if !a.floats.is_empty() {
                Some(Attr::Fs(a.floats.clone()))
            } else if !a.strings.is_empty() {
                Some(Attr::Ss(a.strings.iter().map(utf8).collect()))
            } else {
                None
            }
        }
    };
    Ok(v)
}
