//! `lambda_lift`: nested functions become globals; closures become Closure=1 globals.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/lambda_lift/`.
//!
//! Each global function body is rewritten bottom-up, so nested functions are lifted inside-out:
//! by the time a function literal is lifted, the literals inside it have become `@lifted_…`
//! globals or closure allocations `@lifted_…(%c0, …)`, whose arguments are free variables of the
//! enclosing literal like any other. A lifted function
//!
//! - without captured variables becomes a plain global, `def @lifted_<h>[free type vars, own
//!   type params](params) -> ret { body }`, and the literal becomes `@lifted_<h>`;
//! - with captured variables becomes `def @lifted_<h>[free type vars](%c0: T0, …, Closure=1)
//!   { fn [own](params) -> ret { body } }`, and the literal becomes `@lifted_<h>(%c0, …)`;
//! - if it is the value of `let %f = fn …` and uses `%f` (a recursive local function) and has
//!   captured variables, additionally gets `def @lifted_<h>_rec(%c0, …, params) { body }` in
//!   which direct calls `%f(args)` call `@lifted_<h>_rec(%c0, …, args)`; other uses of `%f`
//!   read a closure allocated once at the start of the body. The `Closure=1` global's function
//!   just calls `_rec`. Without captured variables, `%f` becomes the plain global itself.
//!
//! Uses of a variable bound to a polymorphic plain global name the global, since the type
//! checker instantiates a global reference where it is written (and a variable read); the
//! binding stays, without its annotation (`to_anf` annotates its `%x` with the literal's
//! polymorphic type, which the instantiated reference does not have).
//!
//! Captured variables become fresh leading parameters annotated with their checked types;
//! unannotated parameters are re-created with their checked types and an unannotated result
//! gets its checked type, so a lifted global type-checks on its own and structurally equal
//! globals have equal types. Type variables the global's annotations mention that it does not
//! bind (type parameters of an enclosing polymorphic function) become its leading type
//! parameters. `<h>` is the structural hash (16 hex digits) of the lifted function (of the
//! `_rec` function for recursive closures); structurally equal lifted functions share one
//! global, and a different function with the same hash gets a numeric suffix. Lifted globals
//! follow the function they came from, in the order they were lifted. Primitive functions and
//! global function bodies (including a `Closure=1` global's function) are never lifted.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{
    function_free_vars, is_atom, is_closure, is_primitive, map_children, pattern_vars,
};
use relay_ir::{
    AttrValue, Attrs, Binding, BindingKind, Expr, ExprKind, ExprNode, Function, GlobalFunc, Module,
    Span, Symbol, Type, TypeKind, TypeVar, TypeVarId, Var, VarId, ensure_sufficient_stack,
    structural_eq, structural_hash,
};

use crate::util::fresh_var;
use crate::{Invariants, Pass, PassContext, PassError};

/// The `lambda_lift` pass.
pub struct LambdaLift;

impl Pass for LambdaLift {
    fn name(&self) -> &'static str {
        "lambda_lift"
    }

    fn description(&self) -> &'static str {
        "nested functions become globals; closures become Closure=1 globals"
    }

    fn required(&self) -> bool {
        true
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn establishes(&self) -> Invariants {
        Invariants {
            lifted: true,
            ..Invariants::default()
        }
    }

    fn run(&self, module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut lifter = Lifter {
            used_names: module.functions.iter().map(|g| g.name).collect(),
            by_hash: HashMap::new(),
            pending: Vec::new(),
            memo: HashMap::new(),
            lifted: 0,
            polymorphic: HashSet::new(),
            var_subst: HashMap::new(),
        };
        let mut functions = Vec::with_capacity(module.functions.len());
        for g in &module.functions {
            functions.push(lifter.global(g));
            functions.append(&mut lifter.pending);
        }
        cx.stat("functions lifted", lifter.lifted);
        cx.stat(
            "globals added",
            (functions.len() - module.functions.len()) as i64,
        );
        Ok(Module {
            functions,
            ..module
        })
    }
}

/// The placeholder name a recursive lifted function uses for its own global until its name is
/// known (a name no program can write).
const SELF_GLOBAL: &str = "lifted self";

