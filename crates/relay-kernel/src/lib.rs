//! The kernel compiler (DESIGN §5): every fused primitive function (`Primitive=1`) becomes a
//! native packed function.
//!
//! The stages, one module each, in order:
//! - `compose`: the primitive function's operator calls → tensor expressions
//!   (`relay_ir::te`), from each operator's compute definition in `relay-ops`;
//! - `lower`: tensor expressions → the loop nest IR ([`loops`]), with injective producers
//!   inlined into their consumers and the innermost loop vectorized;
//! - `print`: the loop nest as text (`relayc build --emit kernels`);
//! - `codegen`: loop nest → Cranelift IR → machine code, behind TVM's packed C ABI ([`abi`]);
//! - `jit`: ownership of JIT-compiled code (freed when the last kernel using it drops);
//! - `packed`: [`PackedFunc`], the safe wrapper the rest of relayc calls kernels through;
//! - `cache`: compiled kernels keyed by the structural hash of the primitive function and its
//!   argument types.
//!
//! [`compile_primitive`] runs the whole chain for one primitive function.
//!
//! Status (issue 5, in progress): elementwise, broadcasting and reduction operators compile;
//! shape operators, `nn.dense`/`nn.conv2d`, pooling, threads follow. See `docs/design.md` §12.

pub mod abi;
pub mod cache;
pub mod codegen;
pub mod compose;
pub mod error;
pub mod jit;
pub mod loops;
pub mod lower;
pub mod math;
pub mod packed;
pub mod print;

pub use cache::{KernelCache, KernelKey};
pub use error::KernelError;
pub use packed::PackedFunc;

use relay_ir::{Dim, Function, NDArray, Type, TypeKind};

/// Compiles a type-checked primitive function (`Primitive=1`) into a packed function named
/// `name`: its tensor arguments are the function's parameters (tuple parameters flattened),
/// then one output per tensor leaf of its result.
pub fn compile_primitive(func: &Function, name: &str) -> Result<PackedFunc, KernelError> {
    let composed = compose::compose(func).map_err(|message| KernelError::Unsupported {
        kernel: name.to_owned(),
        message,
    })?;
    let loops = lower::lower(name, &composed).map_err(|message| KernelError::Lower { message })?;
    packed::compile(&loops)
}

/// The dimensions of a tensor type whose every dimension is known.
pub fn static_shape(ty: &Type) -> Option<Vec<i64>> {
    match ty.kind() {
        TypeKind::Tensor { shape, .. } => shape
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                Dim::Any => None,
            })
            .collect(),
        _ => None,
    }
}

/// Zero-filled arrays for the outputs of `func`'s kernel: one per tensor leaf of its result
/// type, depth first.
pub fn output_arrays(func: &Function) -> Result<Vec<NDArray>, KernelError> {
    let malformed = |message: String| KernelError::Lower { message };
    let ty = func
        .body
        .checked_type()
        .or(func.ret_type.as_ref())
        .ok_or_else(|| malformed("the primitive function's result type is unknown".into()))?;
    let mut leaves = Vec::new();
    let mut stack = vec![ty];
    while let Some(t) = stack.pop() {
        match t.kind() {
            TypeKind::Tuple(fields) => stack.extend(fields.iter().rev()),
            TypeKind::Tensor { dtype, .. } => {
                let shape = static_shape(t)
                    .ok_or_else(|| malformed(format!("the result type `{t}` is dynamic")))?;
                leaves.push(NDArray::zeros(*dtype, &shape).map_err(|e| malformed(e.to_string()))?);
            }
            _ => {
                return Err(malformed(format!(
                    "the result type `{t}` is not made of tensors"
                )));
            }
        }
    }
    Ok(leaves)
}
