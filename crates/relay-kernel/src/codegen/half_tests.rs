//! The inline `float16` conversions (`half.rs`) against the host rules, bit for bit: every
//! `float16` → `f32`/`f64`, `f32`/`f64` → `float16` on strided bit patterns, every rounding
//! boundary (the midpoints between neighbouring `float16` values and their neighbours), the
//! double-rounding traps of `f64`, and NaN payloads; serial and vectorized loops.

use relay_runtime::NDArray;

use super::*;
use crate::loops::{Buffer, BufferRole, Local};
use crate::packed::compile;

/// `out[i] = (to) in[i]` over `n` elements.
pub(super) fn cast_kernel(from: DType, to: DType, n: i64, kind: ForKind) -> LoopFunc {
    let buf = |name: &str, dtype, role| Buffer {
        name: name.into(),
        dtype,
        shape: vec![n],
        role,
    };
    LoopFunc {
        name: "cast_kernel".into(),
        buffers: vec![
            buf("x", from, BufferRole::Input),
            buf("out", to, BufferRole::Output),
        ],
        locals: vec![Local {
            name: "i".into(),
            dtype: DType::I64,
        }],
        body: Stmt::For {
            var: LocalId(0),
            extent: n,
            kind,
            body: Box::new(Stmt::Store {
                buffer: BufferId(1),
                index: LExpr::Local(LocalId(0)),
                value: LExpr::Cast(
                    to,
                    Box::new(LExpr::Load {
                        buffer: BufferId(0),
                        index: Box::new(LExpr::Local(LocalId(0))),
                    }),
                ),
            }),
        },
    }
}

/// Serial, four lanes (`i16x8` halves ↔ `f32x4`, `half.rs`) and eight (per lane).
const KINDS: [ForKind; 3] = [
    ForKind::Serial,
    ForKind::Vectorized { lanes: 4 },
    ForKind::Vectorized { lanes: 8 },
];

/// Runs the cast `from` → `to` on `input` (raw little-endian bytes of `from`), returning the
/// output's bytes.
pub(super) fn cast_bytes(from: DType, to: DType, input: &[u8], kind: ForKind) -> Vec<u8> {
    let n = (input.len() / (from.bits as usize / 8)) as i64;
    let f = compile(&cast_kernel(from, to, n, kind)).unwrap();
    let x = NDArray::from_bytes(from, &[n], input).unwrap();
    let mut out = NDArray::zeros(to, &[n]).unwrap();
    f.call(&[&x], &mut [&mut out]).unwrap();
    out.as_bytes().to_vec()
}

fn f32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|b| b.to_le_bytes()).collect()
}

fn f64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|b| b.to_le_bytes()).collect()
}

fn halves(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// Checks the `f32` → `float16` cast of `bits` (both loop kinds) against the host rule.
fn check_f32(bits: &[u32]) {
    let want: Vec<u16> = bits
        .iter()
        .map(|&b| math::f32_to_f16(f32::from_bits(b)))
        .collect();
    for kind in KINDS {
        let got = halves(&cast_bytes(DType::F32, DType::F16, &f32_bytes(bits), kind));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{:#010x} ({kind:?})", bits[k]);
        }
    }
}

/// Checks the `f64` → `float16` cast of `bits` (both loop kinds) against the host rule.
fn check_f64(bits: &[u64]) {
    let want: Vec<u16> = bits
        .iter()
        .map(|&b| math::f64_to_f16(f64::from_bits(b)))
        .collect();
    for kind in KINDS {
        let got = halves(&cast_bytes(DType::F64, DType::F16, &f64_bytes(bits), kind));
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{:#018x} ({kind:?})", bits[k]);
        }
    }
}

#[test]
fn every_float16_widens_exactly() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let input: Vec<u8> = all.iter().flat_map(|b| b.to_le_bytes()).collect();
    for kind in KINDS {
        let out = cast_bytes(DType::F16, DType::F32, &input, kind);
        for (h, c) in all.iter().zip(out.chunks_exact(4)) {
            let got = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            assert_eq!(got, math::f16_to_f32(*h).to_bits(), "{h:#06x} ({kind:?})");
        }
        let out = cast_bytes(DType::F16, DType::F64, &input, kind);
        for (h, c) in all.iter().zip(out.chunks_exact(8)) {
            let got = f64::from_le_bytes(c.try_into().unwrap());
            let want = f64::from(math::f16_to_f32(*h));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{h:#06x} ({kind:?})"
            );
        }
        // And back: every value round-trips, NaNs stay NaN.
        let back = halves(&cast_bytes(DType::F16, DType::F16, &input, kind));
        assert_eq!(back, all);
    }
}

