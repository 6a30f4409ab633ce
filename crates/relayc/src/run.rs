//! `relayc run`: runs a function of a Relay file on the Relay VM (or, with `--executor interp`,
//! in the reference interpreter) on inputs from `.npy`/`.npz` files or seeded random data, and
//! prints the result or saves it (SPEC §5).
//!
//! On the VM the file is type-checked, `--params` are bound as constants, the pass pipeline
//! lowers it, the bytecode compiler and the kernel JIT turn it into an executable
//! (`relay::Compiler`, as `relayc build` compiles), and the remaining parameters of the entry
//! are bound from `--input` and `--random-inputs`. Every input is checked against its
//! parameter's type before anything runs, with the same messages for both executors.
//! `--repeat N` (or `--duration`, after `--warmup` runs) times the runs, `--profile` prints the VM's kernel, instruction and allocator
//! tables; both go to stderr, the result to stdout.
//!
//! An executable file (`relayc build FILE -o OUT.ro`; recognized by its magic bytes, or by the
//! name `.ro`) is loaded instead ([`Executable::load`]: validated, kernels JIT-compiled) and
//! runs the same way: its entry's parameters are the remaining ones (`--params` given to
//! `build` are constants in it), bound from `--input`, `--params` and `--random-inputs` with the
//! same checks and messages, and its result prints with the constructor names the file keeps.

use std::fmt::{self, Write as _};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode};
use relay::interp::InterpOptions;
use relay::ir::{Module, NDArray, Source, Symbol, Type, Value};
use relay::npy;
use relay::{Executable, Vm, VmError, VmOptions};

use crate::compile::{PipelineArgs, compile, compile_summary, lower, millis};
use crate::diagnostics::{report_diagnostic, report_error, report_relay_error};
use crate::inputs::{
    Bound, InputArgs, Param, bind_arguments, defined_functions, executable_functions,
    function_params, read_inputs_file, split_params, vm_function_params,
};
use crate::timing::TimingArgs;
use crate::{Exit, write_stdout};

/// The options of `relayc run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The Relay file, or the executable file (`.ro`, from `relayc build FILE -o OUT.ro`), to
    /// run.
    #[arg(value_name = "FILE|EXE.ro")]
    file: PathBuf,
    /// The global function to run.
    #[arg(long, default_value = "main", value_name = "NAME")]
    entry: String,
    /// Binds parameter `%NAME` of the entry function to the tensor in a `.npy` file
    /// (repeatable).
    #[arg(long = "input", value_name = "NAME=PATH.npy", value_parser = parse_input)]
    inputs: Vec<(String, PathBuf)>,
    /// Binds parameters by name to the tensors of a `.npz` file as run-time inputs (tvmc's
    /// `--inputs`); every entry must name a parameter, and `--input` overrides an entry.
    #[arg(long = "inputs", value_name = "INPUTS.npz")]
    inputs_file: Option<PathBuf>,
    /// Binds parameters by name to the tensors of a `.npz` file (on the VM as constants at
    /// build time, TVM's `bind_params_by_name`; for an executable file, as inputs); parameters
    /// it does not name stay inputs.
    #[arg(long, value_name = "W.npz")]
    params: Option<PathBuf>,
    /// Fills every unbound tensor parameter with random data from this seed (floats uniform in
    /// [-1, 1), signed integers in [-10, 10), unsigned integers in [0, 10), booleans 0 or 1).
    #[arg(long, value_name = "SEED")]
    random_inputs: Option<u64>,
    /// Writes the result to a `.npy` file (a single tensor) or a `.npz` file (every tensor leaf
    /// in depth-first order under keys "0", "1", ...) instead of printing it.
    #[arg(long, value_name = "PATH.npy|PATH.npz")]
    output: Option<PathBuf>,
    /// Deflates the entries of the `--output` `.npz` file, as `np.savez_compressed` does.
    #[arg(long, requires = "output")]
    compress: bool,
    /// What runs the program. The interpreter runs the program as written, or, given
    /// `--passes` or `--opt-level`, the lowered module the VM would compile.
    #[arg(long, value_enum, default_value_t = Executor::Vm)]
    executor: Executor,
    /// The pipeline that lowers the program for the VM.
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// How many runs are timed.
    #[command(flatten)]
    timing: TimingArgs,
    /// Prints the VM's profile on stderr after the run(s): per kernel and per instruction
    /// kind, and the storage allocator's statistics (VM only).
    #[arg(long)]
    profile: bool,
    /// The profile's format (implies --profile): the tables, JSON with every row of them, or
    /// a Chrome trace (chrome://tracing, Perfetto) with a span per VM function call and per
    /// kernel call on each thread.
    #[arg(long, value_enum, value_name = "FORMAT")]
    profile_format: Option<ProfileFormat>,
    /// Writes the profile to this file instead of stderr (implies --profile).
    #[arg(long, value_name = "FILE")]
    profile_out: Option<PathBuf>,
    /// The most call frames live at once; deeper recursion is an error.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    max_frames: usize,
    /// Kernel threads: 0 = every core, 1 = the calling thread only, at most 1024 (VM only)
    /// [default: 0].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=MAX_THREADS))]
    threads: Option<u16>,
    /// The host kernels' instruction set: portable, avx2 or avx512, one this CPU runs (VM
    /// only), to test and benchmark every path on one machine [default: $RELAYC_ISA, else the
    /// best the CPU has].
    #[arg(long, value_name = "ISA", value_parser = host_kernels)]
    isa: Option<&'static relay::Ops>,
    /// Runs an ONNX decoder with past (Hugging Face's exporters' `input_ids`,
    /// `attention_mask`, `past_key_values.N.key`/`.value` → `logits`, `present.N.*`) in a greedy
    /// generation loop compiled with it, and prints the generated ids.
    #[command(flatten)]
    generation: GenerationArgs,
}

