//! `hoist_loop_invariants`: operator computations a self-recursive function repeats on every
//! call with the same values are computed once, before the recursion (loop-invariant code
//! motion for Relay's loops, which are tail-recursive functions).
//!
//! A parameter is invariant when every self call passes it back unchanged (`@f(..., %w, ...)`
//! at its own position). An expression built only of operator calls, tuples and projections
//! over invariant parameters, constants and let-bound variables already hoisted is computed
//! once per entry into the loop: `@f` becomes a wrapper that binds each such value and calls
//! `@f_loop`, the old body with those expressions replaced by new parameters that the self
//! calls pass along unchanged.
//!
//! ```text
//! def @f(%i, %n, %x, %h, %w, %u) {              def @f(%i, %n, %x, %h, %w, %u) {
//!   if (%i == %n) { %h } else {                   let %xw = nn.dense(%x, %w);
//!     %0 = nn.dense(%x, %w);            ==>       @f_loop(%i, %n, %x, %h, %w, %u, %xw)
//!     @f(%i + 1, %n, %x,                        }
//!        add(%0, nn.dense(%h, %u)), %w, %u)     def @f_loop(..., %xw) { ... %0 = %xw; ...
//!   }                                                @f_loop(%i + 1, ..., %xw) ... }
//! }
//! ```
//!
//! Hoisting out of an `if` or `match` branch computes the value even when the loop runs no
//! step; only operator calls that cannot fail are hoisted, by `eliminate_dead_code`'s test
//! (static, non-empty shapes; no integer division or modulo, which fails on a zero divisor;
//! no `memory.`/`vm.` operators). Only expressions that compute a
//! tensor of more than one element are worth a parameter; scalar index arithmetic stays.
//! Function literals inside the body are not entered, and a function that uses itself other
//! than by calling itself directly (as a value, or through mutual recursion only) is left
//! alone.
//!
//! Statistics: `loops`, `expressions hoisted`. Its tests are in
//! `ir-tests/hoist_loop_invariants/`.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{is_primitive, map_children};
use relay_ir::{
    Attrs, Binding, BindingKind, Dim, Expr, ExprKind, Function, GlobalFunc, Module, Symbol,
    TypeKind, Var, VarId, ensure_sufficient_stack,
};

use crate::eliminate_dead_code::pure_op_call;
use crate::util::fresh_var;
use crate::{Pass, PassContext, PassError};

/// The `hoist_loop_invariants` pass.
pub struct HoistLoopInvariants;

impl Pass for HoistLoopInvariants {
    fn name(&self) -> &'static str {
        "hoist_loop_invariants"
    }

    fn description(&self) -> &'static str {
        "operator computations a recursive function repeats on unchanged parameters are computed once"
    }

    fn opt_level(&self) -> u32 {
        1
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let (mut loops, mut hoisted) = (0, 0);
        let mut added = Vec::new();
        let mut taken: HashSet<Symbol> = module.functions.iter().map(|f| f.name).collect();
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            let Some(invariant) = invariant_params(g.name, &g.func) else {
                continue;
            };
            let mut h = Hoister {
                name: g.name,
                invariant,
                wrapper: HashMap::new(),
                hoisted: Vec::new(),
                memo: HashMap::new(),
                by_param: HashMap::new(),
            };
            let body = h.expr(&g.func.body);
            if h.hoisted.is_empty() {
                continue;
            }
            loops += 1;
            hoisted += h.hoisted.len() as i64;
            let loop_name = unique_name(g.name, &taken);
            taken.insert(loop_name);
            let (wrapper, looped) = h.split(g, body, loop_name);
            g.func = wrapper;
            added.push(looped);
        }
        module.functions.extend(added);
        cx.stat("loops", loops);
        cx.stat("expressions hoisted", hoisted);
        Ok(module)
    }
}

/// `@name_loop`, or `@name_loop1`, ... if that is `taken`.
fn unique_name(name: Symbol, taken: &HashSet<Symbol>) -> Symbol {
    (0..)
        .map(|k| {
            let suffix = if k == 0 { String::new() } else { k.to_string() };
            Symbol::intern(&format!("{}_loop{suffix}", name.as_str()))
        })
        .find(|s| !taken.contains(s))
        .unwrap_or(name)
}

