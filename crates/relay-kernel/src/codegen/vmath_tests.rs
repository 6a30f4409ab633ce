//! The inline math functions ([`vmath`](super::vmath)) against a reference: each `float32`
//! result within 2 ulp of the `f64` reference rounded to `f32` (the `f64` functions are within
//! an ulp of `f64`, so this is the correctly rounded result but for values within 2^-29 ulp of a
//! midpoint), on millions of inputs spread over every `float32` bit pattern and on every
//! `float32` of the intervals where each approximation is weakest, in vector and scalar code;
//! special values as numpy gives them.

use relay_ir::te::{BinaryOp as B, UnaryOp as U};
use relay_runtime::NDArray;

use super::*;
use crate::loops::{Buffer, BufferRole, Local};
use crate::packed::compile;

/// `out[i] = f(p0[i])` over `n` `float32`s, vectorized by 4 (with a scalar tail) or serial.
fn unary_kernel(n: i64, vectorized: bool, body: LExpr) -> LoopFunc {
    let buf = |name: &str, role| Buffer {
        name: name.into(),
        dtype: DType::F32,
        shape: vec![n],
        role,
    };
    let kind = if vectorized {
        ForKind::Vectorized { lanes: 4 }
    } else {
        ForKind::Serial
    };
    LoopFunc {
        name: "vmath".into(),
        buffers: vec![buf("x", BufferRole::Input), buf("out", BufferRole::Output)],
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
                value: body,
            }),
        },
    }
}

fn x0() -> LExpr {
    LExpr::Load {
        buffer: BufferId(0),
        index: Box::new(LExpr::Local(LocalId(0))),
    }
}

/// The kernel's results on `xs`.
fn eval(body: &LExpr, xs: &[f32], vectorized: bool) -> Vec<f32> {
    let n = xs.len() as i64;
    let func = unary_kernel(n, vectorized, body.clone());
    let wide: Vec<f64> = xs.iter().map(|&x| f64::from(x)).collect();
    let input = NDArray::from_f64_slice(DType::F32, &[n], &wide).unwrap();
    let mut out = NDArray::zeros(DType::F32, &[n]).unwrap();
    let f = compile(&func).unwrap();
    f.call(&[&input], &mut [&mut out]).unwrap();
    out.to_f64_vec().into_iter().map(|v| v as f32).collect()
}

/// Distance in ulps along the ordered `float32` line (`-0 == +0`); NaN only matches NaN.
fn ulp_distance(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    let key = |x: f32| {
        let bits = i64::from(x.to_bits() & 0x7fff_ffff);
        if x.is_sign_negative() { -bits } else { bits }
    };
    (key(a) - key(b)).unsigned_abs()
}

/// Checks `op` on `xs` in vector and scalar code: at most `max_ulp` from `reference`.
fn check(name: &str, body: &LExpr, reference: fn(f64) -> f64, xs: &[f32], max_ulp: u64) {
    for vectorized in [true, false] {
        for chunk in xs.chunks(1 << 20) {
            let got = eval(body, chunk, vectorized);
            for (&x, &g) in chunk.iter().zip(&got) {
                let want = reference(f64::from(x)) as f32;
                let d = ulp_distance(g, want);
                assert!(
                    d <= max_ulp,
                    "{name}({x:e} = {:#010x}) = {g:e}, want {want:e}: {d} ulp (vectorized: {vectorized})",
                    x.to_bits()
                );
            }
        }
    }
}

/// Every `step`-th `float32` bit pattern (both signs, NaNs and infinities included).
fn strided(step: u32) -> Vec<f32> {
    (0..=u32::MAX / step)
        .map(|k| f32::from_bits(k * step))
        .collect()
}

/// Every `float32` in `[lo, hi)` (both positive).
fn every(lo: f32, hi: f32) -> Vec<f32> {
    (lo.to_bits()..hi.to_bits()).map(f32::from_bits).collect()
}

