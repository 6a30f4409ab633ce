//! `// test bytecode [opt-level=N] [passes=PATH] [block=B]`: the file parses and type-checks;
//! the pipeline of a `passes.toml` (the repository's own by default; `passes=PATH` names
//! another, relative to the test file's directory; `opt-level=N` overrides its opt level;
//! `block=B` sets `alter_op_layout`'s channel block, 0 to keep convolutions NCHW) lowers it with
//! every pass's output type-checked and verified; [`relay_vm::compile`] turns the result into
//! an executable whose bytecode passes the validator; and the filecheck directives and/or the
//! `// output:` block (at least one is required) match the printed bytecode: every function's
//! `VMFunc` listing, in function index order, separated by blank lines (see [`print`]).
//!
//! Kernels are not JIT-compiled: printing bytecode needs none of them.

use std::path::Path;

use relay_ir::Module;
use relay_passes::{MAX_OPT_LEVEL, PassManager, PipelineConfig};
use relay_vm::Executable;

use crate::failure::indent;
use crate::test_pass::parse_and_check;
use crate::test_pipeline::default_config_path;
use crate::{Failure, Kind, TestFile, checks};

/// The `bytecode` test kind.
pub(crate) const KIND: Kind = Kind {
    name: "bytecode",
    options: &["opt-level=", "passes=", "block="],
    checks_own_options: false,
    run,
};

/// The pipeline the header asks for, with verify-each switched on.
fn pipeline(file: &TestFile<'_>) -> Result<PassManager, Failure> {
    let mut path = default_config_path();
    let mut opt_level = None;
    let mut block = None;
    for option in &file.options {
        if let Some(value) = option.strip_prefix("passes=") {
            let dir = file.path.parent().unwrap_or(Path::new("."));
            path = dir.join(value);
        } else if let Some(value) = option.strip_prefix("opt-level=") {
            let level = value
                .parse()
                .ok()
                .filter(|level| *level <= MAX_OPT_LEVEL)
                .ok_or_else(|| {
                    Failure::new(format!(
                        "`opt-level` expects 0 to {MAX_OPT_LEVEL}, got `{value}`"
                    ))
                })?;
            opt_level = Some(level);
        } else if let Some(value) = option.strip_prefix("block=") {
            let b = value.parse().map_err(|_| {
                Failure::new(format!(
                    "`block` expects a non-negative integer, got `{value}`"
                ))
            })?;
            block = Some(b);
        }
    }
    let mut config = PipelineConfig::load(&path).map_err(|err| {
        Failure::new(format!(
            "cannot load `{}`\n\n{}",
            path.display(),
            indent(&relay_syntax::render_plain(&err))
        ))
    })?;
    if let Some(level) = opt_level {
        config.opt_level = level;
    }
    // `block=N`: `alter_op_layout`'s channel block (0: convolutions stay NCHW, to test the NCHW
    // kernels).
    if let Some(b) = block {
        config.options.push(relay_passes::config::OptionSetting {
            pass: "alter_op_layout",
            option: "block",
            value: relay_passes::OptionValue::Int(b),
        });
    }
    Ok(PassManager::from_config(&config).verify_each(true))
}

/// The bytecode of every function of `exe`, in function index order, one blank line between
/// functions.
pub fn print(exe: &Executable) -> String {
    let listings: Vec<String> = exe.functions.iter().map(ToString::to_string).collect();
    listings.join("\n")
}

/// Parses and type-checks the file and lowers it with the pipeline its header asks for: the
/// module the VM compiles and whose primitive functions are the kernels.
pub(crate) fn lower(file: &TestFile<'_>) -> Result<Module, Failure> {
    let manager = pipeline(file)?;
    let module = parse_and_check(file)?;
    let (lowered, _) = manager.run(module).map_err(|err| {
        Failure::new(format!(
            "the pipeline fails\n\n{}",
            indent(&err.to_string())
        ))
    })?;
    Ok(lowered)
}

