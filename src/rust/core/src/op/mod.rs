//! The operations a graph node can hold, with their parameters.
//!
//! Semantics and shape rules ([`shape`]) are ggml's (ne0 is the fastest
//! dimension); the kernels live with the backends (`backend::cpu`,
//! `backend::vulkan`). View-like
//! ops (reshape, view, transpose, permute) only re-describe memory and need no
//! kernel. Composite ggml functions (`conv_2d` = im2col + mul_mat) are built
//! from these nodes by the graph builder.

pub mod extended;
pub mod names;
pub mod shape;

pub use extended::{BinFn, MapFn, PadMode, RowFn, ScanFn, ScatterReduce};

/// Element-wise functions of one tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sqr,
    Sqrt,
    Exp,
    Log,
    Sin,
    Cos,
    Relu,
    Gelu,
    Silu,
    Sigmoid,
    Tanh,
    Elu,
    Step,
    Hardswish,
    Hardsigmoid,
}

impl UnaryOp {
    /// ggml's name, also the R function suffix (`ggml_<name>`).
    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "neg",
            Abs => "abs",
            Sqr => "sqr",
            Sqrt => "sqrt",
            Exp => "exp",
            Log => "log",
            Sin => "sin",
            Cos => "cos",
            Relu => "relu",
            Gelu => "gelu",
            Silu => "silu",
            Sigmoid => "sigmoid",
            Tanh => "tanh",
            Elu => "elu",
            Step => "step",
            Hardswish => "hardswish",
            Hardsigmoid => "hardsigmoid",
        }
    }

    pub const ALL: [UnaryOp; 17] = {
        use UnaryOp::*;
        [
            Neg, Abs, Sqr, Sqrt, Exp, Log, Sin, Cos, Relu, Gelu, Silu, Sigmoid, Tanh, Elu, Step,
            Hardswish, Hardsigmoid,
        ]
    };

    /// The function itself, in f32 (the reference for every backend).
    pub fn apply(self, x: f32) -> f32 {
        use UnaryOp::*;
        match self {
            Neg => -x,
            Abs => x.abs(),
            Sqr => x * x,
            Sqrt => x.sqrt(),
            Exp => x.exp(),
            Log => x.ln(),
            Sin => x.sin(),
            Cos => x.cos(),
            Relu => x.max(0.0),
            // tanh approximation, as ggml computes it
            Gelu => {
                const SQRT_2_OVER_PI: f32 = 0.797_884_6;
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
            }
            Silu => x / (1.0 + (-x).exp()),
            Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Tanh => x.tanh(),
            Elu => {
                if x > 0.0 {
                    x
                } else {
                    x.exp_m1()
                }
            }
            Step => {
                if x > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Hardswish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
            Hardsigmoid => ((x + 3.0) / 6.0).clamp(0.0, 1.0),
        }
    }
}

/// Pooling kind of `pool_2d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolOp {
    Max,
    Avg,
}

