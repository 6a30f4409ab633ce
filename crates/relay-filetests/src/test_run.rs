//! `// test run`: the file parses and type-checks, `@main` runs with no arguments in the
//! reference interpreter, and the filecheck directives match the formatted result
//! (`relay_interp::format_value` with `@main`'s result type). `// test run error`: the run fails,
//! the rendered run-time diagnostic equals the `.stderr` golden and the directives match it.
//! `max-frames=N` sets the interpreter's frame limit.

use relay_interp::InterpOptions;

use crate::{Failure, Kind, TestFile, checks, golden, round_trip};

/// The `run` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "run",
    options: &["error", "max-frames="],
    checks_own_options: false,
    run,
};

/// The interpreter options the header asks for.
fn options(file: &TestFile<'_>) -> Result<InterpOptions, Failure> {
    let mut opts = InterpOptions::default();
    for option in &file.options {
        if let Some(value) = option.strip_prefix("max-frames=") {
            opts.max_frames = value.parse().map_err(|_| {
                Failure::new(format!(
                    "`max-frames` expects a non-negative integer, got `{value}`"
                ))
            })?;
        }
    }
    Ok(opts)
}

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    if file.output.is_some() {
        return Err(Failure::new(
            "`test run` does not compare precise output: use filecheck directives",
        ));
    }
    let opts = options(file)?;
    let module = round_trip::parse(file.program(), &file.name)?;
    relay_types::check_module(&module).map_err(|errors| {
        Failure::new(format!(
            "the file does not type-check\n\n{}",
            relay_syntax::render_plain(&errors)
        ))
    })?;
    let result = relay_interp::run(&module, "main", Vec::new(), &opts);
    if file.has_option("error") {
        return match result {
            Ok(value) => {
                let ty = relay_interp::result_type(&module, "main");
                Err(Failure::new(format!(
                    "the run succeeds, but `test run error` expects a run-time error; it \
                     returned:\n\n{}",
                    relay_interp::format_value(&value, ty.as_ref(), &module)
                )))
            }
            Err(error) => {
                let rendered = relay_syntax::render_plain(&error);
                golden::check_golden(&file.stderr_path(), &rendered)?;
                checks::filecheck(file, &rendered, "the rendered diagnostic")
            }
        };
    }

    let stale = file.stderr_path();
    if stale.exists() {
        return Err(Failure::new(format!(
            "`{}` exists but the test expects the run to succeed; delete the golden or add \
             the `error` option",
            stale.display()
        )));
    }
    let value = result.map_err(|error| {
        Failure::new(format!(
            "the run fails\n\n{}",
            relay_syntax::render_plain(&error)
        ))
    })?;
    let ty = relay_interp::result_type(&module, "main");
    let formatted = relay_interp::format_value(&value, ty.as_ref(), &module);
    if file.directives.is_empty() {
        return Err(Failure::new(format!(
            "`test run` needs filecheck directives on the result; it is:\n\n{formatted}"
        )));
    }
    checks::filecheck(file, &formatted, "the formatted result")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::run_file;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\ndef @main() { add(1, 2) }\n";

    #[test]
    fn the_result_is_checked_with_filecheck() {
        let text = format!("// test run\n{PROGRAM}// check: 3\n");
        run_file(Path::new("y.relay"), &text).unwrap();
        let text = format!("// test run\n{PROGRAM}// check: 4\n");
        let err = run_file(Path::new("y.relay"), &text).unwrap_err();
        assert!(err.message().contains("the formatted result"), "{err}");
    }

    #[test]
    fn a_run_without_directives_is_a_failure() {
        let text = format!("// test run\n{PROGRAM}");
        let err = run_file(Path::new("y.relay"), &text).unwrap_err();
        assert!(
            err.message().contains("needs filecheck directives"),
            "{err}"
        );
    }

    #[test]
    fn a_successful_run_fails_an_error_test() {
        let text = format!("// test run error\n{PROGRAM}");
        let err = run_file(Path::new("y.relay"), &text).unwrap_err();
        assert!(err.message().contains("returned:\n\n3"), "{err}");
    }

    #[test]
    fn a_failing_run_fails_a_run_test() {
        let text = "// test run max-frames=1\n#[version = \"0.0.5\"]\n\
                    def @f() -> int32 { 1 }\ndef @main() { add(@f(), 1) }\n// check: 2\n";
        let err = run_file(Path::new("y.relay"), text).unwrap_err();
        assert!(err.message().contains("the run fails"), "{err}");
    }

    #[test]
    fn ill_typed_programs_do_not_run() {
        let text = "// test run\n#[version = \"0.0.5\"]\ndef @main() { add(1, 2f) }\n// check: 3\n";
        let err = run_file(Path::new("y.relay"), text).unwrap_err();
        assert!(err.message().contains("does not type-check"), "{err}");
    }
}
