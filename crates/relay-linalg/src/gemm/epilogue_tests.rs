//! The GEMM's epilogue against the unfused computation (the product, then each step and
//! clamp element by element): bit for bit, on every ISA this CPU runs, for operands
//! broadcast along rows or columns or read whole, results stored row- or column-major (a
//! narrow product is computed transposed), products deeper than one block, one and two
//! threads, with NaN and signed zeros through the clamps; and the host functions' epilogue
//! argument.

use super::epilogue::{EpilogueCall, Epilogued, Lower, Step, StepCall};
use super::*;

/// An epilogue operand: `rows × cols` values (row-major), and how it is broadcast.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// One value per row (column stride 0).
    PerRow,
    /// One value per column (row stride 0).
    PerColumn,
    /// One value per element.
    Whole,
}

/// The values of an operand of `shape` for an `m × n` result, with NaN and negative zero
/// among them when `specials`, stored compactly; and its row and column strides.
fn operand<T: Epilogued + From<i8>>(
    shape: Shape,
    (m, n): (usize, usize),
    seed: usize,
    specials: bool,
) -> (Vec<T>, isize, isize) {
    let (len, rs, cs) = match shape {
        Shape::PerRow => (m, 1, 0),
        Shape::PerColumn => (n, 0, 1),
        Shape::Whole => (m * n, n as isize, 1),
    };
    let data = (0..len)
        .map(|i| match (i * 5 + seed) % 11 {
            0 if specials => T::from_f64(f64::NAN),
            1 if specials => T::from_f64(-0.0),
            r => T::from_f64(r as f64 / 4.0 - 1.25),
        })
        .collect();
    (data, rs, cs)
}

