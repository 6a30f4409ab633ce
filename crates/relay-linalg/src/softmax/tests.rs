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

/// Asserts that `got` is `want` within the softmax's tolerance, naming `what` if not.
fn check(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1.0) + 1e-7;
        assert!(
            (f64::from(g) - w).abs() <= tol,
            "{what} element {k}: {g} want {w}"
        );
    }
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
                    check(
                        &run(&ctx, &s, &x),
                        &reference(&s, &x),
                        &format!("{isa:?} {s:?}"),
                    );
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

/// A masked attention's softmax: rows `[batch 2, heads 3, queries 4]` of 37 keys, a boolean
/// mask `[2, 1, 4, 37]` broadcast over the heads (`-inf` where unset, one query masked whole)
/// or the same bias as floats, scaled first, NaN results replaced by 0, on every path and
/// split over threads: as the reference of `x · k + bias`.
#[test]
fn a_broadcast_mask_or_bias_is_added_and_masked_rows_give_the_nan_value() {
    let (b, h, q, cols) = (2usize, 3usize, 4usize, 37usize);
    let s = Softmax {
        rows: b * h * q,
        cols,
        prologue: Prologue::Mul(0.5),
        log: false,
    };
    let mut mask = vec![1u8; b * q * cols];
    for (i, m) in mask.iter_mut().enumerate() {
        *m = u8::from((i * 7) % 5 != 0);
    }
    mask[cols..2 * cols].fill(0);
    let floats: Vec<f32> = mask
        .iter()
        .map(|&m| if m != 0 { 0.0 } else { f32::NEG_INFINITY })
        .collect();
    let x = data(s.rows * cols, 11, 6.0);
    // The reference: the bias row of score row (i, j, k) is mask row (i, 0, k).
    let mut biased = Vec::with_capacity(x.len());
    for (r, row) in x.chunks_exact(cols).enumerate() {
        let (i, k) = (r / (h * q), r % q);
        let bias = &floats[(i * q + k) * cols..][..cols];
        biased.extend(row.iter().zip(bias).map(|(&v, &m)| v * 0.5 + m));
    }
    let plain = Softmax {
        prologue: Prologue::None,
        ..s
    };
    let want: Vec<f64> = reference(&plain, &biased)
        .into_iter()
        .map(|v| if v.is_nan() { 0.0 } else { v })
        .collect();
    let dims = vec![b, h, q];
    let strides = vec![q, 0, 1];
    let values = [
        BiasValues::Mask {
            mask: &mask,
            keep: 0.0,
            drop: f32::NEG_INFINITY,
        },
        BiasValues::Add(&floats),
    ];
    for isa in Isa::available() {
        for threads in [1, 2] {
            let ctx = KernelContext::with_threads(threads).with_isa(isa).unwrap();
            for v in values {
                let extras = Extras {
                    bias: Some(Bias {
                        values: v,
                        dims: dims.clone(),
                        strides: strides.clone(),
                    }),
                    nan_to: Some(0.0),
                };
                let mut y = vec![f32::NAN; x.len()];
                softmax_with(&ctx, &s, &extras, &x, &mut y).unwrap();
                for (k, (&g, &w)) in y.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0) + 1e-7,
                        "{isa:?} {threads} threads {v:?} element {k}: {g} want {w}"
                    );
                }
            }
        }
    }
    // A bias too short for the rows is an error, not a read out of bounds.
    let extras = Extras {
        bias: Some(Bias {
            values: BiasValues::Add(&floats[..cols]),
            dims,
            strides,
        }),
        nan_to: None,
    };
    let mut y = vec![0.0; x.len()];
    let ctx = KernelContext::with_threads(1);
    assert!(softmax_with(&ctx, &s, &extras, &x, &mut y).is_err());
}

/// `Ops::exp_rows` on every path: each row's numerators `exp(v - max)` and their sum, against
/// `float64`, on rows whose values span 120 below the maximum (subnormal and zero
/// numerators included), at row lengths that leave vector remainders; a sums slice of the
/// wrong length is an error.
#[test]
fn unnormalized_rows_give_numerators_and_sums_on_every_path() {
    for isa in Isa::available() {
        let ops = crate::Ops::for_isa(isa).unwrap();
        for (rows, cols) in [(1, 1), (3, 17), (2, 64), (4, 100)] {
            let s = Softmax {
                rows,
                cols,
                prologue: Prologue::Div(2.0),
                log: false,
            };
            let x: Vec<f32> = data(rows * cols, cols as u64, 120.0);
            let (mut y, mut sums) = (vec![f32::NAN; x.len()], vec![f32::NAN; rows]);
            (ops.exp_rows)(&s, &x, &mut y, &mut sums).unwrap();
            for (r, row) in x.chunks_exact(cols).enumerate() {
                let v: Vec<f64> = row.iter().map(|&x| f64::from(x / 2.0)).collect();
                let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let want: Vec<f64> = v.iter().map(|&v| (v - max).exp()).collect();
                for (k, w) in want.iter().enumerate() {
                    let g = f64::from(y[r * cols + k]);
                    // `v - max` is rounded to float32 first: an error of its ulp in the power.
                    let d = (v[k] - max).abs();
                    let tol = w * (1e-6 + d * f64::from(f32::EPSILON)) + 1.5e-45;
                    assert!(
                        (g - w).abs() <= tol,
                        "{isa:?} row {r} element {k}: {g} want {w}"
                    );
                }
                let sum: f64 = want.iter().sum();
                let g = f64::from(sums[r]);
                assert!(
                    (g - sum).abs() <= 1e-6 * sum,
                    "{isa:?} row {r}: sum {g} want {sum}"
                );
            }
            let mut short = vec![0f32; rows.saturating_sub(1)];
            assert!((ops.exp_rows)(&s, &x, &mut y, &mut short).is_err());
        }
    }
}

/// Rows of every length up to five vectors of 16 lanes: the tail of a row past its whole
/// vectors (which the AVX2 path takes as the row's last vector, its first lanes computed
/// again) is stored and summed once, and a NaN there or just before it spreads over its row.
#[test]
fn every_row_tail_is_summed_once_and_a_nan_there_spreads() {
    for isa in Isa::available() {
        let ctx = KernelContext::with_threads(1).with_isa(isa).unwrap();
        for cols in 1..=80 {
            let s = Softmax {
                rows: 3,
                cols,
                prologue: Prologue::Mul(0.5),
                log: false,
            };
            let x = data(3 * cols, cols as u64 + 7, 30.0);
            check(
                &run(&ctx, &s, &x),
                &reference(&s, &x),
                &format!("{isa:?} {cols} columns"),
            );
            // A NaN in the last element of row 1 and, in row 2, just before the tail.
            let mut x = x;
            x[2 * cols - 1] = f32::NAN;
            x[2 * cols + (cols - cols % 8).saturating_sub(1)] = f32::NAN;
            let y = run(&ctx, &s, &x);
            assert!(
                y[..cols].iter().all(|v| v.is_finite()),
                "{isa:?} {cols}: {y:?}"
            );
            assert!(
                y[cols..].iter().all(|v| v.is_nan()),
                "{isa:?} {cols}: {y:?}"
            );
        }
    }
}
