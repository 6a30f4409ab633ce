//! `// test pass NAME [NAME...] [opt-level=N] [PASS.OPTION=VALUE...]`: the file parses and
//! type-checks; the named passes run in order through a [`PassManager`] that type-checks and
//! verifies the output of every pass; the transformed module prints as text that re-parses,
//! type-checks and prints to the same text; the filecheck directives and/or the `// output:`
//! block (at least one is required) match the printed text; and, when the module has `@main`,
//! the reference interpreter gives the same result on the original and the transformed module
//! (see [`check_transformed`], which `test pipeline` shares).

use relay_interp::InterpOptions;
use relay_ir::{Module, PrintOptions, Symbol, Value, print_module};
use relay_passes::PassManager;

use crate::failure::indent;
use crate::golden::diff;
use crate::{Failure, Kind, TestFile, checks, round_trip};

/// The `pass` test kind. Its options are pass names and settings, which [`run`] checks itself.
pub(crate) const KIND: Kind = Kind {
    name: "pass",
    options: &[],
    checks_own_options: true,
    run,
};

/// The seed of the random inputs `@main` runs on.
pub const INPUT_SEED: u64 = 0x5eed;

/// The relative tolerance on float results.
pub const RTOL: f64 = 1e-5;

/// The absolute tolerance on float results.
pub const ATOL: f64 = 1e-6;

/// The opt level when the header sets none.
const DEFAULT_OPT_LEVEL: u32 = 2;

/// What the header of a `test pass` file asks for.
struct Header<'a> {
    passes: Vec<&'static dyn relay_passes::Pass>,
    opt_level: u32,
    settings: Vec<(&'a str, &'a str, &'a str)>,
}

/// Reads the header options: pass names, `opt-level=N` and `PASS.OPTION=VALUE`.
fn header<'a>(file: &TestFile<'a>) -> Result<Header<'a>, Failure> {
    let mut header = Header {
        passes: Vec::new(),
        opt_level: DEFAULT_OPT_LEVEL,
        settings: Vec::new(),
    };
    for &option in &file.options {
        if let Some(value) = option.strip_prefix("opt-level=") {
            header.opt_level = value
                .parse()
                .ok()
                .filter(|level| *level <= 3)
                .ok_or_else(|| {
                    Failure::new(format!("`opt-level` expects 0, 1, 2 or 3, got `{value}`"))
                })?;
        } else if let Some((key, value)) = option.split_once('=') {
            let Some((pass, name)) = key.split_once('.') else {
                return Err(Failure::new(format!(
                    "unknown option `{option}` for `test pass`; a setting is \
                     `opt-level=N` or `PASS.OPTION=VALUE`"
                )));
            };
            header.settings.push((pass, name, value));
        } else {
            let pass = relay_passes::pass_by_name(option).ok_or_else(|| {
                Failure::new(format!(
                    "unknown pass `{option}`; valid passes: {}",
                    relay_passes::pass_names().join(", ")
                ))
            })?;
            header.passes.push(pass);
        }
    }
    if header.passes.is_empty() {
        return Err(Failure::new(format!(
            "`test pass` names no pass; valid passes: {}",
            relay_passes::pass_names().join(", ")
        )));
    }
    Ok(header)
}

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let header = header(file)?;
    let mut manager = PassManager::new(header.passes, header.opt_level).verify_each(true);
    for (pass, option, value) in &header.settings {
        manager
            .set_option(pass, option, value)
            .map_err(|err| Failure::new(format!("bad pass option `{pass}.{option}`: {err}")))?;
    }
    let module = parse_and_check(file)?;
    check_transformed(file, &module, &manager)
}

/// Parses the test's program and type-checks it.
pub(crate) fn parse_and_check(file: &TestFile<'_>) -> Result<Module, Failure> {
    let module = round_trip::parse(file.program(), &file.name)?;
    relay_types::check_module(&module).map_err(|errors| {
        Failure::new(format!(
            "the file does not type-check\n\n{}",
            relay_syntax::render_plain(&errors)
        ))
    })?;
    Ok(module)
}

