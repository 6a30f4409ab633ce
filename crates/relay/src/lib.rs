//! relayc as a library (SPEC §6): parse Relay text, compile it for the Relay VM and run it
//! from Rust, with no process or file system involved.
//!
//! The steps are TVM's: [`parse`] reads and type-checks a module; a [`Compiler`] binds
//! parameters to constants (`bind_params_by_name`), runs the pass pipeline and compiles the
//! lowered module to an [`Executable`] (`relay.vm.compile`), JIT-compiling its kernels; a
//! [`Vm`] runs the executable (`VirtualMachine`). An executable saves to one file and loads
//! back ([`Executable::save`], [`Executable::load`]: the `.ro` format of docs/design.md §10, kernels
//! re-JIT-compiled at load). Values going in and out are [`Value`]s:
//! tensors ([`Tensor`] converts them from and to Rust slices and `.npy` files), tuples, ADT
//! values, closures and references. Every failure is a typed [`Error`] that renders as a miette
//! report (`miette::Report::from(error)`), pointing into the program where it has a location.
//!
//! ```
//! use relay::{Compiler, Tensor, Value, Vm};
//!
//! # fn main() -> Result<(), relay::Error> {
//! let source = r#"
//! #[version = "0.0.5"]
//! def @main(%x: Tensor[(2, 2), float32], %w: Tensor[(2, 2), float32], %b: Tensor[(2), float32]) {
//!   let %y = nn.bias_add(nn.dense(%x, %w, units=2), %b);
//!   (nn.relu(%y), sum(%y))
//! }
//! "#;
//! let module = relay::parse(source, "model.relay")?;
//!
//! // `%w` and `%b` become constants of the executable; `%x` stays an input.
//! let w = Tensor::from_slice(&[1.0f32, 0.0, 0.0, -1.0], &[2, 2])?;
//! let b = Tensor::from_slice(&[0.5f32, 0.5], &[2])?;
//! let exe = Compiler::new()
//!     .params([("w".to_string(), w), ("b".to_string(), b)])
//!     .compile(&module)?;
//!
//! // One VM per thread; they can all share `exe`.
//! let mut vm = Vm::new(&exe);
//! let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let out = vm.invoke("main", &[x])?;
//!
//! // x . w^T + b = [[1.5, -1.5], [3.5, -3.5]]
//! let Value::Tuple(fields) = out else { panic!("expected a tuple, got {out:?}") };
//! let relu = Tensor::try_from(&fields[0])?;
//! let total = Tensor::try_from(&fields[1])?;
//! assert_eq!(relu.shape(), &[2, 2]);
//! assert_eq!(relu.to_vec::<f32>()?, vec![1.5, 0.0, 3.5, 0.0]);
//! assert_eq!(total.to_scalar::<f32>()?, 0.0);
//!
//! // Saved and loaded again (what `relayc build -o` and `relayc run model.ro` do).
//! let path = std::env::temp_dir().join(format!("relay-doc-{}.ro", std::process::id()));
//! exe.save(&path)?;
//! let loaded = relay::Executable::load(&path)?;
//! # std::fs::remove_file(&path).ok();
//! let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let Value::Tuple(fields) = Vm::new(&loaded).invoke("main", &[x])? else { panic!() };
//! assert_eq!(Tensor::try_from(&fields[0])?.to_vec::<f32>()?, vec![1.5, 0.0, 3.5, 0.0]);
//! # Ok(())
//! # }
//! ```
//!
//! Invariants: nothing here panics on any program or input; an [`Executable`] is immutable
//! once compiled and `Send + Sync`; a [`Vm`] is used by one thread at a time.

mod bind;
mod compiler;
mod error;
mod generation;
mod kernels;
mod tensor;
mod vm;

use relay_ir::Module;

