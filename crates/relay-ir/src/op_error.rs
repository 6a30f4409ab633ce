//! The error of an operator contract: what a type relation ([`crate::RelationFn`]), a reference
//! evaluation ([`crate::EvalFn`]) or a compute definition ([`crate::te::ComputeFn`]) returns
//! when it rejects its inputs or attributes, by kind and with the human message.
//!
//! Display is the message alone (lowercase, no final period), so callers that add the operator
//! name and a span print what they printed when the contracts returned strings. Match on the
//! variant (or on [`OpError::kind`]) to tell an arity error from a bad attribute.

use std::fmt;

use thiserror::Error;

/// Why an operator rejected its inputs or attributes, or failed to evaluate.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum OpError {
    /// The wrong number of inputs: "expects 2 inputs, got 1".
    #[error("expects {expected} input{}, got {got}", plural(expected))]
    Arity {
        /// How many inputs the operator takes, e.g. `2` or `1 to 3`.
        expected: String,
        /// How many it was given.
        got: usize,
    },
    /// A dtype the operator does not accept, or two dtypes that must agree and do not.
    #[error("{message}")]
    DType {
        /// The message, e.g. "expected a bool dtype, got float32".
        message: String,
    },
    /// Shapes, ranks, dimensions, broadcasting or axes that do not fit.
    #[error("{message}")]
    Shape {
        /// The message, e.g. "cannot broadcast `Tensor[(2), float32]` to shape (3, 5)".
        message: String,
    },
    /// A bad attribute value.
    #[error("{message}")]
    Attribute {
        /// The attribute's name, e.g. `pool_size`.
        name: String,
        /// The message, e.g. "attribute `axis` must be an integer".
        message: String,
    },
    /// A case the operator, or its compute definition, does not handle.
    #[error("{message}")]
    Unsupported {
        /// The message, e.g. "dynamic shapes are not supported".
        message: String,
    },
    /// A run-time failure on the argument values: integer division by zero, an index out of
    /// bounds, an allocation too large.
    #[error("{message}")]
    Value {
        /// The message, e.g. "integer division by zero".
        message: String,
    },
    /// An argument of the wrong kind: not a tensor, or not a tuple, where one is required.
    #[error("{message}")]
    Type {
        /// The message, e.g. "the input must be a tensor, got `()`".
        message: String,
    },
}

/// The kind of an [`OpError`], without its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpErrorKind {
    /// [`OpError::Arity`].
    Arity,
    /// [`OpError::DType`].
    DType,
    /// [`OpError::Shape`].
    Shape,
    /// [`OpError::Attribute`].
    Attribute,
    /// [`OpError::Unsupported`].
    Unsupported,
    /// [`OpError::Value`].
    Value,
    /// [`OpError::Type`].
    Type,
}

/// The plural suffix after an arity: none for exactly one input.
fn plural(expected: &str) -> &'static str {
    if expected == "1" { "" } else { "s" }
}

impl OpError {
    /// An arity error: `expected` inputs (e.g. `2`, or `1 to 3`), `got` given.
    pub fn arity(expected: impl fmt::Display, got: usize) -> OpError {
        OpError::Arity {
            expected: expected.to_string(),
            got,
        }
    }

    /// A dtype error.
    pub fn dtype(message: impl Into<String>) -> OpError {
        OpError::DType {
            message: message.into(),
        }
    }

    /// A shape error.
    pub fn shape(message: impl Into<String>) -> OpError {
        OpError::Shape {
            message: message.into(),
        }
    }

    /// A bad value of attribute `name`.
    pub fn attribute(name: impl Into<String>, message: impl Into<String>) -> OpError {
        OpError::Attribute {
            name: name.into(),
            message: message.into(),
        }
    }

    /// A case the operator does not handle.
    pub fn unsupported(message: impl Into<String>) -> OpError {
        OpError::Unsupported {
            message: message.into(),
        }
    }

    /// A run-time failure on values.
    pub fn value(message: impl Into<String>) -> OpError {
        OpError::Value {
            message: message.into(),
        }
    }

    /// An argument of the wrong kind.
    pub fn type_error(message: impl Into<String>) -> OpError {
        OpError::Type {
            message: message.into(),
        }
    }

    /// A run-time failure from another error (an allocation or a buffer of the wrong size),
    /// with that error's message.
    pub fn from_runtime(error: impl fmt::Display) -> OpError {
        OpError::value(error.to_string())
    }

    /// The kind of the error, for matching without the data.
    pub fn kind(&self) -> OpErrorKind {
        match self {
            OpError::Arity { .. } => OpErrorKind::Arity,
            OpError::DType { .. } => OpErrorKind::DType,
            OpError::Shape { .. } => OpErrorKind::Shape,
            OpError::Attribute { .. } => OpErrorKind::Attribute,
            OpError::Unsupported { .. } => OpErrorKind::Unsupported,
            OpError::Value { .. } => OpErrorKind::Value,
            OpError::Type { .. } => OpErrorKind::Type,
        }
    }

    /// The same kind of error with its message rewritten by `f` (given the current message),
    /// e.g. to say which input or which step it is about. An arity error has no free text to
    /// rewrite: it becomes a [`OpError::Shape`] error with the rewritten message.
    pub fn map_message(self, f: impl FnOnce(&str) -> String) -> OpError {
        match self {
            OpError::Arity { .. } => OpError::shape(f(&self.to_string())),
            OpError::DType { message } => OpError::dtype(f(&message)),
            OpError::Shape { message } => OpError::shape(f(&message)),
            OpError::Attribute { name, message } => OpError::attribute(name, f(&message)),
            OpError::Unsupported { message } => OpError::unsupported(f(&message)),
            OpError::Value { message } => OpError::value(f(&message)),
            OpError::Type { message } => OpError::type_error(f(&message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_message() {
        assert_eq!(OpError::arity(2, 1).to_string(), "expects 2 inputs, got 1");
        assert_eq!(OpError::arity(1, 2).to_string(), "expects 1 input, got 2");
        assert_eq!(
            OpError::arity("1 to 3", 0).to_string(),
            "expects 1 to 3 inputs, got 0"
        );
        let e = OpError::attribute("axis", "attribute `axis` must be an integer");
        assert_eq!(e.to_string(), "attribute `axis` must be an integer");
        assert_eq!(
            OpError::value("integer division by zero").to_string(),
            "integer division by zero"
        );
    }

    #[test]
    fn errors_match_by_kind() {
        let e = OpError::attribute("pool_size", "`pool_size` must have 2 values, got 3");
        assert!(matches!(&e, OpError::Attribute { name, .. } if name == "pool_size"));
        assert_eq!(e.kind(), OpErrorKind::Attribute);
        assert_eq!(OpError::arity(2, 1).kind(), OpErrorKind::Arity);
        assert_eq!(OpError::dtype("d").kind(), OpErrorKind::DType);
        assert_eq!(OpError::shape("s").kind(), OpErrorKind::Shape);
        assert_eq!(OpError::unsupported("u").kind(), OpErrorKind::Unsupported);
        assert_eq!(OpError::from_runtime("v").kind(), OpErrorKind::Value);
        assert_eq!(OpError::type_error("t").kind(), OpErrorKind::Type);
    }

    #[test]
    fn map_message_keeps_the_kind() {
        let e = OpError::attribute("axis", "bad").map_message(|m| format!("step 2: {m}"));
        assert_eq!(e, OpError::attribute("axis", "step 2: bad"));
        let e = OpError::value("x").map_message(|m| format!("{m}!"));
        assert_eq!(e, OpError::value("x!"));
    }
}
