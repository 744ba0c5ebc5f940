//! Scalar functions the standard library lacks: the error function and its
//! complement (a Chebyshev fit with fractional error below 1.2e-7,
//! evaluated in f64), and an exponential, a logarithm and a power that
//! vectorise.

/// e^x without branches or calls, so that a loop over it vectorises (the
/// standard library's calls libm per value): 2^n times a degree-6
/// polynomial in the remainder x - n ln 2 (|remainder| <= ln 2 / 2), with
/// n rounded by adding 1.5 * 2^23. Relative error below 3e-7; x is clamped
/// to [-87.3, 88.3], where 2^n stays a normal float (NaN stays NaN).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, the first exact in few bits, so n * LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.3);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let ni = t.to_bits() as i32 - ROUND.to_bits() as i32;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((ni + 127) << 23) as u32)
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

    #[test]
    fn exp_matches_the_standard_library() {
        let mut worst = 0.0f64;
        for i in -870_000..=883_000 {
            let x = i as f32 * 1e-4;
            let want = (x as f64).exp();
            worst = worst.max(((super::exp(x) as f64) - want).abs() / want);
        }
        assert!(worst < 3e-7, "worst relative error {worst}");
        assert!(super::exp(f32::NAN).is_nan());
        assert_eq!(super::exp(-1000.0), super::exp(-87.3));
        assert!(super::exp(1000.0).is_finite());
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
