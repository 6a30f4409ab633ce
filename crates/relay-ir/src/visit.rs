//! Walks shared by the passes and the interpreter: free variables, the variables a pattern
//! binds, rebuilding a node from rewritten children, and substitution.
//!
//! Every walk here recurses once per nesting level through [`ensure_sufficient_stack`] and
//! iterates over binding vectors, so long binding chains never recurse deeply.

use std::collections::{HashMap, HashSet};

use crate::ensure_sufficient_stack;
use crate::{Binding, Clause, Expr, ExprKind, Function, Pattern, PatternKind, Var, VarId};

/// The variables used in `e` and not bound inside it, in order of first use.
pub fn free_vars(e: &Expr) -> Vec<Var> {
    let mut bound = HashSet::new();
    let mut used = Vec::new();
    collect_vars(e, &mut bound, &mut used);
    let mut seen = HashSet::new();
    used.into_iter()
        .filter(|v: &Var| !bound.contains(&v.id()) && seen.insert(v.id()))
        .collect()
}

/// The free variables of a function: those its body uses beyond its parameters.
pub fn function_free_vars(f: &Function) -> Vec<Var> {
    let mut bound: HashSet<VarId> = f.params.iter().map(Var::id).collect();
    let mut used = Vec::new();
    collect_vars(&f.body, &mut bound, &mut used);
    let mut seen = HashSet::new();
    used.into_iter()
        .filter(|v: &Var| !bound.contains(&v.id()) && seen.insert(v.id()))
        .collect()
}

/// Collects every variable bound anywhere in `e` into `bound` and every use into `used`.
/// Variables are unique by id, so "used and never bound inside" means free.
fn collect_vars(e: &Expr, bound: &mut HashSet<VarId>, used: &mut Vec<Var>) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Constant(_) | ExprKind::Global(_) | ExprKind::Op(_) | ExprKind::Ctor(_) => {}
        ExprKind::Var(v) => used.push(v.clone()),
        ExprKind::Function(f) => {
            bound.extend(f.params.iter().map(Var::id));
            collect_vars(&f.body, bound, used);
        }
        ExprKind::Let { bindings, body } => {
            for b in bindings {
                bound.insert(b.var.id());
                collect_vars(&b.value, bound, used);
            }
            collect_vars(body, bound, used);
        }
        ExprKind::Match {
            scrutinee, clauses, ..
        } => {
            collect_vars(scrutinee, bound, used);
            for c in clauses {
                for v in pattern_vars(&c.pattern) {
                    bound.insert(v.id());
                }
                collect_vars(&c.body, bound, used);
            }
        }
        _ => for_each_child(e, |c| collect_vars(c, bound, used)),
    })
}

/// The variables `p` binds, left to right.
pub fn pattern_vars(p: &Pattern) -> Vec<Var> {
    let mut out = Vec::new();
    push_pattern_vars(p, &mut out);
    out
}

fn push_pattern_vars(p: &Pattern, out: &mut Vec<Var>) {
    ensure_sufficient_stack(|| match &p.kind {
        PatternKind::Wildcard => {}
        PatternKind::Var(v) => out.push(v.clone()),
        PatternKind::Ctor(_, ps) | PatternKind::Tuple(ps) => {
            for q in ps {
                push_pattern_vars(q, out);
            }
        }
    })
}

/// Calls `f` on each direct child expression of `e`, in evaluation order: callee then
/// arguments; binding values then the body; condition then branches; scrutinee then clause
/// bodies; a function's body.
pub fn for_each_child(e: &Expr, mut f: impl FnMut(&Expr)) {
    match e.kind() {
        ExprKind::Constant(_)
        | ExprKind::Var(_)
        | ExprKind::Global(_)
        | ExprKind::Op(_)
        | ExprKind::Ctor(_) => {}
        ExprKind::Call { callee, args, .. } => {
            f(callee);
            args.iter().for_each(f);
        }
        ExprKind::Function(func) => f(&func.body),
        ExprKind::Let { bindings, body } => {
            for b in bindings {
                f(&b.value);
            }
            f(body);
        }
        ExprKind::If {
            cond,
            then_branch,
            else_branch,
        } => {
            f(cond);
            f(then_branch);
            f(else_branch);
        }
        ExprKind::Match {
            scrutinee, clauses, ..
        } => {
            f(scrutinee);
            for c in clauses {
                f(&c.body);
            }
        }
        ExprKind::Tuple(fields) => fields.iter().for_each(f),
        ExprKind::Proj { tuple, .. } => f(tuple),
        ExprKind::RefNew(x) | ExprKind::RefRead(x) => f(x),
        ExprKind::RefWrite(r, v) => {
            f(r);
            f(v);
        }
    }
}

