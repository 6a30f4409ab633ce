//! Inline float math: `exp`, `log`, `tanh`, `sigmoid` and `erf` of `float32` as branch-free
//! Cranelift IR, for a scalar (`f32`) and for a vector (`f32x4`) alike, instead of a host call
//! per lane; `power(x, c)` with a small constant exponent as multiplications; `rsqrt` of a
//! vector. Every function is within 2 ulp of the correctly rounded result (SPEC §4), tested on
//! every `float32` of wide ranges (`codegen/vmath_tests.rs`).
//!
//! The method is Cephes' (S. L. Moshier, *Methods and Programs for Mathematical Functions*,
//! 1989), as SLEEF and most vector libraries use it:
//! - **exp**: Cody–Waite range reduction `x = k ln2 + r`, `|r| <= ln2/2`, with `ln2` split in a
//!   head of 9 bits (so `k * head` is exact) and a tail; `k` rounded with the magic number
//!   `1.5 * 2^23` (adding it leaves `k` in the low mantissa bits, read back through a bitcast);
//!   `e^r = 1 + r + r^2 P(r)`; `2^k` built in the exponent field by integer vector ops, in two
//!   factors `2^(k/2) 2^(k - k/2)` so that subnormal results are rounded once and `exp(88.7)`
//!   does not overflow early. The input is clamped to `[-104, 89]` (the results there are 0
//!   and infinity) by comparisons and selects, which keep NaN (Cranelift's `fmax`/`fmin`
//!   order zeros and propagate NaN: six x86 instructions each).
//! - **log**: `x = 2^e m` read from the bits (subnormals scaled by `2^23` first),
//!   `m` in `[sqrt(1/2), sqrt(2))`, `log(1 + f) = f - f^2/2 + f^3 P(f)`, `e ln2` added in two
//!   parts; selects give `-inf` at ±0, `inf` at `inf`, NaN below 0 and for NaN.
//! - **tanh**: `|x| + |x|^3 P(x^2)` below 0.625, `1 - 2 / (exp(2|x|) + 1)` above (saturating to
//!   1; `2|x|` capped at 40 so that `2^k` is one factor), the sign put back with a bit operation.
//! - **sigmoid**: `e = exp(-|x|)`, then `1 / (1 + e)` for `x >= 0` and `e / (1 + e)` below, so
//!   that tiny results are not lost to `1 / inf`.
//! - **erf**: `|x| + |x| Q(x^2)` below 1, `1 - E(|x| - 2.5)` on `[1, 3.92)` (`E` ≈ `erfc`), 1
//!   from 3.92 on (where `erf` rounds to 1 in `float32`), the sign put back.
//!
//! The coefficients are ours: weighted least-squares fits on 3000 Chebyshev nodes of each
//! interval against 40-digit `mpmath` values (relative error for `exp`, `log`, `tanh`, absolute
//! for the `erf` pieces), rounded to `f32`; the script is in `docs/design.md` (§15, vector
//! math). Near-minimax fits of these degrees leave an approximation error well under the
//! rounding errors of the `f32` evaluation.
//!
//! `float64` `exp` of an `f64x2` is fdlibm's method (`e_exp.c`, Sun Microsystems 1993, under
//! 1 ulp) with its published constants (scalar `float64` `exp` stays a host call: faster).
//! The other `float64` functions keep the host calls: the same 1-ulp bound for `log`, `tanh`,
//! `sigmoid` and `erf` needs more care (extra-precise reductions, several intervals) than the
//! branch-free forms above; `power` is inline for the exponents whose products are correctly
//! rounded (0, ±1, 2, 0.5). `float32` `power` with an integral exponent `|c| <= 4` multiplies in `f64`
//! (`x^2` is exact there, so `x^3` and `x^4` are rounded once in `f64` and once to `f32`, as the
//! reference `powf` in `f64` is), and `rsqrt` of an `f32x4` divides in `f64` as the scalar code
//! does: the same results as the reference up to rare double roundings.

use cranelift_codegen::ir::{ConstantData, Endianness};

use super::*;
use relay_linalg::math::{
    ERF_ONE, ERF_Q, ERF_SPLIT, ERFC_E, EXP_P, LN2_HI, LN2_LO, LOG2E, MAGIC, TANH_CAP, TANH_P,
    TANH_SPLIT,
};