/// Runs `manager` on the type-checked `module` and checks the result: it prints as text that
/// re-parses, type-checks and prints identically; the directives and/or the output block
/// match the printed text; and `@main`, if any, computes the same result as before.
pub(crate) fn check_transformed(
    file: &TestFile<'_>,
    module: &Module,
    manager: &PassManager,
) -> Result<(), Failure> {
    let (transformed, _) = manager.run(module.clone()).map_err(|err| {
        Failure::new(format!(
            "the pipeline fails\n\n{}",
            indent(&err.to_string())
        ))
    })?;
    let printed = check_printed(&transformed, &file.name)?;

    checks::printed_ir(file, &printed, "the printed module")?;
    check_same_result(module, &transformed).map_err(Failure::new)
}

/// Prints the transformed module and checks that the text re-parses, type-checks and prints to
/// the same text. Returns the text.
pub(crate) fn check_printed(module: &Module, name: &str) -> Result<String, Failure> {
    let options = PrintOptions::default();
    let printed = print_module(module, &options);
    let reparsed =
        relay_syntax::parse(&printed, &format!("{name} (transformed)")).map_err(|errors| {
            Failure::new(format!(
                "the printed module does not parse\n\n{}\nprinted module:\n{}",
                relay_syntax::render_plain(&errors),
                indent(&printed)
            ))
        })?;
    relay_types::check_module(&reparsed).map_err(|errors| {
        Failure::new(format!(
            "the printed module does not type-check\n\n{}\nprinted module:\n{}",
            relay_syntax::render_plain(&errors),
            indent(&printed)
        ))
    })?;
    let reprinted = print_module(&reparsed, &options);
    if reprinted != printed {
        return Err(Failure::new(format!(
            "printing the re-parsed module gives different text\n\n{}",
            diff(&printed, &reprinted)
        )));
    }
    Ok(printed)
}

/// Runs `@main` of the original and of the transformed module on the same seeded random
/// inputs and compares the results. Nothing is compared when the module has no `@main` or
/// `@main` has a parameter that is not a tensor of static shape. When the original run fails,
/// the transformed run must fail too.
pub fn check_same_result(original: &Module, transformed: &Module) -> Result<(), String> {
    let Some(main) = original.function(Symbol::intern("main")) else {
        return Ok(());
    };
    let Ok(inputs) = relay_interp::random_inputs(&main.func, INPUT_SEED) else {
        return Ok(());
    };
    let expected = run_main(original, inputs.clone());
    compare_with(transformed, inputs, &expected)
}

/// Runs `@main` of `module` on `inputs`; a run-time error comes back rendered.
pub(crate) fn run_main(module: &Module, inputs: Vec<Value>) -> Result<Value, String> {
    relay_interp::run(module, "main", inputs, &InterpOptions::default())
        .map_err(|error| relay_syntax::render_plain(&error))
}

