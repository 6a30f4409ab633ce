//! What can go wrong importing a model: a file that is not an ONNX model, a model that uses
//! what the importer does not support (every such node reported together), or a model that
//! is inconsistent.

use miette::Diagnostic;
use relay_ir::OpError;

/// Why the importer could not convert a node: a Relay operator's error, by kind, or the
/// converter's own message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The type relation of a Relay operator the converter called rejected the call.
    #[error("`{op}`: {error}")]
    Operator {
        /// The Relay operator, e.g. `nn.conv2d`.
        op: String,
        /// What its relation said.
        error: OpError,
    },
    /// What the converter found wrong or unsupported in the node.
    #[error("{0}")]
    Message(String),
}

impl From<String> for ConvertError {
    fn from(message: String) -> ConvertError {
        ConvertError::Message(message)
    }
}

impl From<&str> for ConvertError {
    fn from(message: &str) -> ConvertError {
        ConvertError::Message(message.to_owned())
    }
}

/// A node the importer could not convert, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIssue {
    /// The node's name (or `#index` when it has none).
    pub node: String,
    /// Its operator type.
    pub op_type: String,
    /// Its domain (`""`: `ai.onnx`).
    pub domain: String,
    /// What is wrong.
    pub error: ConvertError,
}

impl std::fmt::Display for NodeIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let domain = if self.domain.is_empty() {
            "ai.onnx"
        } else {
            &self.domain
        };
        write!(
            f,
            "node `{}` ({} of {}): {}",
            self.node, self.op_type, domain, self.error
        )
    }
}

/// An import error.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ImportError {
    /// The bytes are not a protobuf-encoded `ModelProto`.
    #[error("not an ONNX model: {0}")]
    #[diagnostic(
        code(relay::onnx::decode),
        help("an ONNX file is a protobuf `ModelProto`; is the file truncated?")
    )]
    Decode(String),
    /// The model is malformed (no graph, a missing initializer, a value used before it is
    /// defined, ...).
    #[error("malformed ONNX model: {0}")]
    #[diagnostic(code(relay::onnx::model))]
    Model(String),
    /// The model's `ai.onnx` operator set is outside the supported range.
    #[error("the model uses ai.onnx opset {0}; relayc imports opsets {1} to {2}")]
    #[diagnostic(code(relay::onnx::opset))]
    Opset(i64, i64, i64),
    /// Nodes the importer cannot convert, all of them.
    #[error("{} node(s) cannot be imported:\n{}", .0.len(), .0.iter().map(|n| format!("  {n}")).collect::<Vec<_>>().join("\n"))]
    #[diagnostic(code(relay::onnx::unsupported))]
    Nodes(Vec<NodeIssue>),
    /// The imported Relay text does not parse or type-check (an importer bug).
    #[error("the imported module does not check: {0}")]
    #[diagnostic(code(relay::onnx::check))]
    Check(String),
}
