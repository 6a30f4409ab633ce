//! Exact spellings of floating-point literals.
//!
//! Every finite value is written with the fewest significant digits that read back as the same
//! value of its width, so printing never loses precision (TVM printed 6 digits). The text always
//! starts with a digit (after an optional `-`) and has the form `DIGITS[.DIGITS][e[-]DIGITS]`,
//! followed by the width suffix: `f` (float32), `f16` or `f64`. Magnitudes in `[1e-4, 1e16)` are
//! written positionally (`0.1`, `1.5`, `3`, `123456`); others in exponent form (`1e-5`,
//! `3.4028235e38`). Not-a-number is `nanf` (`nanf16`, `nanf64`) whatever its sign or payload,
//! and infinities are `inff` / `-inff` (`inff16`, `-inff64`, ...).

use relay_runtime::half::{f16_bits_to_f32, f32_to_f16_bits, f64_to_f16_bits};

/// The width of a float literal, which selects its suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatWidth {
    /// `f16`.
    F16,
    /// `f` (float32, the default width).
    F32,
    /// `f64`.
    F64,
}

impl FloatWidth {
    fn suffix(self) -> &'static str {
        match self {
            FloatWidth::F16 => "f16",
            FloatWidth::F32 => "f",
            FloatWidth::F64 => "f64",
        }
    }
}

/// Writes a float16 literal given its bits, e.g. `0.1f16`.
#[inline(never)]
pub(crate) fn push_f16(out: &mut String, bits: u16) {
    let value = f16_bits_to_f32(bits);
    if push_special(out, f64::from(value), FloatWidth::F16) {
        return;
    }
    // The shortest of 1..=5 significant digits that reads back as the same half, whether the
    // reader rounds the decimal straight to half or goes through f32 first.
    let wide = f64::from(value);
    for precision in 0..5 {
        let text = format!("{wide:.precision$e}");
        let via_f64 = text.parse::<f64>().map(f64_to_f16_bits);
        let via_f32 = text.parse::<f32>().map(f32_to_f16_bits);
        if via_f64 == Ok(bits) && via_f32 == Ok(bits) {
            push_decimal(out, &text);
            out.push_str("f16");
            return;
        }
    }
    // Unreachable for finite halves (5 digits always suffice); the exact f32 digits are a safe
    // fallback because every half is exactly an f32.
    push_decimal(out, &format!("{value:e}"));
    out.push_str("f16");
}

/// Writes a float32 literal, e.g. `0.1f`, `1e-5f`, `-inff`.
#[inline(never)]
pub(crate) fn push_f32(out: &mut String, value: f32) {
    if push_special(out, f64::from(value), FloatWidth::F32) {
        return;
    }
    push_decimal(out, &format!("{value:e}"));
    out.push('f');
}

/// Writes a float64 literal (`1.5f64`), or, with `width` [`FloatWidth::F32`], the shortest
/// digits of the `f64` followed by `f` (how attribute values are written).
#[inline(never)]
pub(crate) fn push_f64(out: &mut String, value: f64, width: FloatWidth) {
    if push_special(out, value, width) {
        return;
    }
    push_decimal(out, &format!("{value:e}"));
    out.push_str(width.suffix());
}

/// Writes `nanf..`, `inff..` or `-inff..` and returns `true` for non-finite values.
fn push_special(out: &mut String, value: f64, width: FloatWidth) -> bool {
    if value.is_nan() {
        out.push_str("nan");
    } else if value == f64::INFINITY {
        out.push_str("inf");
    } else if value == f64::NEG_INFINITY {
        out.push_str("-inf");
    } else {
        return false;
    }
    out.push_str(width.suffix());
    true
}

