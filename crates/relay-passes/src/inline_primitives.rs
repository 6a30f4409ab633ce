//! `inline_primitives`: let-bound primitive functions are substituted at their call sites.
//!
//! Its contract is in `docs/passes.md`; its tests are in `ir-tests/inline_primitives/`.
//!
//! Two walks over each global function body, neither recursing once per binding:
//!
//! 1. forward: a binding `let %p = fn (…, Primitive=1) {…}` records `%p`, and so does an alias
//!    `let %q = %p` of a recorded variable; every call `%p(args)` of a recorded variable, and
//!    the first argument of `vm.invoke_tvm_op(%p, …)`, becomes the function literal itself;
//! 2. backward (bindings in reverse, each chain's body first): a binding of a recorded variable
//!    that nothing after it uses any more is dropped, so the alias chains behind a dropped
//!    alias go too. A primitive still used as a value (passed to a function, stored in a
//!    tuple) keeps its binding.
//!
//! Primitive function bodies are never looked into (they cannot refer to outer variables).

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{is_atom, is_primitive, map_children};
use relay_ir::{
    Binding, Expr, ExprKind, ExprNode, Function, GlobalFunc, Module, Var, VarId,
    ensure_sufficient_stack,
};

use crate::{Invariants, Pass, PassContext, PassError};

/// The `inline_primitives` pass.
pub struct InlinePrimitives;

impl Pass for InlinePrimitives {
    fn name(&self) -> &'static str {
        "inline_primitives"
    }

    fn description(&self) -> &'static str {
        "let-bound primitive functions are substituted at their call sites"
    }

    fn required(&self) -> bool {
        true
    }

    fn establishes(&self) -> Invariants {
        Invariants {
            primitives_inlined: true,
            ..Invariants::default()
        }
    }

    fn run(&self, module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut inlined = 0i64;
        let mut dropped = 0i64;
        let functions = module
            .functions
            .iter()
            .map(|g| {
                if is_primitive(&g.func) {
                    return g.clone();
                }
                let mut forward = Inline::default();
                let body = forward.expr(&g.func.body);
                inlined += forward.inlined;
                let mut backward = DropDead {
                    prims: forward.prims.keys().copied().collect(),
                    used: HashSet::new(),
                    memo: HashMap::new(),
                    dropped: 0,
                };
                let body = backward.expr(&body);
                dropped += backward.dropped;
                GlobalFunc {
                    func: Function {
                        body,
                        ..g.func.clone()
                    },
                    ..g.clone()
                }
            })
            .collect();
        cx.stat("calls inlined", inlined);
        cx.stat("bindings dropped", dropped);
        Ok(Module {
            functions,
            ..module
        })
    }
}

/// Walk 1: records primitive-bound variables and inlines their calls.
#[derive(Default)]
struct Inline {
    /// The primitive function literal each recorded variable holds.
    prims: HashMap<VarId, Expr>,
    memo: HashMap<*const ExprNode, Expr>,
    inlined: i64,
}

impl Inline {
    /// The primitive literal `e` names, if it is a recorded variable.
    fn target(&self, e: &Expr) -> Option<Expr> {
        match e.kind() {
            ExprKind::Var(v) => self.prims.get(&v.id()).cloned(),
            _ => None,
        }
    }

