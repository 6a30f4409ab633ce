//! Helpers shared by the `relayc` command-line tests: temporary files and running the built
//! binary. Each test target uses a subset, hence `dead_code` is allowed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file under the system temporary directory, removed when dropped.
pub struct TempFile(PathBuf);

impl TempFile {
    /// A fresh path whose name ends with `name` and includes the process id and a counter (not
    /// created).
    pub fn path_for(name: &str) -> TempFile {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        TempFile(
            std::env::temp_dir().join(format!("relayc-test-{}-{n}-{name}", std::process::id())),
        )
    }

    /// Writes `text` to a fresh file whose name ends with `name`.
    pub fn new(name: &str, text: &str) -> TempFile {
        let file = TempFile::path_for(name);
        std::fs::write(&file.0, text).unwrap();
        file
    }

    /// The path as a command-line argument.
    pub fn arg(&self) -> &str {
        arg(&self.0)
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `relayc` with `args`, with colors off.
pub fn relayc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relayc"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// The exit code.
pub fn code(output: &Output) -> i32 {
    output.status.code().expect("relayc was killed by a signal")
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Standard output, which must be UTF-8.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// A path as a command-line argument.
pub fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Non-tail recursion 1000 deep (`@main` returns 1000).
pub const DEEP: &str = r#"#[version = "0.0.5"]
def @count(%n: int64) -> int64 {
  if (%n == 0i64) { 0i64 } else { 1i64 + @count(%n - 1i64) }
}
def @main() -> int64 { @count(1000i64) }
"#;
