//! Runs `relayc run` on the VM (the default executor) against `--executor interp` on tensors,
//! tuples, ADTs, closures, references and the shared conformance programs; `--repeat`,
//! `--profile`, `--max-frames`, `--threads`, `--params` bound as constants, run-time errors,
//! bad inputs for both executors, and `relayc build --emit bytecode`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{TempFile, arg, code, relayc, stderr, stdout};
use relay::npy::{read_npz_file, write_npy, write_npz};
use relay::{DType, NDArray};

/// Asserts success, showing both streams otherwise.
#[track_caller]
fn assert_succeeds(out: &Output) {
    assert_eq!(
        code(out),
        0,
        "stderr: {}\nstdout: {}",
        stderr(out),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Asserts the exit code, that stderr contains `needle`, and that nothing panicked.
#[track_caller]
fn assert_fails(out: &Output, expected: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(code(out), expected, "stderr: {err}");
    assert!(err.contains(needle), "expected {needle:?} in stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `relayc run FILE ARGS...` on the VM (the default) and with `--executor interp`.
fn run_both(file: &str, args: &[&str]) -> (Output, Output) {
    let mut vm = vec!["run", file];
    vm.extend_from_slice(args);
    let mut interp = vm.clone();
    interp.extend_from_slice(&["--executor", "interp"]);
    (relayc(&vm), relayc(&interp))
}

/// Asserts both executors succeed and print the same result; returns it.
#[track_caller]
fn assert_same_output(file: &str, args: &[&str]) -> String {
    let (vm, interp) = run_both(file, args);
    assert_succeeds(&vm);
    assert_succeeds(&interp);
    assert_eq!(stdout(&vm), stdout(&interp), "VM vs interpreter on {file}");
    stdout(&vm)
}

/// Two 2x3 float32 tensors added.
const ADD: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
  add(%x, %y)
}
"#;

#[test]
fn tensors_print_the_same_on_both_executors() {
    let file = TempFile::new("add.relay", ADD);
    let x = TempFile::path_for("x.npy");
    let values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let array = NDArray::from_f64_slice(DType::F32, &[2, 3], &values).unwrap();
    std::fs::write(x.path(), write_npy(&array)).unwrap();
    let x_arg = format!("x={}", x.arg());
    let y_arg = format!("y={}", x.arg());
    let text = assert_same_output(file.arg(), &["--input", &x_arg, "--input", &y_arg]);
    assert!(text.contains("12"), "{text}");
    assert_same_output(file.arg(), &["--random-inputs", "7"]);
}

#[test]
fn tuples_closures_and_references_print_the_same() {
    let program = TempFile::new(
        "mixed.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3), float32]) {
  let %scale = fn (%y: Tensor[(3), float32]) { multiply(%x, %y) };
  let %r = ref(%x);
  let %u = ref_write(%r, %scale(ref_read(%r)));
  let %twice = fn (%f: fn (Tensor[(3), float32]) -> Tensor[(3), float32]) {
    fn (%z: Tensor[(3), float32]) { %f(%f(%z)) }
  };
  (ref_read(%r), %u, (%twice(%scale)(%x), 5i64), %r, %scale)
}
"#,
    );
    let text = assert_same_output(program.arg(), &["--random-inputs", "3"]);
    assert!(text.contains("<closure>"), "{text}");
    assert!(text.contains("5"), "{text}");
}

/// A list built by recursion, mapped with a closure and folded: ADTs, matches, closures and
/// non-tail and tail recursion.
const LIST: &str = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @range(%i: int32, %n: int32) -> List[int32] {
  if (%i >= %n) { Nil } else { Cons(%i, @range(%i + 1, %n)) }
}

def @map(%f: fn (int32) -> int32, %xs: List[int32]) -> List[int32] {
  match (%xs) {
    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),
    Nil => Nil,
  }
}

def @sum(%xs: List[int32], %acc: int32) -> int32 {
  match (%xs) {
    Cons(%h, %t) => @sum(%t, %acc + %h),
    Nil => %acc,
  }
}

def @main(%k: int32) {
  let %xs = @map(fn (%v: int32) { %v * %k }, @range(0, 4));
  (%xs, @sum(%xs, 0), Cons(Nil, Nil))
}
"#;

#[test]
fn adt_lists_print_structurally_on_both_executors() {
    let program = TempFile::new("list.relay", LIST);
    let k = TempFile::path_for("k.npy");
    let array = NDArray::from_i128_slice(DType::I32, &[], &[3]).unwrap();
    std::fs::write(k.path(), write_npy(&array)).unwrap();
    let k_arg = format!("k={}", k.arg());
    let text = assert_same_output(program.arg(), &["--input", &k_arg]);
    assert!(
        text.contains("Cons(0, Cons(3, Cons(6, Cons(9, Nil))))"),
        "{text}"
    );
    assert!(text.contains("18"), "{text}");
    assert!(text.contains("Cons(Nil, Nil)"), "{text}");
}

/// The example's results agree on both executors at every opt level, by the conformance rule
/// (floats within rtol 1e-4, atol 1e-5: the VM's float32 softmax computes in float32, the
/// interpreter's reference in float64, so the last printed digit may differ).
#[test]
fn the_examples_agree_at_every_opt_level() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let tree = examples.join("tree.relay");
    let tree = arg(&tree);
    for level in [None, Some("0"), Some("3")] {
        let mut args = vec!["--random-inputs", "0"];
        if let Some(level) = level {
            // The interpreter runs the lowered module here, the VM its bytecode.
            args.extend(["--opt-level", level]);
        }
        let (vm_file, interp_file) = (TempFile::path_for("vm.npz"), TempFile::path_for("in.npz"));
        for (file, executor) in [(&vm_file, "vm"), (&interp_file, "interp")] {
            let mut run = vec!["run", tree];
            run.extend(&args);
            run.extend(["--executor", executor, "--output", file.arg()]);
            assert_succeeds(&relayc(&run));
        }
        let what = format!("VM vs interpreter on {tree} at --opt-level {level:?}");
        assert_npz_close(vm_file.path(), interp_file.path(), &what);
    }
}

