//! Every primitive function `fuse_ops` makes of the repository's programs (`ir-tests/`,
//! `benches/programs/`) and the conformance programs, compiled into a kernel, computes what the
//! interpreter computes for it on random inputs. Primitives with an operator that has no
//! compute definition yet are counted and skipped (the kernel compiler reports them as
//! unsupported); every other outcome must match. Primitives with `?` dimensions are specialized
//! to concrete argument types first, as the VM compiles them on first call.

mod common;

use std::path::{Path, PathBuf};

use relay_interp::{InterpOptions, SplitMix64, random_tensor};
use relay_ir::{
    Dim, Expr, ExprKind, Function, GlobalFunc, Module, ModuleKind, NDArray, Span, Symbol, Type,
    TypeKind, Value,
};
use relay_passes::{PassManager, pass_by_name};

fn relay_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            relay_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "relay") {
            out.push(path);
        }
    }
}

/// Every primitive function literal in `e`.
fn primitives(e: &Expr, out: &mut Vec<Function>) {
    if let ExprKind::Function(f) = e.kind()
        && relay_ir::visit::is_primitive(f)
    {
        out.push(f.clone());
        return;
    }
    relay_ir::visit::for_each_child(e, |c| primitives(c, out));
}

/// The candidate sizes a `?` dimension takes, in order: every `?` of a group takes the same
/// size (dimensions a group's operators equate must agree), the first that type-checks.
const DYNAMIC_SIZES: [i64; 7] = [3, 2, 4, 1, 6, 5, 8];

/// The tensor leaves of a parameter type, depth first, with every `?` dimension set to `n`.
fn concrete_leaves(ty: &Type, n: i64, out: &mut Vec<Type>) -> Result<(), String> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => {
            let dims: Vec<i64> = shape
                .iter()
                .map(|d| match d {
                    Dim::Known(k) => *k,
                    Dim::Any => n,
                })
                .collect();
            out.push(Type::tensor(&dims, *dtype));
            Ok(())
        }
        TypeKind::Tuple(fields) => fields.iter().try_for_each(|f| concrete_leaves(f, n, out)),
        _ => Err(format!("a parameter of type `{ty}`")),
    }
}

/// The concrete argument types `prim` is compiled for: its parameters' types, tuples
/// flattened; with `?` dimensions, the first two of [`DYNAMIC_SIZES`] the function type-checks
/// with (none when none does).
fn argument_types(prim: &Function) -> Result<Vec<Vec<Type>>, String> {
    let (sizes, wanted): (&[i64], usize) = if relay_kernel::is_dynamic(prim) {
        (&DYNAMIC_SIZES, 2)
    } else {
        (&DYNAMIC_SIZES[..1], 1)
    };
    let mut found = Vec::new();
    for &n in sizes {
        let mut args = Vec::new();
        for p in &prim.params {
            let ty = p
                .checked_type()
                .or(p.ty())
                .ok_or("a parameter without a type")?;
            concrete_leaves(ty, n, &mut args)?;
        }
        if relay_kernel::specialize::specialize(prim, &args).is_ok() {
            found.push(args);
            if found.len() == wanted {
                break;
            }
        }
    }
    Ok(found)
}

/// The interpreter's value of a parameter of type `ty`, made of the next tensors of
/// `leaves` (tuples rebuilt).
fn parameter_value(ty: &Type, leaves: &mut std::slice::Iter<'_, NDArray>) -> Result<Value, String> {
    match ty.kind() {
        TypeKind::Tuple(fields) => Ok(Value::tuple(
            fields
                .iter()
                .map(|f| parameter_value(f, leaves))
                .collect::<Result<_, _>>()?,
        )),
        _ => leaves
            .next()
            .map(|t| Value::tensor(t.clone()))
            .ok_or_else(|| "fewer inputs than tensor parameters".to_owned()),
    }
}

/// `Ok(false)`: a group not supported yet, printed (with why) under `RELAY_PRINT_UNSUPPORTED`.
fn unsupported(why: &dyn std::fmt::Display) -> Result<bool, String> {
    if std::env::var_os("RELAY_PRINT_UNSUPPORTED").is_some() {
        eprintln!("unsupported: {why}");
    }
    Ok(false)
}

/// Compiles and runs `prim` against the interpreter. `Ok(false)`: not supported yet. A group
/// with `?` dimensions is compiled for concrete argument types, two of them
/// ([`argument_types`]); the interpreter runs the dynamic group itself on the same inputs.
fn check(prim: &Function, seed: u64) -> Result<bool, String> {
    // Random shape inputs are not shapes: these run on the VM at computed shapes
    // (`relay-vm/tests/dynamic_shapes.rs`).
    let value_shaped = prim
        .body
        .op_call()
        .is_some_and(|(op, _, _)| relay_ops::dynamic::is_value_shaped(op));
    if value_shaped {
        return unsupported(&"its result shape depends on its inputs' values");
    }
    let candidates = match argument_types(prim) {
        Ok(c) if c.is_empty() => return unsupported(&"no size of `?` dimensions type-checks"),
        Ok(c) => c,
        Err(why) => return unsupported(&why),
    };
    for args in &candidates {
        let shown: Vec<String> = args.iter().map(|t| format!("`{t}`")).collect();
        let checked = check_for(prim, args, seed)
            .map_err(|why| format!("for arguments {}: {why}", shown.join(", ")))?;
        if !checked {
            return Ok(false);
        }
    }
    Ok(true)
}

