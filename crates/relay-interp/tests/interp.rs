//! End-to-end tests of the interpreter on programs that need no operator evaluation: closures,
//! recursion (global, local, mutual, tail and deep), ADTs and nested patterns, tuples,
//! references, polymorphic prelude functions, error reporting and value formatting.

use relay_interp::{
    InterpOptions, RunError, RunErrorKind, apply, drop_value, format_value, result_type, run,
};
use relay_ir::{DType, Module, NDArray, Value};

/// Parses and type-checks `text`.
fn module(text: &str) -> Module {
    let m = parse(text);
    if let Err(e) = relay_types::check_module(&m) {
        panic!("{}", relay_syntax::render_plain(&e));
    }
    m
}

/// Parses `text` without type-checking it (for ill-typed programs the interpreter must still
/// report cleanly).
fn parse(text: &str) -> Module {
    match relay_syntax::parse(text, "test.relay") {
        Ok(m) => m,
        Err(e) => panic!("{}", relay_syntax::render_plain(&e)),
    }
}

/// Runs `@main` with default options and prints the result with its declared type.
fn run_main(m: &Module, args: Vec<Value>) -> Result<String, RunError> {
    let v = run(m, "main", args, &InterpOptions::default())?;
    Ok(format_value(&v, result_type(m, "main").as_ref(), m))
}

