//! Codegen's tests: hand-written loop nests compiled and run against numpy's semantics.

use relay_ir::te::{BinaryOp as B, CmpOp as C, UnaryOp as U};
use relay_runtime::NDArray;

use super::*;
use crate::loops::{Buffer, BufferRole, Local};
use crate::packed::compile;

/// A buffer.
fn buf(name: &str, dtype: DType, shape: &[i64], role: BufferRole) -> Buffer {
    Buffer {
        name: name.into(),
        dtype,
        shape: shape.to_vec(),
        role,
    }
}

fn i64l(name: &str) -> Local {
    Local {
        name: name.into(),
        dtype: DType::I64,
    }
}

fn load(b: u32, index: LExpr) -> LExpr {
    LExpr::Load {
        buffer: BufferId(b),
        index: Box::new(index),
    }
}

fn var(l: u32) -> LExpr {
    LExpr::Local(LocalId(l))
}

fn idx(v: i64) -> LExpr {
    LExpr::Int(i128::from(v), DType::I64)
}

fn bin(op: B, a: LExpr, b: LExpr) -> LExpr {
    LExpr::Binary(op, Box::new(a), Box::new(b))
}

/// `out[i] = body(i)` over `n` elements with the given inputs (all of shape `[n]` unless
/// given), the loop of `kind`.
fn map_kernel(
    inputs: &[(DType, Vec<i64>)],
    out: DType,
    n: i64,
    kind: ForKind,
    body: LExpr,
) -> LoopFunc {
    let mut buffers: Vec<Buffer> = inputs
        .iter()
        .enumerate()
        .map(|(k, (d, s))| buf(&format!("p{k}"), *d, s, BufferRole::Input))
        .collect();
    buffers.push(buf("out", out, &[n], BufferRole::Output));
    let out_id = BufferId(inputs.len() as u32);
    LoopFunc {
        name: "test_kernel".into(),
        buffers,
        locals: vec![i64l("i")],
        body: Stmt::For {
            var: LocalId(0),
            extent: n,
            kind,
            body: Box::new(Stmt::Store {
                buffer: out_id,
                index: var(0),
                value: body,
            }),
        },
    }
}

fn run(func: &LoopFunc, inputs: &[&NDArray]) -> Result<NDArray, KernelError> {
    let out = func.buffers.last().unwrap();
    let mut result = NDArray::zeros(out.dtype, &out.shape).unwrap();
    let f = compile(func)?;
    f.call(inputs, &mut [&mut result])?;
    Ok(result)
}

/// A unary reference function.
type F1 = fn(f64) -> f64;
/// A binary reference function.
type F2 = fn(f64, f64) -> f64;
/// A comparison's truth from an ordering.
type Cmp = fn(Option<std::cmp::Ordering>) -> bool;

const KINDS: [ForKind; 3] = [
    ForKind::Serial,
    ForKind::Vectorized { lanes: 4 },
    ForKind::Parallel { lanes: 4 },
];

/// Float values equal bit for bit, or both NaN.
fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn adds_float32_with_vector_tails() {
    for n in [0i64, 1, 3, 4, 5, 17, 1000] {
        for kind in KINDS {
            let a: Vec<f64> = (0..n).map(|i| i as f64 * 0.37 - 5.0).collect();
            let b: Vec<f64> = (0..n).map(|i| (i as f64).sin() * 100.0).collect();
            let a = NDArray::from_f64_slice(DType::F32, &[n], &a).unwrap();
            let b = NDArray::from_f64_slice(DType::F32, &[n], &b).unwrap();
            let f = map_kernel(
                &[(DType::F32, vec![n]), (DType::F32, vec![n])],
                DType::F32,
                n,
                kind,
                bin(B::Add, load(0, var(0)), load(1, var(0))),
            );
            let out = run(&f, &[&a, &b]).unwrap();
            let want: Vec<f32> = a
                .to_f64_vec()
                .iter()
                .zip(b.to_f64_vec())
                .map(|(x, y)| *x as f32 + y as f32)
                .collect();
            let got: Vec<f32> = out.to_f64_vec().iter().map(|&v| v as f32).collect();
            assert_eq!(got, want, "n = {n}, {kind:?}");
        }
    }
}

