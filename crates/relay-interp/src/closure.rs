//! The interpreter's closures: the payload of [`Value::Closure`] — the code that runs when one
//! is called and the values it captured. The machine (`machine.rs`) makes and calls them; the
//! releaser (`release.rs`) takes their captured values apart when they are dropped.

use relay_ir::{Attrs, CtorRef, Expr, OpRef, Symbol, Value, VarId};

/// A closure made by the interpreter: code plus the values it captured. It is the payload of
/// [`Value::Closure`].
pub(crate) struct Closure {
    /// What runs when the closure is called.
    pub(crate) code: Code,
    /// The captured values of the function literal's free variables.
    pub(crate) captured: Vec<(VarId, Value)>,
    /// For a `let %f = fn ...` binding: `%f`, bound to the closure itself on every call, so the
    /// function can call itself without a reference cycle.
    pub(crate) self_var: Option<VarId>,
    /// The global function the code was written in, for error messages.
    pub(crate) home: Option<Symbol>,
}

impl Closure {
    /// Takes the captured values out (when the closure is being dropped).
    pub(crate) fn take_captured(&mut self) -> Vec<(VarId, Value)> {
        std::mem::take(&mut self.captured)
    }
}

/// The code of a closure.
pub(crate) enum Code {
    /// A function literal: the `ExprKind::Function` node.
    Lambda(Expr),
    /// A global function used as a value.
    Global(Symbol),
    /// A constructor used as a value, with its number of fields.
    Ctor(CtorRef, usize),
    /// An operator used as a value, with its default attributes.
    Op(OpRef, Attrs),
}
