//! Unit tests of the type checker: programs parsed from text (polymorphism, ADTs, closures,
//! references, diagnostics) and programs built by hand around test operators whose relations
//! this file controls (deferred relations, relation errors, scale).

use relay_ir::{
    Attrs, Binding, BindingKind, DType, Dim, Expr, ExprKind, Function, GlobalFunc, Module,
    ModuleKind, OpPattern, OpSchema, PrintOptions, Span, Symbol, Type, TypeKind, Var,
};

use crate::{TypeErrors, TypeWarning, check_module};

fn parse(text: &str) -> Module {
    match relay_syntax::parse(text, "test.relay") {
        Ok(m) => m,
        Err(e) => panic!("{}", relay_syntax::render_plain(&e)),
    }
}

fn check(text: &str) -> (Module, Vec<TypeWarning>) {
    let m = parse(text);
    match check_module(&m) {
        Ok(w) => (m, w),
        Err(e) => panic!("{}", relay_syntax::render_plain(&e)),
    }
}

fn errors(text: &str) -> (TypeErrors, String) {
    let m = parse(text);
    match check_module(&m) {
        Ok(_) => panic!("expected type errors in:\n{text}"),
        Err(e) => {
            let rendered = relay_syntax::render_plain(&e);
            (e, rendered)
        }
    }
}

fn typed(m: &Module) -> String {
    relay_ir::print_module(m, &PrintOptions { show_types: true })
}

const LIST: &str = "#[version = \"0.0.5\"]
type List[A] { Cons(A, List[A]), Nil, }
type Option[A] { Some(A), None, }
";

fn with_list(rest: &str) -> String {
    format!("{LIST}{rest}")
}

/// Every expression node and variable reachable from the module has a checked type.
fn assert_all_typed(m: &Module) {
    fn walk(e: &Expr) {
        relay_ir::ensure_sufficient_stack(|| {
            assert!(e.checked_type().is_some(), "untyped node {:?}", e.kind());
            match e.kind() {
                ExprKind::Var(v) => assert!(v.checked_type().is_some()),
                ExprKind::Call { callee, args, .. } => {
                    walk(callee);
                    args.iter().for_each(walk);
                }
                ExprKind::Function(f) => {
                    f.params
                        .iter()
                        .for_each(|p| assert!(p.checked_type().is_some()));
                    walk(&f.body);
                }
                ExprKind::Let { bindings, body } => {
                    for b in bindings {
                        assert!(b.var.checked_type().is_some());
                        walk(&b.value);
                    }
                    walk(body);
                }
                ExprKind::If {
                    cond,
                    then_branch,
                    else_branch,
                } => {
                    walk(cond);
                    walk(then_branch);
                    walk(else_branch);
                }
                ExprKind::Match {
                    scrutinee, clauses, ..
                } => {
                    walk(scrutinee);
                    clauses.iter().for_each(|c| walk(&c.body));
                }
                ExprKind::Tuple(xs) => xs.iter().for_each(walk),
                ExprKind::Proj { tuple, .. } => walk(tuple),
                ExprKind::RefNew(x) | ExprKind::RefRead(x) => walk(x),
                ExprKind::RefWrite(a, b) => {
                    walk(a);
                    walk(b);
                }
                _ => {}
            }
        })
    }
    for f in &m.functions {
        f.func
            .params
            .iter()
            .for_each(|p| assert!(p.checked_type().is_some()));
        walk(&f.func.body);
    }
}