/// `e` with each direct child replaced by `f(child)` (in [`for_each_child`] order). Returns `e`
/// itself (the same node, keeping its checked type) when every child comes back unchanged
/// (pointer-equal), so rewrites rebuild only what they change. Binding variables, parameters,
/// patterns and attributes are kept.
pub fn map_children(e: &Expr, mut f: impl FnMut(&Expr) -> Expr) -> Expr {
    let mut changed = false;
    let mut g = |c: &Expr| {
        let n = f(c);
        changed |= !Expr::ptr_eq(&n, c);
        n
    };
    let kind = match e.kind() {
        ExprKind::Constant(_)
        | ExprKind::Var(_)
        | ExprKind::Global(_)
        | ExprKind::Op(_)
        | ExprKind::Ctor(_) => return e.clone(),
        ExprKind::Call {
            callee,
            args,
            attrs,
        } => ExprKind::Call {
            callee: g(callee),
            args: args.iter().map(&mut g).collect(),
            attrs: attrs.clone(),
        },
        ExprKind::Function(func) => ExprKind::Function(Function {
            body: g(&func.body),
            ..func.clone()
        }),
        ExprKind::Let { bindings, body } => ExprKind::Let {
            bindings: bindings
                .iter()
                .map(|b| Binding {
                    value: g(&b.value),
                    ..b.clone()
                })
                .collect(),
            body: g(body),
        },
        ExprKind::If {
            cond,
            then_branch,
            else_branch,
        } => ExprKind::If {
            cond: g(cond),
            then_branch: g(then_branch),
            else_branch: g(else_branch),
        },
        ExprKind::Match {
            scrutinee,
            clauses,
            complete,
        } => ExprKind::Match {
            scrutinee: g(scrutinee),
            clauses: clauses
                .iter()
                .map(|c| Clause {
                    pattern: c.pattern.clone(),
                    body: g(&c.body),
                })
                .collect(),
            complete: *complete,
        },
        ExprKind::Tuple(fields) => ExprKind::Tuple(fields.iter().map(&mut g).collect()),
        ExprKind::Proj { tuple, index } => ExprKind::Proj {
            tuple: g(tuple),
            index: *index,
        },
        ExprKind::RefNew(x) => ExprKind::RefNew(g(x)),
        ExprKind::RefRead(x) => ExprKind::RefRead(g(x)),
        ExprKind::RefWrite(r, v) => ExprKind::RefWrite(g(r), g(v)),
    };
    if changed {
        Expr::new(kind, e.span())
    } else {
        e.clone()
    }
}

/// `e` with every free use of a variable in `map` replaced by its expression. Bound variables
/// are unique by id, so no capture can occur. Subtrees without a mapped variable are shared.
pub fn substitute(e: &Expr, map: &HashMap<VarId, Expr>) -> Expr {
    if map.is_empty() {
        return e.clone();
    }
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Var(v) => map.get(&v.id()).cloned().unwrap_or_else(|| e.clone()),
        _ => map_children(e, |c| substitute(c, map)),
    })
}

/// Whether `e` is an atom: a variable, global, constant, operator or constructor.
pub fn is_atom(e: &Expr) -> bool {
    matches!(
        e.kind(),
        ExprKind::Var(_)
            | ExprKind::Global(_)
            | ExprKind::Constant(_)
            | ExprKind::Op(_)
            | ExprKind::Ctor(_)
    )
}

/// Whether function attributes mark a primitive function (`Primitive=1`).
pub fn is_primitive(f: &Function) -> bool {
    f.attrs
        .get("Primitive")
        .and_then(|v| v.as_int())
        .is_some_and(|v| v != 0)
}

/// Whether function attributes mark a lifted closure (`Closure=1`).
pub fn is_closure(f: &Function) -> bool {
    f.attrs
        .get("Closure")
        .and_then(|v| v.as_int())
        .is_some_and(|v| v != 0)
}