/// One epilogue to test: steps (kind and operand shape), upper and lower clamps.
type Spec = (&'static [(Step, Shape)], Option<f64>, Lower<f64>);

const SPECS: &[Spec] = &[
    // ResNet: batch norm, residual, relu.
    (
        &[
            (Step::Mul, Shape::PerRow),
            (Step::Add, Shape::PerRow),
            (Step::Add, Shape::Whole),
        ],
        None,
        Lower::Relu(0.0),
    ),
    // MobileNetV2: batch norm, ReLU6.
    (
        &[(Step::Mul, Shape::PerRow), (Step::Add, Shape::PerRow)],
        Some(6.0),
        Lower::Clip(0.0),
    ),
    // A dense layer's bias.
    (&[(Step::Add, Shape::PerColumn)], None, Lower::None),
    // Four steps of every kind (the decoding loop), an upper clamp alone.
    (
        &[
            (Step::Add, Shape::Whole),
            (Step::Mul, Shape::PerColumn),
            (Step::Add, Shape::PerRow),
            (Step::Mul, Shape::Whole),
        ],
        Some(0.5),
        Lower::None,
    ),
    // Clamps alone.
    (&[], Some(1.0), Lower::Relu(-1.0)),
];

/// `c` (row-major `m × n`) through `spec` with operands `ops`, element by element.
fn reference<T: Epilogued>(c: &mut [T], n: usize, spec: &Spec, ops: &[(Vec<T>, isize, isize)]) {
    for (e, v) in c.iter_mut().enumerate() {
        let (i, j) = ((e / n) as isize, (e % n) as isize);
        let mut x = *v;
        for (&(kind, _), (data, rs, cs)) in spec.0.iter().zip(ops) {
            let o = data[(i * rs + j * cs) as usize];
            x = if kind == Step::Mul { x * o } else { x + o };
        }
        if let Some(hi) = spec.1.map(T::from_f64)
            && hi < x
        {
            x = hi;
        }
        x = match spec.2 {
            Lower::None => x,
            Lower::Relu(lo) => {
                let lo = T::from_f64(lo);
                if x > lo { x } else { lo }
            }
            Lower::Clip(lo) => {
                let lo = T::from_f64(lo);
                if x < lo { lo } else { x }
            }
        };
        *v = x;
    }
}

/// Whether two values are the same bits (NaN included).
trait Bits {
    fn bits(self) -> u64;
}

impl Bits for f32 {
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
}

impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

fn check<T: Element + Operand<T> + From<i8> + Bits>() {
    // Small integers: exact products in any order, so the epilogue alone decides the bits.
    let values = |len: usize, seed: usize| -> Vec<T> {
        (0..len)
            .map(|i| T::from(((i * 7 + seed * 13) % 9) as i8 - 4))
            .collect()
    };
    let shapes = [
        (1, 3, 5),
        (13, 7, 33),
        (37, 300, 49),
        (64, 64, 196),
        (25, 9, 70),
    ];
    for isa in Isa::available() {
        for threads in [1, 2] {
            let ctx = super::tests::on(isa, threads);
            for &(m, k, n) in &shapes {
                let (a, b) = (values(m * k, 1), values(k * n, 2));
                for (s, spec) in SPECS.iter().enumerate() {
                    for column_major in [false, true] {
                        let ops: Vec<(Vec<T>, isize, isize)> = spec
                            .0
                            .iter()
                            .enumerate()
                            .map(|(q, &(_, shape))| operand(shape, (m, n), q + s, true))
                            .collect();
                        let mut want = vec![T::ZERO; m * n];
                        for i in 0..m {
                            for j in 0..n {
                                want[i * n + j] = (0..k)
                                    .fold(T::ZERO, |acc, l| acc + a[i * k + l] * b[l * n + j]);
                            }
                        }
                        reference(&mut want, n, spec, &ops);
                        let mut steps = [None; super::epilogue::MAX_STEPS];
                        for (slot, (&(kind, _), (data, rs, cs))) in
                            steps.iter_mut().zip(spec.0.iter().zip(&ops))
                        {
                            *slot = Some((
                                kind,
                                Matrix {
                                    ptr: data.as_ptr(),
                                    rows: m,
                                    cols: n,
                                    rs: *rs,
                                    cs: *cs,
                                },
                            ));
                        }
                        let epilogue = Epilogue {
                            steps,
                            upper: spec.1.map(T::from_f64),
                            lower: match spec.2 {
                                Lower::None => Lower::None,
                                Lower::Relu(lo) => Lower::Relu(T::from_f64(lo)),
                                Lower::Clip(lo) => Lower::Clip(T::from_f64(lo)),
                            },
                        };
                        let mut c = vec![T::from(99); m * n];
                        let (rsc, csc) = if column_major {
                            (1, m as isize)
                        } else {
                            (n as isize, 1)
                        };
                        let view = |ptr: *const T, rows, cols, rs, cs| Matrix {
                            ptr,
                            rows,
                            cols,
                            rs,
                            cs,
                        };
                        // SAFETY: the vectors hold the views.
                        let rc = unsafe {
                            gemm(
                                Some(&ctx),
                                view(a.as_ptr(), m, k, k as isize, 1),
                                view(b.as_ptr(), k, n, n as isize, 1),
                                view(c.as_mut_ptr(), m, n, rsc, csc),
                                Some(&epilogue),
                            )
                        };
                        assert_eq!(rc, 0);
                        for i in 0..m {
                            for j in 0..n {
                                let got = c[(i as isize * rsc + j as isize * csc) as usize];
                                assert_eq!(
                                    got.bits(),
                                    want[i * n + j].bits(),
                                    "{m}x{k}x{n} spec {s} column-major {column_major}, \
                                     {threads} threads, {isa:?}: ({i}, {j}) {got:?} vs {:?}",
                                    want[i * n + j]
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn float32_epilogues_match_the_unfused_computation() {
    check::<f32>();
}

#[test]
fn float64_epilogues_match_the_unfused_computation() {
    check::<f64>();
}

/// An epilogue call of kind 0 steps and no clamps but `upper_kind`/`lower_kind`.
fn call(upper_kind: i64, lower_kind: i64) -> EpilogueCall {
    let none = StepCall {
        kind: 0,
        ptr: std::ptr::null(),
        rs: 0,
        cs: 0,
    };
    EpilogueCall {
        steps: [none; super::epilogue::MAX_STEPS],
        upper_kind,
        upper: 6.0,
        lower_kind,
        lower: 0.0,
    }
}

#[test]
fn malformed_epilogue_calls_are_refused() {
    assert!(call(0, 0).decode::<f32>(2, 2).is_some());
    assert!(call(1, 2).decode::<f32>(2, 2).is_some());
    assert!(call(2, 0).decode::<f32>(2, 2).is_none());
    assert!(call(0, 3).decode::<f32>(2, 2).is_none());
    let x = [1f32; 4];
    let mut bad = call(0, 0);
    bad.steps[0] = StepCall {
        kind: 3,
        ptr: x.as_ptr().cast(),
        rs: 1,
        cs: 0,
    };
    assert!(bad.decode::<f32>(2, 2).is_none());
    bad.steps[0].kind = 1;
    assert!(bad.decode::<f32>(2, 2).is_some());
    bad.steps[0].rs = -1;
    assert!(bad.decode::<f32>(2, 2).is_none());
    bad.steps[0].rs = 1;
    bad.steps[0].ptr = std::ptr::null();
    assert!(bad.decode::<f32>(2, 2).is_none());
}