/// The repository's conformance programs, and the shared ones when they are beside the
/// repository.
fn conformance_dirs() -> Vec<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shared = here.join("../../../shared/conformance");
    let mut dirs = vec![here.join("../../conformance")];
    dirs.extend(shared.is_dir().then_some(shared));
    dirs
}

/// Whether two result files hold the same leaves, by the conformance rule: same names and
/// dtypes, floats `allclose(rtol=1e-4, atol=1e-5)`, other dtypes equal.
fn assert_npz_close(actual: &Path, expected: &Path, what: &str) {
    let actual = read_npz_file(actual).unwrap();
    let expected = read_npz_file(expected).unwrap();
    let names = |l: &[(String, NDArray)]| l.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&actual), names(&expected), "{what}");
    for ((name, a), (_, e)) in actual.iter().zip(&expected) {
        assert_eq!(a.dtype(), e.dtype(), "{what}: leaf {name}");
        assert_eq!(a.shape(), e.shape(), "{what}: leaf {name}");
        if a.dtype().is_float() {
            for (x, y) in a.to_f64_vec().iter().zip(e.to_f64_vec()) {
                assert!(
                    (x - y).abs() <= 1e-5 + 1e-4 * y.abs(),
                    "{what}: leaf {name}: {x} vs {y}"
                );
            }
        } else {
            assert_eq!(a.to_i128_vec(), e.to_i128_vec(), "{what}: leaf {name}");
        }
    }
}

#[test]
fn conformance_programs_match_their_expected_results_on_both_executors() {
    let mut programs: Vec<PathBuf> = conformance_dirs()
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "relay"))
        .collect();
    programs.sort();
    assert!(programs.len() >= 6, "{programs:?}");
    for program in &programs {
        let inputs_dir = program.with_extension("");
        let mut args = vec!["run".to_string(), arg(program).to_string()];
        for entry in std::fs::read_dir(&inputs_dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "npy") {
                let name = path.file_stem().unwrap().to_string_lossy().into_owned();
                args.push("--input".into());
                args.push(format!("{name}={}", arg(&path)));
            }
        }
        let executors: [&[&str]; 3] = [
            &["--executor", "vm"],
            &["--executor", "vm", "--opt-level", "0"],
            &["--executor", "interp"],
        ];
        for executor in executors {
            let out_file = TempFile::path_for("out.npz");
            let mut full = args.clone();
            full.extend(executor.iter().map(|a| a.to_string()));
            full.extend(["--output", out_file.arg()].map(String::from));
            let full: Vec<&str> = full.iter().map(String::as_str).collect();
            let out = relayc(&full);
            let what = format!("{} with {executor:?}", program.display());
            assert_eq!(code(&out), 0, "{what}: {}", stderr(&out));
            assert_npz_close(out_file.path(), &inputs_dir.join("expected.npz"), &what);
        }
    }
}

