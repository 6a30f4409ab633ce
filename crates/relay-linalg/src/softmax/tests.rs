use super::*;

/// Deterministic values in `[-scale, scale)`.
fn data(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The softmax of each row in `float64`.
fn reference(s: &Softmax, x: &[f32]) -> Vec<f64> {
    let pro = |v: f32| match s.prologue {
        Prologue::None => v,
        Prologue::Mul(k) => v * k,
        Prologue::Div(k) => v / k,
    };
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks_exact(s.cols) {
        let v: Vec<f64> = row.iter().map(|&x| f64::from(pro(x))).collect();
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = v.iter().map(|&v| (v - max).exp()).sum();
        out.extend(v.iter().map(|&v| match s.log {
            true => v - max - sum.ln(),
            false => (v - max).exp() / sum,
        }));
    }
    out
}

fn run(ctx: &KernelContext, s: &Softmax, x: &[f32]) -> Vec<f32> {
    let mut y = vec![f32::NAN; x.len()];
    softmax(ctx, s, x, &mut y).unwrap();
    y
}

#[test]
fn every_path_agrees_with_the_reference_at_every_row_length() {
    let shapes = [
        (1, 1),
        (3, 7),
        (2, 15),
        (5, 16),
        (4, 17),
        (3, 33),
        (7, 512),
        (2, 1000),
    ];
    let prologues = [Prologue::None, Prologue::Mul(0.125), Prologue::Div(8.0)];
    for isa in Isa::available() {
        let ctx = KernelContext::with_threads(1).with_isa(isa).unwrap();
        for (rows, cols) in shapes {
            for (i, &prologue) in prologues.iter().enumerate() {
                for log in [false, true] {
                    let s = Softmax {
                        rows,
                        cols,
                        prologue,
                        log,
                    };
                    let x = data(rows * cols, (rows * cols + i) as u64, 20.0);
                    let got = run(&ctx, &s, &x);
                    for (k, (&g, w)) in got.iter().zip(reference(&s, &x)).enumerate() {
                        let tol = 1e-5 * w.abs().max(1.0) + 1e-7;
                        assert!(
                            (f64::from(g) - w).abs() <= tol,
                            "{isa:?} {s:?} element {k}: {g} want {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn threads_split_rows_without_changing_a_bit() {
    let s = Softmax {
        rows: 300,
        cols: 100,
        prologue: Prologue::Div(3.0),
        log: false,
    };
    let x = data(s.rows * s.cols, 7, 5.0);
    let one = run(&KernelContext::with_threads(1), &s, &x);
    let two = run(&KernelContext::with_threads(2), &s, &x);
    assert_eq!(
        one.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        two.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn nan_and_infinity_spread_over_their_row_only() {
    let s = Softmax {
        rows: 4,
        cols: 20,
        prologue: Prologue::None,
        log: false,
    };
    let mut x = data(80, 3, 1.0);
    x[5] = f32::NAN;
    x[25] = f32::INFINITY;
    x[40..60].fill(f32::NEG_INFINITY);
    x[70] = f32::NEG_INFINITY;
    for isa in Isa::available() {
        let ctx = KernelContext::with_threads(1).with_isa(isa).unwrap();
        let y = run(&ctx, &s, &x);
        assert!(y[..40].iter().all(|v| v.is_nan()), "{isa:?}: {y:?}");
        assert!(y[40..60].iter().all(|v| v.is_nan()), "{isa:?}: {y:?}");
        assert_eq!(y[70], 0.0);
        let sum: f32 = y[60..].iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "{isa:?}: {sum}");
    }
}

#[test]
fn empty_tensors_and_wrong_lengths() {
    let ctx = KernelContext::with_threads(1);
    for (rows, cols) in [(0, 5), (5, 0), (0, 0)] {
        let s = Softmax {
            rows,
            cols,
            prologue: Prologue::None,
            log: true,
        };
        assert!(softmax(&ctx, &s, &[], &mut []).is_ok());
    }
    let s = Softmax {
        rows: 2,
        cols: 3,
        prologue: Prologue::None,
        log: false,
    };
    let e = softmax(&ctx, &s, &[0.0; 5], &mut [0.0; 6]).unwrap_err();
    assert!(e.contains("2 rows of 3"), "{e}");
    let huge = Softmax {
        rows: usize::MAX,
        cols: 2,
        ..s
    };
    assert!(softmax(&ctx, &huge, &[0.0; 6], &mut [0.0; 6]).is_err());
}
