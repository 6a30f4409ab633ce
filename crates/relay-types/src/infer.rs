//! The checker: one walk over every global function that gives each expression and variable an
//! inference type, unifying as it goes, with operator relations and projections of still
//! unknown tuples deferred until their inputs are known.
//!
//! Globals get their declared signature (fresh unknowns where a parameter or the result is not
//! annotated) before any body is checked, so recursion and forward references work. A global
//! whose signature is incomplete is checked on first reference, so its uses see what its body
//! determines. Each reference to a polymorphic global, constructor or let-bound polymorphic
//! function instantiates its type parameters afresh, except when it is passed directly where a
//! polymorphic function type is expected (`@apply_poly(@id, 1)` with a parameter of type
//! `fn [A](A) -> A`): then it keeps its type parameters, which unify up to renaming.
//!
//! Every node and variable typed is recorded with its inference type; only when the whole module
//! checked without errors are the solved types converted and stored on the IR, so a failed check
//! leaves the module untouched.

use std::collections::{HashMap, HashSet};

use relay_ir::{
    Binding, CtorRef, Expr, ExprKind, Function, Module, OpRef, Pattern, PatternKind, Span, Symbol,
    Type, TypeKind, TypeVarId, Var, VarId,
};

use crate::errors::{
    InternalError, TypeError, TypeErrors, TypeWarning, Warning, named_source, source_span,
};
use crate::exhaustive;
use crate::solver::{Arena, Clash, Finalizer, IdMap, Origin, Solved, Ty, TyId};

/// A global function's signature, fixed before bodies are checked.
#[derive(Clone, Debug)]
struct Sig {
    /// The function type (polymorphic when the `def` has type parameters).
    ty: TyId,
    /// The parameter types, shared with the body.
    params: Vec<TyId>,
    /// The result type, shared with the body.
    ret: TyId,
    /// Whether every parameter and the result are annotated without `_`.
    complete: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Unchecked,
    InProgress,
    Done,
}

/// A constraint waiting for types to become known.
enum Pending {
    /// An operator call; its relation runs once every input type is known.
    Relation {
        op: OpRef,
        call: Expr,
        args: Vec<TyId>,
        result: TyId,
    },
    /// A projection of a value whose type is not yet known to be a tuple.
    Proj {
        tuple: TyId,
        index: u32,
        result: TyId,
        span: Span,
    },
}

/// The type checker of one module.
pub(crate) struct Checker<'m> {
    module: &'m Module,
    arena: Arena,
    globals: HashMap<Symbol, usize>,
    types: HashMap<Symbol, usize>,
    sigs: Vec<Sig>,
    state: Vec<State>,
    locals: IdMap<VarId, TyId>,
    exprs: Vec<(Expr, TyId)>,
    vars: Vec<(Var, TyId)>,
    pending: Vec<Pending>,
    errors: Vec<TypeError>,
    warnings: Vec<Warning>,
    /// Name hints of fresh unknowns: `T` for values, `R` for results.
    hint_value: Symbol,
    hint_result: Symbol,
}

/// No type parameters to substitute: annotations whose type variables are the rigid
/// parameters of the enclosing `def` or `fn`.
fn no_subst() -> HashMap<TypeVarId, TyId> {
    HashMap::new()
}

