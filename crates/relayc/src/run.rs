//! `relayc run`: runs a function of a Relay file in the reference interpreter on inputs from
//! `.npy`/`.npz` files or seeded random data, and prints the result or saves it (SPEC §5).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use relay_interp::{InterpOptions, SplitMix64};
use relay_ir::{Dim, Function, NDArray, Symbol, Type, TypeKind, Value};
use relay_runtime::npy::{self, shape_tuple};

use crate::diagnostics::{report_diagnostic, report_error};
use crate::{Exit, write_stdout};

/// The options of `relayc run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The Relay file to run.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The global function to run.
    #[arg(long, default_value = "main", value_name = "NAME")]
    entry: String,
    /// Binds parameter `%NAME` of the entry function to the tensor in a `.npy` file
    /// (repeatable).
    #[arg(long = "input", value_name = "NAME=PATH.npy", value_parser = parse_input)]
    inputs: Vec<(String, PathBuf)>,
    /// Binds parameters by name to the tensors of a `.npz` file; parameters it does not name
    /// stay inputs.
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
    /// What runs the program.
    #[arg(long, value_enum, default_value_t = Executor::Interp)]
    executor: Executor,
    /// The most call frames live at once; deeper recursion is an error.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    max_frames: usize,
}

/// The executors `--executor` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Executor {
    /// The reference interpreter.
    Interp,
    /// The virtual machine (not implemented yet).
    Vm,
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
    if args.executor == Executor::Vm {
        report_error(format_args!(
            "the VM executor is not implemented yet, use --executor interp"
        ));
        return Exit::Usage;
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

    let Some(module) = crate::load_typed(&args.file) else {
        return Exit::UserError;
    };
    let entry = args.entry.strip_prefix('@').unwrap_or(&args.entry);
    let Some(global) = module.function(Symbol::intern(entry)) else {
        let globals: Vec<String> = module
            .functions
            .iter()
            .map(|f| format!("`@{}`", f.name))
            .collect();
        let defined = if globals.is_empty() {
            "it defines no functions".to_string()
        } else {
            format!("it defines {}", globals.join(", "))
        };
        report_error(format_args!(
            "no function `@{entry}` in `{}`; {defined}",
            args.file.display()
        ));
        return Exit::UserError;
    };

    let values = match bind_arguments(args, entry, &global.func) {
        Ok(values) => values,
        Err(errors) => {
            for error in errors {
                report_error(format_args!("{error}"));
            }
            return Exit::UserError;
        }
    };

    let options = InterpOptions {
        max_frames: args.max_frames,
    };
    let result = match relay_interp::run(&module, entry, values, &options) {
        Ok(result) => result,
        Err(error) => {
            report_diagnostic(&error);
            return Exit::UserError;
        }
    };

    match (output_kind, &args.output) {
        (Some(kind), Some(path)) => write_output(&result, kind, path),
        _ => {
            let ty = relay_interp::result_type(&module, entry);
            let mut text = relay_interp::format_value(&result, ty.as_ref(), &module);
            if !text.ends_with('\n') {
                text.push('\n');
            }
            write_stdout(&text)
        }
    }
}

/// Where the value of one parameter came from.
enum Binding {
    /// `--input NAME=PATH`.
    Input(NDArray, PathBuf),
    /// An entry of `--params`.
    Param(NDArray),
}