    fn expr(&mut self, e: &Expr) -> Expr {
        if is_atom(e) {
            return e.clone();
        }
        if let ExprKind::Function(f) = e.kind()
            && is_primitive(f)
        {
            return e.clone();
        }
        let key = &**e as *const ExprNode;
        if let Some(done) = self.memo.get(&key) {
            return done.clone();
        }
        let out = ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Let { bindings, body } => {
                let mut changed = false;
                let new: Vec<Binding> = bindings
                    .iter()
                    .map(|b| {
                        let value = self.expr(&b.value);
                        changed |= !Expr::ptr_eq(&value, &b.value);
                        match value.kind() {
                            ExprKind::Function(f) if is_primitive(f) => {
                                self.prims.insert(b.var.id(), value.clone());
                            }
                            ExprKind::Var(_) => {
                                if let Some(target) = self.target(&value) {
                                    self.prims.insert(b.var.id(), target);
                                }
                            }
                            _ => {}
                        }
                        Binding { value, ..b.clone() }
                    })
                    .collect();
                let new_body = self.expr(body);
                if changed || !Expr::ptr_eq(&new_body, body) {
                    Expr::new(
                        ExprKind::Let {
                            bindings: new,
                            body: new_body,
                        },
                        e.span(),
                    )
                } else {
                    e.clone()
                }
            }
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => {
                let invoke =
                    matches!(callee.kind(), ExprKind::Op(op) if op.name == "vm.invoke_tvm_op");
                let new_callee = match self.target(callee) {
                    Some(f) => {
                        self.inlined += 1;
                        fresh_copy(&f)
                    }
                    None => self.expr(callee),
                };
                let new_args: Vec<Expr> = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| match self.target(a) {
                        Some(f) if invoke && i == 0 => {
                            self.inlined += 1;
                            fresh_copy(&f)
                        }
                        _ => self.expr(a),
                    })
                    .collect();
                let same = Expr::ptr_eq(&new_callee, callee)
                    && new_args.iter().zip(args).all(|(a, b)| Expr::ptr_eq(a, b));
                if same {
                    e.clone()
                } else {
                    Expr::new(
                        ExprKind::Call {
                            callee: new_callee,
                            args: new_args,
                            attrs: attrs.clone(),
                        },
                        e.span(),
                    )
                }
            }
            _ => map_children(e, |c| self.expr(c)),
        });
        self.memo.insert(key, out.clone());
        out
    }
}

/// A copy of primitive function literal `f` with fresh parameters and binding variables, so
/// that every variable stays bound once in the module wherever the copy is placed.
fn fresh_copy(f: &Expr) -> Expr {
    let ExprKind::Function(func) = f.kind() else {
        return f.clone();
    };
    let mut vars = HashMap::new();
    let params = func.params.iter().map(|p| renamed(p, &mut vars)).collect();
    let body = copy_body(&func.body, &mut vars);
    Expr::new(
        ExprKind::Function(Function {
            params,
            body,
            ..func.clone()
        }),
        f.span(),
    )
}

/// A fresh variable like `v` (name, annotation, checked type), recorded in `vars`.
fn renamed(v: &Var, vars: &mut HashMap<VarId, Expr>) -> Var {
    let w = Var::new(v.name(), v.ty().cloned(), v.span());
    if let Some(t) = v.checked_type() {
        w.set_checked_type(t.clone());
    }
    vars.insert(v.id(), Expr::var(&w));
    w
}

/// A primitive body with its binding variables renamed and uses substituted.
fn copy_body(e: &Expr, vars: &mut HashMap<VarId, Expr>) -> Expr {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Var(v) => vars.get(&v.id()).cloned().unwrap_or_else(|| e.clone()),
        ExprKind::Let { bindings, body } => {
            let bindings = bindings
                .iter()
                .map(|b| {
                    let value = copy_body(&b.value, vars);
                    Binding {
                        var: renamed(&b.var, vars),
                        value,
                        kind: b.kind,
                    }
                })
                .collect();
            let body = copy_body(body, vars);
            Expr::new(ExprKind::Let { bindings, body }, e.span())
        }
        _ => map_children(e, |c| copy_body(c, vars)),
    })
}

/// Walk 2: drops bindings of recorded variables nothing uses.
struct DropDead {
    prims: HashSet<VarId>,
    /// Recorded variables used by what the walk has kept so far (everything after the current
    /// binding in program order).
    used: HashSet<VarId>,
    memo: HashMap<*const ExprNode, Expr>,
    dropped: i64,
}