impl<'m> Checker<'m> {
    /// A checker for `module`, before any signature is made.
    pub(crate) fn new(module: &'m Module) -> Checker<'m> {
        let globals = module
            .functions
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name, i))
            .collect();
        let types = module
            .types
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name, i))
            .collect();
        Checker {
            module,
            arena: Arena::default(),
            globals,
            types,
            sigs: Vec::new(),
            state: vec![State::Unchecked; module.functions.len()],
            locals: IdMap::default(),
            exprs: Vec::new(),
            vars: Vec::new(),
            pending: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            hint_value: Symbol::intern("T"),
            hint_result: Symbol::intern("R"),
        }
    }

    /// Checks the whole module and, on success, records every checked type.
    pub(crate) fn run(mut self) -> Result<Vec<TypeWarning>, TypeErrors> {
        let module = self.module;
        for f in &module.functions {
            let sig = self.signature(&f.func);
            self.sigs.push(sig);
        }
        for i in 0..module.functions.len() {
            if self.state[i] == State::Unchecked {
                self.check_global(i);
            }
        }
        self.solve_pending();
        self.report_pending();
        self.finish()
    }

    // ----- Globals -----

    fn signature(&mut self, f: &Function) -> Sig {
        let none = no_subst();
        let mut complete = true;
        let mut params = Vec::with_capacity(f.params.len());
        for p in &f.params {
            params.push(match p.ty() {
                Some(t) => {
                    complete &= !has_incomplete(t);
                    self.arena.import(t, &none)
                }
                None => {
                    complete = false;
                    self.arena.fresh(Origin::Unknown, p.name())
                }
            });
        }
        let ret = match &f.ret_type {
            Some(t) => {
                complete &= !has_incomplete(t);
                self.arena.import(t, &none)
            }
            None => {
                complete = false;
                self.arena.fresh(Origin::Unknown, self.hint_result)
            }
        };
        let ty = self.arena.add(Ty::Func {
            type_params: f.type_params.clone(),
            params: params.clone(),
            ret,
        });
        Sig {
            ty,
            params,
            ret,
            complete,
        }
    }

    fn check_global(&mut self, i: usize) {
        let module = self.module;
        let global = &module.functions[i];
        self.state[i] = State::InProgress;
        self.warn_external(&global.func, format!("`@{}`", global.name), global.span);
        let sig = self.sigs[i].clone();
        for (p, &t) in global.func.params.iter().zip(&sig.params) {
            self.bind(p, t);
        }
        let body = self.body(sig.ret, &global.func.body);
        let name = global.name;
        self.expect(sig.ret, body, global.func.body.span(), || {
            format!("the body of `@{name}`")
        });
        self.state[i] = State::Done;
        self.solve_pending();
    }

    fn global_ref(&mut self, name: Symbol, span: Span) -> TyId {
        let Some(&i) = self.globals.get(&name) else {
            return self.internal(format!("`@{name}` is not defined"), span);
        };
        if !self.sigs[i].complete && self.state[i] == State::Unchecked {
            self.check_global(i);
        }
        let ty = self.sigs[i].ty;
        self.arena.instantiate(ty)
    }

    // ----- Expressions -----

    fn expr(&mut self, e: &Expr) -> TyId {
        let ty = relay_ir::ensure_sufficient_stack(|| self.expr_inner(e));
        self.exprs.push((e.clone(), ty));
        ty
    }

    fn expr_inner(&mut self, e: &Expr) -> TyId {
        match e.kind() {
            ExprKind::Constant(c) => self.arena.add(Ty::Tensor {
                shape: c.shape().iter().map(|&d| relay_ir::Dim::Known(d)).collect(),
                dtype: c.dtype(),
            }),
            ExprKind::Var(v) => match self.locals.get(&v.id()) {
                Some(&t) => self.arena.instantiate(t),
                None => self.internal(format!("`%{}` is not bound", v.name()), e.span()),
            },
            ExprKind::Global(name) => self.global_ref(*name, e.span()),
            ExprKind::Op(op) => {
                self.errors.push(TypeError::OperatorValue {
                    op: op.name,
                    span: source_span(e.span()),
                });
                self.arena.error()
            }
            ExprKind::Ctor(c) => match self.ctor_instance(*c, e.span()) {
                Some((fields, adt)) => self.arena.add(Ty::Func {
                    type_params: Vec::new(),
                    params: fields,
                    ret: adt,
                }),
                None => self.arena.error(),
            },
            ExprKind::Call { callee, args, .. } => match callee.kind() {
                ExprKind::Op(op) => self.op_call(e, callee, op, args),
                _ => self.call(e, callee, args),
            },
            ExprKind::Function(f) => {
                self.warn_external(f, "this function".to_owned(), e.span());
                self.function(f)
            }
            ExprKind::Let { .. } => self.let_chain(e, false),
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let c = self.expr(cond);
                let b = self.arena.scalar(relay_ir::DType::BOOL);
                self.expect(b, c, cond.span(), || "the condition".to_owned());
                let t = self.expr(then_branch);
                let f = self.expr(else_branch);
                self.expect(t, f, else_branch.span(), || "the `else` branch".to_owned());
                t
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let s = self.expr(scrutinee);
                let mut result = None;
                for clause in clauses {
                    self.pattern(&clause.pattern, s);
                    let b = self.expr(&clause.body);
                    match result {
                        None => result = Some(b),
                        Some(r) => self.expect(r, b, clause.body.span(), || {
                            "this clause's result".to_owned()
                        }),
                    }
                }
                if *complete
                    && let Some(missing) =
                        exhaustive::missing_pattern(self.module, clauses.iter().map(|c| &c.pattern))
                {
                    self.warnings.push(Warning::NonExhaustiveMatch {
                        missing,
                        span: source_span(scrutinee.span()),
                    });
                }
                result.unwrap_or_else(|| self.arena.fresh(Origin::Instance, self.hint_value))
            }
            ExprKind::Tuple(fields) => {
                let fields = fields.iter().map(|f| self.expr(f)).collect();
                self.arena.add(Ty::Tuple(fields))
            }
            ExprKind::Proj { tuple, index } => {
                let t = self.expr(tuple);
                let result = self.arena.fresh(Origin::Unknown, self.hint_value);
                let pending = Pending::Proj {
                    tuple: t,
                    index: *index,
                    result,
                    span: e.span(),
                };
                if !self.try_solve(&pending) {
                    self.pending.push(pending);
                }
                result
            }
            ExprKind::RefNew(v) => {
                let t = self.expr(v);
                self.arena.add(Ty::Ref(t))
            }
            ExprKind::RefRead(r) => {
                let t = self.expr(r);
                let inner = self.arena.fresh(Origin::Unknown, self.hint_value);
                let expected = self.arena.add(Ty::Ref(inner));
                self.expect(expected, t, r.span(), || {
                    "the operand of `ref_read`".to_owned()
                });
                inner
            }
            ExprKind::RefWrite(r, v) => {
                let rt = self.expr(r);
                let vt = self.expr(v);
                let inner = self.arena.fresh(Origin::Unknown, self.hint_value);
                let expected = self.arena.add(Ty::Ref(inner));
                self.expect(expected, rt, r.span(), || {
                    "the first operand of `ref_write`".to_owned()
                });
                self.expect(inner, vt, v.span(), || {
                    "the value written by `ref_write`".to_owned()
                });
                self.arena.add(Ty::Tuple(Vec::new()))
            }
        }
    }

    /// A call of anything but an operator.
    fn call(&mut self, e: &Expr, callee: &Expr, args: &[Expr]) -> TyId {
        let f = self.expr(callee);
        let f = self.arena.instantiate(f);
        let (_, node) = self.arena.root_node(f);
        let expected: Vec<TyId> = match &node {
            Ty::Func { params, .. } => params.clone(),
            _ => Vec::new(),
        };
        let arg_tys: Vec<TyId> = args
            .iter()
            .enumerate()
            .map(|(i, a)| match expected.get(i) {
                Some(&p) if self.is_polymorphic(p) => self.expr_uninstantiated(a),
                _ => self.expr(a),
            })
            .collect();
        let desc = match callee.kind() {
            ExprKind::Global(name) => format!("`@{name}`"),
            ExprKind::Var(v) if !v.name().as_str().is_empty() => format!("`%{}`", v.name()),
            ExprKind::Ctor(c) => format!("`{}`", c.name),
            _ => "the function".to_owned(),
        };
        match node {
            Ty::Func { params, ret, .. } => {
                if params.len() != args.len() {
                    let callee_ty = self.arena.display(f);
                    self.errors.push(TypeError::Arity {
                        callee: desc,
                        expected: params.len(),
                        found: args.len(),
                        span: source_span(e.span()),
                        help: Some(format!("its type is `{callee_ty}`")),
                    });
                    return self.arena.error();
                }
                for (i, ((&p, &a), arg)) in params.iter().zip(&arg_tys).zip(args).enumerate() {
                    self.expect(p, a, arg.span(), || format!("argument {} of {desc}", i + 1));
                }
                ret
            }
            Ty::Var(..) => {
                let ret = self.arena.fresh(Origin::Unknown, self.hint_result);
                let g = self.arena.add(Ty::Func {
                    type_params: Vec::new(),
                    params: arg_tys,
                    ret,
                });
                self.expect(f, g, callee.span(), || format!("{desc}, called here"));
                ret
            }
            Ty::Error => self.arena.error(),
            _ => {
                let found = self.arena.display(f);
                self.errors.push(TypeError::NotAFunction {
                    found: found.to_string(),
                    span: source_span(callee.span()),
                });
                self.arena.error()
            }
        }
    }

    /// Whether `ty` is a function type with type parameters.
    fn is_polymorphic(&mut self, ty: TyId) -> bool {
        let (_, node) = self.arena.root_node(ty);
        matches!(node, Ty::Func { type_params, .. } if !type_params.is_empty())
    }

    /// The type of a function body whose result type is `ret`: a polymorphic result keeps a
    /// returned polymorphic global or variable uninstantiated, as an argument would be
    /// (`def @f() -> fn [A](A) -> A { @id }`, the form `lambda_lift` gives a returned
    /// polymorphic literal).
    fn body(&mut self, ret: TyId, body: &Expr) -> TyId {
        if self.is_polymorphic(ret) {
            match body.kind() {
                ExprKind::Let { .. } => {
                    let ty = self.let_chain(body, true);
                    self.exprs.push((body.clone(), ty));
                    ty
                }
                _ => self.expr_uninstantiated(body),
            }
        } else {
            self.expr(body)
        }
    }

    /// The type of an argument passed where a polymorphic function is expected: a reference to
    /// a polymorphic global or variable keeps its type parameters instead of being
    /// instantiated.
    fn expr_uninstantiated(&mut self, e: &Expr) -> TyId {
        let ty = match e.kind() {
            ExprKind::Global(name) => match self.globals.get(name) {
                Some(&i) => {
                    if !self.sigs[i].complete && self.state[i] == State::Unchecked {
                        self.check_global(i);
                    }
                    self.sigs[i].ty
                }
                None => return self.expr(e),
            },
            ExprKind::Var(v) => match self.locals.get(&v.id()) {
                Some(&t) => t,
                None => return self.expr(e),
            },
            _ => return self.expr(e),
        };
        self.exprs.push((e.clone(), ty));
        ty
    }

    /// A call of an operator: its relation runs once the input types are known.
    fn op_call(&mut self, e: &Expr, callee: &Expr, op: OpRef, args: &[Expr]) -> TyId {
        let arg_tys: Vec<TyId> = args.iter().map(|a| self.expr(a)).collect();
        let result = self.arena.fresh(Origin::Unknown, self.hint_value);
        let op_ty = self.arena.add(Ty::Func {
            type_params: Vec::new(),
            params: arg_tys.clone(),
            ret: result,
        });
        self.exprs.push((callee.clone(), op_ty));
        if args.len() != op.inputs.len() {
            self.errors.push(TypeError::Arity {
                callee: format!("`{}`", op.name),
                expected: op.inputs.len(),
                found: args.len(),
                span: source_span(e.span()),
                help: Some(format!("its inputs are {}", op.inputs.join(", "))),
            });
            let err = self.arena.error();
            let _ = self.arena.unify(result, err);
            return result;
        }
        if op.relation.is_none() {
            self.errors.push(TypeError::NoRelation {
                op: op.name,
                span: source_span(e.span()),
            });
            let err = self.arena.error();
            let _ = self.arena.unify(result, err);
            return result;
        }
        let pending = Pending::Relation {
            op,
            call: e.clone(),
            args: arg_tys,
            result,
        };
        if !self.try_solve(&pending) {
            self.pending.push(pending);
        }
        result
    }

    /// Warns that a function partitioned for an external compiler runs as ordinary Relay.
    fn warn_external(&mut self, f: &Function, function: String, span: Span) {
        if let Some(compiler) = f.attrs.get("Compiler") {
            let compiler = compiler
                .as_str()
                .map_or_else(|| format!("{compiler:?}"), str::to_owned);
            self.warnings.push(Warning::ExternalCompiler {
                compiler,
                function,
                span: source_span(self.first_line(span)),
            });
        }
    }

    /// The part of `span` on its first line of source (a function's header).
    fn first_line(&self, span: Span) -> Span {
        let Some(source) = &self.module.source else {
            return span;
        };
        let text = source
            .text
            .get(span.lo as usize..span.hi as usize)
            .unwrap_or("");
        match text.find('\n') {
            Some(end) => Span {
                lo: span.lo,
                hi: span.lo + end as u32,
            },
            None => span,
        }
    }

    fn function(&mut self, f: &Function) -> TyId {
        let none = no_subst();
        let mut params = Vec::with_capacity(f.params.len());
        for p in &f.params {
            let t = match p.ty() {
                Some(t) => self.arena.import(t, &none),
                None => self.arena.fresh(Origin::Unknown, p.name()),
            };
            self.bind(p, t);
            params.push(t);
        }
        let ret = match &f.ret_type {
            Some(t) => self.arena.import(t, &none),
            None => self.arena.fresh(Origin::Unknown, self.hint_result),
        };
        let body = self.body(ret, &f.body);
        self.expect(ret, body, f.body.span(), || {
            "the function's body".to_owned()
        });
        self.arena.add(Ty::Func {
            type_params: f.type_params.clone(),
            params,
            ret,
        })
    }

    /// A binding chain, iterated (never recursed) along its bindings and nested chains in body
    /// position; with `uninstantiated`, the final body is typed as by [`Self::body`]'s
    /// polymorphic case.
    fn let_chain(&mut self, e: &Expr, uninstantiated: bool) -> TyId {
        let mut chain = Vec::new();
        let mut cur = e;
        while let ExprKind::Let { bindings, body } = cur.kind() {
            if !Expr::ptr_eq(cur, e) {
                chain.push(cur.clone());
            }
            for b in bindings {
                self.binding(b);
            }
            cur = body;
        }
        let ty = if uninstantiated {
            self.expr_uninstantiated(cur)
        } else {
            self.expr(cur)
        };
        for node in chain {
            self.exprs.push((node, ty));
        }
        ty
    }

    fn binding(&mut self, b: &Binding) {
        let none = no_subst();
        let annotation = b.var.ty().map(|t| self.arena.import(t, &none));
        let name = b.var.name();
        let what = || {
            if name.as_str().is_empty() {
                "this value".to_owned()
            } else {
                format!("the value of `%{name}`")
            }
        };
        if let ExprKind::Function(f) = b.value.kind() {
            // A function literal may refer to its own variable (recursive local functions). When
            // it declares type parameters and annotates every parameter and its result, its
            // polymorphic type is known before its body is checked, so recursive uses are
            // instantiated like any other use (polymorphic recursion).
            let t = annotation
                .or_else(|| self.declared_type(f))
                .unwrap_or_else(|| self.arena.fresh(Origin::Unknown, name));
            self.bind(&b.var, t);
            let v = self.expr(&b.value);
            self.expect(t, v, b.value.span(), what);
        } else {
            let v = self.expr(&b.value);
            let t = match annotation {
                Some(t) => {
                    self.expect(t, v, b.value.span(), what);
                    t
                }
                None => v,
            };
            self.bind(&b.var, t);
        }
    }

    /// The type of a polymorphic function literal whose parameters and result are all
    /// annotated, built from the annotations alone.
    fn declared_type(&mut self, f: &Function) -> Option<TyId> {
        if f.type_params.is_empty() {
            return None;
        }
        let none = no_subst();
        let mut params = Vec::with_capacity(f.params.len());
        for p in &f.params {
            params.push(self.arena.import(p.ty()?, &none));
        }
        let ret = self.arena.import(f.ret_type.as_ref()?, &none);
        Some(self.arena.add(Ty::Func {
            type_params: f.type_params.clone(),
            params,
            ret,
        }))
    }

    fn bind(&mut self, var: &Var, ty: TyId) {
        self.locals.insert(var.id(), ty);
        self.vars.push((var.clone(), ty));
    }

    // ----- Constructors and patterns -----

    /// A fresh instance of a constructor: its field types and its ADT type.
    fn ctor_instance(&mut self, c: CtorRef, span: Span) -> Option<(Vec<TyId>, TyId)> {
        let module = self.module;
        let def = self
            .types
            .get(&c.adt)
            .and_then(|&i| module.types.get(i))
            .filter(|t| t.name == c.adt);
        let Some(def) = def else {
            self.internal(format!("the type `{}` is not defined", c.adt), span);
            return None;
        };
        let Some(ctor) = def.ctors.get(c.tag as usize) else {
            self.internal(
                format!("`{}` has no constructor number {}", c.adt, c.tag),
                span,
            );
            return None;
        };
        let args: Vec<TyId> = def
            .params
            .iter()
            .map(|tv| self.arena.fresh(Origin::Instance, tv.name()))
            .collect();
        let map: HashMap<TypeVarId, TyId> = def
            .params
            .iter()
            .zip(&args)
            .map(|(tv, &a)| (tv.id(), a))
            .collect();
        let fields = ctor
            .fields
            .iter()
            .map(|f| self.arena.import(f, &map))
            .collect();
        let adt = self.arena.add(Ty::Adt { name: c.adt, args });
        Some((fields, adt))
    }

    /// Checks that `p` matches values of type `expected` and binds its variables.
    fn pattern(&mut self, p: &Pattern, expected: TyId) {
        relay_ir::ensure_sufficient_stack(|| self.pattern_inner(p, expected))
    }

    fn pattern_inner(&mut self, p: &Pattern, expected: TyId) {
        match &p.kind {
            PatternKind::Wildcard => {}
            PatternKind::Var(v) => {
                let t = match v.ty() {
                    Some(t) => {
                        let t = self.arena.import(t, &no_subst());
                        self.expect(t, expected, p.span, || "this pattern".to_owned());
                        t
                    }
                    None => expected,
                };
                self.bind(v, t);
            }
            PatternKind::Ctor(c, fields) => {
                let Some((field_tys, adt)) = self.ctor_instance(*c, p.span) else {
                    return;
                };
                self.expect(adt, expected, p.span, || "this pattern".to_owned());
                if field_tys.len() != fields.len() {
                    self.internal(
                        format!(
                            "the pattern `{}` has {} fields, the constructor {}",
                            c.name,
                            fields.len(),
                            field_tys.len()
                        ),
                        p.span,
                    );
                    return;
                }
                for (f, t) in fields.iter().zip(field_tys) {
                    self.pattern(f, t);
                }
            }
            PatternKind::Tuple(fields) => {
                let (_, node) = self.arena.root_node(expected);
                let field_tys = match node {
                    Ty::Tuple(xs) if xs.len() == fields.len() => xs,
                    _ => {
                        let xs: Vec<TyId> = fields
                            .iter()
                            .map(|_| self.arena.fresh(Origin::Unknown, self.hint_value))
                            .collect();
                        let t = self.arena.add(Ty::Tuple(xs.clone()));
                        self.expect(t, expected, p.span, || "this pattern".to_owned());
                        xs
                    }
                };
                for (f, t) in fields.iter().zip(field_tys) {
                    self.pattern(f, t);
                }
            }
        }
    }

    // ----- Deferred constraints -----

    /// Tries to solve a deferred constraint; `false` when it must wait.
    fn try_solve(&mut self, pending: &Pending) -> bool {
        match pending {
            Pending::Relation {
                op,
                call,
                args,
                result,
            } => self.try_relation(op, call, args, *result),
            Pending::Proj {
                tuple,
                index,
                result,
                span,
            } => self.try_proj(*tuple, *index, *result, *span),
        }
    }

    fn try_relation(&mut self, op: OpRef, call: &Expr, args: &[TyId], result: TyId) -> bool {
        for &a in args {
            match self.arena.solved(a) {
                Solved::Known => {}
                Solved::Unknown => return false,
                Solved::Error => {
                    self.poison(result);
                    return true;
                }
            }
        }
        let (Some(relation), ExprKind::Call { attrs, .. }) = (op.relation, call.kind()) else {
            self.poison(result);
            return true;
        };
        let inputs: Vec<Type> = args.iter().map(|&a| self.arena.display(a)).collect();
        match relation(&inputs, attrs) {
            Ok(out) => {
                let out = self.arena.import(&out, &no_subst());
                self.expect(result, out, call.span(), || {
                    format!("the result of `{}`", op.name)
                });
            }
            Err(error) => {
                self.errors.push(TypeError::Relation {
                    op: op.name,
                    error,
                    span: source_span(call.span()),
                });
                self.poison(result);
            }
        }
        true
    }

    fn try_proj(&mut self, tuple: TyId, index: u32, result: TyId, span: Span) -> bool {
        let (_, node) = self.arena.root_node(tuple);
        match node {
            Ty::Var(..) => return false,
            Ty::Error => self.poison(result),
            Ty::Tuple(fields) => match fields.get(index as usize) {
                Some(&field) => self.expect(result, field, span, || "this projection".to_owned()),
                None => {
                    let t = self.arena.display(tuple);
                    self.errors.push(TypeError::UnknownField {
                        tuple: t.to_string(),
                        index,
                        count: fields.len(),
                        span: source_span(span),
                    });
                    self.poison(result);
                }
            },
            _ => {
                let t = self.arena.display(tuple);
                self.errors.push(TypeError::NotATuple {
                    found: t.to_string(),
                    index,
                    span: source_span(span),
                });
                self.poison(result);
            }
        }
        true
    }

    /// Marks `ty` as the type of something already reported.
    fn poison(&mut self, ty: TyId) {
        let err = self.arena.error();
        let _ = self.arena.unify(ty, err);
    }

    /// Solves deferred constraints until none makes progress.
    fn solve_pending(&mut self) {
        loop {
            let pending = std::mem::take(&mut self.pending);
            let before = pending.len();
            let mut waiting = Vec::new();
            for p in pending {
                if !self.try_solve(&p) {
                    waiting.push(p);
                }
            }
            let progress = waiting.len() < before || !self.pending.is_empty();
            waiting.append(&mut self.pending);
            self.pending = waiting;
            if !progress || self.pending.is_empty() {
                return;
            }
        }
    }

    /// Reports the constraints that never became solvable.
    fn report_pending(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            match p {
                Pending::Relation { op, call, args, .. } => {
                    if args.iter().any(|&a| self.arena.solved(a) == Solved::Error) {
                        continue;
                    }
                    let inputs: Vec<String> = args
                        .iter()
                        .map(|&a| format!("`{}`", self.arena.display(a)))
                        .collect();
                    self.errors.push(TypeError::UninferredInputs {
                        op: op.name,
                        inputs: inputs.join(", "),
                        span: source_span(call.span()),
                    });
                }
                Pending::Proj { span, .. } => {
                    self.errors.push(TypeError::UninferredProjection {
                        span: source_span(span),
                    });
                }
            }
        }
    }

    // ----- Diagnostics -----

    /// Unifies `expected` with `found`, the type of the expression at `span`, which `what`
    /// describes; reports a mismatch there.
    fn expect(&mut self, expected: TyId, found: TyId, span: Span, what: impl FnOnce() -> String) {
        let Err(clash) = self.arena.unify(expected, found) else {
            return;
        };
        let expected = self.arena.display(expected).to_string();
        let found = self.arena.display(found).to_string();
        let what = what();
        let span = source_span(span);
        self.errors.push(match clash {
            Clash::Mismatch => TypeError::Mismatch {
                expected,
                found,
                what,
                span,
            },
            Clash::Occurs => TypeError::InfiniteType {
                expected,
                found,
                what,
                span,
            },
        });
    }

    /// Reports an internal error and returns the error type.
    fn internal(&mut self, message: String, span: Span) -> TyId {
        self.errors.push(TypeError::Internal(InternalError {
            message,
            span: source_span(span),
        }));
        self.arena.error()
    }

    // ----- Results -----

    fn finish(mut self) -> Result<Vec<TypeWarning>, TypeErrors> {
        let mut fin = Finalizer::default();
        let had_errors = !self.errors.is_empty();
        let mut var_types = Vec::with_capacity(self.vars.len());
        let mut reported = HashSet::new();
        for (var, ty) in std::mem::take(&mut self.vars) {
            let (t, unknown) = fin.convert(&mut self.arena, ty);
            if unknown && !had_errors && reported.insert(self.arena.find(ty)) {
                let known = self.arena.display(ty).to_string();
                let name = var.name();
                self.errors.push(TypeError::Unresolved {
                    name: if name.as_str().is_empty() {
                        "%v".to_owned()
                    } else {
                        format!("%{name}")
                    },
                    known,
                    span: source_span(var.span()),
                });
            }
            var_types.push((var, t));
        }
        let src = named_source(self.module);
        if !self.errors.is_empty() {
            let mut errors = std::mem::take(&mut self.errors);
            errors.sort_by_key(TypeError::offset);
            errors.dedup_by(|a, b| a.offset() == b.offset() && a.to_string() == b.to_string());
            return Err(TypeErrors { src, errors });
        }
        for (var, t) in var_types {
            var.set_checked_type(t);
        }
        for (expr, ty) in std::mem::take(&mut self.exprs) {
            let (t, _) = fin.convert(&mut self.arena, ty);
            expr.set_checked_type(t);
        }
        Ok(self
            .warnings
            .into_iter()
            .map(|warning| TypeWarning {
                src: src.clone(),
                warning,
            })
            .collect())
    }
}

/// Whether a type annotation contains `_`.
fn has_incomplete(t: &Type) -> bool {
    relay_ir::ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Incomplete => true,
        TypeKind::Tensor { .. } | TypeKind::Var(_) => false,
        TypeKind::Tuple(xs) | TypeKind::Adt { args: xs, .. } => xs.iter().any(has_incomplete),
        TypeKind::Func(f) => f.params.iter().any(has_incomplete) || has_incomplete(&f.ret),
        TypeKind::Ref(x) => has_incomplete(x),
    })
}
