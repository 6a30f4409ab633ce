//! Runs `relayc opt`: the default pipeline's output is valid Relay, `--pass` order, the
//! `--print-*`, `--time-passes` and `--stats` reports on stderr, `-o`, `--passes` files and their
//! diagnostics, and the exit codes of bad usage.

mod common;

use std::process::Output;

use common::{TempFile, code, relayc, stderr, stdout};

/// A small program with operators, a local closure, a conditional and an ADT.
const PROGRAM: &str = r#"#[version = "0.0.5"]
type Box[A] {
  Full(A),
  Empty,
}

def @scale(%t: Tensor[(2, 3), float32], %flag: bool) -> Tensor[(2, 3), float32] {
  if (%flag) {
    multiply(%t, 2f)
  } else {
    %t
  }
}

def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
  let %f = fn (%a: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
    nn.relu(add(%a, %y))
  };
  let %b = Full(%f(%x));
  match (%b) {
    Full(%v) => @scale(%v, True),
    Empty => %x,
  }
}
"#;

/// A program using operators only.
const SIMPLE: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] {
  let %y = add(%x, %x);
  nn.relu(multiply(%y, %x))
}
"#;

/// Runs `relayc opt` and requires success.
fn opt(args: &[&str]) -> Output {
    let mut all = vec!["opt"];
    all.extend_from_slice(args);
    let out = relayc(&all);
    assert_eq!(code(&out), 0, "relayc {all:?} failed:\n{}", stderr(&out));
    out
}

/// Requires `relayc check` to accept `text`.
fn assert_checks(text: &str, what: &str) {
    let file = TempFile::new("check.relay", text);
    let out = relayc(&["check", file.arg()]);
    assert_eq!(
        code(&out),
        0,
        "relayc check rejects {what}:\n{text}\n{}",
        stderr(&out)
    );
}

/// The module texts `--print-*` wrote on stderr, each with its header line.
fn dumps(stderr: &str) -> Vec<(String, String)> {
    let mut dumps: Vec<(String, String)> = Vec::new();
    for line in stderr.lines() {
        if line.starts_with("// before pass ") || line.starts_with("// after pass ") {
            dumps.push((line.to_string(), String::new()));
        } else if let Some((_, text)) = dumps.last_mut() {
            // The table and statistics of --time-passes and --stats follow the last dump.
            if line.starts_with("pass ") {
                break;
            }
            text.push_str(line);
            text.push('\n');
        }
    }
    dumps
}

#[test]
fn the_default_pipeline_gives_valid_relay() {
    for (name, program) in [("program", PROGRAM), ("simple", SIMPLE)] {
        let file = TempFile::new(&format!("{name}.relay"), program);
        let out = opt(&[file.arg()]);
        let text = stdout(&out);
        assert!(text.starts_with("#[version = \"0.0.5\"]"), "{text}");
        assert_checks(&text, &format!("the optimized {name}"));
        // Nothing but warnings on stderr without debugging flags.
        assert!(!stderr(&out).contains("error"), "{}", stderr(&out));
    }
}

#[test]
fn every_opt_level_gives_valid_relay() {
    let file = TempFile::new("levels.relay", PROGRAM);
    for level in ["0", "1", "2", "3"] {
        let out = opt(&[file.arg(), "--opt-level", level]);
        assert_checks(&stdout(&out), &format!("the output at opt level {level}"));
    }
}

#[test]
fn verify_each_checks_every_pass() {
    let file = TempFile::new("verify.relay", SIMPLE);
    let out = opt(&[
        file.arg(),
        "--pass",
        "to_anf",
        "--pass",
        "to_anf",
        "--verify-each",
    ]);
    assert_checks(&stdout(&out), "the output with --verify-each");
}

