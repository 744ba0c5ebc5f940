//! The operators: each family's file maps its operators onto engine ops
//! (`lower_*`: any inputs, building graph nodes) and, where a node can run
//! on the host, evaluates them there (`fold_*`: all inputs constant, used
//! for constant folding and for the operators that only run on the host).

mod attention;
mod constant;
mod control;
mod conv;
mod einsum;
mod elementwise;
mod host_only;
mod index;
mod matmul;
mod norm;
mod pool;
mod quant;
mod reduce;
mod resize;
mod rnn;
mod shape;

use super::builder::Builder;
use super::dev::ne_of;
use super::elem::Elem;
use super::host::HTensor;
use super::load::Node;
use super::plan::{NeedsData, Planner};
use super::val::{Const, Dev, Taint, Val};
use crate::base::dtype::DType;
use anyhow::{bail, ensure};
use std::sync::Arc;

/// Maps a node onto the engine graph (inputs: one per node input, None
/// when omitted).
pub type Lower = fn(&mut Planner, &Node, &[Option<Val>]) -> crate::Result<Vec<Val>>;
/// Computes a node on the host (constant inputs; the default-domain opset).
pub type Fold = fn(&Node, &[Option<Arc<HTensor>>], i64) -> crate::Result<Vec<HTensor>>;

/// Every operator the importer implements (default and com.microsoft
/// domains), sorted.
pub const OPERATORS: &[&str] = &[
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "Attention", "AveragePool", "BatchNormalization", "BitShift", "BitwiseAnd", "BitwiseNot",
    "BitwiseOr", "BitwiseXor", "BlackmanWindow", "Cast", "CastLike", "Ceil", "Celu", "Clip",
    "Compress", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvInteger", "ConvTranspose",
    "Cos", "Cosh", "CumProd", "CumSum", "DepthToSpace", "DequantizeLinear", "Div", "Dropout",
    "DynamicQuantizeLinear", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike",
    "Flatten", "Floor", "GRU", "Gather", "GatherElements", "GatherND", "Gelu", "Gemm",
    "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "Greater", "GreaterOrEqual",
    "GroupNormalization", "HammingWindow", "HannWindow", "HardSigmoid", "HardSwish", "Hardmax",
    "Identity", "If", "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM",
    "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "Loop",
    "LpNormalization", "LpPool", "MatMul", "MatMulInteger", "Max", "MaxPool", "Mean",
    "MeanVarianceNormalization", "Min", "Mish", "Mod", "Mul", "MultiHeadAttention", "Neg",
    "NonMaxSuppression", "NonZero", "Not", "OneHot", "Or", "PRelu", "Pad", "Pow", "QLinearAdd",
    "QLinearConcat", "QLinearConv", "QLinearGlobalAveragePool", "QLinearLeakyRelu",
    "QLinearMatMul", "QLinearMul", "QLinearSigmoid", "QuantizeLinear", "RMSNormalization",
    "RNN", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "Relu", "Reshape", "Resize", "ReverseSequence", "RoiAlign", "Round", "Scan", "Scatter",
    "ScatterElements", "ScatterND", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Silu",
    "SimplifiedLayerNormalization", "Sin", "Sinh", "Size", "Slice", "Softmax", "Softplus",
    "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Swish", "Tan",
    "Tanh", "ThresholdedRelu", "Tile", "TopK", "Transpose", "Trilu", "Unique", "Unsqueeze",
    "Upsample", "Where", "Xor",
];

/// The implementations of operator `op`: (engine mapping, host evaluation).
fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
    elementwise::find(op)
        .or_else(|| shape::find(op))
        .or_else(|| constant::find(op))
        .or_else(|| index::find(op))
        .or_else(|| reduce::find(op))
        .or_else(|| matmul::find(op))
        .or_else(|| conv::find(op))
        .or_else(|| pool::find(op))
        .or_else(|| norm::find(op))
        .or_else(|| resize::find(op))
        .or_else(|| rnn::find(op))
        .or_else(|| quant::find(op))
        .or_else(|| attention::find(op))
        .or_else(|| einsum::find(op))
        .or_else(|| host_only::find(op))
        .or_else(|| control::find(op))
}

pub fn lowering(op: &str) -> Option<Lower> {
    find(op).and_then(|(l, _)| l)
}

pub fn folding(op: &str) -> Option<Fold> {
    find(op).and_then(|(_, f)| f)
}

/// Whether operator `op` of `domain` is supported.
pub fn supported(domain: &str, op: &str) -> bool {
    matches!(domain, "" | "ai.onnx" | "com.microsoft") && find(op).is_some()
}

/// Whether `op` runs on the engine (else on the host only).
pub fn on_engine(op: &str) -> bool {
    lowering(op).is_some()
}

/// Input `i` (required).
pub fn arg<'a>(ins: &'a [Option<Val>], i: usize, what: &str) -> crate::Result<&'a Val> {
    match ins.get(i) {
        Some(Some(v)) => Ok(v),
        _ => bail!("its input {} ({what}) is missing", i + 1),
    }
}

