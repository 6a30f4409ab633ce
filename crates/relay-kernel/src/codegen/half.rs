//! Inline `float16` conversions: branch-free Cranelift integer code (shifts, masks, compares and
//! selects, plus one float add or multiply), bit-exact with the host rules of
//! `relay_runtime::half` ([`math::f16_to_f32`](crate::math::f16_to_f32),
//! [`math::f32_to_f16`](crate::math::f32_to_f16), [`math::f64_to_f16`](crate::math::f64_to_f16)).
//! Each function works on a scalar or on a vector of the same lane width (`i32`/`f32` or
//! `i32x4`/`f32x4`; `i64`/`f64` or `i64x2`/`f64x2`), the `float16` bits held zero-extended in the
//! integer lanes; narrowing to `i16` is the caller's.
//!
//! - `float16 → f32` (exact): a normal half is its bits shifted to the `f32` positions with the
//!   exponent rebiased (`+ (127 - 15) << 23`); infinities and NaNs keep their payload under an
//!   all-ones exponent (a signalling NaN stays signalling, as the host function); a subnormal is
//!   `mantissa * 2^-24`, exact in `f32`.
//! - `f32`/`f64 → float16` (one rounding, to nearest, ties to even): a normal result rebias the
//!   exponent and rounds the dropped mantissa bits with the classic
//!   `(a + (half - 1) + lsb) >> shift` (a carry ripples into the exponent, which is right, and
//!   into infinity only above the overflow threshold, handled apart); a subnormal result adds
//!   the magic constant whose unit in the last place is `2^-24` (`0.5` in `f32`, `2^28` in
//!   `f64`): the hardware's own round-to-nearest-even then leaves the subnormal's bits in the
//!   low mantissa (a carry to `0x400` is the smallest normal, which has exactly that encoding);
//!   magnitudes from 65520 (the tie between 65504 and 2^16, which rounds to even, upward) are
//!   infinity; a NaN becomes a quiet NaN with its sign and the high 10 payload bits.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value, types};
use cranelift_frontend::FunctionBuilder;

use super::Gen;

/// An integer constant of `ty` (splatted for a vector), `v` truncated to the lane width.
fn konst(b: &mut FunctionBuilder, ty: Type, v: i64) -> Value {
    let lane = ty.lane_type();
    let v = if lane.bits() < 64 {
        v & ((1i64 << lane.bits()) - 1)
    } else {
        v
    };
    let c = b.ins().iconst(lane, v);
    if ty.is_vector() {
        b.ins().splat(ty, c)
    } else {
        c
    }
}

/// A float constant of `ty` (`f32`/`f64` or a vector of them).
fn fkonst(b: &mut FunctionBuilder, ty: Type, v: f64) -> Value {
    let c = if ty.lane_type() == types::F32 {
        b.ins().f32const(v as f32)
    } else {
        b.ins().f64const(v)
    };
    if ty.is_vector() {
        b.ins().splat(ty, c)
    } else {
        c
    }
}

/// `x & mask`, `x` of an integer type.
fn and(b: &mut FunctionBuilder, x: Value, mask: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let m = konst(b, ty, mask);
    b.ins().band(x, m)
}

/// `x + c`, wrapping.
fn add(b: &mut FunctionBuilder, x: Value, c: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let k = konst(b, ty, c);
    b.ins().iadd(x, k)
}

/// `x >= c` (signed: every compared value is a non-negative magnitude), as a select condition.
fn at_least(b: &mut FunctionBuilder, x: Value, c: i64) -> Value {
    let ty = b.func.dfg.value_type(x);
    let k = konst(b, ty, c);
    b.ins().icmp(IntCC::SignedGreaterThanOrEqual, x, k)
}

/// `cond ? x : y`: `select` for scalars, `bitselect` with the comparison mask for vectors.
fn sel(b: &mut FunctionBuilder, cond: Value, x: Value, y: Value) -> Value {
    if b.func.dfg.value_type(x).is_vector() {
        b.ins().bitselect(cond, x, y)
    } else {
        b.ins().select(cond, x, y)
    }
}

/// `lane` (a 32-bit type) as a scalar when `like` is one, else in four lanes like it.
fn shaped_like(like: Type, lane: Type) -> Type {
    if like.is_vector() {
        lane.by(4).unwrap_or(lane)
    } else {
        lane
    }
}

fn bitcast(b: &mut FunctionBuilder, ty: Type, x: Value) -> Value {
    b.ins().bitcast(ty, MemFlagsData::new(), x)
}