#[test]
fn passes_run_in_the_order_given() {
    let file = TempFile::new("order.relay", SIMPLE);
    let out = opt(&[
        file.arg(),
        "--pass",
        "to_anf",
        "--pass",
        "eliminate_dead_code",
        "--pass",
        "to_anf",
        "--print-after-all",
    ]);
    let headers: Vec<String> = dumps(&stderr(&out)).into_iter().map(|(h, _)| h).collect();
    assert_eq!(
        headers,
        [
            "// after pass to_anf",
            "// after pass eliminate_dead_code",
            "// after pass to_anf",
        ]
    );
}

#[test]
fn print_after_all_dumps_valid_relay_after_each_pass() {
    let file = TempFile::new("dump.relay", PROGRAM);
    let out = opt(&[file.arg(), "--opt-level", "3", "--print-after-all"]);
    let dumps = dumps(&stderr(&out));
    let expected: Vec<String> = relay::passes::pass_names()
        .iter()
        .map(|name| format!("// after pass {name}"))
        .collect();
    let headers: Vec<String> = dumps.iter().map(|(h, _)| h.clone()).collect();
    assert_eq!(headers, expected);
    for (header, text) in &dumps {
        assert_checks(text, header);
    }
    // The last dump is the output.
    assert_eq!(dumps.last().unwrap().1, stdout(&out));
}

#[test]
fn print_before_and_after_one_pass() {
    let file = TempFile::new("one.relay", SIMPLE);
    let out = opt(&[
        file.arg(),
        "--pass",
        "eliminate_dead_code",
        "--pass",
        "to_anf",
        "--print-before",
        "to_anf",
        "--print-after",
        "to_anf",
    ]);
    let dumps = dumps(&stderr(&out));
    let headers: Vec<&str> = dumps.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(headers, ["// before pass to_anf", "// after pass to_anf"]);
    assert_eq!(dumps[1].1, stdout(&out));
}

#[test]
fn time_passes_prints_a_table_naming_each_pass() {
    let file = TempFile::new("time.relay", PROGRAM);
    let out = opt(&[file.arg(), "--opt-level", "3", "--time-passes"]);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("pass ") && l.contains("time (ms)") && l.contains("share"))
        .unwrap_or_else(|| panic!("no table header:\n{err}"));
    let rows = &lines[head + 1..];
    let names = relay::passes::pass_names();
    for (row, name) in rows.iter().zip(&names) {
        let mut cells = row.split_whitespace();
        assert_eq!(cells.next(), Some(*name), "{err}");
        let ms: f64 = cells.next().unwrap().parse().unwrap();
        assert!(ms >= 0.0);
        assert!(cells.next().unwrap().ends_with('%'), "{row}");
    }
    assert!(rows[names.len()].starts_with("type inference "), "{err}");
    assert!(rows[names.len() + 1].starts_with("total "), "{err}");
    assert!(rows[names.len() + 1].ends_with("100.0%"), "{err}");
    // The module still goes to stdout.
    assert_checks(&stdout(&out), "the output with --time-passes");
}

#[test]
fn a_lowered_module_runs_like_its_source() {
    // A tail-recursive scalar loop: its `opt` output compiles to the same bytecode (unboxed
    // scalar kernels, the self tail call a jump), and both executors run it in constant frames.
    let source = TempFile::new(
        "scalar_loop.relay",
        r#"#[version = "0.0.5"]
def @loop(%i: int32, %acc: float32) -> float32 {
  if (equal(%i, 0)) {
    %acc
  } else {
    @loop(subtract(%i, 1), add(multiply(%acc, 0.5f), 1f))
  }
}
def @main() -> float32 {
  @loop(20000, 0f)
}
"#,
    );
    let lowered = TempFile::path_for("scalar_loop_lowered.relay");
    opt(&[source.arg(), "-o", lowered.arg()]);
    let bytecode = |file: &str| stdout(&relayc(&["build", file, "--emit", "bytecode"]));
    assert_eq!(bytecode(lowered.arg()), bytecode(source.arg()));
    assert!(bytecode(lowered.arg()).contains("invoke_packed_alloc"));
    for file in [source.arg(), lowered.arg()] {
        for executor in ["vm", "interp"] {
            let out = relayc(&["run", file, "--executor", executor, "--max-frames", "100"]);
            assert_eq!(code(&out), 0, "{file} on {executor}: {}", stderr(&out));
            assert_eq!(stdout(&out).trim(), "2.", "{file} on {executor}");
        }
    }
}

