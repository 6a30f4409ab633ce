//! Every operator with a compute definition, compiled alone as a primitive function, against
//! its reference evaluation in the interpreter: random inputs over shapes with broadcasting,
//! size-0 and size-1 dimensions and extents that leave vector remainders, for every dtype the
//! operator's type relation accepts.

use relay_interp::{InterpOptions, SplitMix64, compare_tensors, random_tensor};
use relay_ir::{ExprKind, Function, Module, NDArray, TypeKind, Value};

/// The dtypes every operator is tried with; those its relation rejects are skipped.
const DTYPES: &[&str] = &[
    "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint32", "bool",
];

/// Shapes for unary operators.
const UNARY_SHAPES: &[&[i64]] = &[
    &[],
    &[0],
    &[1],
    &[3],
    &[4],
    &[5],
    &[17],
    &[2, 3, 5],
    &[1000],
];

/// Shape pairs for binary operators (numpy broadcasting).
const BINARY_SHAPES: &[(&[i64], &[i64])] = &[
    (&[2, 3], &[2, 3]),
    (&[2, 3], &[3]),
    (&[4, 1], &[1, 5]),
    (&[0, 3], &[3]),
    (&[1], &[7]),
    (&[5], &[]),
    (&[17], &[17]),
    (&[3, 1, 5], &[1, 4, 1]),
];

/// The operators with a compute definition, taking `inputs` tensors and no attributes (the
/// plain unary and binary operators); read from the registry, so a new definition is tested
/// without being listed here.
fn plain_ops(inputs: usize) -> Vec<&'static str> {
    relay_ops::all()
        .filter(|op| op.compute.is_some() && op.inputs.len() == inputs && op.attrs.is_empty())
        .map(|op| op.name)
        .collect()
}

