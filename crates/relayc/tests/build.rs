//! Runs `relayc build`: `--emit ir`, `--emit kernels`, `--emit clif` and `--emit asm` on small
//! programs and the W1/W2 benchmark programs, `--target` (aarch64, riscv64, s390x, x86-64 with
//! features, unknown targets, without `--emit`), `-o` with `--emit` (text) and without (an executable file),
//! compiling without `--emit`, kernels that cannot be compiled, and the exit codes of bad
//! programs and bad usage.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::{TempFile, arg, code, relayc, stderr, stdout};

/// One kernel: `add` and `nn.relu` fuse.
const ONE_KERNEL: &str = r#"#[version = "0.0.5"]
def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
  nn.relu(add(%a, %b))
}
"#;

/// Two kernels, one in each global function.
const TWO_KERNELS: &str = r#"#[version = "0.0.5"]
def @scale(%x: Tensor[(4), float32]) -> Tensor[(4), float32] {
  multiply(%x, 2f)
}

def @main(%a: Tensor[(4), float32], %b: Tensor[(4), float32]) -> Tensor[(4), float32] {
  let %s = @scale(%a);
  nn.relu(subtract(%s, %b))
}
"#;

/// No operator calls, hence no kernels.
const NO_KERNELS: &str = r#"#[version = "0.0.5"]
def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(2, 3), float32]) -> (Tensor[(2, 3), float32], Tensor[(2, 3), float32]) {
  (%b, %a)
}
"#;

/// Two kernels without a compute definition (`nn.fast_softmax` is not Tier 1) and one that
/// compiles.
const UNSUPPORTED: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, 6, 6), float32], %y: Tensor[(1, 3, 5, 5), float32], %z: Tensor[(3), float32]) {
  (nn.fast_softmax(%x), nn.fast_softmax(%y), exp(%z))
}
"#;

/// A dense layer: one kernel whose body calls the host's GEMM.
const DENSE: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(8, 16), float32], %w: Tensor[(32, 16), float32], %b: Tensor[(32), float32]) -> Tensor[(8, 32), float32] {
  nn.relu(add(nn.dense(%x, %w, units=32), %b))
}
"#;

/// A reduction of an inline `exp`.
const REDUCTION: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(4, 64), float32]) -> Tensor[(4), float32] {
  sum(exp(%x), axis=[1])
}
"#;

const DYNAMIC: &str = r#"#[version = "0.0.5"]
def @dyn_add(%x: Tensor[(?, 3), float32]) -> Tensor[(?, 3), float32] {
  add(%x, %x)
}

def @dyn_neg(%x: Tensor[(?), int32]) -> Tensor[(?), int32] {
  negative(%x)
}

def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?), int32], %z: Tensor[(3), float32]) {
  (@dyn_add(%x), @dyn_neg(%y), exp(%z))
}
"#;

/// Runs `relayc build` with `args`.
fn build(args: &[&str]) -> Output {
    let mut all = vec!["build"];
    all.extend_from_slice(args);
    relayc(&all)
}

/// Runs `relayc build` and requires success.
fn build_ok(args: &[&str]) -> Output {
    let out = build(args);
    assert_eq!(
        code(&out),
        0,
        "relayc build {args:?} failed:\n{}",
        stderr(&out)
    );
    out
}

/// The `// kernel NAME` lines of `--emit kernels` or `--emit clif` output.
fn kernel_names(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| line.strip_prefix("// kernel "))
        .collect()
}

/// `text` with every hexadecimal literal (`0x5612_db24_18b0`) replaced by `0x?`.
fn without_addresses(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("0x") {
        out.push_str(&rest[..at]);
        out.push_str("0x?");
        rest = rest[at + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit() || c == '_');
    }
    out.push_str(rest);
    out
}

/// A benchmark program of the repository.
fn bench_program(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../benches/programs")
        .join(name)
}

