//! `bind_constant_arguments`: a parameter of a global function that every call passes the same
//! constant becomes that constant (interprocedural constant propagation of arguments, as
//! LLVM's IPSCCP does). Weights bound into the entry function (`relayc run --params`, TVM's
//! `bind_params_by_name`) reach the functions it calls as constants too — an imported decoder
//! that a generation loop calls (`relay::generation_loop`), a recursive step handed its weights
//! on every iteration — so that `fold_constant` folds what depends on them alone and the
//! products pack them once, as they do for weights written in the entry function:
//!
//! ```text
//! def @f(%x, %w) { nn.dense(%x, %w) }                 def @f(%x) { nn.dense(%x, meta[..][0]) }
//! def @main(%x) { @f(%x, meta[..][0]) }          ==>  def @main(%x) { @f(%x) }
//! ```
//!
//! Tensors and floating-point scalars are bound, not integer scalars: weights are what the
//! products pack, and a float literal an exporter passes (an attention's scale, a GELU's
//! coefficients) is what lets `simplify_expr` move a scale onto a product and the kernels
//! compute with it inline, while a loop's count or an index stays an argument. A recursive function that passes a parameter on
//! unchanged (`@loop(..., %w)` inside `@loop`) still counts as passing the constant. The same constant means the same node (a
//! bound parameter's uses share one): constants are not compared by value. The entry function,
//! whose caller is the host, a polymorphic global (a constant would fix its type variables)
//! and a global used other than as a callee are left alone.
//! Primitive functions are not entered. Statistics: `arguments bound`.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{for_each_child, is_primitive, map_children, substitute};
use relay_ir::{Expr, ExprKind, Module, Symbol, VarId, ensure_sufficient_stack};

use crate::{Pass, PassContext, PassError};

/// The `bind_constant_arguments` pass.
pub struct BindConstantArguments;

impl Pass for BindConstantArguments {
    fn name(&self) -> &'static str {
        "bind_constant_arguments"
    }

    fn description(&self) -> &'static str {
        "parameters every call passes the same constant become that constant"
    }

    fn opt_level(&self) -> u32 {
        2
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut uses = Uses::default();
        for g in &module.functions {
            if !is_primitive(&g.func) {
                uses.scan(&g.func.body);
            }
        }
        let entry = cx.entry;
        let mut bound: HashMap<Symbol, Vec<usize>> = HashMap::new();
        for g in &mut module.functions {
            let polymorphic = !g.func.type_params.is_empty();
            if g.name == entry
                || polymorphic
                || is_primitive(&g.func)
                || uses.escapes.contains(&g.name)
            {
                continue;
            }
            let Some(calls) = uses.calls.get(&g.name) else {
                continue;
            };
            let params: Vec<VarId> = g.func.params.iter().map(|p| p.id()).collect();
            let constants: Vec<(usize, Expr)> = (0..params.len())
                .filter_map(|i| common_constant(calls, i, params[i]).map(|c| (i, c)))
                .collect();
            if constants.is_empty() {
                continue;
            }
            let map: HashMap<VarId, Expr> = constants
                .iter()
                .map(|(i, c)| (params[*i], c.clone()))
                .collect();
            g.func.body = substitute(&g.func.body, &map);
            let positions: Vec<usize> = constants.iter().map(|(i, _)| *i).collect();
            g.func.params = drop_positions(&g.func.params, &positions);
            bound.insert(g.name, positions);
        }
        let count: usize = bound.values().map(Vec::len).sum();
        if !bound.is_empty() {
            for g in &mut module.functions {
                if !is_primitive(&g.func) {
                    g.func.body = drop_arguments(&g.func.body, &bound);
                }
            }
        }
        cx.stat("arguments bound", count as i64);
        Ok(module)
    }
}

/// The calls of each global (their arguments) and the globals used other than as a callee.
#[derive(Default)]
struct Uses {
    calls: HashMap<Symbol, Vec<Vec<Expr>>>,
    escapes: HashSet<Symbol>,
}

impl Uses {
    fn scan(&mut self, e: &Expr) {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => {}
            ExprKind::Call { callee, args, .. } if matches!(callee.kind(), ExprKind::Global(_)) => {
                if let ExprKind::Global(g) = callee.kind() {
                    self.calls.entry(*g).or_default().push(args.clone());
                }
                args.iter().for_each(|a| self.scan(a));
            }
            ExprKind::Global(g) => {
                self.escapes.insert(*g);
            }
            _ => for_each_child(e, |c| self.scan(c)),
        })
    }
}

/// The tensor or floating-point scalar constant every call passes at position `i`, the function's own
/// parameter `param` passed on unchanged counting as that constant; `None` unless there is
/// exactly one.
fn common_constant(calls: &[Vec<Expr>], i: usize, param: VarId) -> Option<Expr> {
    let mut found: Option<&Expr> = None;
    for args in calls {
        let arg = args.get(i)?;
        match arg.kind() {
            ExprKind::Var(v) if v.id() == param => {}
            ExprKind::Constant(c) if !c.shape().is_empty() || c.dtype().is_float() => match found {
                Some(c) if !Expr::ptr_eq(c, arg) => return None,
                _ => found = Some(arg),
            },
            _ => return None,
        }
    }
    found.cloned()
}

/// `items` without those at `positions` (sorted).
fn drop_positions<T: Clone>(items: &[T], positions: &[usize]) -> Vec<T> {
    items
        .iter()
        .enumerate()
        .filter(|(i, _)| positions.binary_search(i).is_err())
        .map(|(_, x)| x.clone())
        .collect()
}

/// `e` with the bound positions dropped from every call of a global in `bound`.
fn drop_arguments(e: &Expr, bound: &HashMap<Symbol, Vec<usize>>) -> Expr {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Function(f) if is_primitive(f) => e.clone(),
        _ => {
            let e = map_children(e, |c| drop_arguments(c, bound));
            let ExprKind::Call {
                callee,
                args,
                attrs,
            } = e.kind()
            else {
                return e;
            };
            let ExprKind::Global(g) = callee.kind() else {
                return e;
            };
            match bound.get(g) {
                Some(positions) => Expr::new(
                    ExprKind::Call {
                        callee: callee.clone(),
                        args: drop_positions(args, positions),
                        attrs: attrs.clone(),
                    },
                    e.span(),
                ),
                None => e,
            }
        }
    })
}
