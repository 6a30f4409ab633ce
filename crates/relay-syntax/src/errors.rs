//! Parse diagnostics: one error enum for the phase, each variant with a `relay::parse::*` code,
//! labeled spans and help text. Detection (lexer, grammar, resolver) is separate from rendering
//! (miette).

use std::sync::Arc;

use miette::{Diagnostic, NamedSource, SourceSpan};
use relay_ir::Span;
use thiserror::Error;

fn ss(span: Span) -> SourceSpan {
    SourceSpan::new((span.lo as usize).into(), span.len())
}

/// One problem in the text.
#[derive(Debug, Clone, Error, Diagnostic)]
pub enum ParseError {
    /// The grammar did not expect this token.
    #[error("unexpected {found}, expected {expected}")]
    #[diagnostic(code(relay::parse::unexpected_token))]
    UnexpectedToken {
        /// The token found, in words.
        found: String,
        /// What would have been accepted, in words.
        expected: String,
        /// Where.
        #[label("unexpected {found}")]
        span: SourceSpan,
        /// Extra advice for common mistakes.
        #[help]
        help: Option<String>,
    },

    /// The text ended too early.
    #[error("unexpected end of input, expected {expected}")]
    #[diagnostic(code(relay::parse::unexpected_eof))]
    UnexpectedEof {
        /// What would have been accepted, in words.
        expected: String,
        /// The end of the text.
        #[label("the text ends after this")]
        span: SourceSpan,
        /// Extra advice.
        #[help]
        help: Option<String>,
    },