/// `(log(1 + f) - f + f^2/2) / f^3` on `[sqrt(1/2) - 1, sqrt(2) - 1]`.
const LOG_P: [f32; 9] = [
    0.333_333_3,
    -0.249_999_9,
    0.200_007_08,
    -0.166_684_8,
    0.142_499_37,
    -0.124_110_505,
    0.116_615_11,
    -0.115_712_01,
    0.071_497_54,
];
/// `1.5 * 2^52`, [`MAGIC`] for `f64`.
const MAGIC64: f64 = 6_755_399_441_055_744.0;
/// fdlibm's `e_exp.c` constants: `1/ln2`, `ln2` in a head of 32 bits and a tail, and the
/// coefficients of `R(r^2) = r (e^r + 1) / (e^r - 1) - 2 = P1 r^2 + P2 r^4 + ...`.
const INV_LN2_64: f64 = std::f64::consts::LOG2_E;
const LN2_HI_64: f64 = 6.931_471_803_691_238e-1;
const LN2_LO_64: f64 = 1.908_214_929_270_587_7e-10;
const EXP64_P: [f64; 5] = [
    1.666_666_666_666_660_2e-1,
    -2.777_777_777_701_559_3e-3,
    6.613_756_321_437_934e-5,
    -1.653_390_220_546_525_2e-6,
    4.138_136_797_057_238_5e-8,
];

/// The largest `|c|` of `power(x, c)` computed by multiplications.
const MAX_POWER: f64 = 4.0;

/// A float type of an inline computation (`F32`, `F32X4`, ...) and its integer twin.
#[derive(Clone, Copy)]
struct Lanes {
    float: Type,
    int: Type,
}

impl Lanes {
    fn of(float: Type) -> Self {
        let int = Type::int(float.lane_bits() as u16)
            .and_then(|i| i.by(float.lane_count()))
            .unwrap_or(types::I32);
        Lanes { float, int }
    }

    fn vector(self) -> bool {
        self.float.is_vector()
    }
}

/// A shift's kind.
#[derive(Clone, Copy)]
enum Shift {
    Left,
    Logical,
    Arithmetic,
}

/// Whether `op` of `d` is computed inline rather than by a host call.
/// `float64`: `exp` of an `f64x2` only — a scalar `f64` `exp` inline (with its division) is
/// slower than the host's table-driven one (`nn.softmax` of 12x128x128, whose `float64` loops
/// run per lane: 3.25 ms against 2.83 ms).
pub(super) fn inline_unary(op: UnaryOp, d: DType, vector: bool) -> bool {
    match d {
        DType::F32 => matches!(
            op,
            UnaryOp::Exp | UnaryOp::Log | UnaryOp::Tanh | UnaryOp::Sigmoid | UnaryOp::Erf
        ),
        DType::F64 => op == UnaryOp::Exp && vector,
        _ => false,
    }
}

/// The exponent `c` of `power(x, c)` when the power is computed by multiplications for `d`:
/// an integer with `|c| <= 4` or 0.5 for `float32`; 0, ±1, 2 or 0.5 for `float64` (whose
/// products are then rounded once).
pub(super) fn inline_power(exponent: &LExpr, d: DType) -> Option<f64> {
    let c = match exponent {
        LExpr::Float(c, cd) if *cd == d => *c,
        LExpr::Int(c, cd) if *cd == d => *c as f64,
        _ => return None,
    };
    let ok = match d {
        DType::F32 => (c.fract() == 0.0 && c.abs() <= MAX_POWER) || c == 0.5,
        DType::F64 => [0.0, 1.0, -1.0, 2.0, 0.5].contains(&c),
        _ => false,
    };
    ok.then_some(c)
}

impl Gen<'_, '_> {
    /// `op(x)` for an `op` of [`inline_unary`], `x` an `f32` or an `f32x4`.
    pub(super) fn unary_inline(&mut self, op: UnaryOp, x: Value) -> R<Value> {
        let t = Lanes::of(self.b.func.dfg.value_type(x));
        Ok(match op {
            UnaryOp::Exp if t.float.lane_type() == types::F64 => self.exp_f64(t, x),
            UnaryOp::Exp => self.exp_f32(t, x),
            UnaryOp::Log => self.log_f32(t, x),
            UnaryOp::Tanh => self.tanh_f32(t, x),
            UnaryOp::Sigmoid => self.sigmoid_f32(t, x),
            UnaryOp::Erf => self.erf_f32(t, x),
            _ => return Err(self.malformed(format!("{op:?} computed inline"))),
        })
    }

