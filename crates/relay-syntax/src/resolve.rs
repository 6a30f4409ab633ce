//! The resolver: turns the syntax tree into `relay_ir`, resolving every name.
//!
//! Scoping (SPEC §1): locals are lexically scoped, with a new scope for function bodies,
//! branches, blocks and match clauses; a `let` variable is visible in its own value only when
//! the value is a function literal; graph variables `%N` are lexically scoped too, and a number
//! may be bound only once per function body. Types, constructors and globals may be used before
//! their definition. Operator calls get every attribute of the operator's schema, defaults
//! filled in, after checking names, kinds and required attributes.
//!
//! Scopes are shadow stacks (`HashMap<name, Vec<Var>>` plus an undo log), so lookups are O(1)
//! however long a binding chain is.

use std::collections::HashMap;
use std::sync::Arc;

use relay_ir::metadata::{MetaEntry, MetaTable};
use relay_ir::{
    AttrKind, AttrValue, Attrs, Binding, BindingKind, Clause, CtorDef, CtorRef, DType, Dim, Expr,
    ExprKind, FuncType, Function, GlobalFunc, Module, ModuleKind, NDArray, OpRef, Pattern,
    PatternKind, Span, Symbol, Type, TypeDef, TypeKind, TypeVar, Var,
};

use crate::ParseError;
use crate::ast;
use crate::lexer::MetaRef;

fn ss(span: Span) -> miette::SourceSpan {
    ParseError::span_of(span)
}

/// Resolves a parsed program into a module, appending problems to `errors`.
pub fn resolve(program: ast::Program, text: &str, errors: &mut Vec<ParseError>) -> Module {
    let mut r = Resolver::new(errors, program.metadata.clone(), text);
    r.program(program)
}

enum Meta {
    Absent,
    Raw(String, Span),
    Decoded(MetaTable),
    Failed,
}

struct Resolver<'e> {
    errors: &'e mut Vec<ParseError>,
    /// The source text, for quoting literals in messages.
    text: &'e str,
    meta: Meta,
    types: HashMap<Symbol, (usize, Span)>,
    ctors: HashMap<Symbol, (CtorRef, usize, Span)>,
    globals: HashMap<Symbol, Span>,
    locals: HashMap<Symbol, Vec<Var>>,
    local_undo: Vec<Symbol>,
    graph: HashMap<u64, Vec<Var>>,
    graph_undo: Vec<u64>,
    marks: Vec<(usize, usize)>,
    /// Per enclosing function body: every graph number bound so far, with where.
    graph_bound: Vec<HashMap<u64, Span>>,
    type_vars: Vec<TypeVar>,
    /// Names of `let`s whose (non-function) value is being resolved.
    pending_lets: Vec<Symbol>,
    /// `Some` in an expression program: the `free_var`s declared so far.
    free_vars: Option<Vec<Var>>,
    /// Scalar constants made so far, shared.
    scalars: HashMap<(DType, [u8; 8]), Arc<NDArray>>,
    /// Each operator's all-defaults attributes, shared.
    op_defaults: HashMap<*const relay_ir::OpSchema, Attrs>,
    /// Name hints of graph variables, by number.
    graph_names: HashMap<u64, Symbol>,
}

impl<'e> Resolver<'e> {
    fn new(
        errors: &'e mut Vec<ParseError>,
        metadata: Option<(String, Span)>,
        text: &'e str,
    ) -> Self {
        Resolver {
            errors,
            text,
            meta: match metadata {
                Some((text, span)) => Meta::Raw(text, span),
                None => Meta::Absent,
            },
            types: HashMap::new(),
            ctors: HashMap::new(),
            globals: HashMap::new(),
            locals: HashMap::new(),
            local_undo: Vec::new(),
            graph: HashMap::new(),
            graph_undo: Vec::new(),
            marks: Vec::new(),
            graph_bound: vec![HashMap::new()],
            type_vars: Vec::new(),
            pending_lets: Vec::new(),
            free_vars: None,
            scalars: HashMap::new(),
            op_defaults: HashMap::new(),
            graph_names: HashMap::new(),
        }
    }

    /// The name hint of graph variable `%n` (its number), interned once per number.
    fn graph_name(&mut self, n: u64) -> Symbol {
        *self
            .graph_names
            .entry(n)
            .or_insert_with(|| Symbol::intern(&n.to_string()))
    }

    /// A scalar constant. Equal scalars share one `NDArray` (constants are immutable).
    fn scalar(&mut self, dtype: DType, (raw, len): ScalarBytes, span: Span) -> Expr {
        let array = match self.scalars.get(&(dtype, raw)) {
            Some(a) => a.clone(),
            None => match NDArray::from_bytes(dtype, &[], &raw[..len]) {
                Ok(a) => {
                    let a = Arc::new(a);
                    self.scalars.insert((dtype, raw), a.clone());
                    a
                }
                Err(e) => {
                    self.invalid(
                        format!("internal error building a {dtype} constant: {e}"),
                        span,
                        "here",
                        Some("this is a bug in relayc".into()),
                    );
                    return Self::placeholder(span);
                }
            },
        };
        Expr::new(ExprKind::Constant(array), span)
    }

