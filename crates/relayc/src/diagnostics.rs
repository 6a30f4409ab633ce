//! Writing diagnostics and errors to stderr: miette's colored graphical report on a terminal,
//! the plain golden-file rendering (`relay::render_plain`) when stderr is redirected or
//! `NO_COLOR` is set.

use std::fmt;
use std::io::{self, IsTerminal, Write};

use miette::{Diagnostic, MietteHandlerOpts, ReportHandler};

/// Whether to draw reports with colors for a terminal.
fn use_color() -> bool {
    // See https://no-color.org: any non-empty value disables color.
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && io::stderr().is_terminal()
}

/// Renders a diagnostic the way the command line shows it.
fn render(diagnostic: &dyn Diagnostic) -> String {
    if !use_color() {
        return relay::render_plain(diagnostic);
    }

    /// Adapts a miette report handler to `Display`.
    struct Colored<'a>(&'a dyn Diagnostic);

    impl fmt::Display for Colored<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let handler = MietteHandlerOpts::new().color(true).unicode(true).build();
            handler.debug(self.0, f)
        }
    }

    let mut out = String::new();
    if fmt::write(&mut out, format_args!("{}", Colored(diagnostic))).is_err() {
        return relay::render_plain(diagnostic);
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Writes a diagnostic report to stderr. A failed write is ignored: stderr is the last place
/// left to report anything.
pub fn report_diagnostic(diagnostic: &dyn Diagnostic) {
    let text = render(diagnostic);
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// Writes the report of a library error to stderr: each kernel that cannot be compiled on its
/// own, anything else as one report.
pub fn report_relay_error(error: &relay::Error) {
    match error {
        relay::Error::Kernel { failures } => {
            for failure in failures {
                report_diagnostic(failure);
            }
        }
        other => report_diagnostic(other),
    }
}

/// Writes a one-line `error: ...` message to stderr, ignoring a failed write.
pub fn report_error(message: fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "error: {message}");
}
