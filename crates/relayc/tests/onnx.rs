//! ONNX models through the `relayc` binary: `import` writes text that checks and weights that
//! bind; `run MODEL.onnx` and `build MODEL.onnx` import first and compute what the imported
//! text computes with its weights, which is ONNX Runtime's answer; bad files are errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use relay::npy::read_npy_file;

/// The importer's test data: the model zoo's MNIST CNN, its input and ONNX Runtime's output.
fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../relay-onnx/tests/data")
        .join(name)
}

fn relayc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relayc"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("relayc-onnx-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn values(path: &Path) -> Vec<f64> {
    read_npy_file(path).unwrap().to_f64_vec()
}

#[test]
fn import_run_and_build_agree_with_onnx_runtime() {
    let dir = scratch("mnist");
    let (model, input) = (data("mnist.onnx"), data("mnist_input.npy"));
    let (model, input) = (
        model.to_str().unwrap(),
        format!("input={}", input.display()),
    );
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    ok(&relayc(&[
        "import",
        model,
        "-o",
        &p("m.relay"),
        "--params-out",
        &p("m.npz"),
    ]));
    ok(&relayc(&["check", &p("m.relay")]));
    ok(&relayc(&[
        "run",
        model,
        "--input",
        &input,
        "--output",
        &p("direct.npy"),
    ]));
    ok(&relayc(&[
        "run",
        &p("m.relay"),
        "--params",
        &p("m.npz"),
        "--input",
        &input,
        "--output",
        &p("text.npy"),
    ]));
    ok(&relayc(&["build", model, "-o", &p("m.ro")]));
    ok(&relayc(&[
        "run",
        &p("m.ro"),
        "--input",
        &input,
        "--output",
        &p("ro.npy"),
    ]));
    let direct = values(Path::new(&p("direct.npy")));
    assert_eq!(
        direct,
        values(Path::new(&p("text.npy"))),
        "run MODEL.onnx = the imported text"
    );
    assert_eq!(
        direct,
        values(Path::new(&p("ro.npy"))),
        "build MODEL.onnx = run MODEL.onnx"
    );
    let want = values(&data("mnist_expected.npy"));
    for (g, w) in direct.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{direct:?}\n{want:?}"
        );
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_file_that_is_not_a_model_is_an_error() {
    let dir = scratch("bad");
    let bad = dir.join("bad.onnx");
    std::fs::write(&bad, b"\xff\xff\xff garbage").unwrap();
    for command in ["import", "run", "build"] {
        let out = relayc(&[command, bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not an ONNX model"), "{command}: {stderr}");
    }
    // Truncated: the first half of a real model.
    let bytes = std::fs::read(data("mnist.onnx")).unwrap();
    let half = dir.join("half.onnx");
    std::fs::write(&half, &bytes[..bytes.len() / 2]).unwrap();
    let out = relayc(&["import", half.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    std::fs::remove_dir_all(dir).ok();
}

/// `--input NAME=PATH` arguments for the arrays of `.npz` file `inputs`, each written to a
/// `.npy` file in `work`.
fn input_args(inputs: &Path, work: &Path) -> Result<Vec<String>, String> {
    use relay::npy::{read_npz_file, write_npy_file};
    let stem = inputs.file_stem().unwrap_or_default().to_string_lossy();
    let mut args = Vec::new();
    for (k, a) in read_npz_file(inputs).map_err(|e| e.to_string())? {
        let path = work.join(format!("{stem}-{k}.npy"));
        write_npy_file(&path, &a).map_err(|e| e.to_string())?;
        args.extend(["--input".into(), format!("{k}={}", path.display())]);
    }
    Ok(args)
}

/// Runs the generated case `dir` (a model, `inputs.npz`, `outputs.npz`) with `relayc run
/// MODEL.onnx` on the VM, comparing with the stored outputs within `rtol`.
fn run_generated(dir: &Path, rtol: f64) -> Result<(), String> {
    use relay::npy::read_npz_file;
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let work = scratch(&format!("gen-{name}"));
    let mut args = vec![
        "run".to_string(),
        dir.join("model.onnx").to_str().unwrap().to_string(),
    ];
    args.extend(input_args(&dir.join("inputs.npz"), &work)?);
    let out = work.join("out.npz");
    args.extend(["--output".into(), out.to_str().unwrap().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = relayc(&args);
    let got = read_npz_file(&out);
    let _ = std::fs::remove_dir_all(&work);
    if !run.status.success() {
        return Err(String::from_utf8_lossy(&run.stderr).into_owned());
    }
    agrees(
        &got.map_err(|e| e.to_string())?,
        &dir.join("outputs.npz"),
        rtol,
    )
}

/// Whether outputs `got` (by position, "0", "1", ...) are those of `.npz` file `wants`
/// within `rtol`.
fn agrees(got: &[(String, relay::NDArray)], wants: &Path, rtol: f64) -> Result<(), String> {
    use relay::npy::read_npz_file;
    for (k, want) in read_npz_file(wants).map_err(|e| e.to_string())? {
        let g = &got
            .iter()
            .find(|(n, _)| *n == k)
            .ok_or_else(|| format!("no output {k}"))?
            .1;
        let (gv, wv) = (g.to_f64_vec(), want.to_f64_vec());
        let close = g.shape() == want.shape()
            && gv.iter().zip(&wv).all(|(a, b)| {
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 + rtol * b.abs()
            });
        if !close {
            return Err(format!("output {k}: {gv:?} against {wv:?}"));
        }
    }
    Ok(())
}

/// The case directories of a generated set (`ops` or `node`), sorted.
fn generated(set: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data(set))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    dirs
}

/// The importer's per-operator models (`relay-onnx/tests/generate.py`, control flow among
/// them) run on the VM by `relayc run MODEL.onnx`, against ONNX Runtime's stored outputs.
#[test]
fn generated_models_run_on_the_vm_as_onnx_runtime_does() {
    let dirs = generated("ops");
    assert!(dirs.len() >= 40);
    let failures: Vec<String> = dirs
        .iter()
        .filter_map(|d| {
            run_generated(d, 1e-4)
                .err()
                .map(|e| format!("{}: {e}", d.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A model with symbolic dimensions, built once with no `--input-shape` (`?` dimensions),
/// runs on the VM at every size it is given, as ONNX Runtime computes.
#[test]
fn dynamic_models_build_once_and_run_at_every_size() {
    use relay::npy::read_npz_file;
    let dirs = generated("dynamic");
    assert!(dirs.len() >= 2);
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let work = scratch(&format!("dyn-{name}"));
        let ro = work.join("model.ro");
        let model = dir.join("model.onnx");
        ok(&relayc(&[
            "build",
            model.to_str().unwrap(),
            "-o",
            ro.to_str().unwrap(),
        ]));
        for k in 0..2 {
            let mut args = vec!["run".to_string(), ro.to_str().unwrap().to_string()];
            args.extend(input_args(&dir.join(format!("inputs_{k}.npz")), &work).unwrap());
            let out = work.join(format!("out_{k}.npz"));
            args.extend(["--output".into(), out.to_str().unwrap().to_string()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            ok(&relayc(&args));
            let got = read_npz_file(&out).unwrap();
            let wants = dir.join(format!("outputs_{k}.npz"));
            if let Err(e) = agrees(&got, &wants, 1e-4) {
                panic!("{name} at size {k}: {e}");
            }
        }
        std::fs::remove_dir_all(work).ok();
    }
}

/// ONNX's node tests on the VM: every one passes but those `known_failures.txt` lists.
#[test]
fn onnx_node_tests_run_on_the_vm() {
    let listed = std::fs::read_to_string(data("node/known_failures.txt")).unwrap();
    let known: Vec<&str> = listed
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(':').next())
        .collect();
    let failures: Vec<String> = generated("node")
        .iter()
        .filter(|d| !known.contains(&d.file_name().unwrap().to_string_lossy().as_ref()))
        .filter_map(|d| {
            run_generated(d, 1e-3)
                .err()
                .map(|e| format!("{}: {e}", d.display()))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `import --keep-params-inline` writes one file, weights in its `#[metadata]` section, that
/// runs alone and computes exactly what `run MODEL.onnx` does.
#[test]
fn imported_text_with_inline_weights_runs_alone() {
    let dir = scratch("inline");
    let p = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let model = data("mnist.onnx");
    let input = format!("input={}", data("mnist_input.npy").display());
    ok(&relayc(&[
        "import",
        model.to_str().unwrap(),
        "-o",
        &p("m.relay"),
        "--keep-params-inline",
    ]));
    let text = std::fs::read_to_string(dir.join("m.relay")).unwrap();
    assert!(text.contains("#[metadata]") && text.contains("meta[relay.Constant]"));
    assert!(!dir.join("m.npz").exists());
    ok(&relayc(&["check", &p("m.relay")]));
    ok(&relayc(&[
        "run",
        &p("m.relay"),
        "--input",
        &input,
        "--output",
        &p("a.npy"),
    ]));
    ok(&relayc(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &input,
        "--output",
        &p("b.npy"),
    ]));
    assert_eq!(values(&dir.join("a.npy")), values(&dir.join("b.npy")));
    let _ = std::fs::remove_dir_all(&dir);
}
