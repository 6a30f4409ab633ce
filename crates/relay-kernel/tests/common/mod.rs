//! The harness the kernel-level operator tests share: a call over `%p0`, `%p1`, ... wrapped in
//! a primitive function, compiled with [`relay_kernel::compile_primitive`] and run on random
//! inputs, against the interpreter's reference evaluation of the same module.

// Each test binary uses part of this module.
#![allow(dead_code)]

use relay_interp::{InterpOptions, SplitMix64, compare_tensors, random_tensor};
use relay_ir::{ExprKind, Function, Module, NDArray, Value};

/// One case: a label (the operator, or a finer name every dtype of one variant shares), the
/// call (an expression over `%p0`, `%p1`, ...) and the parameters' types.
pub type Case = (String, String, Vec<String>);

/// The text of a tensor type of `shape` and `dtype`.
pub fn tensor_type(shape: &[i64], dtype: &str) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    match dims.len() {
        0 => format!("Tensor[(), {dtype}]"),
        1 => format!("Tensor[({}), {dtype}]", dims[0]),
        _ => format!("Tensor[({}), {dtype}]", dims.join(", ")),
    }
}

/// The outcome of one case.
enum Outcome {
    /// The relation rejects the inputs (the operator does not take this dtype).
    Untyped,
    /// Compiled, ran and matched (or both failed at run time).
    Passed,
}

/// Runs `call` (an expression over `%p0`, `%p1`, ...) as a primitive function with parameters
/// of `params` types, compiled and interpreted on the same random inputs. A tuple result is
/// compared leaf by leaf (the kernel has one output per tensor leaf).
fn case(call: &str, params: &[String], seed: u64, tol: (f64, f64)) -> Result<Outcome, String> {
    let decls: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%p{i}: {t}"))
        .collect();
    let args: Vec<String> = (0..params.len()).map(|i| format!("%a{i}")).collect();
    let main_params: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%a{i}: {t}"))
        .collect();
    let text = format!(
        "#[version = \"0.0.5\"]\ndef @main({}) {{\n  (fn ({}, Primitive=1) {{ {call} }})({})\n}}\n",
        main_params.join(", "),
        decls.join(", "),
        args.join(", ")
    );
    let module = relay_syntax::parse(&text, "case.relay").map_err(|e| format!("{e:?}\n{text}"))?;
    if relay_types::check_module(&module).is_err() {
        return Ok(Outcome::Untyped);
    }
    let prim = primitive_of(&module).ok_or("no primitive function")?;
    let mut rng = SplitMix64::new(seed);
    let inputs: Vec<NDArray> = prim
        .params
        .iter()
        .map(|p| random_tensor(p.checked_type(), &mut rng))
        .collect::<Result<_, _>>()?;
    let expected = relay_interp::run(
        &module,
        "main",
        inputs.iter().cloned().map(Value::tensor).collect(),
        &InterpOptions::default(),
    );
    let kernel = match relay_kernel::compile_primitive(&prim, "case") {
        Ok(kernel) => kernel,
        // A kernel that always fails (the max of an empty reduction) does not compile.
        Err(_) if expected.is_err() => return Ok(Outcome::Passed),
        Err(e) => return Err(format!("does not compile: {e}\n{text}")),
    };
    let mut outputs = relay_kernel::output_arrays(&prim).map_err(|e| format!("{e}\n{text}"))?;
    let refs: Vec<&NDArray> = inputs.iter().collect();
    let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
    let actual = kernel.call(&refs, &mut outs);
    compare_results(actual, expected, &outputs, tol)
        .map(|()| Outcome::Passed)
        .map_err(|why| format!("{why}\n{text}"))
}

/// Compares a kernel call's outcome and outputs with the interpreter's result: both failed,
/// or both succeeded with every tensor leaf within `tol` (rtol, atol). `take` in mode "fast"
/// may succeed where the interpreter fails (SPEC §3: it may assume its indices are in range;
/// the interpreter checks them, the kernel clamps them and never reads out of bounds).
pub fn compare_results<E: std::fmt::Debug>(
    actual: Result<(), relay_kernel::KernelError>,
    expected: Result<Value, E>,
    outputs: &[NDArray],
    tol: (f64, f64),
) -> Result<(), String> {
    match (actual, expected) {
        (Ok(()), Ok(value)) => {
            let leaves = value.tensor_leaves();
            if leaves.len() != outputs.len() {
                return Err(format!(
                    "{} outputs, the interpreter gives {}",
                    outputs.len(),
                    leaves.len()
                ));
            }
            for (i, (got, want)) in outputs.iter().zip(leaves).enumerate() {
                // A float16 contraction accumulates in float32 (the GEMM), the reference in
                // float64: the results may differ by one float16 ulp (a relative 2^-10).
                let rtol = if got.dtype() == relay_ir::DType::F16 {
                    tol.0.max(1e-3)
                } else {
                    tol.0
                };
                if let Some(why) = compare_tensors(got, &want, rtol, tol.1) {
                    let which = if outputs.len() > 1 {
                        format!("output {i}: ")
                    } else {
                        String::new()
                    };
                    return Err(format!("{which}{why}"));
                }
            }
            Ok(())
        }
        (Err(_), Err(_)) => Ok(()),
        (Ok(()), Err(e)) if format!("{e:?}").contains("(mode \\\"fast\\\")") => Ok(()),
        (Ok(()), Err(e)) => Err(format!(
            "the kernel succeeds where the interpreter fails: {e:?}"
        )),
        (Err(e), Ok(_)) => Err(format!(
            "the kernel fails where the interpreter succeeds: {e}"
        )),
    }
}

/// The primitive function `@main` calls.
fn primitive_of(module: &Module) -> Option<Function> {
    let main = module
        .functions
        .iter()
        .find(|f| f.name.as_str() == "main")?;
    let ExprKind::Call { callee, .. } = main.func.body.kind() else {
        return None;
    };
    match callee.kind() {
        ExprKind::Function(f) => Some(f.clone()),
        _ => None,
    }
}

/// Runs every case, collecting failures; fails if any failed or if no case of a label typed.
pub fn run_cases(cases: Vec<Case>) {
    run_cases_within(cases, (1e-5, 1e-6));
}

/// [`run_cases`] comparing floats within `(rtol, atol)`.
pub fn run_cases_within(cases: Vec<Case>, tol: (f64, f64)) {
    let mut failures = Vec::new();
    let mut typed = std::collections::BTreeMap::<String, usize>::new();
    let (mut passed, mut untyped) = (0usize, 0usize);
    for (i, (label, call, params)) in cases.iter().enumerate() {
        match case(call, params, i as u64, tol) {
            Ok(Outcome::Passed) => {
                passed += 1;
                *typed.entry(label.clone()).or_default() += 1;
            }
            Ok(Outcome::Untyped) => {
                untyped += 1;
                typed.entry(label.clone()).or_default();
            }
            Err(why) => {
                *typed.entry(label.clone()).or_default() += 1;
                failures.push(format!("{label}: {why}"));
            }
        }
    }
    eprintln!(
        "{passed} cases passed, {} failed, {untyped} not typed (the relation rejects the dtype)",
        failures.len()
    );
    let never: Vec<&String> = typed
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(label, _)| label)
        .collect();
    assert!(
        never.is_empty() && failures.is_empty(),
        "never typed: {never:?}\n{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n---\n")
    );
}
