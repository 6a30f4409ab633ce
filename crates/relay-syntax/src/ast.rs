//! The syntax tree the grammar builds: close to the text, names unresolved. The resolver
//! (`resolve.rs`) turns it into `relay_ir`.
//!
//! Every expression, type and pattern node records its nesting depth. A node that would be
//! deeper than [`relay_ir::MAX_NESTING`] is replaced by an `Error` node when it is built (and a
//! "nested too deeply" diagnostic is recorded), so no tree deeper than the limit ever exists and
//! recursive walks and drops stay shallow.

use relay_ir::{DType, Span, Symbol};

use crate::lexer::MetaRef;

/// A name with its span.
pub type Name = (Symbol, Span);

/// A whole file.
pub struct Program {
    /// `#[version = ...]` text and span, if present.
    pub version: Option<(String, Span)>,
    /// The definitions (empty for an expression program).
    pub defs: Vec<Def>,
    /// The expression, for an expression program.
    pub expr: Option<Expr>,
    /// The `#[metadata]` section's text and span.
    pub metadata: Option<(String, Span)>,
    /// Where the first token is (for the missing-version diagnostic).
    pub start: Span,
}

/// A top-level definition.
pub enum Def {
    /// `def @name ...`.
    Func {
        /// The name.
        name: Name,
        /// The signature and body.
        sig: FnSig,
        /// The whole definition.
        span: Span,
    },
    /// `type Name[A] { ... }` or `extern type Name[A]`.
    Type {
        /// The name.
        name: Name,
        /// Type parameters.
        params: Vec<Name>,
        /// Constructors, if braces were written.
        ctors: Option<Vec<CtorDef>>,
        /// `extern type`.
        external: bool,
        /// The whole definition.
        span: Span,
    },
    /// A definition that failed to parse (its error is already recorded).
    Error,
}

/// `Name(T1, T2)`.
pub struct CtorDef {
    /// The name.
    pub name: Name,
    /// Field types.
    pub fields: Vec<Type>,
    /// Where.
    pub span: Span,
}

/// `[A](params, attrs) -> R { body }`.
pub struct FnSig {
    /// Type parameters.
    pub type_params: Vec<Name>,
    /// Parameters and attributes, in the order written.
    pub params: Vec<ParamItem>,
    /// Return type.
    pub ret: Option<Type>,
    /// Body.
    pub body: Box<Expr>,
}

/// One item of a parameter list.
pub enum ParamItem {
    /// `%x {attrs}: T`.
    Param {
        /// The name.
        name: Name,
        /// Its annotation.
        ty: Option<Type>,
        /// `{virtual_device=...}` annotations.
        attrs: Vec<Attr>,
    },
    /// `Key=value`.
    Attr(Attr),
}

/// One item of a call's argument list.
pub enum Arg {
    /// A positional argument.
    Expr(Expr),
    /// `key=value`.
    Attr(Attr),
}

/// `key=value`.
pub struct Attr {
    /// The (possibly dotted) key.
    pub key: Name,
    /// The value.
    pub value: AttrValue,
    /// The whole attribute.
    pub span: Span,
}

/// An attribute value as written.
pub enum AttrValue {
    /// An integer.
    Int(i64, Span),
    /// A float.
    Float(f64, Span),
    /// A boolean.
    Bool(bool, Span),
    /// A string.
    Str(String, Span),
    /// `meta[..][..]`.
    Meta(MetaRef, Span),
    /// A bare (dotted) name: `None`, `nullptr`, or a mistake.
    Name(Name),
    /// `[a, b]`.
    Array(Vec<AttrValue>, Span),
}

impl AttrValue {
    /// Where it was written.
    pub fn span(&self) -> Span {
        match self {
            AttrValue::Int(_, s)
            | AttrValue::Float(_, s)
            | AttrValue::Bool(_, s)
            | AttrValue::Str(_, s)
            | AttrValue::Meta(_, s)
            | AttrValue::Name((_, s))
            | AttrValue::Array(_, s) => *s,
        }
    }
}