/// Builds the entry function's arguments in parameter order from `--params`, `--input` and
/// `--random-inputs`, checking each against its parameter's type. Returns every problem found.
fn bind_arguments(args: &RunArgs, entry: &str, func: &Function) -> Result<Vec<Value>, Vec<String>> {
    let names: Vec<&str> = func.params.iter().map(|p| p.name().as_str()).collect();
    let position = |name: &str| names.iter().position(|&n| n == name);
    let mut bound: Vec<Option<Binding>> = func.params.iter().map(|_| None).collect();
    let mut errors = Vec::new();

    if let Some(path) = &args.params {
        match npy::read_npz_file(path) {
            // As TVM's `bind_params_by_name`, names that are not parameters are ignored.
            Ok(entries) => {
                for (name, array) in entries {
                    let name = name.strip_prefix('%').unwrap_or(&name);
                    if let Some(i) = position(name) {
                        bound[i] = Some(Binding::Param(array));
                    }
                }
            }
            Err(error) => errors.push(error.to_string()),
        }
    }

    let mut seen: Vec<&str> = Vec::new();
    for (name, path) in &args.inputs {
        if seen.contains(&name.as_str()) {
            errors.push(format!("--input `{name}` is given more than once"));
            continue;
        }
        seen.push(name);
        let Some(i) = position(name) else {
            let listed = if names.is_empty() {
                "it has no parameters".to_string()
            } else {
                let list: Vec<String> = names.iter().map(|n| format!("`%{n}`")).collect();
                format!("its parameters are {}", list.join(", "))
            };
            errors.push(format!(
                "--input `{name}`: `@{entry}` has no parameter `%{name}`; {listed}"
            ));
            continue;
        };
        match npy::read_npy_file(path) {
            // An explicit input takes precedence over an entry of `--params`.
            Ok(array) => bound[i] = Some(Binding::Input(array, path.clone())),
            Err(error) => errors.push(format!("input `{name}`: {error}")),
        }
    }

    let mut rng = args.random_inputs.map(SplitMix64::new);
    let mut values = Vec::with_capacity(func.params.len());
    for (param, binding) in func.params.iter().zip(bound) {
        let name = param.name().as_str();
        let ty = param.checked_type().or(param.ty());
        let array = match binding {
            Some(Binding::Input(array, path)) => {
                let from = format!(" in `{}`", path.display());
                check_input(name, ty, array, &from)
            }
            Some(Binding::Param(array)) => {
                let from = match &args.params {
                    Some(path) => format!(" in `{}`", path.display()),
                    None => String::new(),
                };
                check_input(name, ty, array, &from)
            }
            None => match rng.as_mut() {
                Some(rng) => random_input(name, ty, rng),
                None => Err(missing_input(name, ty)),
            },
        };
        match array {
            Ok(array) => values.push(Value::tensor(array)),
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(errors)
    }
}

/// Describes a tensor for error messages: "a float64 tensor of shape (8, 16)".
fn describe(array: &NDArray) -> String {
    format!(
        "a {} tensor of shape {}",
        array.dtype(),
        shape_tuple(array.shape())
    )
}

/// Checks a given tensor against its parameter's type (an unknown type accepts any tensor).
fn check_input(
    name: &str,
    ty: Option<&Type>,
    array: NDArray,
    from: &str,
) -> Result<NDArray, String> {
    let Some(ty) = ty else {
        return Ok(array);
    };
    let fits = match ty.kind() {
        TypeKind::Tensor { shape, dtype } => {
            *dtype == array.dtype()
                && shape.len() == array.ndim()
                && shape.iter().zip(array.shape()).all(|(d, &n)| match d {
                    Dim::Known(k) => *k == n,
                    Dim::Any => true,
                })
        }
        TypeKind::Var(_) | TypeKind::Incomplete => true,
        TypeKind::Tuple(_) | TypeKind::Func(_) | TypeKind::Adt { .. } | TypeKind::Ref(_) => false,
    };
    if fits {
        Ok(array)
    } else {
        Err(format!(
            "input `{name}`: expected `{ty}`, got {}{from}",
            describe(&array)
        ))
    }
}

/// The error for a parameter nothing binds.
fn missing_input(name: &str, ty: Option<&Type>) -> String {
    let of_type = ty.map(|t| format!(" of type `{t}`")).unwrap_or_default();
    format!("missing input `{name}`{of_type}: pass --input {name}=PATH.npy or --random-inputs SEED")
}

/// A random tensor of a parameter's type (`relay_interp::random_tensor`), or why there is none.
fn random_input(name: &str, ty: Option<&Type>, rng: &mut SplitMix64) -> Result<NDArray, String> {
    relay_interp::random_tensor(ty, rng).map_err(|why| {
        format!("cannot make a random input `{name}`: {why}; pass --input {name}=PATH.npy")
    })
}

/// Writes the result to `--output`.
fn write_output(result: &Value, kind: OutputKind, path: &Path) -> Exit {
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
            npy::write_npz_file(path, &entries)
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