/// Input `i`, if given.
pub fn opt(ins: &[Option<Val>], i: usize) -> Option<&Val> {
    ins.get(i).and_then(|v| v.as_ref())
}

/// Host input `i` (required).
pub fn harg<'a>(ins: &'a [Option<Arc<HTensor>>], i: usize, what: &str) -> crate::Result<&'a HTensor> {
    match ins.get(i) {
        Some(Some(v)) => Ok(v),
        _ => bail!("its input {} ({what}) is missing", i + 1),
    }
}

pub fn hopt(ins: &[Option<Arc<HTensor>>], i: usize) -> Option<&HTensor> {
    ins.get(i).and_then(|v| v.as_deref())
}

/// A lowering's result: one engine tensor.
pub fn one(d: Dev) -> crate::Result<Vec<Val>> {
    Ok(vec![Val::D(d)])
}

impl Planner {
    /// The value of `v` as a host tensor: a constant's, or a computed
    /// tensor's values (which needs input data; the plan then holds a
    /// data-dependent constant).
    pub fn value_of(&mut self, v: &Val, what: &str) -> crate::Result<Arc<HTensor>> {
        match v {
            Val::C(c) => c.value(),
            Val::D(d) => {
                if !self.has_data {
                    return Err(NeedsData { node: format!("the {what}, computed from the inputs' values,") }.into());
                }
                self.materialize(std::slice::from_ref(d))?;
                self.taint = Taint::Data;
                Ok(Arc::new(super::plan::download(d)?))
            }
        }
    }

    /// The taint of a value (tensors count as data).
    pub fn taint_of(v: &Val) -> Taint {
        match v {
            Val::C(c) => c.taint,
            Val::D(_) => Taint::Data,
        }
    }

    /// Integer values of input `v` (shapes, axes, pads...).
    pub fn ints_of(&mut self, v: &Val, what: &str) -> crate::Result<Vec<i64>> {
        Ok(self.value_of(v, what)?.i64s().to_vec())
    }

    pub fn floats_of(&mut self, v: &Val, what: &str) -> crate::Result<Vec<f64>> {
        Ok(self.value_of(v, what)?.f64s().to_vec())
    }

    /// `v` as an engine tensor (a constant is uploaded).
    pub fn dev(&mut self, v: &Val) -> crate::Result<Dev> {
        match v {
            Val::D(d) => Ok(d.clone()),
            Val::C(c) => {
                let t = self.upload(c, DType::F32)?;
                Ok(Dev { t, shape: c.shape().to_vec(), elem: c.elem() })
            }
        }
    }

    /// A constant uploaded in canonical layout as `dtype`.
    pub fn upload(&mut self, c: &Const, dtype: DType) -> crate::Result<Arc<crate::tensor::Tensor>> {
        let key = c.key.clone();
        self.b.constant(key.as_deref(), dtype, ne_of(c.shape()), || c.f32s())
    }

    /// A host tensor uploaded (a constant made by a lowering: `key` for
    /// model-only constants, kept in the persistent pool).
    pub fn upload_host(&mut self, t: &HTensor, key: Option<String>, dtype: DType) -> crate::Result<Dev> {
        let vals = || Ok(t.f64s().iter().map(|&x| x as f32).collect());
        let tt = self.b.constant(key.as_deref(), dtype, ne_of(&t.shape), vals)?;
        Ok(Dev { t: tt, shape: t.shape.clone(), elem: t.elem })
    }

    /// The builder.
    pub fn eb(&mut self) -> &mut Builder {
        &mut self.b
    }
}

/// A key for a constant derived by a lowering from constants `srcs`
/// (None unless every source is model-only).
pub fn derived_key(tag: &str, srcs: &[&Val]) -> Option<String> {
    let mut parts = Vec::new();
    for v in srcs {
        match v {
            Val::C(c) if c.taint == Taint::Static => parts.push(c.key.clone()?),
            _ => return None,
        }
    }
    Some(format!("{tag}({})", parts.join(",")))
}

/// An ONNX axis attribute or input, normalised.
pub fn axis(a: i64, rank: usize) -> crate::Result<usize> {
    super::host::norm_axis(a, rank, "axis")
}

/// Normalised, sorted, distinct axes.
pub fn axes(list: &[i64], rank: usize) -> crate::Result<Vec<usize>> {
    let mut out = Vec::with_capacity(list.len());
    for &a in list {
        let x = axis(a, rank)?;
        ensure!(!out.contains(&x), "axis {a} is given twice");
        out.push(x);
    }
    out.sort_unstable();
    Ok(out)
}

/// The element type results of a float computation on `e` get.
pub fn float_result(e: Elem) -> Elem {
    if e.is_float() {
        e
    } else {
        Elem::F32
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_listed_operator_is_implemented() {
        for op in super::OPERATORS {
            assert!(super::supported("", op), "{op}");
        }
        assert!(!super::supported("", "NoSuchOp"));
        assert!(!super::supported("ai.onnx.ml", "Relu"));
        assert_eq!(super::OPERATORS.len(), 169);
    }
}