/// `float16` bits (zero-extended in `i32` or `i32x4` lanes) → the equal `f32` (or `f32x4`).
pub(super) fn f16_to_f32(b: &mut FunctionBuilder, h: Value) -> Value {
    let ity = b.func.dfg.value_type(h);
    let fty = shaped_like(ity, types::F32);
    let sign = and(b, h, 0x8000);
    let sign = b.ins().ishl_imm_u(sign, 16);
    let abs = and(b, h, 0x7fff);
    let shifted = b.ins().ishl_imm_u(abs, 13);
    let normal = add(b, shifted, (127 - 15) << 23);
    let special = konst(b, ity, 0x7f80_0000);
    let special = b.ins().bor(shifted, special);
    // Subnormal (or zero): `abs` is the mantissa; `abs * 2^-24` is exact.
    let m = b.ins().fcvt_from_sint(fty, abs);
    let scale = fkonst(b, fty, f64::from(f32::from_bits(0x3380_0000)));
    let sub = b.ins().fmul(m, scale);
    let sub = bitcast(b, ity, sub);
    let exp = and(b, h, 0x7c00);
    let is_special = at_least(b, exp, 0x7c00);
    let mag = sel(b, is_special, special, normal);
    let is_normal = at_least(b, exp, 0x0400);
    let mag = sel(b, is_normal, mag, sub);
    let bits = b.ins().bor(mag, sign);
    bitcast(b, fty, bits)
}

/// `f32` (or `f32x4`) `x` rounded to the nearest `float16` value, ties to even, and widened
/// back — `f16_to_f32(to_f16(x))` bit for bit, without the detour through the `float16`
/// bits (what every float16 operation computed in `f32` does before the next one reads its
/// result). The hardware rounds: adding `M = ±2^(E+13)`, `E` the exponent of `x` clamped to
/// float16's `-14..=15`, leaves `x` rounded to a multiple of `2^(E-10)` — float16's quantum
/// at that exponent, `2^-24` for its subnormals — ties to even, and subtracting `M` is exact.
/// A negative `x` that rounds to zero keeps its sign; magnitudes above 65504 after rounding
/// are infinity (65520 rounds to even, upward); a NaN is quiet with its sign and the high 10
/// payload bits, as the round trip leaves it.
pub(super) fn f32_rounded_to_f16(b: &mut FunctionBuilder, x: Value) -> Value {
    let fty = b.func.dfg.value_type(x);
    let ity = shaped_like(fty, types::I32);
    let bits = bitcast(b, ity, x);
    let sign = and(b, bits, 0x8000_0000);
    let abs = and(b, bits, 0x7fff_ffff);
    let exp = and(b, abs, 0x7f80_0000);
    let (lo, hi) = ((127 - 14) << 23, (127 + 15) << 23);
    let lo_k = konst(b, ity, lo);
    let above = at_least(b, exp, lo);
    let exp = sel(b, above, exp, lo_k);
    let hi_k = konst(b, ity, hi);
    let above = at_least(b, exp, hi);
    let exp = sel(b, above, hi_k, exp);
    let magic = add(b, exp, 13 << 23);
    let magic = b.ins().bor(magic, sign);
    let magic = bitcast(b, fty, magic);
    let sum = b.ins().fadd(x, magic);
    let r = b.ins().fsub(sum, magic);
    let r = bitcast(b, ity, r);
    let r = b.ins().bor(r, sign);
    let r_abs = and(b, r, 0x7fff_ffff);
    let big = at_least(b, r_abs, i64::from(65504f32.to_bits()) + 1);
    let inf = konst(b, ity, 0x7f80_0000);
    let inf = b.ins().bor(inf, sign);
    let r = sel(b, big, inf, r);
    let is_nan = at_least(b, abs, 0x7f80_0001);
    let nan = and(b, bits, 0xffff_e000);
    let quiet = konst(b, ity, 0x0040_0000);
    let nan = b.ins().bor(nan, quiet);
    let r = sel(b, is_nan, nan, r);
    bitcast(b, fty, r)
}

/// The layout of a binary float format, for the shared rounding code.
struct Format {
    /// Mantissa bits.
    mant: i64,
    /// Exponent bias.
    bias: i64,
    /// The integer type of the same width.
    int: Type,
}

const F32: Format = Format {
    mant: 23,
    bias: 127,
    int: types::I32,
};
const F64: Format = Format {
    mant: 52,
    bias: 1023,
    int: types::I64,
};