#[test]
fn emit_ir_prints_the_lowered_module() {
    let file = TempFile::new("ir.relay", ONE_KERNEL);
    let out = build_ok(&[file.arg(), "--emit", "ir"]);
    let text = stdout(&out);
    assert!(text.starts_with("#[version = \"0.0.5\"]"), "{text}");
    // The default pipeline fused the operators into a primitive function.
    assert!(text.contains("Primitive=1"), "{text}");
    // The same text `relayc opt` prints.
    let opt = relayc(&["opt", file.arg()]);
    assert_eq!(code(&opt), 0, "{}", stderr(&opt));
    assert_eq!(text, stdout(&opt));
    // And it re-parses.
    let lowered = TempFile::new("lowered.relay", &text);
    let check = relayc(&["check", lowered.arg()]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
}

#[test]
fn emit_kernels_prints_each_loop_nest() {
    let file = TempFile::new("kernels.relay", ONE_KERNEL);
    let out = build_ok(&[file.arg(), "--emit", "kernels"]);
    let text = stdout(&out);
    let names = kernel_names(&text);
    assert_eq!(names.len(), 1, "{text}");
    assert!(names[0].starts_with("fused_add_nn_relu"), "{text}");
    let header = format!("kernel {}(", names[0]);
    assert!(text.contains(&header), "{text}");
    assert!(text.contains("float32[2, 3] in"), "{text}");
    assert!(text.contains("float32[2, 3] out"), "{text}");
    assert!(text.contains("for "), "{text}");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
}

#[test]
fn emit_kernels_lists_every_kernel() {
    let file = TempFile::new("two.relay", TWO_KERNELS);
    let out = build_ok(&[file.arg(), "--emit", "kernels"]);
    let text = stdout(&out);
    let names = kernel_names(&text);
    assert_eq!(names.len(), 2, "{text}");
    assert!(
        names.iter().any(|n| n.starts_with("fused_multiply")),
        "{text}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("fused_subtract_nn_relu")),
        "{text}"
    );
    for name in names {
        assert!(text.contains(&format!("kernel {name}(")), "{text}");
    }
}

#[test]
fn emit_clif_prints_cranelift_ir() {
    for (program, count) in [(ONE_KERNEL, 1), (TWO_KERNELS, 2)] {
        let file = TempFile::new("clif.relay", program);
        let out = build_ok(&[file.arg(), "--emit", "clif"]);
        let text = stdout(&out);
        assert_eq!(kernel_names(&text).len(), count, "{text}");
        // Cranelift's function syntax, for the body and the packed entry of each kernel.
        assert!(text.matches("function ").count() >= 2 * count, "{text}");
        assert!(text.contains("block0"), "{text}");
        assert!(text.contains("return"), "{text}");
    }
}

#[test]
fn output_goes_to_the_file_given() {
    let file = TempFile::new("out.relay", TWO_KERNELS);
    for emit in ["ir", "kernels", "clif"] {
        let expected = stdout(&build_ok(&[file.arg(), "--emit", emit]));
        let target = TempFile::path_for(&format!("out.{emit}"));
        let out = build_ok(&[file.arg(), "--emit", emit, "-o", target.arg()]);
        assert!(stdout(&out).is_empty(), "{}", stdout(&out));
        let written = std::fs::read_to_string(target.path()).unwrap();
        // The packed entries embed the address of their argument specs, which differs from
        // run to run.
        assert_eq!(
            without_addresses(&written),
            without_addresses(&expected),
            "--emit {emit} -o"
        );
    }
}

#[test]
fn without_emit_every_kernel_is_compiled() {
    let file = TempFile::new("compile.relay", TWO_KERNELS);
    let out = build_ok(&[file.arg()]);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("kernel ")).collect();
    assert_eq!(lines.len(), 2, "{err}");
    for line in lines {
        // add/relu: two inputs and an output; multiply by a scalar constant: one input.
        assert!(
            line.contains("3 arguments (2 in, 1 out)")
                || line.contains("2 arguments (1 in, 1 out)"),
            "{line}"
        );
        assert!(line.contains(" ms"), "{line}");
    }
    assert!(err.contains("2 kernels compiled in "), "{err}");
}