#[test]
fn broadcasts_rows_scalars_and_gathers() {
    // out[i, j] = a[i, j] * b[j] + c[0] - a[i, (j * 2) % 5], a vectorized inner loop.
    let (rows, cols) = (3i64, 5i64);
    let a: Vec<f64> = (0..rows * cols).map(|i| i as f64 * 1.5).collect();
    let a = NDArray::from_f64_slice(DType::F32, &[rows, cols], &a).unwrap();
    let b = NDArray::from_f64_slice(DType::F32, &[cols], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let c = NDArray::from_f64_slice(DType::F32, &[1], &[0.25]).unwrap();
    let flat = bin(B::Add, bin(B::Mul, var(0), idx(cols)), var(1));
    let gathered = bin(
        B::Add,
        bin(B::Mul, var(0), idx(cols)),
        bin(B::FloorMod, bin(B::Mul, var(1), idx(2)), idx(cols)),
    );
    let value = bin(
        B::Sub,
        bin(
            B::Add,
            bin(B::Mul, load(0, flat.clone()), load(1, var(1))),
            load(2, idx(0)),
        ),
        load(0, gathered),
    );
    for kind in KINDS {
        let func = LoopFunc {
            name: "fused_broadcast".into(),
            buffers: vec![
                buf("a", DType::F32, &[rows, cols], BufferRole::Input),
                buf("b", DType::F32, &[cols], BufferRole::Input),
                buf("c", DType::F32, &[1], BufferRole::Input),
                buf("out", DType::F32, &[rows, cols], BufferRole::Output),
            ],
            locals: vec![i64l("i"), i64l("j")],
            body: Stmt::For {
                var: LocalId(0),
                extent: rows,
                kind: ForKind::Serial,
                body: Box::new(Stmt::For {
                    var: LocalId(1),
                    extent: cols,
                    kind,
                    body: Box::new(Stmt::Store {
                        buffer: BufferId(3),
                        index: flat.clone(),
                        value: value.clone(),
                    }),
                }),
            },
        };
        let out = run(&func, &[&a, &b, &c]).unwrap().to_f64_vec();
        let av = a.to_f64_vec();
        for i in 0..rows as usize {
            for j in 0..cols as usize {
                let k = i * cols as usize + j;
                let g = i * cols as usize + (j * 2) % cols as usize;
                let want = (av[k] as f32 * (j + 1) as f32 + 0.25f32) - av[g] as f32;
                assert_eq!(out[k] as f32, want, "{kind:?} at {i}, {j}");
            }
        }
    }
}

/// The reference's integer binary operations (`relay-ops`): in `i128`, wrapped to `d`.
fn int_reference(op: B, x: i128, y: i128, d: DType) -> Result<i128, &'static str> {
    let wrap = |v: i128| {
        NDArray::from_i128_slice(d, &[1], &[v])
            .unwrap()
            .to_i128_vec()[0]
    };
    let div = |x: i128, y: i128| -> Result<(i128, i128), &'static str> {
        if y == 0 {
            Err("integer division by zero")
        } else {
            Ok((x / y, x % y))
        }
    };
    let fdiv = |x: i128, y: i128| -> Result<(i128, i128), &'static str> {
        let (q, r) = div(x, y)?;
        Ok(if r != 0 && (r < 0) != (y < 0) {
            (q - 1, r + y)
        } else {
            (q, r)
        })
    };
    let modz = |y: i128| {
        if y == 0 {
            Err("integer modulo by zero")
        } else {
            Ok(())
        }
    };
    Ok(wrap(match op {
        B::Div => div(x, y)?.0,
        B::Mod => {
            modz(y)?;
            div(x, y)?.1
        }
        B::FloorDiv => fdiv(x, y)?.0,
        B::FloorMod => {
            modz(y)?;
            fdiv(x, y)?.1
        }
        B::Add => x + y,
        B::Sub => x - y,
        B::Mul => x.wrapping_mul(y),
        B::Max => x.max(y),
        B::Min => x.min(y),
        B::Shl => {
            if (0..128).contains(&y) {
                x.wrapping_shl(y as u32)
            } else {
                0
            }
        }
        B::Shr => x >> if (0..128).contains(&y) { y as u32 } else { 127 },
        B::BitAnd => x & y,
        B::BitOr => x | y,
        B::BitXor => x ^ y,
        B::Pow => {
            if y < 0 {
                return Err("integers to negative integer powers are not allowed");
            }
            let mut r = 1i128;
            for _ in 0..y {
                r = wrap(r.wrapping_mul(x));
            }
            r
        }
        _ => unreachable!("not an integer test operation"),
    }))
}

/// Runs `op` elementwise on pairs, compiled (serially and vectorized), against the
/// reference, one pair per kernel call so errors are per pair.
fn check_int_op(op: B, d: DType, pairs: &[(i128, i128)]) {
    let xs: Vec<i128> = pairs.iter().map(|p| p.0).collect();
    let ys: Vec<i128> = pairs.iter().map(|p| p.1).collect();
    let n = pairs.len() as i64;
    let a = NDArray::from_i128_slice(d, &[n], &xs).unwrap();
    let b = NDArray::from_i128_slice(d, &[n], &ys).unwrap();
    let (xs, ys) = (a.to_i128_vec(), b.to_i128_vec());
    let want: Vec<Result<i128, &str>> = xs
        .iter()
        .zip(&ys)
        .map(|(&x, &y)| int_reference(op, x, y, d))
        .collect();
    for kind in KINDS {
        let func = map_kernel(
            &[(d, vec![n]), (d, vec![n])],
            d,
            n,
            kind,
            bin(op, load(0, var(0)), load(1, var(0))),
        );
        match want.iter().find_map(|w| w.err()) {
            Some(message) => {
                let err = run(&func, &[&a, &b]).unwrap_err().to_string();
                assert!(err.contains(message), "{op:?} {d}: {err}");
                assert!(err.starts_with("kernel test_kernel: "), "{err}");
            }
            None => {
                let got = run(&func, &[&a, &b]).unwrap().to_i128_vec();
                let want: Vec<i128> = want.iter().map(|w| *w.as_ref().unwrap()).collect();
                assert_eq!(got, want, "{op:?} on {d} ({kind:?}) of {xs:?} and {ys:?}");
            }
        }
    }
}

#[test]
fn integer_division_truncates_and_floors() {
    let pairs = [
        (7, 2),
        (-7, 2),
        (7, -2),
        (-7, -2),
        (6, 3),
        (-6, 3),
        (0, -5),
        (i128::from(i32::MIN), -1),
        (i128::from(i32::MIN), 1),
        (i128::from(i32::MAX), -1),
        (1, i128::from(i32::MIN)),
    ];
    for op in [B::Div, B::Mod, B::FloorDiv, B::FloorMod] {
        check_int_op(op, DType::I32, &pairs);
        check_int_op(op, DType::I8, &[(-128, -1), (-7, 2), (100, -3), (5, 7)]);
        check_int_op(
            op,
            DType::I64,
            &[(i128::from(i64::MIN), -1), (-9, 4), (9, -4)],
        );
        check_int_op(
            op,
            DType::U32,
            &[(7, 2), (4_000_000_000, 3), (1, 4_000_000_000)],
        );
        check_int_op(op, DType::U8, &[(255, 2), (7, 200)]);
    }
}

#[test]
fn integer_division_by_zero_is_an_error() {
    for op in [B::Div, B::Mod, B::FloorDiv, B::FloorMod] {
        for d in [DType::I32, DType::U8, DType::I64] {
            check_int_op(op, d, &[(1, 1), (5, 0), (3, 2)]);
        }
    }
}

#[test]
fn integer_arithmetic_shifts_and_powers() {
    let pairs = [
        (1, 0),
        (1, 1),
        (-3, 2),
        (100, 7),
        (-128, 8),
        (127, 100),
        (-1, -1),
        (64, 3),
    ];
    for d in [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
    ] {
        for op in [
            B::Add,
            B::Sub,
            B::Mul,
            B::Max,
            B::Min,
            B::Shl,
            B::Shr,
            B::BitAnd,
            B::BitOr,
            B::BitXor,
        ] {
            check_int_op(op, d, &pairs);
        }
        check_int_op(B::Pow, d, &[(3, 4), (-2, 7), (2, 70), (7, 0), (0, 0)]);
    }
    check_int_op(B::Pow, DType::I32, &[(2, 3), (2, -1)]);
}

