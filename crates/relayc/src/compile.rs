//! How `relayc build` and `relayc run` compile: the pipeline flags they share and a
//! [`relay::Compiler`] made from them — the library's compile driver, the one path from a
//! type-checked module to the lowered module or a runnable [`Executable`]. Every problem is
//! reported on stderr and becomes the exit code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use relay::Executable;
use relay::MAX_OPT_LEVEL;
use relay::ir::{Module, NDArray};
use relay::{CompileTimes, Compiler, PipelineConfig, Tensor};

use crate::Exit;
use crate::diagnostics::{report_diagnostic, report_error, report_relay_error};
use crate::opt::passes_named;

/// The pipeline flags `build` and `run` share (and `opt` has too).
#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// Reads the pipeline from a `passes.toml` file instead of the built-in default.
    #[arg(long, value_name = "passes.toml")]
    pub passes: Option<PathBuf>,
    /// The optimization level (0 to 3): passes above it are skipped unless required.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_OPT_LEVEL)))]
    pub opt_level: Option<u32>,
    /// Type-checks and verifies every pass's output, and checks every kernel's loop nest with
    /// the kernel verifier (bounds, dtypes, vector lanes, aliasing) before it is compiled.
    #[arg(long)]
    pub verify_each: bool,
    /// Prints the module on stderr after each run of this pass (repeatable).
    #[arg(long, value_name = "NAME")]
    pub print_after: Vec<String>,
    /// Prints the module on stderr after every pass.
    #[arg(long)]
    pub print_after_all: bool,
    /// Prints each pass's wall time, share and statistics on stderr.
    #[arg(long)]
    pub time_passes: bool,
    /// Leaves this pass out of the pipeline (repeatable); the passes the VM requires cannot be
    /// left out.
    #[arg(long, value_name = "NAME")]
    pub disable_pass: Vec<String>,
}

impl PipelineArgs {
    /// The first pipeline flag given, if any (for the messages that refuse them).
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.passes.is_some(), "--passes"),
            (self.opt_level.is_some(), "--opt-level"),
            (self.verify_each, "--verify-each"),
            (!self.print_after.is_empty(), "--print-after"),
            (self.print_after_all, "--print-after-all"),
            (self.time_passes, "--time-passes"),
            (!self.disable_pass.is_empty(), "--disable-pass"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// Whether any pipeline flag was given.
    pub fn given(&self) -> bool {
        self.first_given().is_some()
    }

    /// The pipeline configuration: the file's (or the built-in one) with the debugging flags
    /// and the disabled passes applied. Unknown pass names and a required pass given to
    /// `--disable-pass` are usage errors; a bad `passes.toml` is reported on stderr.
    fn config(&self) -> Result<PipelineConfig, Exit> {
        let print_after = passes_named(&self.print_after, "--print-after")?;
        let disabled = passes_named(&self.disable_pass, "--disable-pass")?;
        if let Some(pass) = disabled.iter().find(|p| p.required()) {
            report_error(format_args!(
                "--disable-pass {}: the VM requires this pass's output, so it cannot be left out",
                pass.name()
            ));
            return Err(Exit::Usage);
        }
        let mut config = load_config(self.passes.as_deref())?;
        let debug = &mut config.debug;
        debug
            .print_after
            .extend(print_after.iter().map(|p| p.name()));
        debug.print_after_all |= self.print_after_all;
        debug.time_passes |= self.time_passes;
        debug.skip.extend(disabled.iter().map(|p| p.name()));
        Ok(config)
    }

    /// The compiler these flags describe, for entry function `entry` with `params` bound as its
    /// constants. A `passes.toml` that cannot be read or is invalid is reported on stderr.
    fn compiler(&self, entry: &str, params: &HashMap<String, NDArray>) -> Result<Compiler, Exit> {
        let mut compiler = Compiler::new()
            .passes(self.config()?)
            .entry(entry)
            .verify_each(self.verify_each)
            .params(
                params
                    .iter()
                    .map(|(name, array)| (name.clone(), Tensor::from_ndarray(array.clone()))),
            );
        if let Some(level) = self.opt_level {
            compiler = compiler.opt_level(level);
        }
        Ok(compiler)
    }
}

/// The pipeline configuration: the `passes.toml` file `path`, or the built-in default when
/// `None`. A file that cannot be read or is invalid is reported on stderr.
pub(crate) fn load_config(path: Option<&Path>) -> Result<PipelineConfig, Exit> {
    match path {
        Some(path) => PipelineConfig::load(path).map_err(|err| {
            report_diagnostic(&err);
            Exit::UserError
        }),
        None => Ok(PipelineConfig::default_pipeline()),
    }
}

/// Binds `params` as constants of `@entry` and runs the pipeline `pipeline` names on a
/// type-checked module ([`Compiler::lower`]): the module the VM compiles.
pub(crate) fn lower(
    module: &Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
) -> Result<Module, Exit> {
    let compiler = pipeline.compiler(entry, params)?;
    compiler.lower(module).map_err(|error| {
        report_relay_error(&error);
        Exit::UserError
    })
}

/// Compiles a type-checked module for the VM ([`Compiler::compile_timed`]): binds `params` as
/// constants of `@entry`, runs the pipeline, compiles the bytecode and JIT-compiles every static
/// kernel, reporting each kernel that cannot be compiled. Returns the executable and the time
/// each stage took.
pub(crate) fn compile(
    module: &Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
) -> Result<(Executable, CompileTimes), Exit> {
    let compiler = pipeline.compiler(entry, params)?;
    compiler.compile_timed(module).map_err(|error| {
        report_relay_error(&error);
        Exit::UserError
    })
}

/// `compile: 12.30 ms (passes 4.10 ms, bytecode 0.20 ms, kernels 8.00 ms)`.
pub(crate) fn compile_summary(times: &CompileTimes) -> String {
    format!(
        "compile: {} (passes {}, bytecode {}, kernels {})",
        millis(times.total()),
        millis(times.passes),
        millis(times.bytecode),
        millis(times.kernels)
    )
}

/// A duration in milliseconds, for the summaries.
pub(crate) fn millis(time: Duration) -> String {
    format!("{:.2} ms", time.as_secs_f64() * 1000.0)
}
