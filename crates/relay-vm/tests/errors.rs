//! Run-time errors of the VM: bad entry arguments are checked before anything runs (arity,
//! dtype, shape, a tuple for a tensor and the reverse, an unknown entry function), a `match`
//! no clause matches stops with `NoMatch` naming the function and the source location, and an
//! integer division by zero inside a kernel is a `Kernel` error. None of them panics, and the
//! VM still runs good inputs afterwards.

mod common;

use relay_interp::InterpOptions;
use relay_ir::{DType, Value};
use relay_vm::{Executable, Vm, VmError, VmErrorKind};

const ENTRY: &str = r#"#[version = "0.0.5"]
def @main(%weights: Tensor[(2, 3), float32], %pair: (Tensor[(3), float32], int32)) -> Tensor[(2, 3), float32] {
  add(%weights, multiply(%pair.0, cast(%pair.1, dtype="float32")))
}
"#;

fn weights(dtype: DType, shape: &[i64]) -> Value {
    let n: i64 = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
    common::tensor(dtype, shape, &values)
}

fn pair() -> Value {
    Value::tuple(vec![
        common::tensor(DType::F32, &[3], &[1.0, 2.0, 3.0]),
        common::scalar(DType::I32, 2.0),
    ])
}

/// Invokes `entry` with `args`, expecting an error of `kind` whose text names every one of
/// `names`.
fn expect_error(exe: &Executable, entry: &str, args: &[Value], kind: VmErrorKind, names: &[&str]) {
    let mut vm = Vm::new(exe);
    let err = vm
        .invoke(entry, args)
        .expect_err("the invocation is rejected");
    assert_eq!(err.kind, kind, "{err}");
    let text = err.to_string();
    for name in names {
        assert!(text.contains(name), "`{text}` does not name `{name}`");
    }
    // The VM is still usable: good arguments run.
    let good = vm
        .invoke("main", &[weights(DType::F32, &[2, 3]), pair()])
        .unwrap_or_else(|e| panic!("good arguments after a rejected call: {e}"));
    assert_eq!(
        good.as_tensor().expect("a tensor").to_f64_vec(),
        [2.0, 5.0, 8.0, 5.0, 8.0, 11.0]
    );
}

#[test]
fn wrong_arity_is_an_arity_error_naming_the_function() {
    let exe = common::build(ENTRY, "entry.relay");
    expect_error(&exe, "main", &[], VmErrorKind::Arity, &["main"]);
    expect_error(
        &exe,
        "main",
        &[weights(DType::F32, &[2, 3])],
        VmErrorKind::Arity,
        &["main"],
    );
    expect_error(
        &exe,
        "@main",
        &[weights(DType::F32, &[2, 3]), pair(), pair()],
        VmErrorKind::Arity,
        &["main"],
    );
}

#[test]
fn a_wrong_dtype_is_a_bad_argument_naming_the_parameter() {
    let exe = common::build(ENTRY, "entry.relay");
    expect_error(
        &exe,
        "main",
        &[weights(DType::I32, &[2, 3]), pair()],
        VmErrorKind::BadArgument,
        &["weights", "float32"],
    );
    expect_error(
        &exe,
        "main",
        &[weights(DType::F64, &[2, 3]), pair()],
        VmErrorKind::BadArgument,
        &["weights"],
    );
    let bad_field = Value::tuple(vec![
        common::tensor(DType::F32, &[3], &[1.0, 2.0, 3.0]),
        common::scalar(DType::I64, 2.0),
    ]);
    expect_error(
        &exe,
        "main",
        &[weights(DType::F32, &[2, 3]), bad_field],
        VmErrorKind::BadArgument,
        &["pair"],
    );
}

#[test]
fn a_wrong_shape_is_a_bad_argument_naming_the_parameter() {
    let exe = common::build(ENTRY, "entry.relay");
    for shape in [&[3, 2][..], &[6], &[2, 3, 1], &[]] {
        expect_error(
            &exe,
            "main",
            &[weights(DType::F32, shape), pair()],
            VmErrorKind::BadArgument,
            &["weights"],
        );
    }
    let short = Value::tuple(vec![
        common::tensor(DType::F32, &[2], &[1.0, 2.0]),
        common::scalar(DType::I32, 2.0),
    ]);
    expect_error(
        &exe,
        "main",
        &[weights(DType::F32, &[2, 3]), short],
        VmErrorKind::BadArgument,
        &["pair"],
    );
}

#[test]
fn a_tuple_for_a_tensor_and_a_tensor_for_a_tuple_are_bad_arguments() {
    let exe = common::build(ENTRY, "entry.relay");
    expect_error(
        &exe,
        "main",
        &[pair(), pair()],
        VmErrorKind::BadArgument,
        &["weights"],
    );
    expect_error(
        &exe,
        "main",
        &[weights(DType::F32, &[2, 3]), weights(DType::F32, &[3])],
        VmErrorKind::BadArgument,
        &["pair"],
    );
    let one_field = Value::tuple(vec![common::tensor(DType::F32, &[3], &[1.0, 2.0, 3.0])]);
    expect_error(
        &exe,
        "main",
        &[weights(DType::F32, &[2, 3]), one_field],
        VmErrorKind::BadArgument,
        &["pair"],
    );
}

#[test]
fn an_unknown_entry_function_is_an_unknown_function_error() {
    let exe = common::build(ENTRY, "entry.relay");
    expect_error(&exe, "nope", &[], VmErrorKind::UnknownFunction, &["nope"]);
    expect_error(
        &exe,
        "@missing",
        &[weights(DType::F32, &[2, 3]), pair()],
        VmErrorKind::UnknownFunction,
        &["missing"],
    );
}