/// The parameters of `f` (global `name`) that every self call passes back unchanged, if `f`
/// calls itself and uses itself only that way.
fn invariant_params(name: Symbol, f: &Function) -> Option<HashSet<VarId>> {
    let mut calls = Vec::new();
    if !self_calls(&f.body, name, &mut calls) || calls.is_empty() {
        return None;
    }
    let invariant: HashSet<VarId> = f
        .params
        .iter()
        .enumerate()
        .filter(|(j, p)| {
            calls.iter().all(|args: &Vec<Expr>| {
                matches!(args.get(*j).map(Expr::kind), Some(ExprKind::Var(v)) if v.id() == p.id())
            })
        })
        .map(|(_, p)| p.id())
        .collect();
    (!invariant.is_empty()).then_some(invariant)
}

/// Collects the argument lists of the calls to `@name` in `e`; `false` if `@name` is used
/// otherwise (as a value) or inside a function literal.
fn self_calls(e: &Expr, name: Symbol, out: &mut Vec<Vec<Expr>>) -> bool {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Global(g) => *g != name,
        ExprKind::Call { callee, args, .. } if matches!(callee.kind(), ExprKind::Global(g) if *g == name) =>
        {
            out.push(args.clone());
            args.iter().all(|a| self_calls(a, name, out))
        }
        ExprKind::Function(_) => !mentions(e, name),
        _ => {
            let mut ok = true;
            relay_ir::visit::for_each_child(e, |c| ok &= self_calls(c, name, out));
            ok
        }
    })
}

/// Whether `@name` occurs in `e`.
fn mentions(e: &Expr, name: Symbol) -> bool {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Global(g) => *g == name,
        _ => {
            let mut found = false;
            relay_ir::visit::for_each_child(e, |c| found |= mentions(c, name));
            found
        }
    })
}

/// The rewrite of one function's body.
struct Hoister {
    /// The function's name.
    name: Symbol,
    /// Its invariant parameters.
    invariant: HashSet<VarId>,
    /// Let-bound variables of the body whose whole value was hoisted: the wrapper's variable
    /// holding it.
    wrapper: HashMap<VarId, Var>,
    /// Each hoisted expression (in the wrapper's terms), its wrapper variable and the loop's
    /// new parameter, in evaluation order.
    hoisted: Vec<(Expr, Var, Var)>,
    /// Hoisted expressions by node, so a shared node becomes one parameter.
    memo: HashMap<*const (), usize>,
    /// The loop's new parameters: their index in `hoisted`.
    by_param: HashMap<VarId, usize>,
}

