//! Executable files (`.ro`) from the command line: `relayc build FILE -o OUT.ro` writes one,
//! `relayc run OUT.ro` prints what `relayc run FILE` prints, `relayc disasm OUT.ro` prints what
//! `relayc build FILE --emit bytecode` prints; for every program of `examples/`,
//! `benches/programs/`, the shared conformance set and a list of `ir-tests/` programs. Then
//! `--params` bound at build time, `--output`, `--entry`, `--repeat`, `--profile`,
//! `--max-frames` and run-time errors from a file, files that are not executables (empty,
//! Relay text, a wrong magic, truncated, a flipped byte, a newer format version, missing), and
//! the usage errors.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TempFile, arg, code, relayc, stderr, stdout};
use relay::npy::{write_npy, write_npz};
use relay::{DType, NDArray};
use relay_vm::file::{FORMAT_VERSION, MAGIC};

/// Asserts success, showing both streams otherwise.
#[track_caller]
fn assert_succeeds(out: &Output, what: &str) {
    assert_eq!(
        code(out),
        0,
        "{what}\nstderr: {}\nstdout: {}",
        stderr(out),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `text` with the report's line wrapping undone: the frame characters dropped and every run of
/// white space one space.
fn unwrapped(text: &str) -> String {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '│')
        .filter(|w| !w.is_empty())
        .collect();
    words.join(" ")
}

/// Asserts the exit code, that stderr contains `needle` (however the report wrapped it), that
/// nothing panicked and that nothing was printed on stdout.
#[track_caller]
fn assert_fails(out: &Output, expected: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(code(out), expected, "stderr: {err}");
    assert!(
        unwrapped(&err).contains(&unwrapped(needle)),
        "expected {needle:?} in stderr: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `relayc` with `first` then `rest`.
fn relayc_with(first: &[&str], rest: &[&str]) -> Output {
    let mut args = first.to_vec();
    args.extend_from_slice(rest);
    relayc(&args)
}

/// `relayc build PROGRAM -o T.ro BUILD_ARGS...`, which must succeed; the executable file.
#[track_caller]
fn build_executable(program: &Path, build_args: &[&str]) -> TempFile {
    let name = program
        .file_stem()
        .map_or("program".into(), |s| s.to_string_lossy());
    let exe = TempFile::path_for(&format!("{name}.ro"));
    let out = relayc_with(&["build", arg(program), "-o", exe.arg()], build_args);
    assert_succeeds(&out, &format!("build {} -o", program.display()));
    let bytes = std::fs::read(exe.path()).unwrap();
    assert!(bytes.starts_with(&MAGIC), "{}", program.display());
    exe
}

/// Builds `program` to an executable file, then: `relayc run` on the file and on the program
/// print the same result on the same `inputs` (and both succeed), and `relayc disasm` of the
/// file prints what `relayc build --emit bytecode` prints for the program.
#[track_caller]
fn assert_round_trip(program: &Path, inputs: &[&str]) {
    let what = program.display();
    let exe = build_executable(program, &[]);
    let text = relayc_with(&["run", arg(program)], inputs);
    assert_succeeds(&text, &format!("run {what}"));
    let loaded = relayc_with(&["run", exe.arg()], inputs);
    assert_succeeds(&loaded, &format!("run {what} as .ro"));
    assert_eq!(stdout(&loaded), stdout(&text), "run {what}: .ro vs text");

    let disasm = relayc(&["disasm", exe.arg()]);
    assert_succeeds(&disasm, &format!("disasm {what}"));
    let bytecode = relayc(&["build", arg(program), "--emit", "bytecode"]);
    assert_succeeds(&bytecode, &format!("build {what} --emit bytecode"));
    assert!(!stdout(&disasm).is_empty(), "disasm {what}");
    assert_eq!(stdout(&disasm), stdout(&bytecode), "disasm {what}");
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `.relay` files of a directory, sorted; there must be some.
fn relay_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "relay"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no programs in {}", dir.display());
    files
}

#[test]
fn every_example_and_benchmark_program_round_trips() {
    for dir in ["examples", "benches/programs"] {
        for program in relay_files(&repo().join(dir)) {
            assert_round_trip(&program, &["--random-inputs", "0"]);
        }
    }
}

/// The `--input NAME=PATH` arguments for a conformance program: every `.npy` file of its
/// directory.
fn conformance_inputs(program: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(program.with_extension(""))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "npy"))
        .collect();
    files.sort();
    let mut inputs = Vec::new();
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        inputs.push("--input".to_string());
        inputs.push(format!("{name}={}", arg(&path)));
    }
    inputs
}

