//! The operations a graph node can hold, with their parameters.
//!
//! Semantics and shape rules ([`shape`]) are ggml's (ne0 is the fastest
//! dimension); the kernels live with the backends (`backend::cpu`,
//! `backend::vulkan`). View-like
//! ops (reshape, view, transpose, permute) only re-describe memory and need no
//! kernel. Composite ggml functions (`conv_2d` = im2col + mul_mat) are built
//! from these nodes by the graph builder.

pub mod codes;
pub mod extended;
mod extended_shape;
mod five;
pub mod attn;
pub mod conv;
pub mod conv_act;
pub mod conv_cl;
pub mod glu;
pub mod index;
pub mod max_pool;
pub mod names;
pub mod recurrent;
mod names_ext;
pub mod rope;
pub mod rows;
mod rules;
pub mod shape;

use crate::base::float::Float;
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
    /// -1, 0 or 1.
    Sgn,
    Ceil,
    Floor,
    /// Half away from zero.
    Round,
    /// ln(1 + exp(x)).
    Softplus,
    /// The exact GELU, 0.5 x (1 + erf(x / sqrt 2)).
    GeluErf,
    /// x * sigmoid(1.702 x).
    GeluQuick,
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
            Sgn => "sgn",
            Ceil => "ceil",
            Floor => "floor",
            Round => "round",
            Softplus => "softplus",
            GeluErf => "gelu_erf",
            GeluQuick => "gelu_quick",
        }
    }

    pub const ALL: [UnaryOp; 24] = {
        use UnaryOp::*;
        [
            Neg, Abs, Sqr, Sqrt, Exp, Log, Sin, Cos, Relu, Gelu, Silu, Sigmoid, Tanh, Elu, Step,
            Hardswish, Hardsigmoid, Sgn, Ceil, Floor, Round, Softplus, GeluErf, GeluQuick,
        ]
    };

    /// The function itself, in f32 or f64 (the reference for every backend).
    #[inline(always)]
    pub fn apply<F: Float>(self, x: F) -> F {
        use UnaryOp::*;
        let c = F::from_f64;
        match self {
            Neg => -x,
            Abs => x.abs(),
            Sqr => x * x,
            Sqrt => x.sqrt(),
            Exp => x.exp(),
            Log => x.ln(),
            Sin => x.sin(),
            Cos => x.cos(),
            Relu => x.max(F::ZERO),
            // tanh approximation, as ggml computes it
            Gelu => {
                let sqrt_2_over_pi = c(0.797_884_560_802_865_4);
                c(0.5) * x * (F::ONE + (sqrt_2_over_pi * x * (F::ONE + c(0.044_715) * x * x)).tanh())
            }
            Silu => x / (F::ONE + (-x).exp()),
            Sigmoid => F::ONE / (F::ONE + (-x).exp()),
            Tanh => x.tanh(),
            Elu => {
                if x > F::ZERO {
                    x
                } else {
                    x.exp_m1()
                }
            }
            Step => {
                if x > F::ZERO {
                    F::ONE
                } else {
                    F::ZERO
                }
            }
            Hardswish => x * (x + c(3.0)).clamp(F::ZERO, c(6.0)) / c(6.0),
            Hardsigmoid => ((x + c(3.0)) / c(6.0)).clamp(F::ZERO, F::ONE),
            Sgn => {
                if x > F::ZERO {
                    F::ONE
                } else if x < F::ZERO {
                    -F::ONE
                } else {
                    x
                }
            }
            Ceil => x.ceil(),
            Floor => x.floor(),
            Round => x.round(),
            // max(x, 0) + ln(1 + exp(-|x|)): no overflow for large x
            Softplus => x.max(F::ZERO) + (-x.abs()).exp().ln_1p(),
            GeluErf => c(0.5) * x * (F::ONE + (x * c(std::f64::consts::FRAC_1_SQRT_2)).erf()),
            GeluQuick => x / (F::ONE + (c(-1.702) * x).exp()),
        }
    }
}

