//! The library API end to end: programs compiled with `Compiler` and run on `Vm` give what the
//! reference interpreter gives; parameters bind by name; bad inputs are typed errors; one
//! executable serves many threads.

use std::collections::HashMap;

use relay::{Compiler, Error, Executable, Tensor, Value, Vm, VmErrorKind};
use relay_interp::{InterpOptions, compare_values};
use relay_ir::{Module, Symbol};

/// A dense layer with a bias, relu and elementwise arithmetic.
const DENSE: &str = r#"
#[version = "0.0.5"]
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32], %b: Tensor[(16), float32]) -> Tensor[(4, 16), float32] {
  %0 = nn.dense(%x, %w, units=16);
  %1 = nn.bias_add(%0, %b);
  %2 = nn.relu(%1);
  add(%2, multiply(%2, 2f))
}
"#;

/// Tuples built, passed to a function, projected and nested.
const TUPLES: &str = r#"
#[version = "0.0.5"]
def @swap(%p: (Tensor[(3), int32], Tensor[(3), int32])) -> (Tensor[(3), int32], Tensor[(3), int32]) {
  (%p.1, %p.0)
}

def @main(%a: Tensor[(3), int32], %b: Tensor[(3), int32]) {
  let %s = @swap((%a, %b));
  (%s, subtract(%s.0, %s.1), (%a,))
}
"#;

/// A tuple parameter.
const TUPLE_PARAM: &str = r#"
#[version = "0.0.5"]
def @main(%p: (Tensor[(2), float32], Tensor[(2), float32])) -> Tensor[(2), float32] {
  multiply(%p.0, %p.1)
}
"#;

/// Lists: recursion building an ADT value, a polymorphic higher-order map and a tail-recursive
/// fold over it.
const LISTS: &str = r#"
#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @range(%i: int32, %n: int32) -> List[int32] {
  if (%i >= %n) { Nil } else { Cons(%i, @range(%i + 1, %n)) }
}

def @map[A, B](%f: fn (A) -> B, %xs: List[A]) -> List[B] {
  match (%xs) {
    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),
    Nil => Nil,
  }
}

def @sum(%xs: List[int32], %acc: int32) -> int32 {
  match (%xs) {
    Cons(%h, %t) => @sum(%t, %acc + %h),
    Nil => %acc,
  }
}

def @main(%n: int32) -> (List[int32], int32) {
  let %xs = @map(fn (%x: int32) { %x * %x }, @range(0, %n));
  (%xs, @sum(%xs, 0))
}
"#;

/// A closure capturing a tensor computed in `@main`, returned as the result.
const CLOSURE: &str = r#"
#[version = "0.0.5"]
def @main(%x: Tensor[(3), float32]) {
  let %k = multiply(%x, 2f);
  fn (%y: Tensor[(3), float32]) -> Tensor[(3), float32] { add(%y, %k) }
}
"#;

fn parse(source: &str) -> Module {
    relay::parse(source, "test.relay").unwrap_or_else(|e| panic!("{e:?}"))
}

fn compile(module: &Module) -> Executable {
    Compiler::new()
        .compile(module)
        .unwrap_or_else(|e| panic!("{:?}", miette::Report::from(e)))
}