/// An expression node.
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
    /// Nesting depth (1 for a leaf).
    pub depth: u32,
}

/// Infix operators.
#[derive(Clone, Copy, Debug)]
pub enum BinOp {
    Mul,
    Div,
    Add,
    Sub,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
}

impl BinOp {
    /// The Relay operator it means.
    pub fn op_name(self) -> &'static str {
        match self {
            BinOp::Mul => "multiply",
            BinOp::Div => "divide",
            BinOp::Add => "add",
            BinOp::Sub => "subtract",
            BinOp::Lt => "less",
            BinOp::Gt => "greater",
            BinOp::Le => "less_equal",
            BinOp::Ge => "greater_equal",
            BinOp::Eq => "equal",
            BinOp::Ne => "not_equal",
        }
    }
}

/// The forms of an expression.
pub enum ExprKind {
    Int(i64, DType),
    Float(f64, DType),
    Bool(bool),
    Local(Symbol),
    Graph(u64),
    Global(Symbol),
    Meta(MetaRef),
    /// A (dotted) name: a constructor or an operator.
    Name(Symbol),
    Call(Box<Expr>, Vec<Arg>),
    BinOp(BinOp, Box<Expr>, Box<Expr>),
    Fn(Box<FnSig>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    RefNew(Box<Expr>),
    RefRead(Box<Expr>),
    RefWrite(Box<Expr>, Box<Expr>),
    Tuple(Vec<Expr>),
    Proj(Box<Expr>, u32),
    Match {
        scrutinee: Box<Expr>,
        clauses: Vec<(Pattern, Expr)>,
        complete: bool,
    },
    /// Bindings followed by a body.
    Block(Vec<BlockItem>, Box<Expr>),
    /// `{ e }`: a new scope.
    Braced(Box<Expr>),
    /// A node dropped because it was nested too deeply (already reported).
    Error,
}

/// One binding in a block.
pub enum BlockItem {
    /// `let %x: T = e;`
    Let(Name, Option<Type>, Expr),
    /// `%N = e;`
    Graph(u64, Span, Expr),
    /// `free_var %x: T;`
    FreeVar(Name, Option<Type>),
    /// `e;`
    Seq(Expr),
}

/// A type node.
pub struct Type {
    /// What it is.
    pub kind: TypeKind,
    /// Where.
    pub span: Span,
    /// Nesting depth.
    pub depth: u32,
}

/// The forms of a type.
pub enum TypeKind {
    Tuple(Vec<Type>),
    Func(Vec<Name>, Vec<Type>, Box<Type>),
    Tensor(Vec<Dim>, Name),
    Named(Name, Option<Vec<Type>>),
    Ref(Box<Type>),
    Incomplete,
    Error,
}

/// A shape dimension.
pub enum Dim {
    Int(i64, Span),
    Any,
    Meta(MetaRef, Span),
}

/// A pattern node.
pub struct Pattern {
    /// What it is.
    pub kind: PatternKind,
    /// Where.
    pub span: Span,
    /// Nesting depth.
    pub depth: u32,
}

/// The forms of a pattern.
pub enum PatternKind {
    Wildcard,
    Var(Name, Option<Type>),
    Ctor(Name, Option<Vec<Pattern>>),
    Tuple(Vec<Pattern>),
    Error,
}

/// State the grammar's actions share: recorded errors and whether the depth error was already
/// reported.
#[derive(Default)]
pub struct Ctx {
    /// Errors found while building the tree.
    pub errors: Vec<crate::ParseError>,
    /// Syntax errors the grammar recovered from (converted to diagnostics by the driver).
    pub recovered: Vec<lalrpop_util::ParseError<usize, crate::lexer::Tok, ()>>,
    depth_reported: bool,
}

impl Ctx {
    fn too_deep(&mut self, span: Span) {
        if !self.depth_reported {
            self.depth_reported = true;
            self.errors.push(crate::ParseError::NestedTooDeeply {
                limit: relay_ir::MAX_NESTING,
                span: crate::ParseError::span_of(span),
            });
        }
    }

