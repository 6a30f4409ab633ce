//! The inputs of `relayc run` and the `--params` of `relayc build`: each parameter of the entry
//! function bound, in parameter order, from `--params` (a `.npz` file), `--inputs` (a `.npz`
//! file of run-time inputs), `--input NAME=PATH.npy` or `--random-inputs SEED`, and checked against its parameter's type, with the same messages
//! for a Relay file, an executable file and either executor.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use relay::interp::SplitMix64;
use relay::ir::{Function, Module, NDArray, Symbol, Type, Value};
use relay::npy;
use relay::{Executable, VmFunction};

use crate::Exit;
use crate::diagnostics::report_error;

/// Where `relayc run` takes the entry function's arguments from.
pub(crate) struct InputArgs<'a> {
    /// `--params W.npz`.
    pub params: Option<&'a Path>,
    /// Every `--input NAME=PATH.npy`.
    pub inputs: &'a [(String, PathBuf)],
    /// The arrays of `--inputs INPUTS.npz` by name, and the file's path.
    pub inputs_file: Option<(&'a Path, &'a [(String, NDArray)])>,
    /// `--random-inputs SEED`.
    pub random_inputs: Option<u64>,
    /// Parameters bound like `--params` entries, from memory (an imported model's
    /// initializers).
    pub constants: &'a [(String, relay::NDArray)],
    /// Inputs the options give (`--generate`'s `--prompt`, `--new-tokens` and `--eos`),
    /// under the option's name; `--inputs` and `--input` override them.
    pub options: &'a [(String, relay::NDArray)],
}

/// A parameter of a function: its name and its type, when known.
pub(crate) type Param<'a> = (&'a str, Option<&'a Type>);

/// The parameters of a Relay function, each with its checked type (else its annotation).
pub(crate) fn function_params(func: &Function) -> Vec<Param<'_>> {
    func.params
        .iter()
        .map(|p| (p.name().as_str(), p.checked_type().or(p.ty())))
        .collect()
}

/// The parameters of a VM function: its parameter names and the types the file keeps.
pub(crate) fn vm_function_params(func: &VmFunction) -> Vec<Param<'_>> {
    func.params
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ty = func.param_types.get(i).and_then(Option::as_ref);
            (name.as_str(), ty)
        })
        .collect()
}

/// "it defines `@main`, `@f`" for an executable, in function-index order.
pub(crate) fn executable_functions(exe: &Executable) -> String {
    let mut globals: Vec<(u32, &str)> = exe
        .globals
        .iter()
        .map(|(name, &index)| (index, name.as_str()))
        .collect();
    globals.sort_unstable();
    it_defines(globals.into_iter().map(|(_, name)| name))
}

/// "it defines `@main`, `@f`", for the error naming a missing entry.
pub(crate) fn defined_functions(module: &Module) -> String {
    it_defines(module.functions.iter().map(|f| f.name.as_str()))
}

/// "it defines `@a`, `@b`", or "it defines no functions".
fn it_defines<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let globals: Vec<String> = names.map(|name| format!("`@{name}`")).collect();
    if globals.is_empty() {
        "it defines no functions".to_string()
    } else {
        format!("it defines {}", globals.join(", "))
    }
}

/// One parameter's tensor, checked against its type.
pub(crate) struct Bound {
    /// The parameter's name.
    pub name: String,
    /// The tensor.
    pub array: NDArray,
    /// Whether it came from `--params` (and no `--input` overrode it): the VM binds it as a
    /// constant.
    from_params: bool,
}

/// Splits the bound parameters into those from `--params` (by name, bound as constants) and
/// the others (in parameter order, the arguments).
pub(crate) fn split_params(bound: Vec<Bound>) -> (HashMap<String, NDArray>, Vec<Value>) {
    let mut params = HashMap::new();
    let mut inputs = Vec::new();
    for b in bound {
        if b.from_params {
            params.insert(b.name, b.array);
        } else {
            inputs.push(Value::tensor(b.array));
        }
    }
    (params, inputs)
}

/// Where the value of one parameter came from.
enum Binding {
    /// `--input NAME=PATH`.
    Input(NDArray, PathBuf),
    /// An entry of `--params`.
    Param(NDArray),
}

