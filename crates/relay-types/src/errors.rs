//! Type diagnostics: one error enum for the phase ([`TypeError`], codes `relay::type::*`), the
//! internal errors that mean a bug ([`InternalError`]), warnings ([`TypeWarning`]) and the
//! collection a failed check returns ([`TypeErrors`]). Detection lives in the checker;
//! rendering is miette's.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceSpan};
use relay_ir::{Module, OpError, Span};
use thiserror::Error;

/// The source span of `span`, or `None` for a synthesized node.
pub(crate) fn source_span(span: Span) -> Option<SourceSpan> {
    (!span.is_dummy()).then(|| SourceSpan::new((span.lo as usize).into(), span.len()))
}

/// The module's source text as miette reads it.
pub(crate) fn named_source(module: &Module) -> Option<NamedSource<Arc<str>>> {
    module
        .source
        .as_ref()
        .map(|s| NamedSource::new(s.name.clone(), Arc::<str>::from(s.text.as_str())))
}

/// One type error.
#[derive(Debug, Clone, Error, Diagnostic)]
pub enum TypeError {
    /// Two types that must be equal are not.
    #[error("expected `{expected}`, found `{found}`")]
    #[diagnostic(code("relay::type::mismatch"))]
    Mismatch {
        /// The type required here.
        expected: String,
        /// The type the expression has.
        found: String,
        /// What the offending expression is (the label).
        what: String,
        /// Where.
        #[label("{what}")]
        span: Option<SourceSpan>,
    },

    /// A type would have to contain itself.
    #[error("infinite type: `{expected}` cannot equal `{found}`, which contains it")]
    #[diagnostic(
        code("relay::type::infinite_type"),
        help("a value is used as if it contained itself; check the arguments of recursive calls")
    )]
    InfiniteType {
        /// The type required here.
        expected: String,
        /// The type the expression has.
        found: String,
        /// What the offending expression is (the label).
        what: String,
        /// Where.
        #[label("{what}")]
        span: Option<SourceSpan>,
    },

    /// A call with the wrong number of arguments.
    #[error("{callee} takes {expected} argument{}, got {found}", plural(*expected))]
    #[diagnostic(code("relay::type::arity"))]
    Arity {
        /// The callee, e.g. "`@f`" or "the function".
        callee: String,
        /// How many parameters it has.
        expected: usize,
        /// How many arguments the call passes.
        found: usize,
        /// The call.
        #[label("called with {found} argument{}", plural(*found))]
        span: Option<SourceSpan>,
        /// The callee's type.
        #[help]
        help: Option<String>,
    },

    /// A call of something that is not a function.
    #[error("expected a function, found `{found}`")]
    #[diagnostic(code("relay::type::not_a_function"))]
    NotAFunction {
        /// The callee's type.
        found: String,
        /// The callee.
        #[label("this is called but is not a function")]
        span: Option<SourceSpan>,
    },

    /// A projection past the end of a tuple.
    #[error("`{tuple}` has no field {index}")]
    #[diagnostic(code("relay::type::unknown_field"))]
    UnknownField {
        /// The tuple type.
        tuple: String,
        /// The field asked for.
        index: u32,
        /// How many fields the tuple has.
        count: usize,
        /// The projection.
        #[label("the tuple has {count} field{}", plural(*count))]
        span: Option<SourceSpan>,
    },

    /// A projection of something that is not a tuple.
    #[error("cannot take field {index} of `{found}`, which is not a tuple")]
    #[diagnostic(code("relay::type::not_a_tuple"))]
    NotATuple {
        /// The projected expression's type.
        found: String,
        /// The field asked for.
        index: u32,
        /// The projection.
        #[label("projection of a non-tuple")]
        span: Option<SourceSpan>,
    },

    /// An operator's type relation rejected its inputs.
    #[error("{error} in `{op}`")]
    #[diagnostic(code("relay::type::operator"))]
    Relation {
        /// The operator.
        op: &'static str,
        /// What the relation said, by kind.
        error: OpError,
        /// The call.
        #[label("in this call")]
        span: Option<SourceSpan>,
    },

    /// An operator without a type relation.
    #[error("operator `{op}` has no type relation (not supported)")]
    #[diagnostic(
        code("relay::type::unsupported_operator"),
        help("relayc type-checks the Tier 1 operators of its specification (SPEC §4)")
    )]
    NoRelation {
        /// The operator.
        op: &'static str,
        /// The call.
        #[label("called here")]
        span: Option<SourceSpan>,
    },

    /// An operator used as a first-class value.
    #[error("operator `{op}` used as a value is not supported")]
    #[diagnostic(
        code("relay::type::operator_value"),
        help("call the operator directly, or wrap the call in a function literal")
    )]
    OperatorValue {
        /// The operator.
        op: &'static str,
        /// Where it is used.
        #[label("used as a value")]
        span: Option<SourceSpan>,
    },

    /// An operator call whose input types never become known.
    #[error("cannot infer the input types of `{op}`")]
    #[diagnostic(
        code("relay::type::cannot_infer"),
        help("annotate the variables its arguments come from")
    )]
    UninferredInputs {
        /// The operator.
        op: &'static str,
        /// The inputs' types as far as they are known.
        inputs: String,
        /// The call.
        #[label("inputs: {inputs}")]
        span: Option<SourceSpan>,
    },

    /// A projection whose operand's type never becomes known.
    #[error("cannot infer the tuple type of this projection")]
    #[diagnostic(
        code("relay::type::cannot_infer"),
        help("annotate the variable the tuple comes from")
    )]
    UninferredProjection {
        /// The projection.
        #[label("the type of the projected value is unknown")]
        span: Option<SourceSpan>,
    },

    /// A variable whose type nothing determines.
    #[error("cannot infer the type of `{name}`")]
    #[diagnostic(code("relay::type::cannot_infer"), help("add a type annotation"))]
    Unresolved {
        /// The variable, e.g. `%x`.
        name: String,
        /// What is known of its type.
        known: String,
        /// Where it is bound.
        #[label("its type is `{known}`")]
        span: Option<SourceSpan>,
    },

    /// A compiler bug.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Internal(#[from] InternalError),
}