#[test]
fn the_pipeline_flags_choose_the_passes() {
    let program = TempFile::new("list.relay", LIST);
    let expected = assert_same_output(program.arg(), &["--random-inputs", "2"]);
    // The required passes alone (`opt_level = 0` skips the others).
    let passes = TempFile::new(
        "passes.toml",
        "[pipeline]\nopt_level = 0\npasses = [\"fuse_ops\", \"to_anf\", \"lambda_lift\", \
         \"inline_primitives\", \"manifest_alloc\", \"liveness\", \"tail_call\", \
         \"const_pool_layout\"]\n",
    );
    let out = relayc(&[
        "run",
        program.arg(),
        "--random-inputs",
        "2",
        "--passes",
        passes.arg(),
    ]);
    assert_succeeds(&out);
    assert_eq!(stdout(&out), expected);
    let missing = TempFile::path_for("missing.toml");
    let out = relayc(&[
        "run",
        program.arg(),
        "--random-inputs",
        "2",
        "--passes",
        missing.arg(),
    ]);
    assert_fails(&out, 1, "missing.toml");
    let out = relayc(&["run", program.arg(), "--opt-level", "9"]);
    assert_fails(&out, 2, "--opt-level");

    // `build --opt-level 0` leaves out `fold_constant`, the default level folds `1f + 2f`.
    let fold = TempFile::new(
        "fold.relay",
        "#[version = \"0.0.5\"]\ndef @main(%x: float32) { add(%x, add(1f, 2f)) }\n",
    );
    let folded = |level: &[&str]| {
        let mut args = vec!["build", fold.arg(), "--emit", "ir"];
        args.extend_from_slice(level);
        let out = relayc(&args);
        assert_succeeds(&out);
        stdout(&out).contains("3f")
    };
    assert!(folded(&[]));
    assert!(!folded(&["--opt-level", "0"]));
    assert_eq!(
        assert_same_output(fold.arg(), &["--random-inputs", "4", "--opt-level", "0"]),
        assert_same_output(fold.arg(), &["--random-inputs", "4"]),
    );
}

#[test]
fn nhwc_convolutions_and_pools_run_alike_on_both_executors() {
    // TensorFlow's layouts: NHWC data, HWIO and HWOI (depthwise) weights; integers, so the
    // two executors agree exactly.
    let program = TempFile::new(
        "nhwc.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 9, 8, 6), int32], %w: Tensor[(3, 3, 6, 8), int32], %dw: Tensor[(3, 3, 8, 1), int32]) {
  %0 = nn.conv2d(%x, %w, strides=[2, 1], padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="HWIO");
  %1 = nn.conv2d(%0, %dw, padding=[1, 1, 1, 1], groups=8, data_layout="NHWC", kernel_layout="HWOI");
  %2 = nn.max_pool2d(%1, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], layout="NHWC");
  %3 = nn.avg_pool2d(%1, pool_size=[2, 2], strides=[2, 2], layout="NHWC", count_include_pad=True);
  %4 = nn.conv2d(%x, %w, data_layout="NHWC", kernel_layout="HWIO", out_layout="NCHW");
  (%2, %3, nn.global_max_pool2d(%2, layout="NHWC"), nn.adaptive_avg_pool2d(%1, output_size=[2, 3], layout="NHWC"), %4)
}
"#,
    );
    let out = assert_same_output(program.arg(), &["--random-inputs", "5"]);
    assert!(!out.is_empty());
}

#[test]
fn layout_transform_and_collapse_sum_like_run_alike_on_both_executors() {
    // TVM's blocked layouts and a broadcast's gradient, as its programs write them.
    let program = TempFile::new(
        "layouts.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 16, 5, 3), int32], %b: Tensor[(16, 1, 1), int32]) {
  %0 = layout_transform(%x, src_layout="NCHW", dst_layout="NCHW8c");
  %1 = add(%0, 1);
  %2 = layout_transform(%1, src_layout="NCHW8c", dst_layout="NHWC");
  %3 = layout_transform(%2, src_layout="NHWC", dst_layout="NCHW");
  %4 = add(%3, %b);
  (%0, %2, collapse_sum_like(%4, %b), collapse_sum_like(%4, 0))
}
"#,
    );
    let out = assert_same_output(program.arg(), &["--random-inputs", "9"]);
    assert!(!out.is_empty());
    let checked = relayc(&["check", program.arg()]);
    assert_succeeds(&checked);
}

