//! Run-time errors: what went wrong, in which global function, and where in the source.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceSpan};
use relay_ir::{Module, OpError, Span, Symbol};

/// The kinds of run-time error, each with its own `relay::run::*` code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// No clause of a `match` or `match?` matched the value (`relay::run::no_match`).
    NoMatch,
    /// An operator's evaluation failed, e.g. integer division by zero (`relay::run::operator`).
    Operator,
    /// An operator has no reference evaluation (`relay::run::unsupported_operator`).
    UnsupportedOperator,
    /// More call frames were live than `--max-frames` allows (`relay::run::recursion_limit`).
    RecursionLimit,
    /// Something that is not a function was called (`relay::run::not_a_function`).
    NotAFunction,
    /// A function or constructor was called with the wrong number of arguments
    /// (`relay::run::arity`).
    Arity,
    /// The entry function or a called global does not exist (`relay::run::unknown_function`).
    UnknownFunction,
    /// An entry argument does not fit its parameter's annotation (`relay::run::bad_argument`).
    BadArgument,
    /// A value of the wrong kind reached an expression, e.g. a tuple as an `if` condition; only
    /// ill-typed modules get here (`relay::run::bad_value`).
    BadValue,
    /// A variable was used where it is not bound; only ill-formed modules get here
    /// (`relay::run::unbound_variable`).
    UnboundVariable,
}

impl RunErrorKind {
    /// The diagnostic code.
    pub fn code(self) -> &'static str {
        match self {
            RunErrorKind::NoMatch => "relay::run::no_match",
            RunErrorKind::Operator => "relay::run::operator",
            RunErrorKind::UnsupportedOperator => "relay::run::unsupported_operator",
            RunErrorKind::RecursionLimit => "relay::run::recursion_limit",
            RunErrorKind::NotAFunction => "relay::run::not_a_function",
            RunErrorKind::Arity => "relay::run::arity",
            RunErrorKind::UnknownFunction => "relay::run::unknown_function",
            RunErrorKind::BadArgument => "relay::run::bad_argument",
            RunErrorKind::BadValue => "relay::run::bad_value",
            RunErrorKind::UnboundVariable => "relay::run::unbound_variable",
        }
    }

    /// The text of the label under the offending expression.
    fn label(self) -> &'static str {
        match self {
            RunErrorKind::NoMatch => "no clause matches the value of this match",
            RunErrorKind::Operator => "in this operator call",
            RunErrorKind::UnsupportedOperator => "this operator cannot be evaluated",
            RunErrorKind::RecursionLimit => "this call exceeds the frame limit",
            RunErrorKind::NotAFunction => "this is called but is not a function",
            RunErrorKind::Arity => "in this call",
            RunErrorKind::UnknownFunction => "not defined",
            RunErrorKind::BadArgument => "this parameter",
            RunErrorKind::BadValue => "this expression got a value of the wrong kind",
            RunErrorKind::UnboundVariable => "not bound here",
        }
    }
}

/// A run-time error with the global function and the source location where it happened.
///
/// Its `Display` form is self-contained ("no match clause matched in `@hd` at
/// prelude.relay:60:3"); rendered as a miette diagnostic it also shows the source line. It is
/// one pointer wide, so results carrying it stay small on the interpreter's hot path.
#[derive(Debug)]
pub struct RunError(Box<Details>);

/// What a [`RunError`] holds.
#[derive(Debug)]
struct Details {
    kind: RunErrorKind,
    message: String,
    function: Option<String>,
    location: Option<String>,
    span: Option<Span>,
    help: Option<String>,
    src: Option<NamedSource<Arc<str>>>,
    /// The operator's own error, for [`RunErrorKind::Operator`].
    op_error: Option<OpError>,
}

impl RunError {
    /// An error of `kind` with `message`, in `function`, at `span` of `module`'s source.
    pub fn new(
        kind: RunErrorKind,
        message: impl Into<String>,
        module: &Module,
        function: Option<Symbol>,
        span: Span,
    ) -> RunError {
        let span = (!span.is_dummy()).then_some(span);
        let source = module.source.as_ref();
        let location = match (source, span) {
            (Some(source), Some(span)) => Some(source.location(span)),
            _ => None,
        };
        let src = match (source, span) {
            (Some(source), Some(_)) => Some(NamedSource::new(
                source.name.clone(),
                Arc::<str>::from(source.text.as_str()),
            )),
            _ => None,
        };
        RunError(Box::new(Details {
            kind,
            message: message.into(),
            function: function.map(|f| f.as_str().to_owned()),
            location,
            span,
            help: None,
            src,
            op_error: None,
        }))
    }

    /// The same error carrying the operator's own error, so that callers can match its kind.
    pub fn with_op_error(mut self, error: OpError) -> RunError {
        self.0.op_error = Some(error);
        self
    }

    /// The operator's error behind a [`RunErrorKind::Operator`] error, e.g.
    /// [`OpError::Value`] for an integer division by zero.
    pub fn op_error(&self) -> Option<&OpError> {
        self.0.op_error.as_ref()
    }

    /// The same error with advice attached.
    pub fn with_help(mut self, help: impl Into<String>) -> RunError {
        self.0.help = Some(help.into());
        self
    }

    /// What kind of error it is.
    pub fn kind(&self) -> RunErrorKind {
        self.0.kind
    }

    /// What went wrong, e.g. "operator `divide`: integer division by zero".
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The global function whose code was running (without `@`), when known.
    pub fn function(&self) -> Option<&str> {
        self.0.function.as_deref()
    }

    /// `file:line:column` of the offending expression, when the module has source text.
    pub fn location(&self) -> Option<&str> {
        self.0.location.as_deref()
    }

    /// The offending expression's span, when it has one.
    pub fn span(&self) -> Option<Span> {
        self.0.span
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)?;
        if let Some(function) = &self.0.function {
            write!(f, " in `@{function}`")?;
        }
        if let Some(location) = &self.0.location {
            write!(f, " at {location}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RunError {}

impl Diagnostic for RunError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.0.kind.code()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display + 'a>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.0.src.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.0.span?;
        self.0.src.as_ref()?;
        let ss = SourceSpan::new((span.lo as usize).into(), span.len());
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some(self.0.kind.label().to_owned()),
            ss,
        ))))
    }
}