    /// A character no token starts with.
    #[error("unexpected character {text:?}")]
    #[diagnostic(code(relay::parse::invalid_character))]
    InvalidCharacter {
        /// The text.
        text: String,
        /// Where.
        #[label("not part of any token")]
        span: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A `/*` comment with no matching `*/`.
    #[error("unterminated block comment")]
    #[diagnostic(
        code(relay::parse::unterminated_comment),
        help("block comments nest: every `/*` needs its own `*/`")
    )]
    UnterminatedComment {
        /// Where the comment starts.
        #[label("this comment is never closed")]
        span: SourceSpan,
    },

    /// A string literal with no closing quote.
    #[error("unterminated string literal")]
    #[diagnostic(code(relay::parse::unterminated_string), help("add the closing `\"`"))]
    UnterminatedString {
        /// Where the string starts.
        #[label("this string is never closed")]
        span: SourceSpan,
    },

    /// A string escape other than `\"`, `\\`, `\n` and `\t`.
    #[error("unknown escape sequence `{text}` in string")]
    #[diagnostic(
        code(relay::parse::bad_escape),
        help("strings support the escapes `\\\"`, `\\\\`, `\\n` and `\\t`")
    )]
    BadEscape {
        /// The escape.
        text: String,
        /// Where.
        #[label("unknown escape")]
        span: SourceSpan,
    },

    /// A malformed or unrepresentable number.
    #[error("{message}")]
    #[diagnostic(code(relay::parse::bad_number))]
    BadNumber {
        /// What is wrong, e.g. "integer `2147483648` is out of range for int32".
        message: String,
        /// Where.
        #[label("{label}")]
        span: SourceSpan,
        /// Short label text.
        label: String,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A numeric suffix that is not `i`, `i8`..`i64`, `f`, `f16`, `f32` or `f64`.
    #[error("unsupported numeric suffix `{suffix}`")]
    #[diagnostic(
        code(relay::parse::bad_suffix),
        help(
            "integer suffixes are `i8`, `i16`, `i32` (or `i`) and `i64`; float suffixes are `f16`, `f32` (or `f`) and `f64`"
        )
    )]
    BadSuffix {
        /// The suffix.
        suffix: String,
        /// Where.
        #[label("unsupported suffix")]
        span: SourceSpan,
    },

    /// A `%name` not bound here.
    #[error("undefined local variable `%{name}`")]
    #[diagnostic(code(relay::parse::undefined_local))]
    UndefinedLocal {
        /// The name without `%`.
        name: String,
        /// Where.
        #[label("not bound in this scope")]
        span: SourceSpan,
        /// Advice (e.g. a similar name in scope, or the recursive-let rule).
        #[help]
        help: Option<String>,
    },

    /// A `%N` graph variable not bound in this function.
    #[error("undefined graph variable `%{number}`")]
    #[diagnostic(code(relay::parse::undefined_graph_var))]
    UndefinedGraphVar {
        /// The number.
        number: String,
        /// Where.
        #[label("no `%{number} = ...;` binding is in scope here")]
        span: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A `%N = ...;` number bound twice in one function.
    #[error("graph variable `%{number}` is already bound in this function")]
    #[diagnostic(
        code(relay::parse::duplicate_graph_var),
        help("graph variables are scoped to their function body; use a fresh number")
    )]
    DuplicateGraphVar {
        /// The number.
        number: String,
        /// Where.
        #[label("bound again here")]
        span: SourceSpan,
        /// The first binding.
        #[label("first bound here")]
        previous: SourceSpan,
    },

    /// An `@name` with no definition.
    #[error("undefined global function `@{name}`")]
    #[diagnostic(code(relay::parse::undefined_global))]
    UndefinedGlobal {
        /// The name without `@`.
        name: String,
        /// Where.
        #[label("no `def @{name}` in this module")]
        span: SourceSpan,
        /// Advice (a similar name).
        #[help]
        help: Option<String>,
    },

    /// A constructor name used in a pattern that no `type` defines.
    #[error("undefined constructor `{name}`")]
    #[diagnostic(code(relay::parse::undefined_constructor))]
    UndefinedConstructor {
        /// The name.
        name: String,
        /// Where.
        #[label("no type defines this constructor")]
        span: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A type name that is neither a dtype, a type variable in scope, nor a defined type.
    #[error("undefined type `{name}`")]
    #[diagnostic(code(relay::parse::undefined_type))]
    UndefinedType {
        /// The name.
        name: String,
        /// Where.
        #[label("not a dtype, a type parameter in scope, or a defined type")]
        span: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A global function, type or constructor defined twice.
    #[error("duplicate definition of {what} `{name}`")]
    #[diagnostic(code(relay::parse::duplicate_definition))]
    DuplicateDefinition {
        /// "global function", "type" or "constructor".
        what: &'static str,
        /// The name.
        name: String,
        /// The second definition.
        #[label("defined again here")]
        span: SourceSpan,
        /// The first definition.
        #[label("first defined here")]
        previous: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A name that is not a registered operator (nor a constructor).
    #[error("unknown operator `{name}`")]
    #[diagnostic(code(relay::parse::unknown_operator))]
    UnknownOperator {
        /// The name.
        name: String,
        /// Where.
        #[label("not a registered operator or a constructor")]
        span: SourceSpan,
        /// Advice (the closest known name).
        #[help]
        help: Option<String>,
    },

    /// An attribute the operator does not have.
    #[error("operator `{op}` has no attribute `{name}`")]
    #[diagnostic(code(relay::parse::unknown_attribute))]
    UnknownAttribute {
        /// The operator.
        op: String,
        /// The attribute.
        name: String,
        /// Where.
        #[label("unknown attribute")]
        span: SourceSpan,
        /// The valid names (and the closest one).
        #[help]
        help: Option<String>,
    },

    /// A required attribute that was not written.
    #[error("operator `{op}` requires attribute `{name}`")]
    #[diagnostic(code(relay::parse::missing_attribute))]
    MissingAttribute {
        /// The operator.
        op: String,
        /// The attribute.
        name: String,
        /// The call.
        #[label("`{name}` is missing here")]
        span: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// An attribute given twice in one call or function.
    #[error("attribute `{name}` is given twice")]
    #[diagnostic(code(relay::parse::duplicate_attribute))]
    DuplicateAttribute {
        /// The attribute.
        name: String,
        /// The second occurrence.
        #[label("given again here")]
        span: SourceSpan,
        /// The first occurrence.
        #[label("first given here")]
        previous: SourceSpan,
    },

    /// An attribute value of the wrong kind.
    #[error("attribute `{name}` of `{op}` expects {expected}, got {found}")]
    #[diagnostic(code(relay::parse::bad_attribute_value))]
    BadAttributeValue {
        /// The operator.
        op: String,
        /// The attribute.
        name: String,
        /// What the field takes, in words.
        expected: String,
        /// What was written, in words.
        found: String,
        /// Where.
        #[label("expected {expected}")]
        span: SourceSpan,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// A positional argument or parameter after an attribute.
    #[error("{what} after attributes")]
    #[diagnostic(
        code(relay::parse::argument_after_attributes),
        help("attributes (`name=value`) must come after all positional {what}s")
    )]
    ArgumentAfterAttributes {
        /// "argument" or "parameter".
        what: &'static str,
        /// Where.
        #[label("this {what} follows an attribute")]
        span: SourceSpan,
    },

    /// The module has no `#[version = "0.0.5"]` header.
    #[error("missing version header")]
    #[diagnostic(
        code(relay::parse::missing_version),
        help("Relay modules start with `#[version = \"0.0.5\"]`")
    )]
    MissingVersion {
        /// The start of the text.
        #[label("expected the version header before this")]
        span: SourceSpan,
    },

    /// A version header with another version.
    #[error("unsupported text format version {found}")]
    #[diagnostic(
        code(relay::parse::bad_version),
        help(
            "relayc reads version \"0.0.5\" of the Relay text format: write `#[version = \"0.0.5\"]`"
        )
    )]
    BadVersion {
        /// What was written.
        found: String,
        /// Where.
        #[label("expected \"0.0.5\"")]
        span: SourceSpan,
    },

    /// A `#[...]` directive other than `version` and `metadata`, or a misplaced one.
    #[error("{message}")]
    #[diagnostic(
        code(relay::parse::bad_directive),
        help(
            "the only directives are `#[version = \"0.0.5\"]` at the start and `#[metadata]` at the end"
        )
    )]
    BadDirective {
        /// What is wrong.
        message: String,
        /// Where.
        #[label("here")]
        span: SourceSpan,
    },

    /// A `meta[...][...]` reference that cannot be resolved.
    #[error("{message}")]
    #[diagnostic(code(relay::parse::bad_meta_reference))]
    BadMetaReference {
        /// What is wrong.
        message: String,
        /// Where.
        #[label("{label}")]
        span: SourceSpan,
        /// Short label.
        label: String,
        /// Advice.
        #[help]
        help: Option<String>,
    },

    /// The `#[metadata]` section is not valid TVM metadata.
    #[error("invalid metadata section: {message}")]
    #[diagnostic(code(relay::parse::bad_metadata))]
    BadMetadata {
        /// What is wrong.
        message: String,
        /// The section.
        #[label("in this metadata section")]
        span: SourceSpan,
    },

    /// Nesting deeper than the parser supports.
    #[error("expression nested too deeply (more than {limit} levels)")]
    #[diagnostic(
        code(relay::parse::nested_too_deeply),
        help("bind intermediate results with `let` or `%N = ...;` so the nesting stays flat")
    )]
    NestedTooDeeply {
        /// The limit.
        limit: u32,
        /// The innermost construct beyond the limit.
        #[label("nesting exceeds the limit here")]
        span: SourceSpan,
    },

    /// An `extern type` with a constructor list.
    #[error("an external type may not have constructors")]
    #[diagnostic(
        code(relay::parse::extern_type_constructors),
        help("write `type {name}` for an algebraic data type, or drop the constructor list")
    )]
    ExternTypeConstructors {
        /// The type.
        name: String,
        /// Where.
        #[label("constructors of an `extern type`")]
        span: SourceSpan,
    },

    /// Something well-formed in the grammar but meaningless, e.g. a constructor applied to the
    /// wrong number of patterns.
    #[error("{message}")]
    #[diagnostic(code(relay::parse::invalid))]
    Invalid {
        /// What is wrong.
        message: String,
        /// Where.
        #[label("{label}")]
        span: SourceSpan,
        /// Short label.
        label: String,
        /// Advice.
        #[help]
        help: Option<String>,
    },
}

impl ParseError {
    /// Converts an IR span to a miette span.
    pub fn span_of(span: Span) -> SourceSpan {
        ss(span)
    }
}

/// Every problem found in one text, with the text, rendered together.
#[derive(Debug, Clone, Error)]
#[error("{}", summary(.errors))]
pub struct ParseErrors {
    /// The text.
    pub src: NamedSource<Arc<str>>,
    /// The problems, in source order.
    pub errors: Vec<ParseError>,
}

fn summary(errors: &[ParseError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => format!("{} errors", many.len()),
    }
}

impl Diagnostic for ParseErrors {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        match self.errors.as_slice() {
            [one] => one.code(),
            _ => None,
        }
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        match self.errors.as_slice() {
            [one] => one.help(),
            _ => None,
        }
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        match self.errors.as_slice() {
            [one] => one.labels(),
            _ => None,
        }
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.src)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self.errors.as_slice() {
            [_] => None,
            many => Some(Box::new(many.iter().map(|e| e as &dyn Diagnostic))),
        }
    }
}