/// Runs `@main` of the transformed module on `inputs` and compares the result with what the
/// original module gave on them (`expected`, its value or its rendered run-time error).
pub(crate) fn compare_with(
    transformed: &Module,
    inputs: Vec<Value>,
    expected: &Result<Value, String>,
) -> Result<(), String> {
    match (expected, run_main(transformed, inputs)) {
        (Ok(expected), Ok(actual)) => relay_interp::compare_values(&actual, expected, RTOL, ATOL)
            .map_err(|difference| {
                format!("the transformed module computes a different result: {difference}")
            }),
        (Ok(_), Err(error)) => Err(format!(
            "the original module runs, but the transformed one fails\n\n{error}"
        )),
        (Err(error), Ok(_)) => Err(format!(
            "the original module fails, but the transformed one runs; the original's \
             error:\n\n{error}"
        )),
        (Err(_), Err(_)) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::run_file;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\n\
                           def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, %x)) }\n";

    fn run(text: &str) -> Result<(), crate::Failure> {
        run_file(Path::new("y.relay"), text)
    }

    #[test]
    fn directives_are_checked_against_the_printed_module() {
        let text = format!("// test pass eliminate_dead_code\n{PROGRAM}// check: nn.relu\n");
        run(&text).unwrap();
        let text = format!("// test pass eliminate_dead_code\n{PROGRAM}// check: nn.softmax\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("the printed module"), "{err}");
    }

    #[test]
    fn output_blocks_are_compared() {
        let text = format!(
            "// test pass eliminate_dead_code\n{PROGRAM}// output:\n// #[version = \"0.0.5\"]\n"
        );
        let err = run(&text).unwrap_err();
        assert!(
            err.message()
                .contains("differs from the `// output:` block"),
            "{err}"
        );
    }

    #[test]
    fn a_test_without_expectations_is_a_failure() {
        if crate::golden::blessing() {
            return;
        }
        let text = format!("// test pass eliminate_dead_code\n{PROGRAM}");
        let err = run(&text).unwrap_err();
        assert!(
            err.message().contains("needs filecheck directives"),
            "{err}"
        );
    }

    #[test]
    fn unknown_passes_list_the_valid_ones() {
        let text = format!("// test pass frobnicate\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("unknown pass `frobnicate`"), "{err}");
        assert!(err.message().contains("fuse_ops"), "{err}");
        let text = format!("// test pass\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("names no pass"), "{err}");
    }

    #[test]
    fn bad_settings_are_failures() {
        let text = format!("// test pass fuse_ops opt-level=7\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("`opt-level` expects"), "{err}");
        let text = format!("// test pass fuse_ops fuse_ops.max_depth=deep\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(
            err.message()
                .contains("bad pass option `fuse_ops.max_depth`"),
            "{err}"
        );
        let text = format!("// test pass fuse_ops fuse_ops.no_such=1\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("bad pass option"), "{err}");
        let text = format!("// test pass fuse_ops depth=1\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("PASS.OPTION=VALUE"), "{err}");
    }

    #[test]
    fn ill_typed_programs_fail() {
        let text = "// test pass fuse_ops\n#[version = \"0.0.5\"]\n\
                    def @main() { add(1, 2f) }\n// check: x\n";
        let err = run(text).unwrap_err();
        assert!(err.message().contains("does not type-check"), "{err}");
    }

    #[test]
    fn results_are_compared_before_and_after() {
        use relay_ir::Symbol;

        let original = relay_syntax::parse(PROGRAM, "a.relay").unwrap();
        let same = relay_syntax::parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%x: Tensor[(2, 3), float32]) { nn.relu(multiply(%x, 2f)) }\n",
            "b.relay",
        )
        .unwrap();
        super::check_same_result(&original, &same).unwrap();
        let different = relay_syntax::parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%x: Tensor[(2, 3), float32]) { multiply(%x, 3f) }\n",
            "c.relay",
        )
        .unwrap();
        let err = super::check_same_result(&original, &different).unwrap_err();
        assert!(err.contains("different result: result: element"), "{err}");

        let failing = relay_syntax::parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%x: Tensor[(2, 3), float32]) { divide(1, 0) }\n",
            "d.relay",
        )
        .unwrap();
        let err = super::check_same_result(&original, &failing).unwrap_err();
        assert!(err.contains("the transformed one fails"), "{err}");
        let err = super::check_same_result(&failing, &original).unwrap_err();
        assert!(err.contains("the transformed one runs"), "{err}");
        super::check_same_result(&failing, &failing).unwrap();

        // A parameter that is not a static tensor skips the comparison.
        let dynamic = relay_syntax::parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%x: Tensor[(?), float32]) { %x }\n",
            "e.relay",
        )
        .unwrap();
        let other = relay_syntax::parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%x: Tensor[(?), float32]) { add(%x, 1f) }\n",
            "f.relay",
        )
        .unwrap();
        assert!(dynamic.function(Symbol::intern("main")).is_some());
        super::check_same_result(&dynamic, &other).unwrap();
    }
}
