//! Ops beyond ggml's set, for model formats (ONNX) whose operators need
//! them: element-wise functions with parameters, binaries with broadcasting
//! of both operands (arithmetic, comparisons, logic), reductions and scans
//! of rows, gathers and scatters along a dimension, and padding with modes.
//!
//! Every function here is defined once, in f32, by `apply` (the reference
//! of every backend's kernel); their shape rule is in `extended_shape`.


/// Element-wise functions of one tensor with up to two parameters `a`, `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapFn {
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    /// Toward zero (float to integer casts).
    Trunc,
    Sign,
    Reciprocal,
    Erf,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Softplus,
    Softsign,
    Mish,
    /// x * Phi(x) with the exact normal CDF.
    GeluErf,
    /// `a` * x * sigmoid... : x * sigmoid(a * x).
    Swish,
    /// b * (x > 0 ? x : a * (exp(x) - 1)).
    Selu,
    /// max(0, x) + min(0, a * (exp(x / a) - 1)).
    Celu,
    /// x > 0 ? x : a * (exp(x) - 1).
    EluA,
    /// x > a ? x : 0.
    ThresholdedRelu,
    /// max(0, min(1, a * x + b)).
    HardSigmoidAB,
    /// x < -b ? x + a : (x > b ? x - a : 0) (a = bias, b = lambd).
    Shrink,
    /// 1 where x is 0, else 0.
    Not,
    /// 1 where x is not 0, else 0.
    NonZero,
    IsNaN,
    /// 1 for +inf when a != 0 and for -inf when b != 0.
    IsInf,
    /// x raised to the constant power a.
    PowC,
    /// a * x + b.
    Affine,
    /// Round half to even, then clamp to [a, b] (integer quantization).
    RoundClamp,
    /// Rounded to float16 precision (a cast to float16).
    ToF16,
    /// Rounded to bfloat16 precision.
    ToBF16,
}

impl MapFn {
    pub const ALL: [MapFn; 36] = {
        use MapFn::*;
        [
            Floor, Ceil, Round, Trunc, Sign, Reciprocal, Erf, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh,
            Atanh, Softplus, Softsign, Mish, GeluErf, Swish, Selu, Celu, EluA, ThresholdedRelu, HardSigmoidAB,
            Shrink, Not, NonZero, IsNaN, IsInf, PowC, Affine, RoundClamp, ToF16, ToBF16,
        ]
    };

    /// Code of the function in kernels (its position in [`MapFn::ALL`]).
    pub fn code(self) -> u32 {
        MapFn::ALL.iter().position(|&f| f == self).unwrap_or(0) as u32
    }

    pub fn apply(self, x: f32, a: f32, b: f32) -> f32 {
        use MapFn::*;
        match self {
            Floor => x.floor(),
            Ceil => x.ceil(),
            Round => x.round_ties_even(),
            Trunc => x.trunc(),
            Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            }
            Reciprocal => 1.0 / x,
            Erf => erf(x),
            Tan => x.tan(),
            Asin => x.asin(),
            Acos => x.acos(),
            Atan => x.atan(),
            Sinh => x.sinh(),
            Cosh => x.cosh(),
            Asinh => x.asinh(),
            Acosh => x.acosh(),
            Atanh => x.atanh(),
            Softplus => softplus(x),
            Softsign => x / (1.0 + x.abs()),
            Mish => x * softplus(x).tanh(),
            GeluErf => 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2)),
            Swish => x / (1.0 + (-a * x).exp()),
            Selu => b * if x > 0.0 { x } else { a * x.exp_m1() },
            Celu => x.max(0.0) + (a * (x / a).exp_m1()).min(0.0),
            EluA => {
                if x > 0.0 {
                    x
                } else {
                    a * x.exp_m1()
                }
            }
            ThresholdedRelu => {
                if x > a {
                    x
                } else {
                    0.0
                }
            }
            HardSigmoidAB => (a * x + b).clamp(0.0, 1.0),
            Shrink => {
                if x < -b {
                    x + a
                } else if x > b {
                    x - a
                } else {
                    0.0
                }
            }
            Not => (x == 0.0) as u8 as f32,
            NonZero => (x != 0.0) as u8 as f32,
            IsNaN => x.is_nan() as u8 as f32,
            IsInf => ((x == f32::INFINITY && a != 0.0) || (x == f32::NEG_INFINITY && b != 0.0)) as u8 as f32,
            PowC => pow(x, a),
            Affine => a * x + b,
            RoundClamp => x.round_ties_even().clamp(a, b),
            ToF16 => half::f16::from_f32(x).to_f32(),
            ToBF16 => half::bf16::from_f32(x).to_f32(),
        }
    }
}

