//! `passes.toml`: the pipeline configuration, read with serde (unknown fields rejected) and
//! checked against the pass registry, with diagnostics that point into the file.

/// A pipeline: which passes run, at which opt level, with which options and debug settings.
#[derive(Clone, Debug, Default)]
pub struct PipelineConfig {}

/// An error in `passes.toml`.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("passes.toml: {message}")]
#[diagnostic(code(relay::config::invalid))]
pub struct ConfigError {
    /// What is wrong.
    pub message: String,
}
