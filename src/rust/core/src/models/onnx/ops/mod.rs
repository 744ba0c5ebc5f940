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
mod loss;
mod matmul;
mod norm;
mod pool;
mod quant;
mod reduce;
mod resize;
mod rnn;
mod shape;

mod common;

pub use common::Fold;
use common::Lower;

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
    "NegativeLogLikelihoodLoss",
    "NonMaxSuppression", "NonZero", "Not", "OneHot", "Or", "PRelu", "Pad", "Pow", "QLinearAdd",
    "QLinearConcat", "QLinearConv", "QLinearGlobalAveragePool", "QLinearLeakyRelu",
    "QLinearMatMul", "QLinearMul", "QLinearSigmoid", "QuantizeLinear", "RMSNormalization",
    "RNN", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "Relu", "Reshape", "Resize", "ReverseSequence", "RoiAlign", "Round", "Scan", "Scatter",
    "ScatterElements", "ScatterND", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Silu",
    "SimplifiedLayerNormalization", "Sin", "Sinh", "Size", "Slice", "Softmax",
    "SoftmaxCrossEntropyLoss", "Softplus",
    "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Swish", "Tan",
    "Tanh", "ThresholdedRelu", "Tile", "TopK", "Transpose", "Trilu", "Unique", "Unsqueeze",
    "Upsample", "Where", "Xor",
];

/// The implementations of operator `op`: (engine mapping, host evaluation).
pub fn find(op: &str) -> Option<(Option<Lower>, Option<Fold>)> {
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
        .or_else(|| loss::find(op))
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

#[cfg(test)]
mod bounds_tests;

#[cfg(test)]
mod tests {
    #[test]
    fn every_listed_operator_is_implemented() {
        for op in super::OPERATORS {
            assert!(super::supported("", op), "{op}");
        }
        assert!(!super::supported("", "NoSuchOp"));
        assert!(!super::supported("ai.onnx.ml", "Relu"));
        assert_eq!(super::OPERATORS.len(), 171);
    }
}
