//! The imported model as data: graphs of nodes with typed attributes,
//! declared inputs and outputs, initializers. [`super::load`] fills them.

use super::elem::Elem;
use super::init::Init;
use std::collections::HashMap;
use std::sync::Arc;

/// Default-domain opsets the importer knows.
pub const OPSET_RANGE: (i64, i64) = (1, 28);

/// A dimension of a declared input or output shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnnxDim {
    Fixed(usize),
    /// A named or unknown (dynamic) dimension.
    Dynamic(String),
}

/// A graph input or output as declared.
#[derive(Debug, Clone)]
pub struct ValueInfo {
    pub name: String,
    pub elem: Option<Elem>,
    pub dims: Option<Vec<OnnxDim>>,
}

/// A node attribute.
#[derive(Debug, Clone)]
pub enum Attr {
    F(f32),
    I(i64),
    S(String),
    T(Arc<Init>),
    G(Arc<OnnxGraph>),
    Fs(Vec<f32>),
    Is(Vec<i64>),
    Ss(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct OnnxNode {
    /// The node's name, or "#<index>" when it has none.
    pub name: String,
    pub op: String,
    pub domain: String,
    /// Input names ("" for an omitted optional input).
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: HashMap<String, Attr>,
}

impl OnnxNode {
    /// "Conv node 'conv1'", for messages.
    pub fn describe(&self) -> String {
        format!("{} node '{}'", self.op, self.name)
    }
}

#[derive(Debug, Clone, Default)]
pub struct OnnxGraph {
    pub name: String,
    pub nodes: Vec<OnnxNode>,
    /// The inputs a caller provides (declared inputs that are not initializers).
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
    pub inits: HashMap<String, Arc<Init>>,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub ir_version: i64,
    /// The default domain's opset.
    pub opset: i64,
    pub producer: String,
    pub graph: Arc<OnnxGraph>,
}
