//! ONNX models on the command line: `relayc import MODEL.onnx` writes the imported Relay text
//! and its initializers as a `.npz`; `relayc run MODEL.onnx` imports first and runs the text
//! with the initializers bound as constants, taking `--input` by ONNX input name.

use std::path::{Path, PathBuf};

use relay::NDArray;
use relay::onnx::{ImportOptions, Imported};

use crate::Exit;
use crate::diagnostics::{report_diagnostic, report_error};

/// `relayc import`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The ONNX model.
    #[arg(value_name = "MODEL.onnx")]
    pub file: PathBuf,
    /// Writes the Relay text here (default: MODEL.relay next to the model).
    #[arg(short, long, value_name = "OUT.relay")]
    pub output: Option<PathBuf>,
    /// Writes the initializers here, by parameter name, for `relayc run --params` (default:
    /// MODEL.npz next to the output).
    #[arg(long, value_name = "WEIGHTS.npz")]
    pub params_out: Option<PathBuf>,
    /// Fixes the shape of an input (by its ONNX name), replacing symbolic or unknown
    /// dimensions: `--input-shape input=1,3,224,224`; may be repeated. Without it they stay
    /// dynamic (`?`), and the module runs at any size.
    #[arg(long, value_name = "NAME=D0,D1,...", value_parser = parse_shape)]
    pub input_shape: Vec<(String, Vec<i64>)>,
    /// Puts the initializers into the text, as constants in its `#[metadata]` section,
    /// instead of a `.npz`: one self-contained file that `relayc run` and `build` take alone.
    #[arg(long)]
    pub keep_params_inline: bool,
    /// Wraps the model, a decoder with past as Hugging Face's exporters write one, in a greedy
    /// generation loop: `@main(%prompt, %new_tokens, %eos, weights...)` returns the generated
    /// ids (`relayc run OUT.relay --params ... --generate`'s options are its inputs).
    #[arg(long, conflicts_with = "input_shape")]
    pub generate: bool,
}

/// `NAME=D0,D1,...`.
pub fn parse_shape(text: &str) -> Result<(String, Vec<i64>), String> {
    let (name, dims) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=D0,D1,..., got `{text}`"))?;
    let dims = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split(',')
            .map(|d| {
                d.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|&d| d >= 0)
                    .ok_or_else(|| format!("dimension `{d}` in `{text}`"))
            })
            .collect::<Result<_, _>>()?
    };
    Ok((name.to_string(), dims))
}

/// Whether `file` is an ONNX model (by its extension).
pub fn is_onnx(file: &Path) -> bool {
    file.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// Imports `file` with the short vectors and the scalars among `inputs` (ONNX names and
/// `.npy` files) and `given` (ONNX names and arrays, from `--inputs`) as constants — the
/// shapes, axes, scales and bounds a graph takes as inputs, which the import then folds,
/// specializing the module to them — and the shapes of the others fixing the model's symbolic
/// dimensions, returning the model and the inputs and arrays left to bind, under their Relay
/// names. Reports failure on stderr.
pub fn load_with_inputs(
    file: &Path,
    inputs: &[(String, PathBuf)],
    given: &[(String, NDArray)],
) -> Option<Loaded> {
    let mut constants = Vec::new();
    let mut rest = Vec::new();
    let mut rest_given = Vec::new();
    // The shapes of the data given: they fix the model's symbolic dimensions.
    let mut shapes = Vec::new();
    for (name, path) in inputs {
        match relay::npy::read_npy_file(path) {
            Ok(array) if is_import_constant(&array) => constants.push((name.clone(), array)),
            Ok(array) => {
                shapes.push((name.clone(), array.shape().to_vec()));
                rest.push((name.clone(), path.clone()));
            }
            Err(_) => rest.push((name.clone(), path.clone())),
        }
    }
    for (name, array) in given {
        if is_import_constant(array) {
            constants.push((name.clone(), array.clone()));
        } else {
            shapes.push((name.clone(), array.shape().to_vec()));
            rest_given.push((name.clone(), array.clone()));
        }
    }
    let imported = import_file(file, &shapes, constants)?;
    let rename = |name: &str| relay_input_name(&imported, name).to_string();
    let rest = rest
        .iter()
        .map(|(n, path)| (rename(n), path.clone()))
        .collect();
    let rest_given = rest_given
        .iter()
        .map(|(n, a)| (rename(n), a.clone()))
        .collect();
    Some((imported, rest, rest_given))
}

/// A model imported for `run`, with the `--input` files and `--inputs` arrays left to bind.
pub type Loaded = (Imported, Vec<(String, PathBuf)>, Vec<(String, NDArray)>);

/// Whether an input array becomes a constant of the import: vectors of a few elements
/// (shapes, axes, repeats, scales) and scalars (bounds, pad values), not data such as token
/// ids or images.
fn is_import_constant(array: &NDArray) -> bool {
    array.ndim() == 0 || array.ndim() == 1 && array.num_elements() <= 16
}

/// Imports `file`, a decoder with past, wrapped in a generation loop
/// ([`relay::generation_loop`]), reporting failure on stderr.
pub fn load_generation(file: &Path) -> Option<Imported> {
    let imported = load(file, &[])?;
    match relay::generation_loop(&imported) {
        Ok(wrapped) => Some(wrapped),
        Err(err) => {
            report_diagnostic(&err);
            None
        }
    }
}

/// Imports `file`, reporting failure on stderr.
pub fn load(file: &Path, input_shapes: &[(String, Vec<i64>)]) -> Option<Imported> {
    import_file(file, input_shapes, Vec::new())
}

/// Imports `file` with these options, reporting failure on stderr.
fn import_file(
    file: &Path,
    input_shapes: &[(String, Vec<i64>)],
    constants: Vec<(String, NDArray)>,
) -> Option<Imported> {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(err) => {
            report_error(format_args!("cannot read `{}`: {err}", file.display()));
            return None;
        }
    };
    let options = ImportOptions {
        base_dir: file.parent().map(Path::to_path_buf),
        input_shapes: input_shapes.to_vec(),
        constants,
    };
    match relay::onnx::import_owned(bytes, &options) {
        Ok(imported) => Some(imported),
        Err(err) => {
            report_diagnostic(&err);
            None
        }
    }
}