/// The placeholder name of the `_rec` global, likewise.
const SELF_REC_GLOBAL: &str = "lifted self rec";

/// The forms a lifted function takes; only functions of the same form are shared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// A plain global (no captured variables).
    Plain,
    /// A `Closure=1` global.
    Closure,
    /// A `Closure=1` global with a `_rec` implementation (keyed by the `_rec` function).
    RecClosure,
}

/// One lifted global already made, for sharing structurally equal functions.
struct Made {
    form: Form,
    /// The function the hash and the comparison are of (placeholders for self-references).
    key: Expr,
    name: Symbol,
}

struct Lifter {
    /// Every global name taken (the module's and the lifted ones).
    used_names: HashSet<Symbol>,
    by_hash: HashMap<u64, Vec<Made>>,
    /// The globals lifted out of the global being rewritten, in order.
    pending: Vec<GlobalFunc>,
    /// The rewrite of each input node already rewritten (bodies may share nodes).
    memo: HashMap<*const ExprNode, Expr>,
    /// How many function literals were lifted.
    lifted: i64,
    /// Lifted plain globals with type parameters.
    polymorphic: HashSet<Symbol>,
    /// Variables bound to a polymorphic lifted global, replaced by the global at every use.
    var_subst: HashMap<VarId, Expr>,
}

impl Lifter {
    fn global(&mut self, g: &GlobalFunc) -> GlobalFunc {
        let func = &g.func;
        if is_primitive(func) || func.attrs.get("Compiler").is_some() {
            return g.clone();
        }
        let body = match func.body.kind() {
            // A `Closure=1` global's function is its body's form, not a nested function.
            ExprKind::Function(inner) if is_closure(func) && !is_primitive(inner) => {
                let inner_body = self.rewrite(&inner.body);
                if Expr::ptr_eq(&inner_body, &inner.body) {
                    func.body.clone()
                } else {
                    Expr::new(
                        ExprKind::Function(Function {
                            body: inner_body,
                            ..inner.clone()
                        }),
                        func.body.span(),
                    )
                }
            }
            _ => self.rewrite(&func.body),
        };
        GlobalFunc {
            func: Function {
                body,
                ..func.clone()
            },
            ..g.clone()
        }
    }