#[test]
fn warmup_and_duration_time_the_runs() {
    let program = TempFile::new("list.relay", LIST);
    let once = relayc(&["run", program.arg(), "--random-inputs", "1"]);
    let run_line = |args: &[&str]| {
        let mut all = vec!["run", program.arg(), "--random-inputs", "1"];
        all.extend_from_slice(args);
        let out = relayc(&all);
        assert_succeeds(&out);
        assert_eq!(stdout(&out), stdout(&once));
        let err = stderr(&out);
        let line = err
            .lines()
            .find(|l| l.starts_with("run: "))
            .map(str::to_owned);
        line.unwrap_or_else(|| panic!("no run line: {err}"))
    };
    let line = run_line(&["--repeat", "4", "--warmup", "2"]);
    assert!(
        line.starts_with("run: 4 runs after 2 warm-ups: mean "),
        "{line}"
    );
    for stat in [", std ", ", p50 ", ", p90 ", ", p99 ", ", min ", ", max "] {
        assert!(line.contains(stat), "{line}");
    }
    let line = run_line(&["--duration", "0.2"]);
    let runs: usize = line["run: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(runs > 1, "{line}");
    let line = run_line(&["--duration", "0.05", "--executor", "interp"]);
    assert!(line.contains(" runs: mean "), "{line}");
    // `--repeat` and `--duration` exclude each other; a duration must be positive.
    for bad in [
        &["--repeat", "2", "--duration", "1"][..],
        &["--duration", "0"],
        &["--duration", "x"],
    ] {
        let mut all = vec!["run", program.arg(), "--random-inputs", "1"];
        all.extend_from_slice(bad);
        assert_eq!(code(&relayc(&all)), 2, "{bad:?}");
    }
}

#[test]
fn repeat_reports_compile_and_run_times_and_prints_the_result_once() {
    let program = TempFile::new("list.relay", LIST);
    let once = relayc(&["run", program.arg(), "--random-inputs", "1"]);
    assert_succeeds(&once);
    assert!(
        !stderr(&once).contains("run: "),
        "no timings without --repeat: {}",
        stderr(&once)
    );
    let out = relayc(&[
        "run",
        program.arg(),
        "--random-inputs",
        "1",
        "--repeat",
        "3",
    ]);
    assert_succeeds(&out);
    assert_eq!(stdout(&out), stdout(&once));
    let err = stderr(&out);
    let compile = err.lines().find(|l| l.starts_with("compile: "));
    let compile = compile.unwrap_or_else(|| panic!("no compile line: {err}"));
    for part in ["(passes ", ", bytecode ", ", kernels ", " ms"] {
        assert!(compile.contains(part), "{compile}");
    }
    let run = err.lines().find(|l| l.starts_with("run: "));
    let run = run.unwrap_or_else(|| panic!("no run line: {err}"));
    assert!(
        run.starts_with("run: 3 runs: mean ") && run.contains(", p99 ") && run.contains(", max "),
        "{run}"
    );

    // The interpreter reports run times too, and has no compile step.
    let out = relayc(&[
        "run",
        program.arg(),
        "--random-inputs",
        "1",
        "--repeat",
        "2",
        "--executor",
        "interp",
    ]);
    assert_succeeds(&out);
    assert_eq!(stdout(&out), stdout(&once));
    assert!(stderr(&out).contains("run: 2 runs: "), "{}", stderr(&out));
    assert!(!stderr(&out).contains("compile: "), "{}", stderr(&out));

    assert_fails(&relayc(&["run", program.arg(), "--repeat", "0"]), 2, "");
}

#[test]
fn profile_prints_kernel_instruction_and_allocator_tables() {
    let program = TempFile::new(
        "profile.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32]) {
  let %y = nn.relu(nn.dense(%x, %w, units=16));
  (add(%y, %y), sum(%y))
}
"#,
    );
    let out = relayc(&[
        "run",
        program.arg(),
        "--random-inputs",
        "0",
        "--profile",
        "--repeat",
        "2",
    ]);
    assert_succeeds(&out);
    let err = stderr(&out);
    for needle in [
        "compile: ",
        // The kernel table.
        "kernel",
        "calls",
        "mean µs",
        "share",
        "arguments",
        "all kernels",
        "[4, 8]",
        // The instruction table.
        "instruction",
        "invoke_packed",
        "ret",
        // The allocator statistics.
        "storage allocator",
        "served from pool",
        // The VM's stack and run-time compilations.
        "virtual machine",
        "peak frames",
        "kernels compiled",
    ] {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
    // Each kernel ran once per run: the rows between the table's header and its total.
    let kernel_rows: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("kernel "))
        .skip(1)
        .take_while(|l| !l.starts_with("all kernels"))
        .collect();
    assert!(!kernel_rows.is_empty(), "{err}");
    for row in kernel_rows {
        let columns: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(columns.get(1), Some(&"2"), "{row}");
    }
    // The result is still printed.
    assert!(!stdout(&out).is_empty());
}

