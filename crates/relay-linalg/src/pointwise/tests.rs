use super::*;

/// `gelu(x + b) = (x + b) · ½ · (1 + erf((x + b) / √2))` as the ONNX exporters write it.
fn gelu_erf() -> Program {
    Program {
        steps: vec![
            Step::Binary(Binary::Add, Src::X, Src::Bias(0)),
            Step::Binary(Binary::Multiply, Src::Step(0), Src::Scalar(0)),
            Step::Unary(Unary::Erf, Src::Step(1)),
            Step::Binary(Binary::Add, Src::Step(2), Src::Scalar(1)),
            Step::Binary(Binary::Multiply, Src::Step(0), Src::Step(3)),
            Step::Binary(Binary::Multiply, Src::Step(4), Src::Scalar(2)),
        ],
    }
}

/// GPT-2's `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
fn gelu_tanh() -> Program {
    Program {
        steps: vec![
            Step::Binary(Binary::Power, Src::X, Src::Scalar(0)),
            Step::Binary(Binary::Multiply, Src::Step(0), Src::Scalar(1)),
            Step::Binary(Binary::Add, Src::X, Src::Step(1)),
            Step::Binary(Binary::Multiply, Src::Step(2), Src::Scalar(2)),
            Step::Unary(Unary::Tanh, Src::Step(3)),
            Step::Binary(Binary::Add, Src::Step(4), Src::Scalar(3)),
            Step::Binary(Binary::Multiply, Src::X, Src::Scalar(4)),
            Step::Binary(Binary::Multiply, Src::Step(6), Src::Step(5)),
        ],
    }
}

fn erf64(x: f64) -> f64 {
    // Abramowitz and Stegun 7.1.26 is too coarse; sum the series or the continued fraction.
    if x.abs() < 3.0 {
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc by its continued fraction.
        let a = x.abs();
        let mut f = 0.0;
        for k in (1..200).rev() {
            f = (k as f64 / 2.0) / (a + f);
        }
        let erfc = (-a * a).exp() / (a + f) / std::f64::consts::PI.sqrt();
        (1.0 - erfc).copysign(x)
    }
}

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 12.0
        })
        .collect()
}

/// Every path at lengths around the block and the chunk, with a bias whose period does not
/// divide them, on one and two threads, against the functions in `f64`.
#[test]
fn every_path_agrees_with_the_reference() {
    let bias = values(37, 9);
    let erf_scalars = [std::f32::consts::FRAC_1_SQRT_2, 1.0, 0.5];
    let k = (2.0 / std::f64::consts::PI).sqrt() as f32;
    let tanh_scalars = [3.0, 0.044_715, k, 1.0, 0.5];
    for isa in Isa::available() {
        for threads in [1, 2] {
            let ctx = KernelContext::with_threads(threads).with_isa(isa).unwrap();
            for n in [0, 1, 7, 255, 256, 257, 37 * 41, 16 * BLOCK + 3, 40 * BLOCK] {
                let x = values(n, n as u64);
                let mut y = vec![f32::NAN; n];
                let ops = Operands {
                    x: &x,
                    biases: &[&bias],
                    scalars: &erf_scalars,
                };
                pointwise(&ctx, &gelu_erf(), &ops, &mut y).unwrap();
                for (i, (&v, &g)) in x.iter().zip(&y).enumerate() {
                    let t = f64::from(v) + f64::from(bias[i % bias.len()]);
                    let want = t * 0.5 * (1.0 + erf64(t / 2f64.sqrt()));
                    assert!(
                        (f64::from(g) - want).abs() <= 1e-5 * want.abs().max(1.0),
                        "{isa} gelu({t}) = {g}, want {want}"
                    );
                }
                let ops = Operands {
                    x: &x,
                    biases: &[],
                    scalars: &tanh_scalars,
                };
                pointwise(&ctx, &gelu_tanh(), &ops, &mut y).unwrap();
                for (&v, &g) in x.iter().zip(&y) {
                    let t = f64::from(v);
                    let inner = f64::from(k) * (t + 0.044_715 * t * t * t);
                    let want = 0.5 * t * (1.0 + inner.tanh());
                    assert!(
                        (f64::from(g) - want).abs() <= 1e-5 * want.abs().max(1.0),
                        "{isa} gelu_tanh({t}) = {g}, want {want}"
                    );
                }
            }
        }
    }
}