    /// An operator's attributes with every field at its default (required fields `None`),
    /// built once per operator and shared.
    fn default_attrs(&mut self, op: OpRef) -> Attrs {
        let key = op as *const relay_ir::OpSchema;
        self.op_defaults
            .entry(key)
            .or_insert_with(|| {
                let entries = op.attrs.iter().map(|f| {
                    let value = f.default.value().unwrap_or(AttrValue::Null);
                    (Symbol::intern(f.name), value)
                });
                Attrs::new(entries.collect())
            })
            .clone()
    }

    fn error(&mut self, e: ParseError) {
        self.errors.push(e);
    }

    fn invalid(&mut self, message: String, span: Span, label: &str, help: Option<String>) {
        self.error(ParseError::Invalid {
            message,
            span: ss(span),
            label: label.to_owned(),
            help,
        });
    }

    // ----- Module level -----

    fn program(&mut self, program: ast::Program) -> Module {
        match &program.version {
            Some((v, span)) if v != "\"0.0.5\"" => self.error(ParseError::BadVersion {
                found: v.clone(),
                span: ss(*span),
            }),
            None if program.expr.is_none() => self.error(ParseError::MissingVersion {
                span: ss(program.start),
            }),
            _ => {}
        }
        if let Some(expr) = program.expr {
            self.free_vars = Some(Vec::new());
            let body = self.expr(&expr);
            let params = self.free_vars.take().unwrap_or_default();
            let func = Function {
                type_params: Vec::new(),
                params,
                ret_type: None,
                body,
                attrs: Attrs::empty(),
            };
            return Module {
                functions: vec![GlobalFunc {
                    name: Symbol::intern("main"),
                    func,
                    span: expr.span,
                }],
                types: Vec::new(),
                kind: ModuleKind::Expr,
                source: None,
            };
        }

        // Types and constructors first, so they may be used before their definition.
        let mut types = Vec::new();
        for def in &program.defs {
            let ast::Def::Type {
                name,
                params,
                ctors,
                external,
                span,
            } = def
            else {
                continue;
            };
            if let Some(&(_, prev)) = self.types.get(&name.0) {
                self.error(ParseError::DuplicateDefinition {
                    what: "type",
                    name: name.0.to_string(),
                    span: ss(name.1),
                    previous: ss(prev),
                    help: None,
                });
                continue;
            }
            self.types.insert(name.0, (params.len(), name.1));
            if *external && ctors.as_ref().is_some_and(|c| !c.is_empty()) {
                self.error(ParseError::ExternTypeConstructors {
                    name: name.0.to_string(),
                    span: ss(*span),
                });
            }
            for (tag, c) in ctors.iter().flatten().enumerate() {
                if let Some(&(_, _, prev)) = self.ctors.get(&c.name.0) {
                    self.error(ParseError::DuplicateDefinition {
                        what: "constructor",
                        name: c.name.0.to_string(),
                        span: ss(c.name.1),
                        previous: ss(prev),
                        help: Some("constructor names are global: every constructor of every type needs its own name".into()),
                    });
                    continue;
                }
                let r = CtorRef {
                    adt: name.0,
                    name: c.name.0,
                    tag: tag as u32,
                };
                self.ctors.insert(c.name.0, (r, c.fields.len(), c.name.1));
            }
            types.push(def);
        }
        let mut type_defs = Vec::new();
        for def in types {
            let ast::Def::Type {
                name,
                params,
                ctors,
                external,
                span,
            } = def
            else {
                continue;
            };
            let tvs: Vec<TypeVar> = params.iter().map(|(n, s)| TypeVar::new(*n, *s)).collect();
            let saved = self.type_vars.len();
            self.type_vars.extend(tvs.iter().cloned());
            let ctors = ctors
                .iter()
                .flatten()
                .map(|c| CtorDef {
                    name: c.name.0,
                    fields: c.fields.iter().map(|t| self.ty(t)).collect(),
                    span: c.span,
                })
                .collect();
            self.type_vars.truncate(saved);
            type_defs.push(TypeDef {
                name: name.0,
                params: tvs,
                ctors,
                external: *external,
                span: *span,
            });
        }

        for def in &program.defs {
            if let ast::Def::Func { name, .. } = def {
                if let Some(&prev) = self.globals.get(&name.0) {
                    self.error(ParseError::DuplicateDefinition {
                        what: "global function",
                        name: format!("@{}", name.0),
                        span: ss(name.1),
                        previous: ss(prev),
                        help: Some("rename one of them; a module defines each global once".into()),
                    });
                } else {
                    self.globals.insert(name.0, name.1);
                }
            }
        }
        let mut functions = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for def in &program.defs {
            if let ast::Def::Func { name, sig, span } = def {
                let func = self.function(sig);
                if seen.insert(name.0) {
                    functions.push(GlobalFunc {
                        name: name.0,
                        func,
                        span: *span,
                    });
                }
            }
        }
        Module {
            functions,
            types: type_defs,
            kind: ModuleKind::Definitions,
            source: None,
        }
    }

    // ----- Scopes -----

    fn push_scope(&mut self) {
        self.marks
            .push((self.local_undo.len(), self.graph_undo.len()));
    }