/// A program that calls a function (a VM function call) which calls two kernels, the second
/// a GEMM large enough to be split over kernel threads.
const TRACED: &str = r#"#[version = "0.0.5"]
def @layer(%x: Tensor[(128, 512), float32], %w: Tensor[(512, 512), float32]) {
  nn.relu(nn.dense(%x, %w, units=512))
}
def @main(%x: Tensor[(128, 512), float32], %w: Tensor[(512, 512), float32]) {
  let %y = @layer(%x, %w);
  sum(%y)
}
"#;

#[test]
fn profile_formats_json_and_chrome_to_stderr_or_a_file() {
    let program = TempFile::new("traced.relay", TRACED);
    let run = |extra: &[&str]| {
        let mut args = vec!["run", program.arg(), "--random-inputs", "0"];
        args.extend_from_slice(extra);
        let out = relayc(&args);
        assert_succeeds(&out);
        out
    };
    // JSON on stderr, after the compile line: every row of the tables.
    let err = stderr(&run(&["--profile-format", "json", "--repeat", "2"]));
    let json_text = &err[err.find('{').unwrap_or_else(|| panic!("{err}"))..];
    let json: serde_json::Value = serde_json::from_str(json_text).expect("valid JSON");
    let kernels = json["kernels"].as_array().expect("kernels");
    assert_eq!(kernels.len(), 2, "{json}");
    for k in kernels {
        assert_eq!(k["calls"], 2, "{k}");
        for field in ["total_us", "mean_us", "min_us", "max_us", "share"] {
            assert!(k[field].as_f64().is_some_and(|v| v >= 0.0), "{field}: {k}");
        }
        assert!(
            k["arguments"]
                .as_str()
                .is_some_and(|a| a.contains("[128, 512]")),
            "{k}"
        );
    }
    assert!(
        json["instructions"]
            .as_array()
            .is_some_and(|i| i.iter().any(|r| r["kind"] == "invoke"))
    );
    assert!(
        json["allocator"]["requests"]
            .as_u64()
            .is_some_and(|r| r > 0),
        "{json}"
    );
    assert!(json["run_time_us"].as_f64().is_some_and(|t| t > 0.0));

    // The Chrome trace, to a file: a span per VM function call and per kernel call, on the
    // VM's thread and, with two threads, on the kernel thread too. Whoever runs takes the
    // GEMM's next chunk, so a caller may finish one before the worker wakes: over twenty runs
    // the worker takes some.
    let trace = TempFile::path_for("trace.json");
    let out = run(&[
        "--profile-format",
        "chrome",
        "--profile-out",
        trace.arg(),
        "--threads",
        "2",
        "--repeat",
        "20",
    ]);
    assert!(!stderr(&out).contains("traceEvents"), "{}", stderr(&out));
    let text = std::fs::read_to_string(trace.path()).expect("the trace file");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("events");
    let spans = |cat: &str, tid: u64| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat && e["tid"] == tid)
            .map(|e| e["name"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    let mut functions = spans("function", 0);
    assert_eq!(functions.len(), 2 * 20, "{json}");
    functions.sort();
    functions.dedup();
    assert_eq!(functions, ["layer", "main"], "{json}");
    assert_eq!(spans("kernel", 0).len(), 2 * 20, "{json}");
    assert!(
        spans("kernel", 1).iter().all(|k| k.contains("dense")),
        "{json}"
    );
    assert!(
        !spans("kernel", 1).is_empty(),
        "the GEMM ran on the kernel thread too: {json}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "VM")
    );
    // `--profile-out` alone writes the tables.
    let tables = TempFile::path_for("profile.txt");
    run(&["--profile-out", tables.arg()]);
    let text = std::fs::read_to_string(tables.path()).expect("the profile file");
    assert!(
        text.contains("all kernels") && text.contains("storage allocator"),
        "{text}"
    );
}

#[test]
fn vm_only_flags_are_usage_errors_with_the_interpreter() {
    let file = TempFile::new("add.relay", ADD);
    for flag in [
        &["--profile"][..],
        &["--threads", "2"],
        &["--isa", "portable"],
    ] {
        let mut args = vec!["run", file.arg(), "--random-inputs", "1"];
        args.extend_from_slice(flag);
        args.extend_from_slice(&["--executor", "interp"]);
        assert_fails(&relayc(&args), 2, &format!("{} needs the VM", flag[0]));
    }
    // On the VM they are fine.
    let out = relayc(&["run", file.arg(), "--random-inputs", "1", "--threads", "1"]);
    assert_succeeds(&out);
    assert_fails(
        &relayc(&["run", file.arg(), "--executor", "jit"]),
        2,
        "--executor",
    );
}

#[test]
fn max_frames_limits_non_tail_recursion() {
    let program = TempFile::new("deep.relay", common::DEEP);
    let text = assert_same_output(program.arg(), &[]);
    assert_eq!(text.trim(), "1000");
    let (vm, interp) = run_both(program.arg(), &["--max-frames", "100"]);
    assert_fails(&vm, 1, "recursion limit exceeded");
    assert!(
        stderr(&vm).contains("relay::vm::recursion_limit"),
        "{}",
        stderr(&vm)
    );
    assert!(stderr(&vm).contains("@count"), "{}", stderr(&vm));
    assert!(stdout(&vm).is_empty());
    assert_fails(&interp, 1, "recursion limit exceeded");
}

#[test]
fn a_run_time_error_is_a_diagnostic_naming_the_function() {
    let program = TempFile::new(
        "nomatch.relay",
        r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}
def @head(%xs: List[int32]) -> int32 {
  match (%xs) {
    Cons(%h, _) => %h,
  }
}
def @main() -> int32 { @head(Nil) }
"#,
    );
    let out = relayc(&["run", program.arg()]);
    assert_fails(&out, 1, "relay::vm::no_match");
    let err = stderr(&out);
    assert!(err.contains("@head"), "{err}");
    assert!(
        err.contains("nomatch.relay:7:3"),
        "the source location: {err}"
    );
    // The report shows the program where the error happened.
    assert!(err.contains("7 │   match (%xs) {"), "{err}");
    assert!(err.contains("╰── here"), "{err}");
    assert!(stdout(&out).is_empty());

    // A kernel's error (integer division by zero) is a run-time error of the VM too.
    let program = TempFile::new(
        "div.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3), int32], %y: Tensor[(3), int32]) { divide(%x, %y) }
"#,
    );
    let zeros = TempFile::path_for("zeros.npy");
    let array = NDArray::from_i128_slice(DType::I32, &[3], &[0, 0, 0]).unwrap();
    std::fs::write(zeros.path(), write_npy(&array)).unwrap();
    let x = format!("x={}", zeros.arg());
    let y = format!("y={}", zeros.arg());
    let (vm, interp) = run_both(program.arg(), &["--input", &x, "--input", &y]);
    assert_fails(&vm, 1, "relay::vm::kernel");
    assert!(
        stderr(&vm).contains("integer division by zero in `@main` at "),
        "{}",
        stderr(&vm)
    );
    assert_fails(&interp, 1, "integer division by zero");
}

