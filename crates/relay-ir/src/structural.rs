//! Structural equality up to renaming of bound variables, and a structural hash consistent
//! with it (placeholder signatures; implementation pending).

use crate::{Expr, Module};

/// Whether two expressions are equal up to consistent renaming of variables.
pub fn structural_eq(_a: &Expr, _b: &Expr) -> bool {
    false
}

/// A hash equal for structurally equal expressions.
pub fn structural_hash(_e: &Expr) -> u64 {
    0
}

/// Whether two modules are structurally equal (same globals and types, each equal).
pub fn module_eq(_a: &Module, _b: &Module) -> bool {
    false
}
