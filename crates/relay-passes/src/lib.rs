//! The Relay VM compiler's middle end: the [`Pass`] trait and its registry, the pass manager
//! configured by `passes.toml`, the IR verifier, and the passes, one file each.
//!
//! A pass takes a [`Module`] and returns the transformed module. Passes that read types
//! (`Expr::checked_type`, `Var::checked_type`) say so with [`Pass::needs_types`]; the pass
//! manager re-runs type inference before them whenever an earlier pass changed the module, so a
//! pass never sees a node without a type. What each pass promises about its output (the IR
//! forms it produces, such as `Primitive=1` functions, `Closure=1` globals, `memory.*` calls and
//! `memory.kill` points) is written down in `docs/passes.md`; the [`verify`] module checks those
//! promises under `--verify-each` and in every test.

pub mod config;
pub mod manager;
#[cfg(test)]
mod testing;
pub mod util;
pub mod verify;

pub mod alter_op_layout;
pub mod bind_constant_arguments;
pub mod const_pool_layout;
pub mod dynamic_to_static;
pub mod eliminate_dead_code;
pub mod eta_expand;
pub mod fold_constant;
pub mod fold_scale_axis;
pub mod fuse_ops;
pub mod hoist_loop_invariants;
pub mod inline_primitives;
pub mod lambda_lift;
pub mod liveness;
pub mod manifest_alloc;
pub mod plan_memory;
pub mod simplify_expr;
pub mod simplify_inference;
pub mod tail_call;
pub mod to_anf;
pub mod unpartition;

use std::collections::BTreeMap;

use relay_ir::{Module, Span, Symbol};

pub use config::{
    ConfigError, ConfigErrorKind, DebugConfig, MAX_OPT_LEVEL, OptionSetting, PipelineConfig,
    unknown_pass_help,
};
pub use manager::{PassManager, PassManagerError, PassTiming};
pub use verify::{Invariants, VerifyError, verify_module};

/// A module-to-module transformation.
pub trait Pass: Send + Sync {
    /// The pass's name, as `passes.toml` and `relayc opt --pass` write it.
    fn name(&self) -> &'static str;

    /// One line saying what the pass does (listed in diagnostics and `--help`).
    fn description(&self) -> &'static str;

    /// The lowest pipeline `opt_level` at which the pass runs. A pass below the configured
    /// level is skipped unless it is [`required`](Pass::required).
    fn opt_level(&self) -> u32 {
        0
    }

    /// Whether the VM needs the pass's output whatever the opt level (lowering passes).
    fn required(&self) -> bool {
        false
    }

    /// Whether the pass reads checked types; the manager re-infers types before it when needed.
    fn needs_types(&self) -> bool {
        false
    }

    /// The options the pass accepts in its `[passes.NAME]` table of `passes.toml`.
    fn options(&self) -> &'static [PassOption] {
        &[]
    }

    /// What the pass establishes in its output, for the verifier (added to what earlier passes
    /// established, see [`Invariants`]).
    fn establishes(&self) -> Invariants {
        Invariants::default()
    }

    /// Runs the pass.
    fn run(&self, module: Module, cx: &mut PassContext) -> Result<Module, PassError>;
}

/// One option a pass accepts.
#[derive(Clone, Copy, Debug)]
pub struct PassOption {
    /// Its name in the `[passes.NAME]` table.
    pub name: &'static str,
    /// Its default value.
    pub default: OptionValue,
    /// The smallest value an integer option accepts (ignored for boolean options).
    pub min: i64,
    /// What it does.
    pub doc: &'static str,
}

/// The value of a pass option.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptionValue {
    /// An integer (`max_depth = 256`).
    Int(i64),
    /// A boolean (`expand_globals = true`).
    Bool(bool),
}

impl PassOption {
    /// Why `value` is not a valid setting of this option (its kind or range), if it is not.
    pub fn check(&self, value: OptionValue) -> Result<(), String> {
        match (self.default, value) {
            (OptionValue::Int(_), OptionValue::Int(v)) if v < self.min => {
                Err(format!("at least {}, found {v}", self.min))
            }
            (OptionValue::Int(_), OptionValue::Int(_))
            | (OptionValue::Bool(_), OptionValue::Bool(_)) => Ok(()),
            _ => Err(format!("{}, found {}", self.default.kind(), value.kind())),
        }
    }
}

impl OptionValue {
    /// The name of the value's kind, for messages.
    pub fn kind(self) -> &'static str {
        match self {
            OptionValue::Int(_) => "an integer",
            OptionValue::Bool(_) => "a boolean",
        }
    }
}

