//! The narrow floats without IEEE 754 hardware support: `bfloat16` and the four 8-bit formats of
//! OCP and ONNX (`float8_e4m3fn`, `float8_e4m3fnuz`, `float8_e5m2`, `float8_e5m2fnuz`), as one
//! parameterized format ([`Minifloat`]) with exact conversions to and from `f64`.
//!
//! Written by hand because the semantics must be exact and shared: the reference interpreter
//! and the JIT's host conversions call these functions, so both round identically. Rounding is
//! to nearest, ties to even, once, from the `f64` (every `f32` and `float16` widens to it
//! exactly). The conversion does not saturate: a value that rounds beyond the largest finite
//! one becomes infinity where the format has one (`bfloat16`, `e5m2`) and NaN otherwise, as
//! ONNX's `Cast` with `saturate = 0`; the ONNX importer clamps first for `saturate = 1`.

use crate::half::round_shift;

/// How a format spends its top codes on infinities and NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// IEEE 754: the all-ones exponent holds the infinities (zero mantissa) and NaNs.
    Ieee,
    /// `fn` ("finite"): no infinities; only the all-ones exponent and mantissa is NaN.
    Finite,
    /// `fnuz` ("finite, unsigned zero"): no infinities, no negative zero; the code of negative
    /// zero, `0x80`, is the only NaN.
    FiniteUnsignedZero,
}

/// A binary floating-point format of at most 16 bits: sign, exponent and mantissa widths, bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minifloat {
    /// Exponent bits.
    pub exponent: u32,
    /// Mantissa (fraction) bits.
    pub mantissa: u32,
    /// The exponent bias.
    pub bias: i32,
    /// Where the infinities and NaNs are.
    pub specials: Specials,
}

impl Minifloat {
    /// `bfloat16`: the upper half of an `f32`.
    pub const BF16: Minifloat = Minifloat::new(8, 7, 127, Specials::Ieee);
    /// `float8_e4m3fn`: largest finite 448.
    pub const E4M3FN: Minifloat = Minifloat::new(4, 3, 7, Specials::Finite);
    /// `float8_e4m3fnuz`: largest finite 240.
    pub const E4M3FNUZ: Minifloat = Minifloat::new(4, 3, 8, Specials::FiniteUnsignedZero);
    /// `float8_e5m2`: IEEE-like, largest finite 57344.
    pub const E5M2: Minifloat = Minifloat::new(5, 2, 15, Specials::Ieee);
    /// `float8_e5m2fnuz`: largest finite 57344.
    pub const E5M2FNUZ: Minifloat = Minifloat::new(5, 2, 16, Specials::FiniteUnsignedZero);

    const fn new(exponent: u32, mantissa: u32, bias: i32, specials: Specials) -> Minifloat {
        Minifloat {
            exponent,
            mantissa,
            bias,
            specials,
        }
    }

    fn sign_bit(self) -> u32 {
        1 << (self.exponent + self.mantissa)
    }

    fn exponent_ones(self) -> u32 {
        (1 << self.exponent) - 1
    }

    fn nan(self, negative: bool) -> u16 {
        let sign = if negative { self.sign_bit() } else { 0 };
        let ones = self.exponent_ones() << self.mantissa;
        (match self.specials {
            // bfloat16: the upper half of f32's quiet NaN; e5m2: every mantissa bit, the
            // code ONNX writes.
            Specials::Ieee if self.mantissa > 2 => sign | ones | (1 << (self.mantissa - 1)),
            Specials::Ieee => sign | ones | ((1 << self.mantissa) - 1),
            Specials::Finite => sign | ones | ((1 << self.mantissa) - 1),
            Specials::FiniteUnsignedZero => self.sign_bit(),
        }) as u16
    }

    /// The largest finite value's code (positive).
    fn max_code(self) -> u32 {
        let ones = self.exponent_ones() << self.mantissa;
        let all_mantissa = (1 << self.mantissa) - 1;
        match self.specials {
            Specials::Ieee => ones - (1 << self.mantissa) + all_mantissa,
            Specials::Finite => ones | (all_mantissa - 1),
            Specials::FiniteUnsignedZero => ones | all_mantissa,
        }
    }

