//! `tail_call`: marks self, mutual and closure calls in tail position.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/tail_call/`.
//!
//! A call is in tail position when its value is what the enclosing function returns: the body of
//! a function, the binding of the atom a let-chain in tail position returns (when only
//! `memory.kill` bindings follow it; those kills are removed, since a tail call releases the
//! frame), and the branches and clauses of an `if` or `match` in tail position. Calls of
//! globals, of variables (closures) and of call results get the call attribute `tail=True`;
//! calls of operators (including the `memory.*` and `vm.*` dialect), constructors, function
//! literals and primitive functions are left alone, as are calls of a `Closure=1` global (which
//! allocate a closure rather than call one).

use std::collections::HashSet;

use relay_ir::visit::{is_closure, is_primitive, map_children};
use relay_ir::{
    AttrValue, Binding, Clause, Expr, ExprKind, Function, Module, Symbol, Var, VarId,
    ensure_sufficient_stack,
};

use crate::liveness::is_kill;
use crate::{Pass, PassContext, PassError};

/// The `tail_call` pass.
pub struct TailCall;

impl Pass for TailCall {
    fn name(&self) -> &'static str {
        "tail_call"
    }

    fn description(&self) -> &'static str {
        "marks self, mutual and closure calls in tail position"
    }

    fn required(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let not_callable = module
            .functions
            .iter()
            .filter(|g| is_closure(&g.func) || is_primitive(&g.func))
            .map(|g| g.name)
            .collect();
        let mut marker = Marker {
            not_callable,
            primitive_vars: HashSet::new(),
            marked: 0,
        };
        for global in &mut module.functions {
            if is_primitive(&global.func) {
                continue;
            }
            global.func.body = marker.tail(&global.func.body).0;
        }
        cx.stat("tail calls", marker.marked);
        Ok(module)
    }
}

/// The rewriter: walks every function and marks the calls in tail position of its body.
struct Marker {
    /// Globals whose "call" is no call: `Closure=1` globals (closure allocation) and primitives.
    not_callable: HashSet<Symbol>,
    /// Variables bound to primitive function literals (directly or through aliases), seen so
    /// far in scope order.
    primitive_vars: HashSet<VarId>,
    /// How many calls are marked.
    marked: i64,
}

