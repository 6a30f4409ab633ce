//! IEEE 754 half precision (`float16`) conversions: exact bit arithmetic, round-to-nearest-even.

/// Converts IEEE 754 binary16 bits to the (exactly equal) `f32`.
pub fn f16_bits_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exp = u32::from((bits >> 10) & 0x1f);
    let mant = u32::from(bits & 0x3ff);
    let magnitude = match exp {
        // Zero or subnormal: mant * 2^-24, exact in f32.
        0 => (mant as f32) * f32::from_bits(0x3380_0000),
        // Infinity or NaN (payload kept in the high mantissa bits).
        0x1f => return f32::from_bits(sign | 0x7f80_0000 | (mant << 13)),
        _ => f32::from_bits(((exp + 127 - 15) << 23) | (mant << 13)),
    };
    f32::from_bits(sign | magnitude.to_bits())
}

/// Rounds an `f64` to the nearest binary16 value (ties to even) and returns its bits.
/// Values beyond the half range become infinities; NaN stays NaN (quiet, sign kept).
pub fn f64_to_f16_bits(value: f64) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mant = bits & ((1u64 << 52) - 1);
    if exp == 0x7ff {
        return if mant == 0 {
            sign | 0x7c00
        } else {
            sign | 0x7e00 | ((mant >> 42) as u16 & 0x3ff)
        };
    }
    if exp == 0 {
        // Zero or an f64 subnormal, far below half the smallest half subnormal.
        return sign;
    }
    let e = exp - 1023;
    if e > 15 {
        return sign | 0x7c00;
    }
    let full = mant | (1u64 << 52);
    if e >= -14 {
        // Normal half: keep 10 of the 52 mantissa bits.
        let mut half_exp = (e + 15) as u16;
        let mut m = round_shift(mant, 42);
        if m == 0x400 {
            m = 0;
            half_exp += 1;
        }
        if half_exp >= 0x1f {
            return sign | 0x7c00;
        }
        return sign | (half_exp << 10) | m as u16;
    }
    // Subnormal half: the value in units of 2^-24 is full * 2^(e - 28).
    let shift = (28 - e) as u32;
    if shift >= 54 {
        return sign;
    }
    // A carry into bit 10 yields the smallest normal, which has exactly this encoding.
    sign | round_shift(full, shift) as u16
}

/// `x >> shift` rounded to nearest, ties to even (`1 <= shift <= 63`).
pub(crate) fn round_shift(x: u64, shift: u32) -> u64 {
    let q = x >> shift;
    let rem = x & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// Rounds an `f32` to the nearest binary16 value (ties to even) and returns its bits.
pub fn f32_to_f16_bits(value: f32) -> u16 {
    // Widening is exact, so this rounds once.
    f64_to_f16_bits(f64::from(value))
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
        assert_eq!(
            f64_to_f16_bits(1.0 + 3.0 * 2f64.powi(-11)),
            0x3c02,
            "tie to even"
        );
        assert_eq!(f64_to_f16_bits(2f64.powi(-24)), 1);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25)), 0);
        assert_eq!(f64_to_f16_bits(-0.0), 0x8000);
        assert_eq!(f64_to_f16_bits(0.1), 0x2e66);
    }
}