/// Runs `text`'s `@main` without arguments and returns the printed result.
fn eval(text: &str) -> String {
    let m = module(text);
    run_main(&m, Vec::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `text`'s `@main` without arguments and returns the error. The program is not
/// type-checked: some of these are ill-typed on purpose.
fn eval_err(text: &str) -> RunError {
    let m = parse(text);
    match run(&m, "main", Vec::new(), &InterpOptions::default()) {
        Ok(v) => panic!("expected an error, got {}", format_value(&v, None, &m)),
        Err(e) => e,
    }
}

/// Runs `f` on a thread with a 2 MB stack.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic")
}

fn i32_scalar(v: i128) -> Value {
    Value::tensor(NDArray::scalar_i128(DType::I32, v).unwrap())
}

const LIST: &str = r#"
type List[A] {
  Cons(A, List[A]),
  Nil,
}

type Option[A] {
  Some(A),
  None,
}

type nat {
  zero,
  succ(nat),
}
"#;

fn with_list(rest: &str) -> String {
    format!("#[version = \"0.0.5\"]\n{LIST}\n{rest}")
}

/// The prelude of TVM (ir-tests/parse/std_prelude_rly.relay) followed by `rest`.
fn with_prelude(rest: &str) -> String {
    let prelude = include_str!("../../../ir-tests/parse/std_prelude_rly.relay");
    format!("{prelude}\n{rest}")
}

#[test]
fn constants_tuples_and_projections() {
    let text = with_list(
        r#"
def @main() -> (int32, (float32, bool), ()) {
  let %t = (1, (2.5f, True), ());
  (%t.0, %t.1, %t.2)
}
"#,
    );
    assert_eq!(eval(&text), "(1, (2.5, True), ())");
}

#[test]
fn constructors_and_nested_match() {
    let text = with_list(
        r#"
def @second[A](%xs: List[A], %default: A) -> A {
  match (%xs) {
    Cons(_, Cons(%y, _)) => %y,
    Cons(_, Nil) => %default,
    Nil => %default,
  }
}

def @main() -> (int32, int32, int32) {
  (@second(Cons(1, Cons(2, Cons(3, Nil))), 0), @second(Cons(1, Nil), 7), @second(Nil, 9))
}
"#,
    );
    assert_eq!(eval(&text), "(2, 7, 9)");
}

#[test]
fn tuple_patterns_and_clause_order() {
    let text = with_list(
        r#"
def @classify(%p: (Option[int32], Option[int32])) -> int32 {
  match (%p) {
    (Some(%a), Some(_)) => %a,
    (None, Some(%b)) => %b,
    (Some(_), _) => 100,
    _ => 200,
  }
}

def @main() -> List[int32] {
  Cons(@classify((Some(1), Some(2))), Cons(@classify((None, Some(3))),
    Cons(@classify((Some(4), None)), Cons(@classify((None, None)), Nil))))
}
"#,
    );
    assert_eq!(eval(&text), "Cons(1, Cons(3, Cons(100, Cons(200, Nil))))");
}

#[test]
fn closures_capture_by_value_and_curry() {
    let text = with_list(
        r#"
def @const[A, B](%x: A) -> fn(B) -> A {
  fn (%y: B) -> A { %x }
}

def @pair_with[A, B](%x: A) -> fn(B) -> fn() -> (A, B) {
  fn (%y: B) -> fn() -> (A, B) { fn () -> (A, B) { (%x, %y) } }
}

def @main() -> ((int32, float32), int32, int32) {
  let %k = @const(5);
  let %first = %k(1f);
  let %p = @pair_with(1)(2f)();
  (%p, %first, @const(6)(Nil))
}
"#,
    );
    assert_eq!(eval(&text), "((1, 2.), 5, 6)");
}

#[test]
fn globals_and_constructors_are_values() {
    let text = with_prelude(
        r#"
def @main() -> (List[Option[int32]], List[int32], Option[int32]) {
  let %xs = Cons(1, Cons(2, Cons(3, Nil)));
  let %some = Some;
  (@map(Some, %xs), @map(@id, %xs), %some(4))
}
"#,
    );
    assert_eq!(
        eval(&text),
        "(Cons(Some(1), Cons(Some(2), Cons(Some(3), Nil))), Cons(1, Cons(2, Cons(3, Nil))), Some(4))"
    );
}

#[test]
fn prelude_functions_without_arithmetic() {
    let text = with_prelude(
        r#"
def @step(%xs: List[int32]) -> Option[(List[int32], int32)] {
  match (%xs) {
    Cons(%x, %rest) => Some((%rest, %x)),
    Nil => None,
  }
}

def @main() -> (List[int32], List[int32], List[(int32, float32)], List[int32], List[int32],
                int32, List[int32], List[int32], int32, int32) {
  let %xs = Cons(1, Cons(2, Cons(3, Nil)));
  let %ys = Cons(1f, Cons(2f, Nil));
  (@rev(%xs), @concat(%xs, Cons(4, Nil)), @zip(%xs, %ys), @unfoldr(@step, %xs),
   @unfoldl(@step, %xs), @hd(%xs), @tl(%xs), @foldl(@flip(fn (%x: int32, %acc: List[int32]) {
     Cons(%x, %acc) }), Nil, %xs), @foldr1(fn (%a: int32, %b: int32) { %a }, %xs),
   @foldr(fn (%x: int32, %acc: int32) { %x }, 0, %xs))
}
"#,
    );
    assert_eq!(
        eval(&text),
        "(Cons(3, Cons(2, Cons(1, Nil))), Cons(1, Cons(2, Cons(3, Cons(4, Nil)))), \
         Cons((1, 1.), Cons((2, 2.), Nil)), Cons(1, Cons(2, Cons(3, Nil))), \
         Cons(3, Cons(2, Cons(1, Nil))), 1, Cons(2, Cons(3, Nil)), \
         Cons(3, Cons(2, Cons(1, Nil))), 1, 1)"
    );
}

#[test]
fn prelude_trees_filter_and_accumulating_maps() {
    let text = with_prelude(
        r#"
def @is_some(%o: Option[int32]) -> bool {
  match (%o) {
    Some(_) => True,
    None => False,
  }
}

def @main() -> (Tree[Option[int32]], List[Option[int32]], (int32, List[(int32, int32)]), (int32, List[(int32, int32)])) {
  let %t = Rose(1, Cons(Rose(2, Nil), Cons(Rose(3, Cons(Rose(4, Nil), Nil)), Nil)));
  let %os = Cons(Some(1), Cons(None, Cons(Some(3), Nil)));
  let %f = fn (%acc: int32, %x: int32) { (%x, (%acc, %x)) };
  (@tmap(Some, %t), @filter(@is_some, %os), @map_accuml(%f, 0, Cons(1, Cons(2, Nil))),
   @map_accumr(%f, 0, Cons(1, Cons(2, Nil))))
}
"#,
    );
    assert_eq!(
        eval(&text),
        "(Rose(Some(1), Cons(Rose(Some(2), Nil), Cons(Rose(Some(3), Cons(Rose(Some(4), Nil), \
         Nil)), Nil))), Cons(Some(1), Cons(Some(3), Nil)), (2, Cons((1, 2), Cons((0, 1), Nil))), \
         (1, Cons((2, 1), Cons((0, 2), Nil))))"
    );
}

const NAT: &str = r#"
def @nat_add(%x: nat, %y: nat) -> nat {
  match (%x) {
    zero => %y,
    succ(%p) => succ(@nat_add(%p, %y)),
  }
}

def @nat_double(%x: nat) -> nat {
  match (%x) {
    zero => zero,
    succ(%p) => succ(succ(@nat_double(%p))),
  }
}

def @nat_iterate[A](%f: fn(A) -> A, %num: nat) -> fn(A) -> A {
  match (%num) {
    zero => fn (%x: A) -> A { %x },
    succ(%p) => fn (%x: A) -> A { %f(@nat_iterate(%f, %p)(%x)) },
  }
}

def @is_even(%n: nat) -> bool {
  match (%n) {
    zero => True,
    succ(%p) => @is_odd(%p),
  }
}

def @is_odd(%n: nat) -> bool {
  match (%n) {
    zero => False,
    succ(%p) => @is_even(%p),
  }
}
"#;

#[test]
fn peano_naturals_and_mutual_recursion() {
    let text = with_list(&format!(
        r#"{NAT}
def @main() -> (nat, nat, nat, bool, bool) {{
  let %two = succ(succ(zero));
  let %three = succ(%two);
  (@nat_add(%two, %three), @nat_double(%three), @nat_iterate(fn (%n: nat) {{ succ(%n) }}, %two)(%three),
   @is_even(@nat_add(%two, %three)), @is_odd(%three))
}}
"#
    ));
    let five = "succ(succ(succ(succ(succ(zero)))))";
    let six = "succ(succ(succ(succ(succ(succ(zero))))))";
    assert_eq!(eval(&text), format!("({five}, {six}, {five}, False, True)"));
}

#[test]
fn recursive_local_functions() {
    let text = with_list(
        r#"
def @main() -> (nat, List[int32]) {
  let %len = fn (%xs: List[int32]) -> nat {
    match (%xs) {
      Cons(_, %rest) => succ(%len(%rest)),
      Nil => zero,
    }
  };
  let %append = fn (%xs: List[int32], %ys: List[int32]) -> List[int32] {
    match (%xs) {
      Cons(%x, %rest) => Cons(%x, %append(%rest, %ys)),
      Nil => %ys,
    }
  };
  (%len(Cons(1, Cons(2, Nil))), %append(Cons(1, Nil), Cons(2, Cons(3, Nil))))
}
"#,
    );
    assert_eq!(
        eval(&text),
        "(succ(succ(zero)), Cons(1, Cons(2, Cons(3, Nil))))"
    );
}

#[test]
fn references_are_shared_and_mutable() {
    let text = with_list(
        r#"
def @main() -> (int32, int32, (), ref(int32)) {
  let %r = ref(1);
  let %read = fn () -> int32 { ref_read(%r) };
  let %before = %read();
  let %unit = ref_write(%r, 2);
  let %alias = %r;
  ref_write(%alias, 3);
  (%before, %read(), %unit, %r)
}
"#,
    );
    assert_eq!(eval(&text), "(1, 3, (), ref(3))");
}

#[test]
fn if_selects_a_branch() {
    let text = with_list(
        r#"
def @pick(%c: bool) -> Option[int32] {
  if (%c) { Some(1) } else { None }
}

def @main() -> (Option[int32], Option[int32]) {
  (@pick(True), @pick(False))
}
"#,
    );
    assert_eq!(eval(&text), "(Some(1), None)");
}

#[test]
fn entry_arguments_are_bound_and_checked() {
    let text = with_list(
        r#"
def @main(%x: Tensor[(2), int32], %y: (float32, Tensor[(?, 2), int32])) {
  (%y.1, %x)
}
"#,
    );
    let m = module(&text);
    let x = Value::tensor(NDArray::from_i128_slice(DType::I32, &[2], &[1, 2]).unwrap());
    let y1 = Value::tensor(NDArray::from_i128_slice(DType::I32, &[1, 2], &[3, 4]).unwrap());
    let y0 = Value::tensor(NDArray::scalar_f64(DType::F32, 0.5).unwrap());
    let y = Value::tuple(vec![y0.clone(), y1.clone()]);
    assert_eq!(
        run_main(&m, vec![x.clone(), y]).unwrap(),
        "([[3, 4]], [1, 2])"
    );

    let e = run_main(&m, vec![x.clone()]).unwrap_err();
    assert_eq!(e.kind(), RunErrorKind::Arity);
    assert_eq!(
        e.to_string(),
        "`@main` takes 2 arguments, got 1 at test.relay:19:1"
    );

    let e = run_main(&m, vec![x.clone(), x.clone()]).unwrap_err();
    assert_eq!(e.kind(), RunErrorKind::BadArgument);
    assert!(
        e.to_string().starts_with(
            "argument `%y` of `@main` expects `(float32, Tensor[(?, 2), int32])`, got a tensor"
        ),
        "{e}"
    );

    let bad = Value::tensor(NDArray::from_i128_slice(DType::I64, &[2], &[1, 2]).unwrap());
    let e = run_main(&m, vec![bad, Value::tuple(vec![y0, y1])]).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "argument `%x` of `@main` expects `Tensor[(2), int32]`, got `Tensor[(2), int64]`"
        ),
        "{e}"
    );

    let e = run(&m, "@nope", Vec::new(), &InterpOptions::default()).unwrap_err();
    assert_eq!(e.kind(), RunErrorKind::UnknownFunction);
    assert_eq!(e.to_string(), "no global function `@nope` in the module");
}

