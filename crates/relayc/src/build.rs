//! `relayc build`: lowers a Relay file with the pass pipeline (as `relayc opt` does), compiles
//! it to VM bytecode (`relay-vm`) and compiles every kernel — every primitive function
//! (`Primitive=1`) of the lowered module — with the Cranelift kernel compiler (`relay-kernel`).
//!
//! `--emit ir` prints the lowered module, `--emit bytecode` every VM function, `--emit kernels`
//! each kernel's loop nest and `--emit clif` each kernel's Cranelift IR, on stdout or to `-o`.
//! Without `--emit`, `-o OUT.ro` writes the executable file (DESIGN §7: the bytecode, the
//! constant pool with the bound `--params`, the kernels as canonical text; `relayc run OUT.ro`
//! runs it, `relayc disasm OUT.ro` prints its bytecode), after JIT-compiling every static kernel
//! so that a kernel that cannot be compiled fails the build, not the first run. Without `--emit`
//! or `-o` the kernels are compiled to machine code and a one-line summary per kernel goes to
//! stderr.
//!
//! Every kernel is attempted before failing: each one that cannot be compiled (an operator
//! without a compute definition, a dynamic shape, ...) is reported, naming it, and the exit code
//! is then 1 with nothing written.
//!
//! The steps from a type-checked module to a runnable [`Executable`] — binding `--params`,
//! the pipeline, the bytecode compiler, the kernel JIT — are here once ([`compile_for_vm`]);
//! `relayc run` uses them too.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use relay_ir::{Function, Module, NDArray, Source, Symbol};
use relay_kernel::KernelError;
use relay_passes::{MAX_OPT_LEVEL, PassManager};
use relay_vm::Executable;

use crate::diagnostics::report_diagnostic;
use crate::opt::{load_config, run_pipeline, write_module, write_text};
use crate::{Exit, load_typed};

/// The pipeline flags `build` and `run` share.
#[derive(Debug, Args)]
pub struct PipelineArgs {
    /// Reads the pipeline from a `passes.toml` file instead of the built-in default.
    #[arg(long, value_name = "passes.toml")]
    pub passes: Option<PathBuf>,
    /// The optimization level (0 to 3): passes above it are skipped unless required.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_OPT_LEVEL)))]
    pub opt_level: Option<u32>,
}

impl PipelineArgs {
    /// Whether either flag was given.
    pub fn given(&self) -> bool {
        self.passes.is_some() || self.opt_level.is_some()
    }
}

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
}

/// `relayc build FILE ...`.
pub fn build(args: &BuildArgs) -> Exit {
    let Some(module) = load_typed(&args.file) else {
        return Exit::UserError;
    };
    let params = match &args.params {
        Some(path) => match crate::run::read_params(path, &module, "main") {
            Ok(params) => params,
            Err(exit) => return exit,
        },
        None => HashMap::new(),
    };
    if args.emit.is_none()
        && let Some(output) = &args.output
    {
        return write_executable(module, &params, &args.pipeline, output);
    }
    let module = match lower(module, "main", &params, &args.pipeline) {
        Ok(module) => module,
        Err(exit) => return exit,
    };
    let output = args.output.as_deref();
    let result = match args.emit {
        Some(Emit::Ir) => return write_module(&module, output),
        Some(Emit::Bytecode) => {
            return match compile_bytecode(&module) {
                Ok(exe) => write_text(&bytecode_text(&exe), output),
                Err(exit) => exit,
            };
        }
        Some(what) => emit(&relay_kernel::primitive_functions(&module), what)
            .map(|text| write_text(&text, output)),
        None => {
            if let Err(exit) = compile_bytecode(&module) {
                return exit;
            }
            compile(&relay_kernel::primitive_functions(&module)).map(|()| Exit::Success)
        }
    };
    match result {
        Ok(exit) => exit,
        Err(failures) => {
            report_failures(&failures, &module);
            Exit::UserError
        }
    }
}

/// `relayc build FILE -o OUT.ro`: compiles the module for the VM ([`compile_for_vm`]: `params`
/// bound as constants of `@main`, the pipeline, the bytecode, every static kernel JIT-compiled)
/// and saves the executable to `output`, with a summary line on stderr. Every problem is
/// reported on stderr, with nothing written.
fn write_executable(
    module: Module,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
    output: &Path,
) -> Exit {
    let (exe, times) = match compile_for_vm(module, "main", params, pipeline) {
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
        "wrote `{}`: {size} bytes ({} function{}, {} kernel{}, {} constant{}); {times}, save {}",
        output.display(),
        exe.functions.len(),
        plural(exe.functions.len()),
        exe.kernels.len(),
        plural(exe.kernels.len()),
        exe.constants.len(),
        plural(exe.constants.len()),
        millis(save)
    );
    Exit::Success
}

