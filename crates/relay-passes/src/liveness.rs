//! `liveness`: alias elimination, then memory.kill after the last use of every variable.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/liveness/`.
//!
//! The pass works function by function (each non-primitive function literal is a scope of its
//! own; a `Closure=1` global's captured parameters and its inner function's parameters form one
//! scope). It first removes aliases (`let %z = %y` and `match (%y) { %z => … }`), so two
//! variables never name one value that one of them frees. Variables the program already kills
//! (its own kills, or an earlier run's) are left as they are, which makes the pass idempotent
//! and keeps a program that uses a killed variable failing as before. It then walks each let-chain backwards once, keeping the set of variables used
//! later in the chain; the sets of enclosing chains are layered beneath it (a [`Live`] chain),
//! never copied. A variable of the scope used by a binding and not live after it is killed
//! right after that binding; one that an `if` or `match` uses but one branch does not is killed
//! at the start of that branch; a variable never used is killed right after its binding. The
//! atom a function, branch or clause returns is never killed, nor a variable of unit type, nor
//! a captured variable inside the function that captures it, nor a variable whose type
//! `memory.kill` could not be inferred at (a polymorphic function, or a type variable left
//! unconstrained).

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{
    for_each_child, free_vars, function_free_vars, is_closure, is_primitive, map_children,
};
use relay_ir::{
    Attrs, Binding, BindingKind, Clause, Expr, ExprKind, Function, Module, OpRef, Pattern,
    PatternKind, Span, Symbol, Type, TypeKind, TypeVar, TypeVarId, Var, VarId,
    ensure_sufficient_stack,
};

use crate::{Pass, PassContext, PassError};

/// The `liveness` pass.
pub struct Liveness;

impl Pass for Liveness {
    fn name(&self) -> &'static str {
        "liveness"
    }

    fn description(&self) -> &'static str {
        "alias elimination, then memory.kill after the last use of every variable"
    }

    fn opt_level(&self) -> u32 {
        1
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let Some(kill_op) = relay_ops::lookup("memory.kill") else {
            return Err(PassError::new(
                "liveness",
                "the operator `memory.kill` is not registered",
                Span::DUMMY,
            ));
        };
        // Variables the program already kills: never killed again (a second kill would fail),
        // and never merged by alias elimination (a kill of one name must not unbind another).
        let mut killed = HashSet::new();
        for global in &module.functions {
            collect_killed(&global.func.body, &mut killed);
        }
        let mut aliases = Aliases {
            map: HashMap::new(),
            killed: &killed,
            removed: 0,
        };
        let mut killer = Killer {
            kill_op,
            killed: &killed,
            kills: 0,
        };
        for global in &mut module.functions {
            let func = &global.func;
            if is_primitive(func) {
                continue;
            }
            let body = aliases.rewrite(&func.body);
            let rigid: HashSet<TypeVarId> = func.type_params.iter().map(TypeVar::id).collect();
            global.func.body = match body.kind() {
                // A `Closure=1` global: its parameters and the inner function's are one scope.
                ExprKind::Function(inner) if is_closure(func) && !is_primitive(inner) => {
                    let params: Vec<Var> =
                        func.params.iter().chain(&inner.params).cloned().collect();
                    let mut rigid = rigid;
                    rigid.extend(inner.type_params.iter().map(TypeVar::id));
                    let inner_body = killer.function(&params, &inner.body, &HashSet::new(), &rigid);
                    Expr::new(
                        ExprKind::Function(Function {
                            body: inner_body,
                            ..inner.clone()
                        }),
                        body.span(),
                    )
                }
                _ => killer.function(&func.params, &body, &HashSet::new(), &rigid),
            };
        }
        cx.stat("aliases removed", aliases.removed);
        cx.stat("kills", killer.kills);
        Ok(module)
    }
}

/// Whether `e` is `memory.kill(…)`.
pub(crate) fn is_kill(e: &Expr) -> bool {
    matches!(e.kind(), ExprKind::Call { callee, .. }
        if matches!(callee.kind(), ExprKind::Op(op) if op.name == "memory.kill"))
}

