//! The IR verifier: well-formedness of a module, plus the invariants earlier passes promised
//! (docs/design.md §6, `docs/passes.md`, "The verifier").
//!
//! Always checked: every variable use is in scope (bound by an enclosing parameter list, an
//! earlier binding of the let-chain, the binding itself when its value is a function literal,
//! or a pattern of the enclosing clause); every variable is bound once in the whole module;
//! every global, constructor and ADT referenced exists; primitive function bodies hold only
//! operator calls, tuples, projections, variables, scalar constants and let-chains of those,
//! use only their own parameters and contain no functions; `Closure=1` globals have a function
//! literal as body. Then each established [`Invariants`] flag adds its check.
//!
//! The walks recurse once per nesting level (through [`relay_ir::ensure_sufficient_stack`])
//! and iterate over binding vectors, so long binding chains are verified in linear time on
//! any stack.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{is_atom, is_closure, is_primitive, pattern_vars};
use relay_ir::{
    CtorRef, Dim, Expr, ExprKind, Function, Module, Pattern, PatternKind, PrintOptions, Symbol,
    Type, TypeKind, Value, Var, VarId, ensure_sufficient_stack, print_expr,
};

use crate::util::{reshape_only, view_shape};

/// What the verifier checks beyond well-formedness; each flag is set once the pass that
/// establishes it has run (see [`crate::Pass::establishes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Invariants {
    /// Every operator call outside a primitive function has been fused into one (`fuse_ops`).
    pub fused: bool,
    /// A-normal form (`to_anf`).
    pub anf: bool,
    /// No nested non-primitive function literals remain (`lambda_lift`).
    pub lifted: bool,
    /// Primitive functions appear only in callee position or as `vm.invoke_tvm_op`'s first
    /// argument, never let-bound (`inline_primitives`).
    pub primitives_inlined: bool,
    /// Every primitive call with a static result type is a `vm.invoke_tvm_op` into explicitly
    /// allocated tensors, or, for a reshape-only primitive ([`crate::util::reshape_only`]), a
    /// `vm.reshape_tensor` view; so is a reshape-only call whose result has one `?` dimension
    /// ([`crate::util::view_shape`]) (`manifest_alloc`).
    pub manifested: bool,
    /// No operator call or kernel reads only constants when its result is no larger than
    /// they are: such calls were evaluated at compile time (`fold_constant`,
    /// [`crate::fold_constant::within_constants`]).
    pub folded: bool,
}

impl Invariants {
    /// The union of two sets of invariants.
    pub fn union(self, other: Invariants) -> Invariants {
        Invariants {
            fused: self.fused || other.fused,
            anf: self.anf || other.anf,
            lifted: self.lifted || other.lifted,
            primitives_inlined: self.primitives_inlined || other.primitives_inlined,
            manifested: self.manifested || other.manifested,
            folded: self.folded || other.folded,
        }
    }
}

/// A well-formedness violation.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("IR verifier: {message}")]
#[diagnostic(code(relay::verify::failed))]
pub struct VerifyError {
    /// What is wrong, naming the function and the variable or node.
    pub message: String,
}

/// The most violations reported one by one; the rest are counted in a last message, so a
/// badly broken 100,000-binding module does not print 100,000 snippets.
const MAX_REPORTED: usize = 100;

/// The longest expression snippet in a message, in characters.
const SNIPPET_CHARS: usize = 80;

/// Checks `module`: scoping, unique binding, references, the primitive-function and
/// `Closure=1` forms, and `invariants`. Returns every violation found.
pub fn verify_module(module: &Module, invariants: Invariants) -> Result<(), Vec<VerifyError>> {
    let mut verifier = Verifier {
        module,
        invariants,
        globals: module.functions.iter().map(|f| f.name).collect(),
        adts: module.types.iter().map(|t| t.name).collect(),
        bound: HashSet::new(),
        scope: HashSet::new(),
        primitive_vars: HashSet::new(),
        current: Symbol::intern(""),
        errors: Vec::new(),
        dropped: 0,
    };
    verifier.module_types();
    for global in &module.functions {
        verifier.current = global.name;
        verifier.global(&global.func);
    }
    if verifier.dropped > 0 {
        let dropped = verifier.dropped;
        verifier.errors.push(VerifyError {
            message: format!("and {dropped} more violations"),
        });
    }
    if verifier.errors.is_empty() {
        Ok(())
    } else {
        Err(verifier.errors)
    }
}

/// The state of one verification.
struct Verifier<'m> {
    module: &'m Module,
    invariants: Invariants,
    /// Every global function's name.
    globals: HashSet<Symbol>,
    /// Every type definition's name (ADTs and `extern type`s).
    adts: HashSet<Symbol>,
    /// Every variable bound so far anywhere in the module.
    bound: HashSet<VarId>,
    /// The variables in scope at the current node.
    scope: HashSet<VarId>,
    /// Variables bound to a primitive function literal, directly or through aliases.
    primitive_vars: HashSet<VarId>,
    /// The global function being verified.
    current: Symbol,
    errors: Vec<VerifyError>,
    /// Violations beyond [`MAX_REPORTED`].
    dropped: usize,
}

/// `%name` of a variable, for messages.
fn var_name(v: &Var) -> String {
    if v.name().as_str().is_empty() {
        format!("%<unnamed {}>", v.id().0)
    } else {
        format!("%{}", v.name())
    }
}