    fn pop_scope(&mut self) {
        let (locals, graphs) = self.marks.pop().unwrap_or((0, 0));
        while self.local_undo.len() > locals {
            if let Some(name) = self.local_undo.pop()
                && let Some(stack) = self.locals.get_mut(&name)
            {
                stack.pop();
            }
        }
        while self.graph_undo.len() > graphs {
            if let Some(n) = self.graph_undo.pop()
                && let Some(stack) = self.graph.get_mut(&n)
            {
                stack.pop();
            }
        }
    }

    fn bind(&mut self, var: &Var) {
        self.locals.entry(var.name()).or_default().push(var.clone());
        self.local_undo.push(var.name());
    }

    fn bind_graph(&mut self, n: u64, var: &Var, span: Span) {
        let bound = self
            .graph_bound
            .last_mut()
            .expect("a function scope is always open");
        if let Some(&prev) = bound.get(&n) {
            self.errors.push(ParseError::DuplicateGraphVar {
                number: n.to_string(),
                span: ss(span),
                previous: ss(prev),
            });
        } else {
            bound.insert(n, span);
        }
        self.graph.entry(n).or_default().push(var.clone());
        self.graph_undo.push(n);
    }

    // ----- Functions -----

    fn function(&mut self, sig: &ast::FnSig) -> Function {
        let saved_tvs = self.type_vars.len();
        let type_params: Vec<TypeVar> = sig
            .type_params
            .iter()
            .map(|(n, s)| TypeVar::new(*n, *s))
            .collect();
        self.type_vars.extend(type_params.iter().cloned());
        self.push_scope();
        self.graph_bound.push(HashMap::new());
        let mut params = Vec::new();
        let mut attrs = Vec::new();
        for item in &sig.params {
            match item {
                ast::ParamItem::Param {
                    name,
                    ty,
                    attrs: param_attrs,
                } => {
                    // TVM gave parameter attributes meaning only for `virtual_device`, which
                    // relayc does not model; they are checked and then dropped.
                    let param_attrs: Vec<&ast::Attr> = param_attrs.iter().collect();
                    self.dict_attrs(&param_attrs);
                    if !attrs.is_empty() {
                        self.error(ParseError::ArgumentAfterAttributes {
                            what: "parameter",
                            span: ss(name.1),
                        });
                    }
                    let ty = ty.as_ref().map(|t| self.ty(t));
                    let var = Var::new(name.0, ty, name.1);
                    self.bind(&var);
                    params.push(var);
                }
                ast::ParamItem::Attr(a) => attrs.push(a),
            }
        }
        let attrs = self.dict_attrs(&attrs);
        let ret_type = sig.ret.as_ref().map(|t| self.ty(t));
        let body = self.expr(&sig.body);
        self.graph_bound.pop();
        self.pop_scope();
        self.type_vars.truncate(saved_tvs);
        Function {
            type_params,
            params,
            ret_type,
            body,
            attrs,
        }
    }

    // ----- Expressions -----

    fn placeholder(span: Span) -> Expr {
        Expr::new(ExprKind::Tuple(Vec::new()), span)
    }