#[test]
fn failing_match_names_function_and_location() {
    let text = with_prelude("def @main() -> int32 {\n  @hd(Nil)\n}\n");
    let e = eval_err(&text);
    assert_eq!(e.kind(), RunErrorKind::NoMatch);
    let msg = e.to_string();
    assert!(
        msg.starts_with("no match clause matched in `@hd` at test.relay:"),
        "{msg}"
    );
    let rendered = relay_syntax::render_plain(&e);
    assert!(rendered.contains("relay::run::no_match"), "{rendered}");
    assert!(rendered.contains("match? (%xs)"), "{rendered}");
}

#[test]
fn incomplete_match_fails_at_run_time() {
    let text = with_list("def @main() -> int32 {\n  match (None) {\n    Some(%x) => %x,\n  }\n}\n");
    let e = eval_err(&text);
    assert_eq!(e.kind(), RunErrorKind::NoMatch);
    assert!(e.to_string().contains("`@main` at test.relay:"), "{e}");
}

#[test]
fn calling_a_non_function_is_an_error() {
    let text = with_list("def @main() {\n  let %x = (1, 2);\n  %x(3)\n}\n");
    let e = eval_err(&text);
    assert_eq!(e.kind(), RunErrorKind::NotAFunction);
    assert!(
        e.to_string()
            .starts_with("cannot call a tuple: expected a function in `@main`"),
        "{e}"
    );
}