fn f32s(data: &[f32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

fn i32s(data: &[i32], shape: &[i64]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

/// Random arguments for every parameter of `@main`.
fn random_args(module: &Module, seed: u64) -> Vec<Value> {
    let main = module.function(Symbol::intern("main")).unwrap();
    relay_interp::random_inputs(&main.func, seed).unwrap()
}

/// Runs `@main` of `source` on `args` in the interpreter and on the VM; asserts the results
/// agree and returns the VM's.
fn check_against_interp(source: &str, args: &[Value]) -> Value {
    let module = parse(source);
    let expected = relay_interp::run(&module, "main", args.to_vec(), &InterpOptions::default())
        .unwrap_or_else(|e| panic!("interpreter: {e:?}"));
    let exe = compile(&module);
    let got = Vm::new(&exe)
        .invoke("main", args)
        .unwrap_or_else(|e| panic!("vm: {:?}", miette::Report::from(e)));
    if let Err(diff) = compare_values(&got, &expected, 1e-5, 1e-6) {
        panic!("VM and interpreter differ: {diff}\nvm: {got:?}\ninterp: {expected:?}");
    }
    got
}

#[test]
fn tensors_match_the_interpreter() {
    let module = parse(DENSE);
    for seed in 0..3 {
        check_against_interp(DENSE, &random_args(&module, seed));
    }
}

#[test]
fn tuples_match_the_interpreter() {
    let a = i32s(&[1, 2, 3], &[3]);
    let b = i32s(&[10, 20, 30], &[3]);
    let out = check_against_interp(TUPLES, &[a, b].map(Value::from));
    let fields = out.as_tuple().expect("a tuple");
    assert_eq!(fields.len(), 3);
    let diff = Tensor::try_from(&fields[1]).unwrap();
    assert_eq!(diff.to_vec::<i32>().unwrap(), vec![9, 18, 27]);

    let p = Value::tuple(vec![
        f32s(&[1.0, 2.0], &[2]).into(),
        f32s(&[3.0, 4.0], &[2]).into(),
    ]);
    let out = check_against_interp(TUPLE_PARAM, &[p]);
    let out = Tensor::try_from(out).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![3.0, 8.0]);
}

#[test]
fn lists_match_the_interpreter() {
    for n in [0, 1, 7, 100, 10_000] {
        let out = check_against_interp(LISTS, &[Value::from(Tensor::scalar(n))]);
        let fields = out.as_tuple().expect("a tuple");
        let total = Tensor::try_from(&fields[1]).unwrap();
        // int32 arithmetic wraps, as numpy's does.
        let expected = (0..i64::from(n)).map(|i| i * i).sum::<i64>() as i32;
        assert_eq!(total.to_scalar::<i32>().unwrap(), expected, "n = {n}");
        // The list itself: n `Cons` cells (tag 0) ending in `Nil` (tag 1).
        let mut cells = 0;
        let mut list = fields[0].clone();
        while let Value::Adt(adt) = &list {
            if adt.tag == 1 {
                break;
            }
            cells += 1;
            let next = adt.fields[1].clone();
            list = next;
        }
        assert_eq!(cells, n, "n = {n}");
    }
}

#[test]
fn returned_closures_match_the_interpreter() {
    let module = parse(CLOSURE);
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let y = f32s(&[10.0, 20.0, 30.0], &[3]);
    let opts = InterpOptions::default();
    let interp_closure = relay_interp::run(&module, "main", vec![x.clone().into()], &opts).unwrap();
    let expected =
        relay_interp::apply(&module, interp_closure, vec![y.clone().into()], &opts).unwrap();

    let exe = compile(&module);
    let mut vm = Vm::new(&exe);
    let closure = vm.invoke("main", &[x]).unwrap();
    assert!(matches!(closure, Value::Closure(_)), "{closure:?}");
    let got = vm.call_closure(&closure, std::slice::from_ref(&y)).unwrap();
    compare_values(&got, &expected, 0.0, 0.0).unwrap();
    assert_eq!(
        Tensor::try_from(got).unwrap().to_vec::<f32>().unwrap(),
        vec![12.0, 24.0, 36.0]
    );
    // Another VM of the same executable can call it too.
    let again = Vm::new(&exe).call_closure(&closure, &[y]).unwrap();
    compare_values(&again, &expected, 0.0, 0.0).unwrap();
}

/// The weights of `DENSE`, from a seed.
fn dense_weights(seed: u64) -> (Tensor, Tensor) {
    let module = parse(DENSE);
    let mut args = random_args(&module, seed).into_iter().skip(1);
    let w = Tensor::try_from(args.next().unwrap()).unwrap();
    let b = Tensor::try_from(args.next().unwrap()).unwrap();
    (w, b)
}

#[test]
fn bound_params_become_constants() {
    let module = parse(DENSE);
    let (w, b) = dense_weights(7);
    let params: HashMap<String, relay::NDArray> = [
        ("w".to_string(), w.as_ndarray().clone()),
        // With `%`, as TVM accepts it too.
        ("%b".to_string(), b.as_ndarray().clone()),
        // Not a parameter: ignored.
        ("nothing".to_string(), b.as_ndarray().clone()),
    ]
    .into();
    let bound = relay::bind_params(module.clone(), "main", &params).unwrap();
    let main = bound.function(Symbol::intern("main")).unwrap();
    let names: Vec<&str> = main.func.params.iter().map(|p| p.name().as_str()).collect();
    assert_eq!(names, ["x"]);

    let compiler =
        Compiler::new().params([("w".to_string(), w.clone()), ("b".to_string(), b.clone())]);
    let lowered = compiler.lower(&module).unwrap();
    let main = lowered.function(Symbol::intern("main")).unwrap();
    assert_eq!(
        main.func.params.len(),
        1,
        "{}",
        relay_ir::print_module(&lowered, &Default::default())
    );

    // Same result as the interpreter given every argument.
    let exe = compiler.compile(&module).unwrap();
    let x = Tensor::try_from(random_args(&module, 3).remove(0)).unwrap();
    let expected = relay_interp::run(
        &module,
        "main",
        vec![x.clone().into(), w.into(), b.into()],
        &InterpOptions::default(),
    )
    .unwrap();
    let got = Vm::new(&exe)
        .invoke("main", std::slice::from_ref(&x))
        .unwrap();
    compare_values(&got, &expected, 1e-5, 1e-6).unwrap();

    // The bound parameters are no longer arguments.
    let err = Vm::new(&exe)
        .invoke("main", &[x.clone(), x.clone(), x])
        .unwrap_err();
    assert!(
        matches!(&err, Error::Run(e) if e.kind == VmErrorKind::Arity),
        "{err}"
    );
}

/// A tied LM head as the dynamo exporter writes it: the embedding table, a bound weight of
/// 1.1 million elements (past `fold_constant`'s `max_elements` for results larger than their
/// inputs), transposed before the product. The transpose is evaluated once at bind, so no
/// kernel of the executable reads only constants (`--verify-each` checks it after every pass).
#[test]
fn a_transposed_bound_weight_folds_at_any_size() {
    let source = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 1000), float32], %w: Tensor[(1100, 1000), float32]) {
  nn.matmul(%x, transpose(%w, axes=[1, 0]), units=None)
}
"#;
    let module = parse(source);
    let data: Vec<f32> = (0..1_100_000)
        .map(|i| ((i % 97) as f32 - 48.0) / 64.0)
        .collect();
    let w = f32s(&data, &[1100, 1000]);
    let compiler = Compiler::new()
        .params([("w".to_string(), w.clone())])
        .verify_each(true);
    let lowered = compiler.lower(&module).unwrap();
    let printed = relay_ir::print_module(&lowered, &Default::default());
    assert!(!printed.contains("transpose"), "{printed}");
    let exe = compiler.compile(&module).unwrap();
    let x = f32s(
        &(0..1000)
            .map(|i| (i % 13) as f32 / 13.0)
            .collect::<Vec<_>>(),
        &[1, 1000],
    );
    let expected = relay_interp::run(
        &module,
        "main",
        vec![x.clone().into(), w.into()],
        &InterpOptions::default(),
    )
    .unwrap();
    let got = Vm::new(&exe).invoke("main", &[x]).unwrap();
    compare_values(&got, &expected, 1e-4, 1e-5).unwrap();
}