    fn expr(&mut self, e: &ast::Expr) -> Expr {
        relay_ir::ensure_sufficient_stack(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &ast::Expr) -> Expr {
        let span = e.span;
        let kind = match &e.kind {
            ast::ExprKind::Int(v, dtype) => {
                return self.scalar(*dtype, int_bytes(*v, *dtype), span);
            }
            ast::ExprKind::Float(v, dtype) => {
                let bytes = float_bytes(*v, *dtype);
                if v.is_finite() && !float_bytes_finite(bytes) {
                    let max = match dtype.bits {
                        16 => "65504",
                        32 => "3.4028235e38",
                        _ => "1.7976931348623157e308",
                    };
                    self.error(ParseError::BadNumber {
                        message: format!(
                            "float literal `{}` is not representable in {dtype}",
                            self.text.get(std::ops::Range::from(span)).unwrap_or("")
                        ),
                        span: ss(span),
                        label: format!("rounds to infinity in {dtype}"),
                        help: Some(format!(
                            "the largest finite {dtype} is {max}; write `inff` for infinity"
                        )),
                    });
                }
                return self.scalar(*dtype, bytes, span);
            }
            ast::ExprKind::Bool(b) => {
                return self.scalar(DType::BOOL, bytes_of([u8::from(*b)]), span);
            }
            ast::ExprKind::Local(name) => match self.locals.get(name).and_then(|s| s.last()) {
                Some(var) => ExprKind::Var(var.clone()),
                None => {
                    let help = if self.pending_lets.contains(name) {
                        Some(format!(
                            "a `let` variable is visible in its own value only when the value is a function literal; `%{name}` is not bound outside this `let`"
                        ))
                    } else {
                        closest(
                            name.as_str(),
                            self.locals
                                .iter()
                                .filter(|(_, v)| !v.is_empty())
                                .map(|(k, _)| k.as_str()),
                        )
                        .map(|c| format!("did you mean `%{c}`?"))
                    };
                    self.error(ParseError::UndefinedLocal {
                        name: name.to_string(),
                        span: ss(span),
                        help,
                    });
                    return Self::placeholder(span);
                }
            },
            ast::ExprKind::Graph(n) => match self.graph.get(n).and_then(|s| s.last()) {
                Some(var) => ExprKind::Var(var.clone()),
                None => {
                    let help = if self.graph_bound.iter().any(|m| m.contains_key(n)) {
                        Some(format!(
                            "`%{n}` is bound inside a block or branch that has already ended, so it is not visible here"
                        ))
                    } else {
                        Some(format!("bind it first with `%{n} = ...;` in this function"))
                    };
                    self.error(ParseError::UndefinedGraphVar {
                        number: n.to_string(),
                        span: ss(span),
                        help,
                    });
                    return Self::placeholder(span);
                }
            },
            ast::ExprKind::Global(name) => {
                if !self.globals.contains_key(name) {
                    let help = closest(name.as_str(), self.globals.keys().map(|k| k.as_str()))
                        .map(|c| format!("did you mean `@{c}`?"));
                    self.error(ParseError::UndefinedGlobal {
                        name: name.to_string(),
                        span: ss(span),
                        help,
                    });
                }
                ExprKind::Global(*name)
            }
            ast::ExprKind::Meta(m) => match self.meta_constant(m, span) {
                Some(c) => ExprKind::Constant(c),
                None => return Self::placeholder(span),
            },
            ast::ExprKind::Name(name) => match self.callee_name(*name, span) {
                Some(Callee::Ctor(c, 0)) => {
                    let ctor = Expr::new(ExprKind::Ctor(c), span);
                    ExprKind::Call {
                        callee: ctor,
                        args: Vec::new(),
                        attrs: Attrs::empty(),
                    }
                }
                Some(Callee::Ctor(c, _)) => ExprKind::Ctor(c),
                Some(Callee::Op(op)) => ExprKind::Op(op),
                None => return Self::placeholder(span),
            },
            ast::ExprKind::Call(callee, args) => return self.call(callee, args, span),
            ast::ExprKind::BinOp(op, a, b) => {
                let a = self.expr(a);
                let b = self.expr(b);
                let Some(schema) = relay_ops::lookup(op.op_name()) else {
                    self.invalid(
                        format!("operator `{}` is not registered", op.op_name()),
                        span,
                        "here",
                        Some("this is a bug in relayc".into()),
                    );
                    return Self::placeholder(span);
                };
                let attrs = self.op_attrs(schema, &[], span);
                let callee = Expr::new(ExprKind::Op(schema), span);
                ExprKind::Call {
                    callee,
                    args: vec![a, b],
                    attrs,
                }
            }
            ast::ExprKind::Fn(sig) => ExprKind::Function(self.function(sig)),
            ast::ExprKind::If(c, t, f) => {
                let cond = self.expr(c);
                let then_branch = self.scoped(t);
                let else_branch = self.scoped(f);
                ExprKind::If {
                    cond,
                    then_branch,
                    else_branch,
                }
            }
            ast::ExprKind::RefNew(e) => ExprKind::RefNew(self.expr(e)),
            ast::ExprKind::RefRead(e) => ExprKind::RefRead(self.expr(e)),
            ast::ExprKind::RefWrite(a, b) => ExprKind::RefWrite(self.expr(a), self.expr(b)),
            ast::ExprKind::Tuple(es) => ExprKind::Tuple(es.iter().map(|e| self.expr(e)).collect()),
            ast::ExprKind::Proj(e, i) => ExprKind::Proj {
                tuple: self.expr(e),
                index: *i,
            },
            ast::ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let scrutinee = self.expr(scrutinee);
                let clauses = clauses
                    .iter()
                    .map(|(p, body)| {
                        self.push_scope();
                        let pattern = self.pattern(p);
                        let body = self.expr(body);
                        self.pop_scope();
                        Clause { pattern, body }
                    })
                    .collect();
                ExprKind::Match {
                    scrutinee,
                    clauses,
                    complete: *complete,
                }
            }
            ast::ExprKind::Block(items, body) => return self.block(items, body, span),
            ast::ExprKind::Braced(e) => return self.scoped(e),
            ast::ExprKind::Error => return Self::placeholder(span),
        };
        Expr::new(kind, span)
    }

    fn scoped(&mut self, e: &ast::Expr) -> Expr {
        self.push_scope();
        let e = self.expr(e);
        self.pop_scope();
        e
    }