    /// Builds an expression node, enforcing the nesting limit.
    pub fn expr(&mut self, kind: ExprKind, span: Span) -> Expr {
        let depth = expr_children_depth(&kind) + 1;
        if depth > relay_ir::MAX_NESTING {
            self.too_deep(span);
            return Expr {
                kind: ExprKind::Error,
                span,
                depth: 1,
            };
        }
        Expr { kind, span, depth }
    }

    /// Builds a type node, enforcing the nesting limit.
    pub fn ty(&mut self, kind: TypeKind, span: Span) -> Type {
        let depth = 1 + match &kind {
            TypeKind::Tuple(ts) => max_depth(ts.iter().map(|t| t.depth)),
            TypeKind::Func(_, ps, r) => max_depth(ps.iter().map(|t| t.depth)).max(r.depth),
            TypeKind::Named(_, Some(args)) => max_depth(args.iter().map(|t| t.depth)),
            TypeKind::Ref(t) => t.depth,
            _ => 0,
        };
        if depth > relay_ir::MAX_NESTING {
            self.too_deep(span);
            return Type {
                kind: TypeKind::Error,
                span,
                depth: 1,
            };
        }
        Type { kind, span, depth }
    }

    /// Builds a pattern node, enforcing the nesting limit.
    pub fn pattern(&mut self, kind: PatternKind, span: Span) -> Pattern {
        let depth = 1 + match &kind {
            PatternKind::Ctor(_, Some(ps)) | PatternKind::Tuple(ps) => {
                max_depth(ps.iter().map(|p| p.depth))
            }
            PatternKind::Var(_, Some(t)) => t.depth,
            _ => 0,
        };
        if depth > relay_ir::MAX_NESTING {
            self.too_deep(span);
            return Pattern {
                kind: PatternKind::Error,
                span,
                depth: 1,
            };
        }
        Pattern { kind, span, depth }
    }
}

fn sig_depth(sig: &FnSig) -> u32 {
    let params = sig.params.iter().map(|p| match p {
        ParamItem::Param { ty: Some(t), .. } => t.depth,
        _ => 0,
    });
    params
        .chain(sig.ret.iter().map(|t| t.depth))
        .chain([sig.body.depth])
        .max()
        .unwrap_or(0)
}

fn max_depth(depths: impl Iterator<Item = u32>) -> u32 {
    depths.max().unwrap_or(0)
}

/// The depth of the deepest child of an expression node.
fn expr_children_depth(kind: &ExprKind) -> u32 {
    match kind {
        ExprKind::Call(f, args) => max_depth(args.iter().map(|a| match a {
            Arg::Expr(e) => e.depth,
            Arg::Attr(_) => 0,
        }))
        .max(f.depth),
        ExprKind::BinOp(_, a, b) | ExprKind::RefWrite(a, b) => a.depth.max(b.depth),
        ExprKind::Fn(sig) => sig_depth(sig),
        ExprKind::If(a, b, c) => a.depth.max(b.depth).max(c.depth),
        ExprKind::RefNew(e) | ExprKind::RefRead(e) | ExprKind::Proj(e, _) | ExprKind::Braced(e) => {
            e.depth
        }
        ExprKind::Tuple(es) => max_depth(es.iter().map(|e| e.depth)),
        ExprKind::Match {
            scrutinee, clauses, ..
        } => max_depth(clauses.iter().map(|(p, e)| p.depth.max(e.depth))).max(scrutinee.depth),
        ExprKind::Block(items, body) => max_depth(items.iter().map(|item| match item {
            BlockItem::Let(_, t, e) => e.depth.max(t.as_ref().map_or(0, |t| t.depth)),
            BlockItem::Graph(_, _, e) | BlockItem::Seq(e) => e.depth,
            BlockItem::FreeVar(_, t) => t.as_ref().map_or(0, |t| t.depth),
        }))
        .max(body.depth),
        _ => 0,
    }
}
