//! The importer's test models, written by `tests/generate.py` with ONNX Runtime's outputs:
//! `tests/data/ops` (a model per operator form and control-flow pattern, written here) and
//! `tests/data/node` (ONNX's own backend node tests for the operators the importer converts).
//! Each is imported — its short vector and scalar inputs folded as constants, as `relayc run
//! MODEL.onnx` does — and run by the reference interpreter on its stored inputs, against the
//! stored outputs. `relayc`'s tests run the same models on the VM.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use relay_onnx::{ImportOptions, Imported, import};
use relay_runtime::npy::read_npz_file;
use relay_runtime::{NDArray, Value};

/// The case directories under `tests/data/<set>`, sorted.
fn cases(set: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(set);
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    dirs
}

/// The tensor leaves of `v`, depth first.
fn leaves(v: &Value, out: &mut Vec<NDArray>) -> Result<(), String> {
    match v {
        Value::Tensor(t) => out.push((**t).clone()),
        Value::Tuple(fields) => {
            for f in fields.iter() {
                leaves(f, out)?;
            }
        }
        other => return Err(format!("not a tensor or tuple: {other:?}")),
    }
    Ok(())
}

/// Whether `got` is the expected `want`: the same shape and dtype, floats within `rtol`
/// relative to the expected magnitude (and 1e-5 absolute), integers and booleans exactly.
fn agrees(got: &NDArray, want: &NDArray, rtol: f64) -> Result<(), String> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Err(format!(
            "{:?} {} against {:?} {}",
            got.shape(),
            got.dtype(),
            want.shape(),
            want.dtype()
        ));
    }
    let exact = !want.dtype().is_float();
    for (i, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
        let same = *g == w || (g.is_nan() && w.is_nan());
        let close = (g - w).abs() <= 1e-5 + rtol * w.abs();
        if !(same || !exact && close) {
            return Err(format!("element {i}: {g} against {w}"));
        }
    }
    Ok(())
}

/// Imports and runs case `dir`, comparing with its stored outputs.
fn check(dir: &Path, rtol: f64) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let inputs = read_npz_file(&dir.join("inputs.npz")).map_err(|e| e.to_string())?;
    let wants = read_npz_file(&dir.join("outputs.npz")).map_err(|e| e.to_string())?;
    // Shapes, axes, scales and bounds given as inputs are constants of the import; the
    // other inputs' shapes fix symbolic dimensions.
    let (constants, data): (Vec<_>, Vec<_>) = inputs
        .into_iter()
        .partition(|(_, a)| a.ndim() == 0 || a.ndim() == 1 && a.num_elements() <= 16);
    let options = ImportOptions {
        constants,
        input_shapes: data
            .iter()
            .map(|(k, a)| (k.clone(), a.shape().to_vec()))
            .collect(),
        ..ImportOptions::default()
    };
    let m = import(&bytes, &options).map_err(|e| e.to_string())?;
    run_against(&m, &data, &wants, rtol)
}

/// Runs imported model `m` on inputs `data` (by ONNX name) against outputs `wants` (by
/// position).
fn run_against(
    m: &Imported,
    data: &[(String, NDArray)],
    wants: &[(String, NDArray)],
    rtol: f64,
) -> Result<(), String> {
    let args = m
        .inputs
        .iter()
        .map(|p| {
            data.iter()
                .find(|(k, _)| *k == p.onnx_name)
                .map(|(_, a)| a)
                .ok_or_else(|| format!("no value for input `{}`", p.onnx_name))
        })
        .chain(m.params.iter().map(|(_, a)| Ok(a)))
        .map(|a| a.map(|a| Value::Tensor(Arc::new(a.clone()))))
        .collect::<Result<Vec<_>, _>>()?;
    let v = relay_interp::run(&m.module, "main", args, &Default::default())
        .map_err(|e| format!("{e:?}"))?;
    let mut got = Vec::new();
    leaves(&v, &mut got)?;
    if got.len() != wants.len() {
        return Err(format!("{} outputs, expected {}", got.len(), wants.len()));
    }
    for (i, g) in got.iter().enumerate() {
        let (_, w) = wants
            .iter()
            .find(|(k, _)| *k == i.to_string())
            .ok_or("outputs.npz lacks an output")?;
        agrees(g, w, rtol).map_err(|e| format!("output {i}: {e}"))?;
    }
    Ok(())
}

#[test]
fn every_generated_model_matches_onnx_runtime() {
    let cases = cases("ops");
    assert!(cases.len() >= 40, "{cases:?}");
    assert_all(&cases, |dir| check(dir, 1e-4));
}

/// Fails with every case of `cases` that `check` fails, named.
fn assert_all(cases: &[PathBuf], check: impl Fn(&Path) -> Result<(), String>) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            check(dir).err().map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The models with symbolic dimensions: each imported once, with no shapes given (its
/// dynamic dimensions `?` in the text), and run at two sizes against ONNX Runtime.
#[test]
fn dynamic_models_run_at_every_size_they_are_given() {
    let cases = cases("dynamic");
    assert!(cases.len() >= 2, "{cases:?}");
    assert_all(&cases, check_dynamic);
}

/// Imports dynamic case `dir` and runs it at each of its sizes.
fn check_dynamic(dir: &Path) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let m = import(&bytes, &ImportOptions::default()).map_err(|e| e.to_string())?;
    if !m.inputs.iter().any(|p| p.shape.contains(&-1)) || !m.text().contains('?') {
        return Err(format!("no dynamic dimension in\n{}", m.text()));
    }
    for k in 0..2 {
        let read = |f: &str| read_npz_file(&dir.join(format!("{f}_{k}.npz")));
        let data = read("inputs").map_err(|e| e.to_string())?;
        let wants = read("outputs").map_err(|e| e.to_string())?;
        run_against(&m, &data, &wants, 1e-4).map_err(|e| format!("size {k}: {e}"))?;
    }
    Ok(())
}

/// ONNX's node tests: each passes (within ONNX's default tolerance) unless
/// `known_failures.txt` lists it with its reason, and each listed one still fails, so the
/// list stays true.
#[test]
fn onnx_node_tests_pass_but_for_the_known_failures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/node");
    let listed = std::fs::read_to_string(root.join("known_failures.txt")).unwrap();
    let known: Vec<&str> = listed
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(':').next())
        .collect();
    let cases = cases("node");
    assert!(cases.len() >= 500, "{}", cases.len());
    let mut wrong = Vec::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        match (check(dir, 1e-3), known.contains(&name.as_str())) {
            (Err(e), false) => wrong.push(format!("{name} fails: {e}")),
            (Ok(()), true) => wrong.push(format!("{name} passes: take it off known_failures.txt")),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