pub use conv::PoolOp;

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
    /// srcs [a]: a * s (s rounded to the compute type: f32, or f64 for f64 tensors).
    Scale { s: f64 },
    /// srcs [a[K,M,..], b[K,N,..]] -> [M,N,b.ne2,b.ne3]; a broadcast over dims 2,3.
    MulMat,
    /// srcs [a[M,K,..], b[N,K,..]] -> [M,N,..]: sum_k a[m,k] * b[n,k].
    OutProd,
    /// srcs [a[K,M], b[K,N], c[M]]: act(mul_mat(a, b) + c) for 2-D a and b,
    /// c added to every column (a dense layer's bias). Computed by the CPU
    /// backend only, as one product that adds the bias and applies the
    /// activation to each block of the result while it is in the cache;
    /// builders ask `Backend::supports` first and build mul_mat, add and the
    /// activation for other backends.
    Linear { act: Option<UnaryOp> },
    /// srcs [g, y]: g times the derivative of activation u at the point
    /// where it gave y (relu: g where y > 0, else 0; sigmoid: g y (1 - y);
    /// tanh: g (1 - y^2)), the gradient through the activation. Computed by
    /// the CPU backend only (elsewhere builders use step, mul and sub).
    UnaryBack { u: UnaryOp },
    /// srcs [a, t]: the softmax cross-entropy of each row of a (logits)
    /// against the same row of t (target probabilities), summed over the rows
    /// and divided by their number: -sum(t * log_softmax(a)) / rows, one
    /// element. Computed by the CPU backend only (elsewhere builders compose
    /// it from soft_max, log and sums).
    CrossEntropyLoss,
    /// srcs [g, a, t]: the gradient of `CrossEntropyLoss` with respect to a,
    /// for g (one element) the gradient of the loss: per row,
    /// (softmax(a) * sum(t) - t) * g / rows. CPU backend only.
    CrossEntropyLossBack,
    /// srcs [w, g, m, v]: one Adam step of w, in place (the node is w's
    /// memory); the moments m and v are updated in place too:
    /// m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    /// w = decay w - step m / (sqrt(v inv_c2) + eps), where `decay` is
    /// AdamW's 1 - lr weight_decay (1 for Adam), `step` lr / (1 - beta1^t)
    /// and `inv_c2` 1 / (1 - beta2^t). Computed by the CPU backend only.
    AdamStep { beta1: f64, beta2: f64, eps: f64, decay: f64, step: f64, inv_c2: f64 },
    /// srcs [w, g] or [w, g, m]: one SGD step of w, in place: with momentum
    /// m = momentum m + g, w = w - lr m; without, w = w - lr g. CPU backend only.
    SgdStep { lr: f64, momentum: f64 },
    /// srcs [a]
    Unary(UnaryOp),
    LeakyRelu { slope: f32 },
    /// srcs [a]: a limited to [min, max] (bounds in the compute type).
    Clamp { min: f64, max: f64 },
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
    /// srcs [cols `[C KW KH, OW, OH, N]`]: the adjoint of a 2-D im2col of a
    /// `[w, h, C, N]` input with a `kw x kh` kernel (ggml's im2col_back):
    /// every patch value is added back to the input position it was read
    /// from -> `[w, h, C, N]`.
    Im2ColBack { s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32, kw: i32, kh: i32, w: i32, h: i32 },
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
    /// Gated linear units ([`glu`]).
    Glu(glu::Glu),
    /// srcs [dy, x]: the gradient of silu at x.
    SiluBack,
    /// Rotary position embedding and its backward pass ([`rope`]).
    Rope(rope::Rope),
    /// Fused attention and its backward pass ([`attn`]).
    Attn(attn::Attn),
    /// Direct convolutions and 1-D pooling ([`conv`]).
    Conv(conv::Conv),
    /// Row-wise norms, gradients, sorting and counting ([`rows`]).
    Rows(rows::RowOp),
    /// Ops that place values by index ([`index`]).
    Index(index::IndexOp),
    /// Max pooling with the taps of its maxima, and its gradient
    /// ([`max_pool`]). Computed by the CPU backend only (elsewhere
    /// builders compose it from get_rows and row reductions).
    MaxPool(max_pool::MaxPool),
    /// srcs [as [K, M, E], b [K, nb1, T], ids i32 [n, T]] -> [M, n, T]:
    /// column (i, t) is as[.., .., ids[i, t]]^T b[.., i % nb1, t] (mixture of experts).
    MulMatId,
    /// A whole recurrent layer in one node ([`recurrent`]). Computed by the
    /// CPU backend only (elsewhere builders unroll the steps).
    Recurrent(recurrent::RecurrentOp<UnaryOp>),
    /// A 2-D convolution (direct or depthwise) with a bias over its output
    /// channels and an activation, in one node ([`conv_act`]). Computed by
    /// the CPU backend only.
    ConvAct { conv: conv::Conv, act: Option<UnaryOp> },
    /// A 2-D convolution read straight from the channels-innermost layout,
    /// and its kernel's gradient ([`conv_cl`]). Computed by the CPU backend
    /// only.
    ConvCl(conv_cl::ConvCl<UnaryOp>),
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
            Op::Linear { .. } => "LINEAR",
            Op::UnaryBack { .. } => "UNARY_BACK",
            Op::CrossEntropyLoss => "CROSS_ENTROPY_LOSS",
            Op::CrossEntropyLossBack => "CROSS_ENTROPY_LOSS_BACK",
            Op::AdamStep { .. } => "OPT_STEP_ADAM",
            Op::SgdStep { .. } => "OPT_STEP_SGD",
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
            Op::Im2ColBack { .. } => "IM2COL_BACK",
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
            Op::Glu(_) => "GLU",
            Op::SiluBack => "SILU_BACK",
            Op::Rope(r) => {
                if r.forward {
                    "ROPE"
                } else {
                    "ROPE_BACK"
                }
            }
            Op::Attn(a) => a.name(),
            Op::Conv(c) => c.name(),
            Op::Rows(r) => r.name(),
            Op::Index(i) => i.name(),
            Op::MaxPool(m) => m.name(),
            Op::MulMatId => "MUL_MAT_ID",
            Op::Recurrent(r) => r.name(),
            Op::ConvAct { .. } => "CONV_ACT",
            Op::ConvCl(c) => c.name(),
        }
    }

    /// True for ops that update their first source in place (the node is
    /// that source's memory, as for `cpy`).
    pub fn is_in_place(&self) -> bool {
        matches!(self, Op::AdamStep { .. } | Op::SgdStep { .. })
    }

    /// True for ops that only re-describe their source's memory.
    pub fn is_view(&self) -> bool {
        matches!(self, Op::Reshape | Op::View | Op::Transpose | Op::Permute { .. })
    }
}

