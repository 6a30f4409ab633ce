//! The `relayc` command line: `check` parses Relay files and reports diagnostics, `fmt` prints
//! the canonical text of a file, `opt` runs a pass pipeline, `build` compiles a file for the VM
//! and writes the executable file (or prints its lowered IR, bytecode, loop nests, Cranelift
//! IR or machine code, for the host or another `--target`), `run` runs a function of a file or
//! an executable on the Relay VM or in the reference interpreter, `disasm` prints the bytecode
//! of an executable (SPEC §5); `--version` says what the host's kernels are compiled for.
//!
//! Exit codes: 0 success, 1 user error (a bad program, an unreadable file), 2 bad usage. Nothing
//! here panics on I/O errors: output goes through `writeln!` and every error is handled, so a
//! closed pipe or a full disk ends the process with a message instead of a panic.

mod build;
mod compile;
mod diagnostics;
mod disasm;
mod inputs;
mod onnx;
mod opt;
mod run;
mod timing;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use relay::ir::{Module, PrintOptions};

use crate::diagnostics::{report_diagnostic, report_error};

/// A compiler for Apache TVM's Relay IR.
#[derive(Debug, Parser)]
#[command(name = "relayc", version)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Parse and type-check each file and report diagnostics on stderr; exit 1 if any file
    /// has errors.
    Check {
        /// The Relay files to check.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Print the canonical text of a Relay file on stdout.
    Fmt {
        /// The Relay file to print.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Write `/* ty=... */` comments with the inferred types.
        #[arg(long)]
        show_types: bool,
    },
    /// Run a pass pipeline on a Relay file and print the transformed module.
    Opt(opt::OptArgs),
    /// Run the pass pipeline on a Relay file and compile it to VM bytecode and its kernels to
    /// machine code, writing the executable file with `-o OUT.ro`; `--emit` prints the lowered
    /// module, the bytecode, the kernels' loop nests, their Cranelift IR or their machine code
    /// instead (`--target` for another instruction set).
    Build(build::BuildArgs),
    /// Run a function of a Relay file or an executable file (.ro) on the VM (or a Relay file
    /// in the reference interpreter) on inputs from .npy/.npz files and print or save the
    /// result.
    Run(run::RunArgs),
    /// Import an ONNX model: write it as Relay text (MODEL.relay) and its initializers as a
    /// .npz that `run --params` binds; `run MODEL.onnx` imports and runs in one step.
    Import(onnx::ImportArgs),
    /// Print the bytecode of an executable file (.ro), as `build --emit bytecode` prints it for
    /// its source.
    Disasm {
        /// The executable file.
        #[arg(value_name = "EXE.ro")]
        file: PathBuf,
    },
}

/// The process exit codes of SPEC §5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    /// Everything worked.
    Success,
    /// A bad program, an unreadable file or a failed write.
    UserError,
    /// The command line itself was wrong.
    Usage,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        match exit {
            Exit::Success => ExitCode::SUCCESS,
            Exit::UserError => ExitCode::from(1),
            Exit::Usage => ExitCode::from(2),
        }
    }
}

fn main() -> ExitCode {
    let parsed = Cli::command()
        .long_version(long_version())
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version requests are "errors" that print to stdout and exit 0; usage
            // errors print to stderr and exit 2. A failed write is ignored: there is nowhere
            // left to report it.
            let _ = err.print();
            return ExitCode::from(err.exit_code().clamp(0, 255) as u8);
        }
    };
    // A bad `RELAYC_ISA` is an error here rather than silently ignored by the kernels.
    if let Err(error) = relay::Isa::from_env() {
        report_error(format_args!("{}: {error}", relay::ISA_VAR));
        return Exit::Usage.into();
    }
    let exit = match cli.command {
        Command::Check { files } => check(&files),
        Command::Fmt { file, show_types } => fmt(&file, show_types),
        Command::Opt(args) => opt::opt(&args),
        Command::Build(args) => build::build(&args),
        Command::Run(args) => run::run(&args),
        Command::Import(args) => onnx::import(&args),
        Command::Disasm { file } => disasm::disasm(&file),
    };
    exit.into()
}