    /// `e` with every nested non-primitive function literal lifted.
    fn rewrite(&mut self, e: &Expr) -> Expr {
        if is_atom(e) {
            if let ExprKind::Var(v) = e.kind()
                && let Some(to) = self.var_subst.get(&v.id())
            {
                return to.clone();
            }
            return e.clone();
        }
        let key = &**e as *const ExprNode;
        if let Some(done) = self.memo.get(&key) {
            return done.clone();
        }
        let out = ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Function(f) => {
                let body = self.rewrite(&f.body);
                self.lift(e, f, body, None)
            }
            ExprKind::Let { .. } => self.rewrite_chain(e),
            _ => map_children(e, |c| self.rewrite(c)),
        });
        self.memo.insert(key, out.clone());
        out
    }

    /// A binding chain, iterating over bindings and over chains nested in body position.
    fn rewrite_chain(&mut self, e: &Expr) -> Expr {
        let mut chains = Vec::new();
        let mut cur = e.clone();
        while let ExprKind::Let { bindings, body } = cur.kind() {
            let new: Vec<Binding> = bindings
                .iter()
                .map(|b| {
                    let value = self.binding_value(b);
                    Binding {
                        var: self.binding_var(b),
                        value,
                        kind: b.kind,
                    }
                })
                .collect();
            chains.push((cur.clone(), new));
            let next = body.clone();
            cur = next;
        }
        let mut body = self.rewrite(&cur);
        for (chain, new) in chains.into_iter().rev() {
            let ExprKind::Let {
                bindings,
                body: old_body,
            } = chain.kind()
            else {
                continue;
            };
            let same = Expr::ptr_eq(old_body, &body)
                && bindings
                    .iter()
                    .zip(&new)
                    .all(|(a, b)| Expr::ptr_eq(&a.value, &b.value) && a.var.id() == b.var.id());
            body = if same {
                chain.clone()
            } else {
                Expr::new(
                    ExprKind::Let {
                        bindings: new,
                        body,
                    },
                    chain.span(),
                )
            };
        }
        body
    }

    /// The rewritten value of a binding; a function literal may be recursive through the
    /// binding's variable.
    fn binding_value(&mut self, b: &Binding) -> Expr {
        match b.value.kind() {
            ExprKind::Function(f) if !is_primitive(f) => ensure_sufficient_stack(|| {
                let body = self.rewrite(&f.body);
                let lifted = self.lift(&b.value, f, body, Some(&b.var));
                // A reference to a polymorphic global is instantiated where it is written, so
                // uses of the variable name the global itself and stay polymorphic.
                if let ExprKind::Global(name) = lifted.kind()
                    && self.polymorphic.contains(name)
                {
                    self.var_subst.insert(b.var.id(), lifted.clone());
                }
                lifted
            }),
            _ => self.rewrite(&b.value),
        }
    }

    /// The variable of binding `b` once its value is rewritten. A variable bound to a
    /// polymorphic lifted global names nothing any more (its uses name the global); it loses
    /// its annotation, which is the literal's polymorphic type (`to_anf` annotates the bindings
    /// it makes with their checked types), because the global reference in its place is
    /// instantiated and so never has a type with type parameters.
    fn binding_var(&self, b: &Binding) -> Var {
        if b.var.ty().is_some() && self.var_subst.contains_key(&b.var.id()) {
            Var::new(b.var.name(), None, b.var.span())
        } else {
            b.var.clone()
        }
    }

    /// Lifts literal `orig` (function `f` with its body already rewritten to `body`), bound to
    /// `self_var` if it is a binding's value. Returns what replaces the literal.
    fn lift(&mut self, orig: &Expr, f: &Function, body: Expr, self_var: Option<&Var>) -> Expr {
        self.lifted += 1;
        let span = orig.span();
        let func = Function { body, ..f.clone() };
        let free = function_free_vars(&func);
        let self_var = self_var.filter(|v| free.contains(v));
        let captures: Vec<Var> = free.into_iter().filter(|v| Some(v) != self_var).collect();

        // Parameters: unannotated ones re-created with their checked types.
        let mut vars: HashMap<VarId, Expr> = HashMap::new();
        let params: Vec<Var> = func
            .params
            .iter()
            .map(|p| match p.ty() {
                Some(t) if !has_incomplete(t) => p.clone(),
                _ => {
                    let q = fresh_param(p);
                    vars.insert(p.id(), Expr::var(&q));
                    q
                }
            })
            .collect();
        let ret_type = match &func.ret_type {
            Some(t) if !has_incomplete(t) => Some(t.clone()),
            _ => match orig.checked_type().map(Type::kind) {
                Some(TypeKind::Func(ft)) => Some(ft.ret.clone()),
                _ => func.ret_type.clone(),
            },
        };
        let inner = |body: Expr, params: Vec<Var>| Function {
            params,
            ret_type: ret_type.clone(),
            body,
            ..func.clone()
        };

        match (self_var, captures.is_empty()) {
            (_, true) => {
                // A plain global; a recursive one calls itself directly.
                if let Some(f_var) = self_var {
                    vars.insert(f_var.id(), global(Symbol::intern(SELF_GLOBAL), span));
                }
                let body = Subst::new(vars).run(&func.body);
                let mut lifted = inner(body, params);
                let mut tparams = free_type_vars(&lifted);
                tparams.extend(lifted.type_params.iter().cloned());
                lifted.type_params = tparams;
                let polymorphic = !lifted.type_params.is_empty();
                let name = self.register(Form::Plain, lifted, None);
                if polymorphic {
                    self.polymorphic.insert(name);
                }
                global(name, span)
            }
            (None, false) => {
                let caps = fresh_captures(&captures, &mut vars);
                let body = Subst::new(vars).run(&func.body);
                let lifted = closure_global(inner(body, params), caps, span);
                let name = self.register(Form::Closure, lifted, None);
                call(
                    global(name, span),
                    captures.iter().map(Expr::var).collect(),
                    span,
                )
            }
            (Some(f_var), false) => {
                // The `_rec` implementation: captures, then the parameters.
                let rec_caps = fresh_captures(&captures, &mut vars);
                let cap_args: Vec<Expr> = rec_caps.iter().map(Expr::var).collect();
                let self_value = fresh_var(
                    f_var.name().as_str(),
                    f_var.checked_type().or(f_var.ty()).cloned(),
                );
                vars.insert(f_var.id(), Expr::var(&self_value));
                let mut subst = Subst::new(vars);
                subst.self_call = Some((
                    f_var.id(),
                    global(Symbol::intern(SELF_REC_GLOBAL), span),
                    cap_args.clone(),
                ));
                let mut body = subst.run(&func.body);
                if subst.replaced_value {
                    // `%f` used as a value: the closure, allocated once per activation.
                    let alloc = Binding {
                        var: self_value,
                        value: call(global(Symbol::intern(SELF_GLOBAL), span), cap_args, span),
                        kind: BindingKind::Let,
                    };
                    body = prepend(alloc, body);
                }
                let mut rec = Function {
                    params: rec_caps.iter().chain(&params).cloned().collect(),
                    ..inner(body, Vec::new())
                };
                let mut tparams = free_type_vars(&rec);
                tparams.extend(rec.type_params.iter().cloned());
                rec.type_params = tparams;

                // The closure: its function calls `_rec` with the captures and its parameters.
                let caps = fresh_captures(&captures, &mut HashMap::new());
                let wrapper_params: Vec<Var> = params.iter().map(fresh_param).collect();
                let result = fresh_var("x", ret_type.clone());
                let args = caps.iter().chain(&wrapper_params).map(Expr::var).collect();
                let forward = Expr::new(
                    ExprKind::Let {
                        bindings: vec![Binding {
                            var: result.clone(),
                            value: call(global(Symbol::intern(SELF_REC_GLOBAL), span), args, span),
                            kind: BindingKind::Let,
                        }],
                        body: Expr::var(&result),
                    },
                    span,
                );
                let wrapper = closure_global(inner(forward, wrapper_params), caps, span);
                let name = self.register(Form::RecClosure, rec, Some(wrapper));
                call(
                    global(name, span),
                    captures.iter().map(Expr::var).collect(),
                    span,
                )
            }
        }
    }

    /// Adds a lifted global (or finds the structurally equal one made before) and returns its
    /// name. For [`Form::RecClosure`], `key` is the `_rec` function and `wrapper` the
    /// `Closure=1` global.
    fn register(&mut self, form: Form, key: Function, wrapper: Option<Function>) -> Symbol {
        let key = Expr::new(ExprKind::Function(key), Span::DUMMY);
        let hash = structural_hash(&key);
        let made = self.by_hash.entry(hash).or_default();
        if let Some(m) = made
            .iter()
            .find(|m| m.form == form && structural_eq(&m.key, &key))
        {
            return m.name;
        }
        let taken = |name: &str, used: &HashSet<Symbol>| {
            used.contains(&Symbol::intern(name))
                || (form == Form::RecClosure
                    && used.contains(&Symbol::intern(&format!("{name}_rec"))))
        };
        let mut name = format!("lifted_{hash:016x}");
        let mut suffix = 0;
        while taken(&name, &self.used_names) {
            suffix += 1;
            name = format!("lifted_{hash:016x}_{suffix}");
        }
        let name = Symbol::intern(&name);
        let rec_name = Symbol::intern(&format!("{name}_rec"));
        made.push(Made {
            form,
            key: key.clone(),
            name,
        });
        self.used_names.insert(name);
        let mut renames = HashMap::new();
        renames.insert(Symbol::intern(SELF_GLOBAL), name);
        if form == Form::RecClosure {
            self.used_names.insert(rec_name);
            renames.insert(Symbol::intern(SELF_REC_GLOBAL), rec_name);
        }
        let ExprKind::Function(key) = key.kind() else {
            // `key` was made a function literal above.
            return name;
        };
        let finish = |f: &Function| {
            let mut subst = Subst::new(HashMap::new());
            subst.globals = renames.clone();
            Function {
                body: subst.run(&f.body),
                ..f.clone()
            }
        };
        match wrapper {
            Some(wrapper) => {
                self.pending.push(GlobalFunc {
                    name,
                    func: finish(&wrapper),
                    span: Span::DUMMY,
                });
                self.pending.push(GlobalFunc {
                    name: rec_name,
                    func: finish(key),
                    span: Span::DUMMY,
                });
            }
            None => self.pending.push(GlobalFunc {
                name,
                func: finish(key),
                span: Span::DUMMY,
            }),
        }
        name
    }
}

