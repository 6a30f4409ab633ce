//! Casts from and to `bfloat16` and the 8-bit floats in compiled kernels against the runtime's
//! conversions (`relay_runtime::minifloat`), bit for bit: every code of each format to `f32`,
//! `f64`, `float16`, integers, `bool` and the other formats; `f32` bit patterns across the whole
//! range (rounding boundaries, subnormals, overflow, NaN) to each format; serial, vectorized
//! and parallel loops, at a real size.

use relay_runtime::NDArray;
use relay_runtime::elements::{write_f64, write_i128};

use super::half_tests::cast_bytes;
use super::*;

fn minifloats() -> Vec<DType> {
    [
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
    ]
    .iter()
    .map(|s| DType::parse(s).unwrap())
    .collect()
}

const LOOPS: [ForKind; 3] = [
    ForKind::Serial,
    ForKind::Vectorized { lanes: 4 },
    ForKind::Parallel { lanes: 4 },
];

/// Every code of `d`, as little-endian elements.
fn every_code(d: DType) -> Vec<u8> {
    let width = d.bits as u32;
    (0..(1u32 << width))
        .flat_map(|c| c.to_le_bytes()[..d.size_bytes()].to_vec())
        .collect()
}

/// The reference cast of `input` (elements of `from`) to `to`, through `f64` as the
/// interpreter converts.
fn reference(from: DType, to: DType, input: &[u8]) -> Vec<u8> {
    let x = NDArray::from_bytes(from, &[(input.len() / from.size_bytes()) as i64], input).unwrap();
    let mut out = vec![0u8; x.num_elements() * to.size_bytes()];
    let s = to.size_bytes();
    if from.is_float() {
        for (i, v) in x.to_f64_vec().into_iter().enumerate() {
            write_f64(to, &mut out[i * s..(i + 1) * s], v);
        }
    } else {
        for (i, v) in x.to_i128_vec().into_iter().enumerate() {
            write_i128(to, &mut out[i * s..(i + 1) * s], v);
        }
    }
    out
}

/// Equal element for element, or both NaN when read as `d`.
fn same(d: DType, got: &[u8], want: &[u8]) -> bool {
    let n = got.len() / d.size_bytes();
    let (g, w) = (
        NDArray::from_bytes(d, &[n as i64], got).unwrap(),
        NDArray::from_bytes(d, &[n as i64], want).unwrap(),
    );
    let nan_alike = g
        .to_f64_vec()
        .iter()
        .zip(w.to_f64_vec())
        .all(|(a, b)| a.is_nan() && b.is_nan() || a.to_bits() == b.to_bits());
    got == want || (d.is_float() && nan_alike)
}

#[test]
fn every_code_converts_to_every_type() {
    let targets = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::I8,
        DType::I32,
        DType::U8,
        DType::I64,
        DType::BOOL,
    ];
    for from in minifloats() {
        let input = every_code(from);
        for to in targets.into_iter().chain(minifloats()) {
            let want = reference(from, to, &input);
            for kind in LOOPS {
                let got = cast_bytes(from, to, &input, kind);
                assert!(same(to, &got, &want), "{from} -> {to} ({kind:?})");
            }
        }
    }
}

#[test]
fn float_bit_patterns_round_once_to_each_format() {
    // 256 KB of f32 patterns: a stride through every exponent, so every binade's rounding
    // boundaries, the subnormals, overflow and NaN payloads of each format are met.
    let bits: Vec<u32> = (0..65_536u32)
        .map(|i| i.wrapping_mul(65_537 * 997))
        .collect();
    let input: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    let halves: Vec<u8> = (0..=u16::MAX).flat_map(|b| b.to_le_bytes()).collect();
    for to in minifloats() {
        for (from, input) in [(DType::F32, &input), (DType::F16, &halves)] {
            let want = reference(from, to, input);
            for kind in LOOPS {
                let got = cast_bytes(from, to, input, kind);
                assert!(same(to, &got, &want), "{from} -> {to} ({kind:?})");
            }
        }
        let ints: Vec<u8> = (-300i32..300).flat_map(|v| v.to_le_bytes()).collect();
        let want = reference(DType::I32, to, &ints);
        assert!(same(
            to,
            &cast_bytes(DType::I32, to, &ints, ForKind::Serial),
            &want
        ));
    }
}