#[test]
fn time_passes_format_json_holds_the_table_rows() {
    let file = TempFile::new("time_json.relay", PROGRAM);
    let out = opt(&[
        file.arg(),
        "--opt-level",
        "3",
        "--time-passes-format",
        "json",
    ]);
    let err = stderr(&out);
    let json: serde_json::Value =
        serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    let passes = json["passes"].as_array().expect("passes");
    let names: Vec<&str> = passes.iter().filter_map(|p| p["pass"].as_str()).collect();
    assert_eq!(names, relay::passes::pass_names(), "{json}");
    let fuse = &passes[names.iter().position(|&n| n == "fuse_ops").unwrap()];
    assert!(
        fuse["stats"]["primitive functions"]
            .as_i64()
            .is_some_and(|n| n > 0),
        "{fuse}"
    );
    let shares: f64 = passes.iter().filter_map(|p| p["share"].as_f64()).sum();
    assert!(shares <= 100.0 + 1e-9, "{json}");
    assert!(json["total_ms"].as_f64().is_some_and(|t| t >= 0.0));
    assert!(json["type_inference_ms"].as_f64().is_some());
    assert_checks(&stdout(&out), "the output with --time-passes-format json");
}

#[test]
fn stats_lists_what_the_passes_report() {
    let file = TempFile::new("stats.relay", SIMPLE);
    let out = opt(&[file.arg(), "--pass", "eliminate_dead_code", "--stats"]);
    let err = stderr(&out);
    // Each line names the pass that reported the statistic (or says there were none).
    assert!(
        err.lines()
            .all(|l| l.starts_with("eliminate_dead_code: ") || l == "no pass reported statistics"),
        "{err}"
    );
    assert!(!err.is_empty());
}