/// The repository's conformance programs, and the shared ones when they are beside the
/// repository.
fn conformance_programs() -> Vec<PathBuf> {
    let mut programs = relay_files(&repo().join("conformance"));
    assert!(programs.len() >= 6, "{programs:?}");
    let shared = repo().join("../shared/conformance");
    if shared.is_dir() {
        programs.extend(relay_files(&shared));
    }
    programs
}

#[test]
fn every_conformance_program_round_trips() {
    for program in conformance_programs() {
        let inputs = conformance_inputs(&program);
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        assert_round_trip(&program, &inputs);
    }
}

/// `ir-tests/` programs with a `@main` taking tensors: ADTs, closures, references, tuples,
/// dtypes, deep recursion, and (with explicit inputs, below) dynamic shapes.
const IR_TESTS: [&str; 31] = [
    // ADTs: lists, trees, options, naturals, constructors as values, nested matches.
    "run/list_map_and_folds.relay",
    "run/list_filter_zip_rev.relay",
    "run/rose_trees.relay",
    "run/peano_naturals.relay",
    "run/option_and_unfoldr.relay",
    "run/constructors_as_values.relay",
    "run/polymorphic_recursive_local_function.relay",
    "run/prelude_functions.relay",
    "bytecode/nested_match.relay",
    "tail_call/mutual_recursion_match_in_if.relay",
    // Closures.
    "run/closures_capture_closures.relay",
    "run/closures_in_data.relay",
    "run/curried_calls.relay",
    "run/recursive_local_functions.relay",
    "bytecode/closure_capture.relay",
    "bytecode/closure_tail_call.relay",
    "bytecode/global_as_value.relay",
    "tail_call/functions_capturing_functions.relay",
    // References.
    "run/references_as_counters.relay",
    "bytecode/references.relay",
    "fuse_ops/effects_stay_in_place.relay",
    "plan_memory/escapes.relay",
    // Tuples.
    "run/tuple_values.relay",
    "run/memory_tuple_outputs.relay",
    "run/split_sections_and_indices.relay",
    "bytecode/tuples.relay",
    "tail_call/tuple_of_tensors.relay",
    // Dtypes, printing, deep tail recursion.
    "run/tensor_printing.relay",
    "run/dtype_float16_float64.relay",
    "run/integer_widths.relay",
    "run/tail_recursion_deep.relay",
];

/// Input names and shapes.
type Shapes = &'static [(&'static str, &'static [i64])];

/// `ir-tests/` programs with dynamic (`?`) dimensions, with the shapes of the float32 inputs
/// given for them (the other parameters get random data).
const DYNAMIC_IR_TESTS: [(&str, Shapes); 5] = [
    ("bytecode/dynamic_shape.relay", &[("x", &[5, 4])]),
    (
        "manifest_alloc/dynamic_shape_left_alone.relay",
        &[("a", &[5, 3])],
    ),
    (
        "types/op_any_dims_through_network.relay",
        &[("x", &[3, 8]), ("img", &[2, 3, 8, 8])],
    ),
    ("types/op_reduce_any_dims.relay", &[("x", &[2, 3, 4])]),
    (
        "types/op_transform_any_dims_shape_ops.relay",
        &[("x", &[2, 1, 3])],
    ),
];

/// A float32 tensor of `shape` holding `0, 1, 2, ...` scaled and shifted, written to a fresh
/// `.npy` file.
fn npy_file(name: &str, shape: &[i64]) -> TempFile {
    let n: i64 = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 3.0).collect();
    let array = NDArray::from_f64_slice(DType::F32, shape, &values).unwrap();
    let file = TempFile::path_for(&format!("{name}.npy"));
    std::fs::write(file.path(), write_npy(&array)).unwrap();
    file
}