    fn block(&mut self, items: &[ast::BlockItem], body: &ast::Expr, span: Span) -> Expr {
        self.push_scope();
        let mut bindings = Vec::with_capacity(items.len());
        for item in items {
            match item {
                ast::BlockItem::Let(name, ty, value) => {
                    let ty = ty.as_ref().map(|t| self.ty(t));
                    let var = Var::new(name.0, ty, name.1);
                    let value = if matches!(value.kind, ast::ExprKind::Fn(_)) {
                        self.bind(&var);
                        self.expr(value)
                    } else {
                        self.pending_lets.push(name.0);
                        let value = self.expr(value);
                        self.pending_lets.pop();
                        self.bind(&var);
                        value
                    };
                    bindings.push(Binding {
                        var,
                        value,
                        kind: BindingKind::Let,
                    });
                }
                ast::BlockItem::Graph(n, nspan, value) => {
                    let value = self.expr(value);
                    let var = Var::new(self.graph_name(*n), None, *nspan);
                    self.bind_graph(*n, &var, *nspan);
                    bindings.push(Binding {
                        var,
                        value,
                        kind: BindingKind::Graph,
                    });
                }
                ast::BlockItem::FreeVar(name, ty) => {
                    let ty = ty.as_ref().map(|t| self.ty(t));
                    let var = Var::new(name.0, ty, name.1);
                    self.bind(&var);
                    match &mut self.free_vars {
                        Some(free) => free.push(var),
                        None => self.invalid(
                            "`free_var` is not allowed inside a global function".into(),
                            name.1,
                            "free variable declared here",
                            Some("a global function cannot have free variables: make it a parameter instead".into()),
                        ),
                    }
                }
                ast::BlockItem::Seq(e) => {
                    let value = self.expr(e);
                    let var = Var::new(Symbol::intern(""), None, Span::DUMMY);
                    bindings.push(Binding {
                        var,
                        value,
                        kind: BindingKind::Seq,
                    });
                }
            }
        }
        let body = self.expr(body);
        self.pop_scope();
        if bindings.is_empty() {
            return body;
        }
        Expr::new(ExprKind::Let { bindings, body }, span)
    }

    fn callee_name(&mut self, name: Symbol, span: Span) -> Option<Callee> {
        if let Some(&(c, arity, _)) = self.ctors.get(&name) {
            return Some(Callee::Ctor(c, arity));
        }
        if let Some(op) = relay_ops::lookup(name.as_str()) {
            return Some(Callee::Op(op));
        }
        let text = name.as_str();
        let help = if let Some(c) = relay_ops::closest(text) {
            Some(format!("did you mean `{c}`?"))
        } else if let Some(c) = closest(text, self.ctors.keys().map(|k| k.as_str())) {
            Some(format!("did you mean the constructor `{c}`?"))
        } else if DType::parse(text).is_some() {
            Some(format!(
                "a dtype is not an expression; in attributes write it as a string: `dtype=\"{text}\"`"
            ))
        } else if !text.contains('.') {
            Some(format!(
                "local variables are written with `%` (`%{text}`), globals with `@` (`@{text}`); constructors must be defined by a `type`"
            ))
        } else {
            None
        };
        self.error(ParseError::UnknownOperator {
            name: text.to_owned(),
            span: ss(span),
            help,
        });
        None
    }

    fn call(&mut self, callee: &ast::Expr, args: &[ast::Arg], span: Span) -> Expr {
        let (callee, target) = match &callee.kind {
            ast::ExprKind::Name(name) => match self.callee_name(*name, callee.span) {
                Some(Callee::Ctor(c, _)) => {
                    (Expr::new(ExprKind::Ctor(c), callee.span), Target::Ctor(c))
                }
                Some(Callee::Op(op)) => (Expr::new(ExprKind::Op(op), callee.span), Target::Op(op)),
                None => (Self::placeholder(callee.span), Target::Other),
            },
            _ => (self.expr(callee), Target::Other),
        };
        let mut positional = Vec::new();
        let mut attrs: Vec<&ast::Attr> = Vec::new();
        for arg in args {
            match arg {
                ast::Arg::Expr(e) => {
                    if !attrs.is_empty() {
                        self.error(ParseError::ArgumentAfterAttributes {
                            what: "argument",
                            span: ss(e.span),
                        });
                    }
                    positional.push(self.expr(e));
                }
                ast::Arg::Attr(a) => attrs.push(a),
            }
        }
        let attrs = match target {
            Target::Op(op) => self.op_attrs(op, &attrs, span),
            Target::Ctor(c) => {
                if let Some(a) = attrs.first() {
                    self.invalid(
                        format!("constructor `{}` takes no attributes", c.name),
                        a.span,
                        "attribute given here",
                        None,
                    );
                }
                Attrs::empty()
            }
            Target::Other => self.dict_attrs(&attrs),
        };
        Expr::new(
            ExprKind::Call {
                callee,
                args: positional,
                attrs,
            },
            span,
        )
    }

    // ----- Attributes -----

    fn attr_value(&mut self, v: &ast::AttrValue) -> Option<AttrValue> {
        Some(match v {
            ast::AttrValue::Int(i, _) => AttrValue::Int(*i),
            ast::AttrValue::Float(f, _) => AttrValue::Float(*f),
            ast::AttrValue::Bool(b, _) => AttrValue::Bool(*b),
            ast::AttrValue::Str(s, _) => AttrValue::Str(s.as_str().into()),
            ast::AttrValue::Name((n, span)) => match n.as_str() {
                "None" | "nullptr" => AttrValue::Null,
                other => {
                    let help = if DType::parse(other).is_some() {
                        format!("dtypes are strings: write `\"{other}\"`")
                    } else {
                        format!(
                            "write a number, a string (`\"{other}\"`), `True`/`False`, `None` or a list `[...]`"
                        )
                    };
                    self.invalid(
                        format!("`{other}` is not an attribute value"),
                        *span,
                        "not a value",
                        Some(help),
                    );
                    return None;
                }
            },
            ast::AttrValue::Meta(m, span) => {
                let message = format!(
                    "`meta[{}][{}]` cannot be used as an attribute value",
                    m.key, m.index
                );
                self.error(ParseError::BadMetaReference {
                    message,
                    span: ss(*span),
                    label: "unsupported here".into(),
                    help: Some(
                        "relayc supports `relay.Constant` metadata in expressions only".into(),
                    ),
                });
                return None;
            }
            ast::AttrValue::Array(vs, _) => AttrValue::Array(
                vs.iter()
                    .map(|v| self.attr_value(v))
                    .collect::<Option<Vec<_>>>()?,
            ),
        })
    }