#[test]
fn wrong_argument_count_is_an_error() {
    let text = with_list(
        "def @f(%x: int32) -> int32 { %x }\ndef @main() -> int32 {\n  let %g = @f;\n  %g(1, 2)\n}\n",
    );
    let e = eval_err(&text);
    assert_eq!(e.kind(), RunErrorKind::Arity);
    assert!(
        e.to_string()
            .starts_with("`@f` takes 1 argument, got 2 in `@main`"),
        "{e}"
    );
}

#[test]
fn operator_without_evaluation_is_an_error() {
    let Some(op) = relay_ops::all().find(|op| op.eval.is_none() && op.attrs.is_empty()) else {
        return;
    };
    let m = Module::default();
    let x = relay_ir::Expr::constant(NDArray::scalar_f64(DType::F32, 1.0).unwrap());
    let call = relay_ir::Expr::call(
        relay_ir::Expr::new(relay_ir::ExprKind::Op(op), relay_ir::Span::DUMMY),
        vec![x],
    );
    let e = relay_interp::run_expr(&m, &call, &InterpOptions::default()).unwrap_err();
    assert_eq!(e.kind(), RunErrorKind::UnsupportedOperator);
    assert_eq!(
        e.to_string(),
        format!("operator `{}` cannot be evaluated", op.name)
    );
}

/// A list of `n` zeros built in Rust.
fn long_list(n: usize) -> Value {
    let zero = i32_scalar(0);
    let mut list = Value::adt(1, Vec::new());
    for _ in 0..n {
        list = Value::adt(0, vec![zero.clone(), list]);
    }
    list
}

/// The length of a Peano natural, counted iteratively.
fn nat_value(mut v: &Value) -> usize {
    let mut n = 0;
    while let Value::Adt(adt) = v {
        match adt.fields.first() {
            Some(next) => {
                n += 1;
                v = next;
            }
            None => break,
        }
    }
    n
}

const DEEP: &str = r#"
def @len(%xs: List[int32]) -> nat {
  match (%xs) {
    Cons(_, %rest) => succ(@len(%rest)),
    Nil => zero,
  }
}

