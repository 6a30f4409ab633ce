//! The error a failing test returns: a message written for the person reading `cargo test`
//! output.

use std::fmt;

/// Why a test failed. `Debug` prints the message verbatim (test harnesses show failures with
/// `{:?}`), so multi-line explanations and diffs stay readable.
pub struct Failure {
    message: String,
}

impl Failure {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same failure with `context` (e.g. the file name) in front of the message.
    pub fn context(self, context: impl fmt::Display) -> Failure {
        Failure {
            message: format!("{context}: {}", self.message),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// Indents `text` by four spaces, so quoted program text stands out from the message.
pub(crate) fn indent(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if !line.is_empty() {
            out.push_str("    ");
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}