#[test]
fn params_of_the_wrong_dtype_or_shape_are_errors_naming_them() {
    let module = parse(DENSE);
    let (_, b) = dense_weights(1);

    let w64 = Tensor::from_slice(&vec![0.5f64; 16 * 8], &[16, 8]).unwrap();
    let err = Compiler::new()
        .params([("w".to_string(), w64)])
        .compile(&module)
        .unwrap_err();
    assert!(
        matches!(&err, Error::BindParams { name, .. } if name == "w"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "cannot bind parameter `%w` of `@main`: expected `Tensor[(16, 8), float32]`, got a \
         float64 tensor of shape (16, 8)"
    );

    let w_bad = Tensor::from_slice(&vec![0.5f32; 8 * 16], &[8, 16]).unwrap();
    let err = Compiler::new()
        .params([("b".to_string(), b), ("w".to_string(), w_bad)])
        .lower(&module)
        .unwrap_err();
    assert!(
        matches!(&err, Error::BindParams { name, .. } if name == "w"),
        "{err:?}"
    );
    assert!(err.to_string().contains("shape (8, 16)"), "{err}");

    let b_rank = Tensor::scalar(1.0f32);
    let err = Compiler::new()
        .param("b", b_rank)
        .lower(&module)
        .unwrap_err();
    assert!(err.to_string().contains("`%b`"), "{err}");

    // The diagnostic renders as a report with its code.
    let report = miette::Report::from(err);
    assert_eq!(
        report.code().map(|c| c.to_string()).as_deref(),
        Some("relay::api::bind_params")
    );
}

#[test]
fn bad_arguments_are_typed_errors() {
    let module = parse(DENSE);
    let exe = compile(&module);
    let mut vm = Vm::new(&exe);
    let args = random_args(&module, 0);
    let run_error = |result: relay::Result<Value>| match result {
        Err(Error::Run(e)) => e,
        other => panic!("expected a run error, got {other:?}"),
    };

    let e = run_error(vm.invoke("main", &args[..2]));
    assert_eq!(e.kind, VmErrorKind::Arity, "{e}");
    assert!(e.message.contains('3') && e.message.contains('2'), "{e}");

    let x64 = Tensor::from_slice(&[0.0f64; 32], &[4, 8]).unwrap();
    let mut wrong = args.clone();
    wrong[0] = x64.into();
    let e = run_error(vm.invoke("main", &wrong));
    assert_eq!(e.kind, VmErrorKind::BadArgument, "{e}");
    assert!(
        e.message.contains("float64") && e.message.contains("float32"),
        "{e}"
    );
    assert!(e.message.contains("%x"), "{e}");

    let mut wrong = args.clone();
    wrong[0] = f32s(&[0.0; 32], &[8, 4]).into();
    let e = run_error(vm.invoke("main", &wrong));
    assert_eq!(e.kind, VmErrorKind::BadArgument, "{e}");
    assert!(
        e.message.contains("%x") && e.message.contains("(8, 4)"),
        "{e}"
    );

    let mut wrong = args.clone();
    wrong[2] = Value::tuple(vec![args[2].clone()]);
    let e = run_error(vm.invoke("main", &wrong));
    assert_eq!(e.kind, VmErrorKind::BadArgument, "{e}");
    assert!(
        e.message.contains("%b") && e.message.contains("tuple"),
        "{e}"
    );

    let e = run_error(vm.invoke("nope", &args));
    assert_eq!(e.kind, VmErrorKind::UnknownFunction, "{e}");
    assert!(e.message.contains("nope"), "{e}");

    // A tensor where a tuple is expected.
    let exe = compile(&parse(TUPLE_PARAM));
    let e = run_error(Vm::new(&exe).invoke("main", &[f32s(&[1.0, 2.0], &[2])]));
    assert_eq!(e.kind, VmErrorKind::BadArgument, "{e}");

    // The VM still works after the errors.
    let mut vm = Vm::new(&exe);
    let p = Value::tuple(vec![
        f32s(&[1.0, 2.0], &[2]).into(),
        f32s(&[1.0, 2.0], &[2]).into(),
    ]);
    let out = Tensor::try_from(vm.invoke("main", &[p]).unwrap()).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![1.0, 4.0]);
}