impl Hoister {
    /// `e` with its invariant computations replaced by the loop's new parameters.
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| {
            if let Some(k) = self.memo.get(&node_key(e)) {
                return Expr::var(&self.hoisted[*k].2);
            }
            if self.worth_hoisting(e) {
                return self.hoist(e);
            }
            match e.kind() {
                ExprKind::Function(_) => e.clone(),
                ExprKind::Let { bindings, body } => {
                    let bindings = bindings
                        .iter()
                        .map(|b| {
                            let value = self.expr(&b.value);
                            if let ExprKind::Var(v) = value.kind()
                                && let Some(&k) = self.by_param.get(&v.id())
                            {
                                self.wrapper.insert(b.var.id(), self.hoisted[k].1.clone());
                            }
                            Binding {
                                var: b.var.clone(),
                                value,
                                kind: b.kind,
                            }
                        })
                        .collect();
                    let body = self.expr(body);
                    Expr::new(ExprKind::Let { bindings, body }, e.span())
                }
                _ => map_children(e, |c| self.expr(c)),
            }
        })
    }

    /// Whether `e` is an invariant computation of a tensor of more than one element.
    fn worth_hoisting(&self, e: &Expr) -> bool {
        let big = match e.checked_type().map(|t| t.kind()) {
            Some(TypeKind::Tensor { shape, .. }) => shape
                .iter()
                .try_fold(1i64, |n, d| match d {
                    Dim::Known(k) => Some(n.saturating_mul(*k)),
                    Dim::Any => None,
                })
                .is_some_and(|n| n > 1),
            _ => false,
        };
        big && matches!(e.kind(), ExprKind::Call { .. }) && self.invariant_expr(e)
    }

    /// Whether `e` is built of operator calls, tuples and projections over invariant values.
    fn invariant_expr(&self, e: &Expr) -> bool {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Constant(_) => true,
            ExprKind::Var(v) => {
                self.invariant.contains(&v.id()) || self.wrapper.contains_key(&v.id())
            }
            // Only calls that cannot fail (`eliminate_dead_code`'s purity: no integer division,
            // no `?` or empty dimension) may run where the branch would not have.
            ExprKind::Call { callee, args, .. } => {
                matches!(callee.kind(), ExprKind::Op(op) if pure_op_call(op.name, e, args))
                    && args.iter().all(|a| self.invariant_expr(a))
            }
            ExprKind::Tuple(fields) => fields.iter().all(|f| self.invariant_expr(f)),
            ExprKind::Proj { tuple, .. } => self.invariant_expr(tuple),
            _ => false,
        })
    }

    /// Records `e` as hoisted and returns the loop parameter standing for it.
    fn hoist(&mut self, e: &Expr) -> Expr {
        let ty = e.checked_type().cloned();
        let in_wrapper = self.in_wrapper(e);
        let w = fresh_var("inv", ty.clone());
        let q = fresh_var("inv", ty);
        self.memo.insert(node_key(e), self.hoisted.len());
        self.by_param.insert(q.id(), self.hoisted.len());
        self.hoisted.push((in_wrapper, w, q.clone()));
        Expr::var(&q)
    }

    /// `e` in the wrapper's terms: let-bound hoisted variables replaced by the wrapper's.
    fn in_wrapper(&self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => match self.wrapper.get(&v.id()) {
                Some(w) => Expr::var(w),
                None => e.clone(),
            },
            _ => map_children(e, |c| self.in_wrapper(c)),
        })
    }

    /// The wrapper `@f` (same parameters: it binds the hoisted values and calls the loop) and
    /// the loop function (the rewritten body, with the new parameters) named `loop_name`.
    fn split(self, g: &GlobalFunc, body: Expr, loop_name: Symbol) -> (Function, GlobalFunc) {
        let params: Vec<Var> = self.hoisted.iter().map(|(_, _, q)| q.clone()).collect();
        let body = retarget(&body, self.name, loop_name, &params);
        let mut loop_params = g.func.params.clone();
        loop_params.extend(params);
        let looped = GlobalFunc {
            name: loop_name,
            func: Function {
                type_params: g.func.type_params.clone(),
                params: loop_params,
                ret_type: g.func.ret_type.clone(),
                body,
                attrs: g.func.attrs.clone(),
            },
            span: g.span,
        };
        // The wrapper keeps the parameters; the loop's body has its own copies of them.
        let wrapper_params: Vec<Var> = g
            .func
            .params
            .iter()
            .map(|p| fresh_var(p.name().as_str(), p.checked_type().or(p.ty()).cloned()))
            .collect();
        let rename: HashMap<VarId, Expr> = g
            .func
            .params
            .iter()
            .zip(&wrapper_params)
            .map(|(p, w)| (p.id(), Expr::var(w)))
            .collect();
        let mut args: Vec<Expr> = wrapper_params.iter().map(Expr::var).collect();
        let bindings = self
            .hoisted
            .iter()
            .map(|(e, w, _)| {
                args.push(Expr::var(w));
                Binding {
                    var: w.clone(),
                    value: relay_ir::visit::substitute(e, &rename),
                    kind: BindingKind::Let,
                }
            })
            .collect();
        let call = Expr::new(
            ExprKind::Call {
                callee: Expr::new(ExprKind::Global(loop_name), g.span),
                args,
                attrs: Attrs::empty(),
            },
            g.span,
        );
        let wrapper = Function {
            type_params: g.func.type_params.clone(),
            params: wrapper_params,
            ret_type: g.func.ret_type.clone(),
            body: Expr::new(
                ExprKind::Let {
                    bindings,
                    body: call,
                },
                g.span,
            ),
            attrs: g.func.attrs.clone(),
        };
        (wrapper, looped)
    }
}

/// `e` with its self calls to `@from` calling `@to` with the new parameters appended.
fn retarget(e: &Expr, from: Symbol, to: Symbol, params: &[Var]) -> Expr {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Call {
            callee,
            args,
            attrs,
        } if matches!(callee.kind(), ExprKind::Global(g) if *g == from) => {
            let args = args
                .iter()
                .map(|a| retarget(a, from, to, params))
                .chain(params.iter().map(Expr::var))
                .collect();
            Expr::new(
                ExprKind::Call {
                    callee: Expr::new(ExprKind::Global(to), callee.span()),
                    args,
                    attrs: attrs.clone(),
                },
                e.span(),
            )
        }
        ExprKind::Function(_) => e.clone(),
        _ => map_children(e, |c| retarget(c, from, to, params)),
    })
}

/// A node's identity.
fn node_key(e: &Expr) -> *const () {
    e.kind() as *const ExprKind as *const ()
}
