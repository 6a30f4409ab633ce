//! `relayc build`: lowers a Relay file with the pass pipeline (as `relayc opt` does), compiles
//! it to VM bytecode (`relay-vm`) and compiles every kernel — every primitive function
//! (`Primitive=1`) of the lowered module — with the Cranelift kernel compiler (`relay-kernel`).
//! The compiling is the library's (`relay::Compiler`, through [`crate::compile`]), as for
//! `relayc run`.
//!
//! `--emit ir` prints the lowered module, `--emit bytecode` every VM function, `--emit kernels`
//! each kernel's loop nest, `--emit clif` each kernel's Cranelift IR and `--emit asm` its
//! machine code (Cranelift's listing), on stdout or to `-o`. With `--target TARGET` (a triple
//! and optional features, [`relay::listing::Target`]) `--emit clif|asm` compile the kernels for
//! that instruction set instead of the host's: the code is listed, never run, so `--target`
//! with anything else is a usage error, and a kernel the target's backend cannot compile is
//! reported, naming it.
//! Without `--emit`, `-o OUT.ro` writes the executable file (docs/design.md §10: the bytecode, the
//! constant pool with the bound `--params`, the kernels as canonical text; `relayc run OUT.ro`
//! runs it, `relayc disasm OUT.ro` prints its bytecode), after JIT-compiling every static kernel
//! so that a kernel that cannot be compiled fails the build, not the first run. Without `--emit`
//! or `-o` the executable is compiled the same way and a one-line summary per kernel goes to
//! stderr.
//!
//! Every kernel is attempted before failing: each one that cannot be compiled (an operator
//! without a compute definition, a dynamic shape, ...) is reported, naming it, and the exit code
//! is then 1 with nothing written.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use relay::Executable;
use relay::ir::{Module, NDArray};
use relay::listing::{KernelText, Target};
use relay::{CompileTimes, KernelFailure};

use crate::compile::{PipelineArgs, compile, compile_summary, lower, millis};
use crate::diagnostics::{report_diagnostic, report_error, report_relay_error};
use crate::inputs::read_params;
use crate::opt::{write_module, write_text};
use crate::{Exit, load_typed};

/// The options of `relayc build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The Relay file to build.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Binds parameters of `@main` by name to the tensors of a `.npz` file, as constants
    /// (TVM's `bind_params_by_name`); names that are not parameters are ignored.
    #[arg(long, value_name = "W.npz")]
    params: Option<PathBuf>,
    /// The pipeline.
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// Prints this instead of compiling the kernels to machine code.
    #[arg(long, value_enum, value_name = "WHAT")]
    emit: Option<Emit>,
    /// Writes the executable file (`.ro`) here; with `--emit`, writes what it prints here
    /// instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    /// With `--emit clif|asm`: compiles the kernels for this target instead of the host —
    /// TRIPLE[+FEATURES], e.g. `aarch64-unknown-linux-gnu`,
    /// `x86_64-unknown-linux-gnu+avx2,+fma`, `riscv64gc-unknown-linux-gnu+v`.
    #[arg(long, value_name = "TARGET", value_parser = parse_target)]
    target: Option<Target>,
}

/// What `--emit` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// The lowered module: the text the VM compiles.
    Ir,
    /// The VM bytecode of every function, in function-index order.
    Bytecode,
    /// The loop nest of every kernel.
    Kernels,
    /// The Cranelift IR of every kernel (its body and its packed entry).
    Clif,
    /// The machine code of every kernel, as Cranelift lists it.
    Asm,
    /// The schedule of every kernel: its stages, loops (extent, kind, partitions) and GEMMs.
    Schedule,
}