#[test]
fn parse_and_type_errors_are_reports() {
    let err = relay::parse(
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) { add(%x, ",
        "bad.relay",
    )
    .unwrap_err();
    let code = err.code().map(|c| c.to_string()).unwrap_or_default();
    assert!(code.starts_with("relay::parse"), "{code}: {err:?}");
    assert!(err.source_code().is_some(), "{err:?}");
    let err = relay::parse(
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) { add(%x, 1) }",
        "ill_typed.relay",
    )
    .unwrap_err();
    let code = err.code().map(|c| c.to_string()).unwrap_or_default();
    assert!(code.starts_with("relay::type"), "{code}: {err:?}");
    // Into the library's error and back, keeping the code.
    let err = Error::from(err);
    assert!(matches!(err, Error::Program(_)));
    let report = miette::Report::from(err);
    assert_eq!(report.code().map(|c| c.to_string()), Some(code));
}

#[test]
fn one_executable_serves_eight_threads() {
    let module = parse(DENSE);
    let (w, b) = dense_weights(11);
    let exe = Compiler::new()
        .params([("w".to_string(), w.clone()), ("b".to_string(), b.clone())])
        .compile(&module)
        .unwrap();
    let inputs: Vec<Tensor> = (0..4)
        .map(|seed| Tensor::try_from(random_args(&module, 100 + seed).remove(0)).unwrap())
        .collect();
    let expected: Vec<Value> = inputs
        .iter()
        .map(|x| {
            let args = vec![x.into(), (&w).into(), (&b).into()];
            relay_interp::run(&module, "main", args, &InterpOptions::default()).unwrap()
        })
        .collect();

    let results: Vec<Vec<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let mut vm = Vm::new(&exe);
                    let mut outs = Vec::new();
                    for _round in 0..5 {
                        for x in &inputs {
                            let out = vm.invoke("main", std::slice::from_ref(x)).unwrap();
                            outs.push(Tensor::try_from(out).unwrap().to_vec::<f32>().unwrap());
                        }
                    }
                    outs
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for outs in &results {
        assert_eq!(outs, &results[0], "threads disagree");
    }
    for (i, out) in results[0].iter().enumerate() {
        let got = Value::from(f32s(out, &[4, 16]));
        compare_values(&got, &expected[i % inputs.len()], 1e-5, 1e-6).unwrap();
    }
}