/// [`check`] for arguments of the concrete types `args`.
fn check_for(prim: &Function, args: &[Type], seed: u64) -> Result<bool, String> {
    let kernel = match relay_kernel::compile_primitive_for(prim, "group", args) {
        Ok(k) => k,
        Err(e) if e.is_unsupported() => return unsupported(&e),
        Err(e) => return Err(format!("does not compile: {e}")),
    };
    let specialized =
        relay_kernel::specialize::specialize(prim, args).map_err(|e| e.to_string())?;
    let mut rng = SplitMix64::new(seed);
    let mut inputs = Vec::new();
    for t in args {
        // Huge tensors get no random inputs: not checked here.
        match random_tensor(Some(t), &mut rng) {
            Ok(t) => inputs.push(t),
            Err(_) => return Ok(false),
        }
    }
    let mut leaves = inputs.iter();
    let mut values = Vec::new();
    for p in &prim.params {
        let ty = p
            .checked_type()
            .or(p.ty())
            .ok_or("a parameter without a type")?;
        values.push(parameter_value(ty, &mut leaves)?);
    }
    let module = Module {
        functions: vec![GlobalFunc {
            name: Symbol::intern("main"),
            func: prim.clone(),
            span: Span::DUMMY,
        }],
        types: Vec::new(),
        kind: ModuleKind::Definitions,
        source: None,
    };
    let expected = relay_interp::run(&module, "main", values, &InterpOptions::default());
    let mut outputs: Vec<NDArray> =
        relay_kernel::output_arrays(&specialized).map_err(|e| e.to_string())?;
    let refs: Vec<&NDArray> = inputs.iter().collect();
    let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
    let actual = kernel.call(&refs, &mut outs);
    common::compare_results(actual, expected, &outputs, (1e-4, 1e-5)).map(|()| true)
}

/// The operators called in `e` (primitive bodies are let-chains and nested calls).
fn operators(e: &Expr, out: &mut Vec<&'static str>) {
    if let Some((op, _, _)) = e.op_call() {
        out.push(op.name);
    }
    relay_ir::visit::for_each_child(e, |c| operators(c, out));
}

/// Why `prim`, when `fuse_ops` grouped an attention into it (a softmax between two products),
/// is not the kernel library's attention — which the merge is for: a loop nest of it would be
/// compiled per shape.
fn attention_not_on_the_library(prim: &Function) -> Option<String> {
    let mut ops = Vec::new();
    operators(&prim.body, &mut ops);
    let products = ops
        .iter()
        .filter(|o| matches!(**o, "nn.batch_matmul" | "nn.dense"))
        .count();
    if products < 2 || !ops.contains(&"nn.softmax") {
        return None;
    }
    match relay_kernel::compile_primitive(prim, "attention") {
        Ok(k) if k.entry().is_none() => None,
        Ok(_) => Some("an attention group compiled to a loop nest".into()),
        Err(e) => Some(format!("an attention group does not compile: {e}")),
    }
}

#[test]
fn every_fused_group_matches_the_interpreter() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    relay_files(&root.join("ir-tests"), &mut files);
    relay_files(&root.join("benches/programs"), &mut files);
    relay_files(&root.join("conformance"), &mut files);
    // The shared conformance programs too, when they are beside the repository.
    relay_files(&root.join("../shared/conformance"), &mut files);
    files.sort();
    let fuse = pass_by_name("fuse_ops").expect("fuse_ops is registered");
    let (mut compiled, mut dynamic, mut unsupported) = (0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Ok(module) = relay_syntax::parse(&text, "p.relay") else {
            continue;
        };
        if relay_types::check_module(&module).is_err() {
            continue;
        }
        let Ok((fused, _)) = PassManager::new(vec![fuse], 2).run(module) else {
            continue;
        };
        let mut prims = Vec::new();
        for f in &fused.functions {
            primitives(&f.func.body, &mut prims);
        }
        for (i, prim) in prims.iter().enumerate() {
            if let Some(why) = attention_not_on_the_library(prim) {
                failures.push(format!("{} (primitive {i}): {why}", path.display()));
            }
            match check(prim, i as u64) {
                Ok(true) => {
                    compiled += 1;
                    dynamic += usize::from(relay_kernel::is_dynamic(prim));
                }
                Ok(false) => unsupported += 1,
                Err(why) => failures.push(format!(
                    "{} (primitive {i}): {why}\n{}",
                    path.display(),
                    relay_ir::print_expr(
                        &Expr::new(ExprKind::Function(prim.clone()), Span::DUMMY),
                        &Default::default()
                    )
                )),
            }
        }
    }
    eprintln!(
        "fused groups: {compiled} compiled and matched ({dynamic} with `?` dimensions, \
         specialized), {unsupported} not supported yet"
    );
    assert!(compiled > 0, "no fused group compiled");
    assert!(dynamic > 0, "no fused group with `?` dimensions compiled");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}