const NO_MATCH: &str = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @hd(%xs: List[Tensor[(2), float32]]) -> Tensor[(2), float32] {
  match? (%xs) {
    Cons(%x, _) => %x,
  }
}

def @main(%x: Tensor[(2), float32], %n: int32) -> Tensor[(2), float32] {
  let %xs = if (%n > 0) { Cons(%x, Nil) } else { Nil };
  add(@hd(%xs), 1f)
}
"#;

/// The 1-based line and column of the `match?` in [`NO_MATCH`].
const MATCH_LINE: usize = 8;
const MATCH_COLUMN: usize = 3;

#[test]
fn a_failing_match_is_no_match_with_function_and_location() {
    let line = NO_MATCH.lines().nth(MATCH_LINE - 1).unwrap_or("");
    assert_eq!(
        line.find("match?"),
        Some(MATCH_COLUMN - 1),
        "the test's own program"
    );
    let module = common::typed(NO_MATCH, "no_match.relay").expect("the program type-checks");
    let x = common::tensor(DType::F32, &[2], &[1.0, 2.0]);
    let interp = relay_interp::run(
        &module,
        "main",
        vec![x.clone(), common::scalar(DType::I32, 0.0)],
        &InterpOptions::default(),
    )
    .expect_err("the interpreter fails too");
    let location = format!("no_match.relay:{MATCH_LINE}:{MATCH_COLUMN}");
    assert_eq!(interp.location(), Some(location.as_str()), "{interp}");

    for config in common::Config::ALL {
        let exe = common::build_with(NO_MATCH, "no_match.relay", config);
        let mut vm = Vm::new(&exe);
        let err: VmError = vm
            .invoke("main", &[x.clone(), common::scalar(DType::I32, 0.0)])
            .expect_err("Nil has no clause");
        let bytecode = common::disassemble(&exe);
        assert_eq!(
            err.kind,
            VmErrorKind::NoMatch,
            "{config}: {err}\n{bytecode}"
        );
        assert_eq!(
            err.function.as_deref(),
            Some("hd"),
            "{config}: {err}\n{bytecode}"
        );
        assert_eq!(
            err.location.as_deref(),
            Some(location.as_str()),
            "{config}: {err}\n{bytecode}"
        );
        // The span is the same place, as a byte range a diagnostic can point at; the loaded
        // executable keeps only the text.
        assert_eq!(
            err.span.map(|span| span.lo as usize),
            interp.span().map(|span| span.lo as usize),
            "{config}: {err}"
        );
        let loaded = relay_vm::Executable::decode(&exe.to_bytes().expect("saves")).expect("loads");
        let from_file = Vm::new(&loaded)
            .invoke("main", &[x.clone(), common::scalar(DType::I32, 0.0)])
            .expect_err("Nil has no clause");
        assert_eq!(from_file.location, err.location, "{config}");
        assert_eq!(from_file.span, None, "{config}");
        let text = err.to_string();
        assert!(
            text.contains("`@hd`") && text.contains(&location),
            "{config}: `{text}` names the function and the location"
        );
        // A list that has a head runs.
        let ok = vm
            .invoke("main", &[x.clone(), common::scalar(DType::I32, 1.0)])
            .unwrap_or_else(|e| panic!("{config}: Cons matches: {e}"));
        assert_eq!(ok.as_tensor().expect("a tensor").to_f64_vec(), [2.0, 3.0]);
    }
}

const DIVIDE: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(4), int32], %y: Tensor[(4), int32]) -> (Tensor[(4), int32], Tensor[(4), int32]) {
  (add(divide(%x, %y), 1), floor_mod(%x, %y))
}
"#;

#[test]
fn integer_division_by_zero_in_a_kernel_is_a_kernel_error() {
    let module = common::typed(DIVIDE, "divide.relay").expect("the program type-checks");
    let x = common::tensor(DType::I32, &[4], &[7.0, -7.0, 9.0, 4.0]);
    let good = common::tensor(DType::I32, &[4], &[2.0, 2.0, -4.0, 1.0]);
    let zero = common::tensor(DType::I32, &[4], &[2.0, 2.0, 0.0, 1.0]);
    let expected = relay_interp::run(
        &module,
        "main",
        vec![x.clone(), good.clone()],
        &InterpOptions::default(),
    )
    .expect("no zero divisor");
    assert!(
        relay_interp::run(
            &module,
            "main",
            vec![x.clone(), zero.clone()],
            &InterpOptions::default()
        )
        .is_err(),
        "the interpreter fails on a zero divisor"
    );
    for config in common::Config::ALL {
        let exe = common::build_with(DIVIDE, "divide.relay", config);
        let bytecode = common::disassemble(&exe);
        let mut vm = Vm::new(&exe);
        let err = vm
            .invoke("main", &[x.clone(), zero.clone()])
            .expect_err("a zero divisor");
        assert_eq!(err.kind, VmErrorKind::Kernel, "{config}: {err}\n{bytecode}");
        assert_eq!(err.function.as_deref(), Some("main"), "{config}: {err}");
        // The VM recovers: the same VM divides by non-zero divisors.
        let got = vm
            .invoke("main", &[x.clone(), good.clone()])
            .unwrap_or_else(|e| panic!("{config}: {e}\n{bytecode}"));
        if let Err(why) = relay_interp::compare_values(&got, &expected, 0.0, 0.0) {
            panic!("{config}: {why}\n{bytecode}");
        }
    }
}