/// Sample values of `d`: extremes, fractions, NaN and infinities for floats.
fn samples(d: DType) -> NDArray {
    if is_float(d) {
        let v = [
            0.0,
            -0.0,
            1.0,
            -1.5,
            1.5,
            2.5,
            -2.5,
            0.49999997,
            127.9,
            -128.9,
            255.5,
            300.7,
            -300.7,
            65535.9,
            3e9,
            -3e9,
            1e20,
            -1e20,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        NDArray::from_f64_slice(d, &[v.len() as i64], &v).unwrap()
    } else {
        let v: [i128; 14] = [
            0,
            1,
            -1,
            2,
            127,
            -128,
            255,
            256,
            65535,
            -32768,
            i128::from(i32::MAX),
            i128::from(i32::MIN),
            i128::from(i64::MIN),
            i128::from(u64::MAX),
        ];
        NDArray::from_i128_slice(d, &[v.len() as i64], &v).unwrap()
    }
}

/// numpy's `astype`, as the reference evaluates `cast`.
fn reference_cast(a: &NDArray, to: DType) -> NDArray {
    let shape = a.shape();
    if a.dtype().is_float() {
        NDArray::from_f64_slice(to, shape, &a.to_f64_vec()).unwrap()
    } else {
        NDArray::from_i128_slice(to, shape, &a.to_i128_vec()).unwrap()
    }
}

fn assert_same(got: &NDArray, want: &NDArray, what: &str) {
    assert_eq!(got.dtype(), want.dtype());
    if got.dtype().is_float() {
        let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
        for (k, (x, y)) in g.iter().zip(&w).enumerate() {
            assert!(same_f64(*x, *y), "{what}: element {k}: got {x}, want {y}");
        }
    } else {
        assert_eq!(got.to_i128_vec(), want.to_i128_vec(), "{what}");
    }
}

#[test]
fn casts_follow_numpy_in_every_direction() {
    let dtypes = [
        DType::BOOL,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F32,
        DType::F64,
    ];
    for from in dtypes {
        let input = samples(from);
        let n = input.num_elements() as i64;
        for to in dtypes {
            let want = reference_cast(&input, to);
            for kind in [ForKind::Serial, ForKind::Vectorized { lanes: 4 }] {
                let func = map_kernel(
                    &[(from, vec![n])],
                    to,
                    n,
                    kind,
                    LExpr::Cast(to, Box::new(load(0, var(0)))),
                );
                let got = run(&func, &[&input]).unwrap();
                assert_same(&got, &want, &format!("{from} -> {to} ({kind:?})"));
            }
        }
    }
}

/// Distance in units in the last place between two `f32`s.
fn ulps(a: f32, b: f32) -> u64 {
    if a == b || (a.is_nan() && b.is_nan()) {
        return 0;
    }
    let key = |x: f32| {
        let bits = x.to_bits() as i64;
        if bits < 0 {
            i64::from(i32::MIN) - bits
        } else {
            bits
        }
    };
    let (ka, kb) = (key(a), key(b));
    if a.is_sign_negative() != b.is_sign_negative() {
        return u64::MAX;
    }
    (ka - kb).unsigned_abs()
}

#[test]
fn transcendental_functions_are_within_two_ulp() {
    let n = 2001i64;
    let xs: Vec<f64> = (0..n).map(|i| (i - 1000) as f64 * 0.0123).collect();
    let a = NDArray::from_f64_slice(DType::F32, &[n], &xs).unwrap();
    let cases: [(U, F1); 17] = [
        // Outside their domains (|x| > 1, x < 1) these are NaN, as the reference is.
        (U::Asin, f64::asin),
        (U::Acos, f64::acos),
        (U::Atan, f64::atan),
        (U::Sinh, f64::sinh),
        (U::Cosh, f64::cosh),
        (U::Asinh, f64::asinh),
        (U::Acosh, f64::acosh),
        (U::Atanh, f64::atanh),
        (U::Exp, f64::exp),
        (U::Tanh, f64::tanh),
        (U::Erf, math::erf),
        (U::Sigmoid, math::sigmoid),
        (U::Sin, f64::sin),
        (U::Cos, f64::cos),
        (U::Tan, f64::tan),
        (U::Log, |x| x.abs().ln()),
        (U::Rsqrt, |x| 1.0 / x.abs().sqrt()),
    ];
    for (op, reference) in cases {
        let arg = match op {
            U::Log | U::Rsqrt => LExpr::Unary(U::Abs, Box::new(load(0, var(0)))),
            _ => load(0, var(0)),
        };
        for d in [DType::F32, DType::F64] {
            let input = reference_cast(&a, d);
            let func = map_kernel(
                &[(d, vec![n])],
                d,
                n,
                ForKind::Vectorized { lanes: 4 },
                LExpr::Unary(op, Box::new(arg.clone())),
            );
            let got = run(&func, &[&input]).unwrap().to_f64_vec();
            for (k, x) in input.to_f64_vec().iter().enumerate() {
                let want = reference(*x);
                if want.is_nan() {
                    assert!(got[k].is_nan(), "{op:?}({x}) = {}, want NaN", got[k]);
                    continue;
                }
                if d == DType::F32 {
                    let u = ulps(got[k] as f32, want as f32);
                    assert!(u <= 2, "{op:?}({x}) = {}, want {want} ({u} ulp)", got[k]);
                } else {
                    let tol = 4.0 * f64::EPSILON * want.abs();
                    assert!(
                        same_f64(got[k], want) || (got[k] - want).abs() <= tol,
                        "{op:?}({x}) = {}, want {want}",
                        got[k]
                    );
                }
            }
        }
    }
}

#[test]
fn float_unary_and_binary_operations_match_the_reference() {
    let input = samples(DType::F32);
    let n = input.num_elements() as i64;
    let xs = input.to_f64_vec();
    let sign = |x: f64| {
        if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            x * 0.0
        }
    };
    let unary: [(U, F1); 9] = [
        (U::Neg, |x| -x),
        (U::Abs, f64::abs),
        (U::Sign, sign),
        (U::Ceil, f64::ceil),
        (U::Floor, f64::floor),
        (U::Round, f64::round_ties_even),
        (U::Trunc, f64::trunc),
        (U::Sqrt, f64::sqrt),
        (U::Log2, f64::log2),
    ];
    for (op, f) in unary {
        for kind in KINDS {
            let func = map_kernel(
                &[(DType::F32, vec![n])],
                DType::F32,
                n,
                kind,
                LExpr::Unary(op, Box::new(load(0, var(0)))),
            );
            let got = run(&func, &[&input]).unwrap();
            let want: Vec<f64> = xs.iter().map(|&x| f(x)).collect();
            let want = NDArray::from_f64_slice(DType::F32, &[n], &want).unwrap();
            assert_same(&got, &want, &format!("{op:?} ({kind:?})"));
        }
    }
    // Binary operations against a rotated copy.
    let ys: Vec<f64> = xs.iter().cycle().skip(3).take(xs.len()).copied().collect();
    let b = NDArray::from_f64_slice(DType::F32, &[n], &ys).unwrap();
    let nan_max = |x: f64, y: f64| {
        if x.is_nan() || y.is_nan() {
            f64::NAN
        } else {
            x.max(y)
        }
    };
    let nan_min = |x: f64, y: f64| {
        if x.is_nan() || y.is_nan() {
            f64::NAN
        } else {
            x.min(y)
        }
    };
    let binary: [(B, F2); 10] = [
        (B::Add, |x, y| x + y),
        (B::Sub, |x, y| x - y),
        (B::Mul, |x, y| x * y),
        (B::Div, |x, y| x / y),
        (B::Mod, |x, y| x % y),
        (B::FloorDiv, |x, y| (x / y).floor()),
        (B::FloorMod, math::floor_mod),
        (B::Pow, f64::powf),
        (B::Max, nan_max),
        (B::Min, nan_min),
    ];
    for (op, f) in binary {
        for kind in KINDS {
            let func = map_kernel(
                &[(DType::F32, vec![n]), (DType::F32, vec![n])],
                DType::F32,
                n,
                kind,
                bin(op, load(0, var(0)), load(1, var(0))),
            );
            let got = run(&func, &[&input, &b]).unwrap();
            let want: Vec<f64> = xs.iter().zip(&ys).map(|(&x, &y)| f(x, y)).collect();
            let want = NDArray::from_f64_slice(DType::F32, &[n], &want).unwrap();
            if matches!(op, B::Max | B::Min) {
                // max(-0, +0) may be either zero.
                let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
                assert!(
                    g.iter()
                        .zip(&w)
                        .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()))
                );
            } else {
                assert_same(&got, &want, &format!("{op:?} ({kind:?})"));
            }
        }
    }
}