/// log(1 + exp(x)) without overflow.
fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// x^y as C's powf (exact for integer exponents of negative bases).
pub fn pow(x: f32, y: f32) -> f32 {
    x.powf(y)
}

/// The error function to f32 precision: its Maclaurin series below 1,
/// Abramowitz and Stegun's 7.1.26 (absolute error under 1.5e-7) above.
/// Both forms are computed and one chosen, with the branch-free
/// exponential, so that a loop over values vectorises.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let t = x.abs();
    let z = x * x;
    // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + ...)
    let p = 1.128_379_2
        + z * (-0.376_126_4
            + z * (0.112_837_92
                + z * (-0.026_866_17
                    + z * (0.005_223_977
                        + z * (-0.000_854_832 + z * (0.000_120_549_3 + z * (-1.492_16e-5 + z * 1.646_e-6)))))));
    let small = x * p;
    let k = 1.0 / (1.0 + 0.327_591_1 * t);
    let y = 1.0
        - k * (0.254_829_6 + k * (-0.284_496_74 + k * (1.421_413_7 + k * (-1.453_152_1 + k * 1.061_405_4))))
            * crate::base::vmath::exp(-z);
    let big = y.copysign(x);
    if t < 1.0 {
        small
    } else {
        big
    }
}

/// Binary functions of two broadcast operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinFn {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    /// C's fmod (sign of the dividend).
    Fmod,
    /// Python's modulo (sign of the divisor).
    Mod,
    Equal,
    Less,
    LessEq,
    Greater,
    GreaterEq,
    And,
    Or,
    Xor,
    /// a < 0 ? a * b : a.
    PRelu,
    /// a where b is not 0, else 0.
    Mask,
    /// a where b is 0, else 0.
    MaskNot,
    /// Division truncated toward zero (integer tensors).
    DivTrunc,
}

impl BinFn {
    pub const ALL: [BinFn; 21] = {
        use BinFn::*;
        [
            Add, Sub, Mul, Div, Pow, Max, Min, Fmod, Mod, Equal, Less, LessEq, Greater, GreaterEq, And, Or, Xor,
            PRelu, Mask, MaskNot, DivTrunc,
        ]
    };

    pub fn code(self) -> u32 {
        BinFn::ALL.iter().position(|&f| f == self).unwrap_or(0) as u32
    }

    pub fn apply(self, a: f32, b: f32) -> f32 {
        use BinFn::*;
        let t = |c: bool| c as u8 as f32;
        match self {
            Add => a + b,
            Sub => a - b,
            Mul => a * b,
            Div => a / b,
            Pow => pow(a, b),
            Max => {
                if a.is_nan() || b.is_nan() {
                    f32::NAN
                } else {
                    a.max(b)
                }
            }
            Min => {
                if a.is_nan() || b.is_nan() {
                    f32::NAN
                } else {
                    a.min(b)
                }
            }
            Fmod => a % b,
            Mod => {
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) {
                    r + b
                } else {
                    r
                }
            }
            Equal => t(a == b),
            Less => t(a < b),
            LessEq => t(a <= b),
            Greater => t(a > b),
            GreaterEq => t(a >= b),
            And => t(a != 0.0 && b != 0.0),
            Or => t(a != 0.0 || b != 0.0),
            Xor => t((a != 0.0) != (b != 0.0)),
            PRelu => {
                if a < 0.0 {
                    a * b
                } else {
                    a
                }
            }
            Mask => {
                if b != 0.0 {
                    a
                } else {
                    0.0
                }
            }
            MaskNot => {
                if b == 0.0 {
                    a
                } else {
                    0.0
                }
            }
            DivTrunc => (a / b).trunc(),
        }
    }
}