/// `relayc run FILE ARGS...` on both executors; both fail with exit 1 and `needle` in stderr.
#[track_caller]
fn assert_both_fail(file: &str, args: &[&str], needle: &str) {
    let (vm, interp) = run_both(file, args);
    assert_fails(&vm, 1, needle);
    assert_fails(&interp, 1, needle);
}

#[test]
fn bad_inputs_name_the_parameter_on_both_executors() {
    let program = TempFile::new(
        "inputs.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %t: (Tensor[(2), float32], int32)) {
  (add(%x, %x), %t.1)
}
"#,
    );
    let npy = |name: &str, array: NDArray| {
        let file = TempFile::path_for(name);
        std::fs::write(file.path(), write_npy(&array)).unwrap();
        file
    };
    let good = npy(
        "good.npy",
        NDArray::from_f64_slice(DType::F32, &[2, 3], &[0.0; 6]).unwrap(),
    );
    let f64s = npy(
        "f64.npy",
        NDArray::from_f64_slice(DType::F64, &[2, 3], &[0.0; 6]).unwrap(),
    );
    let misshaped = npy(
        "misshaped.npy",
        NDArray::from_f64_slice(DType::F32, &[3, 2], &[0.0; 6]).unwrap(),
    );
    let x = |f: &TempFile| format!("x={}", f.arg());
    let t = format!("t={}", good.arg());
    let file = program.arg();

    // Missing.
    assert_both_fail(
        file,
        &["--input", &t],
        "missing input `x` of type `Tensor[(2, 3), float32]`: pass --input x=PATH.npy, \
         --inputs INPUTS.npz or --random-inputs SEED",
    );
    // Wrong dtype.
    assert_both_fail(
        file,
        &["--input", &x(&f64s), "--input", &t],
        "input `x`: expected `Tensor[(2, 3), float32]`, got a float64 tensor of shape (2, 3)",
    );
    // Wrong shape.
    assert_both_fail(
        file,
        &["--input", &x(&misshaped), "--input", &t],
        "input `x`: expected `Tensor[(2, 3), float32]`, got a float32 tensor of shape (3, 2)",
    );
    // A tensor where a tuple is expected.
    assert_both_fail(
        file,
        &["--input", &x(&good), "--input", &t],
        "input `t` has type `(Tensor[(2), float32], int32)`, which is not a tensor",
    );
    // A parameter the entry does not have.
    let z = format!("z={}", good.arg());
    assert_both_fail(
        file,
        &["--input", &x(&good), "--input", &z],
        "--input `z`: `@main` has no parameter `%z`; its parameters are `%x`, `%t`",
    );
    // A tuple cannot be made up either.
    assert_both_fail(
        file,
        &["--random-inputs", "1"],
        "input `t` has type `(Tensor[(2), float32], int32)`, which is not a tensor: `relayc \
         run` gives tensors only",
    );
    // An unreadable input file is reported once, not also as a missing input.
    let nowhere = TempFile::path_for("nowhere.npy");
    let unreadable = format!("x={}", nowhere.arg());
    let (vm, interp) = run_both(file, &["--input", &unreadable, "--input", &t]);
    for out in [vm, interp] {
        assert_fails(&out, 1, "input `x`: cannot read");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("missing input `x`"), "{err}");
    }
}