/// `relayc run MODEL.onnx --generate`'s options.
#[derive(Debug, Args)]
pub struct GenerationArgs {
    /// Wraps the ONNX decoder with past in a greedy generation loop: its inputs become
    /// `prompt` (token ids), `new_tokens` and `eos`, given by the options below or as inputs.
    #[arg(long)]
    generate: bool,
    /// The prompt's token ids: `--prompt 464,2068,7586`.
    #[arg(
        long,
        value_name = "ID,ID,...",
        requires = "generate",
        value_delimiter = ','
    )]
    prompt: Vec<i64>,
    /// How many ids to generate at most.
    #[arg(long, value_name = "N", default_value_t = 32, requires = "generate")]
    new_tokens: i32,
    /// The end-of-sequence id that stops the generation (kept in the output); none when
    /// negative.
    #[arg(long, value_name = "ID", default_value_t = -1, requires = "generate", allow_negative_numbers = true)]
    eos: i64,
}

impl GenerationArgs {
    /// The loop's inputs the options give, with `--generate`: the prompt when given, the
    /// counts always.
    fn options(&self) -> Vec<(String, NDArray)> {
        if !self.generate {
            return Vec::new();
        }
        let mut given = vec![
            (
                "new_tokens".to_owned(),
                relay::Tensor::scalar(self.new_tokens).into_ndarray(),
            ),
            (
                "eos".to_owned(),
                relay::Tensor::scalar(self.eos).into_ndarray(),
            ),
        ];
        if !self.prompt.is_empty() {
            let n = self.prompt.len() as i64;
            if let Ok(t) = relay::Tensor::from_slice(&self.prompt, &[n]) {
                given.push(("prompt".to_owned(), t.into_ndarray()));
            }
        }
        given
    }
}

/// The host kernels of the instruction set `--isa` names, if this CPU runs it.
fn host_kernels(name: &str) -> Result<&'static relay::Ops, relay::IsaError> {
    name.parse().and_then(relay::Ops::for_isa)
}

impl RunArgs {
    /// Where the entry function's arguments come from.
    fn input_args<'a>(&'a self, given: &'a [(String, NDArray)]) -> InputArgs<'a> {
        InputArgs {
            params: self.params.as_deref(),
            inputs: &self.inputs,
            inputs_file: self.inputs_file.as_deref().map(|path| (path, given)),
            random_inputs: self.random_inputs,
            constants: &[],
            options: &[],
        }
    }
}