/// Reductions of a row to one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowFn {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    SumSq,
    L1,
    L2,
    LogSum,
    LogSumExp,
    /// Index of the first maximum.
    ArgMax,
    ArgMin,
    /// Index of the last maximum.
    ArgMaxLast,
    ArgMinLast,
}

impl RowFn {
    pub const ALL: [RowFn; 14] = {
        use RowFn::*;
        [Sum, Mean, Max, Min, Prod, SumSq, L1, L2, LogSum, LogSumExp, ArgMax, ArgMin, ArgMaxLast, ArgMinLast]
    };

    pub fn code(self) -> u32 {
        RowFn::ALL.iter().position(|&f| f == self).unwrap_or(0) as u32
    }

    /// The reduction of `row` (f64 accumulation for sums and products).
    pub fn apply(self, row: &[f32]) -> f32 {
        use RowFn::*;
        let n = row.len();
        match self {
            Sum => row.iter().map(|&x| x as f64).sum::<f64>() as f32,
            Mean => (row.iter().map(|&x| x as f64).sum::<f64>() / n.max(1) as f64) as f32,
            Max => row.iter().fold(f32::NEG_INFINITY, |m, &x| if x > m || x.is_nan() { x } else { m }),
            Min => row.iter().fold(f32::INFINITY, |m, &x| if x < m || x.is_nan() { x } else { m }),
            Prod => row.iter().map(|&x| x as f64).product::<f64>() as f32,
            SumSq => row.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>() as f32,
            L1 => row.iter().map(|&x| (x as f64).abs()).sum::<f64>() as f32,
            L2 => row.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>().sqrt() as f32,
            LogSum => row.iter().map(|&x| x as f64).sum::<f64>().ln() as f32,
            LogSumExp => {
                let m = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                if !m.is_finite() {
                    return m;
                }
                let s: f64 = row.iter().map(|&x| ((x - m) as f64).exp()).sum();
                (m as f64 + s.ln()) as f32
            }
            ArgMax | ArgMin | ArgMaxLast | ArgMinLast => {
                let better = |x: f32, best: f32| match self {
                    ArgMax => x > best,
                    ArgMin => x < best,
                    ArgMaxLast => x >= best,
                    _ => x <= best,
                };
                let mut bi = 0usize;
                for (i, &x) in row.iter().enumerate().skip(1) {
                    // BOUNDS: bi is 0 or an earlier i, and i < row.len().
                    if better(x, row[bi]) {
                        bi = i;
                    }
                }
                bi as f32
            }
        }
    }
}

/// Scans of a row (the result has the row's length).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScanFn {
    /// log(softmax(x)).
    LogSoftmax,
    /// Running sums; `exclusive` leaves out the current element, `reverse`
    /// runs from the end.
    CumSum { exclusive: bool, reverse: bool },
    CumProd { exclusive: bool, reverse: bool },
    /// 1 at the first maximum, 0 elsewhere.
    Hardmax,
}

impl ScanFn {
    pub fn code(self) -> u32 {
        match self {
            ScanFn::LogSoftmax => 0,
            ScanFn::CumSum { .. } => 1,
            ScanFn::CumProd { .. } => 2,
            ScanFn::Hardmax => 3,
        }
    }

    /// (exclusive, reverse) flags of the running scans.
    pub fn flags(self) -> (bool, bool) {
        match self {
            ScanFn::CumSum { exclusive, reverse } | ScanFn::CumProd { exclusive, reverse } => (exclusive, reverse),
            _ => (false, false),
        }
    }

    pub fn apply(self, row: &[f32], out: &mut [f32]) {
        match self {
            ScanFn::LogSoftmax => {
                let m = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                let s: f64 = row.iter().map(|&x| ((x - m) as f64).exp()).sum();
                let l = s.ln() as f32;
                for (o, &x) in out.iter_mut().zip(row) {
                    *o = x - m - l;
                }
            }
            ScanFn::CumSum { exclusive, reverse } | ScanFn::CumProd { exclusive, reverse } => {
                let prod = matches!(self, ScanFn::CumProd { .. });
                let n = row.len().min(out.len());
                let mut acc: f64 = if prod { 1.0 } else { 0.0 };
                for k in 0..n {
                    let i = if reverse { n - 1 - k } else { k };
                    // BOUNDS: i < n, the shorter of row's and out's lengths.
                    let x = row[i] as f64;
                    let before = acc;
                    acc = if prod { acc * x } else { acc + x };
                    // BOUNDS: as above.
                    out[i] = if exclusive { before } else { acc } as f32;
                }
            }
            ScanFn::Hardmax => {
                let best = RowFn::ArgMax.apply(row) as usize;
                for (i, o) in out.iter_mut().enumerate() {
                    *o = (i == best) as u8 as f32;
                }
            }
        }
    }
}

