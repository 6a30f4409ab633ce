//! The printer: canonical Relay text (placeholder signatures; implementation pending).

use crate::{Expr, Module};

/// What the printer adds beyond the program itself.
#[derive(Clone, Debug, Default)]
pub struct PrintOptions {
    /// Write `/* ty=... */` comments (needs checked types).
    pub show_types: bool,
}

/// Prints a whole module as canonical text, header included.
pub fn print_module(_module: &Module, _opts: &PrintOptions) -> String {
    String::new()
}

/// Prints one expression (with `free_var` lines for its free variables), header included.
pub fn print_expr(_expr: &Expr, _opts: &PrintOptions) -> String {
    String::new()
}
