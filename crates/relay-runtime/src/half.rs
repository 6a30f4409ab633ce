//! IEEE 754 half precision (`float16`) conversions, round-to-nearest-even.

/// Converts a `f32` to the nearest `float16` bit pattern (overflow gives infinity, NaN stays
/// NaN).
pub fn f32_to_f16_bits(value: f32) -> u16 {
    f64_to_f16_bits(value as f64)
}

/// Converts a `f64` to the nearest `float16` bit pattern, rounding once (not through `f32`).
pub fn f64_to_f16_bits(value: f64) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    if value.is_nan() {
        return sign | 0x7e00;
    }
    let a = value.abs();
    if a.is_infinite() || a >= 65520.0 {
        // 65520 is the midpoint between the largest half (65504) and 2^16: it rounds to inf.
        return sign | 0x7c00;
    }
    if a < 2f64.powi(-25) || a == 0.0 {
        // Below half the smallest subnormal (ties at exactly 2^-25 round to even, i.e. zero).
        return sign;
    }
    // Scale so that the value is an integer count of the target's least significant unit, then
    // round to nearest even.
    let exp = a.log2().floor() as i32;
    let (unit_exp, biased) = if exp < -14 { (-24, 0) } else { (exp - 10, exp + 15) };
    let scaled = a / 2f64.powi(unit_exp);
    let mut mant = round_half_even(scaled) as u32;
    let mut biased = biased as u32;
    if biased == 0 {
        // Subnormal: the mantissa may round up into the smallest normal, which the encoding
        // handles by itself (mant == 0x400 sets the exponent bit).
        return sign | mant as u16;
    }
    if mant >= 0x800 {
        mant >>= 1;
        biased += 1;
    }
    if biased >= 31 {
        return sign | 0x7c00;
    }
    sign | ((biased as u16) << 10) | (mant as u16 & 0x3ff)
}

fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (r - x).abs() == 0.5 && r % 2.0 != 0.0 { r - x.signum() } else { r }
}

/// Converts a `float16` bit pattern to `f32` (exactly).
pub fn f16_bits_to_f32(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1f) as i32;
    let mant = (bits & 0x3ff) as f32;
    match exp {
        0 => sign * mant * 2f32.powi(-24),
        31 if mant == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + mant / 1024.0) * 2f32.powi(exp - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values_round_trip() {
        for bits in 0u16..=0xffff {
            let f = f16_bits_to_f32(bits);
            if f.is_nan() {
                assert!(f16_bits_to_f32(f32_to_f16_bits(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16_bits(f), bits, "{bits:#x} = {f}");
            }
        }
    }

    #[test]
    fn rounding_and_limits() {
        assert_eq!(f16_bits_to_f32(f64_to_f16_bits(65504.0)), 65504.0);
        assert_eq!(f64_to_f16_bits(65519.0), 0x7bff);
        assert_eq!(f64_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00, "tie to even");
        assert_eq!(f64_to_f16_bits(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02, "tie to even");
        assert_eq!(f64_to_f16_bits(2f64.powi(-24)), 1);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25)), 0);
        assert_eq!(f64_to_f16_bits(-0.0), 0x8000);
        assert_eq!(f64_to_f16_bits(0.1), 0x2e66);
    }
}
