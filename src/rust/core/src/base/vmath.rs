//! Scalar functions written without branches or calls, so that a loop
//! over one of them vectorises (the standard library's call libm per
//! value): an exponential, a logarithm, a power, the hyperbolic tangent and
//! the logistic sigmoid; and the error function and its complement (a
//! Chebyshev fit with fractional error below 1.2e-7, evaluated in f64).

/// `f()`, compiled for AVX2 and FMA when the CPU has them: a loop over
/// these functions inside `f` (inlined into the wrapper) then runs 8 lanes
/// wide instead of the baseline's 4. The results are the same either way
/// (Rust fuses no multiply-add on its own, and the lanes are the loop's).
#[inline(always)]
pub fn wide<R, F: FnOnce() -> R>(f: F) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<R, F: FnOnce() -> R>(f: F) -> R {
                f()
            }
            // SAFETY: the CPU has AVX2 and FMA (detected just above), the
            // only requirement of a target_feature function.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// e^x over the whole f32 range: 2^n times a degree-6 polynomial in the
/// remainder r = x - n ln 2 (|r| <= ln 2 / 2), with n rounded by adding
/// 1.5 * 2^23. Relative error below 3e-7 where the result is a normal
/// float; subnormal results are rounded once from that; +inf above
/// ln(f32::MAX), 0 far below ln(2^-149), NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, the first exact in 9 bits, so n * LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0;
    // Past these ends the result is 0 or +inf anyway; inside them n is in
    // [-150, 129].
    let x = x.clamp(-104.0, 89.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let ni = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // 2^n as two normal powers of two 2^a 2^b, so that results near the
    // overflow and in the subnormal range come out right (2^n alone is not
    // a normal float there).
    let a = ni >> 1;
    let b = ni.wrapping_sub(a);
    let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) << 23) as u32);
    y * pow2(a) * pow2(b)
}

/// tanh(x): x + x^3 P(x^2) (degree-4 least-squares fit in relative error)
/// for |x| < ln(3)/2, where the other form would cancel, and
/// sign(x) (1 - 2 / (e^(2|x|) + 1)) beyond. Relative error below 4e-7;
/// +-1 at +-inf, NaN stays NaN, -0 stays -0.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let ax = x.abs();
    let z = x * x;
    let mut p = -6.292_869_3e-3;
    p = p * z + 2.108_549e-2;
    p = p * z - 5.385_589e-2;
    p = p * z + 1.333_262_3e-1;
    p = p * z - 3.333_332e-1;
    // (the sign copied so that -0 stays -0)
    let small = (x + x * z * p).copysign(x);
    let big = (1.0 - 2.0 / (exp(2.0 * ax) + 1.0)).copysign(x);
    if ax < 0.549_306_15 {
        small
    } else {
        big
    }
}

/// The logistic sigmoid 1 / (1 + e^-x), as e / (1 + e) with e = e^-|x|
/// for negative x (so that tiny results keep their relative accuracy,
/// subnormals included). Relative error below 5e-7; 0 and 1 at -inf and
/// +inf, NaN stays NaN.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let r = 1.0 / (1.0 + e);
    if x < 0.0 {
        e * r
    } else {
        r
    }
}

/// erfc(x).
pub fn erfc(x: f32) -> f32 {
    let z = (x as f64).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * p.exp();
    (if x >= 0.0 { r } else { 2.0 - r }) as f32
}

/// erf(x).
pub fn erf(x: f32) -> f32 {
    if x.abs() < 1e-3 {
        // 2/sqrt(pi) * (x - x^3/3): exact to f32 here, where 1 - erfc
        // would cancel.
        let x = x as f64;
        return (1.128_379_167_095_512_6 * (x - x * x * x / 3.0)) as f32;
    }
    (1.0 - erfc(x) as f64) as f32
}

/// ln x without branches or calls (see [`exp`]), for positive normal x:
/// x = m 2^e with m in [sqrt(1/2), sqrt(2)), and ln(m) from a degree-9
/// polynomial in m - 1. Relative error below 3e-7 away from x = 1
/// (absolute below 1e-7 near it).
#[inline(always)]
pub fn ln(x: f32) -> f32 {
    let bits = x.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 as f32 - 127.0;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    let big = m > std::f32::consts::SQRT_2;
    m = if big { m * 0.5 } else { m };
    e = if big { e + 1.0 } else { e };
    let f = m - 1.0;
    let z = f * f;
    let mut p = 7.037_683_6e-2;
    p = p * f - 1.151_461e-1;
    p = p * f + 1.167_699_9e-1;
    p = p * f - 1.242_014_1e-1;
    p = p * f + 1.424_932_3e-1;
    p = p * f - 1.666_805_8e-1;
    p = p * f + 2.000_071_5e-1;
    p = p * f - 2.499_999_4e-1;
    p = p * f + 3.333_333_1e-1;
    let y = f * z * p - 2.121_944_4e-4 * e - 0.5 * z;
    f + y + 0.693_359_4 * e
}

