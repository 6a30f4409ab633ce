//! Small helpers the passes share (the generic walks live in `relay_ir::visit`).

use relay_ir::{Span, Symbol, Type, Var};

/// A fresh variable named `name` with annotation `ty` (passes annotate the variables they
/// create with the checked type, so the output type-checks without the input's inference).
pub fn fresh_var(name: &str, ty: Option<Type>) -> Var {
    let var = Var::new(Symbol::intern(name), ty.clone(), Span::DUMMY);
    if let Some(ty) = ty {
        var.set_checked_type(ty);
    }
    var
}
