//! The corpus property over every `.relay` program outside `ir-tests/`: the repository's own
//! (examples, benchmark programs, its conformance programs, ...). (A datatest target needs a
//! trial in every directory it scans, so the shared conformance programs, run when they are
//! beside the repository, are parsed and type-checked by `relay-types`'s tests and run by the
//! VM's corpus and `relayc`'s tests instead.) Each parses,
//! re-parses from its printed text to a structurally equal module, and prints to a fixpoint.
//! One trial per file.
//!
//! The pass-preservation property (`relay_filetests::preservation`) runs over the programs
//! that have a `@main` to compare: `ir-tests` (but `ir-tests/kernels`), `benches/programs` and
//! the conformance programs, one trial per file with every pass (alone, then the default
//! pipeline) inside it.

use std::path::Path;

use relay_filetests::corpus;

fn repository(path: &Path, text: String) -> datatest_stable::Result<()> {
    corpus::check_program(path, &text)
        .map_err(|failure| failure.context(relay_filetests::display_path(path)))?;
    Ok(())
}

fn conformance(path: &Path, text: String) -> datatest_stable::Result<()> {
    corpus::check_program(path, &text)
        .map_err(|failure| failure.context(relay_filetests::display_path(path)))?;
    Ok(())
}

fn preserved(path: &Path, text: String) -> datatest_stable::Result<()> {
    relay_filetests::preservation::check_program(path, &text)
        .map_err(|failure| failure.context(relay_filetests::display_path(path)))?;
    Ok(())
}

fn ir_tests_root() -> String {
    relay_filetests::ir_tests_dir().display().to_string()
}

fn bench_programs_root() -> String {
    corpus::repository_root()
        .join("benches/programs")
        .display()
        .to_string()
}

/// The conformance directory; a missing one stops the run with a clear message instead of
/// passing by checking nothing.
fn conformance_root() -> String {
    match corpus::require_conformance_dir() {
        Ok(dir) => dir.display().to_string(),
        Err(failure) => {
            eprintln!("error: {failure}");
            std::process::exit(1);
        }
    }
}

fn repository_root() -> String {
    corpus::repository_root().display().to_string()
}

datatest_stable::harness! {
    { test = repository, root = repository_root(), pattern = corpus::REPOSITORY_PATTERN },
    { test = conformance, root = conformance_root(), pattern = r"\.relay$" },
    // The kernel filetests are left out: their realistic layer sizes take the interpreter
    // seconds per run, and they pin kernels, not passes.
    { test = preserved, root = ir_tests_root(), pattern = r"^(?!kernels/).*\.relay$" },
    { test = preserved, root = bench_programs_root(), pattern = r"\.relay$" },
    { test = preserved, root = conformance_root(), pattern = r"\.relay$" },
}