#[test]
fn ir_test_programs_round_trip() {
    let dir = repo().join("ir-tests");
    for program in IR_TESTS {
        assert_round_trip(&dir.join(program), &["--random-inputs", "0"]);
    }
    for (program, shapes) in DYNAMIC_IR_TESTS {
        let files: Vec<(&str, TempFile)> = shapes
            .iter()
            .map(|&(name, shape)| (name, npy_file(name, shape)))
            .collect();
        let mut inputs: Vec<String> = vec!["--random-inputs".into(), "0".into()];
        for (name, file) in &files {
            inputs.push("--input".into());
            inputs.push(format!("{name}={}", file.arg()));
        }
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        assert_round_trip(&dir.join(program), &inputs);
    }
}

/// A W5-style MLP: the weights are parameters of `@main`, bound from a `.npz` at build time.
const MLP: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 8), float32], %w1: Tensor[(16, 8), float32], %b1: Tensor[(16), float32],
          %w2: Tensor[(4, 16), float32], %b2: Tensor[(4), float32]) -> Tensor[(1, 4), float32] {
  let %h = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=16), %b1));
  nn.softmax(nn.bias_add(nn.dense(%h, %w2, units=4), %b2))
}
"#;

/// A float32 tensor of `shape` with values that vary with `seed`.
fn tensor(shape: &[i64], seed: f64) -> NDArray {
    let n: i64 = shape.iter().product();
    let values: Vec<f64> = (0..n)
        .map(|i| ((i as f64 + seed) * 0.618).sin() * 0.5)
        .collect();
    NDArray::from_f64_slice(DType::F32, shape, &values).unwrap()
}

#[test]
fn params_are_bound_as_constants_at_build_time() {
    let program = TempFile::new("mlp.relay", MLP);
    let weights = [
        ("w1", tensor(&[16, 8], 1.0)),
        ("b1", tensor(&[16], 2.0)),
        ("w2", tensor(&[4, 16], 3.0)),
        ("b2", tensor(&[4], 4.0)),
    ];
    let entries: Vec<(String, &NDArray)> =
        weights.iter().map(|(n, a)| (n.to_string(), a)).collect();
    let params = TempFile::path_for("mlp.npz");
    std::fs::write(params.path(), write_npz(&entries)).unwrap();
    let x = TempFile::path_for("x.npy");
    std::fs::write(x.path(), write_npy(&tensor(&[1, 8], 5.0))).unwrap();
    let x_arg = format!("x={}", x.arg());

    let exe = build_executable(program.path(), &["--params", params.arg()]);
    // The weights travel in the file: at least their bytes (16*8 + 16 + 4*16 + 4 floats).
    let size = std::fs::metadata(exe.path()).unwrap().len();
    assert!(size >= 212 * 4, "{size} bytes");
    let disasm = relayc(&["disasm", exe.arg()]);
    assert_succeeds(&disasm, "disasm");
    assert!(
        stdout(&disasm).starts_with("VMFunc main(%x) "),
        "{}",
        stdout(&disasm)
    );

    // Only %x is an input now; the result is what the text file computes with --params.
    let text = relayc(&[
        "run",
        program.arg(),
        "--params",
        params.arg(),
        "--input",
        &x_arg,
    ]);
    assert_succeeds(&text, "run text");
    let loaded = relayc(&["run", exe.arg(), "--input", &x_arg]);
    assert_succeeds(&loaded, "run .ro");
    assert_eq!(stdout(&loaded), stdout(&text));

    // `--params` given to `run` with the file: entries that are no parameters any more are
    // ignored; one naming %x is its input.
    let out = relayc(&[
        "run",
        exe.arg(),
        "--params",
        params.arg(),
        "--input",
        &x_arg,
    ]);
    assert_succeeds(&out, "run .ro --params");
    assert_eq!(stdout(&out), stdout(&text));
    let x_params = TempFile::path_for("x.npz");
    let x_tensor = tensor(&[1, 8], 5.0);
    std::fs::write(x_params.path(), write_npz(&[("x".into(), &x_tensor)])).unwrap();
    let out = relayc(&["run", exe.arg(), "--params", x_params.arg()]);
    assert_succeeds(&out, "run .ro --params x.npz");
    assert_eq!(stdout(&out), stdout(&text));

    // Missing and mistyped inputs: the same messages as for the text file.
    let needle = "missing input `x` of type `Tensor[(1, 8), float32]`: pass --input x=PATH.npy, \
                  --inputs INPUTS.npz or --random-inputs SEED";
    assert_fails(&relayc(&["run", exe.arg()]), 1, needle);
    assert_fails(
        &relayc(&["run", program.arg(), "--params", params.arg()]),
        1,
        needle,
    );
    let wrong = TempFile::path_for("wrong.npy");
    std::fs::write(wrong.path(), write_npy(&tensor(&[2, 8], 0.0))).unwrap();
    let wrong_arg = format!("x={}", wrong.arg());
    let needle = "input `x`: expected `Tensor[(1, 8), float32]`, got a float32 tensor of shape \
                  (2, 8) in `";
    assert_fails(
        &relayc(&["run", exe.arg(), "--input", &wrong_arg]),
        1,
        needle,
    );
    let needle = "--input `w1`: `@main` has no parameter `%w1`; its parameters are `%x`";
    assert_fails(
        &relayc(&[
            "run",
            exe.arg(),
            "--input",
            &x_arg,
            "--input",
            &x_arg.replace("x=", "w1="),
        ]),
        1,
        needle,
    );
    // Random inputs fill %x.
    let out = relayc(&["run", exe.arg(), "--random-inputs", "3"]);
    assert_succeeds(&out, "run .ro --random-inputs");
}