#[test]
fn binding_a_dynamic_parameter_retypes_the_module() {
    let source = r#"
#[version = "0.0.5"]
def @main(%x: Tensor[(2), float32], %n: Tensor[(?), float32]) {
  (add(%x, 1f), sum(%n), multiply(%n, 2f))
}
"#;
    let module = parse(source);
    let n = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5]);
    let x = f32s(&[0.5, 1.5], &[2]);
    let compiler = Compiler::new().param("n", n.clone());
    let lowered = compiler.lower(&module).unwrap();
    let text = relay_ir::print_module(&lowered, &relay_ir::PrintOptions { show_types: true });
    assert!(!text.contains('?'), "a `?` dimension is left:\n{text}");
    let exe = compiler.compile(&module).unwrap();
    let got = Vm::new(&exe)
        .invoke("main", std::slice::from_ref(&x))
        .unwrap();
    let expected = relay_interp::run(
        &module,
        "main",
        vec![x.into(), n.into()],
        &InterpOptions::default(),
    )
    .unwrap();
    compare_values(&got, &expected, 0.0, 0.0).unwrap();
}

#[test]
fn params_need_the_entry_function() {
    let module = parse(CLOSURE);
    let err = Compiler::new()
        .entry("@nope")
        .param("x", f32s(&[1.0, 2.0, 3.0], &[3]))
        .compile(&module)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot bind parameters: the module has no function `@nope`"
    );
}

/// A global that `@main` does not reach, compiled as the entry: dead-code elimination keeps
/// what the entry reaches, and it runs as the interpreter runs it.
#[test]
fn another_entry_keeps_what_it_reaches() {
    let module = parse(
        r#"
#[version = "0.0.5"]
def @double(%x: Tensor[(3), float32]) -> Tensor[(3), float32] { add(%x, %x) }
def @f(%x: Tensor[(3), float32], %w: Tensor[(3), float32]) { multiply(@double(%x), %w) }
def @main(%x: Tensor[(3), float32]) { %x }
"#,
    );
    let compiler = Compiler::new()
        .entry("@f")
        .param("w", f32s(&[1.0, 10.0, 100.0], &[3]));
    let lowered = compiler.lower(&module).unwrap();
    assert!(lowered.function(Symbol::intern("f")).is_some());
    assert!(lowered.function(Symbol::intern("double")).is_some());
    let exe = compiler.compile(&module).unwrap();
    let y = Vm::new(&exe)
        .invoke("f", &[f32s(&[1.0, 2.0, 3.0], &[3])])
        .unwrap();
    assert_eq!(
        Tensor::try_from(y).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 40.0, 600.0]
    );
}

/// Every kernel that cannot be compiled is reported, named, and labelled in the program.
#[test]
fn kernel_failures_name_each_kernel() {
    let module = parse(
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, 6, 6), float32], %y: Tensor[(1, 3, 5, 5), float32], %z: Tensor[(3), float32]) {
  (nn.fast_softmax(%x), nn.fast_softmax(%y), exp(%z))
}
"#,
    );
    let err = Compiler::new().compile(&module).unwrap_err();
    let Error::Kernel { failures } = &err else {
        panic!("expected kernel failures, got {err:?}");
    };
    assert_eq!(failures.len(), 2, "{err}");
    for failure in failures {
        assert!(
            failure.kernel().starts_with("fused_nn_fast_softmax"),
            "{failure}"
        );
        assert!(failure.function().is_some());
        let message = failure.to_string();
        assert!(
            message.starts_with("cannot compile kernel fused_nn_fast_softmax"),
            "{message}"
        );
        let labels: Vec<_> = miette::Diagnostic::labels(failure)
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(labels.len(), 1, "{message}");
    }
    assert!(
        err.to_string().starts_with("2 kernels failed to compile: "),
        "{err}"
    );
}

