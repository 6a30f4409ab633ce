//! The VM's result equals the reference interpreter's on every Relay program of the
//! repository (`ir-tests/**`, `benches/programs/`, `examples/`) and of the shared conformance
//! suite, under every pipeline configuration the VM is tested with: opt levels 0 and 2, with
//! and without `plan_memory`.
//!
//! For each program that parses, type-checks and has `@main`: the inputs are the conformance
//! program's `.npy` files, or seeded random tensors; the interpreter runs the original typed
//! module; each configuration lowers it, compiles it, validates the executable, prints every
//! function, and runs `@main` on a fresh VM. Results must be equal (floats within SPEC §4's
//! tolerance); a program the interpreter fails on must fail on the VM too. Conformance
//! results are also checked against the suite's `expected.npz`. Every failure is collected and
//! printed with its file, configuration, expected and actual value, then the test fails.
//!
//! Each executable is also saved to bytes and loaded again ([`common::round_trip`]): the loaded
//! executable must equal the original (functions, constants, kernels, globals, types) and
//! compute exactly the same result (bit for bit, or the same error).

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::{Config, INPUT_SEED, tolerance};
use relay_interp::{InterpOptions, SplitMix64};
use relay_ir::{Dim, Function, Module, Symbol, Type, TypeKind, Value};
use relay_vm::{Executable, Vm, VmOptions};

/// The tolerance of the conformance suite's `expected.npz` (its README: `numpy.allclose` with
/// rtol 1e-4, atol 1e-5).
const CONFORMANCE_TOLERANCE: (f64, f64) = (1e-4, 1e-5);

/// The line that starts an `ir-tests/` file's precise-output block: the program ends there.
const OUTPUT_MARKER: &str = "// output:";

/// The repository root (two levels above this crate).
fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's conformance programs.
fn conformance_dir() -> PathBuf {
    repository_root().join("conformance")
}

/// The shared conformance programs, when they are beside the repository (run in addition).
fn shared_conformance_dir() -> PathBuf {
    repository_root().join("../shared/conformance")
}

/// Every `.relay` file under `dir`, recursively, sorted.
fn relay_files(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            if recursive {
                relay_files(&path, recursive, out);
            }
        } else if path.extension().is_some_and(|e| e == "relay") {
            out.push(path);
        }
    }
}

/// The program of a test file: its text before the `// output:` block.
fn program(text: &str) -> &str {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == OUTPUT_MARKER {
            return &text[..offset];
        }
        offset += line.len();
    }
    text
}

/// The frame limit an `ir-tests/` header sets (`// test run ... max-frames=N`).
fn max_frames(text: &str) -> Option<usize> {
    let header = text
        .lines()
        .next()?
        .strip_prefix("//")?
        .trim()
        .strip_prefix("test")?;
    header
        .split_whitespace()
        .find_map(|option| option.strip_prefix("max-frames=")?.parse().ok())
}

/// Where a program comes from, which decides its inputs.
enum Source {
    /// A repository program: seeded random inputs.
    Repository,
    /// A conformance program: `<dir>/<param>.npy` inputs and `<dir>/expected.npz`.
    Conformance(PathBuf),
}

/// How one program went.
enum Outcome {
    /// Checked under every configuration; the problems found.
    Checked(Vec<String>),
    /// Not applicable (does not parse or type-check, no `@main`, no inputs): why.
    Skipped(String),
}

/// The extents tried for a `?` dimension of an input, in order: the first the program runs
/// with is used.
const ANY_EXTENTS: [i64; 2] = [3, 1];

/// A random value of type `ty`: a tensor (every `?` dimension `extent`) or a tuple of them.
fn random_value(ty: &Type, extent: i64, rng: &mut SplitMix64) -> Result<Value, String> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => {
            let dims: Vec<i64> = shape
                .iter()
                .map(|d| match d {
                    Dim::Known(n) => *n,
                    Dim::Any => extent,
                })
                .collect();
            relay_interp::random_tensor(Some(&Type::tensor(&dims, *dtype)), rng).map(Value::tensor)
        }
        TypeKind::Tuple(fields) => fields
            .iter()
            .map(|field| random_value(field, extent, rng))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::tuple),
        _ => Err(format!("`{ty}` is neither a tensor nor a tuple type")),
    }
}