/// With `--generate`, a usage error unless the entry function is a generation loop (its
/// parameters include `new_tokens`).
fn check_generation(args: &RunArgs, entry: &str, params: &[Param<'_>]) -> Option<Exit> {
    if !args.generation.generate || params.iter().any(|(name, _)| *name == "new_tokens") {
        return None;
    }
    report_error(format_args!(
        "--generate runs an ONNX decoder with past, or a generation loop `relayc import \
         --generate` wrote (inputs `prompt`, `new_tokens`, `eos`); `@{entry}` of `{}` has no \
         parameter `%new_tokens`",
        args.file.display()
    ));
    Some(Exit::Usage)
}

/// The most kernel threads `--threads` accepts: each is an OS thread started up front.
const MAX_THREADS: i64 = 1024;

/// The executors `--executor` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Executor {
    /// The Relay virtual machine: bytecode and JIT-compiled kernels.
    Vm,
    /// The reference interpreter.
    Interp,
}

/// The formats of `--profile-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProfileFormat {
    /// Tables: kernels, instruction kinds, the storage allocator.
    Table,
    /// The same rows as JSON.
    Json,
    /// The Chrome trace event format: the run's timeline.
    Chrome,
}

impl RunArgs {
    /// Whether the VM profiles the run(s): `--profile` or a flag that implies it.
    fn profiling(&self) -> bool {
        self.profile || self.profile_format.is_some() || self.profile_out.is_some()
    }
}

/// The two output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutputKind {
    Npy,
    Npz,
}

/// Parses `NAME=PATH` for `--input`.
fn parse_input(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            let name = name.strip_prefix('%').unwrap_or(name);
            Ok((name.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("expected NAME=PATH.npy, got `{text}`")),
    }
}

/// `relayc run FILE ...`.
pub fn run(args: &RunArgs) -> Exit {
    if args.executor == Executor::Interp {
        for (given, flag) in [
            (args.profiling(), "--profile"),
            (args.threads.is_some(), "--threads"),
            (args.isa.is_some(), "--isa"),
        ] {
            if given {
                report_error(format_args!(
                    "{flag} needs the VM: the reference interpreter (--executor interp) has no \
                     profiler, no kernel threads and no host kernels"
                ));
                return Exit::Usage;
            }
        }
    }
    let output_kind = match &args.output {
        None => None,
        Some(path) => match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => Some(OutputKind::Npy),
            Some("npz") => Some(OutputKind::Npz),
            _ => {
                report_error(format_args!(
                    "--output `{}` must end in `.npy` or `.npz`",
                    path.display()
                ));
                return Exit::Usage;
            }
        },
    };

    if args.compress && output_kind != Some(OutputKind::Npz) {
        report_error(format_args!(
            "--compress deflates the entries of a .npz --output; a .npy file is not compressed"
        ));
        return Exit::Usage;
    }
    let given = match &args.inputs_file {
        Some(path) => match read_inputs_file(path) {
            Ok(given) => given,
            Err(error) => {
                report_error(format_args!("{error}"));
                return Exit::UserError;
            }
        },
        None => Vec::new(),
    };
    if is_executable(&args.file) {
        return run_executable(args, output_kind, &given);
    }

    // An ONNX model is imported first; its initializers are bound as `--params` entries,
    // `--input` and `--inputs` take its inputs' ONNX names, and integer inputs (shapes, axes,
    // indices) are constants of the import.
    let generating_onnx = args.generation.generate && crate::onnx::is_onnx(&args.file);
    let (imported, renamed, given) = if generating_onnx {
        match crate::onnx::load_generation(&args.file) {
            Some(imported) => (Some(imported), args.inputs.clone(), given),
            None => return Exit::UserError,
        }
    } else if crate::onnx::is_onnx(&args.file) {
        match crate::onnx::load_with_inputs(&args.file, &args.inputs, &given) {
            Some((imported, rest, given)) => (Some(imported), rest, given),
            None => return Exit::UserError,
        }
    } else {
        (None, args.inputs.clone(), given)
    };
    let module = match &imported {
        Some(imported) => imported.module.clone(),
        None => match crate::load_typed(&args.file) {
            Some(module) => module,
            None => return Exit::UserError,
        },
    };
    let options = args.generation.options();
    let input_args = InputArgs {
        inputs: &renamed,
        constants: imported.as_ref().map_or(&[][..], |m| m.params.as_slice()),
        options: &options,
        ..args.input_args(&given)
    };
    let entry = entry_name(args);
    let Some(global) = module.function(Symbol::intern(entry)) else {
        report_error(format_args!(
            "no function `@{entry}` in `{}`; {}",
            args.file.display(),
            defined_functions(&module)
        ));
        return Exit::UserError;
    };

    let params = function_params(&global.func);
    if let Some(exit) = check_generation(args, entry, &params) {
        return exit;
    }
    let Some(bound) = bound_or_report(bind_arguments(&input_args, entry, &params)) else {
        return Exit::UserError;
    };

    let result = match args.executor {
        Executor::Vm => run_vm(args, &module, entry, bound),
        Executor::Interp => run_interp(args, &module, entry, bound),
    };
    let result = match result {
        Ok(result) => result,
        Err(exit) => return exit,
    };
    let ty = relay::interp::result_type(&module, entry);
    finish(args, output_kind, &result, ty.as_ref(), &module)
}