    fn dict_attrs(&mut self, attrs: &[&ast::Attr]) -> Attrs {
        let mut entries: Vec<(Symbol, AttrValue)> = Vec::new();
        let mut spans: Vec<Span> = Vec::new();
        for a in attrs {
            if let Some(i) = entries.iter().position(|(k, _)| *k == a.key.0) {
                self.error(ParseError::DuplicateAttribute {
                    name: a.key.0.to_string(),
                    span: ss(a.key.1),
                    previous: ss(spans[i]),
                });
                continue;
            }
            if let Some(v) = self.attr_value(&a.value) {
                entries.push((a.key.0, v));
                spans.push(a.key.1);
            }
        }
        Attrs::new(entries)
    }

    fn op_attrs(&mut self, op: OpRef, attrs: &[&ast::Attr], call_span: Span) -> Attrs {
        let defaults = self.default_attrs(op);
        let any_required = op
            .attrs
            .iter()
            .any(|f| matches!(f.default, relay_ir::AttrDefault::Required));
        if attrs.is_empty() && !any_required {
            return defaults;
        }
        // Where each field was written (even with a bad value, so it is not also "missing"),
        // and its checked value.
        let mut written: Vec<Option<Span>> = vec![None; op.attrs.len()];
        let mut values: Vec<Option<AttrValue>> = vec![None; op.attrs.len()];
        for a in attrs {
            let name = a.key.0.as_str();
            let Some((i, field)) = op.field(name) else {
                let valid: Vec<&str> = op.attrs.iter().map(|f| f.name).collect();
                let mut help = if valid.is_empty() {
                    format!("`{}` takes no attributes", op.name)
                } else {
                    format!("`{}` has the attributes {}", op.name, quote_list(&valid))
                };
                if let Some(c) = relay_ops::closest_attr(op, name) {
                    help = format!("did you mean `{c}`? {help}");
                }
                self.error(ParseError::UnknownAttribute {
                    op: op.name.to_owned(),
                    name: name.to_owned(),
                    span: ss(a.key.1),
                    help: Some(help),
                });
                continue;
            };
            if let Some(prev) = written[i] {
                self.error(ParseError::DuplicateAttribute {
                    name: name.to_owned(),
                    span: ss(a.key.1),
                    previous: ss(prev),
                });
                continue;
            }
            written[i] = Some(a.key.1);
            let Some(value) = self.attr_value(&a.value) else {
                continue;
            };
            match field.check(value) {
                Ok(v) => values[i] = Some(v),
                Err((expected, found)) => self.error(ParseError::BadAttributeValue {
                    op: op.name.to_owned(),
                    name: name.to_owned(),
                    expected: expected.to_owned(),
                    found,
                    span: ss(a.value.span()),
                    help: (field.kind == AttrKind::DType)
                        .then(|| "dtypes are strings such as \"float32\" or \"int64\"".to_owned()),
                }),
            }
        }
        let mut entries = Vec::with_capacity(op.attrs.len());
        let keys = defaults.iter().map(|(k, _)| *k);
        for (((field, value), written), key) in op.attrs.iter().zip(values).zip(written).zip(keys) {
            let value = match value {
                Some(v) => v,
                None if written.is_some() => AttrValue::Null,
                None => match field.default.value() {
                    Some(v) => v,
                    None => {
                        let help = if field.nullable {
                            Some(format!("write `{}=None` for TVM's null value", field.name))
                        } else {
                            None
                        };
                        self.error(ParseError::MissingAttribute {
                            op: op.name.to_owned(),
                            name: field.name.to_owned(),
                            span: ss(call_span),
                            help,
                        });
                        AttrValue::Null
                    }
                },
            };
            entries.push((key, value));
        }
        Attrs::new(entries)
    }

    // ----- Metadata -----

