//! The bytecode compiler: a module lowered by the pass pipeline → an [`Executable`].

use relay_ir::Module;

use crate::error::CompileError;
use crate::executable::Executable;

/// Compiles a lowered, type-checked module (the output of the pipeline's required passes:
/// fused, ANF, lifted, primitives inlined, manifested, tail calls marked, constant pool laid
/// out) to bytecode. Kernels are not JIT-compiled here: [`Executable::jit`] compiles them all,
/// or each is compiled on its first call.
pub fn compile(module: &Module) -> Result<Executable, CompileError> {
    let _ = module;
    todo!("compiler")
}
