//! The Relay reference interpreter (API placeholder; implementation pending).

use relay_ir::{Module, Value};

/// Settings of a run.
#[derive(Clone, Debug)]
pub struct InterpOptions {
    /// The most call frames live at once; deeper recursion is "recursion limit exceeded".
    pub max_frames: usize,
}

impl Default for InterpOptions {
    fn default() -> Self {
        InterpOptions {
            max_frames: 1_000_000,
        }
    }
}

/// A run-time error with the function and source location where it happened.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("run-time error")]
pub struct RunError {}

/// Runs global function `entry` of a type-checked module on `args`.
pub fn run(
    _module: &Module,
    _entry: &str,
    _args: Vec<Value>,
    _opts: &InterpOptions,
) -> Result<Value, RunError> {
    Err(RunError {})
}
