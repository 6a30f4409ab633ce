//! Interpreter tests that need operator evaluation (`add`, `subtract`, `equal`, `divide`, ...):
//! arithmetic recursion at depth 10^6, the arithmetic prelude functions, and operator errors.

use relay_interp::{InterpOptions, RunErrorKind, format_value, result_type, run};
use relay_ir::{DType, Module, NDArray, Value};

fn module(text: &str) -> Module {
    let m = match relay_syntax::parse(text, "ops.relay") {
        Ok(m) => m,
        Err(e) => panic!("{}", relay_syntax::render_plain(&e)),
    };
    relay_types::check_module(&m).expect("type checks");
    m
}

fn i64_scalar(v: i128) -> Value {
    Value::tensor(NDArray::scalar_i128(DType::I64, v).unwrap())
}

fn scalar_of(v: &Value) -> i128 {
    v.as_tensor().expect("a tensor").to_i128_vec()[0]
}

fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

const SUMS: &str = r#"#[version = "0.0.5"]
def @sum_to(%n: int64, %acc: int64) -> int64 {
  if (%n == 0i64) {
    %acc
  } else {
    @sum_to(%n - 1i64, %acc + %n)
  }
}

def @sum_rec(%n: int64) -> int64 {
  if (%n == 0i64) {
    0i64
  } else {
    %n + @sum_rec(%n - 1i64)
  }
}

def @div(%a: int32, %b: int32) -> int32 {
  %a / %b
}
"#;

#[test]
fn operators_evaluate() {
    for name in ["add", "subtract", "multiply", "equal", "less", "divide"] {
        let op = relay_ops::lookup(name).expect("registered");
        assert!(op.eval.is_some(), "operator `{name}` has no evaluation yet");
    }
}

#[test]
fn tail_recursive_sum_to_a_million() {
    on_small_stack(|| {
        let m = module(SUMS);
        let opts = InterpOptions { max_frames: 5 };
        let v = run(
            &m,
            "sum_to",
            vec![i64_scalar(1_000_000), i64_scalar(0)],
            &opts,
        )
        .unwrap();
        assert_eq!(scalar_of(&v), 500_000_500_000);
    });
}

#[test]
fn non_tail_recursion_a_million_deep() {
    on_small_stack(|| {
        let m = module(SUMS);
        let opts = InterpOptions {
            max_frames: 1_000_010,
        };
        let v = run(&m, "sum_rec", vec![i64_scalar(1_000_000)], &opts).unwrap();
        assert_eq!(scalar_of(&v), 500_000_500_000);
        let e = run(
            &m,
            "sum_rec",
            vec![i64_scalar(100_000)],
            &InterpOptions { max_frames: 99_999 },
        )
        .unwrap_err();
        assert_eq!(e.kind(), RunErrorKind::RecursionLimit);
        assert!(
            e.to_string()
                .starts_with("recursion limit exceeded (99999 frames) in `@sum_rec` at ops.relay:"),
            "{e}"
        );
    });
}

#[test]
fn operator_errors_are_run_errors() {
    let m = module(SUMS);
    let i32s = |v| Value::tensor(NDArray::scalar_i128(DType::I32, v).unwrap());
    let v = run(&m, "div", vec![i32s(7), i32s(2)], &InterpOptions::default()).unwrap();
    assert_eq!(scalar_of(&v), 3);
    let e = run(&m, "div", vec![i32s(7), i32s(0)], &InterpOptions::default()).unwrap_err();
    assert_eq!(e.kind(), RunErrorKind::Operator);
    let msg = e.to_string();
    assert!(msg.contains("division by zero"), "{msg}");
    assert!(msg.contains("in `@div` at ops.relay:19:3"), "{msg}");
    // The operator's own error is typed: a division by zero is a value error.
    let op_error = e.op_error().expect("an operator error");
    assert_eq!(op_error.kind(), relay_ir::OpErrorKind::Value);
    assert_eq!(op_error.to_string(), "integer division by zero");
}

#[test]
fn arithmetic_prelude_functions() {
    let prelude = include_str!("../../../ir-tests/parse/std_prelude_rly.relay");
    let text = format!(
        "{prelude}\n{}",
        r#"
def @count(%n: int32) -> Option[(int32, int32)] {
  if (%n == 0) { None } else { Some((%n - 1, %n)) }
}

def @main() -> (int32, int32, int32, List[int32], List[int32], int32, int32, List[int32]) {
  let %xs = Cons(1, Cons(2, Cons(3, Nil)));
  let %t = Rose(1, Cons(Rose(2, Nil), Cons(Rose(3, Cons(Rose(4, Nil), Nil)), Nil)));
  let %inc = fn (%x: int32) -> int32 { %x + 1 };
  (@length(%xs), @sum(%xs), @nth(%xs, 2), @update(%xs, 1, 7),
   @filter(fn (%x: int32) { %x < 3 }, %xs), @size(%t), @iterate(%inc, 5)(10),
   @unfoldr(@count, 3))
}
"#
    );
    let m = module(&text);
    let v = run(&m, "main", Vec::new(), &InterpOptions::default()).unwrap();
    assert_eq!(
        format_value(&v, result_type(&m, "main").as_ref(), &m),
        "(3, 6, 3, Cons(1, Cons(7, Cons(3, Nil))), Cons(1, Cons(2, Nil)), 4, 15, \
         Cons(3, Cons(2, Cons(1, Nil))))"
    );
}

#[test]
fn tensors_flow_through_closures() {
    let text = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  let %scale = fn (%k: float32) { fn (%t: Tensor[(2, 2), float32]) { %t * %k } };
  let %double = %scale(2f);
  %double(%x) + %x
}
"#;
    let m = module(text);
    let x = Value::tensor(NDArray::from_f64_slice(DType::F32, &[2, 2], &[1., 2., 3., 4.]).unwrap());
    let v = run(&m, "main", vec![x], &InterpOptions::default()).unwrap();
    assert_eq!(format_value(&v, None, &m), "[[ 3.,  6.],\n [ 9., 12.]]");
}