#[test]
fn output_writes_the_result_of_an_executable() {
    // A single tensor to .npy; the tensors of a list (an ADT) and of a tuple to .npz: the same
    // bytes as from the text file.
    let examples = repo().join("examples");
    for (name, ext) in [("mlp", "npy"), ("gru_list", "npz"), ("tree", "npz")] {
        let program = examples.join(format!("{name}.relay"));
        let exe = build_executable(&program, &[]);
        let from_text = TempFile::path_for(&format!("text.{ext}"));
        let from_exe = TempFile::path_for(&format!("exe.{ext}"));
        for (file, target) in [(arg(&program), &from_text), (exe.arg(), &from_exe)] {
            let out = relayc(&[
                "run",
                file,
                "--random-inputs",
                "0",
                "--output",
                target.arg(),
            ]);
            assert_succeeds(&out, &format!("run {file} --output"));
            assert!(out.stdout.is_empty());
        }
        let written = std::fs::read(from_exe.path()).unwrap();
        assert!(!written.is_empty());
        assert_eq!(
            written,
            std::fs::read(from_text.path()).unwrap(),
            "{name}.{ext}"
        );
        // A list or a tuple is not one tensor.
        if ext == "npz" {
            let target = TempFile::path_for("out.npy");
            let out = relayc(&[
                "run",
                exe.arg(),
                "--random-inputs",
                "0",
                "--output",
                target.arg(),
            ]);
            assert_fails(&out, 1, "which a .npy file cannot hold");
        }
    }
}

/// `@main` calls `@f`, so `@f` survives the pipeline's dead-code elimination.
const ENTRY: &str = r#"#[version = "0.0.5"]
type Pair {
  P(Tensor[(2), float32], int32),
}
def @f(%x: Tensor[(2), float32]) -> Pair {
  P(add(%x, %x), 7)
}
def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  match (@f(%x)) {
    P(%y, _) => %y,
  }
}
"#;

