//! What the VM's integration tests share: parsing and type-checking a program, lowering it
//! with the pass pipeline at a given configuration, compiling it to an executable, and the
//! float tolerances results are compared with.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::fmt;

use relay_ir::{DType, Module, NDArray, Symbol, Value};
use relay_passes::{PassManager, PipelineConfig};
use relay_vm::Executable;

/// The seed of the random inputs for `@main` (the one the pass tests use).
pub const INPUT_SEED: u64 = 0x5eed;

/// SPEC §4's tolerance (rtol, atol) for elementwise results.
pub const STRICT: (f64, f64) = (1e-5, 1e-6);

/// SPEC §4's tolerance (rtol, atol) for reductions, contractions, convolutions, pools and
/// softmax, whose kernels sum in a different order than the reference operators.
pub const LOOSE: (f64, f64) = (1e-4, 1e-5);

/// Operators whose kernels may sum in a different order than the reference: a program that
/// calls one of them is compared within [`LOOSE`].
const ACCUMULATING_OPERATORS: &[&str] = &[
    "sum(",
    "mean(",
    "prod(",
    "variance(",
    "std(",
    "nn.dense",
    "nn.matmul",
    "nn.batch_matmul",
    "nn.conv2d",
    "pool2d",
    "nn.softmax",
    "nn.log_softmax",
    "nn.layer_norm",
    "nn.batch_norm",
    "logsumexp",
];

/// The tolerance SPEC §4 gives the results of the program `text`.
pub fn tolerance(text: &str) -> (f64, f64) {
    if ACCUMULATING_OPERATORS.iter().any(|op| text.contains(op)) {
        LOOSE
    } else {
        STRICT
    }
}

/// One pipeline configuration the VM is tested under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The pipeline's opt level.
    pub opt_level: u32,
    /// Whether `plan_memory` runs (it is skipped through `[debug] skip` otherwise).
    pub plan_memory: bool,
}

impl Config {
    /// The default pipeline (`passes.toml`, opt level 2, every pass).
    pub const DEFAULT: Config = Config {
        opt_level: 2,
        plan_memory: true,
    };

    /// Every configuration: opt levels 0 and 2, with and without `plan_memory`.
    pub const ALL: [Config; 4] = [
        Config {
            opt_level: 0,
            plan_memory: true,
        },
        Config {
            opt_level: 0,
            plan_memory: false,
        },
        Config {
            opt_level: 2,
            plan_memory: true,
        },
        Config {
            opt_level: 2,
            plan_memory: false,
        },
    ];

    /// The pass manager of this configuration: the default pipeline at `opt_level`, with
    /// `plan_memory` in the skip list when it is off.
    pub fn manager(self) -> PassManager {
        let mut config = PipelineConfig::default_pipeline();
        config.opt_level = self.opt_level;
        if !self.plan_memory {
            config.debug.skip.push("plan_memory");
        }
        PassManager::from_config(&config)
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "opt-level={}", self.opt_level)?;
        if !self.plan_memory {
            f.write_str(" skip=plan_memory")?;
        }
        Ok(())
    }
}

/// Parses and type-checks `text` (named `name` in locations).
pub fn typed(text: &str, name: &str) -> Result<Module, String> {
    let module = relay_syntax::parse(text, name).map_err(|e| format!("does not parse: {e:?}"))?;
    relay_types::check_module(&module)
        .map_err(|e| format!("does not type-check: {}", relay_syntax::render_plain(&e)))?;
    Ok(module)
}

/// Runs `config`'s pipeline on the type-checked `module`.
pub fn lower(module: &Module, config: Config) -> Result<Module, String> {
    config
        .manager()
        .run(module.clone())
        .map(|(lowered, _)| lowered)
        .map_err(|e| format!("the pipeline fails: {}", relay_syntax::render_plain(&e)))
}

/// Lowers the type-checked `module` with `config` and compiles it to an executable, checked
/// with [`Executable::validate`].
pub fn compile(module: &Module, config: Config) -> Result<Executable, String> {
    let lowered = lower(module, config)?;
    let exe = relay_vm::compile(&lowered).map_err(|e| format!("does not compile: {e}"))?;
    exe.validate()
        .map_err(|e| format!("the executable does not validate: {e}"))?;
    Ok(exe)
}

/// Parses, type-checks, lowers (with the default pipeline) and compiles `text`, panicking
/// with the reason when any step fails: for the tests' own programs.
pub fn build(text: &str, name: &str) -> Executable {
    build_with(text, name, Config::DEFAULT)
}