#[test]
fn opt_levels_and_pipelines() {
    let module = parse(DENSE);
    let args = random_args(&module, 5);
    let expected =
        relay_interp::run(&module, "main", args.clone(), &InterpOptions::default()).unwrap();
    for level in 0..=3 {
        let exe = Compiler::new().opt_level(level).compile(&module).unwrap();
        let got = Vm::new(&exe).invoke("main", &args).unwrap();
        compare_values(&got, &expected, 1e-5, 1e-6)
            .unwrap_or_else(|diff| panic!("opt level {level}: {diff}"));
    }
    // A pipeline without the passes the VM needs cannot be compiled: an error, not a panic.
    let err = Compiler::new()
        .passes(relay::PipelineConfig::default())
        .compile(&module)
        .unwrap_err();
    assert!(matches!(err, Error::Compile(_)), "{err:?}");
}

#[test]
fn profiles_are_recorded_when_asked_for() {
    let module = parse(DENSE);
    let exe = compile(&module);
    let options = relay::VmOptions {
        profile: true,
        threads: 1,
        ..Default::default()
    };
    let mut vm = Vm::with_options(&exe, options);
    vm.invoke("main", &random_args(&module, 0)).unwrap();
    let profile = vm.take_profile().expect("a profile");
    assert!(
        profile.kernels.iter().any(|k| k.calls > 0),
        "no kernel calls recorded:\n{profile}"
    );
}

/// A fresh path in the temporary directory for an executable file.
fn temp_ro(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("relay-api-{}-{name}.ro", std::process::id()))
}

#[test]
fn saved_executables_load_and_compute_the_same() {
    // Constants (bound weights), kernels, ADTs with a polymorphic map, tuples, closures.
    let module = parse(DENSE);
    let (w, b) = dense_weights(11);
    let exe = Compiler::new()
        .params([("w".to_string(), w), ("b".to_string(), b)])
        .compile(&module)
        .unwrap();
    let path = temp_ro("dense");
    exe.save(&path).unwrap();
    let loaded = Executable::load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let x = Tensor::try_from(random_args(&module, 5).remove(0)).unwrap();
    let want = Vm::new(&exe)
        .invoke("main", std::slice::from_ref(&x))
        .unwrap();
    let got = Vm::new(&loaded).invoke("main", &[x]).unwrap();
    compare_values(&got, &want, 0.0, 0.0).unwrap();
    // The file holds the constants: the loaded executable needs only `%x`.
    assert_eq!(loaded.global("main").map(|(_, f)| f.params.len()), Some(1));

    for source in [LISTS, TUPLES, CLOSURE] {
        let module = parse(source);
        let exe = compile(&module);
        let loaded = Executable::from_bytes(&exe.to_bytes().unwrap()).unwrap();
        let args = random_args(&module, 9);
        let want = Vm::new(&exe).invoke("main", &args).unwrap();
        let got = Vm::new(&loaded).invoke("main", &args).unwrap();
        if let (Value::Closure(_), Value::Closure(_)) = (&want, &got) {
            let y = f32s(&[1.0, 2.0, 3.0], &[3]);
            let want = Vm::new(&exe).call_closure(&want, std::slice::from_ref(&y));
            let got = Vm::new(&loaded).call_closure(&got, &[y]);
            compare_values(&got.unwrap(), &want.unwrap(), 0.0, 0.0).unwrap();
        } else {
            compare_values(&got, &want, 0.0, 0.0).unwrap();
        }
    }
}

