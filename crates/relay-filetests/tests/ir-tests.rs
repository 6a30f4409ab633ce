//! One libtest trial per `.relay` file under the repository's `ir-tests/` directory; the file
//! format is in `docs/ir-tests.md`, the logic in this crate's library.

use std::path::Path;

fn ir_test(path: &Path, text: String) -> datatest_stable::Result<()> {
    relay_filetests::run_file(path, &text)?;
    Ok(())
}

fn root() -> String {
    relay_filetests::ir_tests_dir().display().to_string()
}

datatest_stable::harness! {
    { test = ir_test, root = root(), pattern = r"\.relay$" },
}