/// What the pass manager gives a running pass.
#[derive(Debug)]
pub struct PassContext {
    /// The pipeline's optimization level (0 to 3).
    pub opt_level: u32,
    /// The entry function the program is compiled for (`@main` unless the pipeline names
    /// another): what `eliminate_dead_code` keeps the reachable globals of.
    pub entry: Symbol,
    /// This pass's options: every option it declares, with defaults filled in.
    options: BTreeMap<&'static str, OptionValue>,
    /// Statistics the pass reported, in report order (`("storage bytes before", 4096)`).
    stats: Vec<(String, i64)>,
}

impl PassContext {
    /// A context at `opt_level` with the options `pass` declares at their defaults.
    pub fn new(pass: &dyn Pass, opt_level: u32) -> PassContext {
        PassContext {
            opt_level,
            entry: Symbol::intern("main"),
            options: pass.options().iter().map(|o| (o.name, o.default)).collect(),
            stats: Vec::new(),
        }
    }

    /// Sets an option (the manager checks name and kind against [`Pass::options`] first).
    pub fn set_option(&mut self, name: &'static str, value: OptionValue) {
        self.options.insert(name, value);
    }

    /// An integer option's value.
    ///
    /// # Panics
    /// If the pass did not declare `name` as an integer option (a bug in the pass).
    pub fn int_option(&self, name: &str) -> i64 {
        match self.options.get(name) {
            Some(OptionValue::Int(v)) => *v,
            other => panic!("pass option `{name}` is not a declared integer option: {other:?}"),
        }
    }

    /// A boolean option's value.
    ///
    /// # Panics
    /// If the pass did not declare `name` as a boolean option (a bug in the pass).
    pub fn bool_option(&self, name: &str) -> bool {
        match self.options.get(name) {
            Some(OptionValue::Bool(v)) => *v,
            other => panic!("pass option `{name}` is not a declared boolean option: {other:?}"),
        }
    }

    /// Records a statistic, shown by `--time-passes` and `--stats`.
    pub fn stat(&mut self, name: impl Into<String>, value: i64) {
        self.stats.push((name.into(), value));
    }

    /// The statistics recorded so far.
    pub fn stats(&self) -> &[(String, i64)] {
        &self.stats
    }

    /// Takes the recorded statistics.
    pub fn take_stats(&mut self) -> Vec<(String, i64)> {
        std::mem::take(&mut self.stats)
    }
}

/// A pass failed on its input (a program it cannot transform, such as a call to an operator
/// whose type relation is missing where the pass needs a shape).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("pass `{pass}`: {message}")]
#[diagnostic(code(relay::pass::failed))]
pub struct PassError {
    /// The pass.
    pub pass: &'static str,
    /// What went wrong.
    pub message: String,
    /// Where in the program, if known.
    #[label("here")]
    pub span: Option<miette::SourceSpan>,
}

impl PassError {
    /// An error of `pass` at `span` (ignored if it is [`Span::DUMMY`]).
    pub fn new(pass: &'static str, message: impl Into<String>, span: Span) -> PassError {
        PassError {
            pass,
            message: message.into(),
            span: (!span.is_dummy()).then(|| (span.lo as usize..span.hi as usize).into()),
        }
    }
}

/// Every registered pass, in the default pipeline's order.
pub fn all_passes() -> &'static [&'static dyn Pass] {
    static ALL: &[&dyn Pass] = &[
        &unpartition::Unpartition,
        &simplify_inference::SimplifyInference,
        &eta_expand::EtaExpand,
        &fold_scale_axis::FoldScaleAxis,
        &alter_op_layout::AlterOpLayout,
        &bind_constant_arguments::BindConstantArguments,
        &fold_constant::FoldConstant,
        &dynamic_to_static::DynamicToStatic,
        &simplify_expr::SimplifyExpr,
        &eliminate_dead_code::EliminateDeadCode,
        &hoist_loop_invariants::HoistLoopInvariants,
        &fuse_ops::FuseOps,
        &to_anf::ToAnf,
        &lambda_lift::LambdaLift,
        &inline_primitives::InlinePrimitives,
        &manifest_alloc::ManifestAlloc,
        &plan_memory::PlanMemory,
        &liveness::Liveness,
        &tail_call::TailCall,
        &const_pool_layout::ConstPoolLayout,
    ];
    ALL
}

/// The pass called `name`.
pub fn pass_by_name(name: &str) -> Option<&'static dyn Pass> {
    all_passes().iter().copied().find(|p| p.name() == name)
}

/// The names of every registered pass, for "valid names are ..." messages.
pub fn pass_names() -> Vec<&'static str> {
    all_passes().iter().map(|p| p.name()).collect()
}