/// Sample values of `d` for comparisons: signed zeros, infinities and NaN for floats,
/// extremes for integers.
fn select_samples(d: DType, n: i64, shift: usize) -> NDArray {
    let pool: Vec<f64> = if is_float(d) {
        vec![
            f64::NAN,
            -0.0,
            0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1.5,
            -2.0,
            3.0,
            1.5,
        ]
    } else if signed(d) {
        let max = if d == DType::I8 { 127.0 } else { 2147483647.0 };
        vec![-max - 1.0, -5.0, 0.0, 7.0, max, 7.0, -1.0]
    } else {
        vec![0.0, 5.0, 4294967295.0, 2147483648.0, 1.0, 5.0]
    };
    let xs: Vec<f64> = (0..n as usize)
        .map(|k| pool[(k * 3 + shift) % pool.len()])
        .collect();
    NDArray::from_f64_slice(d, &[n], &xs).unwrap()
}

#[test]
fn vectorized_selects_match_the_serial_loop() {
    // (compared dtype, selected dtype, lanes); the last case mixes lane widths and so
    // runs per lane.
    let cases = [
        (DType::F32, DType::F32, 4),
        (DType::F64, DType::F64, 2),
        (DType::I32, DType::I32, 4),
        (DType::U32, DType::U32, 4),
        (DType::I32, DType::F32, 4),
        (DType::F32, DType::I32, 4),
        (DType::I8, DType::I8, 16),
        (DType::I64, DType::F64, 2),
        (DType::U64, DType::I64, 2),
        (DType::F64, DType::F32, 4),
    ];
    let ops = [C::Eq, C::Ne, C::Lt, C::Le, C::Gt, C::Ge];
    for (cd, vd, lanes) in cases {
        for n in [0i64, 1, 3, 4, 5, 17] {
            let inputs = [
                select_samples(cd, n, 0),
                select_samples(cd, n, 1),
                select_samples(vd, n, 2),
                select_samples(vd, n, 4),
            ];
            let refs: Vec<&NDArray> = inputs.iter().collect();
            let shapes = [(cd, vec![n]), (cd, vec![n]), (vd, vec![n]), (vd, vec![n])];
            for op in ops {
                let body = LExpr::Select(
                    Box::new(LExpr::Compare(
                        op,
                        Box::new(load(0, var(0))),
                        Box::new(load(1, var(0))),
                    )),
                    Box::new(load(2, var(0))),
                    Box::new(load(3, var(0))),
                );
                let serial = map_kernel(&shapes, vd, n, ForKind::Serial, body.clone());
                let vector = map_kernel(&shapes, vd, n, ForKind::Vectorized { lanes }, body);
                let mixed = cd == DType::F64 && vd == DType::F32;
                let clif = emit_clif(&vector).unwrap();
                assert_eq!(
                    clif.contains("bitselect"),
                    !mixed && n >= i64::from(lanes),
                    "{clif}"
                );
                let want = run(&serial, &refs).unwrap().to_f64_vec();
                let got = run(&vector, &refs).unwrap().to_f64_vec();
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        same_f64(*g, *w),
                        "{op:?} {cd}->{vd} n={n}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn relu_of_a_repeated_subexpression_is_one_vector_select() {
    // relu(a * b + c) as nn.relu computes it: select(x > 0, x, 0) with x written twice.
    let n = 17i64;
    let x = || {
        bin(
            B::Add,
            bin(B::Mul, load(0, var(0)), load(1, var(0))),
            load(2, var(0)),
        )
    };
    let body = LExpr::Select(
        Box::new(LExpr::Compare(
            C::Gt,
            Box::new(x()),
            Box::new(LExpr::Float(0.0, DType::F32)),
        )),
        Box::new(x()),
        Box::new(LExpr::Float(0.0, DType::F32)),
    );
    let shapes = [
        (DType::F32, vec![n]),
        (DType::F32, vec![n]),
        (DType::F32, vec![n]),
    ];
    let func = map_kernel(
        &shapes,
        DType::F32,
        n,
        ForKind::Vectorized { lanes: 4 },
        body,
    );
    let clif = emit_clif(&func).unwrap();
    assert_eq!(clif.matches("load.f32x4").count(), 3, "{clif}");
    // One multiply in the vector body, two in the (unshared) scalar tail.
    assert_eq!(clif.matches("= fmul ").count(), 3, "{clif}");
    assert!(clif.contains("bitselect"), "{clif}");
    let a = select_samples(DType::F32, n, 0);
    let b = select_samples(DType::F32, n, 1);
    let c = select_samples(DType::F32, n, 2);
    let got = run(&func, &[&a, &b, &c]).unwrap().to_f64_vec();
    let (a, b, c) = (a.to_f64_vec(), b.to_f64_vec(), c.to_f64_vec());
    for k in 0..n as usize {
        let x = (a[k] as f32) * (b[k] as f32) + (c[k] as f32);
        let want = if x > 0.0 { x } else { 0.0 };
        assert!(
            same_f64(got[k], f64::from(want)),
            "{k}: {} vs {want}",
            got[k]
        );
    }
}

#[test]
fn comparisons_with_nan_are_false_except_not_equal() {
    let xs = [1.0, f64::NAN, 2.0, f64::NAN, -0.0, 3.0, f64::INFINITY];
    let ys = [1.0, 1.0, f64::NAN, f64::NAN, 0.0, 2.0, f64::INFINITY];
    let n = xs.len() as i64;
    for d in [DType::F32, DType::F64] {
        let a = NDArray::from_f64_slice(d, &[n], &xs).unwrap();
        let b = NDArray::from_f64_slice(d, &[n], &ys).unwrap();
        let cases: [(C, Cmp); 6] = [
            (C::Eq, |o| o == Some(std::cmp::Ordering::Equal)),
            (C::Ne, |o| o != Some(std::cmp::Ordering::Equal)),
            (C::Lt, |o| o == Some(std::cmp::Ordering::Less)),
            (C::Le, |o| {
                matches!(
                    o,
                    Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
                )
            }),
            (C::Gt, |o| o == Some(std::cmp::Ordering::Greater)),
            (C::Ge, |o| {
                matches!(
                    o,
                    Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
                )
            }),
        ];
        for (op, f) in cases {
            for kind in KINDS {
                let func = map_kernel(
                    &[(d, vec![n]), (d, vec![n])],
                    DType::BOOL,
                    n,
                    kind,
                    LExpr::Compare(op, Box::new(load(0, var(0))), Box::new(load(1, var(0)))),
                );
                let got = run(&func, &[&a, &b]).unwrap().to_i128_vec();
                let want: Vec<i128> = xs
                    .iter()
                    .zip(&ys)
                    .map(|(x, y)| i128::from(f(x.partial_cmp(y))))
                    .collect();
                assert_eq!(got, want, "{op:?} on {d} ({kind:?})");
            }
        }
    }
    // Predicates.
    let a = NDArray::from_f64_slice(DType::F32, &[n], &xs).unwrap();
    for (op, f) in [
        (U::IsNan, f64::is_nan as fn(f64) -> bool),
        (U::IsInf, f64::is_infinite),
        (U::IsFinite, f64::is_finite),
        (U::LogicalNot, |x| x == 0.0),
    ] {
        let func = map_kernel(
            &[(DType::F32, vec![n])],
            DType::BOOL,
            n,
            ForKind::Vectorized { lanes: 4 },
            LExpr::Unary(op, Box::new(load(0, var(0)))),
        );
        let got = run(&func, &[&a]).unwrap().to_i128_vec();
        let want: Vec<i128> = xs.iter().map(|&x| i128::from(f(x))).collect();
        assert_eq!(got, want, "{op:?}");
    }
}

#[test]
fn select_picks_per_element() {
    // relu-like: out[i] = a[i] > 0 ? a[i] : b[i] * 0.5, for float32 and int32.
    for d in [DType::F32, DType::I32, DType::F64, DType::I8] {
        let n = 11i64;
        let xs: Vec<f64> = (0..n).map(|i| (i - 5) as f64).collect();
        let ys: Vec<f64> = (0..n).map(|i| (i * 3) as f64).collect();
        let a = NDArray::from_f64_slice(d, &[n], &xs).unwrap();
        let b = NDArray::from_f64_slice(d, &[n], &ys).unwrap();
        let zero = if is_float(d) {
            LExpr::Float(0.0, d)
        } else {
            LExpr::Int(0, d)
        };
        let two = if is_float(d) {
            LExpr::Float(2.0, d)
        } else {
            LExpr::Int(2, d)
        };
        for kind in KINDS {
            let func = map_kernel(
                &[(d, vec![n]), (d, vec![n])],
                d,
                n,
                kind,
                LExpr::Select(
                    Box::new(LExpr::Compare(
                        C::Gt,
                        Box::new(load(0, var(0))),
                        Box::new(zero.clone()),
                    )),
                    Box::new(load(0, var(0))),
                    Box::new(bin(B::Mul, load(1, var(0)), two.clone())),
                ),
            );
            let got = run(&func, &[&a, &b]).unwrap().to_f64_vec();
            let want: Vec<f64> = xs
                .iter()
                .zip(&ys)
                .map(|(&x, &y)| if x > 0.0 { x } else { y * 2.0 })
                .collect();
            assert_eq!(got, want, "{d} ({kind:?})");
        }
    }
}

#[test]
fn bool_logic_and_locals() {
    // t = a[i] && !b[i]; out[i] = t ^ (a[i] | b[i]), with a body-local temporary.
    let n = 9i64;
    let xs: Vec<bool> = (0..n).map(|i| i % 2 == 0).collect();
    let ys: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let a = NDArray::from_bool_slice(&[n], &xs).unwrap();
    let b = NDArray::from_bool_slice(&[n], &ys).unwrap();
    for kind in KINDS {
        let func = LoopFunc {
            name: "logic".into(),
            buffers: vec![
                buf("a", DType::BOOL, &[n], BufferRole::Input),
                buf("b", DType::BOOL, &[n], BufferRole::Input),
                buf("out", DType::BOOL, &[n], BufferRole::Output),
            ],
            locals: vec![
                i64l("i"),
                Local {
                    name: "t".into(),
                    dtype: DType::BOOL,
                },
            ],
            body: Stmt::For {
                var: LocalId(0),
                extent: n,
                kind,
                body: Box::new(Stmt::Seq(vec![
                    Stmt::Assign {
                        local: LocalId(1),
                        value: bin(
                            B::LogicalAnd,
                            load(0, var(0)),
                            LExpr::Unary(U::LogicalNot, Box::new(load(1, var(0)))),
                        ),
                    },
                    Stmt::Store {
                        buffer: BufferId(2),
                        index: var(0),
                        value: bin(
                            B::LogicalXor,
                            var(1),
                            bin(B::BitOr, load(0, var(0)), load(1, var(0))),
                        ),
                    },
                ])),
            },
        };
        let got = run(&func, &[&a, &b]).unwrap().to_i128_vec();
        let want: Vec<i128> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| i128::from((x && !y) ^ (x | y)))
            .collect();
        assert_eq!(got, want, "{kind:?}");
    }
}

#[test]
fn vectorizes_other_widths() {
    // int8 (16 lanes would be native; 4 are per lane), float64 with 2 and 4 lanes.
    for (d, lanes) in [
        (DType::I8, 4),
        (DType::F64, 2),
        (DType::F64, 4),
        (DType::I64, 2),
        (DType::I32, 4),
    ] {
        let n = 23i64;
        let xs: Vec<f64> = (0..n).map(|i| (i * 7 % 11) as f64 - 3.0).collect();
        let a = NDArray::from_f64_slice(d, &[n], &xs).unwrap();
        let func = map_kernel(
            &[(d, vec![n])],
            d,
            n,
            ForKind::Vectorized { lanes },
            bin(
                B::Sub,
                bin(B::Add, load(0, var(0)), load(0, var(0))),
                LExpr::Unary(U::Neg, Box::new(load(0, var(0)))),
            ),
        );
        let got = run(&func, &[&a]).unwrap().to_f64_vec();
        let want: Vec<f64> = xs.iter().map(|x| 3.0 * x).collect();
        assert_eq!(got, want, "{d} x{lanes}");
    }
}

#[test]
fn hoisted_indices_need_no_bounds_checks() {
    // for i in 0..3 { base = i * 5; for j in 0..5 (vectorized) { out[base + j] = a[base + j] * 2 } }
    let flat = bin(B::Add, var(1), var(2));
    let func = LoopFunc {
        name: "hoisted".into(),
        buffers: vec![
            buf("a", DType::F32, &[3, 5], BufferRole::Input),
            buf("out", DType::F32, &[3, 5], BufferRole::Output),
        ],
        locals: vec![i64l("i"), i64l("base"), i64l("j")],
        body: Stmt::For {
            var: LocalId(0),
            extent: 3,
            kind: ForKind::Serial,
            body: Box::new(Stmt::Seq(vec![
                Stmt::Assign {
                    local: LocalId(1),
                    value: bin(B::Mul, var(0), idx(5)),
                },
                Stmt::For {
                    var: LocalId(2),
                    extent: 5,
                    kind: ForKind::Vectorized { lanes: 4 },
                    body: Box::new(Stmt::Store {
                        buffer: BufferId(1),
                        index: flat.clone(),
                        value: bin(B::Mul, load(0, flat), LExpr::Float(2.0, DType::F32)),
                    }),
                },
            ])),
        },
    };
    let xs: Vec<f64> = (0..15).map(f64::from).collect();
    let a = NDArray::from_f64_slice(DType::F32, &[3, 5], &xs).unwrap();
    let got = run(&func, &[&a]).unwrap().to_f64_vec();
    assert_eq!(got, xs.iter().map(|x| x * 2.0).collect::<Vec<_>>());
    let text = emit_clif(&func).unwrap();
    assert!(!text.contains(" uge "), "{text}");
    assert!(text.contains("f32x4"), "{text}");
}

#[test]
fn out_of_bounds_indices_are_errors_not_crashes() {
    // out[i] = a[i + 1]: the last iteration reads past `a`.
    for kind in KINDS {
        let func = map_kernel(
            &[(DType::F32, vec![8])],
            DType::F32,
            8,
            kind,
            load(0, bin(B::Add, var(0), idx(1))),
        );
        let a = NDArray::zeros(DType::F32, &[8]).unwrap();
        let err = run(&func, &[&a]).unwrap_err().to_string();
        assert!(err.contains("buffer index out of bounds"), "{err}");
    }
}

#[test]
fn rejects_unsupported_and_malformed_kernels() {
    let bf16 = DType::scalar(DTypeCode::BFloat, 16);
    // Code generation moves and converts bfloat16 bits; arithmetic on them is lowering's
    // to widen first, so a loop nest that adds the bits is malformed.
    let bf16 = map_kernel(
        &[(bf16, vec![4])],
        bf16,
        4,
        ForKind::Serial,
        bin(B::Add, load(0, var(0)), load(0, var(0))),
    );
    assert!(matches!(compile(&bf16), Err(KernelError::Malformed { .. })));
    let vector = DType::parse("float32x4").unwrap();
    let vector = map_kernel(
        &[(vector, vec![4])],
        vector,
        4,
        ForKind::Serial,
        load(0, var(0)),
    );
    assert!(matches!(
        compile(&vector),
        Err(KernelError::UnsupportedDType { .. })
    ));
    let mixed = map_kernel(
        &[(DType::F32, vec![4]), (DType::I32, vec![4])],
        DType::F32,
        4,
        ForKind::Serial,
        bin(B::Add, load(0, var(0)), load(1, var(0))),
    );
    let err = compile(&mixed).unwrap_err();
    assert!(matches!(err, KernelError::Malformed { .. }), "{err}");
    let exp_int = map_kernel(
        &[(DType::I32, vec![4])],
        DType::I32,
        4,
        ForKind::Serial,
        LExpr::Unary(U::Exp, Box::new(load(0, var(0)))),
    );
    assert!(matches!(
        compile(&exp_int),
        Err(KernelError::Malformed { .. })
    ));
}

/// `float16` samples: the float samples (rounded) and subnormals, the largest finite
/// value, values next to ties.
fn f16_samples() -> NDArray {
    let mut v = samples(DType::F32).to_f64_vec();
    v.extend([
        2f64.powi(-24),
        -3.0 * 2f64.powi(-24),
        1023.0 * 2f64.powi(-24),
        2f64.powi(-14),
        65504.0,
        -65504.0,
        1.0 + 2f64.powi(-10),
        0.1,
        -7.25,
        2049.0,
    ]);
    NDArray::from_f64_slice(DType::F16, &[v.len() as i64], &v).unwrap()
}

#[test]
fn float16_casts_round_once_in_every_direction() {
    let dtypes = [
        DType::BOOL,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::F32,
        DType::F64,
    ];
    // Values that round to float16 at or next to ties, beyond its range and below its
    // smallest subnormal (and one that rounding twice, through f32, would get wrong).
    let near_ties = [
        1.0 + 2f64.powi(-11),
        1.0 + 3.0 * 2f64.powi(-11),
        1.0 + 2f64.powi(-11) + 2f64.powi(-40),
        65519.0,
        65520.0,
        -65520.0,
        2f64.powi(-25),
        3.0 * 2f64.powi(-25),
        2f64.powi(-26),
        -(2f64.powi(-14) - 2f64.powi(-25)),
        1e-30,
        2049.0,
        2051.0,
        -2051.0,
    ];
    for from in dtypes {
        let mut inputs = vec![if from == DType::F16 {
            f16_samples()
        } else {
            samples(from)
        }];
        if from == DType::F32 || from == DType::F64 {
            let n = near_ties.len() as i64;
            inputs.push(NDArray::from_f64_slice(from, &[n], &near_ties).unwrap());
        }
        for to in dtypes {
            if from != DType::F16 && to != DType::F16 {
                continue;
            }
            for input in &inputs {
                let n = input.num_elements() as i64;
                let want = reference_cast(input, to);
                for kind in KINDS {
                    let func = map_kernel(
                        &[(from, vec![n])],
                        to,
                        n,
                        kind,
                        LExpr::Cast(to, Box::new(load(0, var(0)))),
                    );
                    let got = run(&func, &[input]).unwrap();
                    assert_same(&got, &want, &format!("{from} -> {to} ({kind:?})"));
                }
            }
        }
    }
}

#[test]
fn float16_operations_computed_wider_round_per_operation() {
    // What lowering makes of a float16 `add`, `multiply` and `exp`: the operation in
    // float64 on exactly widened operands, the result rounded to float16.
    let a = f16_samples();
    let n = a.num_elements() as i64;
    let b_values: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin() * 3.0).collect();
    let b = NDArray::from_f64_slice(DType::F16, &[n], &b_values).unwrap();
    let wide = |e: LExpr| LExpr::Cast(DType::F64, Box::new(e));
    let round = |e: LExpr| LExpr::Cast(DType::F16, Box::new(e));
    let cases: [(LExpr, F2); 3] = [
        (
            round(bin(B::Add, wide(load(0, var(0))), wide(load(1, var(0))))),
            |x, y| x + y,
        ),
        (
            round(bin(B::Mul, wide(load(0, var(0))), wide(load(1, var(0))))),
            |x, y| x * y,
        ),
        (
            round(LExpr::Unary(U::Exp, Box::new(wide(load(1, var(0)))))),
            |_, y| y.exp(),
        ),
    ];
    for (body, f) in cases {
        let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
        let expected: Vec<f64> = x.iter().zip(&y).map(|(x, y)| f(*x, *y)).collect();
        let want = NDArray::from_f64_slice(DType::F16, &[n], &expected).unwrap();
        for kind in KINDS {
            let func = map_kernel(
                &[(DType::F16, vec![n]), (DType::F16, vec![n])],
                DType::F16,
                n,
                kind,
                body.clone(),
            );
            let got = run(&func, &[&a, &b]).unwrap();
            assert_same(&got, &want, &format!("{body:?} ({kind:?})"));
        }
    }
}

#[test]
fn float16_bits_are_loaded_selected_and_stored_unchanged() {
    // NaN payloads and signed zeros pass through selects, loads and stores bit for bit;
    // constants are rounded once; a float16 condition is true unless ±0.
    let bits: [u16; 8] = [
        0x7e01, 0xfd00, 0x8000, 0x0000, 0x0001, 0x7bff, 0xfc00, 0x3555,
    ];
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_ne_bytes()).collect();
    let x = NDArray::from_bytes(DType::F16, &[8], &bytes).unwrap();
    let even = LExpr::Compare(
        C::Eq,
        Box::new(bin(B::Mod, var(0), idx(2))),
        Box::new(idx(0)),
    );
    let cases = [
        (
            LExpr::Select(
                Box::new(even.clone()),
                Box::new(load(0, var(0))),
                Box::new(LExpr::Float(0.1, DType::F16)),
            ),
            [
                0x7e01, 0x2e66, 0x8000, 0x2e66, 0x0001, 0x2e66, 0xfc00, 0x2e66,
            ],
        ),
        (
            LExpr::Select(
                Box::new(even),
                Box::new(LExpr::Int(3, DType::F16)),
                Box::new(LExpr::Float(1e6, DType::F16)),
            ),
            [
                0x4200, 0x7c00, 0x4200, 0x7c00, 0x4200, 0x7c00, 0x4200, 0x7c00,
            ],
        ),
        (
            LExpr::Select(
                Box::new(load(0, var(0))),
                Box::new(LExpr::Float(1.0, DType::F16)),
                Box::new(LExpr::Float(-0.0, DType::F16)),
            ),
            [
                0x3c00, 0x3c00, 0x8000, 0x8000, 0x3c00, 0x3c00, 0x3c00, 0x3c00,
            ],
        ),
    ];
    for (body, want) in cases {
        for kind in KINDS {
            let func = map_kernel(&[(DType::F16, vec![8])], DType::F16, 8, kind, body.clone());
            let got = run(&func, &[&x]).unwrap();
            let got: Vec<u16> = got
                .as_bytes()
                .chunks(2)
                .map(|c| u16::from_ne_bytes([c[0], c[1]]))
                .collect();
            assert_eq!(got, want, "{body:?} ({kind:?})");
        }
    }
}

