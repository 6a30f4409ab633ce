//! `passes.toml`: the pipeline configuration, read with serde (unknown fields rejected) and
//! checked against the pass registry, with diagnostics that point into the file.
//!
//! The format:
//!
//! ```toml
//! [pipeline]
//! opt_level = 2                 # 0 to 3; passes above it are skipped unless required
//! passes = ["simplify_inference", "fuse_ops"]
//!
//! [passes.fuse_ops]             # options of one pass, checked against `Pass::options`
//! max_depth = 256
//!
//! [debug]
//! verify_each = false
//! time_passes = false
//! print_before = []
//! print_after = []
//! print_after_all = false
//! skip = []
//! ```
//!
//! Only `[pipeline] passes` is required. Reading stops at the first TOML syntax or shape error
//! (serde reports one), but every error in the names and values of a well-formed file is reported
//! together, in file order.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use serde::Deserialize;
use toml::Spanned;

use crate::{OptionValue, Pass, PassOption, all_passes};

/// The text of the repository's `passes.toml`: the default pipeline, built into the binary so an
/// installed `relayc` has it.
const DEFAULT_PIPELINE: &str = include_str!("../../../passes.toml");

/// The highest `opt_level`.
pub const MAX_OPT_LEVEL: u32 = 3;

/// A pipeline: which passes run, at which opt level, with which options and debug settings.
#[derive(Clone)]
pub struct PipelineConfig {
    /// The optimization level (0 to [`MAX_OPT_LEVEL`]).
    pub opt_level: u32,
    /// The passes, in order (a pass may appear more than once).
    pub passes: Vec<&'static dyn Pass>,
    /// Pass options, in file order; each names a declared option with a value of its kind.
    pub options: Vec<OptionSetting>,
    /// The `[debug]` table.
    pub debug: DebugConfig,
}

/// One `[passes.PASS] OPTION = VALUE` entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OptionSetting {
    /// The pass.
    pub pass: &'static str,
    /// The option.
    pub option: &'static str,
    /// Its value.
    pub value: OptionValue,
}

/// The `[debug]` table: what the pass manager reports and checks while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugConfig {
    /// Type-check and verify the output of every pass.
    pub verify_each: bool,
    /// Report each pass's wall time and statistics.
    pub time_passes: bool,
    /// Print the module before these passes.
    pub print_before: Vec<&'static str>,
    /// Print the module after these passes.
    pub print_after: Vec<&'static str>,
    /// Print the module after every pass.
    pub print_after_all: bool,
    /// Passes not to run.
    pub skip: Vec<&'static str>,
}

impl Default for PipelineConfig {
    /// An empty pipeline at opt level 2.
    fn default() -> PipelineConfig {
        PipelineConfig {
            opt_level: 2,
            passes: Vec::new(),
            options: Vec::new(),
            debug: DebugConfig::default(),
        }
    }
}

impl fmt::Debug for PipelineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipelineConfig")
            .field("opt_level", &self.opt_level)
            .field("passes", &self.pass_names())
            .field("options", &self.options)
            .field("debug", &self.debug)
            .finish()
    }
}

