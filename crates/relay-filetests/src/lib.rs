//! The `ir-tests/` harness (docs/design.md §15): file-driven tests in the style of Cranelift's
//! filetests, one libtest trial per `.relay` file.
//!
//! A test file starts with a header line `// test <kind> [options...]`, then holds a Relay
//! program, filecheck directives in whole-line comments (`// check: ...`, `// nextln: ...`,
//! ...), and optionally a precise-output block at the end (`// output:` followed by
//! `// `-prefixed expected lines). Rendered diagnostics live in golden files next to the test
//! (`foo.relay` → `foo.stderr`). With `RELAY_BLESS=1`, mismatching expectations are rewritten in
//! place instead of failing. The format is documented in `docs/ir-tests.md`.
//!
//! Each test kind is one module (`test_parse.rs`, `test_fmt.rs`, ...) exporting a [`Kind`];
//! adding a kind means adding a module and listing it in [`KINDS`]. The [`corpus`] module
//! holds the round-trip property run over every other `.relay` file the project has, and the
//! [`preservation`] module the pass-preservation property (every pass keeps every program's
//! result).

mod checks;
pub mod corpus;
mod failure;
mod golden;
pub mod preservation;
mod round_trip;
mod test_bytecode;
mod test_clif;
mod test_file;
mod test_fmt;
mod test_kernels;
mod test_parse;
mod test_pass;
mod test_pipeline;
mod test_run;
mod test_schedule;
mod test_types;

use std::path::{Path, PathBuf};

pub use failure::Failure;
pub use test_file::{OutputBlock, TestFile};

/// A test kind: the word after `// test`, the options it accepts and how it runs.
pub(crate) struct Kind {
    /// The name in the header.
    name: &'static str,
    /// The options the header may list after the name; one ending in `=` (`max-frames=`)
    /// takes a value (`max-frames=100`).
    options: &'static [&'static str],
    /// Whether the kind reads its options itself (`test pass` takes pass names and settings),
    /// so the harness does not check them against `options`.
    checks_own_options: bool,
    /// Runs one test file of this kind.
    run: fn(&TestFile<'_>) -> Result<(), Failure>,
}

/// Every test kind, in the order `docs/ir-tests.md` describes them.
const KINDS: &[Kind] = &[
    test_parse::KIND,
    test_fmt::KIND,
    test_types::KIND,
    test_run::KIND,
    test_pass::KIND,
    test_pipeline::KIND,
    test_bytecode::KIND,
    test_schedule::KIND,
    test_kernels::KIND,
    test_clif::KIND,
];

/// The `ir-tests/` directory at the top of the repository.
pub fn ir_tests_dir() -> PathBuf {
    corpus::repository_root().join("ir-tests")
}

/// Runs the test in `path`, whose contents are `text`. Failures name the file.
pub fn run_file(path: &Path, text: &str) -> Result<(), Failure> {
    run(path, text).map_err(|failure| failure.context(display_path(path)))
}

/// `path` relative to the repository root when it is inside it, for messages.
pub fn display_path(path: &Path) -> std::path::Display<'_> {
    path.strip_prefix(corpus::repository_root())
        .unwrap_or(path)
        .display()
}

fn run(path: &Path, text: &str) -> Result<(), Failure> {
    let file = TestFile::parse(path, text)?;
    let Some(kind) = KINDS.iter().find(|kind| kind.name == file.kind) else {
        let valid: Vec<&str> = KINDS.iter().map(|kind| kind.name).collect();
        return Err(Failure::new(format!(
            "unknown test kind `{}`; valid kinds: {}",
            file.kind,
            valid.join(", ")
        )));
    };
    for option in file.options.iter().filter(|_| !kind.checks_own_options) {
        let known = kind
            .options
            .iter()
            .any(|valid| match valid.strip_suffix('=') {
                Some(key) => option
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('=')),
                None => valid == option,
            });
        if !known {
            let valid = if kind.options.is_empty() {
                "none".to_owned()
            } else {
                kind.options.join(", ")
            };
            return Err(Failure::new(format!(
                "unknown option `{option}` for `test {}`; valid options: {valid}",
                kind.name
            )));
        }
    }
    (kind.run)(&file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kind_names_the_file_and_the_valid_kinds() {
        let err = run_file(Path::new("ir-tests/x/y.relay"), "// test frobnicate\n").unwrap_err();
        let message = err.message();
        assert!(message.starts_with("ir-tests/x/y.relay: "), "{message}");
        assert!(message.contains("`frobnicate`"), "{message}");
        assert!(
            message.contains(
                "parse, fmt, types, run, pass, pipeline, bytecode, schedule, kernels, clif"
            ),
            "{message}"
        );
    }

    #[test]
    fn unknown_option_is_a_failure() {
        let err = run_file(Path::new("y.relay"), "// test parse loudly\n").unwrap_err();
        assert!(
            err.message()
                .contains("unknown option `loudly` for `test parse`"),
            "{err}"
        );
        let err = run_file(Path::new("y.relay"), "// test fmt error\n").unwrap_err();
        assert!(err.message().contains("valid options: none"), "{err}");
    }

    #[test]
    fn valued_options_need_their_key() {
        let err = run_file(Path::new("y.relay"), "// test run max-frames\n").unwrap_err();
        assert!(
            err.message().contains("unknown option `max-frames`"),
            "{err}"
        );
        let err = run_file(Path::new("y.relay"), "// test run max-frames=x\n").unwrap_err();
        assert!(err.message().contains("non-negative integer"), "{err}");
    }

    #[test]
    fn parse_with_an_output_block_is_a_failure() {
        let err = run_file(Path::new("y.relay"), "// test parse\n// output:\n").unwrap_err();
        assert!(err.message().contains("use `test fmt`"), "{err}");
    }
}