pub use bind::bind_params;
pub use compiler::{CompileTimes, Compiler, run_passes, verify_kernels};
pub use error::{Error, Reported, Result};
pub use generation::generation_loop;
pub use kernels::KernelFailure;
/// The reference interpreter: runs a typed module directly, one operator at a time with the
/// operators' reference evaluations (`relayc run --executor interp`); the oracle of the tests.
pub use relay_interp as interp;
/// The IR: modules, expressions, types (what [`parse`] returns and passes transform), and
/// its printer ([`ir::print_module`]).
pub use relay_ir as ir;
/// The kernel compiler's listings and targets: a module's primitive functions printed as loop
/// nests, Cranelift IR or machine code, for the host or another instruction set
/// (`relayc build --emit kernels|clif|asm --target`).
pub mod listing {
    pub use relay_kernel::target::{ARCHITECTURES, host_triple};
    pub use relay_kernel::{
        BROADCAST_NOTE, DYNAMIC_NOTE, GENERIC_NOTE, KernelText, ROWS_NOTE, Target,
        primitive_functions, print_kernels_for,
    };
}
/// The host kernels' instruction sets: [`Isa::detected`], the `RELAYC_ISA` override
/// ([`Isa::from_env`]), and the kernel table of one ([`Ops::for_isa`], for
/// [`VmOptions::ops`]).
pub use relay_linalg::{Isa, IsaError, Ops, isa::ISA_VAR};
/// ONNX models into Relay ([`onnx::import`]): the module, its initializers as parameters
/// (bind them with a [`Compiler`]'s parameters), and the graph's inputs and outputs.
pub use relay_onnx as onnx;
/// The passes by name and the pass manager (`relayc opt`).
pub use relay_passes as passes;
pub use relay_passes::{MAX_OPT_LEVEL, PassManager, PipelineConfig};
/// Reading and writing `.npy` and `.npz` files (numpy's formats).
pub use relay_runtime::npy;
pub use relay_runtime::{ALIGNMENT, AdtValue, DType, DTypeCode, NDArray, Value};
/// Renders a diagnostic as plain text, without colors: what `relayc` prints when stderr is
/// not a terminal, and what the golden files hold.
pub use relay_syntax::render_plain;
/// The first bytes of every executable file (`.ro`).
pub use relay_vm::file::MAGIC as EXECUTABLE_MAGIC;
pub use relay_vm::{
    CompileError, ExeFileError, Executable, Interrupt, Profile, VmError, VmErrorKind, VmFunction,
    VmOptions, compile as compile_lowered,
};
pub use tensor::{Element, Tensor, describe};
pub use vm::Vm;

/// Parses Relay text and type-checks it: the module [`Compiler::compile`] takes. `name` names
/// the text in diagnostics (a file name, or `"<string>"`). On failure the report holds every
/// parse error, or every type error, with labels pointing into `source`.
///
/// Type warnings (a `match` that misses a value) are not errors and are not reported here;
/// `relay_types::check_module` returns them.
pub fn parse(source: &str, name: &str) -> Result<Module, miette::Report> {
    let module = parse_unchecked(source, name)?;
    check(&module)?;
    Ok(module)
}

/// Parses Relay text without type-checking it ([`check`] does): the report holds every parse
/// error, with labels pointing into `source`.
pub fn parse_unchecked(source: &str, name: &str) -> Result<Module, miette::Report> {
    relay_syntax::parse(source, name).map_err(miette::Report::new)
}

/// Type-checks a module: its warnings (a `match` that misses a value, a function partitioned
/// for an external compiler), each a report pointing into the module's source; or a report
/// holding every type error.
pub fn check(module: &Module) -> Result<Vec<miette::Report>, miette::Report> {
    let warnings = relay_types::check_module(module).map_err(miette::Report::new)?;
    Ok(warnings.into_iter().map(miette::Report::new).collect())
}

/// Compile-time checks of the promises above: executables are shared across threads, and
/// errors can cross threads and become `miette::Report`s.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Executable>();
    send_sync::<Tensor>();
    send_sync::<Error>();
};