#[test]
fn polymorphic_list_functions_check_and_instantiate() {
    let (m, warnings) = check(&with_list(
        "def @map[A, B](%f: fn(A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%x, %rest) => Cons(%f(%x), @map(%f, %rest)),
    Nil => Nil,
  }
}
def @foldl[A, B](%f: fn(A, B) -> A, %acc: A, %xs: List[B]) -> A {
  match (%xs) {
    Cons(%x, %rest) => @foldl(%f, %f(%acc, %x), %rest),
    Nil => %acc,
  }
}
def @main(%xs: List[int32]) {
  let %ys = @map(fn (%x: int32) { (%x, %x) }, %xs);
  @foldl(fn (%n: int32, %p: (int32, int32)) { %n }, 0, %ys)
}
",
    ));
    assert!(warnings.is_empty());
    assert_all_typed(&m);
    let text = typed(&m);
    assert!(text.contains("/* ty=List[(int32, int32)] */"), "{text}");
    assert!(text.contains("/* ty=int32 */"), "{text}");
    // The polymorphic body is typed over the rigid parameters.
    assert!(text.contains("/* ty=List[B] */"), "{text}");
}

#[test]
fn unannotated_globals_are_inferred_in_any_order() {
    let (m, _) = check(&with_list(
        "def @main() { @first(Cons(1, Nil)) }
def @first(%xs) {
  match? (%xs) { Cons(%x, _) => %x }
}
",
    ));
    let main = m.function(Symbol::intern("main")).unwrap();
    assert_eq!(main.func.body.checked_type().unwrap().to_string(), "int32");
    let first = m.function(Symbol::intern("first")).unwrap();
    assert_eq!(
        first.func.params[0].checked_type().unwrap().to_string(),
        "List[int32]"
    );
}

#[test]
fn unconstrained_instances_are_fine() {
    let (m, _) = check(&with_list(
        "def @length[A](%xs: List[A]) -> int32 {
  match (%xs) { Cons(_, %rest) => 1 + 0, Nil => 0 }
}
def @main() { @length(Nil) }
",
    ));
    let text = typed(&m);
    assert!(text.contains("Nil /* ty=List["), "{text}");
}