/// `relayc build FILE ...`.
pub fn build(args: &BuildArgs) -> Exit {
    if args.target.is_some() && !matches!(args.emit, Some(Emit::Clif | Emit::Asm)) {
        report_error(format_args!(
            "`--target` needs `--emit clif` or `--emit asm`: kernels compiled for another \
             target are only listed; executables run only on the host"
        ));
        return Exit::Usage;
    }
    // An ONNX model is imported first, its initializers bound as constants.
    let (module, mut params) = if crate::onnx::is_onnx(&args.file) {
        let Some(imported) = crate::onnx::load(&args.file, &[]) else {
            return Exit::UserError;
        };
        (imported.module, imported.params.into_iter().collect())
    } else {
        let Some(module) = load_typed(&args.file) else {
            return Exit::UserError;
        };
        (module, HashMap::new())
    };
    if let Some(path) = &args.params {
        match read_params(path, &module, "main") {
            Ok(given) => params.extend(given),
            Err(exit) => return exit,
        }
    }
    match (args.emit, &args.output) {
        (Some(what), output) => emit(
            &module,
            &params,
            &args.pipeline,
            what,
            args.target.as_ref(),
            output.as_deref(),
        ),
        (None, Some(output)) => write_executable(&module, &params, &args.pipeline, output),
        (None, None) => compile_kernels(&module, &params, &args.pipeline),
    }
}

/// `relayc build FILE --emit WHAT [--target TARGET] [-o OUT]`: lowers the module (`params`
/// bound as constants of `@main`) and prints what `what` asks for, for `target` (the host when
/// `None`), to `output` or stdout.
fn emit(
    module: &Module,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
    what: Emit,
    target: Option<&Target>,
    output: Option<&Path>,
) -> Exit {
    let lowered = match lower(module, "main", params, pipeline) {
        Ok(lowered) => lowered,
        Err(exit) => return exit,
    };
    if pipeline.verify_each
        && let Err(error) = relay::verify_kernels(&lowered)
    {
        report_relay_error(&error);
        return Exit::UserError;
    }
    let text = match what {
        Emit::Ir => return write_module(&lowered, output),
        Emit::Bytecode => match relay::compile_lowered(&lowered) {
            Ok(exe) => exe.disassemble(),
            Err(error) => {
                report_diagnostic(&error);
                return Exit::UserError;
            }
        },
        Emit::Kernels | Emit::Clif | Emit::Asm | Emit::Schedule => {
            match kernels_text(&lowered, what, target) {
                Ok(text) => text,
                Err(failures) => {
                    for failure in &failures {
                        report_diagnostic(failure);
                    }
                    return Exit::UserError;
                }
            }
        }
    };
    write_text(&text, output)
}

/// `relayc build FILE -o OUT.ro`: compiles the module for the VM ([`compile`]: `params` bound
/// as constants of `@main`, the pipeline, the bytecode, every static kernel JIT-compiled) and
/// saves the executable to `output`, with a summary line on stderr. Every problem is reported
/// on stderr, with nothing written.
fn write_executable(
    module: &Module,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
    output: &Path,
) -> Exit {
    let (exe, times) = match compile(module, "main", params, pipeline) {
        Ok(compiled) => compiled,
        Err(exit) => return exit,
    };
    let start = Instant::now();
    if let Err(error) = exe.save(output) {
        report_diagnostic(&error);
        return Exit::UserError;
    }
    let save = start.elapsed();
    let size = std::fs::metadata(output).map_or(0, |m| m.len());
    // A failed write to stderr is ignored: the summary is a report, not the build's output.
    let _ = writeln!(
        std::io::stderr().lock(),
        "wrote `{}`: {size} bytes ({} function{}, {} kernel{}, {} constant{}); {}, save {}",
        output.display(),
        exe.functions.len(),
        plural(exe.functions.len()),
        exe.kernels.len(),
        plural(exe.kernels.len()),
        exe.constants.len(),
        plural(exe.constants.len()),
        compile_summary(&times),
        millis(save)
    );
    Exit::Success
}

/// `relayc build FILE`: compiles the module for the VM as `-o` does ([`compile`]) and writes a
/// line per kernel (its name, its number of tensor arguments and its compile time) and then a
/// total to stderr.
fn compile_kernels(
    module: &Module,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
) -> Exit {
    let (exe, times) = match compile(module, "main", params, pipeline) {
        Ok(compiled) => compiled,
        Err(exit) => return exit,
    };
    // A failed write to stderr is ignored: the summary is a report, not the build's output.
    let _ = std::io::stderr()
        .lock()
        .write_all(kernel_summary(&exe, &times).as_bytes());
    Exit::Success
}