/// Values numpy's results are known for: zeros, infinities, NaN, subnormals, the limits.
fn specials() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::from_bits(0x007f_ffff),
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        1.0,
        -1.0,
    ];
    // Around the overflow and underflow thresholds of exp and the saturation points.
    for c in [
        88.72283f32,
        -87.33655,
        -103.27893,
        -103.97208,
        9.01,
        3.92,
        0.625,
    ] {
        for k in -8i32..=8 {
            let b = c.to_bits() as i32 + k;
            v.push(f32::from_bits(b as u32));
            v.push(-f32::from_bits(b as u32));
        }
    }
    v
}

fn unary(op: U) -> LExpr {
    LExpr::Unary(op, Box::new(x0()))
}

fn sigmoid(x: f64) -> f64 {
    math::sigmoid(x)
}

#[test]
fn exp_is_within_two_ulp() {
    let body = unary(U::Exp);
    let mut xs = strided(1021);
    xs.extend(every(0.5, 1.0));
    xs.extend(specials());
    check("exp", &body, f64::exp, &xs, 2);
    let got = eval(&body, &specials()[..5], true);
    assert_eq!(got[..4], [1.0, 1.0, f32::INFINITY, 0.0]);
    assert!(got[4].is_nan());
}

#[test]
fn log_is_within_two_ulp() {
    let body = unary(U::Log);
    let mut xs = strided(1021);
    xs.extend(every(0.7, 1.45));
    xs.extend(every(f32::from_bits(1), f32::from_bits(1 << 16)));
    xs.extend(specials());
    check("log", &body, f64::ln, &xs, 2);
    let got = eval(
        &body,
        &[0.0, -0.0, f32::INFINITY, -1.0, f32::NEG_INFINITY],
        true,
    );
    assert_eq!(
        got[..3],
        [f32::NEG_INFINITY, f32::NEG_INFINITY, f32::INFINITY]
    );
    assert!(got[3].is_nan() && got[4].is_nan());
}

#[test]
fn tanh_is_within_two_ulp() {
    let body = unary(U::Tanh);
    let mut xs = strided(1021);
    xs.extend(every(0.5, 1.0));
    xs.extend(specials());
    check("tanh", &body, f64::tanh, &xs, 2);
    let got = eval(&body, &[-0.0, f32::INFINITY, f32::NEG_INFINITY, 20.0], true);
    assert_eq!(got, [-0.0, 1.0, -1.0, 1.0]);
    assert!(got[0].is_sign_negative());
}

#[test]
fn sigmoid_is_within_two_ulp() {
    let body = unary(U::Sigmoid);
    let mut xs = strided(1021);
    xs.extend(every(0.5, 1.0));
    xs.extend(every(64.0, 110.0).into_iter().map(|x| -x));
    xs.extend(specials());
    check("sigmoid", &body, sigmoid, &xs, 2);
    let got = eval(&body, &[f32::INFINITY, f32::NEG_INFINITY, 0.0], true);
    assert_eq!(got, [1.0, 0.0, 0.5]);
}

#[test]
fn erf_is_within_two_ulp() {
    let body = unary(U::Erf);
    let mut xs = strided(1021);
    xs.extend(every(0.5, 4.0));
    xs.extend(specials());
    check("erf", &body, math::erf, &xs, 2);
    let got = eval(&body, &[-0.0, f32::INFINITY, f32::NEG_INFINITY, 4.0], true);
    assert_eq!(got, [-0.0, 1.0, -1.0, 1.0]);
    assert!(got[0].is_sign_negative());
}

#[test]
fn small_constant_powers_multiply() {
    let mut xs = strided(4099);
    xs.extend(specials());
    for c in [-4.0, -3.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0] {
        let body = LExpr::Binary(
            B::Pow,
            Box::new(x0()),
            Box::new(LExpr::Float(c, DType::F32)),
        );
        // As the reference computes `powf` in `f64`: at most one ulp apart (a double rounding).
        for vectorized in [true, false] {
            let got = eval(&body, &xs, vectorized);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = f64::from(x).powf(c) as f32;
                let d = ulp_distance(g, want);
                assert!(d <= 1, "power({x:e}, {c}) = {g:e}, want {want:e}");
            }
        }
        let func = unary_kernel(8, true, body);
        let clif = emit_clif(&func).unwrap();
        assert!(
            !clif.contains("relay_pow"),
            "power({c}) calls no host function"
        );
    }
}