#[test]
fn params_become_constants_on_the_vm() {
    let file = TempFile::new("add.relay", ADD);
    let y = NDArray::from_f64_slice(DType::F32, &[2, 3], &[10.0; 6]).unwrap();
    let x = NDArray::from_f64_slice(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let params = TempFile::path_for("w.npz");
    std::fs::write(params.path(), write_npz(&[("y".into(), &y)])).unwrap();
    let x_file = TempFile::path_for("x.npy");
    std::fs::write(x_file.path(), write_npy(&x)).unwrap();
    let x_arg = format!("x={}", x_file.arg());
    let text = assert_same_output(file.arg(), &["--params", params.arg(), "--input", &x_arg]);
    assert!(text.contains("11") && text.contains("16"), "{text}");

    // `build --params` binds them too: `@main` keeps only `%x`.
    let out = relayc(&[
        "build",
        file.arg(),
        "--params",
        params.arg(),
        "--emit",
        "bytecode",
    ]);
    assert_succeeds(&out);
    assert!(
        stdout(&out).contains("VMFunc main(%x) "),
        "{}",
        stdout(&out)
    );

    // A mistyped parameter names the parameter and the file, on both executors and in build.
    let y64 = NDArray::from_f64_slice(DType::F64, &[2, 3], &[10.0; 6]).unwrap();
    let bad = TempFile::path_for("bad.npz");
    std::fs::write(bad.path(), write_npz(&[("y".into(), &y64)])).unwrap();
    let needle = "input `y`: expected `Tensor[(2, 3), float32]`, got a float64 tensor of shape \
                  (2, 3) in `";
    assert_both_fail(
        file.arg(),
        &["--params", bad.arg(), "--input", &x_arg],
        needle,
    );
    let out = relayc(&["build", file.arg(), "--params", bad.arg()]);
    assert_fails(&out, 1, needle);
}

#[test]
fn build_emit_bytecode_prints_every_vm_function() {
    let program = TempFile::new("list.relay", LIST);
    let out = relayc(&["build", program.arg(), "--emit", "bytecode"]);
    assert_succeeds(&out);
    let text = stdout(&out);
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("VMFunc ")).collect();
    for name in [
        "main(%k)",
        "range(%i, %n)",
        "map(%f, %xs)",
        "sum(%xs, %acc)",
    ] {
        assert!(
            headers
                .iter()
                .any(|h| h.starts_with(&format!("VMFunc {name} registers="))),
            "{name} in {headers:?}"
        );
    }
    assert!(text.contains(": ret $"), "{text}");
    assert!(text.contains("alloc_data"), "{text}");

    // -o writes the same text.
    let target = TempFile::path_for("out.bytecode");
    let out = relayc(&[
        "build",
        program.arg(),
        "--emit",
        "bytecode",
        "-o",
        target.arg(),
    ]);
    assert_succeeds(&out);
    assert_eq!(std::fs::read_to_string(target.path()).unwrap(), text);
}