/// `relayc run EXE.ro ...`: loads the executable file and runs its entry function on the VM.
fn run_executable(
    args: &RunArgs,
    output_kind: Option<OutputKind>,
    given: &[(String, NDArray)],
) -> Exit {
    let compiler_flag = args
        .pipeline
        .first_given()
        .or_else(|| (args.executor == Executor::Interp).then_some("--executor interp"));
    if let Some(flag) = compiler_flag {
        report_error(format_args!(
            "{flag} cannot be used with `{}`: the executable is already compiled (pipeline \
             flags go to `relayc build`, and the interpreter runs Relay text files)",
            args.file.display()
        ));
        return Exit::Usage;
    }

    let start = Instant::now();
    let exe = match Executable::load(&args.file) {
        Ok(exe) => exe,
        Err(error) => {
            report_diagnostic(&error);
            return Exit::UserError;
        }
    };
    let load = start.elapsed();
    let entry = entry_name(args);
    let Some((_, func)) = exe.global(entry) else {
        report_error(format_args!(
            "no function `@{entry}` in `{}`; {}",
            args.file.display(),
            executable_functions(&exe)
        ));
        return Exit::UserError;
    };
    let params = vm_function_params(func);
    if let Some(exit) = check_generation(args, entry, &params) {
        return exit;
    }
    let options = args.generation.options();
    let input_args = InputArgs {
        options: &options,
        ..args.input_args(given)
    };
    let Some(bound) = bound_or_report(bind_arguments(&input_args, entry, &params)) else {
        return Exit::UserError;
    };
    // `--params` given to `build` are constants now; entries of a `--params` given here name
    // parameters that remain, which are arguments like any other.
    let inputs: Vec<Value> = bound.into_iter().map(|b| Value::tensor(b.array)).collect();
    let prepared = format!("load: {}", millis(load));
    let result = match execute(args, &exe, entry, &inputs, &prepared, None) {
        Ok(result) => result,
        Err(exit) => return exit,
    };
    let types = Module {
        types: exe.types.clone(),
        ..Module::default()
    };
    finish(args, output_kind, &result, func.ret_type.as_ref(), &types)
}

/// Whether `path` is an executable file rather than Relay text: its name ends in `.ro` (a file
/// that then lacks the magic bytes gets the loader's error), or it starts with
/// [`relay::EXECUTABLE_MAGIC`]. A file that cannot be read is not one (the text path reports it).
fn is_executable(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "ro") {
        return true;
    }
    let mut magic = [0u8; relay::EXECUTABLE_MAGIC.len()];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut magic))
        .is_ok_and(|()| magic == relay::EXECUTABLE_MAGIC)
}

/// The entry function's name, without a leading `@`.
fn entry_name(args: &RunArgs) -> &str {
    args.entry.strip_prefix('@').unwrap_or(&args.entry)
}

/// The bound parameters, or `None` after reporting every problem on stderr.
fn bound_or_report(bound: Result<Vec<Bound>, Vec<String>>) -> Option<Vec<Bound>> {
    match bound {
        Ok(bound) => Some(bound),
        Err(errors) => {
            for error in errors {
                report_error(format_args!("{error}"));
            }
            None
        }
    }
}

