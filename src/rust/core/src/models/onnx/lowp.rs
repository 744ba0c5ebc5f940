//! The narrow floating-point types of ONNX (float8 in its four flavours,
//! float8e8m0, float4e2m1): their values from their bit patterns, and
//! rounding to them (to nearest, ties to even; saturating or not), so that
//! values held as f64 on the host take only what the type can hold.

use super::elem::Elem;

/// A small float format: exponent and mantissa bits, bias, whether it has
/// infinities, its largest finite value, and `fnuz` (no negative zero, the
/// pattern 0x80 is NaN).
struct Format {
    exp: u32,
    man: u32,
    bias: i32,
    inf: bool,
    nan: bool,
    fnuz: bool,
    max: f64,
}

fn format(e: Elem) -> Option<Format> {
    Some(match e {
        Elem::F8E4M3FN => Format { exp: 4, man: 3, bias: 7, inf: false, nan: true, fnuz: false, max: 448.0 },
        Elem::F8E4M3FNUZ => Format { exp: 4, man: 3, bias: 8, inf: false, nan: true, fnuz: true, max: 240.0 },
        Elem::F8E5M2 => Format { exp: 5, man: 2, bias: 15, inf: true, nan: true, fnuz: false, max: 57344.0 },
        Elem::F8E5M2FNUZ => Format { exp: 5, man: 2, bias: 16, inf: false, nan: true, fnuz: true, max: 57344.0 },
        Elem::F4E2M1 => Format { exp: 2, man: 1, bias: 1, inf: false, nan: false, fnuz: false, max: 6.0 },
        _ => return None,
    })
}

/// The value of bit pattern `b` (the low bits) of narrow float type `e`.
pub fn decode(e: Elem, b: u8) -> f64 {
    if e == Elem::F8E8M0 {
        return if b == 0xff { f64::NAN } else { 2f64.powi(b as i32 - 127) };
    }
    let Some(f) = format(e) else { return f64::NAN };
    let width = 1 + f.exp + f.man;
    let b = (b as u32) & ((1 << width) - 1);
    let sign = if b >> (width - 1) != 0 { -1.0 } else { 1.0 };
    let ex = (b >> f.man) & ((1 << f.exp) - 1);
    let m = b & ((1 << f.man) - 1);
    if f.fnuz && b == 1 << (width - 1) {
        return f64::NAN;
    }
    let top = (1 << f.exp) - 1;
    if ex == top && !f.fnuz && f.nan {
        // E5M2: all-ones exponent is inf (mantissa 0) or NaN; E4M3FN:
        // only the all-ones pattern is NaN.
        if f.inf {
            return if m == 0 { sign * f64::INFINITY } else { f64::NAN };
        }
        if m == (1 << f.man) - 1 {
            return f64::NAN;
        }
    }
    let frac = m as f64 / (1u32 << f.man) as f64;
    if ex == 0 {
        sign * frac * 2f64.powi(1 - f.bias)
    } else {
        sign * (1.0 + frac) * 2f64.powi(ex as i32 - f.bias)
    }
}

/// `x` rounded to narrow float type `e` (to nearest, ties to even). Out of
/// range values saturate to the largest finite one, or without `saturate`
/// become infinite (E5M2) or NaN (the types without infinities); float4
/// always saturates. float8e8m0 (powers of two) rounds up, as Cast does.
pub fn round(e: Elem, x: f64, saturate: bool) -> f64 {
    if e == Elem::F8E8M0 {
        return round_e8m0(x, saturate);
    }
    let Some(f) = format(e) else { return x };
    if x.is_nan() {
        return if f.nan { f64::NAN } else { -0.0 };
    }
    let sat = saturate || !f.nan;
    let a = x.abs();
    let sign = if x.is_sign_negative() { -1.0 } else { 1.0 };
    if a.is_infinite() {
        return if sat { sign * f.max } else if f.inf { x } else { f64::NAN };
    }
    if a == 0.0 {
        return if f.fnuz { 0.0 } else { x };
    }
    // The quantum at a's binade (subnormals share the smallest one's).
    let binade = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let emin = 1 - f.bias;
    let q = 2f64.powi(binade.max(emin) - f.man as i32);
    let r = (a / q).round_ties_even() * q;
    let r = if r > f.max {
        if sat {
            f.max
        } else if f.inf {
            f64::INFINITY
        } else {
            return f64::NAN;
        }
    } else {
        r
    };
    if r == 0.0 && f.fnuz {
        return 0.0;
    }
    sign * r
}

/// float8e8m0: 2^k, k in [-127, 127]; values round up to the next power
/// of two; NaN, infinities and (without `saturate`) overflow are NaN.
fn round_e8m0(x: f64, saturate: bool) -> f64 {
    let a = (x as f32).abs();
    if !a.is_finite() {
        return f64::NAN;
    }
    let bits = a.to_bits();
    let mut ex = ((bits >> 23) & 0xff) as i32;
    if bits & 0x7f_ffff != 0 {
        if ex == 0xfe {
            if !saturate {
                return f64::NAN;
            }
        } else {
            ex += 1;
        }
    }
    decode(Elem::F8E8M0, ex as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float8_round_trips_and_rounds() {
        for e in [Elem::F8E4M3FN, Elem::F8E4M3FNUZ, Elem::F8E5M2, Elem::F8E5M2FNUZ] {
            for b in 0..=255u8 {
                let v = decode(e, b);
                if v.is_finite() {
                    assert_eq!(round(e, v, false), v, "{e:?} {b:#x}");
                }
            }
        }
        assert_eq!(decode(Elem::F8E4M3FN, 0x7e), 448.0);
        assert!(decode(Elem::F8E4M3FN, 0x7f).is_nan());
        assert_eq!(decode(Elem::F8E5M2, 0x7c), f64::INFINITY);
        assert!(decode(Elem::F8E5M2FNUZ, 0x80).is_nan());
        assert_eq!(decode(Elem::F8E4M3FN, 0x01), 2f64.powi(-9));
        assert_eq!(round(Elem::F8E4M3FN, 464.0, false), 448.0);
        assert!(round(Elem::F8E4M3FN, 480.0, false).is_nan());
        assert_eq!(round(Elem::F8E4M3FN, 1e6, true), 448.0);
        assert_eq!(round(Elem::F8E5M2, 1e6, false), f64::INFINITY);
        assert_eq!(round(Elem::F8E4M3FN, 1.0625, true), 1.0);
        assert_eq!(round(Elem::F8E4M3FN, 1.1875, true), 1.25);
        assert_eq!(round(Elem::F4E2M1, 2.5, true), 2.0);
        assert_eq!(round(Elem::F4E2M1, 5.0, false), 4.0);
        assert_eq!(round(Elem::F4E2M1, 100.0, false), 6.0);
        assert_eq!(round(Elem::F8E8M0, 3.0, true), 4.0);
        assert_eq!(round(Elem::F8E8M0, 0.25, true), 0.25);
    }
}