#[test]
fn any_global_function_can_be_the_entry() {
    let program = TempFile::new(
        "entry.relay",
        r#"#[version = "0.0.5"]
def @f(%x: Tensor[(2), float32]) {
  (add(%x, %x), fn (%y: Tensor[(2), float32]) { %y })
}
def @main(%x: Tensor[(2), float32]) { %x }
"#,
    );
    for entry in ["f", "@f"] {
        let text = assert_same_output(program.arg(), &["--entry", entry, "--random-inputs", "1"]);
        assert!(text.contains("<closure>"), "{text}");
    }
    assert_both_fail(
        program.arg(),
        &["--entry", "g", "--random-inputs", "1"],
        "no function `@g`",
    );
}

#[test]
fn threads_are_bounded() {
    let file = TempFile::new("add.relay", ADD);
    for threads in ["0", "2"] {
        let out = relayc(&[
            "run",
            file.arg(),
            "--random-inputs",
            "1",
            "--threads",
            threads,
        ]);
        assert_succeeds(&out);
    }
    for threads in ["1025", "100000"] {
        let out = relayc(&[
            "run",
            file.arg(),
            "--random-inputs",
            "1",
            "--threads",
            threads,
        ]);
        assert_fails(&out, 2, "--threads");
    }
}

/// A matrix product the host GEMM computes (with remainders of every ISA's register tile) and a
/// matrix-vector product (dot products).
const HOST_KERNELS: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(37, 300), float32], %w: Tensor[(70, 300), float32], %v: Tensor[(1, 300), float32]) {
  (nn.relu(nn.dense(%x, %w, units=70)), nn.dense(%v, %w, units=70))
}
"#;

#[test]
fn every_isa_the_cpu_runs_computes_the_same_and_others_are_usage_errors() {
    let file = TempFile::new("host_kernels.relay", HOST_KERNELS);
    let run = |isa: &str, out: &TempFile| {
        relayc(&[
            "run",
            file.arg(),
            "--random-inputs",
            "3",
            "--threads",
            "1",
            "--isa",
            isa,
            "--output",
            out.arg(),
        ])
    };
    let portable = TempFile::path_for("isa_portable.npz");
    assert_succeeds(&run("portable", &portable));
    for isa in ["avx2", "avx512"] {
        let out = TempFile::path_for(&format!("isa_{isa}.npz"));
        let result = run(isa, &out);
        if code(&result) == 0 {
            assert_npz_close(out.path(), portable.path(), isa);
        } else {
            assert_fails(&result, 2, "this CPU cannot run");
        }
    }
    let unknown = TempFile::path_for("isa_sse2.npz");
    assert_fails(&run("sse2", &unknown), 2, "unknown instruction set `sse2`");
    // The environment variable: a bad value is a usage error, not ignored; a good one is used.
    let with_env = |value: &str, out: &TempFile| {
        std::process::Command::new(env!("CARGO_BIN_EXE_relayc"))
            .args(["run", file.arg(), "--random-inputs", "3", "--threads", "1"])
            .args(["--output", out.arg()])
            .env("RELAYC_ISA", value)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let bad = TempFile::path_for("isa_env_bad.npz");
    assert_fails(
        &with_env("mmx", &bad),
        2,
        "RELAYC_ISA: unknown instruction set `mmx`",
    );
    let good = TempFile::path_for("isa_env.npz");
    assert_succeeds(&with_env("portable", &good));
    assert_npz_close(good.path(), portable.path(), "RELAYC_ISA=portable");
}