    /// Whether the format has infinities (`bfloat16`, `e5m2`).
    pub fn has_infinity(self) -> bool {
        self.specials == Specials::Ieee
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f64 {
        self.to_f64(self.max_code() as u16)
    }

    /// The value of a code (the low `1 + exponent + mantissa` bits of `bits`), exactly.
    pub fn to_f64(self, bits: u16) -> f64 {
        let bits = u32::from(bits) & ((self.sign_bit() << 1) - 1);
        let negative = bits & self.sign_bit() != 0;
        let e = (bits >> self.mantissa) & self.exponent_ones();
        let m = bits & ((1 << self.mantissa) - 1);
        let special = match self.specials {
            Specials::Ieee if e == self.exponent_ones() => {
                Some(if m == 0 { f64::INFINITY } else { f64::NAN })
            }
            Specials::Finite if e == self.exponent_ones() && m == (1 << self.mantissa) - 1 => {
                Some(f64::NAN)
            }
            Specials::FiniteUnsignedZero if bits == self.sign_bit() => Some(f64::NAN),
            _ => None,
        };
        let magnitude = special.unwrap_or_else(|| {
            let (significand, exp) = if e == 0 {
                (m, 1 - self.bias)
            } else {
                (m | (1 << self.mantissa), e as i32 - self.bias)
            };
            // Exact: at most 8 significant bits, exponent within f64's normal range.
            f64::from(significand) * 2f64.powi(exp - self.mantissa as i32)
        });
        if negative { -magnitude } else { magnitude }
    }

    /// `value` rounded to the nearest value of the format (ties to even), as its code. Beyond
    /// the largest finite value: infinity or NaN (see the module documentation).
    pub fn from_f64(self, value: f64) -> u16 {
        let negative = value.is_sign_negative();
        if value.is_nan() {
            return self.nan(negative);
        }
        let sign = if negative { self.sign_bit() } else { 0 };
        // `fnuz` formats have one zero, the positive one.
        let zero = match self.specials {
            Specials::FiniteUnsignedZero => 0,
            _ => sign as u16,
        };
        let overflow = || match self.specials {
            Specials::Ieee => (sign | (self.exponent_ones() << self.mantissa)) as u16,
            _ => self.nan(negative),
        };
        if value.is_infinite() {
            return overflow();
        }
        let bits = value.abs().to_bits();
        let biased = (bits >> 52) as i32;
        if biased == 0 {
            // Zero, or an f64 subnormal: far below half the smallest subnormal of any format.
            return zero;
        }
        let full = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
        let e = biased - 1023;
        // The value is `full * 2^(e - 52)`; the format's quantum at it is `2^(q - mantissa)`.
        let q = e.max(1 - self.bias);
        let shift = (52 - self.mantissa as i32 + (q - e)) as u32;
        let mut n = if shift >= 64 {
            0
        } else {
            round_shift(full, shift)
        } as u32;
        let mut q = q;
        if n >> (self.mantissa + 1) != 0 {
            // A carry out of the significand: one binade up.
            n >>= 1;
            q += 1;
        }
        if n == 0 {
            return zero;
        }
        let code = if n >> self.mantissa == 0 {
            n
        } else {
            let biased = q + self.bias;
            if biased > self.exponent_ones() as i32 {
                return overflow();
            }
            ((biased as u32) << self.mantissa) | (n & ((1 << self.mantissa) - 1))
        };
        if code > self.max_code() {
            return overflow();
        }
        (sign | code) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMATS: [Minifloat; 5] = [
        Minifloat::BF16,
        Minifloat::E4M3FN,
        Minifloat::E4M3FNUZ,
        Minifloat::E5M2,
        Minifloat::E5M2FNUZ,
    ];

    #[test]
    fn largest_finite_values() {
        assert_eq!(Minifloat::E4M3FN.max_finite(), 448.0);
        assert_eq!(Minifloat::E4M3FNUZ.max_finite(), 240.0);
        assert_eq!(Minifloat::E5M2.max_finite(), 57344.0);
        assert_eq!(Minifloat::E5M2FNUZ.max_finite(), 57344.0);
        assert_eq!(
            Minifloat::BF16.max_finite(),
            f64::from(f32::from_bits(0x7f7f_0000))
        );
    }

    #[test]
    fn smallest_values_and_specials() {
        assert_eq!(Minifloat::E4M3FN.to_f64(0x01), 2f64.powi(-9));
        assert_eq!(Minifloat::E4M3FNUZ.to_f64(0x01), 2f64.powi(-10));
        assert_eq!(Minifloat::E5M2.to_f64(0x01), 2f64.powi(-16));
        assert_eq!(Minifloat::E5M2FNUZ.to_f64(0x01), 2f64.powi(-17));
        assert!(Minifloat::E4M3FN.to_f64(0x7f).is_nan());
        assert!(Minifloat::E4M3FN.to_f64(0xff).is_nan());
        assert_eq!(Minifloat::E4M3FN.to_f64(0x80), 0.0);
        assert!(Minifloat::E4M3FNUZ.to_f64(0x80).is_nan());
        assert_eq!(Minifloat::E5M2.to_f64(0x7c), f64::INFINITY);
        assert_eq!(Minifloat::E5M2.to_f64(0xfc), f64::NEG_INFINITY);
        assert!(Minifloat::E5M2.to_f64(0x7d).is_nan());
        assert!(Minifloat::E5M2FNUZ.to_f64(0x80).is_nan());
        assert_eq!(Minifloat::E5M2FNUZ.to_f64(0x7f), 57344.0);
    }

    /// Every code converts to its value and back to itself (NaNs to a NaN, and `fnuz`'s
    /// nonexistent negative zero aside).
    #[test]
    fn every_code_round_trips() {
        for f in FORMATS {
            let width = 1 + f.exponent + f.mantissa;
            for code in 0..(1u32 << width) {
                let v = f.to_f64(code as u16);
                let back = f.from_f64(v);
                if v.is_nan() {
                    assert!(f.to_f64(back).is_nan(), "{f:?} {code:#x}");
                } else {
                    assert_eq!(u32::from(back), code, "{f:?} {code:#x} = {v}");
                }
            }
        }
    }

    /// Between neighbouring values: below the midpoint rounds down, above up, the midpoint to
    /// the even code; past the largest finite value, infinity or NaN.
    #[test]
    fn rounds_to_nearest_even_and_overflows() {
        for f in FORMATS {
            let width = 1 + f.exponent + f.mantissa;
            let finite: Vec<(u32, f64)> = (0..(1u32 << (width - 1)))
                .map(|c| (c, f.to_f64(c as u16)))
                .filter(|(_, v)| v.is_finite())
                .collect();
            for pair in finite.windows(2) {
                let ((c0, v0), (c1, v1)) = (pair[0], pair[1]);
                let mid = (v0 + v1) / 2.0;
                let below = f64::from_bits(mid.to_bits() - 1);
                let above = f64::from_bits(mid.to_bits() + 1);
                assert_eq!(u32::from(f.from_f64(below)), c0, "{f:?} below {mid}");
                assert_eq!(u32::from(f.from_f64(above)), c1, "{f:?} above {mid}");
                let even = if c0 & 1 == 0 { c0 } else { c1 };
                assert_eq!(u32::from(f.from_f64(mid)), even, "{f:?} at {mid}");
                for s in [-1.0, 1.0] {
                    let negative = f.from_f64(s * above);
                    assert_eq!(f.to_f64(negative), s * v1, "{f:?} sign {s}");
                }
            }
            let max = f.max_finite();
            let ulp = max - finite[finite.len() - 2].1;
            let beyond = f.to_f64(f.from_f64(max + ulp * 0.75));
            let huge = f.to_f64(f.from_f64(1e300));
            for v in [beyond, huge, f.to_f64(f.from_f64(f64::INFINITY))] {
                match f.specials {
                    Specials::Ieee => assert_eq!(v, f64::INFINITY, "{f:?}"),
                    _ => assert!(v.is_nan(), "{f:?}"),
                }
            }
            // Half an ulp past the largest value rounds to even: down to the largest if its
            // code is even, else up, out of range.
            let tie = f.to_f64(f.from_f64(max + ulp * 0.5));
            if f.max_code() & 1 == 0 {
                assert_eq!(tie, max, "{f:?}");
            } else {
                assert!(tie.is_infinite() || tie.is_nan(), "{f:?}");
            }
        }
    }

    #[test]
    fn zeros_tiny_values_and_nan() {
        for f in FORMATS {
            let tiny = f.to_f64(1) / 2.0;
            assert_eq!(f.from_f64(tiny), 0, "{f:?}: a tie rounds to even zero");
            assert_eq!(f.from_f64(tiny * 1.01), 1, "{f:?}");
            assert_eq!(f.from_f64(1e-300), 0);
            let negative_zero = f.from_f64(-0.0);
            let negative_tiny = f.from_f64(-1e-300);
            match f.specials {
                Specials::FiniteUnsignedZero => {
                    assert_eq!((negative_zero, negative_tiny), (0, 0), "{f:?}");
                }
                _ => {
                    let sign = f.sign_bit() as u16;
                    assert_eq!((negative_zero, negative_tiny), (sign, sign), "{f:?}");
                }
            }
            assert!(f.to_f64(f.from_f64(f64::NAN)).is_nan());
            assert!(f.to_f64(f.from_f64(-f64::NAN)).is_nan());
        }
    }

    /// `bfloat16` is the upper half of an `f32`, rounded once from `f64` (not through `f32`).
    #[test]
    fn bfloat16_is_the_upper_half_of_f32() {
        for bits in (0..=u16::MAX).step_by(7) {
            let v = Minifloat::BF16.to_f64(bits);
            let f = f32::from_bits(u32::from(bits) << 16);
            assert!(v.is_nan() && f.is_nan() || v == f64::from(f), "{bits:#x}");
        }
        // 1 + 2^-8 + 2^-30: rounding through f32 first would give the tie, then 1.
        let v = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
        assert_eq!(Minifloat::BF16.from_f64(v), 0x3f81);
        assert_eq!(Minifloat::BF16.from_f64(1.0 + 2f64.powi(-8)), 0x3f80);
    }
}
