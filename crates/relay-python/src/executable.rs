//! `relayc.compile`, `relayc.load` and `relayc.Executable`: a compiled program, shared by any
//! number of VMs on any threads, saved to and loaded from `.ro` files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use relay::ir::{Module as IrModule, print_type};
use relay::{Compiler, PipelineConfig, Tensor};

use crate::convert::tensor_from;
use crate::errors::{Stage, from_relay, raise, usage};
use crate::module::{Module, check_module, import, parse_text, read_file};

/// A compiled program (TVM's VM `Executable`): bytecode, constants and JIT-compiled kernels.
/// Immutable; one executable serves any number of `relayc.VM`s, on any threads.
#[pyclass(module = "relayc", frozen)]
pub struct Executable {
    pub(crate) inner: Arc<relay::Executable>,
    /// The module holding the program's type definitions (constructor names of results).
    pub(crate) types: Arc<IrModule>,
    /// Kernel threads of the VMs made from it unless they say otherwise (0: every core).
    pub(crate) threads: usize,
    /// ONNX input names, with the parameter of `@main` each became.
    pub(crate) aliases: HashMap<String, String>,
}

/// A global function of an executable: its name, its parameters' names and types, and its
/// result type.
#[pyclass(module = "relayc", frozen, get_all)]
pub struct Function {
    /// The name, without `@`.
    name: String,
    /// `(name, type)` of each parameter, the type as Relay text (`Tensor[(1, 784), float32]`).
    params: Vec<(String, String)>,
    /// The result type as Relay text, when known.
    ret_type: Option<String>,
}

#[pymethods]
impl Function {
    fn __repr__(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(n, t)| format!("%{n}: {t}"))
            .collect();
        let ret = self
            .ret_type
            .as_ref()
            .map(|t| format!(" -> {t}"))
            .unwrap_or_default();
        format!(
            "<relayc.Function @{}({}){ret}>",
            self.name,
            params.join(", ")
        )
    }
}

#[pymethods]
impl Executable {
    /// Writes the executable to a `.ro` file (what `relayc build -o` writes), which
    /// `relayc.load` and `relayc run` read. Raises `relayc.FileError`.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path))
            .map_err(|e| raise(py, Stage::File, &e))
    }

    /// The global functions, sorted by name.
    #[getter]
    fn functions(&self) -> Vec<Function> {
        let mut out: Vec<Function> = self
            .inner
            .globals
            .keys()
            .filter_map(|name| {
                let (_, f) = self.inner.global(name)?;
                let params = f
                    .params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let ty = f.param_types.get(i).and_then(Option::as_ref);
                        (p.clone(), ty.map(print_type).unwrap_or_else(|| "?".into()))
                    })
                    .collect();
                Some(Function {
                    name: name.clone(),
                    params,
                    ret_type: f.ret_type.as_ref().map(print_type),
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The bytecode of every VM function (what `relayc disasm` prints).
    fn disasm(&self) -> String {
        self.inner.disassemble()
    }

    fn __repr__(&self) -> String {
        let mut names: Vec<&str> = self.inner.globals.keys().map(String::as_str).collect();
        names.sort_unstable();
        format!(
            "<relayc.Executable @{}: {} kernels, {} constants>",
            names.join(", @"),
            self.inner.kernels.len(),
            self.inner.constants.len()
        )
    }
}

impl Executable {
    fn new(exe: relay::Executable, threads: usize, aliases: HashMap<String, String>) -> Self {
        let types = IrModule {
            types: exe.types.clone(),
            ..IrModule::default()
        };
        Executable {
            inner: Arc::new(exe),
            types: Arc::new(types),
            threads,
            aliases,
        }
    }
}

/// Compiles a program for the VM (TVM's `relay.vm.compile`); the GIL is released meanwhile.
///
/// `source` is a `relayc.Module`, Relay text, or the path of a `.relay` or `.onnx` file (an
/// ONNX model's initializers become constants, as ONNX Runtime holds them). `params` binds
/// parameters of the entry function by name to arrays, which become constants (TVM's
/// `bind_params_by_name`): weights given this way are packed once for the contraction
/// kernels. `opt_level` overrides the pipeline's (0–3); `passes` is a pass pipeline, a
/// `passes.toml` path or its text; `threads` is the kernel threads of the VMs made from this
/// executable (0: every core). `generate=True` wraps an ONNX decoder with past in a greedy
/// generation loop (see `relayc.import_onnx`). Raises `relayc.ParseError`,
/// `relayc.TypeCheckError`, `relayc.CompileError` or `relayc.FileError`.
///
/// >>> exe = relayc.compile(text, params={"w": w, "b": b})
/// >>> relayc.VM(exe)(x)
#[pyfunction]
#[pyo3(signature = (source, params = None, opt_level = None, passes = None, threads = 0, entry = "main", name = "model.relay", generate = false))]
#[allow(clippy::too_many_arguments)]
pub fn compile(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    params: Option<&Bound<'_, PyDict>>,
    opt_level: Option<u32>,
    passes: Option<&Bound<'_, PyAny>>,
    threads: usize,
    entry: &str,
    name: &str,
    generate: bool,
) -> PyResult<Executable> {
    let (module, mut bound, aliases) = source_module(py, source, name, generate)?;
    if let Some(params) = params {
        for (key, value) in params.iter() {
            let key: String = key.extract()?;
            let array = tensor_from(&value, None, &|| format!("`{key}`"))?;
            bound.push((key, Tensor::from(array)));
        }
    }
    let mut compiler = Compiler::new().entry(entry).params(bound);
    if let Some(level) = opt_level {
        if level > relay::MAX_OPT_LEVEL {
            return Err(usage(
                py,
                Stage::Compile,
                format!("opt_level {level} is not in 0..={}", relay::MAX_OPT_LEVEL),
            ));
        }
        compiler = compiler.opt_level(level);
    }
    if let Some(passes) = passes {
        compiler = compiler.passes(pipeline(py, passes)?);
    }
    let exe = py
        .detach(|| compiler.compile(&module))
        .map_err(|e| from_relay(py, &e))?;
    Ok(Executable::new(exe, threads, aliases))
}

/// Loads a `.ro` file (written by `Executable.save` or `relayc build`), JIT-compiling its
/// kernels; the GIL is released meanwhile. Raises `relayc.FileError` for a file that cannot be
/// read or is not a valid executable.
///
/// >>> exe = relayc.load("model.ro")
#[pyfunction]
pub fn load(py: Python<'_>, path: PathBuf) -> PyResult<Executable> {
    let exe = py
        .detach(|| relay::Executable::load(&path))
        .map_err(|e| raise(py, Stage::File, &e))?;
    Ok(Executable::new(exe, 0, HashMap::new()))
}

/// What to compile: the module, the parameters it brings (an ONNX model's initializers), and
/// the ONNX input names.
type Source = (IrModule, Vec<(String, Tensor)>, HashMap<String, String>);

fn source_module(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    name: &str,
    generate: bool,
) -> PyResult<Source> {
    if generate {
        if !names_onnx(source) {
            return Err(usage(
                py,
                Stage::Usage,
                "generate=True takes an ONNX decoder with past: a path ending in .onnx or \
                 the model's bytes",
            ));
        }
        return onnx_source(py, source, true);
    }
    if let Ok(module) = source.cast::<Module>() {
        let module = module.get();
        return Ok((module.inner.clone(), Vec::new(), module.aliases.clone()));
    }
    if source.cast::<PyBytes>().is_ok() {
        return onnx_source(py, source, false);
    }
    let path = match source.cast::<PyString>() {
        Ok(text) => {
            let text = text.to_cow()?;
            if is_path(&text) || names_a_file(&text) {
                PathBuf::from(text.as_ref())
            } else {
                let module = parse_text(py, &text, name)?;
                check_module(py, &module)?;
                return Ok((module, Vec::new(), HashMap::new()));
            }
        }
        Err(_) => source.extract::<PathBuf>().map_err(|_| {
            usage(
                py,
                Stage::Usage,
                "compile() takes a relayc.Module, Relay text, a path or ONNX model bytes",
            )
        })?,
    };
    match path.extension().and_then(|e| e.to_str()) {
        Some("onnx") => onnx_source(py, source, false),
        Some("ro") => Err(usage(
            py,
            Stage::Usage,
            format!(
                "`{}` is a compiled executable: load it with relayc.load()",
                path.display()
            ),
        )),
        _ => {
            let bytes = read_file(py, &path)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                usage(
                    py,
                    Stage::File,
                    format!("`{}` is not UTF-8 text", path.display()),
                )
            })?;
            let module = parse_text(py, &text, &path.display().to_string())?;
            check_module(py, &module)?;
            Ok((module, Vec::new(), HashMap::new()))
        }
    }
}

