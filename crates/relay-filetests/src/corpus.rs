//! The corpus property: every `.relay` program in the repository outside `ir-tests/`, its
//! conformance programs among them, parses, re-parses from its printed text to a
//! structurally equal module, and prints to a fixpoint.

use std::path::{Path, PathBuf};

use crate::{Failure, round_trip};

/// The regular expression (matched against paths relative to the repository root) selecting
/// the repository's programs: every `.relay` file except those under `ir-tests/` (the harness
/// runs those), the generated model zoo (`benches/models/out/`, gigabytes of networks that
/// `benches/run.sh models` writes), any `target/` directory, and hidden directories.
pub const REPOSITORY_PATTERN: &str =
    r"^(?!ir-tests/)(?!benches/models/out/)(?!(?:.*/)?target/)(?!(?:.*/)?\.).*\.relay$";

/// The repository root (two levels above this crate's directory).
pub fn repository_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    match manifest_dir.parent().and_then(Path::parent) {
        Some(root) => root.to_path_buf(),
        None => manifest_dir.join("../.."),
    }
}

/// The repository's conformance programs: `conformance/` at its root.
pub fn conformance_dir() -> PathBuf {
    repository_root().join("conformance")
}

/// Fails with a clear message when the repository's conformance directory is missing: the
/// corpus must never pass by silently checking nothing.
pub fn require_conformance_dir() -> Result<PathBuf, Failure> {
    let dir = conformance_dir();
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(Failure::new(format!(
            "the conformance programs are missing: expected a directory at `{}`",
            dir.display()
        )))
    }
}

/// Checks one program: it parses, round-trips and reaches a print fixpoint.
pub fn check_program(path: &Path, text: &str) -> Result<(), Failure> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let module = round_trip::parse(text, &name)?;
    round_trip::check(&module, &name)?;
    Ok(())
}