#[test]
fn inline_math_calls_no_host_function() {
    for op in [U::Exp, U::Log, U::Tanh, U::Sigmoid, U::Erf, U::Rsqrt] {
        let clif = emit_clif(&unary_kernel(64, true, unary(op))).unwrap();
        // The body imports nothing (the packed entry imports the argument check).
        let body = clif.split("packed entry").next().unwrap_or_default();
        assert!(!body.contains("; fn"), "{op:?}:\n{clif}");
        assert!(!body.contains("call"), "{op:?}:\n{clif}");
    }
}

#[test]
fn rsqrt_vectors_match_the_scalar_code() {
    let mut xs = strided(4099);
    xs.extend(specials());
    let body = unary(U::Rsqrt);
    let v = eval(&body, &xs, true);
    let s = eval(&body, &xs, false);
    for ((x, a), b) in xs.iter().zip(v).zip(s) {
        assert_eq!(ulp_distance(a, b), 0, "rsqrt({x:e})");
        assert_eq!(ulp_distance(a, (1.0 / f64::from(*x).sqrt()) as f32), 0);
    }
}

/// `out[i] = exp(p0[i])` over `float64`s.
fn exp64(xs: &[f64], vectorized: bool) -> Vec<f64> {
    let n = xs.len() as i64;
    let mut func = unary_kernel(n, vectorized, unary(U::Exp));
    for b in &mut func.buffers {
        b.dtype = DType::F64;
    }
    if let (Stmt::For { kind, .. }, true) = (&mut func.body, vectorized) {
        *kind = ForKind::Vectorized { lanes: 2 };
    }
    let input = NDArray::from_f64_slice(DType::F64, &[n], xs).unwrap();
    let mut out = NDArray::zeros(DType::F64, &[n]).unwrap();
    compile(&func)
        .unwrap()
        .call(&[&input], &mut [&mut out])
        .unwrap();
    out.to_f64_vec()
}

#[test]
fn exp_float64_is_within_one_ulp() {
    // Every 2^-10 on [-746, 710] (1.5 million points) with a pseudo-random low part, the
    // thresholds, the specials; compared with the platform's `exp` (under an ulp), in `f64x2`
    // vectors (2 lanes; the scalar loop calls the host).
    let mut xs: Vec<f64> = (0..1456i64 << 10)
        .map(|k| {
            let jitter = (k.wrapping_mul(0x9e37_79b9) & 0xfff) as f64 / 4096.0;
            -746.0 + (k as f64 + jitter) / 1024.0
        })
        .collect();
    for c in [
        709.782_712_893_384,
        -708.396_418_532_264_1,
        -745.133_219_101_941_1,
        0.0,
    ] {
        let b = f64::to_bits(c) as i64;
        xs.extend((-4..=4).map(|k| f64::from_bits((b + k) as u64)));
    }
    xs.extend([1e-300, -1e-300, 5e-324, f64::EPSILON, -0.0, 1.0, -1.0]);
    for vectorized in [true, false] {
        let got = exp64(&xs, vectorized);
        for (&x, &g) in xs.iter().zip(&got) {
            let want = x.exp();
            if want.is_nan() {
                assert!(g.is_nan(), "exp({x:e}) = {g:e}, want NaN");
                continue;
            }
            let d = (g.to_bits() as i64 - want.to_bits() as i64).unsigned_abs();
            assert!(d <= 1, "exp({x:e}) = {g:e}, want {want:e} ({d} ulp)");
        }
    }
    let specials = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 710.0, -746.0];
    let got = exp64(&specials, true);
    assert_eq!(got[..2], [f64::INFINITY, 0.0]);
    assert!(got[2].is_nan());
    assert_eq!(got[3..], [f64::INFINITY, 0.0]);
}
