//! The importer's per-operator models (`tests/generate.py` wrote them with ONNX Runtime's
//! outputs): each imported and run by the reference interpreter on its stored inputs, against
//! ONNX Runtime's result (`relayc`'s tests run the same models on the VM).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use relay_onnx::{ImportOptions, import};
use relay_runtime::npy::read_npz_file;
use relay_runtime::{NDArray, Value};

/// The case directories under `tests/data/ops`, sorted.
fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ops");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    dirs
}

/// The tensor leaves of `v`, depth first.
fn leaves(v: &Value, out: &mut Vec<NDArray>) {
    match v {
        Value::Tensor(t) => out.push((**t).clone()),
        Value::Tuple(fields) => fields.iter().for_each(|f| leaves(f, out)),
        other => panic!("not a tensor or tuple: {other:?}"),
    }
}

/// Whether `got` is ONNX Runtime's `want`: the same shape and dtype, floats within a few
/// ulps of float32 relative to the magnitude, integers and booleans exactly.
pub fn agrees(got: &NDArray, want: &NDArray) -> Result<(), String> {
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
        let same = g == &w || (g.is_nan() && w.is_nan());
        let close = (g - w).abs() <= 1e-5 + 1e-4 * w.abs();
        if !(same || !exact && close) {
            return Err(format!("element {i}: {g} against {w}"));
        }
    }
    Ok(())
}

#[test]
fn every_generated_model_matches_onnx_runtime() {
    let cases = cases();
    assert!(cases.len() >= 7, "{cases:?}");
    let mut failures = Vec::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let m = match import(&bytes, &ImportOptions::default()) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let inputs = read_npz_file(&dir.join("inputs.npz")).unwrap();
        let wants = read_npz_file(&dir.join("outputs.npz")).unwrap();
        let args = m
            .inputs
            .iter()
            .map(|p| {
                let (_, a) = inputs.iter().find(|(k, _)| *k == p.onnx_name).unwrap();
                a
            })
            .chain(m.params.iter().map(|(_, a)| a))
            .map(|a| Value::Tensor(Arc::new(a.clone())))
            .collect();
        let result = relay_interp::run(&m.module, "main", args, &Default::default());
        let mut got = Vec::new();
        match result {
            Ok(v) => leaves(&v, &mut got),
            Err(e) => {
                failures.push(format!("{name}: {e:?}"));
                continue;
            }
        }
        assert_eq!(got.len(), wants.len(), "{name}");
        for (i, g) in got.iter().enumerate() {
            let (_, w) = wants.iter().find(|(k, _)| *k == i.to_string()).unwrap();
            if let Err(e) = agrees(g, w) {
                failures.push(format!("{name} output {i}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