/// Rewrites Rust's exponent notation (`-1.25e-7`, `3e0`, `1.000e2`) in the literal style:
/// positional for decimal exponents in `-4..16`, otherwise `d[.ddd]e[-]x`.
fn push_decimal(out: &mut String, sci: &str) {
    let (negative, rest) = match sci.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, sci),
    };
    let (mantissa, exponent) = rest.split_once('e').unwrap_or((rest, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    if negative {
        out.push('-');
    }
    if digits.iter().all(|&d| d == b'0') {
        out.push('0');
        return;
    }
    let push_digits = |out: &mut String, ds: &[u8]| ds.iter().for_each(|&d| out.push(d as char));
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                push_digits(out, &digits);
                (digits.len()..int_len).for_each(|_| out.push('0'));
            } else {
                push_digits(out, &digits[..int_len]);
                out.push('.');
                push_digits(out, &digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            (1..-exponent).for_each(|_| out.push('0'));
            push_digits(out, &digits);
        }
    } else {
        push_digits(out, &digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            push_digits(out, &digits[1..]);
        }
        out.push('e');
        out.push_str(&exponent.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits a printed literal into its number text and suffix.
    fn split(text: &str) -> (&str, &str) {
        let at = text.find('f').unwrap_or(text.len());
        text.split_at(at)
    }

    fn f32_text(v: f32) -> String {
        let mut s = String::new();
        push_f32(&mut s, v);
        s
    }

    fn f64_text(v: f64) -> String {
        let mut s = String::new();
        push_f64(&mut s, v, FloatWidth::F64);
        s
    }

    fn f16_text(bits: u16) -> String {
        let mut s = String::new();
        push_f16(&mut s, bits);
        s
    }

    /// Checks the literal shape the lexer expects: `-?DIGITS[.DIGITS][e-?DIGITS]`.
    fn assert_lexes(number: &str) {
        let body = number.strip_prefix('-').unwrap_or(number);
        let (mant, exp) = body.split_once('e').unwrap_or((body, "0"));
        let (int, frac) = mant.split_once('.').unwrap_or((mant, "0"));
        assert!(
            !int.is_empty() && int.bytes().all(|b| b.is_ascii_digit()),
            "{number}"
        );
        assert!(
            !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()),
            "{number}"
        );
        let exp = exp.strip_prefix('-').unwrap_or(exp);
        assert!(
            !exp.is_empty() && exp.bytes().all(|b| b.is_ascii_digit()),
            "{number}"
        );
    }

    #[test]
    fn spellings() {
        assert_eq!(f32_text(0.1), "0.1f");
        assert_eq!(f32_text(1.5), "1.5f");
        assert_eq!(f32_text(3.0), "3f");
        assert_eq!(f32_text(-2.0), "-2f");
        assert_eq!(f32_text(1e-5), "1e-5f");
        assert_eq!(f32_text(0.0001), "0.0001f");
        assert_eq!(f32_text(1.5e20), "1.5e20f");
        assert_eq!(f32_text(1e15), "1000000000000000f");
        assert_eq!(f32_text(3.4028235e38), "3.4028235e38f");
        assert_eq!(f32_text(0.0), "0f");
        assert_eq!(f32_text(-0.0), "-0f");
        assert_eq!(f32_text(f32::NAN), "nanf");
        assert_eq!(f32_text(-f32::NAN), "nanf");
        assert_eq!(f32_text(f32::INFINITY), "inff");
        assert_eq!(f32_text(f32::NEG_INFINITY), "-inff");
        assert_eq!(f64_text(0.1), "0.1f64");
        assert_eq!(f64_text(f64::NEG_INFINITY), "-inff64");
        assert_eq!(f64_text(f64::NAN), "nanf64");
        assert_eq!(f16_text(0x7e00), "nanf16");
        assert_eq!(f16_text(0x7c00), "inff16");
        assert_eq!(f16_text(0xfc00), "-inff16");
        assert_eq!(f16_text(f32_to_f16_bits(0.1)), "0.1f16");
        assert_eq!(f16_text(f32_to_f16_bits(1.5)), "1.5f16");
        // The shortest digits that read back as the largest half (65504).
        assert_eq!(f16_text(f32_to_f16_bits(65504.0)), "65500f16");
        assert_eq!(f16_text(0x8000), "-0f16");
        let mut attr = String::new();
        push_f64(&mut attr, 1e-5, FloatWidth::F32);
        assert_eq!(attr, "1e-5f");
    }

    #[test]
    fn f32_round_trips_exactly() {
        let samples = [
            0.1f32,
            1e-5,
            3.4028235e38,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::EPSILON,
            -0.0,
            0.0,
            1.0 / 3.0,
            123_456_790.0,
            16_777_217.0,
            9.999_999e15,
            1e16,
            -7.25e-3,
        ];
        let mut state = 0x1234_5678u32;
        let random = (0..20_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            f32::from_bits(state)
        });
        for v in samples.into_iter().chain(random).filter(|v| v.is_finite()) {
            let text = f32_text(v);
            let (number, suffix) = split(&text);
            assert_eq!(suffix, "f", "{text}");
            assert_lexes(number);
            let back: f32 = number.parse().unwrap_or(f32::NAN);
            assert_eq!(back.to_bits(), v.to_bits(), "{text}");
            // Reading the digits as f64 and narrowing gives the same value too.
            let wide: f64 = number.parse().unwrap_or(f64::NAN);
            assert_eq!((wide as f32).to_bits(), v.to_bits(), "{text}");
        }
    }

    #[test]
    fn f64_round_trips_exactly() {
        let samples = [
            0.1f64,
            1e-5,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            -0.0,
            std::f64::consts::PI,
            1e300,
            2.5e-300,
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let random = (0..20_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f64::from_bits(state)
        });
        for v in samples.into_iter().chain(random).filter(|v| v.is_finite()) {
            let text = f64_text(v);
            let (number, suffix) = split(&text);
            assert_eq!(suffix, "f64", "{text}");
            assert_lexes(number);
            let back: f64 = number.parse().unwrap_or(f64::NAN);
            assert_eq!(back.to_bits(), v.to_bits(), "{text}");
        }
    }

    #[test]
    fn every_half_round_trips() {
        for bits in 0..=u16::MAX {
            let v = f16_bits_to_f32(bits);
            if v.is_nan() {
                assert_eq!(f32_to_f16_bits(v) & 0x7e00, 0x7e00);
                continue;
            }
            assert_eq!(f32_to_f16_bits(v), bits, "{bits:#06x}");
            if v.is_infinite() {
                continue;
            }
            let text = f16_text(bits);
            let (number, suffix) = split(&text);
            assert_eq!(suffix, "f16", "{text}");
            assert_lexes(number);
            let back: f64 = number.parse().unwrap_or(f64::NAN);
            assert_eq!(f64_to_f16_bits(back), bits, "{text}");
        }
    }

    #[test]
    fn half_rounding() {
        // Ties go to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
        assert_eq!(f64_to_f16_bits(1.0 + 2f64.powi(-11)), 0x3c00);
        assert_eq!(f64_to_f16_bits(1.0 + 3.0 * 2f64.powi(-11)), 0x3c02);
        assert_eq!(f64_to_f16_bits(65504.0), 0x7bff);
        assert_eq!(f64_to_f16_bits(65519.99), 0x7bff);
        assert_eq!(f64_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f64_to_f16_bits(-1e10), 0xfc00);
        // The smallest subnormal is 2^-24; half of it rounds to zero (even), a bit more rounds up.
        assert_eq!(f64_to_f16_bits(2f64.powi(-24)), 0x0001);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25)), 0x0000);
        assert_eq!(f64_to_f16_bits(2f64.powi(-25) * 1.0001), 0x0001);
        assert_eq!(f64_to_f16_bits(1e-300), 0x0000);
        assert_eq!(f64_to_f16_bits(-1e-300), 0x8000);
        // Rounding up out of the subnormals gives the smallest normal.
        assert_eq!(
            f64_to_f16_bits(2f64.powi(-14) * (1.0 - 2f64.powi(-12))),
            0x0400
        );
        assert_eq!(f16_bits_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_bits_to_f32(0x3555), 0.333_251_95);
        assert!(f16_bits_to_f32(0x7e00).is_nan());
    }
}
