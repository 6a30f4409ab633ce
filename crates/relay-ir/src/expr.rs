//! Expressions, variables, functions and patterns.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use relay_runtime::NDArray;

use crate::{Attrs, OpRef, Span, Symbol, Type, TypeVar};

/// An expression: a shared, immutable node.
#[derive(Clone, Debug)]
pub struct Expr(Arc<ExprNode>);

/// The node behind an [`Expr`].
#[derive(Debug)]
pub struct ExprNode {
    /// What the expression is.
    pub kind: ExprKind,
    /// Where it was written ([`Span::DUMMY`] when synthesized).
    pub span: Span,
    /// The type inference gave it (TVM's `checked_type_`), set once by `relay-types`.
    ty: OnceLock<Type>,
}

/// The forms an expression takes.
#[derive(Debug)]
pub enum ExprKind {
    /// A tensor constant: a scalar literal, or a `meta[relay.Constant][i]` tensor.
    Constant(Arc<NDArray>),
    /// A local variable.
    Var(Var),
    /// A global function, `@name`.
    Global(Symbol),
    /// An operator used as a value or callee.
    Op(OpRef),
    /// A constructor used as a value or callee.
    Ctor(CtorRef),
    /// `callee(args..., attrs...)`.
    Call {
        /// What is called.
        callee: Expr,
        /// Positional arguments.
        args: Vec<Expr>,
        /// Attributes (see [`Attrs`]).
        attrs: Attrs,
    },
    /// `fn [T](%x: A, ...) -> R { body }`.
    Function(Function),
    /// A flat chain of bindings followed by a body.
    Let {
        /// The bindings, in order; each is in scope in the rest.
        bindings: Vec<Binding>,
        /// The result.
        body: Expr,
    },
    /// `if (cond) { then } else { else }`.
    If {
        /// The condition (a boolean scalar).
        cond: Expr,
        /// Taken when true.
        then_branch: Expr,
        /// Taken when false.
        else_branch: Expr,
    },
    /// `match (e) { ... }` (complete) or `match? (e) { ... }` (partial).
    Match {
        /// The value matched.
        scrutinee: Expr,
        /// The clauses, tried in order.
        clauses: Vec<Clause>,
        /// `true` for `match`, `false` for `match?`.
        complete: bool,
    },
    /// `(a, b, ...)`.
    Tuple(Vec<Expr>),
    /// `e.N`.
    Proj {
        /// The tuple.
        tuple: Expr,
        /// The field index.
        index: u32,
    },
    /// `ref(e)`.
    RefNew(Expr),
    /// `ref_read(r)`.
    RefRead(Expr),
    /// `ref_write(r, v)`.
    RefWrite(Expr, Expr),
}

/// One binding of a [`ExprKind::Let`] chain.
#[derive(Clone, Debug)]
pub struct Binding {
    /// The variable bound (an unnamed one for [`BindingKind::Seq`]).
    pub var: Var,
    /// Its value. A function literal may refer to `var` (recursive local functions); any other
    /// value cannot.
    pub value: Expr,
    /// How the text wrote it.
    pub kind: BindingKind,
}

/// How a binding was written; only the printer cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindingKind {
    /// `let %x = e;`
    Let,
    /// `%N = e;` (graph form)
    Graph,
    /// `e;` (sequencing; the variable is unused)
    Seq,
}

/// A function literal or global function definition.
#[derive(Clone, Debug)]
pub struct Function {
    /// Type parameters (`[A, B]`).
    pub type_params: Vec<TypeVar>,
    /// Parameters; each [`Var`] carries its annotation, if any.
    pub params: Vec<Var>,
    /// The annotated result type, if any.
    pub ret_type: Option<Type>,
    /// The body.
    pub body: Expr,
    /// Function attributes (`Primitive=1`, `Compiler="..."`, ...) in source order.
    pub attrs: Attrs,
}

/// One `pattern => body` clause of a match.
#[derive(Clone, Debug)]
pub struct Clause {
    /// What it matches.
    pub pattern: Pattern,
    /// What it evaluates to, with the pattern's variables in scope.
    pub body: Expr,
}

/// A constructor of an algebraic data type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtorRef {
    /// The ADT it belongs to.
    pub adt: Symbol,
    /// Its name.
    pub name: Symbol,
    /// Its position in the ADT's constructor list (the run-time tag).
    pub tag: u32,
}