/// A one-line excerpt of `e`'s printed text, at most [`SNIPPET_CHARS`] characters.
pub fn snippet(e: &Expr) -> String {
    let printed = print_expr(e, &PrintOptions::default());
    let mut text = String::new();
    for line in printed.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("#[version") || line.starts_with("free_var ") {
            continue;
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(line);
        if text.chars().count() > SNIPPET_CHARS {
            break;
        }
    }
    if text.chars().count() > SNIPPET_CHARS {
        let cut: String = text.chars().take(SNIPPET_CHARS - 3).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Whether an operator belongs to the memory/VM dialect or is a device annotation, which may
/// stay outside primitive functions after fusion.
fn is_dialect_op(name: &str) -> bool {
    name.starts_with("memory.")
        || name.starts_with("vm.")
        || name == "on_device"
        || name == "device_copy"
}

/// Whether `ty` is a tensor type with known dimensions, or a non-empty tuple of those.
fn is_static_result(ty: &Type) -> bool {
    let static_tensor = |t: &Type| match t.kind() {
        TypeKind::Tensor { shape, .. } => shape.iter().all(|d| matches!(d, Dim::Known(_))),
        _ => false,
    };
    match ty.kind() {
        TypeKind::Tuple(fields) => !fields.is_empty() && fields.iter().all(static_tensor),
        _ => static_tensor(ty),
    }
}

/// What the call `e` of `callee` on `args` is ("the operator `transpose`", "a kernel") when
/// it is a call `fold_constant` folds at any size: every argument is a constant, every
/// operator it calls has a reference evaluation, its result is no larger than those
/// constants, and it evaluates (a call that fails on its constants stays, as a run-time
/// error; only such a rare candidate is evaluated here). Kernels are primitive function
/// literals called directly; a `vm.invoke_tvm_op` stores into a buffer the program
/// allocated, which `fold_constant` leaves alone, so it is never reported.
fn reads_only_constants(e: &Expr, callee: &Expr, args: &[Expr]) -> Option<String> {
    use crate::fold_constant::{constant_type, constant_value, is_constant, within_constants};
    let (what, prim, inputs) = match callee.kind() {
        ExprKind::Op(op) if is_dialect_op(op.name) => return None,
        ExprKind::Op(op) => (format!("the operator `{}`", op.name), None, args),
        _ => (
            "a kernel".to_string(),
            Some(primitive_literal(callee)?),
            args,
        ),
    };
    if inputs.is_empty() || !inputs.iter().all(is_constant) {
        return None;
    }
    let types: Vec<Type> = inputs.iter().map(constant_type).collect();
    let values: Vec<Value> = inputs.iter().filter_map(constant_value).collect();
    let result = match prim {
        Some(prim) => evaluate_primitive(prim, &values)?,
        None => {
            let ExprKind::Call { attrs, .. } = e.kind() else {
                return None;
            };
            evaluate_call(callee, &values, attrs)?
        }
    };
    within_constants(&value_type(&result)?, &types).then_some(what)
}

/// The value of operator `callee` on `args`, when it is one `fold_constant` evaluates.
fn evaluate_call(callee: &Expr, args: &[Value], attrs: &relay_ir::Attrs) -> Option<Value> {
    let ExprKind::Op(op) = callee.kind() else {
        return None;
    };
    if !crate::fold_constant::foldable(op) {
        return None;
    }
    (op.eval?)(args, attrs).ok()
}

/// The value of primitive function `prim` on `args` by its operators' reference evaluations
/// (its body holds only operator calls, tuples, projections, variables, scalar constants and
/// let-chains); `None` when an operator has none or fails.
fn evaluate_primitive(prim: &Function, args: &[Value]) -> Option<Value> {
    fn eval(e: &Expr, env: &mut HashMap<VarId, Value>) -> Option<Value> {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => env.get(&v.id()).cloned(),
            ExprKind::Constant(c) => Some(Value::Tensor(c.clone())),
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => {
                let args = args
                    .iter()
                    .map(|a| eval(a, env))
                    .collect::<Option<Vec<_>>>()?;
                evaluate_call(callee, &args, attrs)
            }
            ExprKind::Tuple(fields) => fields
                .iter()
                .map(|f| eval(f, env))
                .collect::<Option<Vec<_>>>()
                .map(Value::tuple),
            ExprKind::Proj { tuple, index } => match eval(tuple, env)? {
                Value::Tuple(fields) => fields.get(*index as usize).cloned(),
                _ => None,
            },
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    let v = eval(&b.value, env)?;
                    env.insert(b.var.id(), v);
                }
                eval(body, env)
            }
            _ => None,
        })
    }
    if prim.params.len() != args.len() {
        return None;
    }
    let mut env: HashMap<VarId, Value> = prim
        .params
        .iter()
        .map(|p| p.id())
        .zip(args.iter().cloned())
        .collect();
    eval(&prim.body, &mut env)
}

/// The type of a tensor or tuple-of-tensors value.
fn value_type(v: &Value) -> Option<Type> {
    match v {
        Value::Tensor(t) => Some(Type::tensor(t.shape(), t.dtype())),
        Value::Tuple(fields) => fields
            .iter()
            .map(value_type)
            .collect::<Option<Vec<_>>>()
            .map(Type::tuple),
        _ => None,
    }
}

/// The primitive function literal `e` is, if it is one.
fn primitive_literal(e: &Expr) -> Option<&Function> {
    match e.kind() {
        ExprKind::Function(f) if is_primitive(f) => Some(f),
        _ => None,
    }
}

