//! The library's one error type: every way parsing, compiling or running a program through the
//! [`crate`] API can fail, each variant typed and rendered as a miette diagnostic.

use std::fmt;

use miette::Diagnostic;
use relay_runtime::npy::{self, NpyError};
use relay_runtime::{DType, NDArrayError};
use relay_vm::{CompileError, ExeFileError, VmError};

use crate::KernelFailure;

/// What went wrong in the library API.
///
/// Program errors (parse, type and pass errors) keep their spans and source text, so
/// `miette::Report::from(error)` shows them against the program as `relayc check` does.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[non_exhaustive]
pub enum Error {
    /// The program does not parse or does not type-check ([`crate::parse`]), or no longer
    /// type-checks after its parameters were bound.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Program(Reported),
    /// A pass of the pipeline failed on the program.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Pass(Reported),
    /// A value given for a parameter of the entry function ([`crate::Compiler::params`]) does
    /// not fit its type.
    #[error("cannot bind parameter `%{name}` of `@{entry}`: expected `{expected}`, got {got}")]
    #[diagnostic(
        code(relay::api::bind_params),
        help("a bound parameter becomes a constant of the value's dtype and shape")
    )]
    BindParams {
        /// The parameter's name (without `%`).
        name: String,
        /// The entry function (without `@`).
        entry: String,
        /// The parameter's type.
        expected: String,
        /// What was given ("a float64 tensor of shape (4, 8)").
        got: String,
    },
    /// Parameters are bound by name but the entry function has several with that name.
    #[error("cannot bind parameter `%{name}`: `@{entry}` has {count} parameters named `%{name}`")]
    #[diagnostic(code(relay::api::ambiguous_param))]
    AmbiguousParam {
        /// The parameter's name.
        name: String,
        /// The entry function.
        entry: String,
        /// How many parameters have the name.
        count: usize,
    },
    /// Parameters were given but the module has no entry function to bind them to.
    #[error("cannot bind parameters: the module has no function `@{entry}`")]
    #[diagnostic(code(relay::api::no_entry))]
    NoEntry {
        /// The entry function looked for.
        entry: String,
    },
    /// An ONNX model given as a decoder with past to wrap in a generation loop
    /// ([`crate::generation_loop`]) lacks what one has.
    #[error("not a decoder with past: {reason}")]
    #[diagnostic(
        code(relay::api::not_a_decoder),
        help(
            "a decoder with past, as Hugging Face's exporters write one, has inputs `input_ids`, \
             `attention_mask`, `past_key_values.N.key` and `.value` ([batch, heads, past, head \
             width]) and outputs `logits`, `present.N.key` and `.value`"
        )
    )]
    NotADecoder {
        /// What is missing or wrong.
        reason: String,
    },
    /// The lowered module could not be compiled to bytecode.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Compile(#[from] CompileError),
    /// Kernels of the executable could not be JIT-compiled.
    #[error("{}", kernel_summary(failures))]
    #[diagnostic(code(relay::api::kernels))]
    Kernel {
        /// Every kernel that failed, with why.
        #[related]
        failures: Vec<KernelFailure>,
    },
    /// An executable file could not be saved or loaded ([`crate::Executable::save`],
    /// [`crate::Executable::load`]): an I/O error, or a file that is not a valid executable
    /// (the error names the section and byte offset).
    #[error(transparent)]
    #[diagnostic(transparent)]
    File(#[from] ExeFileError),
    /// Running the executable failed (including bad arguments to [`crate::Vm::invoke`]).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Run(#[from] VmError),
    /// A tensor could not be built (a negative dimension, data of the wrong length).
    #[error(transparent)]
    #[diagnostic(code(relay::api::tensor))]
    Tensor(#[from] NDArrayError),
    /// A tensor's elements were read as the wrong Rust type ([`crate::Tensor::to_vec`]).
    #[error("the tensor holds {got} elements, not {expected}")]
    #[diagnostic(code(relay::api::dtype))]
    DType {
        /// The dtype of the Rust type asked for.
        expected: DType,
        /// The tensor's dtype.
        got: DType,
    },
    /// A value that is not a tensor was converted to a [`crate::Tensor`].
    #[error("expected a tensor, got {got}")]
    #[diagnostic(code(relay::api::not_a_tensor))]
    NotATensor {
        /// What it is ("a tuple").
        got: &'static str,
    },
    /// A tensor of several (or no) elements was read as one ([`crate::Tensor::to_scalar`]).
    #[error(
        "expected a tensor of one element, got one of shape {}",
        npy::shape_tuple(shape)
    )]
    #[diagnostic(code(relay::api::not_a_scalar))]
    NotAScalar {
        /// The tensor's shape.
        shape: Vec<i64>,
    },
    /// Reading or writing a `.npy` file failed.
    #[error(transparent)]
    #[diagnostic(code(relay::api::npy))]
    Npy(#[from] NpyError),
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<miette::Report> for Error {
    /// A program error (parse or type errors, as [`crate::parse`] returns them).
    fn from(report: miette::Report) -> Error {
        Error::Program(Reported(report))
    }
}

/// "kernel k: ..." for one failure, "3 kernels failed to compile: a, b, c" for several.
fn kernel_summary(failures: &[KernelFailure]) -> String {
    match failures {
        [one] => one.error().to_string(),
        many => {
            let list: Vec<String> = many.iter().map(|f| f.error().to_string()).collect();
            format!(
                "{} kernels failed to compile: {}",
                many.len(),
                list.join("; ")
            )
        }
    }
}

/// A diagnostic with its source text attached (a `miette::Report`), held in an [`Error`]. It
/// renders exactly as the report does: same message, code, labels and help.
pub struct Reported(pub miette::Report);

impl Reported {
    /// The report.
    pub fn report(&self) -> &miette::Report {
        &self.0
    }

    /// The report, taken out.
    pub fn into_report(self) -> miette::Report {
        self.0
    }
}

impl fmt::Debug for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Reported {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl Diagnostic for Reported {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.code()
    }

    fn severity(&self) -> Option<miette::Severity> {
        self.0.severity()
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.help()
    }

    fn url<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0.url()
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.0.source_code()
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        self.0.labels()
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        self.0.related()
    }

    fn diagnostic_source(&self) -> Option<&dyn Diagnostic> {
        self.0.diagnostic_source()
    }
}
