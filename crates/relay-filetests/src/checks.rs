//! Running a test file's filecheck directives (`// check:`, `// nextln:`, ...) against the
//! text a test produced, with the `filecheck` crate Cranelift uses.

use filecheck::{CheckerBuilder, NO_VARIABLES};

use crate::failure::indent;
use crate::{Failure, TestFile};

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
