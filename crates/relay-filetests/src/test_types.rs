//! `// test types`: the file parses and type-checks; the module printed with `/* ty=... */`
//! comments re-parses to a structurally equal module and passes the file's filecheck
//! directives; warnings, if any, are rendered and must equal the `.stderr` golden (no warnings,
//! no golden). `// test types error`: the file parses but fails to type-check, and the rendered
//! diagnostics equal the `.stderr` golden.

use relay_ir::structural::module_eq;
use relay_ir::{PrintOptions, print_module};

use crate::failure::indent;
use crate::{Failure, Kind, TestFile, checks, golden, round_trip};

/// The `types` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "types",
    options: &["error"],
    checks_own_options: false,
    run,
};

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    if file.output.is_some() {
        return Err(Failure::new(
            "`test types` does not compare precise output: use filecheck directives",
        ));
    }
    let module = round_trip::parse(file.program(), &file.name)?;
    let checked = relay_types::check_module(&module);
    if file.has_option("error") {
        return match checked {
            Ok(_) => {
                let printed = print_module(&module, &PrintOptions { show_types: true });
                Err(Failure::new(format!(
                    "the file type-checks, but `test types error` expects errors; it checked \
                     as:\n\n{printed}"
                )))
            }
            Err(errors) => {
                let rendered = relay_syntax::render_plain(&errors);
                golden::check_golden(&file.stderr_path(), &rendered)?;
                checks::filecheck(file, &rendered, "the rendered diagnostics")
            }
        };
    }

    let warnings = checked.map_err(|errors| {
        Failure::new(format!(
            "the file does not type-check\n\n{}",
            relay_syntax::render_plain(&errors)
        ))
    })?;
    let stderr = file.stderr_path();
    if warnings.is_empty() {
        if stderr.exists() {
            return Err(Failure::new(format!(
                "`{}` exists but the file type-checks without warnings; delete the golden",
                stderr.display()
            )));
        }
    } else {
        let rendered: String = warnings
            .iter()
            .map(|w| relay_syntax::render_plain(w))
            .collect();
        golden::check_golden(&stderr, &rendered)?;
    }

    let printed = print_module(&module, &PrintOptions { show_types: true });
    let reparsed =
        relay_syntax::parse(&printed, &format!("{} (printed)", file.name)).map_err(|errors| {
            Failure::new(format!(
                "the text printed with types does not parse\n\n{}\nprinted text:\n{}",
                relay_syntax::render_plain(&errors),
                indent(&printed)
            ))
        })?;
    if !module_eq(&reparsed, &module) {
        return Err(Failure::new(format!(
            "the text printed with types re-parses to a different module\n\nprinted text:\n{}",
            indent(&printed)
        )));
    }
    checks::filecheck(file, &printed, "the text printed with types")
}
