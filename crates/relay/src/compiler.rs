//! `Compiler`: from a type-checked module to an [`Executable`], as `relayc build` does: bind
//! parameters to constants (TVM's `bind_params_by_name`), run the pass pipeline, compile the
//! lowered module to bytecode and JIT-compile its kernels.

use std::collections::HashMap;

use miette::NamedSource;
use relay_ir::visit::substitute;
use relay_ir::{Expr, Module, Symbol, VarId};
use relay_passes::{PassManager, PipelineConfig};
use relay_runtime::NDArray;
use relay_runtime::npy::shape_tuple;
use relay_vm::Executable;

use crate::error::Reported;
use crate::{Error, Result, Tensor};

/// Compiles modules for the Relay VM (TVM's `relay.vm.compile`): parameters bound by name
/// become constants, the pass pipeline lowers the module, and the result is compiled to
/// bytecode with every static kernel JIT-compiled.
///
/// ```
/// # fn main() -> Result<(), relay::Error> {
/// let module = relay::parse(
///     "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32], %w: Tensor[(2), float32]) { multiply(%x, %w) }",
///     "scale.relay",
/// )?;
/// let w = relay::Tensor::from_slice(&[10.0f32, 100.0], &[2])?;
/// let exe = relay::Compiler::new()
///     .params([("w".to_string(), w)])
///     .compile(&module)?;
/// let mut vm = relay::Vm::new(&exe);
/// let x = relay::Tensor::from_slice(&[1.0f32, 2.0], &[2])?;
/// let y = relay::Tensor::try_from(vm.invoke("main", &[x])?)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![10.0, 200.0]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Compiler {
    /// The function parameters are bound in (without `@`).
    entry: String,
    /// Values of the entry function's parameters, by name (without `%`).
    params: HashMap<String, NDArray>,
    /// The pass pipeline.
    pipeline: PipelineConfig,
    /// Overrides the pipeline's opt level.
    opt_level: Option<u32>,
}

impl Default for Compiler {
    fn default() -> Compiler {
        Compiler::new()
    }
}

impl Compiler {
    /// A compiler with the default pipeline (the repository's `passes.toml`, as `relayc build`
    /// runs it), binding parameters of `@main`.
    pub fn new() -> Compiler {
        Compiler {
            entry: "main".to_owned(),
            params: HashMap::new(),
            pipeline: PipelineConfig::default_pipeline(),
            opt_level: None,
        }
    }

    /// Binds parameters of the entry function by name (with or without `%`): each becomes a
    /// constant, and disappears from the function's parameters. Names that are not parameters
    /// are ignored, as TVM's `bind_params_by_name` does. A later value for a name replaces an
    /// earlier one.
    pub fn params(mut self, params: impl IntoIterator<Item = (String, Tensor)>) -> Compiler {
        for (name, tensor) in params {
            let name = name.strip_prefix('%').unwrap_or(&name).to_owned();
            self.params.insert(name, tensor.into_ndarray());
        }
        self
    }

    /// Binds one parameter of the entry function (see [`Compiler::params`]).
    pub fn param(self, name: impl Into<String>, value: Tensor) -> Compiler {
        self.params([(name.into(), value)])
    }

    /// Uses this pass pipeline instead of the default one (e.g. one read with
    /// [`PipelineConfig::load`]). It must include the passes the VM requires.
    pub fn passes(mut self, pipeline: PipelineConfig) -> Compiler {
        self.pipeline = pipeline;
        self
    }

    /// Sets the optimization level (0 to [`relay_passes::MAX_OPT_LEVEL`]; higher levels act as
    /// the highest): passes above it are skipped unless the VM requires them.
    pub fn opt_level(mut self, level: u32) -> Compiler {
        self.opt_level = Some(level);
        self
    }

    /// Binds parameters of `entry` (with or without `@`) instead of `@main`'s.
    pub fn entry(mut self, entry: &str) -> Compiler {
        self.entry = entry.strip_prefix('@').unwrap_or(entry).to_owned();
        self
    }