/// Adds to `killed` every variable `e` passes to `memory.kill`, and every variable bound to a
/// global, constructor or operator: those hold code, not memory, and a polymorphic one's
/// instance may be left unconstrained once the variable's other uses are gone (after
/// `lambda_lift` or `eta_expand`), so `memory.kill` of it could not be typed.
fn collect_killed(e: &Expr, killed: &mut HashSet<VarId>) {
    ensure_sufficient_stack(|| {
        if let ExprKind::Let { bindings, .. } = e.kind() {
            for b in bindings {
                if matches!(
                    b.value.kind(),
                    ExprKind::Global(_) | ExprKind::Ctor(_) | ExprKind::Op(_)
                ) {
                    killed.insert(b.var.id());
                }
            }
        }
        if let ExprKind::Call { args, .. } = e.kind()
            && is_kill(e)
        {
            for a in args {
                if let ExprKind::Var(v) = a.kind() {
                    killed.insert(v.id());
                }
            }
        }
        for_each_child(e, |c| collect_killed(c, killed));
    })
}

/// Alias elimination: every use of an alias becomes a use of the variable it names.
struct Aliases<'k> {
    /// Each removed alias and the variable it stands for (already resolved to the end of the
    /// alias chain).
    map: HashMap<VarId, Var>,
    /// The variables the program already kills (their aliases stay).
    killed: &'k HashSet<VarId>,
    /// How many aliases were removed.
    removed: i64,
}

impl Aliases<'_> {
    /// The variable `v` stands for.
    fn resolve(&self, v: &Var) -> Var {
        self.map.get(&v.id()).cloned().unwrap_or_else(|| v.clone())
    }

    /// `e` without aliases.
    fn rewrite(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => match self.map.get(&v.id()) {
                Some(target) => {
                    let new = Expr::new(ExprKind::Var(target.clone()), e.span());
                    if let Some(ty) = e.checked_type() {
                        new.set_checked_type(ty.clone());
                    }
                    new
                }
                None => e.clone(),
            },
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => {
                let mut changed = false;
                let mut out = Vec::with_capacity(bindings.len());
                for b in bindings {
                    if b.kind != BindingKind::Seq
                        && let ExprKind::Var(y) = b.value.kind()
                        && !self.killed.contains(&b.var.id())
                        && !self.killed.contains(&self.resolve(y).id())
                    {
                        let target = self.resolve(y);
                        self.map.insert(b.var.id(), target);
                        self.removed += 1;
                        changed = true;
                        continue;
                    }
                    let value = self.rewrite(&b.value);
                    changed |= !Expr::ptr_eq(&value, &b.value);
                    out.push(Binding { value, ..b.clone() });
                }
                let new_body = self.rewrite(body);
                changed |= !Expr::ptr_eq(&new_body, body);
                if !changed {
                    e.clone()
                } else if out.is_empty() {
                    new_body
                } else {
                    Expr::new(
                        ExprKind::Let {
                            bindings: out,
                            body: new_body,
                        },
                        e.span(),
                    )
                }
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let new_scrutinee = self.rewrite(scrutinee);
                let mut changed = !Expr::ptr_eq(&new_scrutinee, scrutinee);
                let target = match new_scrutinee.kind() {
                    ExprKind::Var(y) => Some(y.clone()),
                    _ => None,
                };
                let mut out = Vec::with_capacity(clauses.len());
                for c in clauses {
                    let mut pattern = c.pattern.clone();
                    if let (PatternKind::Var(z), Some(y)) = (&c.pattern.kind, &target)
                        && !self.killed.contains(&z.id())
                        && !self.killed.contains(&y.id())
                    {
                        self.map.insert(z.id(), y.clone());
                        self.removed += 1;
                        pattern = Pattern {
                            kind: PatternKind::Wildcard,
                            span: c.pattern.span,
                        };
                        changed = true;
                    }
                    let body = self.rewrite(&c.body);
                    changed |= !Expr::ptr_eq(&body, &c.body);
                    out.push(Clause { pattern, body });
                }
                if !changed {
                    return e.clone();
                }
                Expr::new(
                    ExprKind::Match {
                        scrutinee: new_scrutinee,
                        clauses: out,
                        complete: *complete,
                    },
                    e.span(),
                )
            }
            _ => map_children(e, |c| self.rewrite(c)),
        })
    }
}

/// The variables live after some point: a set for the innermost chain on top of the sets of the
/// enclosing chains (so a nested scope never copies its parent's set).
struct Live<'a> {
    /// Variables live here.
    set: HashSet<VarId>,
    /// What is live after the enclosing construct.
    parent: Option<&'a Live<'a>>,
}

impl<'a> Live<'a> {
    /// An empty set over `parent`.
    fn over(parent: &'a Live<'a>) -> Live<'a> {
        Live {
            set: HashSet::new(),
            parent: Some(parent),
        }
    }

    /// Whether `v` is live.
    fn contains(&self, v: VarId) -> bool {
        let mut live = Some(self);
        while let Some(l) = live {
            if l.set.contains(&v) {
                return true;
            }
            live = l.parent;
        }
        false
    }
}