/// A `?` dimension unifies with any size and stays `?` (TVM's rule): it is a size known only
/// at run time, not a variable the first size it meets would fix.
#[test]
fn any_dims_unify_with_known_ones_and_stay_dynamic() {
    let (m, _) = check(
        "#[version = \"0.0.5\"]
def @main(%x: Tensor[(?, 3), float32]) -> Tensor[(2, 3), float32] {
  let %y: Tensor[(2, ?), float32] = %x;
  %y
}
",
    );
    let main = &m.functions[0];
    assert_eq!(
        main.func.body.checked_type().unwrap().to_string(),
        "Tensor[(?, ?), float32]"
    );
    // A local function with a `?` parameter called with two sizes (a loop accumulating rows).
    let (m, _) = check(
        "#[version = \"0.0.5\"]
def @main(%x: Tensor[(2, 3), float32]) {
  let %grow: fn (Tensor[(?, 3), float32], int64) -> Tensor[(?, 3), float32] =
    fn (%s: Tensor[(?, 3), float32], %n: int64) -> Tensor[(?, 3), float32] {
      if (less(%n, 3i64)) { %grow(concatenate((%s, %x)), add(%n, 1i64)) } else { %s }
    };
  %grow(zeros(shape=[0, 3], dtype=\"float32\"), 0i64)
}
",
    );
    let main = &m.functions[0];
    assert_eq!(
        main.func.body.checked_type().unwrap().to_string(),
        "Tensor[(?, 3), float32]"
    );
}

#[test]
fn mismatch_names_both_types_and_the_place() {
    let (e, text) = errors(
        "#[version = \"0.0.5\"]
def @f(%x: Tensor[(3), float32]) -> Tensor[(3), float32] { %x }
def @main(%y: Tensor[(3), int32]) { @f(%y) }
",
    );
    assert_eq!(e.errors.len(), 1);
    assert!(
        text.contains("expected `Tensor[(3), float32]`, found `Tensor[(3), int32]`"),
        "{text}"
    );
    assert!(text.contains("relay::type::mismatch"), "{text}");
    assert!(text.contains("argument 1 of `@f`"), "{text}");
}

#[test]
fn arity_not_a_function_and_fields() {
    let (_, text) = errors(
        "#[version = \"0.0.5\"]
def @f(%a: int32, %b: int32) -> int32 { %a }
def @main() { @f(1, 2, 3) }
",
    );
    assert!(text.contains("`@f` takes 2 arguments, got 3"), "{text}");

    let (_, text) = errors(
        "#[version = \"0.0.5\"]
def @main(%x: int32) { %x(1) }
",
    );
    assert!(
        text.contains("expected a function, found `int32`"),
        "{text}"
    );

    let (_, text) = errors(
        "#[version = \"0.0.5\"]
def @main(%t: (int32, int32)) { %t.2 }
",
    );
    assert!(text.contains("`(int32, int32)` has no field 2"), "{text}");
    assert!(text.contains("relay::type::unknown_field"), "{text}");

    let (_, text) = errors(
        "#[version = \"0.0.5\"]
def @main(%t: int32) { %t.0 }
",
    );
    assert!(text.contains("not a tuple"), "{text}");
}

#[test]
fn projection_waits_for_the_tuple_type() {
    let (m, _) = check(
        "#[version = \"0.0.5\"]
def @main(%a: int32) {
  let %f = fn (%t) { %t.1 };
  %f((%a, True))
}
",
    );
    assert_eq!(
        m.functions[0].func.body.checked_type().unwrap().to_string(),
        "bool"
    );
}

#[test]
fn occurs_check_is_an_infinite_type() {
    let (_, text) = errors(
        "#[version = \"0.0.5\"]
def @main() { fn (%x) { %x(%x) } }
",
    );
    assert!(text.contains("infinite type"), "{text}");
    assert!(text.contains("relay::type::infinite_type"), "{text}");
}

#[test]
fn unresolved_variables_are_reported_once() {
    let (e, text) = errors(
        "#[version = \"0.0.5\"]
def @main() { fn (%x) { %x } }
",
    );
    assert_eq!(e.errors.len(), 1, "{text}");
    assert!(text.contains("cannot infer the type of `%x`"), "{text}");
}

#[test]
fn external_compiler_functions_warn_once_each_at_their_header() {
    let (_, warnings) = check(
        r#"#[version = "0.0.5"]
def @dnnl_0(%a: float32, Compiler="dnnl", Primitive=1, global_symbol="dnnl_0") -> float32 {
  %a
}
def @main(%x: float32) -> float32 {
  %0 = fn (%b: float32, Compiler="cutlass") -> float32 { @dnnl_0(%b) };
  %0(%x)
}
"#,
    );
    let texts: Vec<String> = warnings
        .iter()
        .map(|w| relay_syntax::render_plain(w))
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].contains("external compiler `dnnl` is not used: `@dnnl_0` runs as ordinary Relay"),
        "{}",
        texts[0]
    );
    assert!(texts[1].contains("`cutlass`"), "{}", texts[1]);
    assert!(
        texts
            .iter()
            .all(|t| t.contains("relay::type::external_compiler"))
    );
    // The label is the header line, not the whole body.
    assert!(!texts[0].contains("╰─▶"), "{}", texts[0]);
}

#[test]
fn non_exhaustive_match_warns_with_a_missing_pattern() {
    let (_, warnings) = check(&with_list(
        "def @f(%xs: List[int32]) -> int32 {
  match (%xs) { Cons(%x, Nil) => %x }
}
",
    ));
    assert_eq!(warnings.len(), 1);
    let text = relay_syntax::render_plain(&warnings[0]);
    assert!(
        text.contains("`match` does not cover `Cons(_, Cons(_, _))`")
            || text.contains("`match` does not cover `Nil`"),
        "{text}"
    );
    assert!(text.contains("relay::type::non_exhaustive_match"), "{text}");

    // `match?` never warns, and complete matches do not either.
    let (_, warnings) = check(&with_list(
        "def @f(%xs: List[int32]) -> int32 {
  match? (%xs) { Cons(%x, _) => %x }
}
def @g(%p: (List[int32], Option[int32])) -> int32 {
  match (%p) {
    (Cons(%x, _), _) => %x,
    (Nil, Some(%y)) => %y,
    (_, None) => 0,
  }
}
",
    ));
    assert!(warnings.is_empty());

    let (_, warnings) = check(&with_list(
        "def @g(%p: (List[int32], Option[int32])) -> int32 {
  match (%p) {
    (Cons(%x, _), _) => %x,
    (_, None) => 0,
  }
}
",
    ));
    let text = relay_syntax::render_plain(&warnings[0]);
    assert!(text.contains("does not cover `(Nil, Some(_))`"), "{text}");
}