/// Writes the result to `--output`, or prints it readably as a value of type `ty` (ADTs with
/// the constructor names of `module`'s type definitions).
fn finish(
    args: &RunArgs,
    output_kind: Option<OutputKind>,
    result: &Value,
    ty: Option<&Type>,
    module: &Module,
) -> Exit {
    match (output_kind, &args.output) {
        (Some(kind), Some(path)) => write_output(result, kind, path, args.compress),
        _ => {
            let mut text = relay::interp::format_value(result, ty, module);
            if !text.ends_with('\n') {
                text.push('\n');
            }
            write_stdout(&text)
        }
    }
}

/// Compiles the module for the VM (binding `--params` as constants) and runs the entry
/// function on the other arguments ([`execute`]).
fn run_vm(args: &RunArgs, module: &Module, entry: &str, bound: Vec<Bound>) -> Result<Value, Exit> {
    let (params, inputs) = split_params(bound);
    let (exe, times) = compile(module, entry, &params, &args.pipeline)?;
    execute(
        args,
        &exe,
        entry,
        &inputs,
        &compile_summary(&times),
        module.source.as_deref(),
    )
}

/// Runs the entry function of `exe` on `inputs`, `--repeat` times, printing on stderr the
/// `prepared` line (the compile or load time) and the run times with `--repeat`, and the profile
/// with `--profile`. A run-time error is reported against `source`, the program's text, when
/// known.
fn execute(
    args: &RunArgs,
    exe: &Executable,
    entry: &str,
    inputs: &[Value],
    prepared: &str,
    source: Option<&Source>,
) -> Result<Value, Exit> {
    let options = VmOptions {
        max_frames: args.max_frames,
        threads: args.threads.map_or(0, usize::from),
        profile: args.profiling(),
        trace: args.profile_format == Some(ProfileFormat::Chrome),
        ops: args.isa,
        ..VmOptions::default()
    };
    let mut vm = Vm::with_options(exe, options);
    let (result, runs) = args.timing.run(|| vm.invoke(entry, inputs));
    let result = result.map_err(|error| {
        match &error {
            relay::Error::Run(error) => report_diagnostic(&VmFailure::new(error, source)),
            other => report_relay_error(other),
        }
        Exit::UserError
    })?;

    let mut report = String::new();
    if args.timing.timed() || args.profiling() {
        let _ = writeln!(report, "{prepared}");
    }
    if args.timing.timed() {
        report.push_str(&args.timing.summary(&runs));
    }
    if args.profiling() {
        let profile = profile_text(args, exe, &mut vm);
        match &args.profile_out {
            Some(path) => {
                if let Err(error) = std::fs::write(path, profile) {
                    report_error(format_args!("cannot write `{}`: {error}", path.display()));
                    return Err(Exit::UserError);
                }
            }
            None => {
                report.push('\n');
                report.push_str(&profile);
            }
        }
    }
    // A failed write to stderr is ignored: the timings are a report, not the run's output.
    let _ = std::io::stderr().lock().write_all(report.as_bytes());
    Ok(result)
}

/// The VM's profile in `--profile-format`: the tables (kernels and instruction kinds, the
/// allocator's statistics, then the VM's deepest call stack and the kernels it compiled for
/// argument shapes while running, separated by blank lines), their rows as JSON, or the
/// Chrome trace.
fn profile_text(args: &RunArgs, exe: &Executable, vm: &mut Vm<'_>) -> String {
    let Some(profile) = vm.take_profile() else {
        return "the VM recorded no profile\n".to_string();
    };
    let allocator = vm.allocator_stats();
    match args.profile_format.unwrap_or(ProfileFormat::Table) {
        ProfileFormat::Table => {
            let machine = format!(
                "{:<22}{:>14}\n  {:<20}{:>14}\n  {:<20}{:>14}\n",
                "virtual machine",
                "count",
                "peak frames",
                vm.inner().peak_frames(),
                "kernels compiled",
                exe.cache.compiled(),
            );
            let tables = [profile.to_string(), allocator.to_string(), machine];
            let sections: Vec<&str> = tables.iter().map(|t| t.trim_end_matches('\n')).collect();
            sections.join("\n\n") + "\n"
        }
        ProfileFormat::Json => format!("{:#}\n", profile.to_json(&allocator)),
        ProfileFormat::Chrome => {
            let functions: Vec<&str> = exe.functions.iter().map(|f| f.name.as_str()).collect();
            let kernels: Vec<&str> = exe.kernels.iter().map(|k| k.name.as_str()).collect();
            let trace = profile.trace.unwrap_or_default();
            format!("{}\n", trace.chrome_json(&functions, &kernels))
        }
    }
}

