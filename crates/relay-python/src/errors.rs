//! relayc's exceptions: one class per stage, all under `relayc.Error`, each carrying the
//! diagnostic's code (`relay::vm::bad_argument`) and its rendered text (what `relayc` prints,
//! without colours).

use miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{PyTypeInfo, create_exception};

create_exception!(
    relayc,
    Error,
    PyException,
    "Every error relayc raises. `code` is the diagnostic's code (`relay::vm::bad_argument`) or \
     None; `rendered` is the diagnostic as the `relayc` command line prints it."
);
create_exception!(relayc, ParseError, Error, "Relay text that does not parse.");
create_exception!(
    relayc,
    TypeCheckError,
    Error,
    "A program that does not type-check."
);
create_exception!(
    relayc,
    CompileError,
    Error,
    "A program, its parameters or its pass pipeline that cannot be compiled (a pass, a \
     kernel, the bytecode compiler, an ONNX model the importer refuses)."
);
create_exception!(
    relayc,
    RunError,
    Error,
    "A run that failed: wrong inputs (names the parameter, the type it expects and what was \
     given), a failed kernel, a recursion limit, a `match` with no clause."
);
create_exception!(
    relayc,
    FileError,
    Error,
    "A file that cannot be read or written, or an executable file that is corrupt."
);

/// The stage an error belongs to: its exception class.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stage {
    Parse,
    TypeCheck,
    Compile,
    Run,
    File,
    /// Misuse of the API itself (a VM used by two threads at once).
    Usage,
}

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("ParseError", py.get_type::<ParseError>())?;
    m.add("TypeCheckError", py.get_type::<TypeCheckError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add("FileError", py.get_type::<FileError>())?;
    Ok(())
}

/// The diagnostic as an exception of `stage`'s class.
pub(crate) fn raise(py: Python<'_>, stage: Stage, diagnostic: &dyn Diagnostic) -> PyErr {
    let code = diagnostic.code().map(|c| c.to_string());
    exception(py, stage, code, render(diagnostic))
}

/// An exception of `stage`'s class with `message` and no diagnostic code.
pub(crate) fn usage(py: Python<'_>, stage: Stage, message: impl Into<String>) -> PyErr {
    exception(py, stage, None, message.into())
}

fn exception(py: Python<'_>, stage: Stage, code: Option<String>, rendered: String) -> PyErr {
    let class = match stage {
        Stage::Parse => ParseError::type_object(py),
        Stage::TypeCheck => TypeCheckError::type_object(py),
        Stage::Compile => CompileError::type_object(py),
        Stage::Run => RunError::type_object(py),
        Stage::File => FileError::type_object(py),
        Stage::Usage => Error::type_object(py),
    };
    let err = PyErr::from_type(class, rendered.clone());
    let value = err.value(py);
    // Setting attributes on a fresh exception instance cannot fail but for memory.
    let _ = value.setattr("code", code);
    let _ = value.setattr("rendered", rendered);
    err
}

/// A `relay::Error` as the exception of its stage.
pub(crate) fn from_relay(py: Python<'_>, error: &relay::Error) -> PyErr {
    let stage = match error {
        relay::Error::Program(_) => Stage::TypeCheck,
        relay::Error::Pass(_)
        | relay::Error::BindParams { .. }
        | relay::Error::AmbiguousParam { .. }
        | relay::Error::NoEntry { .. }
        | relay::Error::Compile(_)
        | relay::Error::Kernel { .. } => Stage::Compile,
        relay::Error::File(_) | relay::Error::Npy(_) => Stage::File,
        _ => Stage::Run,
    };
    raise(py, stage, error)
}

/// The diagnostic as `relayc` prints it, without colours.
pub(crate) fn render(diagnostic: &dyn Diagnostic) -> String {
    let mut out = String::new();
    let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor());
    match handler.render_report(&mut out, diagnostic) {
        Ok(()) => out.trim_end().to_owned(),
        Err(_) => diagnostic.to_string(),
    }
}