#[test]
fn references_closures_and_recursive_local_functions() {
    let (m, _) = check(
        "#[version = \"0.0.5\"]
def @main(%n: int32) {
  let %r = ref(%n);
  ref_write(%r, 5);
  let %loop = fn (%i: int32) -> int32 {
    if (True) { %i } else { %loop(%i) }
  };
  let %k = fn (%y) { (%y, ref_read(%r)) };
  (%loop(ref_read(%r)), %k(False))
}
",
    );
    assert_eq!(
        m.functions[0].func.body.checked_type().unwrap().to_string(),
        "(int32, (bool, int32))"
    );
    assert_all_typed(&m);
}

#[test]
fn constructors_are_first_class_and_curried_calls_work() {
    let (m, _) = check(&with_list(
        "def @foldr[A, B](%f: fn(A, B) -> B, %acc: B, %xs: List[A]) -> B {
  match (%xs) {
    Cons(%x, %rest) => %f(%x, @foldr(%f, %acc, %rest)),
    Nil => %acc,
  }
}
def @concat[A](%xs: List[A], %ys: List[A]) -> List[A] { @foldr(Cons, %ys, %xs) }
def @adder(%x: int32) -> fn(int32) -> int32 { fn (%y: int32) { %x } }
def @main() { (@concat(Cons(1, Nil), Nil), @adder(1)(2), Some) }
",
    ));
    assert_eq!(
        m.functions[3].func.body.checked_type().unwrap().to_string(),
        "(List[int32], int32, fn (A) -> Option[A])"
    );
}

#[test]
fn modules_without_source_render_without_it() {
    let m = parse(
        "#[version = \"0.0.5\"]
def @main(%x: int32) { %x(1) }
",
    );
    let m = Module { source: None, ..m };
    let err = check_module(&m).unwrap_err();
    let text = relay_syntax::render_plain(&err);
    assert!(text.contains("expected a function"), "{text}");
}

// ----- Hand-built programs around test operators -----

fn same_rel(inputs: &[Type], _attrs: &Attrs) -> Result<Type, relay_ir::OpError> {
    match inputs {
        [a, b] if relay_ir::type_eq(a, b) => Ok(a.clone()),
        [a, b] => Err(relay_ir::OpError::shape(format!(
            "cannot broadcast `{a}` with `{b}`"
        ))),
        _ => Err(relay_ir::OpError::arity(2, inputs.len())),
    }
}

static TEST_ADD: OpSchema = OpSchema {
    name: "test.add",
    inputs: &["lhs", "rhs"],
    attrs_type: "",
    attrs: &[],
    pattern: OpPattern::Broadcast,
    relation: Some(same_rel),
    eval: None,
    compute: None,
    scalar: None,
    input_edge: None,
};

static TEST_NO_REL: OpSchema = OpSchema {
    name: "test.opaque",
    inputs: &["data"],
    attrs_type: "",
    attrs: &[],
    pattern: OpPattern::Opaque,
    relation: None,
    eval: None,
    compute: None,
    scalar: None,
    input_edge: None,
};

fn op_call(op: &'static OpSchema, args: Vec<Expr>) -> Expr {
    Expr::call(Expr::new(ExprKind::Op(op), Span::DUMMY), args)
}

fn module_of(params: Vec<Var>, body: Expr) -> Module {
    Module {
        functions: vec![GlobalFunc {
            name: Symbol::intern("main"),
            func: Function {
                type_params: vec![],
                params,
                ret_type: None,
                body,
                attrs: Attrs::empty(),
            },
            span: Span::DUMMY,
        }],
        types: vec![],
        kind: ModuleKind::Definitions,
        source: None,
    }
}

