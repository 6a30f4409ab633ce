//! `relayc build`: lowers a Relay file with the pass pipeline (as `relayc opt` does) and compiles
//! every kernel — every primitive function (`Primitive=1`) of the lowered module — with the
//! Cranelift kernel compiler (`relay-kernel`).
//!
//! `--emit ir` prints the lowered module, `--emit kernels` each kernel's loop nest and
//! `--emit clif` each kernel's Cranelift IR, on stdout or to `-o`. Without `--emit` the kernels
//! are compiled to machine code and a one-line summary per kernel goes to stderr; writing an
//! executable (`-o OUT.ro`, `--emit bytecode`) comes with the VM.
//!
//! Every kernel is attempted before failing: each one that cannot be compiled (an operator
//! without a compute definition, a dynamic shape, ...) is reported, naming it, and the exit code
//! is then 1 with nothing written.

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use relay_ir::{Function, Module, Source};
use relay_kernel::KernelError;

use crate::Exit;
use crate::diagnostics::{report_diagnostic, report_error};
use crate::opt::{lower_file, write_module, write_text};

/// The options of `relayc build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The Relay file to build.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Reads the pipeline from a `passes.toml` file instead of the built-in default.
    #[arg(long, value_name = "passes.toml")]
    passes: Option<PathBuf>,
    /// Prints this instead of compiling the kernels to machine code.
    #[arg(long, value_enum, value_name = "WHAT")]
    emit: Option<Emit>,
    /// Writes what `--emit` prints to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
}

/// What `--emit` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// The lowered module: the text the VM compiles.
    Ir,
    /// The loop nest of every kernel.
    Kernels,
    /// The Cranelift IR of every kernel (its body and its packed entry).
    Clif,
}

/// `relayc build FILE ...`.
pub fn build(args: &BuildArgs) -> Exit {
    if args.emit.is_none()
        && let Some(output) = &args.output
    {
        report_error(format_args!(
            "-o `{}` currently needs --emit ir|kernels|clif: writing an executable comes with \
             the VM",
            output.display()
        ));
        return Exit::Usage;
    }

    let module = match lower_file(&args.file, args.passes.as_deref()) {
        Ok(module) => module,
        Err(exit) => return exit,
    };
    let output = args.output.as_deref();
    let result = match args.emit {
        Some(Emit::Ir) => return write_module(&module, output),
        Some(what) => emit(&relay_kernel::primitive_functions(&module), what)
            .map(|text| write_text(&text, output)),
        None => compile(&relay_kernel::primitive_functions(&module)).map(|()| Exit::Success),
    };
    match result {
        Ok(exit) => exit,
        Err(failures) => {
            for failure in &failures {
                report_diagnostic(&KernelFailure::new(failure, &module));
            }
            Exit::UserError
        }
    }
}

/// A kernel that could not be compiled: its name, its primitive function and why.
struct Failure {
    /// The kernel's name.
    kernel: String,
    /// Its primitive function.
    func: Function,
    /// Why.
    error: KernelError,
}

/// The loop nests (`Emit::Kernels`) or Cranelift IR (`Emit::Clif`) of every kernel, each after
/// a `// kernel NAME` line; or every kernel that failed.
fn emit(kernels: &[(String, Function)], what: Emit) -> Result<String, Vec<Failure>> {
    let mut text = String::new();
    let mut failures = Vec::new();
    for (name, func) in kernels {
        if relay_kernel::is_dynamic(func) {
            if !text.is_empty() {
                text.push('\n');
            }
            let _ = writeln!(text, "// kernel {name}: {DYNAMIC}");
            continue;
        }
        let lowered = relay_kernel::lower_primitive(func, name).and_then(|loops| match what {
            Emit::Clif => relay_kernel::codegen::emit_clif(&loops),
            Emit::Ir | Emit::Kernels => Ok(loops.to_string()),
        });
        match lowered {
            Ok(body) => {
                if !text.is_empty() {
                    text.push('\n');
                }
                let _ = writeln!(text, "// kernel {name}");
                text.push_str(&body);
                if !body.ends_with('\n') {
                    text.push('\n');
                }
            }
            Err(error) => failures.push(Failure {
                kernel: name.clone(),
                func: func.clone(),
                error,
            }),
        }
    }
    if failures.is_empty() {
        Ok(text)
    } else {
        Err(failures)
    }
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
            let _ = writeln!(stderr, "kernel {name}: {DYNAMIC}");
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
                func: func.clone(),
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

/// What `build` says of a kernel with dynamic (`?`) dimensions.
const DYNAMIC: &str = "dynamic shapes; compiled when called, for the argument shapes \
                       (relay_kernel::compile_primitive_for)";

/// `"s"` unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A duration in milliseconds, for the summary.
fn millis(time: Duration) -> String {
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
    let span = failure.func.body.span();
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
