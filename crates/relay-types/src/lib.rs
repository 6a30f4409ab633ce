//! Relay type inference and checking (SPEC §2): unification over the whole module, explicit
//! type parameters on `def`, `fn` and `type`, fresh instantiation at each use of a polymorphic
//! global or constructor, per-operator type relations, and `?` dimensions that stay unknown
//! until run time.
//!
//! [`check_module`] is the entry point. On success every expression node and every variable of
//! the module has its checked type (`Expr::checked_type`, `Var::checked_type`), fully resolved:
//! the only type variables left are type parameters of polymorphic functions, and instances of
//! type parameters that nothing constrains (the `A` of a bare `Nil`).
//!
//! How it works:
//! - `solver`: inference types live in a union-find arena; unification links classes, merges
//!   `?` dimensions with known ones and does the occurs check.
//! - `infer`: one walk over the module. Binding chains are iterated, and every recursive walk
//!   goes through `relay_ir::ensure_sufficient_stack`, so 100,000 bindings and deep nesting
//!   never overflow the stack. Operator relations run as soon as all input types are known;
//!   until then they, and projections of values not yet known to be tuples, wait in a queue
//!   that is retried after each global and at the end.
//! - `exhaustive`: a complete `match` that misses a value is a warning naming a missing
//!   pattern.
//! - `errors`: diagnostics with `relay::type::*` codes.
//!
//! Invariant: the checker never panics on any module; an IR that breaks the parser's
//! guarantees (an unbound variable, an unknown constructor) is an [`InternalError`].

mod errors;
mod exhaustive;
mod infer;
mod solver;
#[cfg(test)]
mod tests;

use relay_ir::Module;

pub use errors::{InternalError, TypeError, TypeErrors, TypeWarning, Warning};

/// Infers and checks the types of a whole module. On success every expression node and every
/// variable of the module has its checked type set (`Expr::checked_type`, `Var::checked_type`),
/// and the warnings are returned; on failure nothing is set and every error found is returned.
pub fn check_module(module: &Module) -> Result<Vec<TypeWarning>, TypeErrors> {
    infer::Checker::new(module).run()
}