fn var(name: &str, ty: Option<Type>) -> Var {
    Var::new(Symbol::intern(name), ty, Span::DUMMY)
}

fn f32s(shape: &[i64]) -> Type {
    Type::tensor(shape, DType::F32)
}

#[test]
fn relations_run_once_inputs_are_known() {
    // fn (%a) { test.add(%a, %a) } applied to a tensor later: the relation waits.
    let a = var("a", None);
    let f = var("f", None);
    let x = var("x", Some(f32s(&[2, 3])));
    let lambda = Expr::new(
        ExprKind::Function(Function {
            type_params: vec![],
            params: vec![a.clone()],
            ret_type: None,
            body: op_call(&TEST_ADD, vec![Expr::var(&a), Expr::var(&a)]),
            attrs: Attrs::empty(),
        }),
        Span::DUMMY,
    );
    let body = Expr::new(
        ExprKind::Let {
            bindings: vec![Binding {
                var: f.clone(),
                value: lambda,
                kind: BindingKind::Let,
            }],
            body: Expr::call(Expr::var(&f), vec![Expr::var(&x)]),
        },
        Span::DUMMY,
    );
    let m = module_of(vec![x], body);
    check_module(&m).unwrap();
    assert_eq!(
        m.functions[0].func.body.checked_type().unwrap().to_string(),
        "Tensor[(2, 3), float32]"
    );
    assert_all_typed(&m);
    let printed = typed(&m);
    assert!(
        printed.contains("test.add(%a /* ty=Tensor[(2, 3), float32] */, %a /* ty=Tensor[(2, 3), float32] */) /* ty=Tensor[(2, 3), float32] */"),
        "{printed}"
    );
}

#[test]
fn relation_errors_name_the_operator() {
    let x = var("x", Some(f32s(&[2, 3])));
    let y = var("y", Some(f32s(&[4, 3])));
    let m = module_of(
        vec![x.clone(), y.clone()],
        op_call(&TEST_ADD, vec![Expr::var(&x), Expr::var(&y)]),
    );
    let err = check_module(&m).unwrap_err();
    assert_eq!(
        err.errors[0].to_string(),
        "cannot broadcast `Tensor[(2, 3), float32]` with `Tensor[(4, 3), float32]` in `test.add`"
    );

    let m = module_of(vec![x.clone()], op_call(&TEST_NO_REL, vec![Expr::var(&x)]));
    let err = check_module(&m).unwrap_err();
    assert_eq!(
        err.errors[0].to_string(),
        "operator `test.opaque` has no type relation (not supported)"
    );

    let m = module_of(vec![], Expr::new(ExprKind::Op(&TEST_ADD), Span::DUMMY));
    let err = check_module(&m).unwrap_err();
    assert_eq!(
        err.errors[0].to_string(),
        "operator `test.add` used as a value is not supported"
    );

    let a = var("a", None);
    let lambda = Expr::new(
        ExprKind::Function(Function {
            type_params: vec![],
            params: vec![a.clone()],
            ret_type: None,
            body: op_call(&TEST_ADD, vec![Expr::var(&a), Expr::var(&a)]),
            attrs: Attrs::empty(),
        }),
        Span::DUMMY,
    );
    let m = module_of(vec![], lambda);
    let err = check_module(&m).unwrap_err();
    assert_eq!(
        err.errors[0].to_string(),
        "cannot infer the input types of `test.add`"
    );
}

/// `%x1 = test.add(%x0, %x0); ...` with `n` bindings.
fn chain(n: usize) -> Module {
    let x = var("x", Some(f32s(&[4])));
    let mut bindings = Vec::with_capacity(n);
    let mut prev = x.clone();
    for i in 0..n {
        let v = var(&format!("v{i}"), None);
        bindings.push(Binding {
            var: v.clone(),
            value: op_call(&TEST_ADD, vec![Expr::var(&prev), Expr::var(&prev)]),
            kind: BindingKind::Graph,
        });
        prev = v;
    }
    let body = Expr::new(
        ExprKind::Let {
            bindings,
            body: Expr::var(&prev),
        },
        Span::DUMMY,
    );
    module_of(vec![x], body)
}