    /// `power(x, c)` for a `c` of [`inline_power`], `x` a scalar or a vector of `d`.
    pub(super) fn power_inline(&mut self, x: Value, c: f64, d: DType) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        if d == DType::F64 {
            return self.power_f64(x, c);
        }
        if ty.is_vector() {
            self.via_f64_halves(x, |g, v| g.power_f64(v, c))
        } else {
            let wide = self.b.ins().fpromote(types::F64, x);
            let r = self.power_f64(wide, c);
            self.b.ins().fdemote(types::F32, r)
        }
    }

    /// `1 / sqrt(x)` of an `f32x4` (in `f64`, as the scalar code) or an `f64x2`.
    pub(super) fn rsqrt_vector(&mut self, x: Value) -> Value {
        let rsqrt = |g: &mut Self, v: Value| {
            let t = Lanes::of(g.b.func.dfg.value_type(v));
            let s = g.b.ins().sqrt(v);
            let one = g.fconst(t, 1.0);
            g.b.ins().fdiv(one, s)
        };
        if self.b.func.dfg.value_type(x) == types::F32X4 {
            self.via_f64_halves(x, rsqrt)
        } else {
            rsqrt(self, x)
        }
    }

    /// `x^c` of an `f64` or `f64x2` by multiplications (`c` integral, `|c| <= 4`) or `sqrt`
    /// (`c = 0.5`, with `pow`'s `+0` at `-0` and `inf` at `-inf`).
    fn power_f64(&mut self, x: Value, c: f64) -> Value {
        let t = Lanes::of(self.b.func.dfg.value_type(x));
        if c == 0.5 {
            let s = self.b.ins().sqrt(x);
            let zero = self.fconst(t, 0.0);
            let s = self.b.ins().fadd(s, zero);
            let ninf = self.fconst(t, f64::NEG_INFINITY);
            let inf = self.fconst(t, f64::INFINITY);
            let is_ninf = self.b.ins().fcmp(FloatCC::Equal, x, ninf);
            return self.sel(t, is_ninf, inf, s);
        }
        let n = c.abs() as u32;
        let p = match n {
            0 => self.fconst(t, 1.0),
            1 => x,
            2 => self.b.ins().fmul(x, x),
            3 => {
                let x2 = self.b.ins().fmul(x, x);
                self.b.ins().fmul(x2, x)
            }
            _ => {
                let x2 = self.b.ins().fmul(x, x);
                self.b.ins().fmul(x2, x2)
            }
        };
        if c < 0.0 {
            let one = self.fconst(t, 1.0);
            self.b.ins().fdiv(one, p)
        } else {
            p
        }
    }

    /// `f` applied to an `f32x4` as two `f64x2` halves, the results rounded back to `f32`.
    fn via_f64_halves(&mut self, x: Value, f: impl Fn(&mut Self, Value) -> Value) -> Value {
        let little = MemFlagsData::new().with_endianness(Endianness::Little);
        let lo = self.b.ins().fvpromote_low(x);
        let bytes = self.b.ins().bitcast(types::I8X16, little, x);
        let high_down: Vec<u8> = (8..16).chain(8..16).collect();
        let mask = self.shuffle_mask(high_down);
        let hi = self.b.ins().shuffle(bytes, bytes, mask);
        let hi = self.b.ins().bitcast(types::F32X4, little, hi);
        let hi = self.b.ins().fvpromote_low(hi);
        let (rlo, rhi) = (f(self, lo), f(self, hi));
        let (rlo, rhi) = (self.b.ins().fvdemote(rlo), self.b.ins().fvdemote(rhi));
        let (blo, bhi) = (
            self.b.ins().bitcast(types::I8X16, little, rlo),
            self.b.ins().bitcast(types::I8X16, little, rhi),
        );
        let low_halves: Vec<u8> = (0..8).chain(16..24).collect();
        let mask = self.shuffle_mask(low_halves);
        let r = self.b.ins().shuffle(blo, bhi, mask);
        self.b.ins().bitcast(types::F32X4, little, r)
    }

    fn shuffle_mask(&mut self, bytes: Vec<u8>) -> cranelift_codegen::ir::Immediate {
        self.b.func.dfg.immediates.push(ConstantData::from(bytes))
    }

    // ----- The float32 functions -----

    /// `e^x`.
    fn exp_f32(&mut self, t: Lanes, x: Value) -> Value {
        let (lo, hi) = (self.fconst(t, -104.0), self.fconst(t, 89.0));
        let x = self.clamp(t, x, lo, hi);
        self.exp_f32_clamped(t, x, true)
    }

    /// `e^x` for `x` in `[-104, 89]` (or NaN); `2^k` built in two factors when `split` (for
    /// results that are subnormal or near overflow), in one when `|k| <= 126` is known.
    fn exp_f32_clamped(&mut self, t: Lanes, x: Value, split: bool) -> Value {
        // k = round(x log2 e) as a float and as an integer.
        let (log2e, magic) = (self.fconst(t, LOG2E.into()), self.fconst(t, MAGIC.into()));
        let kx = self.b.ins().fmul(x, log2e);
        let km = self.b.ins().fadd(kx, magic);
        let k = self.b.ins().fsub(km, magic);
        let km_bits = self.bits_of(t, km);
        let magic_bits = self.iconst_lanes(t, i64::from(MAGIC.to_bits()));
        let n = self.b.ins().isub(km_bits, magic_bits);
        // r = x - k ln2 (Cody–Waite; `k LN2_HI` is exact).
        let (c1, c2) = (
            self.fconst(t, (-LN2_HI).into()),
            self.fconst(t, (-LN2_LO).into()),
        );
        let r = self.mul_add(k, c1, x);
        let r = self.mul_add(k, c2, r);
        // e^r = 1 + r + r^2 P(r).
        let p = self.poly(t, r, &EXP_P);
        let r2 = self.b.ins().fmul(r, r);
        let y = self.mul_add(p, r2, r);
        let one = self.fconst(t, 1.0);
        let y = self.b.ins().fadd(y, one);
        if !split {
            let s = self.pow2(t, n);
            return self.b.ins().fmul(y, s);
        }
        // y 2^(n/2) 2^(n - n/2).
        let n1 = self.shift(n, 1, Shift::Arithmetic);
        let n2 = self.b.ins().isub(n, n1);
        let s1 = self.pow2(t, n1);
        let s2 = self.pow2(t, n2);
        let y = self.b.ins().fmul(y, s1);
        self.b.ins().fmul(y, s2)
    }

    /// `2^n` for an integer `n` (lanes) in `[-126, 127]`, through the exponent field.
    fn pow2(&mut self, t: Lanes, n: Value) -> Value {
        let bias = self.iconst_lanes(t, 127);
        let e = self.b.ins().iadd(n, bias);
        let e = self.shift(e, 23, Shift::Left);
        self.float_of(t, e)
    }

    /// `e^x` of `f64` lanes, by fdlibm's method (`e_exp.c`, under 1 ulp): `x = k ln2 + r`
    /// (Cody–Waite, `r = hi - lo`), `c = r - r^2 R(r^2)`,
    /// `e^r = 1 - ((lo - r c / (2 - c)) - hi)`, scaled by `2^k` in two factors as in
    /// [`Self::exp_f32`]; the input clamped to `[-746, 710]`.
    fn exp_f64(&mut self, t: Lanes, x: Value) -> Value {
        let (lo, hi) = (self.fconst(t, -746.0), self.fconst(t, 710.0));
        let x = self.clamp(t, x, lo, hi);
        let (inv_ln2, magic) = (self.fconst(t, INV_LN2_64), self.fconst(t, MAGIC64));
        let kx = self.b.ins().fmul(x, inv_ln2);
        let km = self.b.ins().fadd(kx, magic);
        let k = self.b.ins().fsub(km, magic);
        let km_bits = self.bits_of(t, km);
        let magic_bits = self.iconst_lanes(t, MAGIC64.to_bits() as i64);
        let n = self.b.ins().isub(km_bits, magic_bits);
        // hi - lo = x - k ln2.
        let (c1, c2) = (self.fconst(t, LN2_HI_64), self.fconst(t, LN2_LO_64));
        let kc1 = self.b.ins().fmul(k, c1);
        let hi = self.b.ins().fsub(x, kc1);
        let lo = self.b.ins().fmul(k, c2);
        let r = self.b.ins().fsub(hi, lo);
        // c = r - r^2 (P1 + r^2 (P2 + ...)).
        let r2 = self.b.ins().fmul(r, r);
        let p = self.poly64(t, r2, &EXP64_P);
        let p = self.b.ins().fmul(r2, p);
        let c = self.b.ins().fsub(r, p);
        // 1 - ((lo - r c / (2 - c)) - hi).
        let (one, two) = (self.fconst(t, 1.0), self.fconst(t, 2.0));
        let rc = self.b.ins().fmul(r, c);
        let d = self.b.ins().fsub(two, c);
        let q = self.b.ins().fdiv(rc, d);
        let y = self.b.ins().fsub(lo, q);
        let y = self.b.ins().fsub(y, hi);
        let y = self.b.ins().fsub(one, y);
        // 2^n1 2^n2, n1 = floor(n / 2) (n + 2048 >= 0 shifted logically).
        let bias = self.iconst_lanes(t, 2048);
        let nb = self.b.ins().iadd(n, bias);
        let half = self.shift(nb, 1, Shift::Logical);
        let unbias = self.iconst_lanes(t, 1024);
        let n1 = self.b.ins().isub(half, unbias);
        let n2 = self.b.ins().isub(n, n1);
        let s1 = self.pow2_64(t, n1);
        let s2 = self.pow2_64(t, n2);
        let y = self.b.ins().fmul(y, s1);
        self.b.ins().fmul(y, s2)
    }

    /// `2^n` of `i64` lanes `n` in `[-1022, 1023]`.
    fn pow2_64(&mut self, t: Lanes, n: Value) -> Value {
        let bias = self.iconst_lanes(t, 1023);
        let e = self.b.ins().iadd(n, bias);
        let e = self.shift(e, 52, Shift::Left);
        self.float_of(t, e)
    }

    /// The natural logarithm.
    fn log_f32(&mut self, t: Lanes, x: Value) -> Value {
        // Subnormals: scaled by 2^23 into the normal range.
        let min_normal = self.fconst(t, f32::MIN_POSITIVE.into());
        let tiny = self.b.ins().fcmp(FloatCC::LessThan, x, min_normal);
        let scale = self.fconst(t, 8_388_608.0);
        let scaled = self.b.ins().fmul(x, scale);
        let xs = self.sel(t, tiny, scaled, x);
        let (bias, bias_tiny) = (self.fconst(t, 127.0), self.fconst(t, 150.0));
        let bias = self.sel(t, tiny, bias_tiny, bias);
        // x = 2^e m, m in [1, 2).
        let bits = self.bits_of(t, xs);
        let biased = self.shift(bits, 23, Shift::Logical);
        let biased = self.b.ins().fcvt_from_sint(t.float, biased);
        let e = self.b.ins().fsub(biased, bias);
        let mantissa_mask = self.iconst_lanes(t, 0x007f_ffff);
        let mantissa = self.b.ins().band(bits, mantissa_mask);
        let one_bits = self.iconst_lanes(t, 0x3f80_0000);
        let m = self.b.ins().bor(mantissa, one_bits);
        let m = self.float_of(t, m);
        // m in [sqrt(1/2), sqrt(2)).
        let sqrt2 = self.fconst(t, std::f64::consts::SQRT_2);
        let big = self.b.ins().fcmp(FloatCC::GreaterThan, m, sqrt2);
        let half = self.fconst(t, 0.5);
        let m_half = self.b.ins().fmul(m, half);
        let m = self.sel(t, big, m_half, m);
        let (one, zero) = (self.fconst(t, 1.0), self.fconst(t, 0.0));
        let carry = self.sel(t, big, one, zero);
        let e = self.b.ins().fadd(e, carry);
        // log(1 + f) = f - f^2/2 + f^3 P(f), plus e ln2 in two parts.
        let f = self.b.ins().fsub(m, one);
        let f2 = self.b.ins().fmul(f, f);
        let p = self.poly(t, f, &LOG_P);
        let f3 = self.b.ins().fmul(f2, f);
        let y = self.b.ins().fmul(f3, p);
        let c2 = self.fconst(t, LN2_LO.into());
        let ec2 = self.b.ins().fmul(e, c2);
        let y = self.b.ins().fadd(y, ec2);
        let half_f2 = self.b.ins().fmul(f2, half);
        let y = self.b.ins().fsub(y, half_f2);
        let r = self.b.ins().fadd(f, y);
        let c1 = self.fconst(t, LN2_HI.into());
        let ec1 = self.b.ins().fmul(e, c1);
        let r = self.b.ins().fadd(r, ec1);
        // log(inf) = inf, log(±0) = -inf, log(x < 0) = log(NaN) = NaN.
        let (inf, ninf) = (
            self.fconst(t, f64::INFINITY),
            self.fconst(t, f64::NEG_INFINITY),
        );
        let nan = self.fconst(t, f64::NAN);
        let is_inf = self.b.ins().fcmp(FloatCC::Equal, x, inf);
        let r = self.sel(t, is_inf, inf, r);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let r = self.sel(t, is_zero, ninf, r);
        let invalid = self.b.ins().fcmp(FloatCC::UnorderedOrLessThan, x, zero);
        self.sel(t, invalid, nan, r)
    }

    /// The hyperbolic tangent.
    fn tanh_f32(&mut self, t: Lanes, x: Value) -> Value {
        let a = self.b.ins().fabs(x);
        // Small: a + a^3 P(a^2).
        let a2 = self.b.ins().fmul(a, a);
        let p = self.poly(t, a2, &TANH_P);
        let a3 = self.b.ins().fmul(a2, a);
        let small = self.b.ins().fmul(a3, p);
        let small = self.b.ins().fadd(a, small);
        // Large: 1 - 2 / (e^(2a) + 1), with 2a clamped to 40 (tanh rounds to 1 from a = 9.01
        // on), so that `2^k` is one factor.
        let two_a = self.b.ins().fadd(a, a);
        let cap = self.fconst(t, TANH_CAP.into());
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, two_a, cap);
        let two_a = self.sel(t, above, cap, two_a);
        let e = self.exp_f32_clamped(t, two_a, false);
        let (one, two) = (self.fconst(t, 1.0), self.fconst(t, 2.0));
        let d = self.b.ins().fadd(e, one);
        let q = self.b.ins().fdiv(two, d);
        let large = self.b.ins().fsub(one, q);
        let split = self.fconst(t, TANH_SPLIT.into());
        let is_small = self.b.ins().fcmp(FloatCC::LessThan, a, split);
        let r = self.sel(t, is_small, small, large);
        self.copy_sign(t, r, x)
    }

    /// The logistic function `1 / (1 + e^-x)`.
    fn sigmoid_f32(&mut self, t: Lanes, x: Value) -> Value {
        let a = self.b.ins().fabs(x);
        let na = self.b.ins().fneg(a);
        let e = self.exp_f32(t, na);
        let (one, zero) = (self.fconst(t, 1.0), self.fconst(t, 0.0));
        let negative = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
        let num = self.sel(t, negative, e, one);
        let d = self.b.ins().fadd(one, e);
        self.b.ins().fdiv(num, d)
    }

    /// The error function.
    fn erf_f32(&mut self, t: Lanes, x: Value) -> Value {
        let a = self.b.ins().fabs(x);
        // Small: a + a Q(a^2).
        let a2 = self.b.ins().fmul(a, a);
        let q = self.poly(t, a2, &ERF_Q);
        let aq = self.b.ins().fmul(a, q);
        let small = self.b.ins().fadd(a, aq);
        // Large: 1 - erfc(a).
        let center = self.fconst(t, 2.5);
        let u = self.b.ins().fsub(a, center);
        let ec = self.poly(t, u, &ERFC_E);
        let one = self.fconst(t, 1.0);
        let large = self.b.ins().fsub(one, ec);
        let split = self.fconst(t, ERF_SPLIT.into());
        let is_small = self.b.ins().fcmp(FloatCC::LessThan, a, split);
        let r = self.sel(t, is_small, small, large);
        let limit = self.fconst(t, ERF_ONE.into());
        let saturated = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, a, limit);
        let r = self.sel(t, saturated, one, r);
        self.copy_sign(t, r, x)
    }

    // ----- Helpers -----

    /// `c[0] + c[1] x + c[2] x^2 + ...` by Estrin's scheme: pairs `c[2j] + c[2j+1] x`, then
    /// pairs of those in `x^2`, in `x^4`, ... A polynomial of degree `n` is a chain of about
    /// `2 log2(n)` dependent operations instead of Horner's `2n` (the same count of
    /// operations): the kernels are bound by that latency, not by the operations' throughput
    /// (`erf`'s degree-15 piece: 96 cycles of latency per vector with Horner's rule).
    fn poly(&mut self, t: Lanes, x: Value, c: &[f32]) -> Value {
        let c: Vec<f64> = c.iter().map(|&k| f64::from(k)).collect();
        self.poly64(t, x, &c)
    }

    /// [`Self::poly`] with `f64` coefficients.
    fn poly64(&mut self, t: Lanes, x: Value, c: &[f64]) -> Value {
        if c.is_empty() {
            return self.fconst(t, 0.0);
        }
        let mut terms: Vec<Value> = c.iter().map(|&k| self.fconst(t, k)).collect();
        let mut power = x;
        let mut first = true;
        while terms.len() > 1 {
            if !first {
                power = self.b.ins().fmul(power, power);
            }
            first = false;
            terms = terms
                .chunks(2)
                .map(|pair| match *pair {
                    [lo, hi] => self.mul_add(hi, power, lo),
                    _ => pair[0],
                })
                .collect();
        }
        terms[0]
    }

    /// `a b + c`: one fused multiply-add where the host has it, else a product and a sum.
    fn mul_add(&mut self, a: Value, b: Value, c: Value) -> Value {
        if self.fma {
            self.b.ins().fma(a, b, c)
        } else {
            let m = self.b.ins().fmul(a, b);
            self.b.ins().fadd(m, c)
        }
    }

    /// A float constant in every lane.
    fn fconst(&mut self, t: Lanes, v: f64) -> Value {
        let s = if t.float.lane_type() == types::F32 {
            self.b.ins().f32const(v as f32)
        } else {
            self.b.ins().f64const(v)
        };
        if t.vector() {
            self.b.ins().splat(t.float, s)
        } else {
            s
        }
    }

    /// An integer constant in every lane of the integer twin.
    fn iconst_lanes(&mut self, t: Lanes, v: i64) -> Value {
        let s = self.b.ins().iconst(t.int.lane_type(), v);
        if t.vector() {
            self.b.ins().splat(t.int, s)
        } else {
            s
        }
    }

    /// `x` shifted by `amount` bits (every lane).
    fn shift(&mut self, x: Value, amount: i64, kind: Shift) -> Value {
        let amount = self.b.ins().iconst(types::I32, amount);
        match kind {
            Shift::Left => self.b.ins().ishl(x, amount),
            Shift::Logical => self.b.ins().ushr(x, amount),
            Shift::Arithmetic => self.b.ins().sshr(x, amount),
        }
    }

    fn bits_of(&mut self, t: Lanes, x: Value) -> Value {
        self.b.ins().bitcast(t.int, MemFlagsData::new(), x)
    }

    fn float_of(&mut self, t: Lanes, x: Value) -> Value {
        self.b.ins().bitcast(t.float, MemFlagsData::new(), x)
    }

    /// `cond ? a : b` per lane, `cond` a comparison result (an `i8` or a lane mask).
    fn sel(&mut self, t: Lanes, cond: Value, a: Value, b: Value) -> Value {
        if t.vector() {
            let mask = self.float_of(t, cond);
            self.b.ins().bitselect(mask, a, b)
        } else {
            self.b.ins().select(cond, a, b)
        }
    }

    /// `x` clamped to `[lo, hi]`, NaN kept: `x < lo ? lo : x`, then `x > hi ? hi : x`.
    fn clamp(&mut self, t: Lanes, x: Value, lo: Value, hi: Value) -> Value {
        let below = self.b.ins().fcmp(FloatCC::LessThan, x, lo);
        let x = self.sel(t, below, lo, x);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, hi);
        self.sel(t, above, hi, x)
    }

    /// `r` (not negative) with the sign of `x`.
    fn copy_sign(&mut self, t: Lanes, r: Value, x: Value) -> Value {
        let xb = self.bits_of(t, x);
        let sign_mask = self.iconst_lanes(t, i64::from(i32::MIN));
        let sign = self.b.ins().band(xb, sign_mask);
        let rb = self.bits_of(t, r);
        let rb = self.b.ins().bor(rb, sign);
        self.float_of(t, rb)
    }
}