#[cfg(test)]
mod bounds_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_reference_values() {
        assert_eq!(UnaryOp::Relu.apply(-2.0f32), 0.0);
        assert!((UnaryOp::Sigmoid.apply(0.0f32) - 0.5).abs() < 1e-7);
        assert_eq!(UnaryOp::Hardsigmoid.apply(10.0f32), 1.0);
        // f64 keeps double precision; f32 gets ggml's f32 constants.
        let g = UnaryOp::Gelu.apply(1.3f64);
        let want = 0.5 * 1.3 * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * 1.3 * (1.0 + 0.044715 * 1.69)).tanh());
        assert!((g - want).abs() < 1e-15, "{g} {want}");
        assert_eq!(UnaryOp::Gelu.apply(1.3f32), 0.5 * 1.3 * (1.0 + (0.797_884_6f32 * 1.3 * (1.0 + 0.044_715 * 1.3 * 1.3)).tanh()));
        assert_eq!(UnaryOp::ALL.len(), 24);
        assert_eq!(UnaryOp::Round.apply(2.5f32), 3.0);
        assert_eq!(UnaryOp::Round.apply(-2.5f64), -3.0);
        assert_eq!(UnaryOp::Sgn.apply(-0.3f32), -1.0);
        assert_eq!(UnaryOp::Sgn.apply(0.0f32), 0.0);
        assert!((UnaryOp::Softplus.apply(1.0f64) - (1.0f64 + 1f64.exp()).ln()).abs() < 1e-15);
        assert_eq!(UnaryOp::Softplus.apply(1000.0f32), 1000.0);
        // exact GELU: 0.5 x (1 + erf(x / sqrt 2)) at x = 1 is 0.8413447460685429
        assert!((UnaryOp::GeluErf.apply(1.0f64) - 0.841_344_746_068_542_9).abs() < 1e-15);
        assert!((UnaryOp::GeluQuick.apply(1.0f64) - 1.0 / (1.0 + (-1.702f64).exp())).abs() < 1e-15);
    }
}