#[test]
fn entry_runs_another_global_of_an_executable() {
    let program = TempFile::new("entry.relay", ENTRY);
    let exe = build_executable(program.path(), &[]);
    let text = relayc(&["run", program.arg(), "--entry", "f", "--random-inputs", "1"]);
    assert_succeeds(&text, "run text --entry f");
    assert!(stdout(&text).starts_with("P(["), "{}", stdout(&text));
    for entry in ["f", "@f"] {
        let out = relayc(&["run", exe.arg(), "--entry", entry, "--random-inputs", "1"]);
        assert_succeeds(&out, "run .ro --entry");
        assert_eq!(stdout(&out), stdout(&text));
    }
    let out = relayc(&["run", exe.arg(), "--entry", "g", "--random-inputs", "1"]);
    assert_fails(&out, 1, "no function `@g` in `");
    assert!(stderr(&out).contains("`@f`"), "{}", stderr(&out));
    assert!(stderr(&out).contains("`@main`"), "{}", stderr(&out));
}

#[test]
fn repeat_profile_threads_and_max_frames_work_on_an_executable() {
    let program = TempFile::new("deep.relay", common::DEEP);
    let exe = build_executable(program.path(), &[]);
    let once = relayc(&["run", exe.arg()]);
    assert_succeeds(&once, "run .ro");
    assert_eq!(stdout(&once).trim(), "1000");
    assert!(stderr(&once).is_empty(), "{}", stderr(&once));

    let out = relayc(&["run", exe.arg(), "--repeat", "3", "--threads", "1"]);
    assert_succeeds(&out, "--repeat");
    assert_eq!(stdout(&out), stdout(&once));
    let err = stderr(&out);
    assert!(
        err.lines()
            .any(|l| l.starts_with("load: ") && l.ends_with(" ms")),
        "{err}"
    );
    assert!(!err.contains("compile: "), "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("run: 3 runs: mean ") && l.contains(", p50 ")),
        "{err}"
    );

    let out = relayc(&["run", exe.arg(), "--profile"]);
    assert_succeeds(&out, "--profile");
    let err = stderr(&out);
    for needle in ["load: ", "instruction", "invoke", "storage allocator"] {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }

    // The frame limit, and a run-time error as a diagnostic naming the function.
    let out = relayc(&["run", exe.arg(), "--max-frames", "100"]);
    assert_fails(&out, 1, "recursion limit exceeded");
    assert!(
        stderr(&out).contains("relay::vm::recursion_limit"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("@count"), "{}", stderr(&out));
}

#[test]
fn a_run_time_error_in_an_executable_names_the_source_location() {
    let program = TempFile::new(
        "div.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3), int32], %y: Tensor[(3), int32]) { divide(%x, %y) }
"#,
    );
    let exe = build_executable(program.path(), &[]);
    let zeros = TempFile::path_for("zeros.npy");
    let array = NDArray::from_i128_slice(DType::I32, &[3], &[0, 0, 0]).unwrap();
    std::fs::write(zeros.path(), write_npy(&array)).unwrap();
    let x = format!("x={}", zeros.arg());
    let y = format!("y={}", zeros.arg());
    let out = relayc(&["run", exe.arg(), "--input", &x, "--input", &y]);
    assert_fails(&out, 1, "relay::vm::kernel");
    let err = stderr(&out);
    assert!(
        err.contains("integer division by zero in `@main` at "),
        "{err}"
    );
    assert!(err.contains("div.relay:2:"), "{err}");
}

/// A small valid executable file's bytes.
fn valid_bytes() -> Vec<u8> {
    let program = TempFile::new(
        "valid.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, 1f)) }
"#,
    );
    let exe = build_executable(program.path(), &[]);
    std::fs::read(exe.path()).unwrap()
}

/// `relayc run FILE --random-inputs 0` and `relayc disasm FILE` both fail with exit 1 and
/// `needle` on stderr, without panicking.
#[track_caller]
fn assert_not_loadable(file: &str, needle: &str) {
    assert_fails(&relayc(&["run", file, "--random-inputs", "0"]), 1, needle);
    assert_fails(&relayc(&["disasm", file]), 1, needle);
}

#[test]
fn bad_files_are_errors_not_panics() {
    let bytes = valid_bytes();

    // An executable is recognized by its magic, whatever its name.
    let renamed = TempFile::path_for("model.bin");
    std::fs::write(renamed.path(), &bytes).unwrap();
    assert_succeeds(
        &relayc(&["run", renamed.arg(), "--random-inputs", "0"]),
        "run model.bin",
    );
    assert_succeeds(&relayc(&["disasm", renamed.arg()]), "disasm model.bin");

    let write = |name: &str, contents: &[u8]| {
        let file = TempFile::path_for(name);
        std::fs::write(file.path(), contents).unwrap();
        file
    };
    let magic = "relay::exe::magic";

    let empty = write("empty.ro", b"");
    assert_not_loadable(empty.arg(), "not a relayc executable");
    assert_not_loadable(empty.arg(), magic);

    let text = write(
        "text.ro",
        b"#[version = \"0.0.5\"]\ndef @main() -> int32 { 1 }\n",
    );
    assert_not_loadable(text.arg(), "not a relayc executable: the file starts with");
    // Given to disasm under a Relay name, too.
    let relay = write(
        "text.relay",
        b"#[version = \"0.0.5\"]\ndef @main() -> int32 { 1 }\n",
    );
    assert_fails(&relayc(&["disasm", relay.arg()]), 1, magic);

    let mut wrong_magic = bytes.clone();
    wrong_magic[..4].copy_from_slice(b"ELF\x7f");
    let wrong_magic = write("magic.ro", &wrong_magic);
    assert_not_loadable(wrong_magic.arg(), magic);

    // Truncated: within the magic, within the header, and short of the end.
    let short = write("short.ro", &bytes[..4]);
    assert_not_loadable(short.arg(), magic);
    let header = write("header.ro", &bytes[..10]);
    assert_not_loadable(header.arg(), "malformed executable: section `header`");
    assert_not_loadable(header.arg(), "relay::exe::malformed");
    let truncated = write("truncated.ro", &bytes[..bytes.len() - 100]);
    assert_not_loadable(truncated.arg(), "section `header` at byte 16");
    assert_not_loadable(truncated.arg(), "relay::exe::malformed");

    // A flipped byte in the middle, and in the checksum itself.
    for at in [bytes.len() / 2, bytes.len() - 1] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x40;
        let flipped = write("flipped.ro", &flipped);
        assert_not_loadable(flipped.arg(), "the executable is corrupt: its checksum is ");
        assert_not_loadable(flipped.arg(), "relay::exe::checksum");
    }

    // A newer format version: refused before the checksum is checked.
    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let newer = write("newer.ro", &newer);
    let needle = format!(
        "the executable has format version {}, which is newer than this relayc supports \
         (format version {FORMAT_VERSION})",
        FORMAT_VERSION + 1
    );
    assert_not_loadable(newer.arg(), &needle);
    assert_not_loadable(newer.arg(), "relay::exe::version");

    let missing = TempFile::path_for("missing.ro");
    assert_not_loadable(missing.arg(), "cannot read `");
    assert_not_loadable(missing.arg(), "relay::exe::io");
}