/// How `PadEx` fills the border.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PadMode {
    Constant,
    /// Mirror without repeating the edge (numpy's "reflect").
    Reflect,
    /// Repeat the edge element.
    Edge,
    /// Wrap around (numpy's "wrap").
    Wrap,
}

impl PadMode {
    pub fn code(self) -> u32 {
        match self {
            PadMode::Constant => 0,
            PadMode::Reflect => 1,
            PadMode::Edge => 2,
            PadMode::Wrap => 3,
        }
    }

    /// The source coordinate of output coordinate `o` in a padded dimension
    /// (`lo` before, source size `n`), or None for a constant fill.
    pub fn source(self, o: usize, lo: usize, n: usize) -> Option<usize> {
        let i = o as i64 - lo as i64;
        let n = n as i64;
        if (0..n).contains(&i) {
            return Some(i as usize);
        }
        match self {
            PadMode::Constant => None,
            PadMode::Edge => Some(i.clamp(0, n - 1) as usize),
            PadMode::Wrap => Some(i.rem_euclid(n) as usize),
            PadMode::Reflect => {
                if n == 1 {
                    return Some(0);
                }
                let p = 2 * (n - 1);
                let m = i.rem_euclid(p);
                Some(if m < n { m } else { p - m } as usize)
            }
        }
    }
}

/// How `ScatterFlat` combines an update with the element it lands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScatterReduce {
    None,
    Add,
    Mul,
    Max,
    Min,
}

impl ScatterReduce {
    pub fn code(self) -> u32 {
        match self {
            ScatterReduce::None => 0,
            ScatterReduce::Add => 1,
            ScatterReduce::Mul => 2,
            ScatterReduce::Max => 3,
            ScatterReduce::Min => 4,
        }
    }

    pub fn apply(self, old: f32, u: f32) -> f32 {
        match self {
            ScatterReduce::None => u,
            ScatterReduce::Add => old + u,
            ScatterReduce::Mul => old * u,
            ScatterReduce::Max => old.max(u),
            ScatterReduce::Min => old.min(u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        assert!((erf(1.0) - 0.842_700_8).abs() < 1e-6);
        assert!((erf(-0.3) + 0.328_626_8).abs() < 1e-6);
        assert!((erf(3.0) - 0.999_977_9).abs() < 1e-6);
        assert_eq!(MapFn::Round.apply(2.5, 0.0, 0.0), 2.0);
        assert_eq!(MapFn::Round.apply(-1.5, 0.0, 0.0), -2.0);
        assert_eq!(BinFn::Mod.apply(-7.0, 3.0), 2.0);
        assert_eq!(BinFn::Fmod.apply(-7.0, 3.0), -1.0);
        assert_eq!(RowFn::ArgMax.apply(&[1.0, 3.0, 3.0]), 1.0);
        assert_eq!(RowFn::ArgMaxLast.apply(&[1.0, 3.0, 3.0]), 2.0);
        let mut o = [0.0; 3];
        ScanFn::CumSum { exclusive: true, reverse: true }.apply(&[1.0, 2.0, 3.0], &mut o);
        assert_eq!(o, [5.0, 3.0, 0.0]);
        assert_eq!(MapFn::ALL.len(), 36);
    }

    #[test]
    fn padding_sources() {
        // reflect of [a b c] by 2: c b | a b c | b a
        let r: Vec<_> = (0..7).map(|o| PadMode::Reflect.source(o, 2, 3).unwrap()).collect();
        assert_eq!(r, vec![2, 1, 0, 1, 2, 1, 0]);
        let w: Vec<_> = (0..5).map(|o| PadMode::Wrap.source(o, 1, 3).unwrap()).collect();
        assert_eq!(w, vec![2, 0, 1, 2, 0]);
        assert_eq!(PadMode::Constant.source(0, 1, 3), None);
    }
}
