//! The floating-point types computations are generic over: f32 (the usual
//! compute type) and f64 (tensors of type F64). The op definitions and the
//! CPU kernels are written once over [`Float`]; each type gets its own
//! compiled copy, so f32 code is what it would be if written for f32 alone.

use crate::base::dtype::DType;
use crate::base::vmath;
use half::{bf16, f16};
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// f32 or f64: arithmetic, the functions of the element-wise ops, and
/// conversions from and to the stored element types.
pub trait Float:
    Copy
    + Send
    + Sync
    + PartialOrd
    + Default
    + std::fmt::Debug
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
{
    /// The tensor type holding values of this type.
    const DTYPE: DType;
    const ZERO: Self;
    const ONE: Self;
    const NEG_INFINITY: Self;
    /// The most negative finite value.
    const MIN: Self;

    /// The nearest value of this type.
    fn from_f64(v: f64) -> Self;
    fn from_f32(v: f32) -> Self;
    fn to_f64(self) -> f64;
    fn to_f32(self) -> f32;
    fn to_f16(self) -> f16;
    fn to_bf16(self) -> bf16;

    /// e^self; for f32 the branch-free [`vmath::exp`], so that loops over
    /// it vectorise (f64: the standard library's).
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    /// tanh; for f32 the branch-free [`vmath::tanh`].
    fn tanh(self) -> Self;
    fn abs(self) -> Self;
    fn round(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
    /// ln(1 + self), accurate near 0.
    fn ln_1p(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn is_finite(self) -> bool;
    /// The larger of the two; the other one when one is NaN (as `f32::max`).
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    /// `self` limited to `[lo, hi]` (NaN stays NaN).
    fn clamp(self, lo: Self, hi: Self) -> Self;
    fn is_nan(self) -> bool;
    /// `self * a + b` rounded once: one instruction where the caller is
    /// compiled with FMA, a library call elsewhere.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// The values as f32 when `Self` is f32 (for kernels written with f32
    /// vector instructions), else None.
    fn as_f32(s: &[Self]) -> Option<&[f32]>;
}

fn some_f32(s: &[f32]) -> Option<&[f32]> {
    Some(s)
}

fn no_f32<T>(_: &[T]) -> Option<&[f32]> {
    None
}

macro_rules! float_impl {
    ($t:ty, $dt:expr, $f16:path, $bf16:path, $erf:path, $exp:path, $tanh:path, $as32:path) => {
        impl Float for $t {
            const DTYPE: DType = $dt;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
            const MIN: Self = <$t>::MIN;

            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            fn to_f16(self) -> f16 {
                $f16(self)
            }
            #[inline(always)]
            fn to_bf16(self) -> bf16 {
                $bf16(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn round(self) -> Self {
                <$t>::round(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                <$t>::max(self, o)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
            #[inline(always)]
            fn as_f32(s: &[Self]) -> Option<&[f32]> {
                $as32(s)
            }
            #[inline(always)]
            fn min(self, o: Self) -> Self {
                <$t>::min(self, o)
            }
            #[inline(always)]
            fn clamp(self, lo: Self, hi: Self) -> Self {
                <$t>::clamp(self, lo, hi)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

float_impl!(f32, DType::F32, f16::from_f32, bf16::from_f32, libm::erff, vmath::exp, vmath::tanh, some_f32);
float_impl!(f64, DType::F64, f16::from_f64, bf16::from_f64, libm::erf, f64::exp, f64::tanh, no_f32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_once() {
        // f64 to f16 directly, not through f32 (which would round twice).
        let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-30);
        assert_eq!(v.to_f16(), f16::from_f64(v));
        assert_eq!(<f32 as Float>::DTYPE, DType::F32);
        assert_eq!(<f64 as Float>::from_f32(0.1f32), 0.1f32 as f64);
        assert!(Float::max(f64::NAN, 1.0) == 1.0);
        // erf against a tabulated value (erf(0.5) = 0.5204998778130465)
        assert!((Float::erf(0.5f64) - 0.520_499_877_813_046_5).abs() < 1e-15);
        assert!((Float::erf(0.5f32) - 0.520_499_9).abs() < 1e-6);
    }
}