impl DropDead {
    fn expr(&mut self, e: &Expr) -> Expr {
        match e.kind() {
            ExprKind::Var(v) => {
                if self.prims.contains(&v.id()) {
                    self.used.insert(v.id());
                }
                return e.clone();
            }
            ExprKind::Function(f) if is_primitive(f) => return e.clone(),
            _ if is_atom(e) => return e.clone(),
            _ => {}
        }
        let key = &**e as *const ExprNode;
        if let Some(done) = self.memo.get(&key) {
            return done.clone();
        }
        let out = ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Let { bindings, body } => {
                let new_body = self.expr(body);
                let mut kept = Vec::with_capacity(bindings.len());
                let mut changed = !Expr::ptr_eq(&new_body, body);
                for b in bindings.iter().rev() {
                    let id = b.var.id();
                    if self.prims.contains(&id) && !self.used.contains(&id) {
                        self.dropped += 1;
                        changed = true;
                        continue;
                    }
                    let value = self.expr(&b.value);
                    changed |= !Expr::ptr_eq(&value, &b.value);
                    kept.push(Binding { value, ..b.clone() });
                }
                if !changed {
                    e.clone()
                } else if kept.is_empty() {
                    new_body
                } else {
                    kept.reverse();
                    Expr::new(
                        ExprKind::Let {
                            bindings: kept,
                            body: new_body,
                        },
                        e.span(),
                    )
                }
            }
            _ => {
                // Children in reverse evaluation order would matter only for bindings, which
                // only chains have; any order finds the same uses here.
                map_children(e, |c| self.expr(c))
            }
        });
        self.memo.insert(key, out.clone());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::eval;

    fn inline(text: &str) -> (Module, Module, String) {
        inline_verified(text, true)
    }

    fn inline_verified(text: &str, verify: bool) -> (Module, Module, String) {
        let m = crate::testing::parse_checked(text);
        let (out, _) = crate::testing::run_passes(vec![&InlinePrimitives], 2, m.clone(), verify);
        let printed = crate::testing::printed(&out);
        (m, out, printed)
    }

    #[test]
    fn calls_through_aliases_are_inlined_and_bindings_dropped() {
        let (m, out, text) = inline(
            "#[version = \"0.0.5\"]\n\
             def @main() {\n\
               let %p = fn (%p0: int32, Primitive=1) -> int32 { add(%p0, 1) };\n\
               let %q = %p;\n\
               let %y = %q(2);\n\
               %p(%y)\n\
             }",
        );
        assert!(!text.contains("let %p"), "{text}");
        assert!(!text.contains("let %q"), "{text}");
        assert_eq!(text.matches("Primitive=1").count(), 2, "{text}");
        assert_eq!(eval(&out), eval(&m));
    }

    #[test]
    fn a_primitive_used_as_a_value_keeps_its_binding() {
        // The verifier's `primitives_inlined` check rejects every let-bound primitive, so this
        // runs without it; the contract keeps bindings of primitives used as values.
        let (m, out, text) = inline_verified(
            "#[version = \"0.0.5\"]\n\
             def @main() {\n\
               let %p = fn (%p0: int32, Primitive=1) -> int32 { add(%p0, 1) };\n\
               let %t = (%p, 1);\n\
               let %y = %p(2);\n\
               %t.0(%y)\n\
             }",
            false,
        );
        assert!(text.contains("let %p"), "{text}");
        assert_eq!(eval(&out), eval(&m));
    }

    #[test]
    fn long_chains_do_not_overflow() {
        let mut text = String::from("#[version = \"0.0.5\"]\ndef @main() {\n  let %v0 = 0;\n");
        for i in 1..50_000 {
            text.push_str(&format!(
                "  let %p{i} = fn (%a{i}: int32, Primitive=1) -> int32 {{ add(%a{i}, 1) }};\n  let %v{i} = %p{i}(%v{});\n",
                i - 1
            ));
        }
        text.push_str("  %v49999\n}\n");
        let (m, out, text) = inline(&text);
        assert!(!text.contains("let %p"));
        assert_eq!(eval(&out), eval(&m));
    }
}