/// The kill inserter.
struct Killer<'k> {
    /// The `memory.kill` operator.
    kill_op: OpRef,
    /// The variables the program already kills.
    killed: &'k HashSet<VarId>,
    /// How many kills were inserted.
    kills: i64,
}

/// The scope being processed: the variables a function captures are not its to kill.
struct Scope<'a> {
    /// The captured (free) variables of the function.
    captured: &'a HashSet<VarId>,
    /// The type parameters of the function and the functions around it.
    rigid: &'a HashSet<TypeVarId>,
    /// The variables the program already kills.
    killed: &'a HashSet<VarId>,
}

impl Scope<'_> {
    /// Whether the function may kill `v`: one of its own variables, not already killed, not
    /// of unit type, and of a type `memory.kill`'s argument can be inferred at (no polymorphic
    /// function, no type variable but the enclosing functions' type parameters).
    fn killable(&self, v: &Var) -> bool {
        let Some(ty) = v.checked_type().or(v.ty()) else {
            return false;
        };
        !self.captured.contains(&v.id())
            && !self.killed.contains(&v.id())
            && !is_unit(Some(ty))
            && self.monomorphic(ty)
    }

    /// Whether `ty` mentions no type variable but the rigid ones and no polymorphic function.
    fn monomorphic(&self, ty: &Type) -> bool {
        ensure_sufficient_stack(|| match ty.kind() {
            TypeKind::Tensor { .. } => true,
            TypeKind::Tuple(fields) => fields.iter().all(|f| self.monomorphic(f)),
            TypeKind::Func(f) => {
                f.type_params.is_empty()
                    && f.params.iter().all(|p| self.monomorphic(p))
                    && self.monomorphic(&f.ret)
            }
            TypeKind::Var(tv) => self.rigid.contains(&tv.id()),
            TypeKind::Adt { args, .. } => args.iter().all(|a| self.monomorphic(a)),
            TypeKind::Ref(inner) => self.monomorphic(inner),
            TypeKind::Incomplete => false,
        })
    }
}

/// Whether `ty` is the unit type `()`.
fn is_unit(ty: Option<&Type>) -> bool {
    matches!(ty.map(Type::kind), Some(TypeKind::Tuple(fields)) if fields.is_empty())
}