#[test]
fn compiler_flags_and_the_interpreter_are_usage_errors_with_an_executable() {
    let program = TempFile::new(
        "flags.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, 1f)) }
"#,
    );
    let exe = build_executable(program.path(), &[]);
    let passes = TempFile::new("passes.toml", "[pipeline]\npasses = [\"to_anf\"]\n");
    for flags in [
        &["--passes", passes.arg()][..],
        &["--opt-level", "1"],
        &["--executor", "interp"],
    ] {
        let out = relayc_with(&["run", exe.arg(), "--random-inputs", "0"], flags);
        assert_fails(&out, 2, "the executable is already compiled");
        assert!(stderr(&out).contains(flags[0]), "{}", stderr(&out));
    }
    // `--executor vm` is what runs it anyway.
    let out = relayc(&["run", exe.arg(), "--random-inputs", "0", "--executor", "vm"]);
    assert_succeeds(&out, "--executor vm");

    // disasm takes exactly one file.
    assert_fails(&relayc(&["disasm"]), 2, "EXE.ro");
    assert_fails(
        &relayc(&["disasm", exe.arg(), exe.arg()]),
        2,
        "unexpected argument",
    );
    let help = relayc(&["disasm", "--help"]);
    assert_succeeds(&help, "disasm --help");
    assert!(stdout(&help).contains("bytecode"), "{}", stdout(&help));
}