impl PipelineConfig {
    /// Reads and checks the configuration file at `path`.
    pub fn load(path: &Path) -> Result<PipelineConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
            kind: ConfigErrorKind::Io,
            message: format!("cannot read `{}`: {err}", path.display()),
            src: None,
            span: None,
            label: "",
            help: None,
            related: Box::default(),
        })?;
        PipelineConfig::parse(&text, &path.to_string_lossy())
    }

    /// Parses and checks configuration text; `name` is the file name diagnostics show.
    pub fn parse(text: &str, name: &str) -> Result<PipelineConfig, ConfigError> {
        PipelineConfig::parse_in(text, name, all_passes())
    }

    /// Parses and checks configuration text against the passes of `registry` instead of every
    /// registered pass (for tools and tests with passes of their own).
    pub fn parse_in(
        text: &str,
        name: &str,
        registry: &[&'static dyn Pass],
    ) -> Result<PipelineConfig, ConfigError> {
        let src = NamedSource::new(name, Arc::<str>::from(text));
        let raw: RawConfig = match toml::from_str(text) {
            Ok(raw) => raw,
            Err(err) => return Err(ConfigError::from_toml(&err, src)),
        };
        let mut checker = Checker {
            registry,
            problems: Vec::new(),
        };
        let config = checker.check(raw);
        let mut problems = checker.problems;
        problems.sort_by_key(|p| p.span.start);
        let mut problems = problems.into_iter().map(Problem::into_error);
        let Some(mut first) = problems.next() else {
            return Ok(config);
        };
        first.src = Some(Box::new(src));
        first.related = problems.collect();
        Err(first)
    }

    /// The default pipeline (the repository's `passes.toml`, built in).
    pub fn default_pipeline() -> PipelineConfig {
        // The built-in file is checked by the `repository_passes_toml_loads` test; it cannot fail to
        // parse in a build that passed its tests.
        PipelineConfig::parse(DEFAULT_PIPELINE, "passes.toml")
            .expect("the built-in passes.toml is valid")
    }

    /// The text of the default pipeline's `passes.toml`.
    pub fn default_pipeline_text() -> &'static str {
        DEFAULT_PIPELINE
    }

    /// The names of the passes, in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }
}

/// What kind of mistake a [`ConfigError`] is (its diagnostic code says the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file could not be read.
    Io,
    /// Not TOML, or TOML of the wrong shape (a string where a list belongs, a missing table).
    Syntax,
    /// A table or key the format does not have.
    UnknownField,
    /// A name that is not a registered pass.
    UnknownPass,
    /// An option the pass does not declare.
    UnknownOption,
    /// An option value of the wrong kind.
    OptionKind,
    /// An `opt_level` outside 0 to 3.
    OptLevel,
}

impl ConfigErrorKind {
    /// The diagnostic code.
    fn code(self) -> &'static str {
        match self {
            ConfigErrorKind::Io => "relay::config::io",
            ConfigErrorKind::Syntax => "relay::config::syntax",
            ConfigErrorKind::UnknownField => "relay::config::unknown_field",
            ConfigErrorKind::UnknownPass => "relay::config::unknown_pass",
            ConfigErrorKind::UnknownOption => "relay::config::unknown_option",
            ConfigErrorKind::OptionKind => "relay::config::option_kind",
            ConfigErrorKind::OptLevel => "relay::config::opt_level",
        }
    }
}

/// An error in `passes.toml`. Further errors of the same file are its
/// [`related`](ConfigError::related) diagnostics, rendered against the same text.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    /// What kind of mistake it is.
    pub kind: ConfigErrorKind,
    /// What is wrong.
    pub message: String,
    /// The file's text and name (on the first error of a file only).
    pub src: Option<Box<NamedSource<Arc<str>>>>,
    /// Where in the file (byte offsets).
    pub span: Option<Range<usize>>,
    /// The label at `span`.
    pub label: &'static str,
    /// The valid names, or a closest-name suggestion.
    pub help: Option<String>,
    /// The file's other errors, in file order.
    pub related: Box<[ConfigError]>,
}

impl ConfigError {
    /// Every error of the file: this one, then the related ones.
    pub fn all(&self) -> impl Iterator<Item = &ConfigError> {
        std::iter::once(self).chain(self.related.iter())
    }

    /// An error for a TOML syntax or shape error.
    fn from_toml(err: &toml::de::Error, src: NamedSource<Arc<str>>) -> ConfigError {
        let message = err.message().trim_end().to_string();
        let (kind, label, help) = if let Some(rest) = message.strip_prefix("unknown field ") {
            // serde's message is "unknown field `x`, expected one of `a`, `b`" (or "expected
            // `a`"): the names between backquotes are the unknown one, then the valid ones.
            let names: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
            let help = match names.split_first() {
                Some((unknown, valid)) if !valid.is_empty() => {
                    Some(suggest(unknown, valid.iter().copied(), "valid keys are"))
                }
                _ => None,
            };
            (ConfigErrorKind::UnknownField, "unknown key", help)
        } else {
            (ConfigErrorKind::Syntax, "here", None)
        };
        ConfigError {
            kind,
            message,
            src: Some(Box::new(src)),
            span: err.span(),
            label,
            help,
            related: Box::default(),
        }
    }
}

