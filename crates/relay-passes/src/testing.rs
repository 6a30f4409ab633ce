//! Helpers for the passes' unit tests: parse and type-check a program, run passes through the
//! pass manager with the verifier on, print and re-check the result, run `@main`.

use relay_ir::{Module, PrintOptions, print_module};

use crate::{Pass, PassManager};

/// `text` parsed and type-checked.
pub(crate) fn parse_checked(text: &str) -> Module {
    let m = relay_syntax::parse(text, "test.relay").expect("the test program parses");
    relay_types::check_module(&m).expect("the test program type-checks");
    m
}

/// `module` after `passes` at `opt_level` (each verified when `verify`), with every
/// statistic the passes reported.
pub(crate) fn run_passes(
    passes: Vec<&'static dyn Pass>,
    opt_level: u32,
    module: Module,
    verify: bool,
) -> (Module, Vec<(String, i64)>) {
    let (module, timings) = PassManager::new(passes, opt_level)
        .verify_each(verify)
        .run(module)
        .expect("the passes succeed");
    let stats = timings.into_iter().flat_map(|t| t.stats).collect();
    (module, stats)
}

/// `text` after `pass` at opt level 2, verified, printed; the print re-parses and type-checks.
pub(crate) fn run_pass_printed(pass: &'static dyn Pass, text: &str) -> String {
    let (out, _) = run_passes(vec![pass], 2, parse_checked(text), true);
    printed(&out)
}

/// `module` printed; the text must re-parse and type-check.
pub(crate) fn printed(module: &Module) -> String {
    let text = print_module(module, &PrintOptions::default());
    let again = relay_syntax::parse(&text, "printed.relay").expect("the output re-parses");
    relay_types::check_module(&again).expect("the output type-checks");
    text
}

/// The result of `@main()` in the interpreter, debug-formatted for comparisons.
pub(crate) fn eval(m: &Module) -> String {
    let v = relay_interp::run(m, "main", vec![], &Default::default()).expect("@main runs");
    format!("{v:?}")
}