impl Killer<'_> {
    /// The body of a function with `params`, `captured` free variables and the `rigid` type
    /// parameters in scope, with kills.
    fn function(
        &mut self,
        params: &[Var],
        body: &Expr,
        captured: &HashSet<VarId>,
        rigid: &HashSet<TypeVarId>,
    ) -> Expr {
        let scope = Scope {
            captured,
            rigid,
            killed: self.killed,
        };
        let top = Live {
            set: HashSet::new(),
            parent: None,
        };
        let new_body = self.tail(&scope, body, &top);
        let used: HashSet<VarId> = free_vars(body).iter().map(Var::id).collect();
        let unused: Vec<Var> = params
            .iter()
            .filter(|p| !used.contains(&p.id()) && scope.killable(p))
            .cloned()
            .collect();
        self.prepend(&unused, new_body)
    }

    /// A nested function literal, a scope of its own.
    fn literal(&mut self, outer: &Scope, e: &Expr, f: &Function) -> Expr {
        if is_primitive(f) {
            return e.clone();
        }
        let captured: HashSet<VarId> = function_free_vars(f).iter().map(Var::id).collect();
        let mut rigid = outer.rigid.clone();
        rigid.extend(f.type_params.iter().map(TypeVar::id));
        let body = self.function(&f.params, &f.body, &captured, &rigid);
        if Expr::ptr_eq(&body, &f.body) {
            return e.clone();
        }
        Expr::new(ExprKind::Function(Function { body, ..f.clone() }), e.span())
    }

    /// `e`, whose value is the result of the construct it ends, with `out` live after it.
    /// Variables of the scope that `e` uses and `out` does not hold are killed inside `e` after
    /// their last use, except the atom `e` returns and the variables a non-atomic expression
    /// that is not a let-chain, `if` or `match` uses (no kill can follow it).
    fn tail(&mut self, scope: &Scope, e: &Expr, out: &Live) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Let { bindings, body } => self.chain(scope, e, bindings, body, out),
            ExprKind::If { .. } | ExprKind::Match { .. } => self.branches(scope, e, out),
            ExprKind::Function(f) => self.literal(scope, e, f),
            _ if relay_ir::visit::is_atom(e) => e.clone(),
            _ => {
                let layer = Live {
                    set: free_vars(e).iter().map(Var::id).collect(),
                    parent: Some(out),
                };
                self.inner(scope, e, &layer)
            }
        })
    }

    /// `e` evaluated with every variable of `live` live afterwards: only variables bound inside
    /// `e` are killed in it.
    fn inner(&mut self, scope: &Scope, e: &Expr, live: &Live) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Let { bindings, body } => self.chain(scope, e, bindings, body, live),
            ExprKind::If { .. } | ExprKind::Match { .. } => self.branches(scope, e, live),
            ExprKind::Function(f) => self.literal(scope, e, f),
            _ => map_children(e, |c| self.inner(scope, c, live)),
        })
    }

    /// An `if` or `match` whose result ends its construct, with `out` live after it.
    fn branches(&mut self, scope: &Scope, e: &Expr, out: &Live) -> Expr {
        // The variables of the whole construct, in order of first use: those not live after
        // it are killed in each branch after their last use, or at its start if it does not
        // use them.
        let used = free_vars(e);
        let dying: Vec<&Var> = used
            .iter()
            .filter(|v| !out.contains(v.id()) && scope.killable(v))
            .collect();
        let all: HashSet<VarId> = used.iter().map(Var::id).collect();
        let guard_layer = Live {
            set: all,
            parent: Some(out),
        };
        // The kills at the start of a branch: what the construct uses and the branch does not.
        let start_kills = |branch: &Expr, bound: &[Var]| -> Vec<Var> {
            let in_branch: HashSet<VarId> = free_vars(branch).iter().map(Var::id).collect();
            let mut kills: Vec<Var> = bound
                .iter()
                .filter(|v| !in_branch.contains(&v.id()) && scope.killable(v))
                .cloned()
                .collect();
            kills.extend(
                dying
                    .iter()
                    .filter(|v| !in_branch.contains(&v.id()))
                    .map(|v| (*v).clone()),
            );
            kills
        };
        match e.kind() {
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let cond_new = self.inner(scope, cond, &guard_layer);
                let then_kills = start_kills(then_branch, &[]);
                let else_kills = start_kills(else_branch, &[]);
                let then_new = self.tail(scope, then_branch, out);
                let then_new = self.prepend(&then_kills, then_new);
                let else_new = self.tail(scope, else_branch, out);
                let else_new = self.prepend(&else_kills, else_new);
                if Expr::ptr_eq(&cond_new, cond)
                    && Expr::ptr_eq(&then_new, then_branch)
                    && Expr::ptr_eq(&else_new, else_branch)
                {
                    return e.clone();
                }
                Expr::new(
                    ExprKind::If {
                        cond: cond_new,
                        then_branch: then_new,
                        else_branch: else_new,
                    },
                    e.span(),
                )
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let scrutinee_new = self.inner(scope, scrutinee, &guard_layer);
                let mut changed = !Expr::ptr_eq(&scrutinee_new, scrutinee);
                let mut out_clauses = Vec::with_capacity(clauses.len());
                for c in clauses {
                    let bound = relay_ir::visit::pattern_vars(&c.pattern);
                    let kills = start_kills(&c.body, &bound);
                    let body = self.tail(scope, &c.body, out);
                    let body = self.prepend(&kills, body);
                    changed |= !Expr::ptr_eq(&body, &c.body);
                    out_clauses.push(Clause {
                        pattern: c.pattern.clone(),
                        body,
                    });
                }
                if !changed {
                    return e.clone();
                }
                Expr::new(
                    ExprKind::Match {
                        scrutinee: scrutinee_new,
                        clauses: out_clauses,
                        complete: *complete,
                    },
                    e.span(),
                )
            }
            _ => e.clone(),
        }
    }

    /// A let-chain whose result ends its construct, with `out` live after it: one backward
    /// walk over the bindings.
    fn chain(
        &mut self,
        scope: &Scope,
        e: &Expr,
        bindings: &[Binding],
        body: &Expr,
        out: &Live,
    ) -> Expr {
        let new_body = self.tail(scope, body, out);
        let mut live = Live::over(out);
        live.set.extend(free_vars(body).iter().map(Var::id));
        let mut changed = !Expr::ptr_eq(&new_body, body);
        // The new bindings, last first.
        let mut rev: Vec<Binding> = Vec::with_capacity(bindings.len());
        for b in bindings.iter().rev() {
            let mut used = free_vars(&b.value);
            used.retain(|v| *v != b.var);
            let (value, kill_uses) = match b.value.kind() {
                // Whole-value constructs kill what they use themselves.
                ExprKind::Let { .. } | ExprKind::If { .. } | ExprKind::Match { .. } => {
                    (self.tail(scope, &b.value, &live), false)
                }
                ExprKind::Function(f) => (self.literal(scope, &b.value, f), true),
                _ => {
                    let layer = Live {
                        set: used.iter().map(Var::id).collect(),
                        parent: Some(&live),
                    };
                    (self.inner(scope, &b.value, &layer), true)
                }
            };
            let mut kills = Vec::new();
            if b.kind != BindingKind::Seq && !live.contains(b.var.id()) && scope.killable(&b.var) {
                kills.push(b.var.clone());
            }
            if kill_uses {
                kills.extend(
                    used.iter()
                        .filter(|v| !live.contains(v.id()) && scope.killable(v))
                        .cloned(),
                );
            }
            changed |= !kills.is_empty() || !Expr::ptr_eq(&value, &b.value);
            for v in kills.iter().rev() {
                rev.push(self.kill_binding(v));
            }
            rev.push(Binding { value, ..b.clone() });
            live.set.extend(used.iter().map(Var::id));
        }
        if !changed {
            return e.clone();
        }
        rev.reverse();
        Expr::new(
            ExprKind::Let {
                bindings: rev,
                body: new_body,
            },
            e.span(),
        )
    }

    /// `e` preceded by kills of `vars`.
    fn prepend(&mut self, vars: &[Var], e: Expr) -> Expr {
        if vars.is_empty() {
            return e;
        }
        let mut bindings: Vec<Binding> = vars.iter().map(|v| self.kill_binding(v)).collect();
        let span = e.span();
        match e.kind() {
            ExprKind::Let {
                bindings: rest,
                body,
            } => {
                bindings.extend(rest.iter().cloned());
                Expr::new(
                    ExprKind::Let {
                        bindings,
                        body: body.clone(),
                    },
                    span,
                )
            }
            _ => Expr::new(ExprKind::Let { bindings, body: e }, span),
        }
    }

    /// The binding `memory.kill(%v);`.
    fn kill_binding(&mut self, v: &Var) -> Binding {
        self.kills += 1;
        let unit = Type::tuple(Vec::new());
        let callee = Expr::new(ExprKind::Op(self.kill_op), Span::DUMMY);
        let arg = Expr::var(v);
        if let Some(ty) = v.checked_type().or(v.ty()) {
            arg.set_checked_type(ty.clone());
        }
        let value = Expr::new(
            ExprKind::Call {
                callee,
                args: vec![arg],
                attrs: Attrs::empty(),
            },
            Span::DUMMY,
        );
        value.set_checked_type(unit.clone());
        // Unannotated, so that the binding prints as `memory.kill(%v);`.
        let var = Var::new(Symbol::intern(""), None, Span::DUMMY);
        var.set_checked_type(unit);
        Binding {
            var,
            value,
            kind: BindingKind::Seq,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::Pass;

    /// Runs `pass` alone on `text`, returning the printed result and the pass's statistics.
    pub(crate) fn run_pass(pass: &'static dyn Pass, text: &str) -> (String, Vec<(String, i64)>) {
        let module = crate::testing::parse_checked(text);
        let (module, stats) = crate::testing::run_passes(vec![pass], 2, module, true);
        (
            relay_ir::print_module(&module, &relay_ir::PrintOptions::default()),
            stats,
        )
    }

    /// The value of statistic `name`.
    pub(crate) fn stat(stats: &[(String, i64)], name: &str) -> i64 {
        stats
            .iter()
            .find(|(n, _)| n == name)
            .map_or(-1, |(_, v)| *v)
    }

    #[test]
    fn long_chain_is_linear() {
        let n = 100_000;
        let mut text = String::from(
            "#[version = \"0.0.5\"]\ndef @main(%x0: Tensor[(2), float32]) -> Tensor[(2), float32] {\n",
        );
        for i in 1..=n {
            text.push_str(&format!("  let %x{i} = add(%x{}, %x{});\n", i - 1, i - 1));
        }
        text.push_str(&format!("  %x{n}\n}}\n"));
        let start = std::time::Instant::now();
        let (printed, stats) = run_pass(&super::Liveness, &text);
        assert!(
            start.elapsed().as_secs() < 120,
            "took {:?}",
            start.elapsed()
        );
        // Every variable but the returned one dies right after the binding that reads it.
        assert_eq!(stat(&stats, "kills"), n);
        assert!(printed.contains("  let %x2 = add(%x1, %x1);\n  memory.kill(%x1);\n"));
    }
}
