//! Runs the built `relayc` binary: exit codes, diagnostics on stderr, and `fmt` output that
//! re-parses and is a fixpoint, `--version`.

mod common;

use common::{TempFile, arg, code, relayc, stderr, stdout};

/// A small program that uses no operators, so it does not depend on the operator registry.
const GOOD: &str = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @length[A](%xs: List[A]) -> int32 {
  match (%xs) {
    Cons(_, %rest) => {
      let %n = @length(%rest);
      (%n, %n).0
    },
    Nil => 0,
  }
}

def @main(%x: Tensor[(2, 3), float32]) -> (Tensor[(2, 3), float32], int32) {
  let %t = (%x, @length(Cons(1, Nil)));
  %t
}
"#;

/// A program with an undefined local variable.
const BAD: &str = r#"#[version = "0.0.5"]
def @main(%x: int32) -> int32 {
  %y
}
"#;

#[test]
fn check_good_file_succeeds() {
    let good = TempFile::new("good.relay", GOOD);
    let out = relayc(&["check", arg(good.path())]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "check printed on stdout: {}",
        stdout(&out)
    );
}

#[test]
fn check_bad_file_fails_with_diagnostic() {
    let bad = TempFile::new("bad.relay", BAD);
    let out = relayc(&["check", arg(bad.path())]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains("relay::parse::"),
        "no error code in stderr:\n{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn check_continues_after_a_bad_file() {
    let bad = TempFile::new("bad-first.relay", BAD);
    let also_bad = TempFile::new("bad-second.relay", "def @f( {");
    let out = relayc(&["check", arg(bad.path()), arg(also_bad.path())]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    // Both files are reported: each report names its file.
    let name = |f: &TempFile| f.path().file_name().unwrap().to_str().unwrap().to_owned();
    assert!(err.contains(&name(&bad)), "first file not reported:\n{err}");
    assert!(
        err.contains(&name(&also_bad)),
        "second file not reported:\n{err}"
    );
}

#[test]
fn check_missing_file_names_it() {
    let missing = std::env::temp_dir().join(format!(
        "relayc-cli-{}-does-not-exist.relay",
        std::process::id()
    ));
    let out = relayc(&["check", arg(&missing)]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(
        err.contains(arg(&missing)),
        "file not named in stderr:\n{err}"
    );
}

#[test]
fn check_missing_file_does_not_stop_the_others() {
    let good = TempFile::new("good-after-missing.relay", GOOD);
    let out = relayc(&["check", "/nonexistent/relayc/x.relay", arg(good.path())]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("/nonexistent/relayc/x.relay"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{err}"
    );
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(code(&relayc(&[])), 2);
    assert_eq!(code(&relayc(&["check"])), 2);
    assert_eq!(code(&relayc(&["frobnicate"])), 2);
    assert_eq!(code(&relayc(&["fmt"])), 2);
    assert_eq!(code(&relayc(&["fmt", "a.relay", "b.relay"])), 2);
    assert_eq!(code(&relayc(&["check", "--no-such-flag", "a.relay"])), 2);
}

#[test]
fn help_exits_0() {
    let out = relayc(&["--help"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("check"));
}

#[test]
fn fmt_output_reparses_and_is_a_fixpoint() {
    let good = TempFile::new("fmt.relay", GOOD);
    let first = relayc(&["fmt", arg(good.path())]);
    assert_eq!(code(&first), 0, "stderr:\n{}", stderr(&first));
    let printed = stdout(&first);
    assert!(!printed.is_empty(), "fmt printed nothing");

    let again = TempFile::new("fmt-again.relay", &printed);
    let check = relayc(&["check", arg(again.path())]);
    assert_eq!(
        code(&check),
        0,
        "printed text does not parse:\n{}",
        stderr(&check)
    );

    let second = relayc(&["fmt", arg(again.path())]);
    assert_eq!(code(&second), 0, "stderr:\n{}", stderr(&second));
    assert_eq!(stdout(&second), printed, "fmt is not a fixpoint");
}

#[test]
fn fmt_bad_file_fails() {
    let bad = TempFile::new("fmt-bad.relay", BAD);
    let out = relayc(&["fmt", arg(bad.path())]);
    assert_eq!(code(&out), 1);
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("relay::parse::"));
}

/// A program that parses but does not type-check.
const ILL_TYPED: &str = r#"#[version = "0.0.5"]
def @main(%x: int32) -> bool {
  %x
}
"#;

/// A program with a non-exhaustive `match` (a warning, not an error).
const PARTIAL: &str = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}

def @main(%xs: List[int32]) -> int32 {
  match (%xs) {
    Cons(%x, _) => %x,
  }
}
"#;

#[test]
fn fmt_show_types_prints_type_comments() {
    let good = TempFile::new("fmt-types.relay", GOOD);
    let out = relayc(&["fmt", "--show-types", arg(good.path())]);
    assert_eq!(code(&out), 0, "stderr:\n{}", stderr(&out));
    let printed = stdout(&out);
    assert!(printed.contains("/* ty=List[int32] */"), "{printed}");
    assert!(
        printed.contains("/* ty=(Tensor[(2, 3), float32], int32) */"),
        "{printed}"
    );

    // The comments are skipped by the parser.
    let again = TempFile::new("fmt-types-again.relay", &printed);
    let check = relayc(&["check", arg(again.path())]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
}

#[test]
fn type_errors_fail_check_and_fmt_show_types() {
    let bad = TempFile::new("ill-typed.relay", ILL_TYPED);
    let out = relayc(&["check", arg(bad.path())]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("relay::type::mismatch"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("expected `bool`, found `int32`"),
        "{}",
        stderr(&out)
    );

    let out = relayc(&["fmt", "--show-types", arg(bad.path())]);
    assert_eq!(code(&out), 1);
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains("relay::type::mismatch"),
        "{}",
        stderr(&out)
    );

    // Without `--show-types`, `fmt` does not type-check.
    let out = relayc(&["fmt", arg(bad.path())]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn warnings_are_reported_but_do_not_fail() {
    let partial = TempFile::new("partial.relay", PARTIAL);
    let out = relayc(&["check", arg(partial.path())]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`match` does not cover `Nil`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unreadable_bytes_are_a_user_error() {
    let path = std::env::temp_dir().join(format!("relayc-cli-{}-binary.relay", std::process::id()));
    std::fs::write(&path, [0xff, 0xfe, 0x00, 0x80]).unwrap();
    let out = relayc(&["check", arg(&path)]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains(arg(&path)));
}

#[test]
fn version_prints_the_host_and_the_kernel_features() {
    let out = relayc(&["--version"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        concat!("relayc ", env!("CARGO_PKG_VERSION")),
        "{text}"
    );
    let host = format!("host: {}-", std::env::consts::ARCH);
    assert!(lines[1].starts_with(&host), "{text}");
    let features = lines[2]
        .strip_prefix("kernel features (Cranelift): ")
        .unwrap_or_else(|| panic!("{text}"));
    if cfg!(target_arch = "x86_64") {
        // Every x86-64 CPU of the last twenty years has SSE3.
        assert!(features.split(' ').any(|f| f == "has_sse3"), "{text}");
    }
    let isa = lines[3].strip_prefix("host kernels: ");
    assert!(
        matches!(isa, Some("avx512" | "avx2" | "portable")),
        "{text}"
    );
    assert_eq!(lines[4], "build --target: x86_64, aarch64, riscv64, s390x");
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));

    // `RELAYC_ISA` picking another instruction set than the CPU's best is said.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_relayc"))
        .arg("--version")
        .env("RELAYC_ISA", "portable")
        .output()
        .unwrap();
    let text = stdout(&out);
    let line = text.lines().nth(3).unwrap_or_default();
    assert!(
        line == "host kernels: portable"
            || line.starts_with("host kernels: portable (RELAYC_ISA; the CPU has "),
        "{text}"
    );

    // `-V` is the version alone.
    let out = relayc(&["-V"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        concat!("relayc ", env!("CARGO_PKG_VERSION"), "\n")
    );
}