/// `def [free type vars](caps…, Closure=1) { fn … }` around `inner`.
fn closure_global(inner: Function, caps: Vec<Var>, span: Span) -> Function {
    let mut global = Function {
        type_params: Vec::new(),
        params: caps,
        ret_type: None,
        body: Expr::new(ExprKind::Function(inner), span),
        attrs: Attrs::new(vec![(Symbol::intern("Closure"), AttrValue::Int(1))]),
    };
    global.type_params = free_type_vars(&global);
    global
}

/// Fresh parameters standing for `captures`, annotated with their checked types, recorded in
/// `vars`.
fn fresh_captures(captures: &[Var], vars: &mut HashMap<VarId, Expr>) -> Vec<Var> {
    captures
        .iter()
        .map(|c| {
            let p = fresh_param(c);
            vars.insert(c.id(), Expr::var(&p));
            p
        })
        .collect()
}

/// A fresh variable named like `v`, annotated with its checked type (or its annotation).
fn fresh_param(v: &Var) -> Var {
    let ty = v
        .checked_type()
        .or(v.ty())
        .filter(|t| !has_incomplete(t))
        .cloned();
    fresh_var(v.name().as_str(), ty)
}

fn global(name: Symbol, span: Span) -> Expr {
    Expr::new(ExprKind::Global(name), span)
}

