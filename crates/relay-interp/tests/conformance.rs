//! Runs every conformance program of the repository (`conformance/P.relay` with inputs
//! `P/<param>.npy`, or those of `$RELAY_CONFORMANCE_DIR`) in the
//! interpreter and compares each tensor leaf of the result, depth-first, with `P/expected.npz`:
//! float leaves with `numpy.allclose(rtol=1e-4, atol=1e-5)` and the same dtype, integer and
//! boolean leaves exactly.

use std::path::{Path, PathBuf};

use relay_interp::{InterpOptions, run};
use relay_ir::Value;
use relay_runtime::npy;

/// The conformance directory: `$RELAY_CONFORMANCE_DIR`, else the repository's
/// `conformance/`. A missing directory stops the run with a clear message instead of passing
/// by checking nothing.
fn conformance_root() -> String {
    let dir = match std::env::var_os("RELAY_CONFORMANCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance"),
    };
    if !dir.is_dir() {
        eprintln!(
            "error: the conformance programs are missing: expected a directory at {}",
            dir.display()
        );
        std::process::exit(1);
    }
    dir.display().to_string()
}

/// Runs one program; `Err` describes the first problem.
fn check(program: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(program).map_err(|e| e.to_string())?;
    let name = program.display().to_string();
    let module = relay_syntax::parse(&text, &name).map_err(|e| relay_syntax::render_plain(&e))?;
    relay_types::check_module(&module).map_err(|e| e.to_string())?;
    let data = program.with_extension("");
    let main = module
        .function("main".into())
        .ok_or_else(|| "no @main".to_owned())?;
    let mut args = Vec::new();
    for param in &main.func.params {
        let path = data.join(format!("{}.npy", param.name()));
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let array = npy::read_npy(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        args.push(Value::tensor(array));
    }
    let result = run(&module, "main", args, &InterpOptions::default())
        .map_err(|e| relay_syntax::render_plain(&e))?;
    let leaves = result.tensor_leaves();
    let expected_bytes =
        std::fs::read(data.join("expected.npz")).map_err(|e| format!("expected.npz: {e}"))?;
    let expected = npy::read_npz(&expected_bytes).map_err(|e| format!("expected.npz: {e}"))?;
    if leaves.len() != expected.len() {
        return Err(format!(
            "{} tensor leaves, expected {}",
            leaves.len(),
            expected.len()
        ));
    }
    for (i, leaf) in leaves.iter().enumerate() {
        let key = i.to_string();
        let want = expected
            .iter()
            .find(|(k, _)| k.trim_end_matches(".npy") == key)
            .map(|(_, a)| a)
            .ok_or_else(|| format!("expected.npz has no leaf `{key}`"))?;
        if let Some(problem) = relay_interp::compare_tensors(leaf, want, 1e-4, 1e-5) {
            return Err(format!("leaf {i}: {problem}"));
        }
    }
    Ok(())
}

/// One trial per conformance program.
fn conformance(path: &Path, _text: String) -> datatest_stable::Result<()> {
    check(path).map_err(|e| format!("{}: {e}", path.display()).into())
}

datatest_stable::harness! {
    { test = conformance, root = conformance_root(), pattern = r"^[^/]*\.relay$" },
}