#[test]
fn float16_arithmetic_is_malformed() {
    let f16 = |e: LExpr| map_kernel(&[(DType::F16, vec![4])], DType::F16, 4, ForKind::Serial, e);
    let x = || Box::new(load(0, var(0)));
    let kernels = [
        f16(LExpr::Binary(B::Add, x(), x())),
        f16(LExpr::Unary(U::Neg, x())),
        map_kernel(
            &[(DType::F16, vec![4])],
            DType::BOOL,
            4,
            ForKind::Serial,
            LExpr::Compare(C::Lt, x(), x()),
        ),
        map_kernel(
            &[(DType::F16, vec![8])],
            DType::F16,
            8,
            ForKind::Vectorized { lanes: 4 },
            LExpr::Binary(B::Mul, x(), x()),
        ),
    ];
    for k in kernels {
        let err = compile(&k).unwrap_err();
        assert!(matches!(err, KernelError::Malformed { .. }), "{err}");
    }
}

#[test]
fn emits_clif_text() {
    let func = map_kernel(
        &[(DType::F32, vec![8]), (DType::F32, vec![8])],
        DType::F32,
        8,
        ForKind::Vectorized { lanes: 4 },
        LExpr::Unary(
            U::Sin,
            Box::new(bin(B::Add, load(0, var(0)), load(1, var(0)))),
        ),
    );
    let text = emit_clif(&func).unwrap();
    assert!(text.contains("; kernel test_kernel body"), "{text}");
    assert!(text.contains("; kernel test_kernel packed entry"), "{text}");
    assert!(text.contains("f32x4"), "{text}");
    assert!(text.contains("= relay_sinf"), "{text}");
    assert!(text.contains("relay_kernel_check_args"), "{text}");
}

