//! The VM's errors: compiling the lowered IR to bytecode ([`CompileError`]) and running it
//! ([`VmError`]). Both are typed, name the function, and render as miette diagnostics.

use std::fmt;

use miette::Diagnostic;
use relay_ir::Span;

use crate::bytecode::SourceLocation;

/// The lowered module has something the bytecode compiler cannot translate (it did not go
/// through the required passes, or uses a form the VM has no instruction for).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Diagnostic)]
#[error("cannot compile `@{function}` to bytecode: {message}")]
#[diagnostic(code(relay::vm::compile))]
pub struct CompileError {
    /// The global function being compiled.
    pub function: String,
    /// What could not be compiled.
    pub message: String,
    /// `file:line:column` of the expression, when the module has source text.
    pub location: Option<String>,
}

/// The kinds of run-time error of the VM, each with its own `relay::vm::*` code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VmErrorKind {
    /// No clause of a `match` matched (`relay::vm::no_match`).
    NoMatch,
    /// More call frames than `max_frames` (`relay::vm::recursion_limit`).
    RecursionLimit,
    /// A kernel failed: e.g. integer division by zero, or arguments it does not accept
    /// (`relay::vm::kernel`).
    Kernel,
    /// A storage or tensor could not be allocated (`relay::vm::alloc`).
    Alloc,
    /// The entry function does not exist (`relay::vm::unknown_function`).
    UnknownFunction,
    /// The entry function got the wrong number of arguments (`relay::vm::arity`).
    Arity,
    /// An entry argument does not fit its parameter (`relay::vm::bad_argument`).
    BadArgument,
    /// A register held a value of the wrong kind for an instruction; only malformed
    /// executables get here (`relay::vm::bad_value`).
    BadValue,
    /// The options' [`crate::interrupt::Interrupt`] stopped the run
    /// (`relay::vm::interrupted`).
    Interrupted,
}

impl VmErrorKind {
    /// The diagnostic code.
    pub fn code(self) -> &'static str {
        match self {
            VmErrorKind::NoMatch => "relay::vm::no_match",
            VmErrorKind::RecursionLimit => "relay::vm::recursion_limit",
            VmErrorKind::Kernel => "relay::vm::kernel",
            VmErrorKind::Alloc => "relay::vm::alloc",
            VmErrorKind::UnknownFunction => "relay::vm::unknown_function",
            VmErrorKind::Arity => "relay::vm::arity",
            VmErrorKind::BadArgument => "relay::vm::bad_argument",
            VmErrorKind::BadValue => "relay::vm::bad_value",
            VmErrorKind::Interrupted => "relay::vm::interrupted",
        }
    }
}

/// A run-time error of the VM: what went wrong, in which function, and where in the source.
///
/// `Display`: "recursion limit exceeded (1000000 frames) in `@f` at model.relay:3:5".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmError {
    /// What kind of error.
    pub kind: VmErrorKind,
    /// What went wrong.
    pub message: String,
    /// The function whose code was running (without `@`), when known.
    pub function: Option<String>,
    /// `file:line:column` of the instruction's source, when known.
    pub location: Option<String>,
    /// The instruction's source as a byte range in the text of the module the executable was
    /// compiled from, when known (not for an executable loaded from a file): where a
    /// diagnostic points.
    pub span: Option<Span>,
}

impl VmError {
    /// An error of `kind` with `message`, not yet placed in a function.
    pub fn new(kind: VmErrorKind, message: impl Into<String>) -> VmError {
        VmError {
            kind,
            message: message.into(),
            function: None,
            location: None,
            span: None,
        }
    }

    /// The same error, placed in `function` at `location` (unless it already is placed).
    pub fn at(mut self, function: &str, location: Option<&SourceLocation>) -> VmError {
        if self.function.is_none() {
            self.function = Some(function.to_owned());
            self.location = location.map(|l| l.text.clone());
            self.span = location.and_then(|l| l.span);
        }
        self
    }
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(function) = &self.function {
            write!(f, " in `@{function}`")?;
        }
        if let Some(location) = &self.location {
            write!(f, " at {location}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VmError {}

impl Diagnostic for VmError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.kind.code()))
    }
}