    /// Binds the parameters and runs the pass pipeline: the module [`relay_vm::compile`] takes
    /// (what `relayc build --emit ir` prints). `module` is type-checked again first, so a
    /// module built by hand needs no checking beforehand.
    pub fn lower(&self, module: &Module) -> Result<Module> {
        let module = bind_params(module.clone(), &self.entry, &self.params)?;
        let mut pipeline = self.pipeline.clone();
        if let Some(level) = self.opt_level {
            pipeline.opt_level = level;
        }
        let source = module.source.clone();
        match PassManager::from_config(&pipeline).run(module) {
            Ok((module, _timings)) => Ok(module),
            Err(err) => {
                // Pass errors point into the input; give them its text to show.
                let report = miette::Report::new(err);
                let report = match source {
                    Some(source) => {
                        report.with_source_code(NamedSource::new(&source.name, source.text.clone()))
                    }
                    None => report,
                };
                Err(Error::Pass(Reported(report)))
            }
        }
    }

    /// Lowers the module ([`Compiler::lower`]), compiles it to bytecode and JIT-compiles every
    /// static kernel, so the first run pays no compile time. The executable is immutable and
    /// `Send + Sync`: any number of [`crate::Vm`]s on any threads can run it at once.
    pub fn compile(&self, module: &Module) -> Result<Executable> {
        let lowered = self.lower(module)?;
        let exe = relay_vm::compile(&lowered)?;
        exe.jit().map_err(|errors| Error::Kernel { errors })?;
        Ok(exe)
    }
}

/// Binds parameters of global function `entry` (with or without `@`) to constants by name
/// (with or without `%`), as TVM's `bind_params_by_name`: each bound parameter's uses become
/// the constant and the parameter is removed; names that are not parameters are ignored. The
/// result is type-checked again, so its types reflect the constants.
///
/// Each value must fit its parameter's type: the same dtype and rank, and every known
/// dimension equal (a `?` dimension takes the value's). A mismatch is
/// [`Error::BindParams`], naming the parameter; a name shared by several parameters is
/// [`Error::AmbiguousParam`].
pub fn bind_params(
    mut module: Module,
    entry: &str,
    params: &HashMap<String, NDArray>,
) -> Result<Module> {
    let entry = entry.strip_prefix('@').unwrap_or(entry);
    let params: HashMap<&str, &NDArray> = params
        .iter()
        .map(|(name, array)| (name.strip_prefix('%').unwrap_or(name), array))
        .collect();
    if !params.is_empty() {
        let name = Symbol::intern(entry);
        let Some(global) = module.functions.iter_mut().find(|f| f.name == name) else {
            return Err(Error::NoEntry {
                entry: entry.to_owned(),
            });
        };
        let func = &mut global.func;
        let mut map: HashMap<VarId, Expr> = HashMap::new();
        for param in &func.params {
            let param_name = param.name().as_str();
            let Some(&array) = params.get(param_name) else {
                continue;
            };
            let count = func
                .params
                .iter()
                .filter(|p| p.name().as_str() == param_name)
                .count();
            if count > 1 {
                return Err(Error::AmbiguousParam {
                    name: param_name.to_owned(),
                    entry: entry.to_owned(),
                    count,
                });
            }
            let ty = param.checked_type().or(param.ty());
            if let Some(ty) = ty
                && !relay_ir::tensor_fits(ty, array)
            {
                return Err(Error::BindParams {
                    name: param_name.to_owned(),
                    entry: entry.to_owned(),
                    expected: ty.to_string(),
                    got: describe(array),
                });
            }
            map.insert(param.id(), Expr::constant(array.clone()));
        }
        if !map.is_empty() {
            func.params.retain(|p| !map.contains_key(&p.id()));
            func.body = substitute(&func.body, &map);
        }
    }
    if let Err(errors) = relay_types::check_module(&module) {
        return Err(Error::Program(Reported(miette::Report::new(errors))));
    }
    Ok(module)
}

/// "a float64 tensor of shape (8, 16)", for error messages.
fn describe(array: &NDArray) -> String {
    format!(
        "a {} tensor of shape {}",
        array.dtype(),
        shape_tuple(array.shape())
    )
}