/// What `relayc --version` prints after `relayc`: the version, the host triple, the Cranelift
/// ISA features the JIT compiles kernels with (detected on this CPU), the instruction set of the
/// host kernels (GEMM, dot products, depthwise convolutions, recurrences: `avx512`, `avx2` or
/// `portable`, and `RELAYC_ISA` when it picks another than the CPU's best) and the
/// architectures `build --target` compiles for. (`relayc -V` prints the version alone.)
fn long_version() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let features = match relay::listing::Target::host() {
            Ok(host) => host.enabled_features().join(" "),
            Err(error) => format!("none ({error})"),
        };
        format!(
            "{}\nhost: {}\nkernel features (Cranelift): {features}\nhost kernels: {}\n\
             build --target: {}",
            env!("CARGO_PKG_VERSION"),
            relay::listing::host_triple(),
            host_kernels(),
            relay::listing::ARCHITECTURES.join(", ")
        )
    })
}

/// The host kernels' instruction set, and whether `RELAYC_ISA` chose it.
fn host_kernels() -> String {
    let detected = relay::Isa::detected();
    match relay::Isa::from_env() {
        Ok(Some(isa)) if isa != detected => {
            format!("{isa} ({}; the CPU has {detected})", relay::ISA_VAR)
        }
        Ok(_) => detected.to_string(),
        Err(error) => format!("{detected} ({}: {error})", relay::ISA_VAR),
    }
}

/// `relayc check FILE...`: parses and type-checks every file, reporting each file's
/// diagnostics (warnings too) and going on with the next; fails if any file failed.
fn check(files: &[PathBuf]) -> Exit {
    let mut failed = false;
    for file in files {
        if load_typed(file).is_none() {
            failed = true;
        }
    }
    if failed {
        Exit::UserError
    } else {
        Exit::Success
    }
}

/// `relayc fmt FILE [--show-types]`: prints the canonical text on stdout.
/// With `--show-types` the file is type-checked first and printed with `/* ty=... */` comments.
fn fmt(file: &Path, show_types: bool) -> Exit {
    let module = if show_types {
        load_typed(file)
    } else {
        load(file)
    };
    let Some(module) = module else {
        return Exit::UserError;
    };
    let text = relay::ir::print_module(&module, &PrintOptions { show_types });
    write_stdout(&text)
}

/// Reads, parses and type-checks one file, reporting warnings on stderr. On failure reports
/// why on stderr and returns `None`.
fn load_typed(file: &Path) -> Option<Module> {
    let module = load(file)?;
    match relay::check(&module) {
        Ok(warnings) => {
            for warning in &warnings {
                report_diagnostic(warning.as_ref());
            }
            Some(module)
        }
        Err(errors) => {
            report_diagnostic(errors.as_ref());
            None
        }
    }
}

/// Reads and parses one file. On failure reports why on stderr and returns `None`.
fn load(file: &Path) -> Option<Module> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(err) => {
            report_error(format_args!("cannot read `{}`: {err}", file.display()));
            return None;
        }
    };
    let name = file.to_string_lossy();
    match relay::parse_unchecked(&text, &name) {
        Ok(module) => Some(module),
        Err(errors) => {
            report_diagnostic(errors.as_ref());
            None
        }
    }
}

/// Prints `text` on stdout; a closed pipe (`relayc fmt x.relay | head`) ends quietly, as Unix
/// tools do.
pub(crate) fn write_stdout(text: &str) -> Exit {
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Exit::Success,
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Exit::Success,
        Err(err) => {
            report_error(format_args!("cannot write to stdout: {err}"));
            Exit::UserError
        }
    }
}