impl Diagnostic for ConfigError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.kind.code()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display + 'a>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.src.as_deref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.span.clone()?;
        let label = LabeledSpan::new_with_span(Some(self.label.to_string()), span);
        Some(Box::new(std::iter::once(label)))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        if self.related.is_empty() {
            return None;
        }
        Some(Box::new(self.related.iter().map(|e| e as &dyn Diagnostic)))
    }
}

/// `help` for an unknown name: "did you mean `x`? valid ... are: a, b, c".
pub(crate) fn suggest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str> + Clone,
    valid: &str,
) -> String {
    let list = candidates.clone().collect::<Vec<_>>().join(", ");
    match relay_ops::nearest(name, candidates) {
        Some(near) => format!("did you mean `{near}`? {valid}: {list}"),
        None => format!("{valid}: {list}"),
    }
}

/// `help` for an unknown pass name: "did you mean `fuse_ops`? valid passes are: ...".
pub fn unknown_pass_help(name: &str) -> String {
    pass_help(name, all_passes())
}

/// `help` for an unknown pass name: the closest and all the names in `registry`.
pub(crate) fn pass_help(name: &str, registry: &[&'static dyn Pass]) -> String {
    suggest(name, registry.iter().map(|p| p.name()), "valid passes are")
}

/// `help` for an option `pass` does not declare.
pub(crate) fn option_help(pass: &dyn Pass, name: &str) -> String {
    if pass.options().is_empty() {
        return format!("pass `{}` takes no options", pass.name());
    }
    suggest(
        name,
        pass.options().iter().map(|o| o.name),
        &format!("the options of `{}` are", pass.name()),
    )
}

/// The option `name` of `pass`, or an error message naming the valid ones.
pub(crate) fn find_option(pass: &dyn Pass, name: &str) -> Result<&'static PassOption, String> {
    pass.options()
        .iter()
        .find(|o| o.name == name)
        .ok_or_else(|| {
            format!(
                "pass `{}` has no option `{name}`; {}",
                pass.name(),
                option_help(pass, name)
            )
        })
}

/// The file as serde reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    pipeline: RawPipeline,
    #[serde(default)]
    passes: BTreeMap<Spanned<String>, BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    #[serde(default)]
    debug: RawDebug,
}

/// The `[pipeline]` table as serde reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPipeline {
    opt_level: Option<Spanned<i64>>,
    passes: Vec<Spanned<String>>,
}

/// The `[debug]` table as serde reads it.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawDebug {
    verify_each: bool,
    time_passes: bool,
    print_before: Vec<Spanned<String>>,
    print_after: Vec<Spanned<String>>,
    print_after_all: bool,
    skip: Vec<Spanned<String>>,
}

/// One error found while checking names and values.
struct Problem {
    kind: ConfigErrorKind,
    message: String,
    span: Range<usize>,
    label: &'static str,
    help: Option<String>,
}

impl Problem {
    fn into_error(self) -> ConfigError {
        ConfigError {
            kind: self.kind,
            message: self.message,
            src: None,
            span: Some(self.span),
            label: self.label,
            help: self.help,
            related: Box::default(),
        }
    }
}

/// Checks a [`RawConfig`] against a registry of passes, collecting every problem.
struct Checker<'r> {
    registry: &'r [&'static dyn Pass],
    problems: Vec<Problem>,
}