#[test]
fn a_hundred_thousand_bindings_check_on_a_small_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let m = chain(100_000);
            let start = std::time::Instant::now();
            check_module(&m).unwrap();
            let elapsed = start.elapsed();
            let ty = m.functions[0].func.body.checked_type().unwrap().clone();
            (ty.to_string(), elapsed)
        })
        .unwrap();
    let (ty, elapsed) = handle.join().unwrap();
    assert_eq!(ty, "Tensor[(4), float32]");
    // Generous even for a debug build; release takes a fraction of this.
    assert!(elapsed.as_secs() < 20, "took {elapsed:?}");
}

#[test]
fn a_hundred_thousand_polymorphic_calls_parse_and_check() {
    let mut text = String::from("#[version = \"0.0.5\"]\ndef @id[A](%x: A) -> A { %x }\n");
    text.push_str("def @main(%x0: (int32, bool)) {\n");
    let n = 100_000;
    for i in 1..=n {
        text.push_str(&format!(
            "  %{i} = @id(%{});\n",
            if i == 1 {
                "x0".to_owned()
            } else {
                (i - 1).to_string()
            }
        ));
    }
    text.push_str(&format!("  %{n}.1\n}}\n"));
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            let m = parse(&text);
            check_module(&m).unwrap();
            m.function(Symbol::intern("main"))
                .unwrap()
                .func
                .body
                .checked_type()
                .unwrap()
                .to_string()
        })
        .unwrap();
    assert_eq!(handle.join().unwrap(), "bool");
}

#[test]
fn checked_types_keep_polymorphic_parameters() {
    let (m, _) = check(&with_list(
        "def @id[A](%x: A) -> A { %x }
",
    ));
    let ty = m.functions[0].func.body.checked_type().unwrap();
    assert!(matches!(ty.kind(), TypeKind::Var(_)));
    let _ = Dim::Any;
}

// ----- The repository's programs -----

/// Every `.relay` file directly under `dir`.
fn relay_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "relay"))
        .collect();
    files.sort();
    files
}

fn repository_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_conformance_programs_type_check() {
    let dir = repository_root().join("conformance");
    let mut files = relay_files(&dir);
    assert!(files.len() >= 6, "no programs in `{}`", dir.display());
    // The shared conformance programs too, when they are beside the repository.
    let shared = repository_root().join("../shared/conformance");
    if shared.is_dir() {
        files.extend(relay_files(&shared));
    }
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let m = match relay_syntax::parse(&text, "conformance.relay") {
            Ok(m) => m,
            Err(e) => panic!("{}: {}", path.display(), relay_syntax::render_plain(&e)),
        };
        if let Err(e) = check_module(&m) {
            panic!("{}: {}", path.display(), relay_syntax::render_plain(&e));
        }
        assert_all_typed(&m);
    }
}

#[test]
fn every_parsed_test_program_checks_or_reports_without_panicking() {
    let root = repository_root().join("ir-tests");
    let mut checked = 0;
    for sub in ["parse", "types"] {
        for path in relay_files(&root.join(sub)) {
            let text = std::fs::read_to_string(&path).unwrap();
            let Ok(m) = relay_syntax::parse(&text, "test.relay") else {
                continue;
            };
            match check_module(&m) {
                Ok(warnings) => {
                    assert_all_typed(&m);
                    for w in &warnings {
                        assert!(!relay_syntax::render_plain(w).is_empty());
                    }
                    checked += 1;
                }
                Err(e) => {
                    let text = relay_syntax::render_plain(&e);
                    assert!(text.contains("relay::type::"), "{}: {text}", path.display());
                    assert!(
                        !text.contains("this is a bug"),
                        "{}: {text}",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} programs type-checked");
}
