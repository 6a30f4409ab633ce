//! Expected outputs that `RELAY_BLESS=1` rewrites: the precise-output block at the end of a
//! test file and golden files next to it (`foo.stderr`). Without blessing a mismatch fails with
//! a unified diff.

use std::path::Path;

use similar::TextDiff;

use crate::test_file::OUTPUT_MARKER;
use crate::{Failure, TestFile};

/// The environment variable that turns mismatches into rewrites.
pub const BLESS_VAR: &str = "RELAY_BLESS";

/// Whether expectations are being rewritten (`RELAY_BLESS=1`).
pub fn blessing() -> bool {
    std::env::var(BLESS_VAR).is_ok_and(|value| value == "1")
}

/// A unified diff from `expected` to `actual`.
pub fn diff(expected: &str, actual: &str) -> String {
    TextDiff::from_lines(expected, actual)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}

/// The advice at the end of every mismatch.
fn bless_hint() -> String {
    format!("if the new output is right, re-run with {BLESS_VAR}=1 to update the expectation")
}

/// Compares `actual` with the file's `// output:` block, rewriting (or appending) the block
/// when blessing.
pub fn check_output_block(file: &TestFile<'_>, actual: &str) -> Result<(), Failure> {
    let actual_lines: Vec<&str> = actual.lines().collect();
    let expected = file.output.as_ref();
    if expected.is_some_and(|block| block.lines == actual_lines) {
        return Ok(());
    }

    if blessing() {
        let keep = match expected {
            Some(block) => file.text[..block.start].to_owned(),
            None => {
                let mut text = file.text.to_owned();
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                if !text.is_empty() && !text.ends_with("\n\n") {
                    text.push('\n');
                }
                text
            }
        };
        let new_text = keep + &output_block(&actual_lines);
        return write(file.path, &new_text);
    }

    match expected {
        None => Err(Failure::new(format!(
            "the file has no `{OUTPUT_MARKER}` block; the printed text is:\n\n{actual}\n\
             run with {BLESS_VAR}=1 to append it"
        ))),
        Some(block) => {
            let mut expected = block.lines.join("\n");
            expected.push('\n');
            let mut actual = actual_lines.join("\n");
            actual.push('\n');
            Err(Failure::new(format!(
                "the printed text differs from the `{OUTPUT_MARKER}` block\n\n{}\n{}",
                diff(&expected, &actual),
                bless_hint()
            )))
        }
    }
}

/// The `// output:` block holding `lines`.
pub fn output_block(lines: &[&str]) -> String {
    let mut out = format!("{OUTPUT_MARKER}\n");
    for line in lines {
        if line.is_empty() {
            out.push_str("//\n");
        } else {
            out.push_str("// ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Compares `actual` with the golden file at `path`, creating or rewriting it when blessing.
/// A missing golden fails when not blessing.
pub fn check_golden(path: &Path, actual: &str) -> Result<(), Failure> {
    let name = path
        .file_name()
        .map_or_else(|| path.display().to_string(), |n| n.display().to_string());
    let expected = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => {
            return Err(Failure::new(format!(
                "cannot read `{}`: {err}",
                path.display()
            )));
        }
    };
    if expected.as_deref() == Some(actual) {
        return Ok(());
    }
    if blessing() {
        return write(path, actual);
    }
    match expected {
        None => Err(Failure::new(format!(
            "the golden file `{name}` is missing; the output is:\n\n{actual}\n\
             run with {BLESS_VAR}=1 to create it"
        ))),
        Some(expected) => Err(Failure::new(format!(
            "the output differs from `{name}`\n\n{}\n{}",
            diff(&expected, actual),
            bless_hint()
        ))),
    }
}

/// Writes a blessed expectation.
fn write(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text)
        .map_err(|err| Failure::new(format!("cannot bless `{}`: {err}", path.display())))
}