    fn meta_constant(&mut self, m: &MetaRef, span: Span) -> Option<Arc<NDArray>> {
        if let Meta::Raw(text, section) = &self.meta {
            let section = *section;
            self.meta = match relay_ir::metadata::decode(text) {
                Ok(table) => Meta::Decoded(table),
                Err(e) => {
                    // Point at the JSON error itself: the section's text starts right after
                    // `#[metadata]`.
                    let span = match &e {
                        relay_ir::metadata::MetadataError::Json { line, column, .. } => {
                            let start = section.hi as usize - text.len();
                            let at = byte_offset(text, *line, *column);
                            Span::new(start + at, start + at + 1)
                        }
                        _ => section,
                    };
                    self.error(ParseError::BadMetadata {
                        message: e.to_string(),
                        span: ss(span),
                    });
                    Meta::Failed
                }
            };
        }
        let bad =
            |message: String, label: &str, help: Option<String>| ParseError::BadMetaReference {
                message,
                span: ss(span),
                label: label.to_owned(),
                help,
            };
        let reference = format!("meta[{}][{}]", m.key, m.index);
        match &self.meta {
            Meta::Absent => {
                self.error(bad(
                    format!("`{reference}` refers to metadata, but the file has no `#[metadata]` section"),
                    "no metadata section",
                    Some("metadata constants come with a `#[metadata]` section at the end of the file, as TVM's printer writes it with show_meta_data=True".into()),
                ));
                None
            }
            Meta::Failed | Meta::Raw(..) => None,
            Meta::Decoded(table) => match table.get(&m.key, m.index as usize) {
                Some(MetaEntry::Constant(c)) if m.key == "relay.Constant" => Some(c.clone()),
                Some(_) => {
                    let e = bad(
                        format!("unsupported metadata kind `{}`", m.key),
                        "unsupported kind",
                        Some("relayc loads `relay.Constant` metadata; other kinds (symbolic shapes, virtual devices, attribute objects) are not supported".into()),
                    );
                    self.error(e);
                    None
                }
                None => {
                    let count = table.len(&m.key);
                    let e = if count == 0 {
                        bad(
                            format!("the metadata section has no `{}` entries", m.key),
                            "no such entry",
                            None,
                        )
                    } else {
                        bad(
                            format!(
                                "`{reference}` is out of range: the metadata section has {count} `{}` entries",
                                m.key
                            ),
                            "index out of range",
                            None,
                        )
                    };
                    self.error(e);
                    None
                }
            },
        }
    }

    // ----- Types -----

    fn ty(&mut self, t: &ast::Type) -> Type {
        relay_ir::ensure_sufficient_stack(|| self.ty_inner(t))
    }

    fn ty_inner(&mut self, t: &ast::Type) -> Type {
        let span = t.span;
        let kind = match &t.kind {
            ast::TypeKind::Tuple(ts) => TypeKind::Tuple(ts.iter().map(|t| self.ty(t)).collect()),
            ast::TypeKind::Func(tps, ps, ret) => {
                let saved = self.type_vars.len();
                let type_params: Vec<TypeVar> =
                    tps.iter().map(|(n, s)| TypeVar::new(*n, *s)).collect();
                self.type_vars.extend(type_params.iter().cloned());
                let params = ps.iter().map(|t| self.ty(t)).collect();
                let ret = self.ty(ret);
                self.type_vars.truncate(saved);
                TypeKind::Func(FuncType {
                    type_params,
                    params,
                    ret,
                })
            }
            ast::TypeKind::Tensor(dims, (dtype, dspan)) => {
                let Some(dtype) = DType::parse(dtype.as_str()) else {
                    self.invalid(
                        format!("unknown dtype `{dtype}`"),
                        *dspan,
                        "not a dtype",
                        Some("dtypes are bool, int8/16/32/64, uint8/16/32/64, float16/32/64 (optionally with lanes, e.g. float32x4)".into()),
                    );
                    return Type::new(TypeKind::Incomplete, span);
                };
                let shape = dims
                    .iter()
                    .map(|d| match d {
                        ast::Dim::Int(v, s) => {
                            if *v < 0 {
                                self.invalid(format!("negative dimension {v}"), *s, "dimensions are non-negative", Some("write `?` for a dimension known only at run time".into()));
                            }
                            Dim::Known(*v)
                        }
                        ast::Dim::Any => Dim::Any,
                        ast::Dim::Meta(m, s) => {
                            self.error(ParseError::BadMetaReference {
                                message: format!("unsupported metadata kind `{}` in a shape", m.key),
                                span: ss(*s),
                                label: "unsupported kind".into(),
                                help: Some("symbolic dimensions are not supported; write `?` for a dimension known only at run time".into()),
                            });
                            Dim::Any
                        }
                    })
                    .collect();
                TypeKind::Tensor { shape, dtype }
            }
            ast::TypeKind::Named((name, nspan), args) => {
                let text = name.as_str();
                let tv = self
                    .type_vars
                    .iter()
                    .rev()
                    .find(|v| v.name() == *name)
                    .cloned();
                match (args, DType::parse(text), tv) {
                    (None, _, Some(tv)) => TypeKind::Var(tv),
                    (None, Some(dtype), None) => TypeKind::Tensor {
                        shape: Vec::new(),
                        dtype,
                    },
                    (Some(_), Some(_), None) | (Some(_), _, Some(_)) => {
                        self.invalid(
                            format!("`{text}` takes no type arguments"),
                            span,
                            "not a type constructor",
                            None,
                        );
                        TypeKind::Incomplete
                    }
                    (args, None, None) => {
                        if !self.types.contains_key(name) {
                            let help = closest(text, self.types.keys().map(|k| k.as_str()))
                                .map(|c| format!("did you mean `{c}`?"))
                                .or_else(|| Some("types are dtypes (`float32`), `Tensor[(..), dtype]`, tuples, `fn (..) -> T`, type parameters in scope, or names defined with `type`".into()));
                            self.error(ParseError::UndefinedType {
                                name: text.to_owned(),
                                span: ss(*nspan),
                                help,
                            });
                        }
                        let args = args.iter().flatten().map(|t| self.ty(t)).collect();
                        TypeKind::Adt { name: *name, args }
                    }
                }
            }
            ast::TypeKind::Ref(t) => TypeKind::Ref(self.ty(t)),
            ast::TypeKind::Incomplete | ast::TypeKind::Error => TypeKind::Incomplete,
        };
        Type::new(kind, span)
    }