/// Runs the entry function in the reference interpreter, `--repeat` times: on the module as
/// written with every argument, or, when pipeline flags are given, on the module the VM would
/// compile (with `--params` bound as constants).
fn run_interp(
    args: &RunArgs,
    module: &Module,
    entry: &str,
    bound: Vec<Bound>,
) -> Result<Value, Exit> {
    let (program, values) = if args.pipeline.given() {
        let (params, inputs) = split_params(bound);
        let lowered = lower(module, entry, &params, &args.pipeline)?;
        (lowered, inputs)
    } else {
        let values = bound.into_iter().map(|b| Value::tensor(b.array)).collect();
        (module.clone(), values)
    };
    let options = InterpOptions {
        max_frames: args.max_frames,
    };
    let (result, runs) = args
        .timing
        .run(|| relay::interp::run(&program, entry, values.clone(), &options));
    let result = result.map_err(|error| {
        report_diagnostic(&error);
        Exit::UserError
    })?;
    if args.timing.timed() {
        let _ = std::io::stderr()
            .lock()
            .write_all(args.timing.summary(&runs).as_bytes());
    }
    Ok(result)
}

/// Writes the result to `--output` (deflated with `--compress`).
fn write_output(result: &Value, kind: OutputKind, path: &Path, compress: bool) -> Exit {
    let written = match kind {
        OutputKind::Npy => match result {
            Value::Tensor(array) => npy::write_npy_file(path, array),
            other => {
                report_error(format_args!(
                    "the result is {}, which a .npy file cannot hold; use --output {}",
                    other.kind_name(),
                    path.with_extension("npz").display()
                ));
                return Exit::UserError;
            }
        },
        OutputKind::Npz => {
            let leaves = result.tensor_leaves();
            let entries: Vec<(String, &NDArray)> = leaves
                .iter()
                .enumerate()
                .map(|(i, leaf)| (i.to_string(), &**leaf))
                .collect();
            if compress {
                npy::write_npz_compressed_file(path, &entries)
            } else {
                npy::write_npz_file(path, &entries)
            }
        }
    };
    match written {
        Ok(()) => Exit::Success,
        Err(error) => {
            report_error(format_args!("{error}"));
            Exit::UserError
        }
    }
}

/// The report of a VM run-time error: the error itself, shown against the program's text with a
/// label where its span starts, when the program was compiled from that text.
struct VmFailure<'a> {
    /// The error.
    error: &'a VmError,
    /// The program's text, when the error has a span in it.
    src: Option<NamedSource<String>>,
    /// The byte offset the span starts at.
    offset: usize,
}

impl<'a> VmFailure<'a> {
    /// The report of `error`, raised running a program compiled from the text `source` (when
    /// known: an executable file keeps only the locations' text, not their spans).
    fn new(error: &'a VmError, source: Option<&Source>) -> VmFailure<'a> {
        match (error.span, source) {
            (Some(span), Some(source)) => VmFailure {
                error,
                src: Some(NamedSource::new(&source.name, source.text.clone())),
                // As `Source::location` does, a span past the end points at the end.
                offset: (span.lo as usize).min(source.text.len()),
            },
            _ => VmFailure {
                error,
                src: None,
                offset: 0,
            },
        }
    }
}

impl fmt::Debug for VmFailure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.error, f)
    }
}

impl fmt::Display for VmFailure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.error, f)
    }
}

impl std::error::Error for VmFailure<'_> {}

impl Diagnostic for VmFailure<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.error.code()
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.error.help()
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.src.as_ref().map(|src| src as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.src.as_ref()?;
        let label = LabeledSpan::new_with_span(Some("here".to_string()), (self.offset, 0));
        Some(Box::new(std::iter::once(label)))
    }
}