/// `f32` or `f64` (or a vector of them) → `float16` bits, zero-extended in lanes of the
/// integer type of the same width, rounded once to nearest, ties to even.
pub(super) fn to_f16(b: &mut FunctionBuilder, x: Value) -> Value {
    let fty = b.func.dfg.value_type(x);
    let f = if fty.lane_type() == types::F32 {
        &F32
    } else {
        &F64
    };
    let ity = if fty.is_vector() {
        f.int.by(fty.lane_count()).unwrap_or(f.int)
    } else {
        f.int
    };
    let width = i64::from(ity.lane_bits());
    let drop = f.mant - 10;
    let bits = bitcast(b, ity, x);
    let sign = b.ins().ushr_imm_u(bits, width - 16);
    let sign = and(b, sign, 0x8000);
    let abs = and(b, bits, i64::MAX >> (64 - width));
    // Normal result: rebias, round the `drop` low bits to nearest even.
    let kept = b.ins().ushr_imm_u(abs, drop);
    let lsb = and(b, kept, 1);
    let rounded = add(b, abs, (1i64 << (drop - 1)) - 1 - ((f.bias - 15) << f.mant));
    let rounded = b.ins().iadd(rounded, lsb);
    let normal = b.ins().ushr_imm_u(rounded, drop);
    // Subnormal result: the hardware rounds `|x| + magic` to a multiple of 2^-24.
    let magic = 2f64.powi(f.mant as i32 - 24);
    let magic_bits = if f.mant == 23 {
        i64::from((magic as f32).to_bits())
    } else {
        magic.to_bits() as i64
    };
    let absf = bitcast(b, fty, abs);
    let m = fkonst(b, fty, magic);
    let sum = b.ins().fadd(absf, m);
    let sum = bitcast(b, ity, sum);
    let sub = add(b, sum, -magic_bits);
    // NaN: quiet, the high 10 payload bits kept.
    let payload = and(b, kept, 0x3ff);
    let nan = konst(b, ity, 0x7e00);
    let nan = b.ins().bor(payload, nan);
    let inf = konst(b, ity, 0x7c00);
    let smallest_normal = (f.bias - 14) << f.mant;
    let overflow = if f.mant == 23 {
        i64::from(65520f32.to_bits())
    } else {
        65520f64.to_bits() as i64
    };
    let inf_bits = (2 * f.bias + 1) << f.mant;
    let is_normal = at_least(b, abs, smallest_normal);
    let r = sel(b, is_normal, normal, sub);
    let is_big = at_least(b, abs, overflow);
    let r = sel(b, is_big, inf, r);
    let is_nan = at_least(b, abs, inf_bits + 1);
    let r = sel(b, is_nan, nan, r);
    b.ins().bor(r, sign)
}

/// Four `float16` lanes of a vectorized loop: the low 64 bits of an `i16x8` (the high lanes
/// are don't-care), loaded and stored as one 64-bit access.
pub(super) const F16_LANES: u32 = 4;

impl Gen<'_, '_> {
    /// Four `float16` values at `addr`, in the low lanes of an `i16x8`.
    pub(super) fn load_f16x4(&mut self, addr: Value) -> Value {
        let bits = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::new().with_notrap(), addr, 0);
        let v = self.b.ins().scalar_to_vector(types::I64X2, bits);
        self.b.ins().bitcast(types::I16X8, little(), v)
    }

    /// Stores the low four lanes of the `i16x8` `v` at `addr`.
    pub(super) fn store_f16x4(&mut self, v: Value, addr: Value) {
        let v = self.b.ins().bitcast(types::I64X2, little(), v);
        let bits = self.b.ins().extractlane(v, 0);
        self.b
            .ins()
            .store(MemFlagsData::new().with_notrap(), bits, addr, 0);
    }

    /// The low four `float16` lanes of an `i16x8` as an `f32x4` (exactly).
    pub(super) fn f16x4_to_f32x4(&mut self, v: Value) -> Value {
        let wide = self.b.ins().uwiden_low(v);
        f16_to_f32(&mut self.b, wide)
    }

    /// An `f32x4` rounded to `float16` (once, to nearest even), in the low lanes of an `i16x8`.
    pub(super) fn f32x4_to_f16x4(&mut self, v: Value) -> Value {
        let bits = to_f16(&mut self.b, v);
        // Every lane holds 0..=0xffff: the unsigned saturating narrow keeps it.
        self.b.ins().unarrow(bits, bits)
    }
}

/// Flags for a bitcast between vector types of different lane counts (x86-64 is little-endian).
fn little() -> MemFlagsData {
    MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little)
}