/// The `f32` bit patterns around every boundary between neighbouring `float16` values of both
/// signs (the midpoint and 3 ulps either side), and around the overflow threshold.
fn f32_boundaries() -> Vec<u32> {
    let mut v = Vec::new();
    for h in 0u16..0x7c00 {
        let lo = f64::from(math::f16_to_f32(h));
        let hi = if h == 0x7bff {
            65536.0
        } else {
            f64::from(math::f16_to_f32(h + 1))
        };
        let mid = ((lo + hi) / 2.0) as f32;
        for d in -3i32..=3 {
            let b = mid.to_bits().wrapping_add_signed(d);
            v.extend([b, b | 0x8000_0000]);
        }
        v.push(math::f16_to_f32(h).to_bits());
    }
    v
}

#[test]
fn float32_narrows_like_the_host_at_every_boundary() {
    check_f32(&f32_boundaries());
    check_f32(&f32_specials());
}

/// NaN payloads, infinities, `f32` subnormals, zeros.
fn f32_specials() -> Vec<u32> {
    let mut special = vec![0x7f80_0000, 0xff80_0000, 0, 0x8000_0000, 1, 0x8000_0001];
    for p in [1u32, 0x1fff, 0x2000, 0x40_0000, 0x3f_ffff, 0x12_3456] {
        special.extend([0x7f80_0000 | p, 0xff80_0000 | p]);
    }
    special
}

#[test]
fn float32_narrows_like_the_host_on_strided_bit_patterns() {
    // Every 4099th bit pattern (a prime stride: every residue of the low bits is visited).
    let bits: Vec<u32> = (0..=u32::MAX).step_by(4099).collect();
    check_f32(&bits);
}

/// Checks `f32 → float16 → f32` of `bits` (every loop kind, rounded in place by
/// `f32_rounded_to_f16`) against the host's round trip.
fn check_round_trip(bits: &[u32]) {
    let n = bits.len() as i64;
    for kind in KINDS {
        let mut func = cast_kernel(DType::F32, DType::F32, n, kind);
        if let Stmt::For { body, .. } = &mut func.body
            && let Stmt::Store { value, .. } = &mut **body
        {
            *value = LExpr::Cast(
                DType::F32,
                Box::new(LExpr::Cast(DType::F16, Box::new(value.clone()))),
            );
        }
        let f = compile(&func).unwrap();
        let x = NDArray::from_bytes(DType::F32, &[n], &f32_bytes(bits)).unwrap();
        let mut out = NDArray::zeros(DType::F32, &[n]).unwrap();
        f.call(&[&x], &mut [&mut out]).unwrap();
        for (c, &b) in out.as_bytes().chunks_exact(4).zip(bits) {
            let got = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let want = math::f16_to_f32(math::f32_to_f16(f32::from_bits(b))).to_bits();
            assert_eq!(got, want, "{b:#010x} ({kind:?})");
        }
    }
}

#[test]
fn float32_rounds_to_float16_in_place_like_the_round_trip() {
    check_round_trip(&f32_boundaries());
    check_round_trip(&f32_specials());
    let strided: Vec<u32> = (0..=u32::MAX).step_by(4099).collect();
    check_round_trip(&strided);
}

#[test]
fn float64_narrows_like_the_host_at_ties_and_double_rounding_traps() {
    let mut v = Vec::new();
    for h in 0u16..0x7c00 {
        let lo = f64::from(math::f16_to_f32(h));
        let hi = if h == 0x7bff {
            65536.0
        } else {
            f64::from(math::f16_to_f32(h + 1))
        };
        let mid = (lo + hi) / 2.0;
        // The tie, its neighbours, and values that rounding through f32 would move onto the
        // tie (a double-rounding trap: 2^-40 relative off the midpoint).
        let trap = mid * 2f64.powi(-40);
        for x in [mid, mid + trap, mid - trap, lo] {
            for d in -2i64..=2 {
                let b = x.to_bits().wrapping_add_signed(d);
                v.extend([b, b | 1 << 63]);
            }
        }
    }
    check_f64(&v);
    let mut special: Vec<u64> = vec![
        f64::INFINITY.to_bits(),
        f64::NEG_INFINITY.to_bits(),
        0,
        1 << 63,
        1,
        f64::MIN_POSITIVE.to_bits(),
        f64::MAX.to_bits(),
        1e300f64.to_bits(),
        1e-300f64.to_bits(),
        2f64.powi(-25).to_bits(),
        (2f64.powi(-25) * (1.0 + f64::EPSILON)).to_bits(),
    ];
    for p in [
        1u64,
        1 << 41,
        1 << 42,
        1 << 51,
        (1 << 52) - 1,
        0x3_ff00_0000_0000,
    ] {
        special.extend([0x7ff0_0000_0000_0000 | p, 0xfff0_0000_0000_0000 | p]);
    }
    check_f64(&special);
    // Pseudo-random bit patterns (xorshift), and pseudo-random values in the float16 range.
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let random: Vec<u64> = (0..1 << 18)
        .map(|k| {
            let r = next();
            if k % 2 == 0 {
                r
            } else {
                // exponent within float16's range and a little beyond
                let e = 1023 - 30 + (r >> 52) % 50;
                (r & 0x800f_ffff_ffff_ffff) | e << 52
            }
        })
        .collect();
    check_f64(&random);
}