/// A line per kernel of a compiled executable, in kernel-table order, and the total compile
/// time of the static ones.
fn kernel_summary(exe: &Executable, times: &CompileTimes) -> String {
    let mut text = String::new();
    let mut compiled = 0;
    let mut total = Duration::ZERO;
    for (kernel, time) in exe.kernels.iter().zip(&times.each_kernel) {
        let name = &kernel.name;
        let Some(time) = time else {
            // Compiled with the executable (`Executable::jit`): not compiled again here.
            let note = kernel
                .generic_kernel()
                .and_then(|k| k.generic_note())
                .unwrap_or(DYNAMIC);
            let _ = writeln!(text, "kernel {name}: {note}");
            continue;
        };
        // Every static kernel compiled: `get` returns it.
        let Ok(packed) = kernel.get() else {
            continue;
        };
        let args = packed.spec().args.len();
        let inputs = packed.num_inputs();
        let _ = writeln!(
            text,
            "kernel {name}: {args} argument{} ({inputs} in, {} out), compiled in {}",
            plural(args),
            args.saturating_sub(inputs),
            millis(*time)
        );
        compiled += 1;
        total += *time;
    }
    if compiled > 0 {
        let _ = writeln!(
            text,
            "{compiled} kernel{} compiled in {}",
            plural(compiled),
            millis(total)
        );
    }
    text
}

/// The schedules (`Emit::Schedule`), loop nests (`Emit::Kernels`), Cranelift IR (`Emit::Clif`)
/// or machine code (`Emit::Asm`) of every kernel of the lowered `module`, each after a
/// `// kernel NAME` line ([`relay::listing::print_kernels_for`], what the `ir-tests/kernels/`
/// files pin), compiled for `target` (the host when `None`); or every kernel that failed. The
/// machine code, and the Cranelift IR for a `target`, come after a `// target NAME: FEATURES`
/// line.
fn kernels_text(
    module: &Module,
    what: Emit,
    target: Option<&Target>,
) -> Result<String, Vec<KernelFailure>> {
    let text = match what {
        Emit::Schedule => KernelText::Schedule,
        Emit::Clif => KernelText::Clif,
        Emit::Asm => KernelText::Asm,
        Emit::Ir | Emit::Bytecode | Emit::Kernels => KernelText::LoopNest,
    };
    let kernels = relay::listing::primitive_functions(module);
    let listing = relay::listing::print_kernels_for(&kernels, text, target);
    let header = match (target, text) {
        (Some(target), _) => target_line(target),
        (None, KernelText::Asm) => Target::host()
            .map(|host| target_line(&host))
            .unwrap_or_default(),
        _ => String::new(),
    };
    listing
        .map(|listing| header + &listing)
        .map_err(|failures| {
            failures
                .into_iter()
                .map(|(index, error)| {
                    let (name, func) = &kernels[index];
                    KernelFailure::new(name, Some(func.clone()), error, module.source.as_deref())
                })
                .collect()
        })
}

/// The `// target NAME: FEATURES` line heading a listing for `target`: its name and the
/// Cranelift ISA settings that are on.
fn target_line(target: &Target) -> String {
    let features = target.enabled_features();
    let features = if features.is_empty() {
        "(no optional features)".to_owned()
    } else {
        features.join(" ")
    };
    format!("// target {}: {features}\n\n", target.name())
}

/// Parses `--target`'s value; an error is a usage error that lists what is supported.
fn parse_target(text: &str) -> Result<Target, String> {
    Target::parse(text).map_err(|error| error.to_string())
}

/// What `build` says of a kernel with dynamic (`?`) dimensions specialized per shape.
const DYNAMIC: &str = relay::listing::DYNAMIC_NOTE;

/// `"s"` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