/// Random inputs for `func`, as [`relay_interp::random_inputs`] makes them, but also for tuple
/// parameters and for tensors with `?` dimensions (each of extent `extent`).
fn random_inputs_with(func: &Function, extent: i64) -> Result<Vec<Value>, String> {
    let mut rng = SplitMix64::new(INPUT_SEED);
    func.params
        .iter()
        .map(|param| {
            let ty = param
                .checked_type()
                .or(param.ty())
                .ok_or_else(|| format!("`%{}` has no type", param.name()))?;
            random_value(ty, extent, &mut rng)
        })
        .collect()
}

/// The conformance inputs of `main`'s parameters, from `dir/<name>.npy`.
fn conformance_inputs(module: &Module, dir: &Path) -> Result<Vec<Value>, String> {
    let main = module.function(Symbol::intern("main")).ok_or("no @main")?;
    main.func
        .params
        .iter()
        .map(|param| {
            let path = dir.join(format!("{}.npy", param.name()));
            relay_runtime::npy::read_npy_file(&path)
                .map(Value::tensor)
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))
        })
        .collect()
}

/// The tensor leaves of `value` against the conformance suite's `expected.npz`.
fn check_expected(value: &Value, dir: &Path) -> Result<(), String> {
    let path = dir.join("expected.npz");
    let expected = relay_runtime::npy::read_npz_file(&path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let leaves = value.tensor_leaves();
    if leaves.len() != expected.len() {
        return Err(format!(
            "{} tensor leaves, expected.npz has {}",
            leaves.len(),
            expected.len()
        ));
    }
    let (rtol, atol) = CONFORMANCE_TOLERANCE;
    for (i, leaf) in leaves.iter().enumerate() {
        let key = i.to_string();
        let Some((_, want)) = expected.iter().find(|(k, _)| *k == key) else {
            return Err(format!("expected.npz has no entry \"{key}\""));
        };
        if let Some(why) = relay_interp::compare_tensors(leaf, want, rtol, atol) {
            return Err(format!("leaf {i} differs from expected.npz: {why}"));
        }
    }
    Ok(())
}

/// The message of a panic payload.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Checks that every function of `exe` prints: its header line, then one line per
/// instruction.
fn check_display(exe: &Executable) -> Result<(), String> {
    for func in &exe.functions {
        let text = func.to_string();
        let params: Vec<String> = func.params.iter().map(|p| format!("%{p}")).collect();
        let header = format!(
            "VMFunc {}({}) registers={}",
            func.name,
            params.join(", "),
            func.register_count
        );
        let lines: Vec<&str> = text.lines().collect();
        if lines.first() != Some(&header.as_str()) || lines.len() != func.code.len() + 1 {
            return Err(format!(
                "`{}` prints {} lines for {} instructions, starting `{}`:\n{text}",
                func.name,
                lines.len(),
                func.code.len(),
                lines.first().unwrap_or(&"")
            ));
        }
    }
    Ok(())
}

/// Runs the program under one configuration and compares it with the interpreter's
/// `expected` result.
#[allow(clippy::too_many_arguments)]
fn check_config(
    module: &Module,
    config: Config,
    inputs: &[Value],
    expected: &Result<Value, String>,
    frames: Option<usize>,
    tol: (f64, f64),
    source: &Source,
) -> Result<(), String> {
    let exe = match common::compile(module, config) {
        Ok(exe) => exe,
        // A program that fails at run time may be rejected when it is compiled.
        Err(_) if expected.is_err() => return Ok(()),
        Err(why) => return Err(why),
    };
    check_display(&exe)?;
    let loaded = match common::round_trip(&exe) {
        Ok(loaded) => loaded,
        // Loading compiles the kernels: one the kernel compiler rejects (an operator undefined
        // for its dtype) is the compile-time form of the run-time error.
        Err(_) if expected.is_err() => return Ok(()),
        Err(why) => return Err(why),
    };
    let mut options = VmOptions::default();
    if let Some(frames) = frames {
        options.max_frames = frames;
    }
    let mut vm = Vm::with_options(&exe, options.clone());
    let ran = catch_unwind(AssertUnwindSafe(|| vm.invoke("main", inputs)));
    let actual = ran.map_err(|panic| {
        format!(
            "the VM panics: {}\n{}",
            panic_message(panic.as_ref()),
            common::disassemble(&exe)
        )
    })?;
    // The executable saved and loaded again computes exactly what it computed.
    let mut vm = Vm::with_options(&loaded, options);
    let reloaded = catch_unwind(AssertUnwindSafe(|| vm.invoke("main", inputs)))
        .map_err(|panic| format!("the loaded executable panics: {}", panic_message(&*panic)))?;
    match (&actual, &reloaded) {
        (Ok(a), Ok(b)) => relay_interp::compare_values(a, b, 0.0, 0.0)
            .map_err(|why| format!("the loaded executable computes something else: {why}"))?,
        (Err(a), Err(b)) if a.to_string() == b.to_string() => {}
        (a, b) => {
            return Err(format!(
                "the loaded executable ends differently: {a:?} before saving, {b:?} after"
            ));
        }
    }
    let ty = relay_interp::result_type(module, "main");
    let show = |value: &Value| relay_interp::format_value(value, ty.as_ref(), module);
    match (actual, expected) {
        (Ok(got), Ok(want)) => {
            if let Err(why) = relay_interp::compare_values(&got, want, tol.0, tol.1) {
                return Err(format!(
                    "a different result: {why}\n  expected: {}\n  got:      {}\n{}",
                    show(want),
                    show(&got),
                    common::disassemble(&exe)
                ));
            }
            if let Source::Conformance(dir) = source {
                check_expected(&got, dir)?;
            }
            Ok(())
        }
        (Err(_), Err(_)) => Ok(()),
        // SPEC §3: `take` in mode "fast" may assume its indices are in range (the interpreter
        // checks them; the kernel clamps them and never reads out of bounds).
        (Ok(_), Err(why)) if why.contains("(mode \"fast\")") => Ok(()),
        // A hand-written memory-dialect program breaking the dialect's contract: the output of
        // `vm.invoke_tvm_op` must be a `memory.alloc_tensor` view. The interpreter tracks
        // where each tensor came from; the VM's tensors carry no provenance (at opt level 0
        // the `zeros` there is itself a kernel's output, a view), so it writes the output.
        (Ok(_), Err(why)) if why.contains("is not a tensor made by `memory.alloc_tensor`") => {
            Ok(())
        }
        (Ok(got), Err(why)) => Err(format!(
            "the interpreter fails but the VM returns {}\n  interpreter: {why}\n{}",
            show(&got),
            common::disassemble(&exe)
        )),
        (Err(error), Ok(want)) => Err(format!(
            "the VM fails ({:?}): {error}\n  expected: {}\n{}",
            error.kind,
            show(want),
            common::disassemble(&exe)
        )),
    }
}

/// Checks one program file.
fn check_program(path: &Path, source: &Source) -> Outcome {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Outcome::Checked(vec!["cannot read the file".to_owned()]);
    };
    let text = program(&text);
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let module = match common::typed(text, &name) {
        Ok(module) => module,
        Err(why) => return Outcome::Skipped(why.lines().next().unwrap_or("").to_owned()),
    };
    let Some(main) = module.function(Symbol::intern("main")) else {
        return Outcome::Skipped("no @main".to_owned());
    };
    let frames = max_frames(text);
    let mut interp = InterpOptions::default();
    if let Some(frames) = frames {
        interp.max_frames = frames;
    }
    let run = |inputs: &[Value]| {
        relay_interp::run(&module, "main", inputs.to_vec(), &interp)
            .map_err(|e| relay_syntax::render_plain(&e))
    };
    let (inputs, expected) = match source {
        Source::Repository => match relay_interp::random_inputs(&main.func, INPUT_SEED) {
            Ok(inputs) => {
                let expected = run(&inputs);
                (inputs, expected)
            }
            // `?` dimensions get an extent the program runs with, if one of a few does.
            Err(why) => {
                let mut tried = None;
                for extent in ANY_EXTENTS {
                    let Ok(inputs) = random_inputs_with(&main.func, extent) else {
                        return Outcome::Skipped(why);
                    };
                    let expected = run(&inputs);
                    let ok = expected.is_ok();
                    if tried.is_none() || ok {
                        tried = Some((inputs, expected));
                    }
                    if ok {
                        break;
                    }
                }
                match tried {
                    Some(tried) => tried,
                    None => return Outcome::Skipped(why),
                }
            }
        },
        Source::Conformance(dir) => match conformance_inputs(&module, dir) {
            Ok(inputs) => {
                let expected = run(&inputs);
                (inputs, expected)
            }
            Err(why) => return Outcome::Checked(vec![why]),
        },
    };
    let tol = tolerance(text);
    let problems = Config::ALL
        .iter()
        .filter_map(|&config| {
            check_config(&module, config, &inputs, &expected, frames, tol, source)
                .err()
                .map(|why| format!("[{config}] {why}"))
        })
        .collect();
    Outcome::Checked(problems)
}