/// The claim `lower` rests on when it computes float16 `+ - * / sqrt` in `f32`: rounding the
/// `f32` result to float16 gives the `f64` route's result, bit for bit (pairs of every float16
/// with sampled ones; every float16 for `sqrt`).
#[test]
fn float16_basic_operations_in_f32_round_like_f64() {
    let f16 = |h: u16| math::f16_to_f32(h);
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s as u16
    };
    for a in 0..=u16::MAX {
        let x = f16(a);
        assert_eq!(
            math::f32_to_f16(x.sqrt()),
            math::f64_to_f16(f64::from(x).sqrt()),
            "sqrt {a:#06x}"
        );
        for _ in 0..64 {
            let y = f16(next());
            let (xd, yd) = (f64::from(x), f64::from(y));
            for (r32, r64, op) in [
                (x + y, xd + yd, "+"),
                (x - y, xd - yd, "-"),
                (x * y, xd * yd, "*"),
                (x / y, xd / yd, "/"),
            ] {
                assert_eq!(math::f32_to_f16(r32), math::f64_to_f16(r64), "{x} {op} {y}");
            }
        }
    }
}

/// A float16 elementwise body as lowering writes it (operations in `f32`, rounded per
/// operation; `relu` a select on a comparison) gives the same bits vectorized as serially, and
/// as the host rules, at a real size with every float16 in both operands.
#[test]
fn vectorized_float16_elementwise_matches_serial() {
    let n: i64 = 1 << 17;
    let f32_of = |e: LExpr| LExpr::Cast(DType::F32, Box::new(e));
    let f16_of = |e: LExpr| LExpr::Cast(DType::F16, Box::new(e));
    let load = |b: u32| LExpr::Load {
        buffer: BufferId(b),
        index: Box::new(LExpr::Local(LocalId(0))),
    };
    // relu(x * y + x), as float16 operations
    let prod = f16_of(LExpr::Binary(
        BinaryOp::Mul,
        Box::new(f32_of(load(0))),
        Box::new(f32_of(load(1))),
    ));
    let sum = f16_of(LExpr::Binary(
        BinaryOp::Add,
        Box::new(f32_of(prod)),
        Box::new(f32_of(load(0))),
    ));
    let body = LExpr::Select(
        Box::new(LExpr::Compare(
            CmpOp::Gt,
            Box::new(f32_of(sum.clone())),
            Box::new(LExpr::Float(0.0, DType::F32)),
        )),
        Box::new(sum),
        Box::new(LExpr::Float(0.0, DType::F16)),
    );
    let x: Vec<u16> = (0..n).map(|i| i as u16).collect();
    let y: Vec<u16> = (0..n)
        .map(|i| (i as u16).wrapping_mul(40503) ^ 0x1234)
        .collect();
    let bytes = |v: &[u16]| -> Vec<u8> { v.iter().flat_map(|b| b.to_le_bytes()).collect() };
    let xa = NDArray::from_bytes(DType::F16, &[n], &bytes(&x)).unwrap();
    let ya = NDArray::from_bytes(DType::F16, &[n], &bytes(&y)).unwrap();
    let want: Vec<u16> = x
        .iter()
        .zip(&y)
        .map(|(&a, &b)| {
            let (a, b) = (math::f16_to_f32(a), math::f16_to_f32(b));
            let p = math::f16_to_f32(math::f32_to_f16(a * b));
            let s = math::f32_to_f16(p + a);
            if math::f16_to_f32(s) > 0.0 { s } else { 0 }
        })
        .collect();
    for kind in KINDS {
        let mut func = cast_kernel(DType::F16, DType::F16, n, kind);
        func.buffers.insert(
            1,
            Buffer {
                name: "y".into(),
                dtype: DType::F16,
                shape: vec![n],
                role: BufferRole::Input,
            },
        );
        if let Stmt::For { body: store, .. } = &mut func.body
            && let Stmt::Store { buffer, value, .. } = &mut **store
        {
            *buffer = BufferId(2);
            *value = body.clone();
        }
        let f = compile(&func).unwrap();
        let mut out = NDArray::zeros(DType::F16, &[n]).unwrap();
        f.call(&[&xa, &ya], &mut [&mut out]).unwrap();
        assert!(halves(out.as_bytes()) == want, "{kind:?}");
    }
}
