//! The corpus property over every `.relay` program outside `ir-tests/`: the repository's own
//! (examples, benchmark programs, ...) and the shared conformance programs. Each parses,
//! re-parses from its printed text to a structurally equal module, and prints to a fixpoint.
//! One trial per file.

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
}
