//! `float32` `exp`, `tanh` and `sigmoid` for the recurrences' gate math, branch-free so that the
//! loops calling them vectorize: the method and the coefficients of the kernels' inline math
//! (`codegen/vmath.rs`, within 2 ulp), evaluated with Horner's rule. `FMA` fuses the
//! multiply-adds (the AVX2 and AVX-512 paths) or rounds each product (the portable one).

pub(super) use crate::math::madd;
use crate::math::{TANH_CAP, TANH_P, TANH_SPLIT, clamp, exp_clamped, poly};

/// The logistic function `1 / (1 + e^-x)`: `e = e^-|x|`, then `1 / (1 + e)` for `x >= 0`
/// and `e / (1 + e)` below.
#[inline(always)]
pub(crate) fn sigmoid<const FMA: bool>(x: f32) -> f32 {
    let e = exp_clamped::<FMA>(clamp(-x.abs(), -104.0, 89.0), true);
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

/// `tanh`: `|x| + |x|³ P(x²)` below 0.625, `1 - 2 / (e^(2|x|) + 1)` above (`2|x|` capped at
/// 40, where it is 1), the sign put back.
#[inline(always)]
pub(crate) fn tanh<const FMA: bool>(x: f32) -> f32 {
    let a = x.abs();
    let a2 = a * a;
    let small = madd::<FMA>(a2 * a, poly::<FMA>(a2, &TANH_P), a);
    let two_a = a + a;
    let two_a = if two_a > TANH_CAP { TANH_CAP } else { two_a };
    let large = 1.0 - 2.0 / (exp_clamped::<FMA>(two_a, false) + 1.0);
    let r = if a < TANH_SPLIT { small } else { large };
    r.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in units in the last place between two finite `f32`s of one sign.
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    /// Every `x = k / 1024` over `[-20, 20]` and the tiny and huge magnitudes.
    fn points() -> impl Iterator<Item = f32> {
        (-20_480..=20_480).map(|k| k as f32 / 1024.0).chain([
            1e-30, -1e-30, 1e-7, -1e-7, 80.0, -80.0, 200.0, -200.0, 1e30, -1e30,
        ])
    }

    fn check(name: &str, got: impl Fn(f32) -> f32, want: impl Fn(f64) -> f64) {
        for x in points() {
            let (g, w) = (got(x), want(f64::from(x)) as f32);
            assert!(
                ulps(g, w) <= 2 || (g - w).abs() <= f32::MIN_POSITIVE,
                "{name}({x}) = {g}, want {w}"
            );
        }
        assert!(got(f32::NAN).is_nan(), "{name}(NaN)");
    }

    #[test]
    fn gate_functions_are_within_two_ulp_on_both_paths() {
        check("sigmoid", sigmoid::<true>, |x| 1.0 / (1.0 + (-x).exp()));
        check("sigmoid", sigmoid::<false>, |x| 1.0 / (1.0 + (-x).exp()));
        check("tanh", tanh::<true>, f64::tanh);
        check("tanh", tanh::<false>, f64::tanh);
        assert_eq!(tanh::<true>(f32::INFINITY), 1.0);
        assert_eq!(sigmoid::<true>(f32::NEG_INFINITY), 0.0);
    }
}