/// [`build`] with the pipeline configuration `config`.
pub fn build_with(text: &str, name: &str, config: Config) -> Executable {
    let module = typed(text, name).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    compile(&module, config).unwrap_or_else(|e| panic!("{name} ({config}): {e}"))
}

/// The whole bytecode of `exe`, as `relayc build --emit bytecode` prints it.
pub fn disassemble(exe: &Executable) -> String {
    exe.functions
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tensor of `dtype` and `shape` holding `values`.
pub fn tensor(dtype: DType, shape: &[i64], values: &[f64]) -> Value {
    Value::tensor(NDArray::from_f64_slice(dtype, shape, values).expect("a valid tensor"))
}

/// A scalar of `dtype`.
pub fn scalar(dtype: DType, value: f64) -> Value {
    Value::tensor(NDArray::scalar_f64(dtype, value).expect("a valid scalar"))
}

/// The integer in a scalar tensor value.
pub fn int_of(value: &Value) -> i128 {
    let tensor = value
        .as_tensor()
        .unwrap_or_else(|| panic!("a tensor, got a {}", value.kind_name()));
    let elements = tensor.to_i128_vec();
    assert_eq!(
        elements.len(),
        1,
        "a scalar, got shape {:?}",
        tensor.shape()
    );
    elements[0]
}

/// Random inputs for `@main` of the type-checked `module`, from [`INPUT_SEED`] + `offset`.
pub fn main_inputs(module: &Module, offset: u64) -> Vec<Value> {
    let main = module
        .function(Symbol::intern("main"))
        .expect("the program has @main");
    relay_interp::random_inputs(&main.func, INPUT_SEED + offset)
        .unwrap_or_else(|e| panic!("no random inputs for @main: {e}"))
}

/// `exe` saved to bytes and loaded again, checked: saving is deterministic, the loaded
/// executable has the same functions, constants, kernels (structurally equal primitive
/// functions), globals and type definitions, and saving it again gives the same bytes.
pub fn round_trip(exe: &Executable) -> Result<Executable, String> {
    let bytes = exe.to_bytes().map_err(|e| format!("does not save: {e}"))?;
    if exe.to_bytes().ok().as_ref() != Some(&bytes) {
        return Err("saving twice gives different bytes".into());
    }
    let loaded = Executable::from_bytes(&bytes).map_err(|e| format!("does not load: {e}"))?;
    if loaded.functions != exe.functions {
        let a = disassemble(exe);
        let b = disassemble(&loaded);
        return Err(format!(
            "the loaded functions differ:\n{a}\n-- loaded --\n{b}"
        ));
    }
    if loaded.globals != exe.globals {
        return Err(format!(
            "the loaded globals differ: {:?} vs {:?}",
            exe.globals, loaded.globals
        ));
    }
    let constants_equal = loaded.constants.len() == exe.constants.len()
        && loaded.constants.iter().zip(&exe.constants).all(|(a, b)| {
            a.dtype() == b.dtype() && a.shape() == b.shape() && a.as_bytes() == b.as_bytes()
        });
    if !constants_equal {
        return Err("the loaded constants differ".into());
    }
    let kernels_equal = loaded.kernels.len() == exe.kernels.len()
        && loaded.kernels.iter().zip(&exe.kernels).all(|(a, b)| {
            a.name == b.name
                && a.dynamic == b.dynamic
                && a.scalar.is_some() == b.scalar.is_some()
                && relay_ir::structural_eq(&a.func, &b.func)
        });
    if !kernels_equal {
        return Err("the loaded kernels differ".into());
    }
    let types_equal = loaded.types.len() == exe.types.len()
        && loaded.types.iter().zip(&exe.types).all(|(a, b)| {
            a.name == b.name
                && a.external == b.external
                && a.params.len() == b.params.len()
                && a.ctors.len() == b.ctors.len()
                && a.ctors.iter().zip(&b.ctors).all(|(x, y)| {
                    x.name == y.name
                        && x.fields.len() == y.fields.len()
                        && x.fields
                            .iter()
                            .zip(&y.fields)
                            .all(|(s, t)| s.to_string() == t.to_string())
                })
        });
    if !types_equal {
        return Err("the loaded type definitions differ".into());
    }
    match loaded.to_bytes() {
        Ok(again) if again == bytes => Ok(loaded),
        Ok(_) => Err("saving the loaded executable gives different bytes".into()),
        Err(e) => Err(format!("the loaded executable does not save: {e}")),
    }
}