/// A function's definition in `f64`, of one and of two arguments.
type Reference1 = fn(f64) -> f64;
type Reference2 = fn(f64, f64) -> f64;

/// Every unary and binary function, scalars on either side, against `f64`.
#[test]
fn every_function_matches_its_definition() {
    let ctx = KernelContext::with_threads(1);
    let x = values(300, 3);
    let unary: [(Unary, Reference1); 6] = [
        (Unary::Negative, |v| -v),
        (Unary::Exp, f64::exp),
        (Unary::Tanh, f64::tanh),
        (Unary::Sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
        (Unary::Erf, erf64),
        (Unary::Sqrt, f64::sqrt),
    ];
    for (f, want) in unary {
        let program = Program {
            steps: vec![Step::Unary(f, Src::X)],
        };
        let mut y = vec![0.0; x.len()];
        let ops = Operands {
            x: &x,
            biases: &[],
            scalars: &[],
        };
        pointwise(&ctx, &program, &ops, &mut y).unwrap();
        for (&v, &g) in x.iter().zip(&y) {
            let w = want(f64::from(v));
            let close = (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0);
            assert!(
                close || w.is_nan() && g.is_nan(),
                "{f:?}({v}) = {g}, want {w}"
            );
        }
    }
    let binary: [(Binary, Reference2); 5] = [
        (Binary::Add, |a, b| a + b),
        (Binary::Subtract, |a, b| a - b),
        (Binary::Multiply, |a, b| a * b),
        (Binary::Divide, |a, b| a / b),
        (Binary::Power, f64::powf),
    ];
    for (f, want) in binary {
        for s in [2.0f32, 3.0, 0.5, 1.7] {
            for (a, b, swap) in [
                (Src::X, Src::Scalar(0), false),
                (Src::Scalar(0), Src::X, true),
            ] {
                let program = Program {
                    steps: vec![Step::Binary(f, a, b)],
                };
                let mut y = vec![0.0; x.len()];
                let ops = Operands {
                    x: &x,
                    biases: &[],
                    scalars: &[s],
                };
                pointwise(&ctx, &program, &ops, &mut y).unwrap();
                for (&v, &g) in x.iter().zip(&y) {
                    let (p, q) = match swap {
                        false => (f64::from(v), f64::from(s)),
                        true => (f64::from(s), f64::from(v)),
                    };
                    let w = want(p, q);
                    let close = (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0);
                    assert!(
                        close || w.is_nan() && g.is_nan(),
                        "{f:?}({p}, {q}) = {g}, want {w}"
                    );
                }
            }
        }
    }
}

/// A program that reads what is not there, or a length mismatch, is an error.
#[test]
fn bad_programs_and_operands_are_errors() {
    let ctx = KernelContext::with_threads(1);
    let x = [1.0f32; 4];
    let mut y = [0.0f32; 4];
    let ops = Operands {
        x: &x,
        biases: &[],
        scalars: &[],
    };
    let reads = |s: Src| Program {
        steps: vec![Step::Unary(Unary::Exp, s)],
    };
    for s in [Src::Bias(0), Src::Scalar(0), Src::Step(0)] {
        assert!(pointwise(&ctx, &reads(s), &ops, &mut y).is_err(), "{s:?}");
    }
    assert!(pointwise(&ctx, &Program::default(), &ops, &mut y).is_err());
    assert!(pointwise(&ctx, &reads(Src::X), &ops, &mut y[..3]).is_err());
    let empty: [f32; 0] = [];
    let with_empty = Operands {
        x: &x,
        biases: &[&empty],
        scalars: &[],
    };
    assert!(pointwise(&ctx, &reads(Src::Bias(0)), &with_empty, &mut y).is_err());
}