#[test]
fn unknown_pass_is_a_usage_error_listing_the_valid_names() {
    let file = TempFile::new("unknown.relay", SIMPLE);
    for flag in ["--pass", "--print-before", "--print-after"] {
        let out = relayc(&["opt", file.arg(), flag, "fuse_op"]);
        assert_eq!(code(&out), 2, "{flag}");
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("error: unknown pass `fuse_op` given to {flag}")),
            "{err}"
        );
        assert!(err.contains("did you mean `fuse_ops`?"), "{err}");
        for name in relay::passes::pass_names() {
            assert!(err.contains(name), "{name} not listed:\n{err}");
        }
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn bad_opt_level_is_a_usage_error() {
    let file = TempFile::new("level.relay", SIMPLE);
    let out = relayc(&["opt", file.arg(), "--opt-level", "4"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--opt-level"), "{}", stderr(&out));
}

#[test]
fn bad_passes_toml_is_a_diagnostic_into_the_file() {
    let file = TempFile::new("cfg.relay", SIMPLE);
    let config = TempFile::new(
        "bad-passes.toml",
        "[pipeline]\npasses = [\"to_anf\"]\n\n[debug]\nskip = [\"tail_cal\"]\n",
    );
    let out = relayc(&["opt", file.arg(), "--passes", config.arg()]);
    assert_eq!(code(&out), 1);
    let err = stderr(&out);
    assert!(err.contains("relay::config::unknown_pass"), "{err}");
    assert!(err.contains("unknown pass `tail_cal` in skip"), "{err}");
    // The label points at line 5, column 9 of the file.
    assert!(
        err.contains(&format!("{}:5:9]", config.arg())),
        "no location in the file:\n{err}"
    );
    assert!(err.contains("did you mean `tail_call`?"), "{err}");
    assert!(out.stdout.is_empty());

    let syntax = TempFile::new("syntax-passes.toml", "[pipeline\npasses = []\n");
    let out = relayc(&["opt", file.arg(), "--passes", syntax.arg()]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("relay::config::syntax"),
        "{}",
        stderr(&out)
    );

    let out = relayc(&["opt", file.arg(), "--passes", "/no/such/passes.toml"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("cannot read `/no/such/passes.toml`"));
}

#[test]
fn a_passes_file_sets_the_pipeline_and_flags_override_it() {
    let file = TempFile::new("cfg.relay", SIMPLE);
    let config = TempFile::new(
        "passes.toml",
        "[pipeline]\nopt_level = 1\npasses = [\"eliminate_dead_code\", \"to_anf\", \"tail_call\"]\n\
         [debug]\nprint_after = [\"to_anf\"]\nskip = [\"tail_call\"]\n",
    );
    // The file alone: to_anf is printed, tail_call skipped.
    let out = opt(&[file.arg(), "--passes", config.arg(), "--time-passes"]);
    let err = stderr(&out);
    let headers: Vec<String> = dumps(&err).into_iter().map(|(h, _)| h).collect();
    assert_eq!(headers, ["// after pass to_anf"]);
    assert!(err.lines().any(|l| l.starts_with("to_anf ")), "{err}");
    assert!(!err.lines().any(|l| l.starts_with("tail_call ")), "{err}");

    // `--pass` replaces the file's pass list; its debug settings stay.
    let out = opt(&[
        file.arg(),
        "--passes",
        config.arg(),
        "--pass",
        "to_anf",
        "--print-after-all",
    ]);
    let headers: Vec<String> = dumps(&stderr(&out)).into_iter().map(|(h, _)| h).collect();
    assert_eq!(headers, ["// after pass to_anf"]);
}

#[test]
fn output_file() {
    let file = TempFile::new("out.relay", SIMPLE);
    let target = TempFile::path_for("written.relay");
    let out = opt(&[file.arg(), "-o", target.arg()]);
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let written = std::fs::read_to_string(target.path()).unwrap();
    assert_checks(&written, "the file -o wrote");
    // The same text stdout would get.
    let again = opt(&[file.arg()]);
    assert_eq!(written, stdout(&again));

    let out = relayc(&["opt", file.arg(), "-o", "/no/such/dir/out.relay"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("cannot write `/no/such/dir/out.relay`"));
}

#[test]
fn a_bad_program_is_a_user_error() {
    let file = TempFile::new(
        "bad.relay",
        "#[version = \"0.0.5\"]\ndef @main(%x: int32) {\n  %y\n}\n",
    );
    let out = relayc(&["opt", file.arg()]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("relay::"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());

    let out = relayc(&["opt", "/no/such/file.relay"]);
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("cannot read"));
}

#[test]
fn pass_options_on_the_command_line() {
    let file = TempFile::new("options.relay", SIMPLE);
    // Every declared option accepts its default written as text.
    for pass in relay::passes::all_passes() {
        for option in pass.options() {
            let value = match option.default {
                relay::passes::OptionValue::Int(v) => v.to_string(),
                relay::passes::OptionValue::Bool(v) => v.to_string(),
            };
            let setting = format!("{}.{}={value}", pass.name(), option.name);
            opt(&[file.arg(), "--pass", pass.name(), "--pass-option", &setting]);
        }
    }

    let out = relayc(&[
        "opt",
        file.arg(),
        "--pass-option",
        "to_anf.no_such_option=1",
    ]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.starts_with("error: --pass-option to_anf.no_such_option=1: pass `to_anf` has no option `no_such_option`"),
        "{err}"
    );

    let out = relayc(&["opt", file.arg(), "--pass-option", "fuse_op.max_depth=1"]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains("unknown pass `fuse_op`; did you mean `fuse_ops`?"),
        "{err}"
    );

    let out = relayc(&["opt", file.arg(), "--pass-option", "fuse_ops"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("expected PASS.OPTION=VALUE"),
        "{}",
        stderr(&out)
    );
}