fn call(callee: Expr, args: Vec<Expr>, span: Span) -> Expr {
    Expr::new(
        ExprKind::Call {
            callee,
            args,
            attrs: Attrs::empty(),
        },
        span,
    )
}

/// `b` followed by `body`, joined into `body`'s chain if it is one.
fn prepend(b: Binding, body: Expr) -> Expr {
    let span = body.span();
    match body.kind() {
        ExprKind::Let { bindings, body } => {
            let mut all = Vec::with_capacity(bindings.len() + 1);
            all.push(b);
            all.extend(bindings.iter().cloned());
            Expr::new(
                ExprKind::Let {
                    bindings: all,
                    body: body.clone(),
                },
                span,
            )
        }
        _ => Expr::new(
            ExprKind::Let {
                bindings: vec![b],
                body,
            },
            span,
        ),
    }
}

/// A substitution over a lifted body: variables to expressions, global renames, and direct
/// calls of one variable turned into calls of a global with leading arguments.
struct Subst {
    vars: HashMap<VarId, Expr>,
    globals: HashMap<Symbol, Symbol>,
    /// `(%f, callee, leading args)`: `%f(args)` becomes `callee(leading…, args)`.
    self_call: Option<(VarId, Expr, Vec<Expr>)>,
    /// Whether `%f` of `self_call` was met other than as a callee.
    replaced_value: bool,
    memo: HashMap<*const ExprNode, Expr>,
}

impl Subst {
    fn new(vars: HashMap<VarId, Expr>) -> Subst {
        Subst {
            vars,
            globals: HashMap::new(),
            self_call: None,
            replaced_value: false,
            memo: HashMap::new(),
        }
    }

    fn run(&mut self, e: &Expr) -> Expr {
        if self.vars.is_empty() && self.globals.is_empty() && self.self_call.is_none() {
            return e.clone();
        }
        self.expr(e)
    }

