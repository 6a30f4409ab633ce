//! The Relay IR: modules of global functions and algebraic data types, expressions, types and
//! patterns, with spans on every node.
//!
//! Shape of the IR (see `docs/design.md` §3):
//!
//! - Expressions are immutable, reference-counted nodes ([`Expr`] wraps an `Arc`), so subtrees
//!   are shared and passes rebuild only what they change.
//! - Binding chains are flat: a [`ExprKind::Let`] holds a `Vec` of [`Binding`]s and a body. The
//!   text format's `let %x = e;`, graph bindings `%N = e;` and sequencing `e1; e2` all become
//!   bindings, marked with a [`BindingKind`] so the printer writes each back the way it was
//!   written. Walks iterate over binding vectors, so 100,000 bindings never recurse 100,000 deep.
//! - Names are interned [`Symbol`]s; variables ([`Var`]) and type variables ([`TypeVar`]) are
//!   unique by id, not by name.
//! - Operators are `&'static` [`OpSchema`]s from the operator registry; an operator call stores
//!   every attribute of the schema in declaration order, defaults filled in, so two calls that
//!   mean the same thing are structurally equal however they were written.
//!
//! Invariants: nesting depth of any expression, type or pattern produced by the parser is at
//! most [`MAX_NESTING`], so recursive walks over them are safe on an ordinary thread stack.

mod attrs;
pub mod const_pool;
mod expr;
pub mod metadata;
mod module;
mod op;
mod op_error;
pub mod printer;
mod span;
pub mod structural;
mod symbol;
pub mod te;
#[cfg(test)]
mod testing;
mod ty;
pub mod visit;

pub use attrs::{AttrValue, Attrs};
pub use const_pool::ConstPool;
pub use expr::{
    Binding, BindingKind, Clause, CtorRef, Expr, ExprKind, ExprNode, Function, Pattern,
    PatternKind, Var, VarData, VarId,
};
pub use metadata::{MetaEntry, MetaTable, MetadataError};
pub use module::{CtorDef, GlobalFunc, Module, ModuleKind, Source, TypeDef};
pub use op::{
    AttrDefault, AttrField, AttrKind, EvalFn, OpPattern, OpRef, OpSchema, RelationFn, ScalarBinary,
    ScalarOp, ScalarUnary,
};
pub use op_error::{OpError, OpErrorKind};
pub use printer::{PrintOptions, print_expr, print_module, print_type};
pub use relay_runtime::{DType, DTypeCode, NDArray, Value};
pub use span::Span;
pub use structural::{module_eq, module_hash, type_eq, type_refines};
pub use structural::{structural_eq, structural_hash};
pub use symbol::Symbol;
pub use ty::{
    Dim, FuncType, Type, TypeKind, TypeNode, TypeVar, TypeVarData, TypeVarId, tensor_fits,
    value_mismatch,
};

/// The deepest expression, type or pattern nesting the parser accepts; deeper input is a
/// "nested too deeply" diagnostic. Flat binding chains do not count towards it.
pub const MAX_NESTING: u32 = 1000;

/// Runs `f`, first moving to a fresh stack segment on the heap if less than 64 KiB of the
/// current stack is left (rustc's `ensure_sufficient_stack`). Every recursive walk over
/// expressions, types or patterns calls this once per level, so walks of nesting up to
/// [`MAX_NESTING`] (or deeper trees that passes build) never overflow the native stack, whatever
/// the thread's stack size and however large a debug build's frames are.
#[inline]
pub fn ensure_sufficient_stack<R>(f: impl FnOnce() -> R) -> R {
    const RED_ZONE: usize = 64 * 1024;
    const NEW_SEGMENT: usize = 1024 * 1024;
    stacker::maybe_grow(RED_ZONE, NEW_SEGMENT, f)
}