    // ----- Patterns -----

    fn pattern(&mut self, p: &ast::Pattern) -> Pattern {
        relay_ir::ensure_sufficient_stack(|| self.pattern_inner(p))
    }

    fn pattern_inner(&mut self, p: &ast::Pattern) -> Pattern {
        let kind = match &p.kind {
            ast::PatternKind::Wildcard | ast::PatternKind::Error => PatternKind::Wildcard,
            ast::PatternKind::Var(name, ty) => {
                let ty = ty.as_ref().map(|t| self.ty(t));
                let var = Var::new(name.0, ty, name.1);
                self.bind(&var);
                PatternKind::Var(var)
            }
            ast::PatternKind::Ctor((name, nspan), args) => {
                let Some(&(ctor, arity, _)) = self.ctors.get(name) else {
                    let text = name.as_str();
                    let help = closest(text, self.ctors.keys().map(|k| k.as_str()))
                        .map(|c| format!("did you mean `{c}`?"))
                        .or_else(|| Some(format!("to bind a variable, write `%{text}`")));
                    self.error(ParseError::UndefinedConstructor {
                        name: text.to_owned(),
                        span: ss(*nspan),
                        help,
                    });
                    // Bind the sub-patterns' variables anyway, so their uses are not reported
                    // as undefined too.
                    for sub in args.iter().flatten() {
                        self.pattern(sub);
                    }
                    return Pattern {
                        kind: PatternKind::Wildcard,
                        span: p.span,
                    };
                };
                let given = args.as_ref().map_or(0, |a| a.len());
                if given != arity && !(args.is_none() && arity == 0) {
                    let fields = if arity == 1 { "field" } else { "fields" };
                    self.invalid(
                        format!("constructor `{name}` has {arity} {fields}, but the pattern gives {given}"),
                        p.span,
                        "wrong number of sub-patterns",
                        Some("use `_` for fields you do not need".into()),
                    );
                }
                let args = args.iter().flatten().map(|p| self.pattern(p)).collect();
                PatternKind::Ctor(ctor, args)
            }
            ast::PatternKind::Tuple(ps) => {
                PatternKind::Tuple(ps.iter().map(|p| self.pattern(p)).collect())
            }
        };
        Pattern { kind, span: p.span }
    }
}

#[derive(Clone, Copy)]
enum Callee {
    Ctor(CtorRef, usize),
    Op(OpRef),
}

#[derive(Clone, Copy)]
enum Target {
    Ctor(CtorRef),
    Op(OpRef),
    Other,
}

fn quote_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("`{s}`")).collect();
    match quoted.len() {
        0 => String::new(),
        1 => quoted[0].clone(),
        n => format!("{} and {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    }
}

/// The candidate closest to `name` by edit distance, if it is reasonably close.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(2);
    candidates
        .filter(|c| !c.is_empty() && *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The native-endian bytes of a scalar literal (up to 8 of them) and how many are used.
type ScalarBytes = ([u8; 8], usize);

fn bytes_of<const N: usize>(b: [u8; N]) -> ScalarBytes {
    let mut out = [0u8; 8];
    out[..N].copy_from_slice(&b);
    (out, N)
}

fn int_bytes(v: i64, dtype: DType) -> ScalarBytes {
    match dtype.bits {
        8 => bytes_of((v as i8).to_ne_bytes()),
        16 => bytes_of((v as i16).to_ne_bytes()),
        32 => bytes_of((v as i32).to_ne_bytes()),
        _ => bytes_of(v.to_ne_bytes()),
    }
}

fn float_bytes(v: f64, dtype: DType) -> ScalarBytes {
    match dtype.bits {
        16 => bytes_of(relay_runtime::half::f64_to_f16_bits(v).to_ne_bytes()),
        32 => bytes_of((v as f32).to_ne_bytes()),
        _ => bytes_of(v.to_ne_bytes()),
    }
}

/// Whether float scalar bytes from [`float_bytes`] are finite (a literal may round to
/// infinity in a narrow width).
fn float_bytes_finite((b, len): ScalarBytes) -> bool {
    match len {
        2 => relay_runtime::half::f16_bits_to_f32(u16::from_ne_bytes([b[0], b[1]])).is_finite(),
        4 => f32::from_ne_bytes([b[0], b[1], b[2], b[3]]).is_finite(),
        _ => true,
    }
}

/// The byte offset of a 1-based line and column in `text` (clamped to the text).
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + column.saturating_sub(1)).min(text.len().saturating_sub(1))
}