#[test]
fn bad_executable_files_are_typed_errors() {
    let path = temp_ro("missing");
    let err = Error::from(Executable::load(&path).unwrap_err());
    assert!(
        matches!(&err, Error::File(relay::ExeFileError::Io { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("cannot read"), "{err}");

    let mut bytes = compile(&parse(TUPLES)).to_bytes().unwrap();
    let last = bytes.len() - 20;
    bytes[last] ^= 0x40;
    let err = Error::from(Executable::from_bytes(&bytes).unwrap_err());
    assert!(err.to_string().contains("corrupt"), "{err}");
    let report = format!("{:?}", miette::Report::from(err));
    assert!(report.contains("relay::exe::checksum"), "{report}");

    let err = Executable::from_bytes(b"#[version = \"0.0.5\"]\n").unwrap_err();
    assert!(err.to_string().contains("not a relayc executable"), "{err}");
}

/// A dense layer whose weights (bound with `params`) are the GEMM's right operand.
const WIDE_DENSE: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(64, 256), float32], %w: Tensor[(384, 256), float32]) {
  nn.relu(nn.dense(%x, %w, units=384))
}
"#;

/// Runs `exe` four times on `args` in a VM of `threads` threads, checking each result.
fn run_dense(exe: &Executable, args: &[Value], expected: &Value, threads: usize) {
    let options = relay::VmOptions {
        threads,
        ..relay::VmOptions::default()
    };
    let mut vm = relay::Vm::with_options(exe, options);
    for _ in 0..4 {
        let got = vm.invoke("main", args).unwrap();
        // Sums of 256 products in another order than the interpreter's.
        compare_values(&got, expected, 1e-4, 1e-4).unwrap();
    }
}

#[test]
fn bound_weights_are_packed_once_per_executable_and_freed_with_it() {
    let module = parse(WIDE_DENSE);
    let mut args = random_args(&module, 7);
    let w = Tensor::try_from(args.remove(1)).unwrap();
    let expected = relay_interp::run(
        &module,
        "main",
        vec![args[0].clone(), (&w).into()],
        &InterpOptions::default(),
    )
    .unwrap();
    let compile = || {
        Compiler::new()
            .params([("w".to_string(), w.clone())])
            .compile(&module)
            .unwrap()
    };
    // Two executables sharing the weights' storage (the same `Tensor`).
    let (first, second) = (compile(), compile());
    for threads in [1, 2] {
        run_dense(&first, &args, &expected, threads);
    }
    // Packed on the first call, reused by the seven others and by the second VM.
    let packed = first.packed_constants();
    assert_eq!(packed.packs(), 1);
    let bytes = packed.bytes();
    assert!(bytes >= 384 * 256 * 4, "{bytes} bytes packed");
    // The second executable packs its own copy, once, and the first's is untouched.
    run_dense(&second, &args, &expected, 1);
    assert_eq!(second.packed_constants().packs(), 1);
    assert_eq!(first.packed_constants().packs(), 1);
    // Dropping the first frees its packed weights while the second still runs on its own.
    let weak = std::sync::Arc::downgrade(first.packed_constants());
    drop(first);
    assert!(
        weak.upgrade().is_none(),
        "the packed weights outlive their executable"
    );
    run_dense(&second, &args, &expected, 2);
    assert_eq!(second.packed_constants().packs(), 1);
    assert_eq!(second.packed_constants().bytes(), bytes);

    // An executable loaded from a `.ro` packs once too.
    let loaded = Executable::from_bytes(&second.to_bytes().unwrap()).unwrap();
    assert_eq!(loaded.packed_constants().packs(), 0);
    run_dense(&loaded, &args, &expected, 1);
    run_dense(&loaded, &args, &expected, 2);
    assert_eq!(loaded.packed_constants().packs(), 1);
}

/// A dense layer with a dynamic batch, computed by the kernel library at every shape.
const DYNAMIC_WIDE_DENSE: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 256), float32], %w: Tensor[(384, 256), float32]) {
  nn.dense(%x, %w, units=384)
}
"#;

#[test]
fn a_dynamic_products_bound_weights_are_packed_when_a_vm_is_made() {
    let module = parse(DYNAMIC_WIDE_DENSE);
    let mut rng = relay_interp::SplitMix64::new(3);
    let tensor = |shape: &[i64], rng: &mut relay_interp::SplitMix64| {
        let ty = relay_ir::Type::tensor(shape, relay_ir::DType::F32);
        Value::tensor(relay_interp::random_tensor(Some(&ty), rng).unwrap())
    };
    let w = Tensor::try_from(tensor(&[384, 256], &mut rng)).unwrap();
    let exe = Compiler::new()
        .params([("w".to_string(), w.clone())])
        .compile(&module)
        .unwrap();
    assert_eq!(exe.packed_constants().packs(), 0);
    // ONNX Runtime packs when a session is made: so does a VM, before its first call.
    let mut vm = relay::Vm::with_options(
        &exe,
        relay::VmOptions {
            threads: 1,
            ..relay::VmOptions::default()
        },
    );
    assert_eq!(exe.packed_constants().packs(), 1);
    for rows in [8, 64, 300, 2] {
        let x = tensor(&[rows, 256], &mut rng);
        let expected = relay_interp::run(
            &module,
            "main",
            vec![x.clone(), (&w).into()],
            &InterpOptions::default(),
        )
        .unwrap();
        let got = vm.invoke("main", &[x]).unwrap();
        compare_values(&got, &expected, 1e-4, 1e-4).unwrap();
    }
    // The calls found the packed weight; a second VM finds it made.
    let _second = Vm::new(&exe);
    assert_eq!(exe.packed_constants().packs(), 1);
}