/// Every VM function of `exe`, in function-index order, separated by blank lines: what
/// `--emit bytecode` and `relayc disasm` print.
pub(crate) fn bytecode_text(exe: &Executable) -> String {
    let mut text = String::new();
    for (i, function) in exe.functions.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let _ = write!(text, "{function}");
    }
    text
}

/// The wall times of the steps from a type-checked module to a runnable executable.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompileTimes {
    /// Binding the parameters and running the pass pipeline.
    pub passes: Duration,
    /// The bytecode compiler.
    pub bytecode: Duration,
    /// JIT-compiling the static kernels.
    pub kernels: Duration,
}

impl fmt::Display for CompileTimes {
    /// `compile: 12.30 ms (passes 4.10 ms, bytecode 0.20 ms, kernels 8.00 ms)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "compile: {} (passes {}, bytecode {}, kernels {})",
            millis(self.passes + self.bytecode + self.kernels),
            millis(self.passes),
            millis(self.bytecode),
            millis(self.kernels)
        )
    }
}

/// Compiles a type-checked module for the VM: binds `params` as constants of `@entry`, runs
/// the pipeline, compiles the bytecode and JIT-compiles every static kernel. Returns the
/// executable and the time each step took; every problem is reported on stderr and the error
/// is the exit code.
pub fn compile_for_vm(
    module: Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
) -> Result<(Executable, CompileTimes), Exit> {
    let start = Instant::now();
    let lowered = lower(module, entry, params, pipeline)?;
    let passes = start.elapsed();
    let start = Instant::now();
    let exe = compile_bytecode(&lowered)?;
    let bytecode = start.elapsed();
    let start = Instant::now();
    jit(&exe, &lowered)?;
    let kernels = start.elapsed();
    let times = CompileTimes {
        passes,
        bytecode,
        kernels,
    };
    Ok((exe, times))
}

/// Binds `params` as constants of `@entry` and runs the pipeline `pipeline` names on a
/// type-checked module: the module the VM compiles. Reports every problem on stderr.
pub fn lower(
    module: Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
    pipeline: &PipelineArgs,
) -> Result<Module, Exit> {
    let mut config = load_config(pipeline.passes.as_deref())?;
    if let Some(level) = pipeline.opt_level {
        config.opt_level = level;
    }
    let module = bind_params(module, entry, params)?;
    let mut manager = PassManager::from_config(&config);
    if entry != "main" && module.function(Symbol::intern("main")).is_some() {
        // `eliminate_dead_code` keeps only what `@main` reaches, which might not include the
        // entry; it is an optimization (opt level 1), so it is left out instead.
        manager = manager.skip("eliminate_dead_code");
    }
    run_pipeline(&manager, module)
}

/// TVM's `bind_params_by_name` ([`relay::bind_params`]): `@entry` with each parameter
/// `params` names replaced by its tensor as a constant, type-checked again. Reports a failure
/// on stderr.
fn bind_params(
    module: Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
) -> Result<Module, Exit> {
    if params.is_empty() {
        // Already type-checked, and nothing to bind.
        return Ok(module);
    }
    relay::bind_params(module, entry, params).map_err(|error| {
        report_diagnostic(&error);
        Exit::UserError
    })
}

/// Compiles a lowered module to bytecode, reporting a failure on stderr.
fn compile_bytecode(lowered: &Module) -> Result<Executable, Exit> {
    relay_vm::compile(lowered).map_err(|error| {
        report_diagnostic(&error);
        Exit::UserError
    })
}