#[test]
fn the_vm_computes_what_the_interpreter_computes() {
    let root = repository_root();
    let conformance = conformance_dir();
    assert!(
        conformance.is_dir(),
        "the conformance programs are missing: expected a directory at `{}`",
        conformance.display()
    );
    let mut programs: Vec<(PathBuf, Source)> = Vec::new();
    let mut repository = Vec::new();
    relay_files(&root.join("ir-tests"), true, &mut repository);
    relay_files(&root.join("benches/programs"), false, &mut repository);
    relay_files(&root.join("examples"), false, &mut repository);
    programs.extend(repository.into_iter().map(|p| (p, Source::Repository)));
    let mut suite = Vec::new();
    relay_files(&conformance, false, &mut suite);
    assert!(
        !suite.is_empty(),
        "no programs in `{}`",
        conformance.display()
    );
    relay_files(&shared_conformance_dir(), false, &mut suite);
    programs.extend(suite.into_iter().map(|p| {
        let dir = p.with_extension("");
        (p, Source::Conformance(dir))
    }));

    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    let mut checked = 0usize;
    for (path, source) in &programs {
        let shown = path
            .strip_prefix(&root)
            .map_or_else(|_| path.display().to_string(), |p| p.display().to_string());
        let start = Instant::now();
        match check_program(path, source) {
            Outcome::Checked(problems) => {
                checked += 1;
                failures.extend(problems.into_iter().map(|p| format!("{shown} {p}")));
            }
            Outcome::Skipped(why) => skipped.push(format!("{shown}: {why}")),
        }
        let time = start.elapsed();
        if time.as_secs_f64() > 5.0 {
            eprintln!("note: {shown} took {:.1} s", time.as_secs_f64());
        }
    }
    eprintln!(
        "{checked} programs checked under {} configurations, {} failures; {} not applicable:",
        Config::ALL.len(),
        failures.len(),
        skipped.len()
    );
    for why in &skipped {
        if !why.contains("does not parse") && !why.contains("does not type-check") {
            eprintln!("  {why}");
        }
    }
    assert!(checked >= 100, "only {checked} programs were checked");
    assert!(
        failures.is_empty(),
        "{} failures:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn the_helpers_read_headers_and_programs() {
    assert_eq!(max_frames("// test run error max-frames=100\n"), Some(100));
    assert_eq!(max_frames("// test run\n"), None);
    assert_eq!(program("a\n// output:\n// b\n"), "a\n");
    assert_eq!(program("a\n"), "a\n");
}