impl Verifier<'_> {
    /// Records a violation in the current global function.
    fn error(&mut self, message: impl Into<String>) {
        if self.errors.len() >= MAX_REPORTED {
            self.dropped += 1;
            return;
        }
        self.errors.push(VerifyError {
            message: format!("in `@{}`: {}", self.current, message.into()),
        });
    }

    /// Records a violation at expression `e`, quoting it.
    fn error_at(&mut self, what: &str, e: &Expr) {
        if self.errors.len() >= MAX_REPORTED {
            self.dropped += 1;
            return;
        }
        let quoted = snippet(e);
        self.error(format!("{what}: `{quoted}`"));
    }

    /// Checks the ADT names the type definitions' constructor fields mention.
    fn module_types(&mut self) {
        let module = self.module;
        for def in &module.types {
            for ctor in &def.ctors {
                for field in &ctor.fields {
                    if let Some(name) = self.unknown_adt(field) {
                        self.errors.push(VerifyError {
                            message: format!(
                                "in type `{}`: constructor `{}` refers to the undefined type \
                                 `{name}`",
                                def.name, ctor.name
                            ),
                        });
                    }
                }
            }
        }
    }

    /// The first ADT name in `ty` that the module does not define.
    fn unknown_adt(&self, ty: &Type) -> Option<Symbol> {
        ensure_sufficient_stack(|| match ty.kind() {
            TypeKind::Tensor { .. } | TypeKind::Var(_) | TypeKind::Incomplete => None,
            TypeKind::Tuple(fields) => fields.iter().find_map(|t| self.unknown_adt(t)),
            TypeKind::Func(f) => f
                .params
                .iter()
                .chain(std::iter::once(&f.ret))
                .find_map(|t| self.unknown_adt(t)),
            TypeKind::Adt { name, args } => {
                if self.adts.contains(name) {
                    args.iter().find_map(|t| self.unknown_adt(t))
                } else {
                    Some(*name)
                }
            }
            TypeKind::Ref(t) => self.unknown_adt(t),
        })
    }

    /// Checks an annotation (of a variable or a function's result).
    /// `of` names what is annotated; it is only called when there is something to report.
    fn annotation(&mut self, ty: Option<&Type>, of: impl FnOnce() -> String) {
        if let Some(name) = ty.and_then(|t| self.unknown_adt(t)) {
            let of = of();
            self.error(format!(
                "the type of {of} refers to the undefined type `{name}`"
            ));
        }
    }

    /// Binds `v`: it must not have been bound before anywhere in the module.
    fn bind(&mut self, v: &Var) {
        if !self.bound.insert(v.id()) {
            self.error(format!("`{}` is bound more than once", var_name(v)));
        }
        self.annotation(v.ty(), || format!("`{}`", var_name(v)));
        self.scope.insert(v.id());
    }

    /// Ends the scope of `v`.
    fn unbind(&mut self, v: &Var) {
        self.scope.remove(&v.id());
    }

    /// A variable use must be in scope.
    fn use_var(&mut self, v: &Var, e: &Expr) {
        if !self.scope.contains(&v.id()) {
            self.error_at(
                &format!("`{}` is used outside the scope of its binding", var_name(v)),
                e,
            );
        }
    }

    /// A constructor must exist under its name and tag.
    fn ctor(&mut self, c: CtorRef) {
        let exists = self
            .module
            .ctor_def(c)
            .is_some_and(|def| def.name == c.name);
        if !exists {
            self.error(format!(
                "the constructor `{}` of type `{}` is not defined",
                c.name, c.adt
            ));
        }
    }

    /// Verifies one global function.
    fn global(&mut self, func: &Function) {
        let closure = is_closure(func);
        if closure && !matches!(func.body.kind(), ExprKind::Function(_)) {
            self.error_at(
                "a `Closure=1` global's body is not a function literal",
                &func.body,
            );
        }
        if is_primitive(func) {
            self.primitive(func);
        } else {
            self.function(func, closure);
        }
        if self.invariants.anf && !is_primitive(func) {
            match func.body.kind() {
                ExprKind::Function(inner) if closure && !is_primitive(inner) => {
                    self.anf_chain(&inner.body, "the body of a closure's inner function")
                }
                _ => self.anf_chain(&func.body, "the body of the function"),
            }
        }
        self.scope.clear();
    }

    /// Verifies a non-primitive function: parameters, result annotation and body.
    /// `closure_global` says the body's function literal is a `Closure=1` global's inner
    /// function, which lifting keeps.
    fn function(&mut self, func: &Function, closure_global: bool) {
        for p in &func.params {
            self.bind(p);
        }
        self.annotation(func.ret_type.as_ref(), || {
            "the function's result".to_owned()
        });
        match func.body.kind() {
            ExprKind::Function(inner) if closure_global && !is_primitive(inner) => {
                self.function(inner, false)
            }
            _ => self.expr(&func.body),
        }
        for p in &func.params {
            self.unbind(p);
        }
    }

    /// Verifies an expression outside primitive functions.
    fn expr(&mut self, e: &Expr) {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Constant(_) | ExprKind::Op(_) => {}
            ExprKind::Var(v) => self.use_var(v, e),
            ExprKind::Global(g) => {
                if !self.globals.contains(g) {
                    self.error(format!("the global function `@{g}` is not defined"));
                }
            }
            ExprKind::Ctor(c) => self.ctor(*c),
            ExprKind::Call { callee, args, .. } => {
                if let ExprKind::Op(op) = callee.kind()
                    && self.invariants.fused
                    && !is_dialect_op(op.name)
                {
                    self.error_at(
                        &format!(
                            "the operator `{}` is called outside a primitive function",
                            op.name
                        ),
                        e,
                    );
                }
                if self.invariants.primitives_inlined {
                    let named = match callee.kind() {
                        ExprKind::Op(op) if op.name == "vm.invoke_tvm_op" => args.first(),
                        _ => Some(callee),
                    };
                    if let Some(ExprKind::Var(v)) = named.map(|n| n.kind())
                        && self.primitive_vars.contains(&v.id())
                    {
                        self.error_at(
                            &format!(
                                "`{}` is a primitive function bound to a variable; its call \
                                 should name the function",
                                var_name(v)
                            ),
                            e,
                        );
                    }
                }
                if self.invariants.folded
                    && let Some(what) = reads_only_constants(e, callee, args)
                {
                    self.error_at(
                        &format!(
                            "{what} reads only constants and its result is no larger than \
                             they are: `fold_constant` should have evaluated it"
                        ),
                        e,
                    );
                }
                if let Some(prim) = primitive_literal(callee)
                    && self.invariants.manifested
                {
                    let result = e.checked_type().or(prim.ret_type.as_ref());
                    if reshape_only(prim).is_some() && result.and_then(view_shape).is_some() {
                        self.error_at(
                            "a reshape-only primitive function is called directly instead of \
                             through `vm.reshape_tensor`",
                            e,
                        );
                    } else if result.is_some_and(is_static_result)
                        && relay_ops::updated_param(prim).is_none()
                    {
                        self.error_at(
                            "a primitive function with a static result type is called directly \
                             instead of through `vm.invoke_tvm_op`",
                            e,
                        );
                    }
                }
                self.expr(callee);
                for a in args {
                    self.expr(a);
                }
            }
            ExprKind::Function(f) => {
                if is_primitive(f) {
                    self.primitive(f);
                } else {
                    if self.invariants.lifted {
                        self.error_at("a function literal remains after lambda lifting", e);
                    }
                    self.function(f, false);
                }
            }
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    let literal = matches!(b.value.kind(), ExprKind::Function(_));
                    let primitive = primitive_literal(&b.value).is_some()
                        || matches!(b.value.kind(), ExprKind::Var(v)
                            if self.primitive_vars.contains(&v.id()));
                    if primitive {
                        self.primitive_vars.insert(b.var.id());
                    }
                    // A function literal may call itself through its own binding.
                    if literal {
                        self.bind(&b.var);
                    }
                    self.expr(&b.value);
                    if !literal {
                        self.bind(&b.var);
                    }
                }
                self.expr(body);
                for b in bindings {
                    self.unbind(&b.var);
                }
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.expr(cond);
                self.expr(then_branch);
                self.expr(else_branch);
            }
            ExprKind::Match {
                scrutinee, clauses, ..
            } => {
                self.expr(scrutinee);
                for clause in clauses {
                    self.pattern(&clause.pattern);
                    let vars = pattern_vars(&clause.pattern);
                    for v in &vars {
                        self.bind(v);
                    }
                    self.expr(&clause.body);
                    for v in &vars {
                        self.unbind(v);
                    }
                }
            }
            ExprKind::Tuple(fields) => {
                for f in fields {
                    self.expr(f);
                }
            }
            ExprKind::Proj { tuple, .. } => self.expr(tuple),
            ExprKind::RefNew(x) | ExprKind::RefRead(x) => self.expr(x),
            ExprKind::RefWrite(r, v) => {
                self.expr(r);
                self.expr(v);
            }
        })
    }

    /// Checks the constructors a pattern names.
    fn pattern(&mut self, p: &Pattern) {
        ensure_sufficient_stack(|| match &p.kind {
            PatternKind::Wildcard | PatternKind::Var(_) => {}
            PatternKind::Ctor(c, ps) => {
                self.ctor(*c);
                for q in ps {
                    self.pattern(q);
                }
            }
            PatternKind::Tuple(ps) => {
                for q in ps {
                    self.pattern(q);
                }
            }
        })
    }

    /// Verifies a primitive function: its body uses only its parameters and the variables it
    /// binds, and holds only what the primitive form allows.
    fn primitive(&mut self, func: &Function) {
        let outer = std::mem::take(&mut self.scope);
        for p in &func.params {
            self.bind(p);
        }
        self.annotation(func.ret_type.as_ref(), || {
            "the function's result".to_owned()
        });
        self.primitive_body(&func.body);
        self.scope = outer;
    }

    /// Verifies an expression inside a primitive function.
    fn primitive_body(&mut self, e: &Expr) {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => self.use_var(v, e),
            ExprKind::Constant(c) => {
                if !c.is_scalar() {
                    self.error_at(
                        "a primitive function embeds a non-scalar constant (it should be a \
                         parameter)",
                        e,
                    );
                }
            }
            ExprKind::Call { callee, args, .. } if matches!(callee.kind(), ExprKind::Op(_)) => {
                for a in args {
                    self.primitive_body(a);
                }
            }
            ExprKind::Tuple(fields) => {
                for f in fields {
                    self.primitive_body(f);
                }
            }
            ExprKind::Proj { tuple, .. } => self.primitive_body(tuple),
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    self.primitive_body(&b.value);
                    self.bind(&b.var);
                }
                self.primitive_body(body);
            }
            ExprKind::Function(_) => {
                self.error_at("a primitive function contains a function literal", e)
            }
            _ => self.error_at(
                "a primitive function's body holds something other than operator calls, \
                 tuples, projections, variables, scalar constants and let-chains",
                e,
            ),
        })
    }

    /// A-normal form: `e` (the body of a function, let-chain, branch or clause) is an atom or
    /// a let-chain whose bindings are ANF values and whose body is an atom.
    fn anf_chain(&mut self, e: &Expr, what: &str) {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    self.anf_value(&b.value);
                }
                if !is_atom(body) {
                    self.error_at(
                        "not in A-normal form: a let-chain does not end in an atom",
                        body,
                    );
                }
            }
            _ if is_atom(e) => {}
            _ => self.error_at(
                &format!("not in A-normal form: {what} is neither an atom nor a let-chain"),
                e,
            ),
        })
    }

    /// A-normal form: `e` is a binding's value of one of the allowed forms.
    fn anf_value(&mut self, e: &Expr) {
        let atoms = |es: &[&Expr]| es.iter().all(|x| is_atom(x));
        match e.kind() {
            _ if is_atom(e) => {}
            ExprKind::Call { callee, args, .. } => {
                if !is_atom(callee) && primitive_literal(callee).is_none() {
                    self.error_at(
                        "not in A-normal form: the callee is neither an atom nor a primitive \
                         function",
                        e,
                    );
                }
                // The VM dialect takes the primitive function and tuples of its inputs and
                // outputs directly: `vm.invoke_tvm_op(fn (...) {...}, (%a, %b), (%y,))`.
                let vm_call =
                    matches!(callee.kind(), ExprKind::Op(op) if op.name.starts_with("vm."));
                let vm_argument = |a: &Expr| match a.kind() {
                    ExprKind::Tuple(fields) => fields.iter().all(is_atom),
                    _ => primitive_literal(a).is_some(),
                };
                if !args
                    .iter()
                    .all(|a| is_atom(a) || (vm_call && vm_argument(a)))
                {
                    self.error_at("not in A-normal form: a call argument is not an atom", e);
                }
            }
            ExprKind::Tuple(fields) => {
                if !fields.iter().all(is_atom) {
                    self.error_at("not in A-normal form: a tuple field is not an atom", e);
                }
            }
            ExprKind::Proj { tuple, .. } => {
                if !is_atom(tuple) {
                    self.error_at("not in A-normal form: a projection of a non-atom", e);
                }
            }
            ExprKind::RefNew(x) | ExprKind::RefRead(x) => {
                if !is_atom(x) {
                    self.error_at(
                        "not in A-normal form: a reference operand is not an atom",
                        e,
                    );
                }
            }
            ExprKind::RefWrite(r, v) => {
                if !atoms(&[r, v]) {
                    self.error_at(
                        "not in A-normal form: a reference operand is not an atom",
                        e,
                    );
                }
            }
            ExprKind::Function(f) => {
                if !is_primitive(f) {
                    self.anf_chain(&f.body, "the body of a function literal");
                }
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                if !is_atom(cond) {
                    self.error_at("not in A-normal form: an `if` condition is not an atom", e);
                }
                self.anf_chain(then_branch, "an `if` branch");
                self.anf_chain(else_branch, "an `if` branch");
            }
            ExprKind::Match {
                scrutinee, clauses, ..
            } => {
                if !is_atom(scrutinee) {
                    self.error_at(
                        "not in A-normal form: a `match` scrutinee is not an atom",
                        e,
                    );
                }
                for clause in clauses {
                    self.anf_chain(&clause.body, "a `match` clause body");
                }
            }
            ExprKind::Let { .. } => {
                self.error_at("not in A-normal form: a binding's value is a let-chain", e)
            }
            ExprKind::Constant(_)
            | ExprKind::Var(_)
            | ExprKind::Global(_)
            | ExprKind::Op(_)
            | ExprKind::Ctor(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::{AttrValue, Attrs, Binding, BindingKind, Clause, Span};

    use super::*;

    fn parse(text: &str) -> Module {
        let module = relay_syntax::parse(text, "test.relay")
            .unwrap_or_else(|e| panic!("{}", relay_syntax::render_plain(&e)));
        relay_types::check_module(&module)
            .unwrap_or_else(|e| panic!("{}", relay_syntax::render_plain(&e)));
        module
    }

    fn messages(module: &Module, invariants: Invariants) -> Vec<String> {
        match verify_module(module, invariants) {
            Ok(()) => vec![],
            Err(errors) => errors.into_iter().map(|e| e.message).collect(),
        }
    }

    fn assert_one(module: &Module, invariants: Invariants, needle: &str) {
        let found = messages(module, invariants);
        assert!(
            found.iter().any(|m| m.contains(needle)),
            "expected a message containing {needle:?}, got {found:?}"
        );
    }

    fn var(name: &str) -> Var {
        Var::new(Symbol::intern(name), None, Span::DUMMY)
    }

    fn global(name: &str, params: Vec<Var>, body: Expr, attrs: Attrs) -> relay_ir::GlobalFunc {
        relay_ir::GlobalFunc {
            name: Symbol::intern(name),
            func: Function {
                type_params: vec![],
                params,
                ret_type: None,
                body,
                attrs,
            },
            span: Span::DUMMY,
        }
    }

    fn module_of(functions: Vec<relay_ir::GlobalFunc>) -> Module {
        Module {
            functions,
            ..Module::default()
        }
    }

    fn let_chain(bindings: Vec<(Var, Expr)>, body: Expr) -> Expr {
        let bindings = bindings
            .into_iter()
            .map(|(var, value)| Binding {
                var,
                value,
                kind: BindingKind::Let,
            })
            .collect();
        Expr::new(ExprKind::Let { bindings, body }, Span::DUMMY)
    }

    fn func(params: Vec<Var>, body: Expr, attrs: Attrs) -> Expr {
        Expr::new(
            ExprKind::Function(Function {
                type_params: vec![],
                params,
                ret_type: None,
                body,
                attrs,
            }),
            Span::DUMMY,
        )
    }

    fn primitive_attrs() -> Attrs {
        Attrs::new(vec![(Symbol::intern("Primitive"), AttrValue::Int(1))])
    }

    fn op_call(name: &str, args: Vec<Expr>) -> Expr {
        let op = relay_ops::lookup(name).unwrap_or_else(|| panic!("no operator {name}"));
        Expr::call(Expr::new(ExprKind::Op(op), Span::DUMMY), args)
    }

    fn scalar(v: f64) -> Expr {
        let dtype = relay_ir::DType::parse("float32").expect("dtype");
        Expr::constant(relay_ir::NDArray::scalar_f64(dtype, v).expect("scalar"))
    }

    const WELL_FORMED: &str = r#"#[version = "0.0.5"]
type List[A] { Cons(A, List[A]), Nil }
def @len[A](%l: List[A]) -> int32 {
  match (%l) {
    Cons(_, %rest) => add(@len(%rest), 1),
    Nil => 0,
  }
}
def @main(%x: Tensor[(2, 3), float32]) {
  let %f = fn (%n: int32) -> int32 { if (less(%n, 1)) { 0 } else { %f(subtract(%n, 1)) } };
  let %g = fn (%y: Tensor[(2, 3), float32]) { nn.relu(add(%y, %x)) };
  %0 = %g(%x);
  %1 = (%0, %f(3), @len(Cons(1, Nil)));
  %1.0
}
"#;

    #[test]
    fn well_formed_programs_pass() {
        let module = parse(WELL_FORMED);
        assert_eq!(
            messages(&module, Invariants::default()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_ir_test_program_that_type_checks_is_well_formed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ir-tests");
        let mut stack = vec![root];
        let mut checked = 0;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "relay") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("readable test file");
                let Ok(module) = relay_syntax::parse(&text, "t.relay") else {
                    continue;
                };
                if relay_types::check_module(&module).is_err() {
                    continue;
                }
                let found = messages(&module, Invariants::default());
                assert!(found.is_empty(), "{}: {found:?}", path.display());
                checked += 1;
            }
        }
        assert!(checked > 100, "only {checked} programs checked");
    }

    #[test]
    fn out_of_scope_uses_are_reported() {
        // The body uses `%y`, which nothing binds.
        let x = var("x");
        let y = var("y");
        let m = module_of(vec![global("main", vec![x], Expr::var(&y), Attrs::empty())]);
        assert_one(
            &m,
            Invariants::default(),
            "in `@main`: `%y` is used outside the scope",
        );

        // A binding's value cannot use the binding itself unless it is a function literal.
        let z = var("z");
        let body = let_chain(vec![(z.clone(), Expr::var(&z))], Expr::var(&z));
        let m = module_of(vec![global("main", vec![], body, Attrs::empty())]);
        assert_one(&m, Invariants::default(), "`%z` is used outside");

        // A let-bound variable is out of scope after its chain.
        let a = var("a");
        let inner = let_chain(vec![(a.clone(), scalar(1.0))], Expr::var(&a));
        let body = Expr::new(ExprKind::Tuple(vec![inner, Expr::var(&a)]), Span::DUMMY);
        let m = module_of(vec![global("main", vec![], body, Attrs::empty())]);
        assert_one(&m, Invariants::default(), "`%a` is used outside");
    }

    #[test]
    fn recursive_function_literals_may_use_their_binding() {
        let f = var("f");
        let n = var("n");
        let lit = func(
            vec![n.clone()],
            Expr::call(Expr::var(&f), vec![Expr::var(&n)]),
            Attrs::empty(),
        );
        let body = let_chain(vec![(f.clone(), lit)], Expr::var(&f));
        let m = module_of(vec![global("main", vec![], body, Attrs::empty())]);
        assert_eq!(messages(&m, Invariants::default()), Vec::<String>::new());
    }

    #[test]
    fn pattern_variables_are_scoped_to_their_clause() {
        let module = parse(WELL_FORMED);
        let ctor = module.constructors()[&Symbol::intern("Cons")];
        let l = var("l");
        let h = var("h");
        let pattern = |kind| Pattern {
            kind,
            span: Span::DUMMY,
        };
        let clause = Clause {
            pattern: pattern(PatternKind::Ctor(
                ctor,
                vec![
                    pattern(PatternKind::Var(h.clone())),
                    pattern(PatternKind::Wildcard),
                ],
            )),
            body: Expr::var(&h),
        };
        let matched = Expr::new(
            ExprKind::Match {
                scrutinee: Expr::var(&l),
                clauses: vec![clause],
                complete: false,
            },
            Span::DUMMY,
        );
        let ok = Module {
            functions: vec![global(
                "main",
                vec![l.clone()],
                matched.clone(),
                Attrs::empty(),
            )],
            types: module.types.clone(),
            ..Module::default()
        };
        assert_eq!(messages(&ok, Invariants::default()), Vec::<String>::new());
        let l2 = var("l");
        let leaked = Expr::new(ExprKind::Tuple(vec![matched, Expr::var(&h)]), Span::DUMMY);
        let bad = Module {
            functions: vec![global("main", vec![l2], leaked, Attrs::empty())],
            types: module.types.clone(),
            ..Module::default()
        };
        assert_one(&bad, Invariants::default(), "`%h` is used outside");
    }

    #[test]
    fn variables_bound_twice_are_reported() {
        let x = var("x");
        let body = let_chain(vec![(x.clone(), scalar(1.0))], Expr::var(&x));
        let m = module_of(vec![
            global("f", vec![], body.clone(), Attrs::empty()),
            global("main", vec![], body, Attrs::empty()),
        ]);
        assert_one(
            &m,
            Invariants::default(),
            "in `@main`: `%x` is bound more than once",
        );
        let p = var("p");
        let m = module_of(vec![global(
            "main",
            vec![p.clone(), p],
            scalar(0.0),
            Attrs::empty(),
        )]);
        assert_one(&m, Invariants::default(), "`%p` is bound more than once");
    }

    #[test]
    fn undefined_globals_constructors_and_types_are_reported() {
        let body = Expr::call(
            Expr::new(ExprKind::Global(Symbol::intern("missing")), Span::DUMMY),
            vec![],
        );
        let m = module_of(vec![global("main", vec![], body, Attrs::empty())]);
        assert_one(&m, Invariants::default(), "`@missing` is not defined");

        let ctor = CtorRef {
            adt: Symbol::intern("Nope"),
            name: Symbol::intern("Gone"),
            tag: 0,
        };
        let body = Expr::new(ExprKind::Ctor(ctor), Span::DUMMY);
        let m = module_of(vec![global("main", vec![], body, Attrs::empty())]);
        assert_one(
            &m,
            Invariants::default(),
            "constructor `Gone` of type `Nope` is not defined",
        );

        let ty = Type::from_kind(TypeKind::Adt {
            name: Symbol::intern("Phantom"),
            args: vec![],
        });
        let x = Var::new(Symbol::intern("x"), Some(ty), Span::DUMMY);
        let m = module_of(vec![global(
            "main",
            vec![x.clone()],
            Expr::var(&x),
            Attrs::empty(),
        )]);
        assert_one(&m, Invariants::default(), "undefined type `Phantom`");
    }

    #[test]
    fn primitive_functions_have_the_primitive_form() {
        // Well formed: an operator call on parameters with a scalar constant.
        let p0 = var("p0");
        let good = func(
            vec![p0.clone()],
            op_call("add", vec![Expr::var(&p0), scalar(1.0)]),
            primitive_attrs(),
        );
        let x = var("x");
        let body = Expr::call(good, vec![Expr::var(&x)]);
        let m = module_of(vec![global("main", vec![x.clone()], body, Attrs::empty())]);
        assert_eq!(messages(&m, Invariants::default()), Vec::<String>::new());

        // A primitive that uses a variable of the enclosing function.
        let p1 = var("p1");
        let x2 = var("x");
        let captures = func(
            vec![p1.clone()],
            op_call("add", vec![Expr::var(&p1), Expr::var(&x2)]),
            primitive_attrs(),
        );
        let m = module_of(vec![global(
            "main",
            vec![x2.clone()],
            Expr::call(captures, vec![Expr::var(&x2)]),
            Attrs::empty(),
        )]);
        assert_one(&m, Invariants::default(), "`%x` is used outside the scope");

        // An `if`, a nested function and a tensor constant inside a primitive.
        let p2 = var("p2");
        let cond = Expr::new(
            ExprKind::If {
                cond: Expr::var(&p2),
                then_branch: scalar(1.0),
                else_branch: scalar(2.0),
            },
            Span::DUMMY,
        );
        let dtype = relay_ir::DType::parse("float32").expect("dtype");
        let tensor = Expr::constant(
            relay_ir::NDArray::from_f64_slice(dtype, &[2], &[1.0, 2.0]).expect("tensor"),
        );
        let nested = func(vec![], scalar(0.0), Attrs::empty());
        let prim = func(
            vec![p2],
            Expr::new(ExprKind::Tuple(vec![cond, tensor, nested]), Span::DUMMY),
            primitive_attrs(),
        );
        let m = module_of(vec![global("main", vec![], prim, Attrs::empty())]);
        let found = messages(&m, Invariants::default());
        assert!(
            found
                .iter()
                .any(|m| m.contains("holds something other than")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|m| m.contains("non-scalar constant")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|m| m.contains("contains a function literal")),
            "{found:?}"
        );
    }

    #[test]
    fn closure_globals_have_a_function_body() {
        let closure = Attrs::new(vec![(Symbol::intern("Closure"), AttrValue::Int(1))]);
        let c0 = var("c0");
        let y = var("y");
        let z = var("z");
        let inner = func(
            vec![y.clone()],
            let_chain(
                vec![(
                    z.clone(),
                    op_call("add", vec![Expr::var(&y), Expr::var(&c0)]),
                )],
                Expr::var(&z),
            ),
            Attrs::empty(),
        );
        let good = module_of(vec![global("lifted", vec![c0], inner, closure.clone())]);
        // The inner function of a `Closure=1` global survives lifting.
        let lifted = Invariants {
            lifted: true,
            anf: true,
            ..Invariants::default()
        };
        assert_eq!(messages(&good, lifted), Vec::<String>::new());
        let bad = module_of(vec![global(
            "lifted",
            vec![var("c0")],
            scalar(1.0),
            closure,
        )]);
        assert_one(
            &bad,
            Invariants::default(),
            "`Closure=1` global's body is not a function",
        );
    }

    #[test]
    fn fused_rejects_operator_calls_outside_primitives() {
        let module =
            parse("#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) { nn.relu(%x) }\n");
        assert_eq!(
            messages(&module, Invariants::default()),
            Vec::<String>::new()
        );
        let fused = Invariants {
            fused: true,
            ..Invariants::default()
        };
        assert_one(
            &module,
            fused,
            "in `@main`: the operator `nn.relu` is called outside a primitive function: `nn.relu(%x)`",
        );
        // Primitives and the memory dialect are fine.
        let module = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             %0 = fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) };\n\
             %0(%x)\n}\n",
        );
        assert_eq!(messages(&module, fused), Vec::<String>::new());
        let kill = op_call("memory.kill", vec![scalar(1.0)]);
        let m = module_of(vec![global("main", vec![], kill, Attrs::empty())]);
        assert_eq!(messages(&m, fused), Vec::<String>::new());
    }

    fn tensor(dtype: &str, shape: &[i64], values: &[f64]) -> Expr {
        let dtype = relay_ir::DType::parse(dtype).expect("dtype");
        Expr::constant(relay_ir::NDArray::from_f64_slice(dtype, shape, values).expect("tensor"))
    }

    #[test]
    fn folded_rejects_calls_and_kernels_that_read_only_constants() {
        let folded = Invariants {
            folded: true,
            ..Invariants::default()
        };
        let weights = || tensor("float32", &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let main = |body| module_of(vec![global("main", vec![], body, Attrs::empty())]);
        // A transpose of weights: no larger than what it reads.
        let m = main(op_call("transpose", vec![weights()]));
        assert_eq!(messages(&m, Invariants::default()), Vec::<String>::new());
        let got = messages(&m, folded);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("the operator `transpose` reads only constants"),
            "{got:?}"
        );
        // A kernel on constants only.
        let p0 = var("p0");
        let relu = func(
            vec![p0.clone()],
            op_call("nn.relu", vec![Expr::var(&p0)]),
            primitive_attrs(),
        );
        let m = main(Expr::call(relu.clone(), vec![weights()]));
        let got = messages(&m, folded);
        assert!(
            got.len() == 1 && got[0].contains("a kernel reads only constants"),
            "{got:?}"
        );
        // The same kernel invoked into a buffer the program allocated stays.
        let (y, unit) = (var("y"), var("unit"));
        let tuple = |e: Expr| Expr::new(ExprKind::Tuple(vec![e]), Span::DUMMY);
        let invoke = op_call(
            "vm.invoke_tvm_op",
            vec![relu, tuple(weights()), tuple(Expr::var(&y))],
        );
        let body = let_chain(vec![(unit, invoke)], Expr::var(&y));
        let m = module_of(vec![global("main", vec![y], body, Attrs::empty())]);
        assert_eq!(messages(&m, folded), Vec::<String>::new());
        // A result larger than its constants (a broadcast) may stay, and so may a call that
        // fails on its constants (a run-time error).
        let column = tensor("float32", &[4, 1], &[1.0, 2.0, 3.0, 4.0]);
        let row = tensor("float32", &[1, 4], &[1.0, 2.0, 3.0, 4.0]);
        let m = main(op_call("add", vec![column, row]));
        assert_eq!(messages(&m, folded), Vec::<String>::new());
        let m = main(op_call(
            "divide",
            vec![tensor("int32", &[], &[7.0]), tensor("int32", &[], &[0.0])],
        ));
        assert_eq!(messages(&m, folded), Vec::<String>::new());
    }

    #[test]
    fn anf_accepts_exactly_the_documented_forms() {
        let anf = Invariants {
            anf: true,
            ..Invariants::default()
        };
        let module = parse(
            "#[version = \"0.0.5\"]\n\
             def @main(%x: Tensor[(2), float32], %c: bool) {\n\
             let %a = add(%x, %x);\n\
             let %t = (%a, %x);\n\
             let %p = %t.0;\n\
             let %r = ref(%p);\n\
             let %v = ref_read(%r);\n\
             let %f = fn (%y: Tensor[(2), float32]) { let %z = nn.relu(%y); %z };\n\
             let %b = if (%c) { let %q = %f(%v); %q } else { %x };\n\
             let %k = fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) };\n\
             let %w = %k(%b);\n\
             %w\n}\n",
        );
        assert_eq!(messages(&module, anf), Vec::<String>::new());

        let nested = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) { nn.relu(add(%x, %x)) }\n",
        );
        assert_one(
            &nested,
            anf,
            "the body of the function is neither an atom nor a let-chain",
        );
        let nested = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %a = nn.relu(add(%x, %x)); %a }\n",
        );
        assert_one(
            &nested,
            anf,
            "a call argument is not an atom: `nn.relu(add(%x, %x))`",
        );
        let tail = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %a = add(%x, %x); nn.relu(%a) }\n",
        );
        assert_one(&tail, anf, "a let-chain does not end in an atom");
        let branch = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32], %c: bool) {\n\
             let %a = if (%c) { add(%x, %x) } else { %x }; %a }\n",
        );
        assert_one(
            &branch,
            anf,
            "an `if` branch is neither an atom nor a let-chain",
        );
        let cond = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %a = if (less(1, 2)) { %x } else { %x }; %a }\n",
        );
        assert_one(&cond, anf, "an `if` condition is not an atom");
        let tuple = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %a = (add(%x, %x), %x); %a }\n",
        );
        assert_one(&tuple, anf, "a tuple field is not an atom");
        let proj = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %a = (%x, %x).0; %a }\n",
        );
        assert_one(&proj, anf, "a projection of a non-atom");
        let inner = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %f = fn () { add(%x, %x) }; %f }\n",
        );
        assert_one(&inner, anf, "the body of a function literal is neither");
        let callee = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %a = (fn (%y: Tensor[(2), float32]) { %y })(%x); %a }\n",
        );
        assert_one(
            &callee,
            anf,
            "the callee is neither an atom nor a primitive",
        );
        let reference = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             let %r = ref(add(%x, %x)); %r }\n",
        );
        assert_one(&reference, anf, "a reference operand is not an atom");

        let a = var("a");
        let chain_value = let_chain(
            vec![(a.clone(), let_chain(vec![], scalar(1.0)))],
            Expr::var(&a),
        );
        let m = module_of(vec![global("main", vec![], chain_value, Attrs::empty())]);
        assert_one(&m, anf, "a binding's value is a let-chain");
    }

    #[test]
    fn anf_allows_the_vm_dialect_forms() {
        let anf = Invariants {
            anf: true,
            ..Invariants::default()
        };
        let p0 = var("p0");
        let prim = func(
            vec![p0.clone()],
            op_call("negative", vec![Expr::var(&p0)]),
            primitive_attrs(),
        );
        let (x, y, unit) = (var("x"), var("y"), var("unit"));
        let tuple = |v: &Var| Expr::new(ExprKind::Tuple(vec![Expr::var(v)]), Span::DUMMY);
        let invoke = op_call("vm.invoke_tvm_op", vec![prim.clone(), tuple(&x), tuple(&y)]);
        let body = let_chain(vec![(unit.clone(), invoke)], Expr::var(&y));
        let m = module_of(vec![global("main", vec![x, y], body, Attrs::empty())]);
        assert_eq!(messages(&m, anf), Vec::<String>::new());

        // Other calls still need atoms.
        let (a, b) = (var("a"), var("b"));
        let call = op_call("add", vec![tuple(&a), prim]);
        let body = let_chain(vec![(b.clone(), call)], Expr::var(&b));
        let m = module_of(vec![global("main", vec![a], body, Attrs::empty())]);
        assert_one(&m, anf, "a call argument is not an atom");
    }

    #[test]
    fn anf_match_scrutinee_and_clauses() {
        let anf = Invariants {
            anf: true,
            ..Invariants::default()
        };
        let module = parse(
            "#[version = \"0.0.5\"]\ntype T { A, B }\ndef @main(%t: T) {\n\
             let %m = (match (%t) { A => 1, B => let %q = add(1, 1); %q }); %m }\n",
        );
        assert_eq!(messages(&module, anf), Vec::<String>::new());
        let bad = parse(
            "#[version = \"0.0.5\"]\ntype T { A, B }\ndef @f() -> T { A }\ndef @main() {\n\
             let %m = (match (@f()) { A => add(1, 1), B => 0 }); %m }\n",
        );
        let found = messages(&bad, anf);
        assert!(
            found
                .iter()
                .any(|m| m.contains("`match` scrutinee is not an atom")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|m| m.contains("a `match` clause body is neither")),
            "{found:?}"
        );
    }

    #[test]
    fn lifted_rejects_nested_function_literals() {
        let lifted = Invariants {
            lifted: true,
            ..Invariants::default()
        };
        let module = parse(WELL_FORMED);
        assert_one(
            &module,
            lifted,
            "in `@main`: a function literal remains after lambda lifting",
        );
        let module = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             %0 = fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) };\n\
             %0(%x)\n}\n",
        );
        assert_eq!(messages(&module, lifted), Vec::<String>::new());
    }

    #[test]
    fn primitives_inlined_rejects_let_bound_primitives() {
        let inlined = Invariants {
            primitives_inlined: true,
            ..Invariants::default()
        };
        let bound = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             %0 = fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) };\n\
             %0(%x)\n}\n",
        );
        assert_one(
            &bound,
            inlined,
            "is a primitive function bound to a variable; its call should name the function",
        );
        let as_value = parse(
            "#[version = \"0.0.5\"]\ndef @apply(%f: fn (Tensor[(2), float32]) -> Tensor[(2), float32], \
             %x: Tensor[(2), float32]) -> Tensor[(2), float32] { %f(%x) }\n\
             def @main(%x: Tensor[(2), float32]) {\n\
             %0 = fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) };\n\
             @apply(%0, %x)\n}\n",
        );
        assert_eq!(messages(&as_value, inlined), Vec::<String>::new());
        let inline = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             (fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) })(%x)\n}\n",
        );
        assert_eq!(messages(&inline, inlined), Vec::<String>::new());
    }

    #[test]
    fn manifested_rejects_direct_calls_with_static_results() {
        let manifested = Invariants {
            manifested: true,
            ..Invariants::default()
        };
        let direct = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {\n\
             (fn (%p0: Tensor[(2), float32], Primitive=1) { nn.relu(%p0) })(%x)\n}\n",
        );
        assert_one(
            &direct,
            manifested,
            "is called directly instead of through `vm.invoke_tvm_op`",
        );
        let dynamic = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(?), float32]) {\n\
             (fn (%p0: Tensor[(?), float32], Primitive=1) { nn.relu(%p0) })(%x)\n}\n",
        );
        assert_eq!(messages(&dynamic, manifested), Vec::<String>::new());
        // A reshape-only call is a view: with a static result or one `?`, a direct call is a
        // violation; with two `?` it stays a (specialized) kernel call.
        let reshape = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(?, 6), float32]) {\n\
             (fn (%p0: Tensor[(?, 6), float32], Primitive=1) { reshape(%p0, newshape=[-1, 3]) })(%x)\n}\n",
        );
        assert_one(
            &reshape,
            manifested,
            "a reshape-only primitive function is called directly instead of through \
             `vm.reshape_tensor`",
        );
        let two = parse(
            "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(?, ?), float32]) {\n\
             (fn (%p0: Tensor[(?, ?), float32], Primitive=1) { expand_dims(%p0, axis=0) })(%x)\n}\n",
        );
        assert_eq!(messages(&two, manifested), Vec::<String>::new());
    }

    #[test]
    fn every_violation_is_reported_and_the_list_is_capped() {
        let mut bindings = Vec::new();
        let mut previous = Expr::var(&var("free"));
        for i in 0..150 {
            let v = var(&format!("v{i}"));
            bindings.push((v.clone(), op_call("negative", vec![previous])));
            previous = Expr::var(&v);
        }
        let body = let_chain(bindings, previous);
        let m = module_of(vec![global("main", vec![], body, Attrs::empty())]);
        let fused = Invariants {
            fused: true,
            ..Invariants::default()
        };
        let found = messages(&m, fused);
        assert_eq!(found.len(), MAX_REPORTED + 1, "{found:?}");
        assert!(
            found.iter().any(|m| m.contains("`%free` is used outside")),
            "{found:?}"
        );
        assert_eq!(found[MAX_REPORTED], "and 51 more violations");
    }

    #[test]
    fn long_chains_verify_on_a_small_stack() {
        let handle = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let x = var("x");
                let mut bindings = Vec::new();
                let mut previous = Expr::var(&x);
                for i in 0..100_000 {
                    let v = var(&format!("v{i}"));
                    bindings.push((v.clone(), op_call("negative", vec![previous])));
                    previous = Expr::var(&v);
                }
                let body = let_chain(bindings, previous);
                let m = module_of(vec![global("main", vec![x], body, Attrs::empty())]);
                let anf = Invariants {
                    anf: true,
                    ..Invariants::default()
                };
                messages(&m, anf).is_empty()
            })
            .expect("spawn");
        assert!(handle.join().expect("no panic"));
    }

    #[test]
    fn snippets_are_one_truncated_line() {
        let module = parse(WELL_FORMED);
        let main = module.function(Symbol::intern("main")).expect("main");
        let text = snippet(&main.func.body);
        assert!(text.len() <= SNIPPET_CHARS + 3, "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert!(text.ends_with("..."), "{text}");
    }
}