/// A pattern in a match clause.
#[derive(Clone, Debug)]
pub struct Pattern {
    /// What it matches.
    pub kind: PatternKind,
    /// Where it was written.
    pub span: Span,
}

/// The forms a pattern takes.
#[derive(Clone, Debug)]
pub enum PatternKind {
    /// `_`.
    Wildcard,
    /// `%x` or `%x: T`: matches anything and binds it.
    Var(Var),
    /// `Cons(p1, p2)`, or `Nil`.
    Ctor(CtorRef, Vec<Pattern>),
    /// `(p1, p2)`; `(p)` is a one-element tuple pattern.
    Tuple(Vec<Pattern>),
}

/// Identity of a local variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u64);

/// A local variable, unique by id; the name is only a hint for printing.
#[derive(Clone, Debug)]
pub struct Var(Arc<VarData>);

/// The data behind a [`Var`].
#[derive(Debug)]
pub struct VarData {
    /// Unique identity.
    pub id: VarId,
    /// The name it was written with (empty for unnamed variables).
    pub name: Symbol,
    /// Its type annotation, if any.
    pub ty: Option<Type>,
    /// Where it was bound.
    pub span: Span,
    /// The type inference gave it (its annotation, or what was inferred), set once.
    checked: OnceLock<Type>,
}

impl Var {
    /// A fresh variable.
    pub fn new(name: Symbol, ty: Option<Type>, span: Span) -> Var {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let id = VarId(NEXT.fetch_add(1, Ordering::Relaxed));
        Var(Arc::new(VarData {
            id,
            name,
            ty,
            span,
            checked: OnceLock::new(),
        }))
    }

    /// Its identity.
    pub fn id(&self) -> VarId {
        self.0.id
    }

    /// Its name hint.
    pub fn name(&self) -> Symbol {
        self.0.name
    }

    /// Its annotation.
    pub fn ty(&self) -> Option<&Type> {
        self.0.ty.as_ref()
    }

    /// Where it was bound.
    pub fn span(&self) -> Span {
        self.0.span
    }

    /// The type inference gave the variable, once it has run.
    pub fn checked_type(&self) -> Option<&Type> {
        self.0.checked.get()
    }

    /// Records the variable's checked type (once; later calls are ignored and return `false`).
    pub fn set_checked_type(&self, ty: Type) -> bool {
        self.0.checked.set(ty).is_ok()
    }
}

impl PartialEq for Var {
    fn eq(&self, other: &Var) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for Var {}

impl std::hash::Hash for Var {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.hash(state)
    }
}

impl Expr {
    /// A new expression node.
    pub fn new(kind: ExprKind, span: Span) -> Expr {
        Expr(Arc::new(ExprNode {
            kind,
            span,
            ty: OnceLock::new(),
        }))
    }

    /// What the expression is.
    pub fn kind(&self) -> &ExprKind {
        &self.0.kind
    }

    /// The operator, arguments and attributes of a call of an operator; `None` for anything
    /// else.
    pub fn op_call(&self) -> Option<(OpRef, &[Expr], &Attrs)> {
        match self.kind() {
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => match callee.kind() {
                ExprKind::Op(op) => Some((*op, args.as_slice(), attrs)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Where it was written.
    pub fn span(&self) -> Span {
        self.0.span
    }

    /// The type inference gave this node, once it has run.
    pub fn checked_type(&self) -> Option<&Type> {
        self.0.ty.get()
    }

    /// Records the node's checked type. A node's type is set once; setting it again is ignored
    /// (returns `false`), as a shared subexpression has one type.
    pub fn set_checked_type(&self, ty: Type) -> bool {
        self.0.ty.set(ty).is_ok()
    }

    /// Whether two handles point at the same node.
    pub fn ptr_eq(a: &Expr, b: &Expr) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// A reference to `var`.
    pub fn var(var: &Var) -> Expr {
        Expr::new(ExprKind::Var(var.clone()), Span::DUMMY)
    }

    /// A call with no attributes.
    pub fn call(callee: Expr, args: Vec<Expr>) -> Expr {
        Expr::new(
            ExprKind::Call {
                callee,
                args,
                attrs: Attrs::empty(),
            },
            Span::DUMMY,
        )
    }

    /// A constant.
    pub fn constant(value: NDArray) -> Expr {
        Expr::new(ExprKind::Constant(Arc::new(value)), Span::DUMMY)
    }
}

impl std::ops::Deref for Expr {
    type Target = ExprNode;
    fn deref(&self) -> &ExprNode {
        &self.0
    }
}