/// The LSTM and GRU recurrences (relayc's fused cells, computed by the kernel library) in
/// every variant, with hidden sizes that leave register-block tails (80 and 60 gate columns).
const RECURRENCES: &str = r#"
#[version = "0.0.5"]
def @main(%xl: Tensor[(7, 3, 80), float32], %rl: Tensor[(20, 80), float32], %h: Tensor[(3, 20), float32],
          %c: Tensor[(3, 20), float32], %p: Tensor[(60), float32],
          %xg: Tensor[(7, 3, 60), float32], %rg: Tensor[(20, 60), float32], %b: Tensor[(20), float32]) {
  let %l0 = nn.lstm_recurrence(%xl, %rl, %h, %c, %p);
  let %l1 = nn.lstm_recurrence(%xl, %rl, %h, %c, %p, reverse=True, clip=0.5f, input_forget=True);
  let %g0 = nn.gru_recurrence(%xg, %rg, %h, %b, linear_before_reset=True);
  let %g1 = nn.gru_recurrence(%xg, %rg, %h, %b, reverse=True, clip=0.8f);
  (%l0, %l1, %g0, %g1, add(%l0.1, %g0.1))
}
"#;

#[test]
fn recurrences_match_the_interpreter() {
    let module = parse(RECURRENCES);
    for seed in 0..3 {
        check_against_interp(RECURRENCES, &random_args(&module, seed));
    }
}

/// A dense layer over a `?` batch, its weights bound as constants (as an imported model's
/// initializers are).
const DYNAMIC_DENSE: &str = r#"
#[version = "0.0.5"]
def @main(%x: Tensor[(?, 64), float32], %w: Tensor[(48, 64), float32], %b: Tensor[(48), float32]) {
  %0 = nn.dense(%x, %w, units=48);
  nn.relu(nn.bias_add(%0, %b, axis=-1))
}
"#;

#[test]
fn a_dynamic_dense_layer_with_bound_weights_compiles_nothing_per_shape() {
    let module = parse(DYNAMIC_DENSE);
    let mut weights = random_args(&parse(&DYNAMIC_DENSE.replace('?', "2")), 5).into_iter();
    weights.next();
    let w = Tensor::try_from(weights.next().unwrap()).unwrap();
    let b = Tensor::try_from(weights.next().unwrap()).unwrap();
    let exe = Compiler::new()
        .params([("w".to_string(), w.clone()), ("b".to_string(), b.clone())])
        .compile(&module)
        .unwrap();
    let mut vm = Vm::new(&exe);
    let mut rng = relay_interp::SplitMix64::new(9);
    for rows in [1i64, 5, 64, 0, 300, 7] {
        let ty = relay_ir::Type::tensor(&[rows, 64], relay_ir::DType::F32);
        let x = Value::tensor(relay_interp::random_tensor(Some(&ty), &mut rng).unwrap());
        let x = Tensor::try_from(x).unwrap();
        let args = vec![x.clone().into(), w.clone().into(), b.clone().into()];
        let expected = relay_interp::run(&module, "main", args, &InterpOptions::default()).unwrap();
        let got = vm.invoke("main", std::slice::from_ref(&x)).unwrap();
        compare_values(&got, &expected, 1e-5, 1e-6)
            .unwrap_or_else(|why| panic!("{rows} rows: {why}"));
    }
    assert_eq!(exe.cache.compiled(), 0, "nothing was specialized");
    assert!(exe.kernels.iter().filter(|k| k.dynamic).count() >= 2);
    for k in exe.kernels.iter().filter(|k| k.dynamic) {
        assert!(k.generic_kernel().is_some(), "kernel {} is generic", k.name);
    }
}