/// The tensors of the `.npz` file `path` that name parameters of `params`, by parameter
/// position; as TVM's `bind_params_by_name`, names that are not parameters are ignored.
fn params_file(path: &Path, params: &[Param<'_>]) -> Result<Vec<(usize, NDArray)>, String> {
    let entries = npy::read_npz_file(path).map_err(|error| error.to_string())?;
    let mut found = Vec::new();
    for (name, array) in entries {
        let name = name.strip_prefix('%').unwrap_or(&name);
        if let Some(i) = params.iter().position(|&(p, _)| p == name) {
            found.push((i, array));
        }
    }
    Ok(found)
}

/// `--params W.npz` for `relayc build`: the tensors naming parameters of `@entry`, each checked
/// against its parameter's type. Every problem is reported on stderr.
pub(crate) fn read_params(
    path: &Path,
    module: &Module,
    entry: &str,
) -> Result<HashMap<String, NDArray>, Exit> {
    let Some(global) = module.function(Symbol::intern(entry)) else {
        report_error(format_args!(
            "--params `{}` binds parameters of `@{entry}`, but there is no `@{entry}`; {}",
            path.display(),
            defined_functions(module)
        ));
        return Err(Exit::UserError);
    };
    let params = function_params(&global.func);
    let found = params_file(path, &params).map_err(|error| {
        report_error(format_args!("{error}"));
        Exit::UserError
    })?;
    let from = format!(" in `{}`", path.display());
    let mut bound = HashMap::new();
    let mut failed = false;
    for (i, array) in found {
        let Some(&(name, ty)) = params.get(i) else {
            continue;
        };
        match check_input(name, ty, array, &from) {
            Ok(array) => {
                bound.insert(name.to_string(), array);
            }
            Err(error) => {
                report_error(format_args!("{error}"));
                failed = true;
            }
        }
    }
    if failed {
        Err(Exit::UserError)
    } else {
        Ok(bound)
    }
}

/// Binds every parameter of the entry function (`params`: names and types, in order) from
/// `--params`, `--input` and `--random-inputs`, in parameter order, checking each against its
/// parameter's type. Returns every problem found.
pub(crate) fn bind_arguments(
    args: &InputArgs<'_>,
    entry: &str,
    params: &[Param<'_>],
) -> Result<Vec<Bound>, Vec<String>> {
    let names: Vec<&str> = params.iter().map(|&(name, _)| name).collect();
    let position = |name: &str| names.iter().position(|&n| n == name);
    let mut bound: Vec<Option<Binding>> = params.iter().map(|_| None).collect();
    let mut errors = Vec::new();

    if let Some(path) = args.params {
        match params_file(path, params) {
            Ok(found) => {
                for (i, array) in found {
                    if let Some(slot) = bound.get_mut(i) {
                        *slot = Some(Binding::Param(array));
                    }
                }
            }
            Err(error) => errors.push(error),
        }
    }

    for (name, array) in args.constants {
        if let Some(i) = position(name) {
            bound[i] = Some(Binding::Param(array.clone()));
        }
    }

    for (name, array) in args.options {
        if let Some(i) = position(name) {
            bound[i] = Some(Binding::Input(array.clone(), PathBuf::from("--generate")));
        }
    }

    // `--inputs`: every entry names a parameter; an `--input` of the same name overrides it.
    if let Some((path, arrays)) = args.inputs_file {
        for (name, array) in arrays {
            match position(name) {
                Some(i) => bound[i] = Some(Binding::Input(array.clone(), path.to_path_buf())),
                None => errors.push(format!(
                    "--inputs `{}`: `{name}` is not a parameter of `@{entry}`; {}",
                    path.display(),
                    parameter_list(&names)
                )),
            }
        }
    }

    let mut seen: Vec<&str> = Vec::new();
    // Parameters whose input file could not be read: reported once, not also as missing.
    let mut unreadable: Vec<usize> = Vec::new();
    for (name, path) in args.inputs {
        if seen.contains(&name.as_str()) {
            errors.push(format!("--input `{name}` is given more than once"));
            continue;
        }
        seen.push(name);
        let Some(i) = position(name) else {
            errors.push(format!(
                "--input `{name}`: `@{entry}` has no parameter `%{name}`; {}",
                parameter_list(&names)
            ));
            continue;
        };
        match npy::read_npy_file(path) {
            // An explicit input takes precedence over an entry of `--params`.
            Ok(array) => bound[i] = Some(Binding::Input(array, path.clone())),
            Err(error) => {
                errors.push(format!("input `{name}`: {error}"));
                unreadable.push(i);
            }
        }
    }

    let mut rng = args.random_inputs.map(SplitMix64::new);
    let mut values = Vec::with_capacity(params.len());
    for (i, (&(name, ty), binding)) in params.iter().zip(bound).enumerate() {
        if unreadable.contains(&i) {
            continue;
        }
        let from_params = matches!(binding, Some(Binding::Param(_)));
        let array = match binding {
            Some(Binding::Input(array, path)) => {
                let from = format!(" in `{}`", path.display());
                check_input(name, ty, array, &from)
            }
            Some(Binding::Param(array)) => {
                let from = match args.params {
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
            Ok(array) => values.push(Bound {
                name: name.to_string(),
                array,
                from_params,
            }),
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(values)
    } else {
        Err(errors)
    }
}

/// "its parameters are `%a`, `%b`", or "it has no parameters".
fn parameter_list(names: &[&str]) -> String {
    if names.is_empty() {
        "it has no parameters".to_string()
    } else {
        let list: Vec<String> = names.iter().map(|n| format!("`%{n}`")).collect();
        format!("its parameters are {}", list.join(", "))
    }
}

/// The arrays of `--inputs INPUTS.npz`, by name (a leading `%` dropped, as `--input` drops it).
pub(crate) fn read_inputs_file(path: &Path) -> Result<Vec<(String, NDArray)>, String> {
    let entries = npy::read_npz_file(path).map_err(|error| format!("--inputs: {error}"))?;
    Ok(entries
        .into_iter()
        .map(|(name, array)| match name.strip_prefix('%') {
            Some(bare) => (bare.to_owned(), array),
            None => (name, array),
        })
        .collect())
}

/// Checks a given tensor against its parameter's type (an unknown type accepts any tensor).
fn check_input(
    name: &str,
    ty: Option<&Type>,
    array: NDArray,
    from: &str,
) -> Result<NDArray, String> {
    if let Some(error) = not_a_tensor(name, ty) {
        return Err(error);
    }
    let Some(ty) = ty else {
        return Ok(array);
    };
    if relay::ir::tensor_fits(ty, &array) {
        return Ok(array);
    }
    // bfloat16 and float8 inputs come as their bits or as float values (numpy lacks them).
    let narrow = match ty.kind() {
        relay::ir::TypeKind::Tensor { dtype, .. } => array.to_minifloat(*dtype),
        _ => None,
    };
    if let Some(narrow) = narrow.filter(|n| relay::ir::tensor_fits(ty, n)) {
        Ok(narrow)
    } else {
        Err(format!(
            "input `{name}`: expected `{ty}`, got {}{from}",
            relay::describe(&array)
        ))
    }
}

/// The error for a parameter nothing binds.
fn missing_input(name: &str, ty: Option<&Type>) -> String {
    if let Some(error) = not_a_tensor(name, ty) {
        return error;
    }
    let of_type = ty.map(|t| format!(" of type `{t}`")).unwrap_or_default();
    format!(
        "missing input `{name}`{of_type}: pass --input {name}=PATH.npy, --inputs INPUTS.npz or \
         --random-inputs SEED"
    )
}

/// The error for a parameter whose type is known and not a tensor type (a list, a tuple, a
/// function, a reference): no file or seed gives one, so it says how such a function is called.
fn not_a_tensor(name: &str, ty: Option<&Type>) -> Option<String> {
    let ty = ty?;
    if matches!(ty.kind(), relay::ir::TypeKind::Tensor { .. }) {
        return None;
    }
    Some(format!(
        "input `{name}` has type `{ty}`, which is not a tensor: `relayc run` gives tensors only \
         (from .npy/.npz files or --random-inputs); call the function from the library with a \
         `relay::Value` (`relay::Vm::invoke`, README \"From Rust\"), or run a function that \
         takes tensors and builds the value (--entry NAME)"
    ))
}

/// A random tensor of a parameter's type (`relay::interp::random_tensor`), or why there is none.
fn random_input(name: &str, ty: Option<&Type>, rng: &mut SplitMix64) -> Result<NDArray, String> {
    if let Some(error) = not_a_tensor(name, ty) {
        return Err(error);
    }
    relay::interp::random_tensor(ty, rng).map_err(|why| {
        format!("cannot make a random input `{name}`: {why}; pass --input {name}=PATH.npy")
    })
}
