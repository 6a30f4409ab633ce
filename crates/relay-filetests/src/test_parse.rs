//! `// test parse`: the file parses, round-trips through the printer and the printed text
//! passes the file's filecheck directives. `// test parse error`: the file fails to parse and
//! the rendered diagnostics equal the `.stderr` golden next to it.

use crate::test_file::OUTPUT_MARKER;
use crate::{Failure, Kind, TestFile, checks, golden, round_trip};

/// The `parse` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "parse",
    options: &["error"],
    checks_own_options: false,
    run,
};

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    if file.output.is_some() {
        return Err(Failure::new(format!(
            "`test parse` does not compare precise output: use `test fmt` for a \
             `{OUTPUT_MARKER}` block"
        )));
    }
    if file.has_option("error") {
        return run_error(file);
    }

    let stale = file.stderr_path();
    if stale.exists() {
        return Err(Failure::new(format!(
            "`{}` exists but the test expects the file to parse; delete the golden or add \
             the `error` option",
            stale.display()
        )));
    }

    let module = round_trip::parse(file.program(), &file.name)?;
    let printed = round_trip::check(&module, &file.name)?;
    checks::filecheck(file, &printed, "the printed text")
}

/// `// test parse error`.
fn run_error(file: &TestFile<'_>) -> Result<(), Failure> {
    let errors = match relay_syntax::parse(file.program(), &file.name) {
        Ok(module) => {
            let printed = relay_ir::print_module(&module, &Default::default());
            return Err(Failure::new(format!(
                "the file parses, but `test parse error` expects errors; it parsed as:\n\n\
                 {printed}"
            )));
        }
        Err(errors) => errors,
    };
    let rendered = relay_syntax::render_plain(&errors);
    golden::check_golden(&file.stderr_path(), &rendered)?;
    checks::filecheck(file, &rendered, "the rendered diagnostics")
}
