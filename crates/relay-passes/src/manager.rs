//! The pass manager: runs a pipeline of passes, re-infers types where a pass needs them, and
//! offers print-before/after, verify-each, time-passes, opt-level gating and skip.

use relay_ir::Module;

use crate::{Invariants, Pass, PassContext, PassError, verify_module};

/// The wall time and statistics of one pass run.
#[derive(Clone, Debug)]
pub struct PassTiming {
    /// The pass.
    pub pass: &'static str,
    /// Wall time.
    pub time: std::time::Duration,
    /// The statistics it reported.
    pub stats: Vec<(String, i64)>,
}

/// A pipeline ready to run.
pub struct PassManager {
    passes: Vec<&'static dyn Pass>,
    opt_level: u32,
    verify_each: bool,
}

/// Why a pipeline stopped.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PassManagerError {
    /// A pass failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Pass(#[from] PassError),
    /// Type inference failed on a pass's output (a bug in the pass).
    #[error("the output of pass `{pass}` does not type-check:\n{rendered}")]
    #[diagnostic(code(relay::pass::ill_typed))]
    IllTyped {
        /// The pass.
        pass: &'static str,
        /// The rendered type errors.
        rendered: String,
    },
    /// The verifier rejected a pass's output (a bug in the pass).
    #[error("the output of pass `{pass}` is malformed:\n{messages}")]
    #[diagnostic(code(relay::pass::malformed))]
    Malformed {
        /// The pass.
        pass: &'static str,
        /// The verifier's messages, one per line.
        messages: String,
    },
}

impl PassManager {
    /// A pipeline of `passes` at `opt_level`.
    pub fn new(passes: Vec<&'static dyn Pass>, opt_level: u32) -> PassManager {
        PassManager {
            passes,
            opt_level,
            verify_each: false,
        }
    }

    /// Type-checks and verifies the output of every pass.
    pub fn verify_each(mut self, on: bool) -> PassManager {
        self.verify_each = on;
        self
    }

    /// Runs the pipeline on a type-checked module. The result is type-checked again (so every
    /// node has its checked type).
    pub fn run(&self, mut module: Module) -> Result<(Module, Vec<PassTiming>), PassManagerError> {
        let mut timings = Vec::new();
        let mut invariants = Invariants::default();
        let mut typed = true;
        for &pass in &self.passes {
            if pass.opt_level() > self.opt_level && !pass.required() {
                continue;
            }
            if pass.needs_types() && !typed {
                retype(&module, pass.name())?;
            }
            let mut cx = PassContext::new(pass, self.opt_level);
            let start = std::time::Instant::now();
            module = pass.run(module, &mut cx)?;
            timings.push(PassTiming {
                pass: pass.name(),
                time: start.elapsed(),
                stats: cx.take_stats(),
            });
            typed = false;
            invariants = invariants.union(pass.establishes());
            if self.verify_each {
                retype(&module, pass.name())?;
                typed = true;
                verify(&module, invariants, pass.name())?;
            }
        }
        if !typed {
            retype(&module, "the last pass")?;
        }
        Ok((module, timings))
    }
}

/// Re-runs type inference on the output of `pass`.
fn retype(module: &Module, pass: &'static str) -> Result<(), PassManagerError> {
    relay_types::check_module(module)
        .map(drop)
        .map_err(|errors| PassManagerError::IllTyped {
            pass,
            rendered: format!("{errors:?}"),
        })
}

/// Verifies the output of `pass`.
fn verify(module: &Module, invariants: Invariants, pass: &'static str) -> Result<(), PassManagerError> {
    verify_module(module, invariants).map_err(|errors| PassManagerError::Malformed {
        pass,
        messages: errors
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}
