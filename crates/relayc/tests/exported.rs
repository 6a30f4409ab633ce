//! Models exported by PyTorch's two exporters (`crates/relay-onnx/tests/data/exported/`,
//! written by `benches/exported/export.py --tests`: tiny BERT and GPT-2 with SDPA attention,
//! a dynamic batch, a dynamic batch and sequence, nn.LSTM, nn.GRU, Loop, If and Scan, each from the TorchScript exporter
//! (`_ts`, opset 17) and the dynamo exporter (`_dynamo`, opset 20)) run by `relayc` as ONNX
//! Runtime computed them. A model whose directory `known_failures.txt` lists must still fail
//! to import (so that the list shrinks when it starts working); every other one must match.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use relay::NDArray;
use relay::npy::{read_npy_file, read_npz_file, write_npy_file};

/// The largest max |relayc - ORT| / max(1, max |ORT|) an output may have.
const TOLERANCE: f64 = 1e-4;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../relay-onnx/tests/data/exported")
}

fn relayc(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relayc"))
        .args(args)
        .output()
        .unwrap()
}

/// A scratch directory for one model.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("relayc-exported-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The model directories, sorted.
fn models() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    dirs
}

/// The files of `dir` named `{prefix}{key}.npy`, as (key, path), sorted by key.
fn npy_files(dir: &Path, prefix: &str) -> Vec<(String, PathBuf)> {
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let key = name.strip_prefix(prefix)?.strip_suffix(".npy")?.to_string();
            Some((key, p))
        })
        .collect();
    files.sort();
    files
}

/// How a model fared.
enum Outcome {
    Matches,
    /// relayc failed (import, build or run): its stderr.
    Fails(String),
    /// relayc ran but its outputs are not ONNX Runtime's.
    Mismatch(String),
}

/// Runs the model of `dir` on its inputs: `relayc run model.onnx`, or for a model exported
/// with dynamic dimensions (`"dynamic": true` in its `meta.json`), `relayc build model.onnx`
/// with its symbolic dimensions kept, then `relayc run` of that executable, on the inputs and
/// again on their first batch row alone (each row of these models is computed alone, so its
/// outputs are the first rows of ONNX Runtime's): one executable at two shapes.
fn run(dir: &Path) -> Outcome {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let work = scratch(&name);
    let outcome = run_in(dir, &work);
    let _ = std::fs::remove_dir_all(&work);
    outcome
}

/// [`run`] with scratch directory `work`.
fn run_in(dir: &Path, work: &Path) -> Outcome {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let model = dir.join("model.onnx").display().to_string();
    let inputs: Vec<(String, NDArray)> = npy_files(dir, "input_")
        .into_iter()
        .map(|(k, p)| (k, read_npy_file(&p).unwrap()))
        .collect();
    let wants: Vec<(String, NDArray)> = npy_files(dir, "output_")
        .into_iter()
        .map(|(k, p)| (k, read_npy_file(&p).unwrap()))
        .collect();
    assert!(!wants.is_empty(), "{}: no output_*.npy", dir.display());
    if meta["dynamic"].as_bool() != Some(true) {
        return run_on(&model, work, &inputs, &wants);
    }
    let ro = work.join("model.ro").display().to_string();
    let built = relayc(&["build".into(), model, "-o".into(), ro.clone()]);
    if !built.status.success() {
        return Outcome::Fails(String::from_utf8_lossy(&built.stderr).into_owned());
    }
    let first = |set: &[(String, NDArray)]| -> Vec<(String, NDArray)> {
        set.iter().map(|(k, a)| (k.clone(), first_row(a))).collect()
    };
    match run_on(&ro, work, &inputs, &wants) {
        Outcome::Matches => run_on(&ro, work, &first(&inputs), &first(&wants)),
        other => other,
    }
}

/// The first row (along axis 0) of `a`, keeping the axis.
fn first_row(a: &NDArray) -> NDArray {
    let rows = a.shape().first().copied().unwrap_or(1).max(1) as usize;
    let bytes = &a.as_bytes()[..a.as_bytes().len() / rows];
    let mut shape = a.shape().to_vec();
    shape[0] = 1;
    NDArray::from_bytes(a.dtype(), &shape, bytes).unwrap()
}

