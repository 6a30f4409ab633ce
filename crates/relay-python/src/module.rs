//! `relayc.Module`, `relayc.parse`, `relayc.check` and `relayc.import_onnx`: Relay text and
//! ONNX models in.

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use relay::ir::{Module as IrModule, PrintOptions, print_module};
use relay::onnx::ImportOptions;

use crate::convert::numpy_of;
use crate::errors::{Stage, raise, usage};

/// A parsed and type-checked Relay module (TVM's `IRModule`): what `relayc.compile` takes.
///
/// >>> m = relayc.parse('def @main(%x: Tensor[(2), float32]) { %x + %x }')
/// >>> print(m.astext())
#[pyclass(module = "relayc", frozen)]
pub struct Module {
    pub(crate) inner: IrModule,
    /// ONNX input names of an imported model, with the Relay parameter each became.
    pub(crate) aliases: HashMap<String, String>,
}

#[pymethods]
impl Module {
    /// The module as canonical Relay text (what `relayc opt` prints), which parses back to the
    /// same module.
    fn astext(&self) -> String {
        print_module(&self.inner, &PrintOptions::default())
    }

    fn __str__(&self) -> String {
        self.astext()
    }

    fn __repr__(&self) -> String {
        let mut names: Vec<&str> = self
            .inner
            .functions
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        names.sort_unstable();
        format!("<relayc.Module @{}>", names.join(", @"))
    }
}

impl Module {
    pub(crate) fn new(inner: IrModule) -> Module {
        Module {
            inner,
            aliases: HashMap::new(),
        }
    }
}

/// Parses Relay text and type-checks it.
///
/// `name` names the text in error messages. Raises `relayc.ParseError` for text that does not
/// parse and `relayc.TypeCheckError` for a program that does not type-check; both carry every
/// error found, pointing into the text.
///
/// >>> m = relayc.parse('def @main(%x: Tensor[(2), float32]) { %x + %x }')
#[pyfunction]
#[pyo3(signature = (text, name = "model.relay"))]
pub fn parse(py: Python<'_>, text: &str, name: &str) -> PyResult<Module> {
    let module = parse_text(py, text, name)?;
    check_module(py, &module)?;
    Ok(Module::new(module))
}

/// Type-checks a module (or Relay text, parsed first) and returns its warnings (a `match` that
/// misses a value, a function partitioned for an external compiler), each rendered as text.
/// Raises `relayc.TypeCheckError` on type errors.
///
/// >>> relayc.check('def @main(%x: Tensor[(2), float32]) { %x }')
/// []
#[pyfunction]
#[pyo3(signature = (source, name = "model.relay"))]
pub fn check(py: Python<'_>, source: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    if let Ok(module) = source.cast::<Module>() {
        return check_module(py, &module.get().inner);
    }
    let text: String = source.extract().map_err(|_| {
        usage(
            py,
            Stage::Usage,
            "check() takes a relayc.Module or Relay text",
        )
    })?;
    let module = parse_text(py, &text, name)?;
    check_module(py, &module)
}

/// Imports an ONNX model (a path, or the model's bytes): `(module, params)`, the Relay module
/// and the model's initializers by Relay parameter name, as numpy arrays. Bind them with
/// `relayc.compile(module, params=params)` (as ONNX Runtime holds them), or pass them at run
/// time. `input_shapes` fixes the shapes of graph inputs by ONNX name (dynamic dimensions stay
/// `?` otherwise). Raises `relayc.CompileError` for a model the importer refuses and
/// `relayc.FileError` for a file that cannot be read.
///
/// `generate=True` takes a decoder with past, as Hugging Face's exporters write one, and wraps
/// it in a greedy generation loop: the module's `@main` takes `prompt` (int64 token ids),
/// `new_tokens` (int32) and `eos` (int64, negative for none) and returns the generated ids.
///
/// >>> module, params = relayc.import_onnx("mnist.onnx")
/// >>> exe = relayc.compile(module, params=params)
#[pyfunction]
#[pyo3(signature = (model, input_shapes = None, generate = false))]
pub fn import_onnx<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    input_shapes: Option<HashMap<String, Vec<i64>>>,
    generate: bool,
) -> PyResult<(Module, Bound<'py, PyDict>)> {
    let (module, params) = import(py, model, input_shapes.unwrap_or_default(), generate)?;
    let dict = PyDict::new(py);
    for (name, array) in params {
        dict.set_item(name, numpy_of(py, array.into())?)?;
    }
    Ok((module, dict))
}

/// [`import_onnx`]'s module and initializers (`generate`: wrapped in a generation loop).
pub(crate) fn import(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    input_shapes: HashMap<String, Vec<i64>>,
    generate: bool,
) -> PyResult<(Module, Vec<(String, relay::NDArray)>)> {
    let (bytes, base_dir) = if let Ok(bytes) = model.cast::<PyBytes>() {
        (bytes.as_bytes().to_vec(), None)
    } else {
        let path: PathBuf = model.extract().map_err(|_| {
            usage(
                py,
                Stage::Usage,
                "import_onnx() takes a path or the model's bytes",
            )
        })?;
        let bytes = read_file(py, &path)?;
        (bytes, path.parent().map(PathBuf::from))
    };
    let options = ImportOptions {
        base_dir,
        input_shapes: input_shapes.into_iter().collect(),
        constants: Vec::new(),
    };
    let imported = py
        .detach(move || relay::onnx::import_owned(bytes, &options))
        .map_err(|e| raise(py, Stage::Compile, &e))?;
    let imported = match generate {
        true => py
            .detach(|| relay::generation_loop(&imported))
            .map_err(|e| raise(py, Stage::Compile, &e))?,
        false => imported,
    };
    let aliases = imported
        .inputs
        .iter()
        .map(|port| (port.onnx_name.clone(), port.relay_name.clone()))
        .collect();
    let module = Module {
        inner: imported.module,
        aliases,
    };
    Ok((module, imported.params))
}

/// Reads a file, as `relayc.FileError` when it cannot.
pub(crate) fn read_file(py: Python<'_>, path: &std::path::Path) -> PyResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        usage(
            py,
            Stage::File,
            format!("cannot read `{}`: {e}", path.display()),
        )
    })
}

/// Parses without checking, the GIL released.
pub(crate) fn parse_text(py: Python<'_>, text: &str, name: &str) -> PyResult<IrModule> {
    py.detach(|| relay::parse_unchecked(text, name))
        .map_err(|report| raise(py, Stage::Parse, report.as_ref()))
}

/// Type-checks, the GIL released: the warnings, rendered.
pub(crate) fn check_module(py: Python<'_>, module: &IrModule) -> PyResult<Vec<String>> {
    let warnings = py
        .detach(|| relay::check(module))
        .map_err(|report| raise(py, Stage::TypeCheck, report.as_ref()))?;
    Ok(warnings
        .iter()
        .map(|w| crate::errors::render(w.as_ref()))
        .collect())
}
