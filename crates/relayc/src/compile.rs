//! How `relayc build` and `relayc run` compile: the pipeline flags they share and a
//! [`relay::Compiler`] made from them — the library's compile driver, the one path from a
//! type-checked module to the lowered module or a runnable [`Executable`]. Every problem is
//! reported on stderr and becomes the exit code.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use relay::{CompileTimes, Compiler, PipelineConfig, Tensor};
use relay_ir::{Module, NDArray};
use relay_passes::MAX_OPT_LEVEL;
use relay_vm::Executable;

use crate::Exit;
use crate::diagnostics::{report_diagnostic, report_relay_error};

/// The pipeline flags `build` and `run` share.
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
}

impl PipelineArgs {
    /// Whether either flag was given.
    pub fn given(&self) -> bool {
        self.passes.is_some() || self.opt_level.is_some() || self.verify_each
    }

    /// The compiler these flags describe, for entry function `entry` with `params` bound as its
    /// constants. A `passes.toml` that cannot be read or is invalid is reported on stderr.
    fn compiler(&self, entry: &str, params: &HashMap<String, NDArray>) -> Result<Compiler, Exit> {
        let mut compiler = Compiler::new()
            .passes(load_config(self.passes.as_deref())?)
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