/// `out[i] = exp(p0[i]) * 2` over 64 `float32`, vectorized by 4: vector loads, inline `exp`
/// (fused multiply-adds where the target has them) and a multiply.
fn exp_kernel() -> LoopFunc {
    let exp = LExpr::Unary(U::Exp, Box::new(load(0, var(0))));
    let body = bin(B::Mul, exp, LExpr::Float(2.0, DType::F32));
    let kind = ForKind::Vectorized { lanes: 4 };
    map_kernel(&[(DType::F32, vec![64])], DType::F32, 64, kind, body)
}

/// The listing of `func` for `target`, which must compile.
fn listing_for(func: &LoopFunc, target: &str, what: CodeText) -> String {
    let target = Target::parse(target).unwrap();
    match emit_text(func, Some(&target), what) {
        Ok(text) => text,
        Err(error) => panic!("{}: {error}", target.name()),
    }
}

#[test]
fn kernels_are_listed_for_every_target() {
    let func = exp_kernel();
    for (target, mnemonic) in [
        ("x86_64-unknown-linux-gnu", "mulps"),
        ("x86_64-unknown-linux-gnu+avx2,+fma", "vfmadd213ps"),
        ("aarch64-unknown-linux-gnu", "fmla"),
        ("riscv64gc-unknown-linux-gnu+v", "vfmacc.vv"),
        ("s390x-unknown-linux-gnu", "vfmasb"),
    ] {
        let asm = listing_for(&func, target, CodeText::Asm);
        assert!(asm.contains(mnemonic), "{target}: no {mnemonic} in\n{asm}");
        for function in ["body", "packed entry"] {
            assert!(asm.contains(&format!("; kernel test_kernel {function}\n")));
        }
        // The entry's calls are external names, listed.
        assert!(asm.contains("= relay_kernel_check_args\n"), "{asm}");
        let clif = listing_for(&func, target, CodeText::Clif);
        assert!(clif.contains("f32x4"), "{target}: {clif}");
    }
}