/// An internal error of the type checker: the IR broke an invariant the parser guarantees.
#[derive(Debug, Clone, Error, Diagnostic)]
#[error("internal error: {message} (this is a bug)")]
#[diagnostic(
    code("relay::type::internal"),
    help("please report it with the program that caused it")
)]
pub struct InternalError {
    /// What went wrong.
    pub message: String,
    /// Where, if known.
    #[label("here")]
    pub span: Option<SourceSpan>,
}

impl TypeError {
    /// The byte offset the error points at (for ordering).
    pub(crate) fn offset(&self) -> usize {
        self.labels()
            .and_then(|mut l| l.next())
            .map_or(0, |l| l.offset())
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The type errors of one module, rendered together against its source text.
#[derive(Debug, Error)]
#[error("{}", summary(&self.errors))]
pub struct TypeErrors {
    /// The module's source text, when it has one.
    pub src: Option<NamedSource<Arc<str>>>,
    /// The errors, in source order.
    pub errors: Vec<TypeError>,
}

fn summary(errors: &[TypeError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!("{} type errors", many.len()),
    }
}

impl Diagnostic for TypeErrors {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.errors.as_slice() {
            [one] => one.code(),
            _ => None,
        }
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.errors.as_slice() {
            [one] => one.help(),
            _ => None,
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self.errors.as_slice() {
            [one] => one.labels(),
            _ => None,
        }
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.src.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self.errors.as_slice() {
            [_] => None,
            many => Some(Box::new(many.iter().map(|e| e as &dyn Diagnostic))),
        }
    }
}

/// What a warning is about.
#[derive(Debug, Clone, Error, Diagnostic)]
pub enum Warning {
    /// A complete `match` that some value escapes.
    #[error("`match` does not cover `{missing}`")]
    #[diagnostic(
        code("relay::type::non_exhaustive_match"),
        severity(Warning),
        help(
            "add a clause for `{missing}` or a `_` clause; write `match?` if the value can never \
             be `{missing}`"
        )
    )]
    NonExhaustiveMatch {
        /// A value no clause matches, as a pattern.
        missing: String,
        /// The matched expression.
        #[label("`{missing}` is not matched")]
        span: Option<SourceSpan>,
    },
    /// A function partitioned for an external compiler (TVM's `PartitionGraph`, `Compiler=`),
    /// which relayc compiles as ordinary Relay.
    #[error("external compiler `{compiler}` is not used: {function} runs as ordinary Relay")]
    #[diagnostic(
        code("relay::type::external_compiler"),
        severity(Warning),
        help(
            "relayc has no external codegens; the `unpartition` pass drops `Compiler=` and \
             compiles the function with relayc's own kernels"
        )
    )]
    ExternalCompiler {
        /// The `Compiler` attribute's value.
        compiler: String,
        /// `` `@name` `` or "this function".
        function: String,
        /// The function.
        #[label("compiled by relayc, not by `{compiler}`")]
        span: Option<SourceSpan>,
    },
}

/// A warning, such as a non-exhaustive `match`, with the source it points into.
#[derive(Debug, Error)]
#[error("{warning}")]
pub struct TypeWarning {
    /// The module's source text, when it has one.
    pub src: Option<NamedSource<Arc<str>>>,
    /// What the warning is about.
    pub warning: Warning,
}

impl Diagnostic for TypeWarning {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.warning.code()
    }

    fn severity(&self) -> Option<miette::Severity> {
        self.warning.severity()
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.warning.help()
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.warning.labels()
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.src.as_ref().map(|s| s as &dyn miette::SourceCode)
    }
}
