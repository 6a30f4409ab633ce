//! Running a test file's filecheck directives (`// check:`, `// nextln:`, ...) against the
//! text a test produced, with the `filecheck` crate Cranelift uses; and the expectations of
//! the kinds that print IR (directives and/or the `// output:` block, at least one).

use filecheck::{CheckerBuilder, NO_VARIABLES};

use crate::failure::indent;
use crate::{Failure, TestFile, golden};

/// Checks `printed` (the IR a test printed; `what` names it in messages, e.g. "the printed
/// bytecode") against the file's filecheck directives and its `// output:` block, at least one
/// of which the file must have. With `RELAY_BLESS=1` the block is rewritten, or appended to a
/// file without directives, before the directives are checked, so that it is up to date even
/// when a directive no longer matches.
pub fn printed_ir(file: &TestFile<'_>, printed: &str, what: &str) -> Result<(), Failure> {
    if file.directives.is_empty() && file.output.is_none() && !golden::blessing() {
        return Err(Failure::new(format!(
            "`test {}` needs filecheck directives or a `// output:` block on {what} (run with \
             {}=1 to append the block); it is:\n\n{}",
            file.kind,
            golden::BLESS_VAR,
            indent(printed)
        )));
    }
    if file.output.is_some() || file.directives.is_empty() {
        golden::check_output_block(file, printed)?;
    }
    filecheck(file, printed, what)
}

/// Checks `output` (what the test produced: printed IR, rendered diagnostics, ...) against the
/// file's directives. `what` names the output in failure messages, e.g. "the printed text".
pub fn filecheck(file: &TestFile<'_>, output: &str, what: &str) -> Result<(), Failure> {
    let mut builder = CheckerBuilder::new();
    for &(line, directive) in &file.directives {
        match builder.directive(directive) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Failure::new(format!(
                    "line {line}: malformed directive `{directive}` (a directive is \
                     `// <keyword>: <pattern>`, with a space after the colon)"
                )));
            }
            Err(err) => {
                return Err(Failure::new(format!(
                    "line {line}: bad directive `{directive}`: {err}"
                )));
            }
        }
    }
    let checker = builder.finish();
    if checker.is_empty() {
        return Ok(());
    }
    match checker.explain(output, NO_VARIABLES) {
        Ok((true, _)) => Ok(()),
        Ok((false, explanation)) => Err(Failure::new(format!(
            "filecheck directives do not match {what}\n\n\
             explanation:\n{}\n{what}:\n{}",
            indent(&explanation),
            indent(output)
        ))),
        Err(err) => Err(Failure::new(format!("filecheck failed: {err}"))),
    }
}