/// JIT-compiles every static kernel of `exe` (as [`Executable::jit`]), reporting each one that
/// fails as `relayc build` does.
fn jit(exe: &Executable, lowered: &Module) -> Result<(), Exit> {
    let failures: Vec<Failure> = exe
        .kernels
        .iter()
        .filter(|k| !k.dynamic)
        .filter_map(|k| {
            k.get().err().map(|error| Failure {
                kernel: k.name.clone(),
                func: k.function().cloned(),
                error,
            })
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        report_failures(&failures, lowered);
        Err(Exit::UserError)
    }
}

/// Reports every kernel that failed to compile.
fn report_failures(failures: &[Failure], module: &Module) {
    for failure in failures {
        report_diagnostic(&KernelFailure::new(failure, module));
    }
}

/// A kernel that could not be compiled: its name, its primitive function and why.
struct Failure {
    /// The kernel's name.
    kernel: String,
    /// Its primitive function, when known.
    func: Option<Function>,
    /// Why.
    error: KernelError,
}

/// The loop nests (`Emit::Kernels`) or Cranelift IR (`Emit::Clif`) of every kernel
/// ([`relay_kernel::print_kernels`]); or every kernel that failed.
fn emit(kernels: &[(String, Function)], what: Emit) -> Result<String, Vec<Failure>> {
    let text = match what {
        Emit::Clif => relay_kernel::KernelText::Clif,
        Emit::Ir | Emit::Bytecode | Emit::Kernels => relay_kernel::KernelText::LoopNest,
    };
    relay_kernel::print_kernels(kernels, text).map_err(|failures| {
        failures
            .into_iter()
            .map(|(index, error)| Failure {
                kernel: kernels[index].0.clone(),
                func: Some(kernels[index].1.clone()),
                error,
            })
            .collect()
    })
}

/// Compiles every kernel to machine code, writing a line per kernel compiled (its name, its
/// number of tensor arguments and its compile time) and then a total to stderr; or every
/// kernel that failed.
fn compile(kernels: &[(String, Function)]) -> Result<(), Vec<Failure>> {
    let mut stderr = std::io::stderr().lock();
    let mut failures = Vec::new();
    let mut total = Duration::ZERO;
    // A failed write to stderr is ignored: the summary is a report, not the build's output.
    let mut dynamic = 0;
    for (name, func) in kernels {
        if relay_kernel::is_dynamic(func) {
            let _ = writeln!(stderr, "kernel {name}: {}", relay_kernel::DYNAMIC_NOTE);
            dynamic += 1;
            continue;
        }
        let start = Instant::now();
        let compiled = relay_kernel::compile_primitive(func, name);
        let time = start.elapsed();
        total += time;
        match compiled {
            Ok(kernel) => {
                let args = kernel.spec().args.len();
                let inputs = kernel.num_inputs();
                let _ = writeln!(
                    stderr,
                    "kernel {name}: {args} argument{} ({inputs} in, {} out), compiled in {}",
                    plural(args),
                    args.saturating_sub(inputs),
                    millis(time)
                );
            }
            Err(error) => failures.push(Failure {
                kernel: name.clone(),
                func: Some(func.clone()),
                error,
            }),
        }
    }
    if !failures.is_empty() {
        return Err(failures);
    }
    let compiled = kernels.len() - dynamic;
    if compiled > 0 {
        let _ = writeln!(
            stderr,
            "{compiled} kernel{} compiled in {}",
            plural(compiled),
            millis(total)
        );
    }
    Ok(())
}

/// `"s"` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A duration in milliseconds, for the summary.
pub(crate) fn millis(time: Duration) -> String {
    format!("{:.2} ms", time.as_secs_f64() * 1000.0)
}

/// The report of a kernel that could not be compiled: the kernel compiler's error, with the
/// kernel's name when the error does not already give it, its code and help, and a label on the
/// kernel's root expression in the input file when its span is known.
struct KernelFailure<'a> {
    /// The failure.
    failure: &'a Failure,
    /// The message: the error naming the kernel.
    message: String,
    /// The input file, when the module keeps it.
    src: Option<NamedSource<String>>,
    /// Where in it the kernel's root expression is.
    label: Option<LabeledSpan>,
}

impl<'a> KernelFailure<'a> {
    /// The report of `failure` in the lowered `module`.
    fn new(failure: &'a Failure, module: &Module) -> KernelFailure<'a> {
        let error = failure.error.to_string();
        let named = format!("kernel {}", failure.kernel);
        let message = if error.contains(&named) {
            format!("cannot compile {error}")
        } else {
            format!("cannot compile {named}: {error}")
        };
        let source = module.source.as_deref();
        let label = source.and_then(|source| kernel_label(failure, source));
        let src = match (&label, source) {
            (Some(_), Some(source)) => Some(NamedSource::new(&source.name, source.text.clone())),
            _ => None,
        };
        KernelFailure {
            failure,
            message,
            src,
            label,
        }
    }
}

/// A label on the root expression of a failed kernel's primitive function, if its span lies
/// within the source text.
fn kernel_label(failure: &Failure, source: &Source) -> Option<LabeledSpan> {
    let span = failure.func.as_ref()?.body.span();
    let (lo, hi) = (span.lo as usize, span.hi as usize);
    let valid = lo < hi && hi <= source.text.len();
    valid.then(|| {
        LabeledSpan::new_with_span(
            Some(format!("kernel {} computes this", failure.kernel)),
            (lo, hi - lo),
        )
    })
}

impl fmt::Debug for KernelFailure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.failure.error, f)
    }
}

impl fmt::Display for KernelFailure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KernelFailure<'_> {}

impl Diagnostic for KernelFailure<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.failure.error.code()
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.failure.error.help()
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.src.as_ref().map(|src| src as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let label = self.label.clone()?;
        Some(Box::new(std::iter::once(label)))
    }
}
