//! `Compiler`: the one compile driver, from a type-checked module to an [`Executable`] —
//! `relayc build` and `relayc run` are its clients: bind parameters to constants (TVM's
//! `bind_params_by_name`), run the pass pipeline, compile the lowered module to bytecode and
//! JIT-compile its kernels, timing each stage.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use miette::NamedSource;
use relay_ir::Module;
use relay_passes::{OptionValue, PassManager, PipelineConfig};
use relay_runtime::NDArray;
use relay_vm::Executable;

use crate::bind::bind_params;
use crate::error::Reported;
use crate::{Error, KernelFailure, Result, Tensor};

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
    /// The entry function (without `@`): parameters are bound in it, and dead-code
    /// elimination keeps what it reaches.
    entry: String,
    /// Values of the entry function's parameters, by name (without `%`).
    params: HashMap<String, NDArray>,
    /// The pass pipeline.
    pipeline: PipelineConfig,
    /// Overrides the pipeline's opt level.
    opt_level: Option<u32>,
    /// Verifies every pass's output and every kernel's loop nest.
    verify_each: bool,
}

impl Default for Compiler {
    fn default() -> Compiler {
        Compiler::new()
    }
}

impl Compiler {
    /// A compiler with the default pipeline (the repository's `passes.toml`, as `relayc build`
    /// runs it), compiling for `@main`.
    pub fn new() -> Compiler {
        Compiler {
            entry: "main".to_owned(),
            params: HashMap::new(),
            pipeline: PipelineConfig::default_pipeline(),
            opt_level: None,
            verify_each: false,
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

    /// Compiles for global function `entry` (with or without `@`) instead of `@main`: the
    /// parameters are bound in it, and dead-code elimination keeps what it reaches.
    pub fn entry(mut self, entry: &str) -> Compiler {
        self.entry = entry.strip_prefix('@').unwrap_or(entry).to_owned();
        self
    }

    /// Verifies what each stage makes: every pass's output is type-checked and verified (the
    /// pipeline's `verify_each`), and every static kernel's loop nest is checked by the kernel
    /// verifier ([`verify_kernels`]) before it is compiled (`relayc build --verify-each`).
    pub fn verify_each(mut self, on: bool) -> Compiler {
        self.verify_each = on;
        self
    }

    /// Binds the parameters and runs the pass pipeline: the module [`relay_vm::compile`] takes
    /// (what `relayc build --emit ir` prints). `module` is type-checked again first, so a
    /// module built by hand needs no checking beforehand. What the pipeline's debug settings
    /// ask for (`print_after_all`, `time_passes`, ...) goes to stderr.
    pub fn lower(&self, module: &Module) -> Result<Module> {
        let module = bind_params(module.clone(), &self.entry, &self.params)?;
        let mut pipeline = self.pipeline.clone();
        if let Some(level) = self.opt_level {
            pipeline.opt_level = level;
        }
        pipeline.debug.verify_each |= self.verify_each;
        set_block(&mut pipeline);
        run_passes(
            &PassManager::from_config(&pipeline).entry(&self.entry),
            module,
        )
    }

    /// Lowers the module ([`Compiler::lower`]), compiles it to bytecode and JIT-compiles every
    /// static kernel, so the first run pays no compile time. The executable is immutable and
    /// `Send + Sync`: any number of [`crate::Vm`]s on any threads can run it at once.
    pub fn compile(&self, module: &Module) -> Result<Executable> {
        self.compile_timed(module).map(|(exe, _times)| exe)
    }

    /// [`Compiler::compile`], with the time each stage took. Every kernel is tried before
    /// failing: [`Error::Kernel`] reports each one that cannot be compiled.
    pub fn compile_timed(&self, module: &Module) -> Result<(Executable, CompileTimes)> {
        let start = Instant::now();
        let lowered = self.lower(module)?;
        if self.verify_each {
            verify_kernels(&lowered)?;
        }
        let passes = start.elapsed();
        let start = Instant::now();
        let exe = relay_vm::compile(&lowered)?;
        let bytecode = start.elapsed();
        let start = Instant::now();
        let each_kernel = crate::kernels::jit(&exe, lowered.source.as_deref())
            .map_err(|failures| Error::Kernel { failures })?;
        let kernels = start.elapsed();
        let times = CompileTimes {
            passes,
            bytecode,
            kernels,
            each_kernel,
        };
        Ok((exe, times))
    }
}

/// Gives `alter_op_layout` the channel block of the kernel library's instruction set (16
/// lanes with AVX-512, 8 otherwise: `RELAYC_ISA` picks another) where the pipeline asks for it
/// with `block = -1`, or sets no block (the option's default is `-1`).
fn set_block(pipeline: &mut PipelineConfig) {
    let block = match relay_linalg::Ops::process_default().isa {
        relay_linalg::Isa::Avx512 => 16,
        _ => 8,
    };
    let mut set = false;
    for o in &mut pipeline.options {
        if (o.pass, o.option) == ("alter_op_layout", "block") {
            set = true;
            if o.value == OptionValue::Int(-1) {
                o.value = OptionValue::Int(block);
            }
        }
    }
    if !set {
        pipeline.options.push(relay_passes::config::OptionSetting {
            pass: "alter_op_layout",
            option: "block",
            value: OptionValue::Int(block),
        });
    }
}

/// The wall times of the stages of [`Compiler::compile_timed`].
#[derive(Clone, Debug, Default)]
pub struct CompileTimes {
    /// Binding the parameters and running the pass pipeline.
    pub passes: Duration,
    /// The bytecode compiler.
    pub bytecode: Duration,
    /// JIT-compiling the static kernels.
    pub kernels: Duration,
    /// The compile time of each kernel, in kernel-table order (`None` for a kernel with dynamic
    /// shapes, compiled when called).
    pub each_kernel: Vec<Option<Duration>>,
}

impl CompileTimes {
    /// The time of every stage together.
    pub fn total(&self) -> Duration {
        self.passes + self.bytecode + self.kernels
    }
}

/// Runs `manager`'s pipeline on a type-checked module, writing its debugging output to stderr
/// (what `relayc opt` and [`Compiler::lower`] do). A pass error is [`Error::Pass`], shown
/// against the input's text, into which its spans point.
pub fn run_passes(manager: &PassManager, module: Module) -> Result<Module> {
    let source = module.source.clone();
    match manager.run(module) {
        Ok((module, _timings)) => Ok(module),
        Err(err) => {
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

/// Checks the loop nest of every static kernel of a lowered module with the kernel verifier
/// ([`relay_kernel::verify_primitive`]), trying each one: [`Error::Kernel`] reports every
/// kernel whose loop nest is malformed (or that cannot be lowered).
pub fn verify_kernels(lowered: &Module) -> Result<()> {
    let source = lowered.source.as_deref();
    let failures: Vec<KernelFailure> = relay_kernel::primitive_functions(lowered)
        .into_iter()
        .filter(|(_, func)| !relay_kernel::is_dynamic(func))
        .filter_map(|(name, func)| {
            let error = relay_kernel::verify_primitive(&func, &name).err()?;
            Some(KernelFailure::new(&name, Some(func), error, source))
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::Kernel { failures })
    }
}