#[test]
fn the_call_convention_is_the_targets() {
    let func = exp_kernel();
    let clif = listing_for(&func, "aarch64-apple-darwin", CodeText::Clif);
    assert!(clif.contains("apple_aarch64"), "{clif}");
    let clif = listing_for(&func, "x86_64-pc-windows-msvc", CodeText::Clif);
    assert!(clif.contains("windows_fastcall"), "{clif}");
}

#[test]
fn without_vector_types_every_loop_is_serial() {
    // riscv64 without the V extension: Cranelift cannot lower vector types.
    let func = exp_kernel();
    let clif = listing_for(&func, "riscv64gc-unknown-linux-gnu", CodeText::Clif);
    assert!(!clif.contains("f32x4") && !clif.contains("i32x4"), "{clif}");
    let asm = listing_for(&func, "riscv64gc-unknown-linux-gnu", CodeText::Asm);
    assert!(asm.contains("fmadd.s"), "{asm}");
}

#[test]
fn the_host_listing_without_a_target_is_the_jits() {
    let func = exp_kernel();
    assert_eq!(
        emit_text(&func, None, CodeText::Clif).unwrap(),
        emit_clif(&func).unwrap()
    );
    let asm = emit_text(&func, None, CodeText::Asm).unwrap();
    assert!(asm.contains("; kernel test_kernel body\n"), "{asm}");
    assert!(asm.contains("block0:"), "{asm}");
}