/// `relayc run target` on `inputs` (by name), its outputs compared with `wants` (by key).
fn run_on(
    target: &str,
    work: &Path,
    inputs: &[(String, NDArray)],
    wants: &[(String, NDArray)],
) -> Outcome {
    let out = work.join("out.npz");
    let mut args = vec![
        "run".to_string(),
        target.into(),
        "--threads".into(),
        "1".into(),
    ];
    for (input, array) in inputs {
        let path = work.join(format!("input_{input}.npy"));
        write_npy_file(&path, array).unwrap();
        args.extend(["--input".into(), format!("{input}={}", path.display())]);
    }
    args.extend(["--output".into(), out.display().to_string()]);
    let ran = relayc(&args);
    if !ran.status.success() {
        return Outcome::Fails(String::from_utf8_lossy(&ran.stderr).into_owned());
    }
    let got = read_npz_file(&out).unwrap();
    if got.len() != wants.len() {
        return Outcome::Mismatch(format!(
            "{} outputs, ONNX Runtime has {}",
            got.len(),
            wants.len()
        ));
    }
    for (key, want) in wants {
        let Some((_, g)) = got.iter().find(|(k, _)| k == key) else {
            return Outcome::Mismatch(format!("no output {key}"));
        };
        if g.shape() != want.shape() {
            return Outcome::Mismatch(format!(
                "output {key}: shape {:?}, ONNX Runtime's {:?}",
                g.shape(),
                want.shape()
            ));
        }
        let (gv, wv) = (g.to_f64_vec(), want.to_f64_vec());
        let scale = wv.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
        let diff = gv.iter().zip(&wv).fold(0.0_f64, |m, (a, b)| {
            if a.is_nan() && b.is_nan() {
                m
            } else if (a - b).is_nan() {
                f64::INFINITY
            } else {
                m.max((a - b).abs())
            }
        });
        // A NaN ratio (a NaN scale) is a mismatch too.
        if (diff / scale).is_nan() || diff / scale > TOLERANCE {
            return Outcome::Mismatch(format!(
                "output {key} at input shapes {:?}: max |diff| {diff:.3e} / max(1, max |ORT|) \
                 {scale:.3e} = {:.3e} > {TOLERANCE:e}",
                inputs
                    .iter()
                    .map(|(_, a)| a.shape().to_vec())
                    .collect::<Vec<_>>(),
                diff / scale
            ));
        }
    }
    Outcome::Matches
}

/// The directories `known_failures.txt` lists (`name: reason` lines, `#` comments).
fn known_failures() -> Vec<String> {
    std::fs::read_to_string(data().join("known_failures.txt"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect()
}

/// The first lines of relayc's diagnostic, for a failure message.
fn head(text: &str) -> String {
    text.lines().take(6).collect::<Vec<_>>().join("\n")
}

#[test]
fn exported_models_match_onnx_runtime_but_the_known_failures() {
    let dirs = models();
    assert!(dirs.len() >= 15, "{} exported models", dirs.len());
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let known = known_failures();
    for listed in &known {
        assert!(
            names.contains(listed),
            "known_failures.txt lists `{listed}`, which is not a model directory"
        );
    }
    let mut problems = Vec::new();
    for (dir, name) in dirs.iter().zip(&names) {
        let listed = known.contains(name);
        match (run(dir), listed) {
            (Outcome::Matches, false) | (Outcome::Fails(_), true) => {}
            (Outcome::Matches, true) => problems.push(format!(
                "{name} now imports and matches ONNX Runtime: remove it from known_failures.txt"
            )),
            (Outcome::Mismatch(e), true) => problems.push(format!(
                "{name} now imports (listed in known_failures.txt) but does not match: {e}"
            )),
            (Outcome::Mismatch(e), false) => problems.push(format!("{name}: {e}")),
            (Outcome::Fails(e), false) => problems.push(format!("{name} fails:\n{}", head(&e))),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn transformers_with_a_dynamic_batch_and_sequence_compile_nothing_per_shape() {
    // Every kernel of the Hugging Face exports is one of the library's, a row kernel or a
    // broadcast kernel (embeddings, masks, attention's scaling, splits, residuals): none is
    // compiled when called.
    for name in [
        "bert_dynbatch_ts",
        "bert_dynbatch_dynamo",
        "bert_dynseq_ts",
        "bert_dynseq_dynamo",
        "gpt2_dynseq_ts",
        "gpt2_dynseq_dynamo",
    ] {
        let model = data().join(name).join("model.onnx").display().to_string();
        // Its own directory: the other test runs these models meanwhile.
        let work = scratch(&format!("{name}-kernels"));
        let ro = work.join("model.ro").display().to_string();
        let built = relayc(&["build".into(), model, "-o".into(), ro]);
        let err = String::from_utf8_lossy(&built.stderr);
        assert!(built.status.success(), "{name}: {err}");
        let specialized: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("compiled when called"))
            .collect();
        assert!(specialized.is_empty(), "{name}: {specialized:#?}");
        let _ = std::fs::remove_dir_all(work);
    }
}