def @len_acc(%xs: List[int32], %acc: nat) -> nat {
  match (%xs) {
    Cons(_, %rest) => @len_acc(%rest, succ(%acc)),
    Nil => %acc,
  }
}

def @len_closure(%xs: List[int32]) -> nat {
  let %go = fn (%ys: List[int32], %acc: nat) -> nat {
    match (%ys) {
      Cons(_, %rest) => %go(%rest, succ(%acc)),
      Nil => %acc,
    }
  };
  %go(%xs, zero)
}

def @ping(%xs: List[int32], %acc: nat) -> nat {
  match (%xs) {
    Cons(_, %rest) => @pong(%rest, succ(%acc)),
    Nil => %acc,
  }
}

def @pong(%xs: List[int32], %acc: nat) -> nat {
  match (%xs) {
    Cons(_, %rest) => @ping(%rest, succ(%acc)),
    Nil => %acc,
  }
}
"#;

#[test]
fn deep_non_tail_recursion_does_not_overflow() {
    on_small_stack(|| {
        let m = module(&with_list(DEEP));
        let n = 1_000_000;
        let opts = InterpOptions { max_frames: n + 10 };
        let v = run(&m, "len", vec![long_list(n)], &opts).unwrap();
        assert_eq!(nat_value(&v), n);
        drop_value(v);
    });
}

#[test]
fn tail_calls_run_in_constant_frames() {
    on_small_stack(|| {
        let m = module(&with_list(DEEP));
        // Five frames suffice: self, closure and mutual tail calls replace their caller's frame.
        let opts = InterpOptions { max_frames: 5 };
        for (f, n) in [
            ("len_acc", 1_000_000),
            ("len_closure", 100_000),
            ("ping", 100_001),
        ] {
            let list = long_list(n);
            let v = match f {
                "len_closure" => run(&m, f, vec![list.clone()], &opts),
                _ => run(&m, f, vec![list.clone(), Value::adt(0, Vec::new())], &opts),
            }
            .unwrap_or_else(|e| panic!("{f}: {e}"));
            assert_eq!(nat_value(&v), n, "{f}");
            drop_value(v);
            drop_value(list);
        }
    });
}

#[test]
fn recursion_limit_is_an_error() {
    on_small_stack(|| {
        let m = module(&with_list(DEEP));
        let opts = InterpOptions { max_frames: 1000 };
        let e = run(&m, "len", vec![long_list(5000)], &opts).unwrap_err();
        assert_eq!(e.kind(), RunErrorKind::RecursionLimit);
        assert!(
            e.to_string()
                .starts_with("recursion limit exceeded (1000 frames) in `@len` at test.relay:"),
            "{e}"
        );
        // Exactly at the limit still runs.
        let v = run(&m, "len", vec![long_list(999)], &opts).unwrap();
        assert_eq!(nat_value(&v), 999);
    });
}

#[test]
fn returned_closures_can_be_applied() {
    let text = with_list(&format!(
        "{NAT}\ndef @main() -> fn(nat) -> nat {{\n  fn (%n: nat) {{ @nat_double(%n) }}\n}}\n"
    ));
    let m = module(&text);
    let f = run(&m, "main", Vec::new(), &InterpOptions::default()).unwrap();
    assert_eq!(format_value(&f, None, &m), "<closure>");
    let one = Value::adt(1, vec![Value::adt(0, Vec::new())]);
    let v = apply(&m, f, vec![one], &InterpOptions::default()).unwrap();
    assert_eq!(nat_value(&v), 2);
}

#[test]
fn adt_without_type_prints_tags() {
    let text = with_list("def @main() {\n  Cons(Some(1), Nil)\n}\n");
    let m = module(&text);
    let v = run(&m, "main", Vec::new(), &InterpOptions::default()).unwrap();
    assert_eq!(format_value(&v, None, &m), "#0(#0(1), #1)");
}

#[test]
fn arguments_are_evaluated_before_the_callee() {
    // TVM's interpreter and VM evaluate a call's arguments first, then its callee.
    let text = with_list(
        r#"
def @main() -> (int32, int32) {
  let %r = ref(0);
  let %idf = fn (%x: int32) -> int32 { %x };
  let %get = fn () -> fn (int32) -> int32 {
    ref_write(%r, 2);
    %idf
  };
  let %seen = %get()(ref_read(%r));
  (%seen, ref_read(%r))
}
"#,
    );
    assert_eq!(eval(&text), "(0, 2)");
}