/// b^p for positive normal b, as exp(p ln b) (vectorises).
#[inline(always)]
pub fn pow(b: f32, p: f32) -> f32 {
    exp(p * ln(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ln_and_pow_match_the_standard_library() {
        let mut worst = 0.0f64;
        for i in 0..400_000 {
            let x = 1e-30f32 * 1.0002f32.powi(i);
            if !x.is_finite() {
                break;
            }
            let want = (x as f64).ln();
            worst = worst.max(((super::ln(x) as f64) - want).abs() / want.abs().max(1.0));
        }
        assert!(worst < 3e-7, "ln: worst error {worst}");
        for &(b, p) in &[(1.0f32, -0.75f32), (1.5, -0.75), (3.25, 0.5), (1e-3, 2.0), (250.0, -0.75)] {
            let want = (b as f64).powf(p as f64);
            assert!(((super::pow(b, p) as f64) - want).abs() / want < 1e-6, "pow({b}, {p})");
        }
    }

    /// Every 251st f32 bit pattern (both signs, subnormals, infinities and
    /// NaNs included) and the special values.
    fn all_f32() -> impl Iterator<Item = f32> {
        (0..=u32::MAX / 251).map(|i| f32::from_bits(i * 251)).chain([
            0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MIN_POSITIVE, -f32::MIN_POSITIVE,
            f32::from_bits(1), f32::MAX, f32::MIN,
        ])
    }

    /// Checks `f` against the f64 function `want` at every value: the same
    /// NaN-ness and infinities, relative error below `rel` where the result
    /// is a normal f32, absolute error within a subnormal step or two below.
    fn check(name: &str, f: impl Fn(f32) -> f32, want: impl Fn(f64) -> f64, rel: f64) {
        let mut worst = (0.0f64, 0.0f32);
        for x in all_f32() {
            let (got, w) = (f(x) as f64, want(x as f64));
            if w.is_nan() {
                assert!(got.is_nan(), "{name}({x:e}) = {got:e}, want NaN");
                continue;
            }
            let wf = w as f32;
            if wf.is_infinite() {
                assert_eq!(got, wf as f64, "{name}({x:e})");
                continue;
            }
            if (w.abs()) < f32::MIN_POSITIVE as f64 {
                assert!((got - w).abs() <= 2.0 * f32::from_bits(1) as f64, "{name}({x:e}) = {got:e}, want {w:e}");
                continue;
            }
            let e = (got - w).abs() / w.abs();
            if e > worst.0 {
                worst = (e, x);
            }
        }
        assert!(worst.0 < rel, "{name}: worst relative error {:e} at {:e}", worst.0, worst.1);
    }

    #[test]
    fn exp_matches_f64_over_the_whole_range() {
        check("exp", super::exp, f64::exp, 3e-7);
        // a dense sweep where the polynomial and the reduction meet
        for i in -1_040_000..=890_000 {
            let x = i as f32 * 1e-4;
            let (got, want) = (super::exp(x) as f64, (x as f64).exp());
            if want >= f32::MIN_POSITIVE as f64 && want <= f32::MAX as f64 {
                assert!((got - want).abs() / want < 3e-7, "exp({x})");
            }
        }
        assert_eq!(super::exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(super::exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(super::exp(-0.0), 1.0);
        assert!(super::exp(-100.0) > 0.0 && super::exp(-100.0) < f32::MIN_POSITIVE);
    }

    #[test]
    fn tanh_and_sigmoid_match_f64_over_the_whole_range() {
        check("tanh", super::tanh, f64::tanh, 4e-7);
        check("sigmoid", super::sigmoid, |x| 1.0 / (1.0 + (-x).exp()), 5e-7);
        for i in -200_000..=200_000 {
            let x = i as f32 * 1e-4;
            let want = (x as f64).tanh();
            if want != 0.0 {
                assert!(((super::tanh(x) as f64) - want).abs() / want.abs() < 4e-7, "tanh({x})");
            }
        }
        assert_eq!(super::tanh(f32::INFINITY), 1.0);
        assert_eq!(super::tanh(f32::NEG_INFINITY), -1.0);
        assert!(super::tanh(-0.0).is_sign_negative());
        assert_eq!(super::sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(super::sigmoid(f32::INFINITY), 1.0);
    }

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [(0.0f32, 0.0f64), (0.5, 0.520_499_877_8), (1.0, 0.842_700_792_9), (2.0, 0.995_322_265_0),
                          (-1.5, -0.966_105_146_5), (0.0005, 0.000_564_189_5), (3.5, 0.999_999_256_9)] {
            let got = super::erf(x) as f64;
            assert!((got - want).abs() < 2e-7, "erf({x}) = {got}, want {want}");
        }
        assert!((super::erfc(3.0) as f64 - 2.209_049_7e-5).abs() < 1e-11);
    }
}
