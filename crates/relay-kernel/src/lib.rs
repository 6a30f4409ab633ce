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
//! Status: the interfaces of this crate are being built (issue 5); see `docs/design.md` §5.

pub mod abi;
pub mod loops;