/// A graph node's operation. `srcs` of the node are listed per variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A leaf: data set by the user.
    None,
    /// srcs [a]: a contiguous copy of a (same type).
    Dup,
    /// srcs [a, b]: element-wise, b broadcast to a when a.ne[i] % b.ne[i] == 0.
    Add,
    Sub,
    Mul,
    Div,
    /// srcs [a, b]: a + b where b has one element.
    Add1,
    /// srcs [a]: a * s.
    Scale { s: f32 },
    /// srcs [a[K,M,..], b[K,N,..]] -> [M,N,b.ne2,b.ne3]; a broadcast over dims 2,3.
    MulMat,
    /// srcs [a[M,K,..], b[N,K,..]] -> [M,N,..]: sum_k a[m,k] * b[n,k].
    OutProd,
    /// srcs [a]
    Unary(UnaryOp),
    LeakyRelu { slope: f32 },
    Clamp { min: f32, max: f32 },
    /// srcs [a] -> one element.
    Sum,
    /// srcs [a] -> [1, ne1, ne2, ne3].
    SumRows,
    /// srcs [a] -> [1, ne1, ne2, ne3] (row means, as ggml).
    Mean,
    /// srcs [a 2-D f32] -> i32 [ne1]: index of the max of each row.
    Argmax,
    /// srcs [a] or [a, mask]: softmax of each row of a*scale + mask (+ ALiBi slope when max_bias > 0).
    SoftMax { scale: f32, max_bias: f32 },
    /// srcs [a]: per-row (x - mean) / sqrt(var + eps).
    Norm { eps: f32 },
    /// srcs [a]: per-row x / sqrt(mean(x^2) + eps).
    RmsNorm { eps: f32 },
    /// View-like: no kernel.
    Reshape,
    View,
    Transpose,
    Permute { axes: [usize; 4] },
    /// srcs [a]: a contiguous copy of a possibly strided a.
    Cont,
    /// srcs [a, b]: copy a into b's memory (converting type); the node is a view of b.
    Cpy,
    /// srcs [a, b]: a tiled to b's shape.
    Repeat,
    /// srcs [a, b]: joined along `dim`.
    Concat { dim: usize },
    /// srcs [a, idx i32]: rows of a picked by idx -> [a.ne0, idx.ne0, idx.ne1, idx.ne2].
    GetRows,
    /// srcs [a]: entries with column index > n_past + row index set to -inf.
    DiagMaskInf { n_past: i32 },
    /// srcs [kernel, input]: unfold patches (ggml's im2col).
    Im2Col { s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32, is_2d: bool },
    /// srcs [a]
    Pool2d { op: PoolOp, k0: i32, k1: i32, s0: i32, s1: i32, p0: f32, p1: f32 },
    /// srcs [a]: zeros appended at the end of each dimension.
    Pad { p: [i32; 4] },
    /// srcs [a]: nearest-neighbour upscale of dims 0 and 1 by `factor`.
    Upscale { factor: i32 },
    /// srcs [a]: an element-wise function with parameters ([`extended`]).
    Map { f: MapFn, a: f32, b: f32 },
    /// srcs [a, b]: element-wise, each size of a and b equal or 1 (both broadcast).
    Binary { f: BinFn },
    /// srcs [a] -> [1, ne1, ne2, ne3]: each row reduced to one value.
    ReduceRows { f: RowFn },
    /// srcs [a]: a scan of each row (same shape).
    ScanRows { f: ScanFn },
    /// srcs [a, idx [n]]: slices of a along `dim` picked by idx (negative
    /// from the end, out of range gives zeros) -> a with ne[dim] = n.
    GatherAxis { dim: usize },
    /// srcs [a, p [2, n]]: a with the values p[1, j] written, in order, at
    /// a's flat element indices p[0, j], combined by `reduce`.
    ScatterFlat { reduce: ScatterReduce },
    /// srcs [a]: `lo[i]` elements before and `hi[i]` after each dimension.
    PadEx { lo: [usize; 4], hi: [usize; 4], mode: PadMode, value: f32 },
}

impl Op {
    /// ggml's name of the op, for messages and printing.
    pub fn name(&self) -> &'static str {
        match self {
            Op::None => "NONE",
            Op::Dup => "DUP",
            Op::Add => "ADD",
            Op::Sub => "SUB",
            Op::Mul => "MUL",
            Op::Div => "DIV",
            Op::Add1 => "ADD1",
            Op::Scale { .. } => "SCALE",
            Op::MulMat => "MUL_MAT",
            Op::OutProd => "OUT_PROD",
            Op::Unary(_) => "UNARY",
            Op::LeakyRelu { .. } => "LEAKY_RELU",
            Op::Clamp { .. } => "CLAMP",
            Op::Sum => "SUM",
            Op::SumRows => "SUM_ROWS",
            Op::Mean => "MEAN",
            Op::Argmax => "ARGMAX",
            Op::SoftMax { .. } => "SOFT_MAX",
            Op::Norm { .. } => "NORM",
            Op::RmsNorm { .. } => "RMS_NORM",
            Op::Reshape => "RESHAPE",
            Op::View => "VIEW",
            Op::Transpose => "TRANSPOSE",
            Op::Permute { .. } => "PERMUTE",
            Op::Cont => "CONT",
            Op::Cpy => "CPY",
            Op::Repeat => "REPEAT",
            Op::Concat { .. } => "CONCAT",
            Op::GetRows => "GET_ROWS",
            Op::DiagMaskInf { .. } => "DIAG_MASK_INF",
            Op::Im2Col { .. } => "IM2COL",
            Op::Pool2d { .. } => "POOL_2D",
            Op::Pad { .. } => "PAD",
            Op::Upscale { .. } => "UPSCALE",
            Op::Map { .. } => "MAP",
            Op::Binary { .. } => "BINARY",
            Op::ReduceRows { .. } => "REDUCE_ROWS",
            Op::ScanRows { .. } => "SCAN_ROWS",
            Op::GatherAxis { .. } => "GATHER_AXIS",
            Op::ScatterFlat { .. } => "SCATTER_FLAT",
            Op::PadEx { .. } => "PAD_EX",
        }
    }

    /// True for ops that only re-describe their source's memory.
    pub fn is_view(&self) -> bool {
        matches!(self, Op::Reshape | Op::View | Op::Transpose | Op::Permute { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_reference_values() {
        assert_eq!(UnaryOp::Relu.apply(-2.0), 0.0);
        assert!((UnaryOp::Sigmoid.apply(0.0) - 0.5).abs() < 1e-7);
        assert_eq!(UnaryOp::Hardsigmoid.apply(10.0), 1.0);
        assert_eq!(UnaryOp::ALL.len(), 17);
    }
}