#[test]
fn output_without_emit_writes_an_executable_file() {
    let file = TempFile::new("exe.relay", TWO_KERNELS);
    let target = TempFile::path_for("out.ro");
    let out = build_ok(&[file.arg(), "-o", target.arg()]);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let bytes = std::fs::read(target.path()).unwrap();
    assert!(bytes.starts_with(&relay::EXECUTABLE_MAGIC));
    // One summary line: the file, its size, what it holds and the compile time.
    let err = stderr(&out);
    let summary = format!("wrote `{}`: {} bytes (", target.arg(), bytes.len());
    assert!(err.starts_with(&summary), "{err}");
    for part in ["2 functions, 2 kernels", "compile: ", "save "] {
        assert!(err.contains(part), "{part:?} in {err}");
    }
    assert_eq!(err.lines().count(), 1, "{err}");

    // A place that cannot be written is reported, exit 1.
    let dir = TempFile::path_for("no-such-dir");
    let inside = dir.path().join("out.ro");
    let out = build(&[file.arg(), "-o", arg(&inside)]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("cannot write `"), "{err}");
    assert!(err.contains("relay::exe::io"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_bad_emit_value_is_a_usage_error() {
    let file = TempFile::new("emit.relay", ONE_KERNEL);
    for value in ["assembly", "executable", ""] {
        let out = build(&[file.arg(), "--emit", value]);
        assert_eq!(code(&out), 2, "--emit {value:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("--emit"), "{}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn a_bad_program_is_reported() {
    let file = TempFile::new(
        "bad.relay",
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n  add(%x, %y)\n}\n",
    );
    for emit in [&["--emit", "kernels"][..], &["--emit", "ir"], &[]] {
        let mut args = vec![file.arg()];
        args.extend_from_slice(emit);
        let out = build(&args);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(stderr(&out).contains("%y"), "{}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }
    // A type error too.
    let file = TempFile::new(
        "ill_typed.relay",
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32], %y: Tensor[(3), float32]) {\n  add(%x, %y)\n}\n",
    );
    let out = build(&[file.arg(), "--emit", "kernels"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot broadcast"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    // A missing file.
    let missing = TempFile::path_for("missing.relay");
    let out = build(&[missing.arg()]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

#[test]
fn a_bad_passes_file_is_reported() {
    let file = TempFile::new("passes.relay", ONE_KERNEL);
    let passes = TempFile::new("passes.toml", "[pipeline]\npasses = [\"no_such_pass\"]\n");
    let out = build(&[file.arg(), "--passes", passes.arg(), "--emit", "ir"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("no_such_pass"), "{}", stderr(&out));
}

#[test]
fn the_passes_file_given_is_used() {
    // Without fusion there are no primitive functions, hence no kernels.
    let file = TempFile::new("nofuse.relay", ONE_KERNEL);
    let passes = TempFile::new("nofuse.toml", "[pipeline]\npasses = [\"to_anf\"]\n");
    let out = build_ok(&[file.arg(), "--passes", passes.arg(), "--emit", "ir"]);
    assert!(!stdout(&out).contains("Primitive=1"), "{}", stdout(&out));
    let out = build_ok(&[file.arg(), "--passes", passes.arg(), "--emit", "kernels"]);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn kernels_that_cannot_compile_are_all_reported() {
    let file = TempFile::new("unsupported.relay", UNSUPPORTED);
    let target = TempFile::path_for("unsupported.txt");
    for emit in [&["--emit", "kernels"][..], &["--emit", "clif"], &[]] {
        let mut args = vec![file.arg()];
        args.extend_from_slice(emit);
        let out = build(&args);
        assert_eq!(code(&out), 1, "{emit:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{}", stdout(&out));
        let err = stderr(&out);
        // Both failures, each naming its kernel; not the kernel that compiles.
        assert_eq!(
            err.matches("cannot compile kernel fused_nn_fast_softmax")
                .count(),
            2,
            "{err}"
        );
        assert!(!err.contains("cannot compile kernel fused_exp"), "{err}");
        assert!(err.contains("relay::kernel::unsupported"), "{err}");
        assert!(err.contains("has no compute definition"), "{err}");
        // Pointing at the kernel's root expression in the input.
        assert!(err.contains("unsupported.relay:3:4"), "{err}");
        assert!(err.contains("computes this"), "{err}");
        // With nothing written to -o: the text, or (without --emit) the executable file,
        // whose build reports the same failures.
        args.extend_from_slice(&["-o", target.arg()]);
        let out = build(&args);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(!target.path().exists());
        let err = stderr(&out);
        assert_eq!(
            err.matches("cannot compile kernel fused_nn_fast_softmax")
                .count(),
            2,
            "{err}"
        );
        assert!(err.contains("unsupported.relay:3:4"), "{err}");
    }
}

#[test]
fn pipeline_debugging_flags_work_on_build_and_run() {
    let file = TempFile::new("debug_flags.relay", ONE_KERNEL);
    let exe = TempFile::path_for("debug_flags.ro");
    let out = build_ok(&[
        file.arg(),
        "-o",
        exe.arg(),
        "--time-passes",
        "--print-after",
        "fuse_ops",
    ]);
    let err = stderr(&out);
    assert!(err.contains("// after pass fuse_ops"), "{err}");
    assert!(err.contains("Primitive=1"), "{err}");
    for pass in ["unpartition ", "fuse_ops ", "const_pool_layout ", "total "] {
        assert!(err.lines().any(|l| l.starts_with(pass)), "{pass}: {err}");
    }
    // `run` takes them too; `--print-after-all` prints after every pass.
    let out = relayc(&[
        "run",
        file.arg(),
        "--random-inputs",
        "1",
        "--print-after-all",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("// after pass ").count(),
        relay::passes::all_passes().len(),
        "{}",
        stderr(&out)
    );
    // A disabled pass does not run: without `liveness` there are no kill points.
    let out = build_ok(&[file.arg(), "--emit", "ir", "--disable-pass", "liveness"]);
    assert!(!stdout(&out).contains("memory.kill"), "{}", stdout(&out));
    let out = build_ok(&[file.arg(), "--emit", "ir"]);
    assert!(stdout(&out).contains("memory.kill"), "{}", stdout(&out));
    // Required passes cannot be disabled; unknown names are bad usage; an executable file
    // takes none of them.
    for bad in [
        &["--disable-pass", "fuse_ops"][..],
        &["--disable-pass", "fuse_op"],
        &["--print-after", "nothing"],
    ] {
        let mut args = vec![file.arg()];
        args.extend_from_slice(bad);
        let out = build(&args);
        assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
    }
    let out = relayc(&["run", exe.arg(), "--random-inputs", "1", "--time-passes"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--time-passes cannot be used"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn float_functions_of_integers_check_and_fail_to_build_naming_operator_and_dtype() {
    let file = TempFile::new(
        "log_int.relay",
        r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3), int32]) -> Tensor[(3), int32] {
  log(%x)
}
"#,
    );
    // TVM's type checker accepts it, and so does `check`.
    let out = relayc(&["check", file.arg()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = build(&[file.arg(), "-o", TempFile::path_for("log_int.ro").arg()]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("relay::kernel::unsupported"), "{err}");
    // The message as one line, whatever the width it was wrapped at.
    let flat = err
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(flat.contains("`log` does not support dtype int32"), "{err}");
    assert!(err.contains("log_int.relay:3:3"), "{err}");
}

#[test]
fn functions_partitioned_for_external_compilers_build_and_run_with_a_warning() {
    let file = TempFile::new(
        "partitioned.relay",
        r#"#[version = "0.0.5"]
def @dnnl_0(%a: Tensor[(2), float32], %b: Tensor[(2), float32], Compiler="dnnl", Primitive=1, Inline=1, global_symbol="dnnl_0") -> Tensor[(2), float32] {
  %0 = add(%a, %b);
  multiply(%0, %b)
}
def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  %1 = fn (%c: Tensor[(2), float32], Compiler="cutlass", Primitive=1) -> Tensor[(2), float32] {
    %2 = subtract(%c, 1f);
    nn.relu(%2)
  };
  %1(@dnnl_0(%x, %x))
}
"#,
    );
    let exe = TempFile::path_for("partitioned.ro");
    let out = build_ok(&[file.arg(), "-o", exe.arg()]);
    let err = stderr(&out);
    assert_eq!(
        err.matches("relay::type::external_compiler").count(),
        2,
        "{err}"
    );
    assert!(
        err.contains("external compiler `dnnl` is not used"),
        "{err}"
    );
    let x = TempFile::path_for("partitioned_x.npy");
    let values = relay::NDArray::from_f64_slice(relay::DType::F32, &[2], &[1.0, 2.0])
        .expect("a float32 array");
    relay::npy::write_npy_file(x.path(), &values).expect("writes x");
    let x_arg = format!("x={}", x.arg());
    for program in [exe.arg(), file.arg()] {
        let out = relayc(&["run", program, "--input", &x_arg]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        // (x + x) * x - 1, then relu: 1 and 7.
        assert_eq!(stdout(&out).trim(), "[1., 7.]");
    }
}

#[test]
fn kernels_with_dynamic_shapes_are_reported_by_kind() {
    // Elementwise kernels over a leading `?` are row kernels, compiled once for every shape.
    let file = TempFile::new("dynamic.relay", DYNAMIC);
    let out = build_ok(&[file.arg()]);
    let err = stderr(&out);
    for kernel in ["fused_add", "fused_negative"] {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("kernel {kernel}"))
                    && l.contains("rows of any number")),
            "{err}"
        );
    }
    assert!(err.contains("1 kernel compiled"), "{err}");
    let out = build_ok(&[file.arg(), "--emit", "kernels"]);
    let text = stdout(&out);
    assert!(text.contains("rows of any number"), "{text}");
    assert!(text.contains("kernel fused_exp"), "{text}");
}

#[test]
fn a_program_without_kernels_builds_to_nothing() {
    let file = TempFile::new("none.relay", NO_KERNELS);
    for emit in [&["--emit", "kernels"][..], &["--emit", "clif"], &[]] {
        let mut args = vec![file.arg()];
        args.extend_from_slice(emit);
        let out = build_ok(&args);
        assert!(stdout(&out).is_empty(), "{emit:?}: {}", stdout(&out));
        assert!(stderr(&out).is_empty(), "{emit:?}: {}", stderr(&out));
    }
}

#[test]
fn the_w1_and_w2_benchmarks_emit_kernels() {
    for (name, ops) in [
        ("W1_add_2e20.relay", "fused_add"),
        ("W2_fused.relay", "fused_multiply_add_nn_relu"),
    ] {
        let path = bench_program(name);
        let out = build_ok(&[arg(&path), "--emit", "kernels"]);
        let text = stdout(&out);
        let names = kernel_names(&text);
        assert_eq!(names.len(), 1, "{name}: {text}");
        assert!(names[0].starts_with(ops), "{name}: {text}");
        assert!(text.contains("float32[1048576] out"), "{name}: {text}");
        let out = build_ok(&[arg(&path), "--emit", "clif"]);
        assert_eq!(kernel_names(&stdout(&out)).len(), 1, "{name}");
        let out = build_ok(&[arg(&path)]);
        assert!(stderr(&out).contains("1 kernel compiled in "), "{name}");
    }
}

/// `relayc build` of `program` with `--emit what` and, when given, `--target target`, which
/// must succeed; its stdout.
fn listing(program: &str, what: &str, target: Option<&str>) -> String {
    let file = TempFile::new("target.relay", program);
    let mut args = vec![file.arg(), "--emit", what];
    args.extend(target.iter().flat_map(|t| ["--target", *t]));
    stdout(&build_ok(&args))
}

/// The instructions of a machine code listing: the first word of each line that is not a
/// comment, a block label or blank.
fn mnemonics(asm: &str) -> Vec<&str> {
    asm.lines()
        .filter(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .collect()
}

/// Checks that each kernel of a `--emit asm` listing has its body and packed entry, and that
/// its instructions include every one of `expected`.
fn check_asm(asm: &str, kernels: usize, expected: &[&str]) {
    assert_eq!(kernel_names(asm).len(), kernels, "{asm}");
    assert_eq!(asm.matches(" body\n").count(), kernels, "{asm}");
    assert_eq!(asm.matches(" packed entry\n").count(), kernels, "{asm}");
    // The entry's calls to the host helpers are external names, listed.
    assert!(asm.contains(" = relay_kernel_check_args\n"), "{asm}");
    let found = mnemonics(asm);
    for mnemonic in expected {
        assert!(found.contains(mnemonic), "no `{mnemonic}` in\n{asm}");
    }
}

#[test]
fn emit_asm_prints_the_host_machine_code() {
    // A few instructions every kernel has, in Cranelift's spelling for the host.
    let host: &[&str] = if cfg!(target_arch = "x86_64") {
        &["movq", "retq"]
    } else if cfg!(target_arch = "aarch64") {
        &["ldr", "ret"]
    } else {
        &[]
    };
    for program in [ONE_KERNEL, DENSE, REDUCTION] {
        let asm = listing(program, "asm", None);
        let first = asm.lines().next().unwrap_or_default();
        let arch = std::env::consts::ARCH;
        assert!(first.starts_with(&format!("// target {arch}-")), "{first}");
        check_asm(&asm, 1, host);
    }
    // The GEMM is a call to the host's routine.
    assert!(listing(DENSE, "asm", None).contains(" = relay_kernel_sgemm\n"));
    // Two kernels, each listed.
    check_asm(&listing(TWO_KERNELS, "asm", None), 2, host);
}

#[test]
fn emit_asm_for_aarch64_prints_aarch64_code() {
    let target = Some("aarch64-unknown-linux-gnu");
    let asm = listing(ONE_KERNEL, "asm", target);
    assert!(
        asm.starts_with("// target aarch64-unknown-linux-gnu: (no optional features)\n\n"),
        "{asm}"
    );
    check_asm(&asm, 1, &["ldr", "fadd", "str", "ret", "blr"]);
    // The GEMM call is an external call on aarch64 too.
    let asm = listing(DENSE, "asm", target);
    check_asm(&asm, 1, &["blr", "ret"]);
    assert!(asm.contains(" = relay_kernel_sgemm\n"), "{asm}");
    // Features: the header says which are on.
    let asm = listing(REDUCTION, "asm", Some("aarch64-unknown-linux-gnu+lse"));
    assert!(
        asm.starts_with("// target aarch64-unknown-linux-gnu+lse: has_lse\n"),
        "{asm}"
    );
    check_asm(&asm, 1, &["fmla"]);
}

#[test]
fn emit_clif_for_riscv64_goes_through_its_backend() {
    for program in [ONE_KERNEL, DENSE, REDUCTION] {
        let clif = listing(program, "clif", Some("riscv64gc-unknown-linux-gnu"));
        assert!(
            clif.starts_with("// target riscv64gc-unknown-linux-gnu: has_m has_a has_f has_d"),
            "{clif}"
        );
        assert_eq!(kernel_names(&clif).len(), 1, "{clif}");
        assert!(clif.matches("function ").count() >= 2, "{clif}");
        // Without the V extension Cranelift's riscv64 backend has no vector types: the kernels
        // are made of scalar loops.
        assert!(!clif.contains("f32x4"), "{clif}");
    }
    // With it, the elementwise loop is vectorized.
    let clif = listing(ONE_KERNEL, "clif", Some("riscv64gc-unknown-linux-gnu+v"));
    assert!(clif.contains("f32x4"), "{clif}");
    let asm = listing(ONE_KERNEL, "asm", Some("riscv64gc-unknown-linux-gnu+v"));
    check_asm(&asm, 1, &["vle32.v", "vfadd.vv", "ret"]);
}

#[test]
fn emit_asm_for_s390x_prints_s390x_code() {
    let target = Some("s390x-unknown-linux-gnu");
    for program in [ONE_KERNEL, DENSE, REDUCTION] {
        check_asm(
            &listing(program, "asm", target),
            1,
            &["lgr", "stmg", "lmg", "br"],
        );
    }
    check_asm(
        &listing(ONE_KERNEL, "asm", target),
        1,
        &["vl", "vfasb", "vst"],
    );
    // The Cranelift IR goes through s390x's backend too; it has fused multiply-add.
    let clif = listing(REDUCTION, "clif", target);
    assert!(
        clif.starts_with("// target s390x-unknown-linux-gnu: "),
        "{clif}"
    );
    assert!(clif.contains(" = fma "), "{clif}");
}

#[test]
fn x86_64_features_change_the_machine_code() {
    // Cranelift's x86-64 baseline is SSE2: no AVX, no fused multiply-add.
    let plain = listing(REDUCTION, "asm", Some("x86_64-unknown-linux-gnu"));
    assert!(
        plain.starts_with("// target x86_64-unknown-linux-gnu: (no optional features)\n"),
        "{plain}"
    );
    check_asm(&plain, 1, &["mulps", "addps"]);
    assert!(
        !mnemonics(&plain).iter().any(|m| m.starts_with('v')),
        "{plain}"
    );
    // `+avx2,+fma` (AVX implied): VEX-encoded code and FMA in the inline `exp`.
    let fast = listing(REDUCTION, "asm", Some("x86_64-unknown-linux-gnu+avx2,+fma"));
    let header = fast.lines().next().unwrap_or_default();
    for feature in ["has_avx", "has_avx2", "has_fma", "has_sse41"] {
        assert!(header.split(' ').any(|f| f == feature), "{header}");
    }
    check_asm(&fast, 1, &["vfmadd213ps", "vmulps"]);
    // The Cranelift IR changes too: `fma` instead of a multiply and an add.
    let clif = listing(
        REDUCTION,
        "clif",
        Some("x86_64-unknown-linux-gnu+avx2,+fma"),
    );
    assert!(clif.contains(" = fma "), "{clif}");
    let clif = listing(REDUCTION, "clif", Some("x86_64-unknown-linux-gnu"));
    assert!(!clif.contains(" = fma "), "{clif}");
}

#[test]
fn an_unknown_target_is_a_usage_error_listing_the_supported_ones() {
    let file = TempFile::new("unknown.relay", ONE_KERNEL);
    for target in [
        "potato-unknown-linux-gnu",
        "mips64-unknown-linux-gnuabi64",
        "i686-unknown-linux-gnu",
    ] {
        let out = build(&[file.arg(), "--emit", "asm", "--target", target]);
        assert_eq!(code(&out), 2, "{target}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("`{target}`")), "{err}");
        assert!(
            err.contains("supported architectures: x86_64, aarch64, riscv64, s390x"),
            "{err}"
        );
        assert!(stdout(&out).is_empty());
    }
    // An unknown feature lists the architecture's features.
    let out = build(&[
        file.arg(),
        "--emit",
        "clif",
        "--target",
        "aarch64-unknown-linux-gnu+avx2",
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("unknown feature `avx2` for aarch64"), "{err}");
    assert!(err.contains("lse, "), "{err}");
}

#[test]
fn target_without_emit_clif_or_asm_is_a_usage_error() {
    let file = TempFile::new("target-usage.relay", ONE_KERNEL);
    let exe = TempFile::path_for("target.ro");
    let target = ["--target", "aarch64-unknown-linux-gnu"];
    for extra in [
        &[][..],
        &["--emit", "kernels"][..],
        &["--emit", "ir"][..],
        &["-o", exe.arg()][..],
    ] {
        let mut args = vec![file.arg()];
        args.extend(target);
        args.extend(extra);
        let out = build(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("`--target` needs `--emit clif` or `--emit asm`"),
            "{err}"
        );
        assert!(err.contains("executables run only on the host"), "{err}");
        assert!(stdout(&out).is_empty());
        assert!(!exe.path().exists());
    }
}

#[test]
fn dynamic_kernels_the_library_computes_serve_every_shape() {
    let program = "#[version = \"0.0.5\"]\n\
        def @main(%x: Tensor[(?, 16), float32], %w: Tensor[(8, 16), float32], %t: Tensor[(16, ?), float32], %u: Tensor[(1, ?), float32], %v: Tensor[(?, 1), float32]) {\n\
          (nn.dense(%x, %w, units=None), add(%v, %t), abs(%t), exp(%t), subtract(%u, %v))\n\
        }\n";
    let file = TempFile::new("generic.relay", program);
    let out = build_ok(&[file.arg()]);
    let err = stderr(&out);
    let line = |kernel: &str| {
        err.lines()
            .find(|l| l.starts_with(&format!("kernel {kernel}")))
            .unwrap_or_else(|| panic!("no line for {kernel}: {err}"))
            .to_owned()
    };
    assert!(line("fused_nn_dense").contains("at every shape"), "{err}");
    assert!(line("fused_add").contains("compiled when called"), "{err}");
    assert!(line("fused_abs").contains("rows of any number"), "{err}");
    assert!(line("fused_exp").contains("at every shape"), "{err}");
    assert!(
        line("fused_subtract").contains("spans of the innermost"),
        "{err}"
    );
    let out = build_ok(&[file.arg(), "--emit", "kernels"]);
    assert!(stdout(&out).contains("at every shape"), "{}", stdout(&out));
}
