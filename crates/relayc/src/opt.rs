//! `relayc opt`: runs a pass pipeline on a Relay file and prints the transformed module.
//!
//! The pipeline is the built-in default (the repository's `passes.toml`), a `passes.toml` given
//! with `--passes`, or the passes named with `--pass`; the other flags override the file's
//! settings. The module goes to stdout or `-o`; the debugging output the flags ask for
//! (`--print-*`, `--time-passes`, `--stats`) and every diagnostic go to stderr.

use std::path::{Path, PathBuf};

use clap::Args;
use relay::ir::{Module, PrintOptions};
use relay::passes::{MAX_OPT_LEVEL, Pass, PassManager, pass_by_name, unknown_pass_help};

use crate::compile::load_config;
use crate::diagnostics::{report_error, report_relay_error};
use crate::{Exit, load_typed, write_stdout};

/// The options of `relayc opt`.
#[derive(Debug, Args)]
pub struct OptArgs {
    /// The Relay file to transform.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Reads the pipeline from a `passes.toml` file instead of the built-in default.
    #[arg(long, value_name = "passes.toml")]
    passes: Option<PathBuf>,
    /// Runs this pass (repeatable, in order) instead of the pipeline's pass list; options and
    /// debug settings still come from `--passes` if given.
    #[arg(long = "pass", value_name = "NAME")]
    pass: Vec<String>,
    /// Sets a pass option, as a `[passes.PASS]` table of `passes.toml` would (repeatable).
    #[arg(long, value_name = "PASS.OPTION=VALUE", value_parser = parse_pass_option)]
    pass_option: Vec<(String, String, String)>,
    /// The optimization level (0 to 3): passes above it are skipped unless required.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_OPT_LEVEL)))]
    opt_level: Option<u32>,
    /// Prints the module on stderr before each run of this pass (repeatable).
    #[arg(long, value_name = "NAME")]
    print_before: Vec<String>,
    /// Prints the module on stderr after each run of this pass (repeatable).
    #[arg(long, value_name = "NAME")]
    print_after: Vec<String>,
    /// Prints the module on stderr after every pass.
    #[arg(long)]
    print_after_all: bool,
    /// Type-checks and verifies the output of every pass.
    #[arg(long)]
    verify_each: bool,
    /// Prints each pass's wall time, share and statistics on stderr.
    #[arg(long)]
    time_passes: bool,
    /// The `--time-passes` report as a table or as JSON (implies --time-passes).
    #[arg(long, value_enum, value_name = "FORMAT")]
    time_passes_format: Option<TimePassesFormat>,
    /// Prints the statistics the passes report on stderr.
    #[arg(long)]
    stats: bool,
    /// Writes the transformed module to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
}

/// The formats of `--time-passes-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum TimePassesFormat {
    /// A table: pass, time, share, statistics.
    Table,
    /// The same rows as JSON.
    Json,
}

/// `relayc opt FILE ...`.
pub fn opt(args: &OptArgs) -> Exit {
    // Bad pass names on the command line are usage errors, reported before any file is read.
    let passes = match passes_named(&args.pass, "--pass") {
        Ok(passes) => passes,
        Err(exit) => return exit,
    };
    for (names, flag) in [
        (&args.print_before, "--print-before"),
        (&args.print_after, "--print-after"),
    ] {
        if let Err(exit) = passes_named(names, flag) {
            return exit;
        }
    }

    let mut config = match load_config(args.passes.as_deref()) {
        Ok(config) => config,
        Err(exit) => return exit,
    };
    if !passes.is_empty() {
        config.passes = passes;
    }
    if let Some(level) = args.opt_level {
        config.opt_level = level;
    }
    let debug = &mut config.debug;
    debug.verify_each |= args.verify_each;
    debug.time_passes |= args.time_passes || args.time_passes_format.is_some();
    debug.print_after_all |= args.print_after_all;
    let mut manager = PassManager::from_config(&config)
        .stats(args.stats)
        .time_passes_json(args.time_passes_format == Some(TimePassesFormat::Json));
    for (pass, option, value) in &args.pass_option {
        if let Err(message) = manager.set_option(pass, option, value) {
            report_error(format_args!(
                "--pass-option {pass}.{option}={value}: {message}"
            ));
            return Exit::Usage;
        }
    }
    for name in &args.print_before {
        manager = manager.print_before(name);
    }
    for name in &args.print_after {
        manager = manager.print_after(name);
    }

    let Some(module) = load_typed(&args.file) else {
        return Exit::UserError;
    };
    match run_pipeline(&manager, module) {
        Ok(module) => write_module(&module, args.output.as_deref()),
        Err(exit) => exit,
    }
}

/// Runs `manager`'s pipeline on a type-checked module ([`relay::run_passes`]), writing its
/// debugging output to stderr. A pass error is reported on stderr against the input's text.
fn run_pipeline(manager: &PassManager, module: Module) -> Result<Module, Exit> {
    relay::run_passes(manager, module).map_err(|error| {
        report_relay_error(&error);
        Exit::UserError
    })
}

/// Parses `PASS.OPTION=VALUE` for `--pass-option`.
fn parse_pass_option(text: &str) -> Result<(String, String, String), String> {
    let parsed = text.split_once('=').and_then(|(name, value)| {
        let (pass, option) = name.split_once('.')?;
        let nonempty = !pass.is_empty() && !option.is_empty() && !value.is_empty();
        nonempty.then(|| (pass.to_string(), option.to_string(), value.to_string()))
    });
    parsed.ok_or_else(|| format!("expected PASS.OPTION=VALUE, got `{text}`"))
}

/// The passes `names` name, or a usage error naming the valid ones.
pub(crate) fn passes_named(names: &[String], flag: &str) -> Result<Vec<&'static dyn Pass>, Exit> {
    names
        .iter()
        .map(|name| {
            pass_by_name(name).ok_or_else(|| {
                report_error(format_args!(
                    "unknown pass `{name}` given to {flag}\n  help: {}",
                    unknown_pass_help(name)
                ));
                Exit::Usage
            })
        })
        .collect()
}

/// Prints the module to `output` or stdout.
pub(crate) fn write_module(module: &Module, output: Option<&Path>) -> Exit {
    write_text(
        &relay::ir::print_module(module, &PrintOptions::default()),
        output,
    )
}

/// Writes `text` to the file `output`, or to stdout when `None`.
pub(crate) fn write_text(text: &str, output: Option<&Path>) -> Exit {
    match output {
        Some(path) => match std::fs::write(path, text.as_bytes()) {
            Ok(()) => Exit::Success,
            Err(err) => {
                report_error(format_args!("cannot write `{}`: {err}", path.display()));
                Exit::UserError
            }
        },
        None => write_stdout(text),
    }
}