/// Writes `imported` to `output` with its initializers bound as constants (TVM's
/// `bind_params_by_name`), printed in the `#[metadata]` section, keeping the import's comment
/// of the input names.
fn write_inline(imported: &Imported, output: &Path) -> Exit {
    let params = imported.params.iter().cloned().collect();
    let module = match relay::bind_params(imported.module.clone(), "main", &params) {
        Ok(m) => m,
        Err(err) => {
            report_diagnostic(&err);
            return Exit::UserError;
        }
    };
    let text = relay::onnx::with_comment(&module, &imported.comment());
    if let Err(err) = std::fs::write(output, text) {
        report_error(format_args!("cannot write `{}`: {err}", output.display()));
        return Exit::UserError;
    }
    eprintln!(
        "wrote {} ({} inputs, {} outputs, {} initializers inline); run it with `relayc run {}`",
        output.display(),
        imported.inputs.len(),
        imported.outputs.len(),
        imported.params.len(),
        output.display()
    );
    Exit::Success
}

/// `relayc import MODEL.onnx ...`.
pub fn import(args: &ImportArgs) -> Exit {
    let imported = match args.generate {
        true => load_generation(&args.file),
        false => load(&args.file, &args.input_shape),
    };
    let Some(imported) = imported else {
        return Exit::UserError;
    };
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| args.file.with_extension("relay"));
    if args.keep_params_inline {
        return write_inline(&imported, &output);
    }
    let params_out = args
        .params_out
        .clone()
        .unwrap_or_else(|| output.with_extension("npz"));
    if let Err(err) = std::fs::write(&output, imported.text()) {
        report_error(format_args!("cannot write `{}`: {err}", output.display()));
        return Exit::UserError;
    }
    let entries: Vec<(String, &NDArray)> = imported
        .params
        .iter()
        .map(|(n, a)| (n.clone(), a))
        .collect();
    if let Err(err) = relay::npy::write_npz_file(&params_out, &entries) {
        report_error(format_args!(
            "cannot write `{}`: {err}",
            params_out.display()
        ));
        return Exit::UserError;
    }
    eprintln!(
        "wrote {} ({} inputs, {} outputs) and {} ({} initializers); run it with `relayc run {} --params {}`",
        output.display(),
        imported.inputs.len(),
        imported.outputs.len(),
        params_out.display(),
        imported.params.len(),
        output.display(),
        params_out.display()
    );
    Exit::Success
}

/// The Relay parameter an `--input` name given for an imported model means: an ONNX input
/// name (or already the Relay one).
pub fn relay_input_name<'a>(imported: &'a Imported, name: &'a str) -> &'a str {
    imported
        .inputs
        .iter()
        .find(|p| p.onnx_name == name)
        .map_or(name, |p| p.relay_name.as_str())
}