fn run(file: &TestFile<'_>) -> Result<(), Failure> {
    let lowered = lower(file)?;
    let exe = relay_vm::compile(&lowered).map_err(|err| {
        Failure::new(format!(
            "the lowered module does not compile to bytecode\n\n{}",
            indent(&relay_syntax::render_plain(&err))
        ))
    })?;
    let printed = print(&exe);
    exe.validate().map_err(|err| {
        Failure::new(format!(
            "the compiled bytecode is malformed: {err}\n\nbytecode:\n{}",
            indent(&printed)
        ))
    })?;
    checks::printed_ir(file, &printed, "the printed bytecode")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::run_file;

    const PROGRAM: &str = "#[version = \"0.0.5\"]\n\
                           def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, %x)) }\n";

    fn run(text: &str) -> Result<(), crate::Failure> {
        run_file(
            &crate::ir_tests_dir().join("bytecode/generated.relay"),
            text,
        )
    }

    #[test]
    fn directives_are_checked_against_the_printed_bytecode() {
        let text = format!(
            "// test bytecode\n{PROGRAM}// check: VMFunc main(%x) registers=\n\
             // check: invoke_packed PackedFunc[0]\n// check: ret\n"
        );
        run(&text).unwrap();
        let text = format!("// test bytecode\n{PROGRAM}// check: tail_invoke\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("the printed bytecode"), "{err}");
        assert!(err.message().contains("VMFunc main(%x)"), "{err}");
    }

    #[test]
    fn output_blocks_are_compared() {
        let text = format!("// test bytecode\n{PROGRAM}// output:\n// VMFunc main(%x)\n");
        let err = run(&text).unwrap_err();
        assert!(
            err.message()
                .contains("differs from the `// output:` block"),
            "{err}"
        );
    }

    #[test]
    fn functions_are_separated_by_one_blank_line() {
        let program = "#[version = \"0.0.5\"]\n\
                       def @f(%x: Tensor[(2), float32]) { %x }\n\
                       def @main(%x: Tensor[(2), float32]) { @f(%x) }\n";
        let module = relay_syntax::parse(program, "y.relay").unwrap();
        relay_types::check_module(&module).unwrap();
        let manager = crate::test_pipeline::default_pipeline().unwrap();
        let (lowered, _) = manager.run(module).unwrap();
        let exe = relay_vm::compile(&lowered).unwrap();
        let printed = super::print(&exe);
        assert_eq!(printed.matches("VMFunc ").count(), exe.functions.len());
        assert_eq!(
            printed.matches("\n\nVMFunc ").count(),
            exe.functions.len() - 1
        );
        assert!(printed.starts_with("VMFunc "), "{printed}");
        assert!(
            printed.ends_with('\n') && !printed.ends_with("\n\n"),
            "{printed}"
        );
        assert!(!printed.contains("\n\n\n"), "{printed}");
    }

    #[test]
    fn a_test_without_expectations_is_a_failure() {
        if crate::golden::blessing() {
            return;
        }
        let err = run(&format!("// test bytecode\n{PROGRAM}")).unwrap_err();
        assert!(
            err.message().contains("needs filecheck directives"),
            "{err}"
        );
        assert!(err.message().contains("VMFunc main"), "{err}");
    }

    #[test]
    fn options_are_checked() {
        let text = format!("// test bytecode opt-level=9\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(err.message().contains("`opt-level` expects"), "{err}");
        let text = format!("// test bytecode jit\n{PROGRAM}// check: x\n");
        let err = run(&text).unwrap_err();
        assert!(
            err.message().contains("valid options: opt-level=, passes="),
            "{err}"
        );
        let text = format!("// test bytecode passes=no_such.toml\n{PROGRAM}// check: x\n");
        let err = run_file(Path::new("/nonexistent/y.relay"), &text).unwrap_err();
        assert!(err.message().contains("cannot load"), "{err}");
    }

    #[test]
    fn opt_level_0_still_lowers_to_bytecode() {
        let text = format!("// test bytecode opt-level=0\n{PROGRAM}// check: VMFunc main\n");
        run(&text).unwrap();
    }

    #[test]
    fn ill_typed_programs_fail() {
        let text = "// test bytecode\n#[version = \"0.0.5\"]\n\
                    def @main() { add(1, 2f) }\n// check: x\n";
        let err = run(text).unwrap_err();
        assert!(err.message().contains("does not type-check"), "{err}");
    }

    #[test]
    fn an_unlowered_module_does_not_compile() {
        // Without the required passes (no fusion, no ANF) the compiler must refuse the module
        // with a typed error, which the harness reports.
        let dir = std::env::temp_dir().join(format!("relay-test-bytecode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("nothing.toml"),
            "[pipeline]\nopt_level = 2\npasses = [\"eliminate_dead_code\"]\n",
        )
        .unwrap();
        let text = format!("// test bytecode passes=nothing.toml\n{PROGRAM}// check: x\n");
        let result = run_file(&dir.join("y.relay"), &text);
        let _ = std::fs::remove_dir_all(&dir);
        let err = result.unwrap_err();
        assert!(
            err.message().contains("does not compile to bytecode"),
            "{err}"
        );
    }
}