    fn expr(&mut self, e: &Expr) -> Expr {
        match e.kind() {
            ExprKind::Var(v) => {
                if self
                    .self_call
                    .as_ref()
                    .is_some_and(|(f, _, _)| *f == v.id())
                {
                    self.replaced_value = true;
                }
                return self.vars.get(&v.id()).cloned().unwrap_or_else(|| e.clone());
            }
            ExprKind::Global(g) => {
                return match self.globals.get(g) {
                    Some(&to) => global(to, e.span()),
                    None => e.clone(),
                };
            }
            ExprKind::Constant(_) | ExprKind::Op(_) | ExprKind::Ctor(_) => return e.clone(),
            ExprKind::Function(f) if is_primitive(f) => return e.clone(),
            _ => {}
        }
        let key = &**e as *const ExprNode;
        if let Some(done) = self.memo.get(&key) {
            return done.clone();
        }
        let out = ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Call {
                callee,
                args,
                attrs,
            } if self.is_self_call(callee) => {
                let Some((_, target, leading)) = self.self_call.clone() else {
                    return e.clone();
                };
                let mut all = leading;
                all.extend(args.iter().map(|a| self.expr(a)));
                Expr::new(
                    ExprKind::Call {
                        callee: target,
                        args: all,
                        attrs: attrs.clone(),
                    },
                    e.span(),
                )
            }
            _ => map_children(e, |c| self.expr(c)),
        });
        self.memo.insert(key, out.clone());
        out
    }

    fn is_self_call(&self, callee: &Expr) -> bool {
        match (callee.kind(), &self.self_call) {
            (ExprKind::Var(v), Some((f, _, _))) => v.id() == *f,
            _ => false,
        }
    }
}

/// Whether `t` contains the incomplete type `_`.
fn has_incomplete(t: &Type) -> bool {
    ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Incomplete => true,
        TypeKind::Tensor { .. } | TypeKind::Var(_) => false,
        TypeKind::Tuple(ts) => ts.iter().any(has_incomplete),
        TypeKind::Adt { args, .. } => args.iter().any(has_incomplete),
        TypeKind::Ref(t) => has_incomplete(t),
        TypeKind::Func(f) => f.params.iter().any(has_incomplete) || has_incomplete(&f.ret),
    })
}

/// The type variables that `f`'s annotations mention and nothing inside `f` binds, in order of
/// first occurrence.
fn free_type_vars(f: &Function) -> Vec<TypeVar> {
    let mut walk = TypeVarWalk::default();
    walk.function(f);
    walk.free
}

#[derive(Default)]
struct TypeVarWalk {
    bound: Vec<TypeVarId>,
    seen: HashSet<TypeVarId>,
    free: Vec<TypeVar>,
    visited: HashSet<*const ExprNode>,
}

impl TypeVarWalk {
    fn function(&mut self, f: &Function) {
        let depth = self.bound.len();
        self.bound.extend(f.type_params.iter().map(TypeVar::id));
        for p in &f.params {
            self.var(p);
        }
        if let Some(t) = &f.ret_type {
            self.ty(t);
        }
        self.expr(&f.body);
        self.bound.truncate(depth);
    }

    fn var(&mut self, v: &Var) {
        if let Some(t) = v.ty() {
            self.ty(t);
        }
    }