fn tensor_type(shape: &[i64], dtype: &str) -> String {
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
/// of `params` types, compiled and interpreted on the same random inputs.
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
    let out_ty = prim.body.checked_type().ok_or("untyped body")?;
    let TypeKind::Tensor { dtype, .. } = out_ty.kind() else {
        return Err("the result is not a tensor".into());
    };
    let shape = relay_kernel::static_shape(out_ty).ok_or("dynamic result shape")?;
    let mut out = NDArray::zeros(*dtype, &shape).map_err(|e| e.to_string())?;
    let refs: Vec<&NDArray> = inputs.iter().collect();
    let actual = kernel.call(&refs, &mut [&mut out]);
    match (actual, expected) {
        (Ok(()), Ok(Value::Tensor(want))) => match compare_tensors(&out, &want, tol.0, tol.1) {
            None => Ok(Outcome::Passed),
            Some(why) => Err(format!("{why}\n{text}")),
        },
        (Err(_), Err(_)) => Ok(Outcome::Passed),
        (Ok(()), Err(e)) => Err(format!(
            "the kernel succeeds where the interpreter fails: {e:?}\n{text}"
        )),
        (Err(e), Ok(_)) => Err(format!(
            "the kernel fails where the interpreter succeeds: {e}\n{text}"
        )),
        (Ok(()), Ok(other)) => Err(format!("unexpected interpreter result {other:?}")),
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

/// Runs every case, collecting failures; fails if any failed or if no dtype typed for an op.
fn run_cases(cases: Vec<(String, String, Vec<String>)>) {
    run_cases_within(cases, (1e-5, 1e-6));
}

/// [`run_cases`] comparing floats within `(rtol, atol)`.
fn run_cases_within(cases: Vec<(String, String, Vec<String>)>, tol: (f64, f64)) {
    let mut failures = Vec::new();
    let mut typed_ops = std::collections::HashMap::<String, usize>::new();
    for (i, (op, call, params)) in cases.iter().enumerate() {
        match case(call, params, i as u64, tol) {
            Ok(Outcome::Passed) => *typed_ops.entry(op.clone()).or_default() += 1,
            Ok(Outcome::Untyped) => {
                typed_ops.entry(op.clone()).or_default();
            }
            Err(why) => failures.push(format!("{op}: {why}")),
        }
    }
    let never: Vec<&String> = typed_ops
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(op, _)| op)
        .collect();
    assert!(never.is_empty(), "operators never exercised: {never:?}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}

#[test]
fn unary_operators_match_the_reference() {
    let mut cases = Vec::new();
    for op in plain_ops(1) {
        for dtype in DTYPES {
            for shape in UNARY_SHAPES {
                cases.push((
                    op.to_string(),
                    format!("{op}(%p0)"),
                    vec![tensor_type(shape, dtype)],
                ));
            }
        }
    }
    run_cases(cases);
}

#[test]
fn binary_operators_match_the_reference() {
    let mut cases = Vec::new();
    for op in plain_ops(2) {
        for dtype in DTYPES {
            for (a, b) in BINARY_SHAPES {
                cases.push((
                    op.to_string(),
                    format!("{op}(%p0, %p1)"),
                    vec![tensor_type(a, dtype), tensor_type(b, dtype)],
                ));
            }
        }
    }
    run_cases(cases);
}

#[test]
fn operators_with_attributes_match_the_reference() {
    let mut cases = Vec::new();
    for dtype in DTYPES {
        for shape in UNARY_SHAPES {
            let t = tensor_type(shape, dtype);
            for call in [
                "clip(%p0, a_min=-0.5f, a_max=0.5f)".to_owned(),
                "nn.leaky_relu(%p0, alpha=0.1f)".to_owned(),
                "cast(%p0, dtype=\"float32\")".to_owned(),
                "cast(%p0, dtype=\"int8\")".to_owned(),
                "cast(%p0, dtype=\"uint8\")".to_owned(),
                "cast(%p0, dtype=\"bool\")".to_owned(),
                "cast(%p0, dtype=\"float64\")".to_owned(),
                "cast(%p0, dtype=\"int64\")".to_owned(),
            ] {
                let op = call.split('(').next().unwrap_or("?").to_owned();
                cases.push((op, call, vec![t.clone()]));
            }
            cases.push((
                "where".into(),
                "where(%p0, %p1, %p2)".into(),
                vec![tensor_type(shape, "bool"), t.clone(), t.clone()],
            ));
            cases.push((
                "full_like".into(),
                "full_like(%p0, %p1)".into(),
                vec![t.clone(), tensor_type(&[], dtype)],
            ));
            cases.push((
                "cast_like".into(),
                "cast_like(%p0, %p1)".into(),
                vec![t.clone(), tensor_type(&[2], "int32")],
            ));
            cases.push((
                "broadcast_to".into(),
                format!(
                    "broadcast_to(%p0, shape=[3, {}])",
                    shape
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                vec![t.clone()],
            ));
        }
        for (a, b) in [(&[2i64, 3][..], &[3i64][..]), (&[1, 4, 5], &[4])] {
            cases.push((
                "nn.bias_add".into(),
                "nn.bias_add(%p0, %p1, axis=-1)".into(),
                vec![tensor_type(a, dtype), tensor_type(b, dtype)],
            ));
        }
        cases.push((
            "nn.bias_add".into(),
            "nn.bias_add(%p0, %p1)".into(),
            vec![tensor_type(&[2, 4, 3], dtype), tensor_type(&[4], dtype)],
        ));
        cases.push((
            "nn.prelu".into(),
            "nn.prelu(%p0, %p1)".into(),
            vec![tensor_type(&[2, 4, 3], dtype), tensor_type(&[4], dtype)],
        ));
        cases.push((
            "broadcast_to_like".into(),
            "broadcast_to_like(%p0, %p1)".into(),
            vec![tensor_type(&[3, 1], dtype), tensor_type(&[3, 5], dtype)],
        ));
    }
    run_cases(cases);
}

#[test]
fn fused_elementwise_chains_match_the_reference() {
    let mut cases = Vec::new();
    for dtype in ["float32", "float64"] {
        for (a, b) in BINARY_SHAPES {
            cases.push((
                "chain".into(),
                "nn.relu(add(multiply(%p0, %p1), tanh(%p1)))".into(),
                vec![tensor_type(a, dtype), tensor_type(b, dtype)],
            ));
            cases.push((
                "chain".into(),
                "%0 = exp(%p0); %1 = subtract(%0, %p1); divide(%1, add(%0, 1f))"
                    .replace("1f", if dtype == "float32" { "1f" } else { "1f64" }),
                vec![tensor_type(a, dtype), tensor_type(b, dtype)],
            ));
        }
    }
    run_cases(cases);
}

/// Shapes for reductions: ranks 0 to 3 with size-1 and size-0 axes.
const REDUCE_SHAPES: &[&[i64]] = &[
    &[],
    &[0],
    &[1],
    &[7],
    &[2, 3],
    &[3, 0],
    &[1, 5],
    &[2, 3, 4],
    &[2, 1, 0],
];

/// Every `axis` attribute text for a tensor of `rank` dimensions: none, and every non-empty
/// subset of the axes, given positively or negatively.
fn axis_texts(rank: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for subset in 1u32..(1 << rank) {
        let axes: Vec<i64> = (0..rank as i64)
            .filter(|d| subset & (1 << d) != 0)
            .collect();
        let pos: Vec<String> = axes.iter().map(i64::to_string).collect();
        let neg: Vec<String> = axes
            .iter()
            .rev()
            .map(|d| (d - rank as i64).to_string())
            .collect();
        // Alternately positive and negative (reversed), to keep the case count down.
        let axes = if subset % 2 == 1 { pos } else { neg };
        out.push(format!(", axis=[{}]", axes.join(", ")));
    }
    out
}

#[test]
fn reductions_match_the_reference() {
    let mut cases = Vec::new();
    for shape in REDUCE_SHAPES {
        for axis in axis_texts(shape.len()) {
            for keepdims in ["", ", keepdims=True"] {
                for exclude in ["", ", exclude=True"] {
                    let attrs = format!("{axis}{keepdims}{exclude}");
                    for dtype in DTYPES {
                        let t = tensor_type(shape, dtype);
                        for op in ["sum", "mean", "max", "min", "prod", "all", "any"] {
                            // The mean of 64-bit integers needs a 128-bit sum: not compiled.
                            if op == "mean" && *dtype == "int64" {
                                continue;
                            }
                            cases.push((op.into(), format!("{op}(%p0{attrs})"), vec![t.clone()]));
                        }
                        for op in ["argmax", "argmin"] {
                            for last in ["", ", select_last_index=True"] {
                                cases.push((
                                    op.into(),
                                    format!("{op}(%p0{attrs}{last})"),
                                    vec![t.clone()],
                                ));
                            }
                        }
                    }
                    for dtype in ["float32", "float64", "int8", "uint8", "bool"] {
                        let t = tensor_type(shape, dtype);
                        let ones: Vec<i64> = shape.iter().map(|_| 1).collect();
                        for mean in [t.clone(), tensor_type(&ones, dtype)] {
                            for unbiased in ["", ", unbiased=True"] {
                                cases.push((
                                    "variance".into(),
                                    format!("variance(%p0, %p1{attrs}{unbiased})"),
                                    vec![t.clone(), mean.clone()],
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    // A reduction with an elementwise epilogue and prologue in one kernel.
    for (shape, axis) in [(&[2, 3, 4][..], "1"), (&[5, 7], "-1"), (&[3], "0")] {
        cases.push((
            "epilogue".into(),
            format!("%0 = exp(%p0); %1 = sum(%0, axis=[{axis}]); sqrt(%1)"),
            vec![tensor_type(shape, "float32")],
        ));
    }
    run_cases_within(cases, (1e-4, 1e-5));
}
