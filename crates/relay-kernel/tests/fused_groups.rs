//! Every primitive function `fuse_ops` makes of the repository's programs (`ir-tests/`,
//! `benches/programs/`) and the conformance programs, compiled into a kernel, computes what the
//! interpreter computes for it on random inputs. Primitives with an operator that has no
//! compute definition yet are counted and skipped (the kernel compiler reports them as
//! unsupported); every other outcome must match.

use std::path::{Path, PathBuf};

use relay_interp::{InterpOptions, SplitMix64, compare_tensors, random_tensor};
use relay_ir::{
    Expr, ExprKind, Function, GlobalFunc, Module, ModuleKind, NDArray, Span, Symbol, Value,
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

/// Compiles and runs `prim` against the interpreter. `Ok(false)`: not supported yet.
fn check(prim: &Function, seed: u64) -> Result<bool, String> {
    let kernel = match relay_kernel::compile_primitive(prim, "group") {
        Ok(k) => k,
        Err(e) if e.is_unsupported() => return Ok(false),
        Err(e) => return Err(format!("does not compile: {e}")),
    };
    let mut rng = SplitMix64::new(seed);
    let mut inputs = Vec::new();
    for p in &prim.params {
        // Tuple-typed parameters and huge tensors get no random inputs: not checked here.
        match random_tensor(p.checked_type().or(p.ty()), &mut rng) {
            Ok(t) => inputs.push(t),
            Err(_) => return Ok(false),
        }
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
    let expected = relay_interp::run(
        &module,
        "main",
        inputs.iter().cloned().map(Value::tensor).collect(),
        &InterpOptions::default(),
    );
    let mut outputs: Vec<NDArray> = relay_kernel::output_arrays(prim).map_err(|e| e.to_string())?;
    let refs: Vec<&NDArray> = inputs.iter().collect();
    let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
    let actual = kernel.call(&refs, &mut outs);
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
                if let Some(why) = compare_tensors(got, &want, 1e-4, 1e-5) {
                    return Err(format!("output {i}: {why}"));
                }
            }
            Ok(true)
        }
        (Err(_), Err(_)) => Ok(true),
        (Ok(()), Err(e)) => Err(format!(
            "the kernel succeeds where the interpreter fails: {e:?}"
        )),
        (Err(e), Ok(_)) => Err(format!(
            "the kernel fails where the interpreter succeeds: {e}"
        )),
    }
}

#[test]
fn every_fused_group_matches_the_interpreter() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    relay_files(&root.join("ir-tests"), &mut files);
    relay_files(&root.join("benches/programs"), &mut files);
    relay_files(&root.join("../shared/conformance"), &mut files);
    files.sort();
    let fuse = pass_by_name("fuse_ops").expect("fuse_ops is registered");
    let (mut compiled, mut unsupported) = (0usize, 0usize);
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
            match check(prim, i as u64) {
                Ok(true) => compiled += 1,
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
    eprintln!("fused groups: {compiled} compiled and matched, {unsupported} not supported yet");
    assert!(compiled > 0, "no fused group compiled");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
}