/// Whether `source` is ONNX model bytes or a path ending in `.onnx`.
fn names_onnx(source: &Bound<'_, PyAny>) -> bool {
    if source.cast::<PyBytes>().is_ok() {
        return true;
    }
    source.extract::<PathBuf>().is_ok_and(|p| {
        p.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    })
}

fn onnx_source(py: Python<'_>, source: &Bound<'_, PyAny>, generate: bool) -> PyResult<Source> {
    let (module, params) = import(py, source, HashMap::new(), generate)?;
    let params = params
        .into_iter()
        .map(|(n, a)| (n, Tensor::from(a)))
        .collect();
    Ok((module.inner, params, module.aliases))
}

/// Whether a string names a file rather than holding Relay text: one line naming an existing
/// file.
fn is_path(text: &str) -> bool {
    !text.contains('\n') && text.len() < 4096 && Path::new(text).is_file()
}

/// Whether a string that is not an existing file still means one (so that a missing file is a
/// `FileError`, not Relay text that fails to parse): one line ending in `.relay`, `.onnx` or
/// `.ro`.
fn names_a_file(text: &str) -> bool {
    !text.contains('\n')
        && [".relay", ".onnx", ".ro"]
            .iter()
            .any(|ext| text.trim_end().ends_with(ext))
}

/// A pass pipeline from a `passes.toml` path or its text.
fn pipeline(py: Python<'_>, passes: &Bound<'_, PyAny>) -> PyResult<PipelineConfig> {
    let text = match passes.cast::<PyString>() {
        Ok(s) => Some(s.to_cow()?.into_owned()),
        Err(_) => None,
    };
    let (text, name) = match text {
        Some(text) if !is_path(&text) => (text, "passes.toml".to_owned()),
        _ => {
            let path: PathBuf = passes.extract().map_err(|_| {
                usage(
                    py,
                    Stage::Usage,
                    "passes= takes a passes.toml path or its text",
                )
            })?;
            let bytes = read_file(py, &path)?;
            (
                String::from_utf8_lossy(&bytes).into_owned(),
                path.display().to_string(),
            )
        }
    };
    PipelineConfig::parse(&text, &name).map_err(|e| raise(py, Stage::Compile, &e))
}