impl Marker {
    /// `e` in a position that is not a tail position; function literals inside it get their
    /// bodies' tail calls marked.
    fn visit(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) => {
                if is_primitive(f) {
                    return e.clone();
                }
                let (body, _) = self.tail(&f.body);
                if Expr::ptr_eq(&body, &f.body) {
                    return e.clone();
                }
                Expr::new(ExprKind::Function(Function { body, ..f.clone() }), e.span())
            }
            ExprKind::Let { bindings, body } => self.chain(e, bindings, body, false).0,
            _ => map_children(e, |c| self.visit(c)),
        })
    }

    /// `e` in tail position: the rewritten expression, and whether a call was marked in it.
    fn tail(&mut self, e: &Expr) -> (Expr, bool) {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Call { callee, .. } => {
                let callable = self.callable(callee);
                let new = self.visit(e);
                if !callable {
                    return (new, false);
                }
                let ExprKind::Call {
                    callee,
                    args,
                    attrs,
                } = new.kind()
                else {
                    // `visit` rebuilds a call as a call.
                    return (new, false);
                };
                self.marked += 1;
                if attrs.get("tail").and_then(AttrValue::as_bool) == Some(true) {
                    return (new, true);
                }
                let marked = Expr::new(
                    ExprKind::Call {
                        callee: callee.clone(),
                        args: args.clone(),
                        attrs: attrs.with("tail", AttrValue::Bool(true)),
                    },
                    new.span(),
                );
                (marked, true)
            }
            ExprKind::Let { bindings, body } => self.chain(e, bindings, body, true),
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let new_cond = self.visit(cond);
                let (then_new, a) = self.tail(then_branch);
                let (else_new, b) = self.tail(else_branch);
                let unchanged = Expr::ptr_eq(&new_cond, cond)
                    && Expr::ptr_eq(&then_new, then_branch)
                    && Expr::ptr_eq(&else_new, else_branch);
                let new = if unchanged {
                    e.clone()
                } else {
                    Expr::new(
                        ExprKind::If {
                            cond: new_cond,
                            then_branch: then_new,
                            else_branch: else_new,
                        },
                        e.span(),
                    )
                };
                (new, a || b)
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let new_scrutinee = self.visit(scrutinee);
                let mut any = false;
                let mut changed = !Expr::ptr_eq(&new_scrutinee, scrutinee);
                let new_clauses: Vec<Clause> = clauses
                    .iter()
                    .map(|c| {
                        let (body, m) = self.tail(&c.body);
                        any |= m;
                        changed |= !Expr::ptr_eq(&body, &c.body);
                        Clause {
                            pattern: c.pattern.clone(),
                            body,
                        }
                    })
                    .collect();
                if !changed {
                    return (e.clone(), any);
                }
                let new = Expr::new(
                    ExprKind::Match {
                        scrutinee: new_scrutinee,
                        clauses: new_clauses,
                        complete: *complete,
                    },
                    e.span(),
                );
                (new, any)
            }
            _ => (self.visit(e), false),
        })
    }

    /// A let-chain, in tail position when `tail`: the binding of the returned atom is in tail
    /// position if only kills follow it, and those kills are dropped once a call is marked.
    fn chain(&mut self, e: &Expr, bindings: &[Binding], body: &Expr, tail: bool) -> (Expr, bool) {
        // The binding whose variable the chain returns, when only kills follow it.
        let mut tail_index = None;
        if tail && let ExprKind::Var(ret) = body.kind() {
            let mut j = bindings.len();
            while j > 0 && is_kill_binding(&bindings[j - 1]) {
                j -= 1;
            }
            // A kill of the returned variable itself stays (the program fails there).
            let kills_ret = bindings[j..].iter().any(|b| kills(b, ret));
            if j > 0 && bindings[j - 1].var == *ret && !kills_ret {
                tail_index = Some(j - 1);
            }
        }
        let mut changed = false;
        let mut marked = false;
        let mut out = Vec::with_capacity(bindings.len());
        for (i, b) in bindings.iter().enumerate() {
            self.note_primitive(b);
            let value = if tail_index == Some(i) {
                let (value, m) = self.tail(&b.value);
                marked = m;
                value
            } else {
                self.visit(&b.value)
            };
            changed |= !Expr::ptr_eq(&value, &b.value);
            out.push(Binding { value, ..b.clone() });
            if marked && tail_index == Some(i) {
                // The kills after a tail call go: the call releases the frame.
                changed |= i + 1 < bindings.len();
                break;
            }
        }
        let new_body = if tail && tail_index.is_none() {
            let (new_body, m) = self.tail(body);
            marked |= m;
            new_body
        } else if tail {
            body.clone()
        } else {
            self.visit(body)
        };
        changed |= !Expr::ptr_eq(&new_body, body);
        if !changed {
            return (e.clone(), marked);
        }
        let new = Expr::new(
            ExprKind::Let {
                bindings: out,
                body: new_body,
            },
            e.span(),
        );
        (new, marked)
    }

    /// Records `b`'s variable if it names a primitive function.
    fn note_primitive(&mut self, b: &Binding) {
        let primitive = match b.value.kind() {
            ExprKind::Function(f) => is_primitive(f),
            ExprKind::Var(v) => self.primitive_vars.contains(&v.id()),
            _ => false,
        };
        if primitive {
            self.primitive_vars.insert(b.var.id());
        }
    }

    /// Whether a call of `callee` is a call the VM can make a tail call of.
    fn callable(&self, callee: &Expr) -> bool {
        match callee.kind() {
            ExprKind::Global(g) => !self.not_callable.contains(g),
            ExprKind::Var(v) => !self.primitive_vars.contains(&v.id()),
            ExprKind::Call { .. } => true,
            _ => false,
        }
    }
}

/// Whether the kill binding `b` kills `v`.
fn kills(b: &Binding, v: &Var) -> bool {
    match b.value.kind() {
        ExprKind::Call { args, .. } => args
            .iter()
            .any(|a| matches!(a.kind(), ExprKind::Var(w) if w == v)),
        _ => false,
    }
}

/// Whether `b` is a `memory.kill(%v);` binding.
fn is_kill_binding(b: &Binding) -> bool {
    b.kind == relay_ir::BindingKind::Seq && is_kill(&b.value)
}

#[cfg(test)]
mod tests {
    use crate::liveness::tests::{run_pass, stat};

    #[test]
    fn long_chain_is_linear() {
        let n = 100_000;
        let mut text = String::from(
            "#[version = \"0.0.5\"]\ndef @f(%x0: int32) -> int32 {\n  if (less(%x0, 0)) {\n",
        );
        for i in 1..=n {
            text.push_str(&format!("    let %x{i} = add(%x{}, 1);\n", i - 1));
        }
        text.push_str(&format!(
            "    let %r = @f(%x{n});\n    %r\n  }} else {{\n    %x0\n  }}\n}}\n"
        ));
        let (printed, stats) = run_pass(&super::TailCall, &text);
        assert_eq!(stat(&stats, "tail calls"), 1);
        assert!(printed.contains(&format!("let %r = @f(%x{n}, tail=True);")));
        // Marking is idempotent.
        let (again, _) = run_pass(&super::TailCall, &printed);
        assert_eq!(again, printed);
    }
}