impl Checker<'_> {
    /// The configuration `raw` describes, with the invalid parts left out (and reported).
    fn check(&mut self, raw: RawConfig) -> PipelineConfig {
        let opt_level = match raw.pipeline.opt_level {
            None => 2,
            Some(level) => match u32::try_from(*level.get_ref()) {
                Ok(level) if level <= MAX_OPT_LEVEL => level,
                _ => {
                    self.problems.push(Problem {
                        kind: ConfigErrorKind::OptLevel,
                        message: format!(
                            "opt_level must be between 0 and {MAX_OPT_LEVEL}, found {}",
                            level.get_ref()
                        ),
                        span: level.span(),
                        label: "out of range",
                        help: Some(format!("use an opt_level from 0 to {MAX_OPT_LEVEL}")),
                    });
                    2
                }
            },
        };
        let passes = raw
            .pipeline
            .passes
            .iter()
            .filter_map(|name| self.pass(name, "pipeline"))
            .collect();

        let mut options = Vec::new();
        for (pass_name, table) in &raw.passes {
            let Some(pass) = self.pass(pass_name, "[passes] table") else {
                continue;
            };
            for (option_name, value) in table {
                if let Some(setting) = self.option(pass, option_name, value) {
                    options.push((option_name.span().start, setting));
                }
            }
        }
        // The tables are read into sorted maps; keep the file's order.
        options.sort_by_key(|(start, _)| *start);
        let options = options.into_iter().map(|(_, setting)| setting).collect();

        let debug = DebugConfig {
            verify_each: raw.debug.verify_each,
            time_passes: raw.debug.time_passes,
            print_before: self.pass_list(&raw.debug.print_before, "print_before"),
            print_after: self.pass_list(&raw.debug.print_after, "print_after"),
            print_after_all: raw.debug.print_after_all,
            skip: self.pass_list(&raw.debug.skip, "skip"),
        };
        PipelineConfig {
            opt_level,
            passes,
            options,
            debug,
        }
    }

    /// The pass `name` names, or `None` after recording an unknown-pass problem.
    fn pass(&mut self, name: &Spanned<String>, place: &str) -> Option<&'static dyn Pass> {
        let pass = self
            .registry
            .iter()
            .copied()
            .find(|p| p.name() == name.get_ref());
        if pass.is_none() {
            self.problems.push(Problem {
                kind: ConfigErrorKind::UnknownPass,
                message: format!("unknown pass `{}` in {place}", name.get_ref()),
                span: name.span(),
                label: "not a pass",
                help: Some(pass_help(name.get_ref(), self.registry)),
            });
        }
        pass
    }

    /// The registered names among `names`, recording the unknown ones.
    fn pass_list(&mut self, names: &[Spanned<String>], place: &str) -> Vec<&'static str> {
        names
            .iter()
            .filter_map(|name| self.pass(name, place).map(|p| p.name()))
            .collect()
    }

    /// The setting `pass.name = value`, or `None` after recording why it is invalid.
    fn option(
        &mut self,
        pass: &'static dyn Pass,
        name: &Spanned<String>,
        value: &Spanned<toml::Value>,
    ) -> Option<OptionSetting> {
        let option = match find_option(pass, name.get_ref()) {
            Ok(option) => option,
            Err(_) => {
                self.problems.push(Problem {
                    kind: ConfigErrorKind::UnknownOption,
                    message: format!("pass `{}` has no option `{}`", pass.name(), name.get_ref()),
                    span: name.span(),
                    label: "unknown option",
                    help: Some(option_help(pass, name.get_ref())),
                });
                return None;
            }
        };
        let parsed = match (option.default, value.get_ref()) {
            (OptionValue::Int(_), toml::Value::Integer(v)) => Some(OptionValue::Int(*v)),
            (OptionValue::Bool(_), toml::Value::Boolean(v)) => Some(OptionValue::Bool(*v)),
            _ => None,
        };
        if let Some(setting) = parsed
            && let Err(why) = option.check(setting)
        {
            self.problems.push(Problem {
                kind: ConfigErrorKind::OptionKind,
                message: format!("option `{}.{}` expects {why}", pass.name(), option.name),
                span: value.span(),
                label: "out of range",
                help: Some(format!("{}: {}", option.name, option.doc)),
            });
            return None;
        }
        match parsed {
            Some(value) => Some(OptionSetting {
                pass: pass.name(),
                option: option.name,
                value,
            }),
            None => {
                self.problems.push(Problem {
                    kind: ConfigErrorKind::OptionKind,
                    message: format!(
                        "option `{}.{}` expects {}, found {}",
                        pass.name(),
                        option.name,
                        option.default.kind(),
                        toml_kind(value.get_ref())
                    ),
                    span: value.span(),
                    label: option.default.kind(),
                    help: Some(format!("{}: {}", option.name, option.doc)),
                });
                None
            }
        }
    }
}

/// The name of a TOML value's kind, for messages.
fn toml_kind(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date-time",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}