    fn expr(&mut self, e: &Expr) {
        if is_atom(e) || !self.visited.insert(&**e as *const ExprNode) {
            return;
        }
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) => self.function(f),
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    self.var(&b.var);
                    self.expr(&b.value);
                }
                self.expr(body);
            }
            ExprKind::Match {
                scrutinee, clauses, ..
            } => {
                self.expr(scrutinee);
                for c in clauses {
                    for v in pattern_vars(&c.pattern) {
                        self.var(&v);
                    }
                    self.expr(&c.body);
                }
            }
            _ => relay_ir::visit::for_each_child(e, |c| self.expr(c)),
        })
    }

    fn ty(&mut self, t: &Type) {
        ensure_sufficient_stack(|| match t.kind() {
            TypeKind::Tensor { .. } | TypeKind::Incomplete => {}
            TypeKind::Var(v) => {
                if !self.bound.contains(&v.id()) && self.seen.insert(v.id()) {
                    self.free.push(v.clone());
                }
            }
            TypeKind::Tuple(ts) => ts.iter().for_each(|t| self.ty(t)),
            TypeKind::Adt { args, .. } => args.iter().for_each(|t| self.ty(t)),
            TypeKind::Ref(t) => self.ty(t),
            TypeKind::Func(f) => {
                let depth = self.bound.len();
                self.bound.extend(f.type_params.iter().map(TypeVar::id));
                f.params.iter().for_each(|t| self.ty(t));
                self.ty(&f.ret);
                self.bound.truncate(depth);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PassManager;
    use crate::testing::eval;
    use relay_ir::{PrintOptions, print_module};

    fn lift(text: &str) -> (Module, Module, String) {
        let m = crate::testing::parse_checked(text);
        let (out, _) = crate::testing::run_passes(vec![&LambdaLift], 2, m.clone(), true);
        let printed = crate::testing::printed(&out);
        (m, out, printed)
    }

    #[test]
    fn recursive_closure_gets_a_rec_implementation() {
        let (m, out, text) = lift(
            "#[version = \"0.0.5\"]\n\
             def @main() {\n\
               let %k = 3;\n\
               let %sum = fn (%n: int32) -> int32 { if (%n == 0) { 0 } else { %k + %sum(%n - 1) } };\n\
               %sum(4)\n\
             }",
        );
        assert!(text.contains("Closure=1"), "{text}");
        assert!(text.contains("_rec(%k"), "{text}");
        eprintln!("{text}");
        assert_eq!(eval(&out), eval(&m));
    }

    #[test]
    fn equal_functions_share_one_global() {
        let (m, out, text) = lift(
            "#[version = \"0.0.5\"]\n\
             def @main() {\n\
               let %f = fn (%x: int32) -> int32 { %x + 1 };\n\
               let %g = fn (%y: int32) -> int32 { %y + 1 };\n\
               (%f(1), %g(2))\n\
             }",
        );
        assert_eq!(out.functions.len(), 2, "{text}");
        assert_eq!(eval(&out), eval(&m));
    }

    #[test]
    fn polymorphic_capture_becomes_a_type_parameter() {
        let (m, out, text) = lift(
            "#[version = \"0.0.5\"]\n\
             def @pair[A](%x: A) -> (A, A) {\n\
               let %g = fn (%u: ()) -> A { %x };\n\
               (%g(()), %g(()))\n\
             }\n\
             def @main() { @pair(1f) }",
        );
        assert!(text.contains("[A](%x"), "{text}");
        assert_eq!(eval(&out), eval(&m));
    }

    #[test]
    fn long_chains_with_closures_do_not_overflow() {
        let mut text = String::from("#[version = \"0.0.5\"]\ndef @main() {\n  let %v0 = 0;\n");
        for i in 1..100_000 {
            if i % 1000 == 0 {
                text.push_str(&format!(
                    "  let %f{i} = fn (%y{i}: int32) -> int32 {{ %y{i} + %v{} }};\n  let %v{i} = %f{i}(1);\n",
                    i - 1
                ));
            } else {
                text.push_str(&format!("  let %v{i} = %v{} + 1;\n", i - 1));
            }
        }
        text.push_str("  %v99999\n}\n");
        let (m, out, _) = lift(&text);
        // Every closure is the same function up to what it captures: one global.
        assert_eq!(out.functions.len(), 2);
        assert_eq!(eval(&out), eval(&m));
    }

    #[test]
    fn running_twice_changes_nothing() {
        let text = "#[version = \"0.0.5\"]\n\
             def @main() {\n\
               let %k = 3;\n\
               let %sum = fn (%n: int32) -> int32 { if (%n == 0) { 0 } else { %k + %sum(%n - 1) } };\n\
               let %g = fn (%x: int32) { fn (%y: int32) { %x + %y + %k } };\n\
               (%sum(4), %g(1)(2))\n\
             }";
        let (_, once, printed) = lift(text);
        let twice = PassManager::new(vec![&LambdaLift], 2)
            .verify_each(true)
            .run(once)
            .expect("lambda_lift succeeds again")
            .0;
        assert_eq!(print_module(&twice, &PrintOptions::default()), printed);
    }
}
