//! `fold_constant`: evaluates constant subexpressions with the reference operators.
//!
//! One walk over every global function (never inside primitive functions) that, bottom-up:
//!
//! - evaluates an operator call whose arguments are all constants, or tuples of constants, with
//!   the operator's reference evaluation (`OpSchema::eval`, the function the interpreter calls,
//!   so the result is bit-identical to running the program) and replaces it by the resulting
//!   constant (or tuple of constants);
//! - propagates let-bound constants and tuples of constants into their uses and drops those
//!   bindings (evaluating a constant has no effect), except for variables a `memory.kill`
//!   unbinds (a use after the kill must stay a run-time error);
//! - replaces an `if` whose condition is a constant by the branch it takes, and a projection of
//!   a tuple of constants by the field.
//!
//! Left alone: operators without a reference evaluation, the `memory.*` and `vm.*` dialect
//! operators, calls whose result would have more than `max_elements` elements *and* more
//! bytes than the constants they read (a small constant broadcast or tiled: a result no
//! larger than its inputs — a transpose, cast, reshape, slice or concatenation of weights —
//! folds at any size, [`within_constants`]), calls whose result shape is not
//! known before evaluation (the result type comes from the operator's type relation applied to
//! the constant arguments, before anything is evaluated), and calls whose evaluation fails (a
//! run-time error stays a run-time error). The registry has no random or stateful operators.
//! Statistics: `calls folded`, `branches folded`, `bindings propagated`.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{for_each_child, is_primitive, map_children};
use relay_ir::{
    Binding, Dim, Expr, ExprKind, Module, OpRef, Type, TypeKind, Value, VarId,
    ensure_sufficient_stack,
};

use crate::{Invariants, OptionValue, Pass, PassContext, PassError, PassOption};

/// The `fold_constant` pass.
pub struct FoldConstant;

impl Pass for FoldConstant {
    fn name(&self) -> &'static str {
        "fold_constant"
    }

    fn description(&self) -> &'static str {
        "evaluates constant subexpressions with the reference operators"
    }

    fn opt_level(&self) -> u32 {
        2
    }

    fn establishes(&self) -> Invariants {
        Invariants {
            folded: true,
            ..Invariants::default()
        }
    }

    fn options(&self) -> &'static [PassOption] {
        &[PassOption {
            name: "max_elements",
            default: OptionValue::Int(1 << 20),
            min: 0,
            doc: "the most elements a folded result larger than its constant arguments may have; \
                  larger ones stay calls (a result no larger than its arguments always folds)",
        }]
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let max = u128::try_from(cx.int_option("max_elements")).unwrap_or(0);
        let mut folder = Folder {
            max_elements: max,
            env: HashMap::new(),
            killed: HashSet::new(),
            calls: 0,
            branches: 0,
            bindings: 0,
        };
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            collect_killed(&g.func.body, &mut folder.killed);
            g.func.body = folder.expr(&g.func.body);
        }
        cx.stat("calls folded", folder.calls);
        cx.stat("branches folded", folder.branches);
        cx.stat("bindings propagated", folder.bindings);
        Ok(module)
    }
}

/// The walk's state.
struct Folder {
    /// The largest result folded.
    max_elements: u128,
    /// Let-bound variables whose value is a constant or a tuple of constants.
    env: HashMap<VarId, Expr>,
    /// Variables some `memory.kill` unbinds: their bindings stay, so a use after the kill
    /// still fails as it did.
    killed: HashSet<VarId>,
    calls: i64,
    branches: i64,
    bindings: i64,
}

impl Folder {
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Var(v) => self.env.get(&v.id()).cloned().unwrap_or_else(|| e.clone()),
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => self.chain(e, bindings, body),
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                let c = self.expr(cond);
                match constant_condition(&c) {
                    Some(true) => {
                        self.branches += 1;
                        self.expr(then_branch)
                    }
                    Some(false) => {
                        self.branches += 1;
                        self.expr(else_branch)
                    }
                    None => {
                        let t = self.expr(then_branch);
                        let f = self.expr(else_branch);
                        if Expr::ptr_eq(&c, cond)
                            && Expr::ptr_eq(&t, then_branch)
                            && Expr::ptr_eq(&f, else_branch)
                        {
                            return e.clone();
                        }
                        Expr::new(
                            ExprKind::If {
                                cond: c,
                                then_branch: t,
                                else_branch: f,
                            },
                            e.span(),
                        )
                    }
                }
            }
            ExprKind::Proj { tuple, index } => {
                let t = self.expr(tuple);
                if let ExprKind::Tuple(fields) = t.kind()
                    && fields.iter().all(is_constant)
                    && let Some(field) = fields.get(*index as usize)
                {
                    return field.clone();
                }
                if Expr::ptr_eq(&t, tuple) {
                    return e.clone();
                }
                Expr::new(
                    ExprKind::Proj {
                        tuple: t,
                        index: *index,
                    },
                    e.span(),
                )
            }
            ExprKind::Call { .. } => {
                let call = map_children(e, |c| self.expr(c));
                match self.fold_call(&call) {
                    Some(folded) => {
                        self.calls += 1;
                        folded
                    }
                    None => call,
                }
            }
            _ => map_children(e, |c| self.expr(c)),
        })
    }

    /// A let-chain: constant bindings go into the environment and out of the chain.
    fn chain(&mut self, e: &Expr, bindings: &[Binding], body: &Expr) -> Expr {
        let mut changed = false;
        let mut kept = Vec::with_capacity(bindings.len());
        for b in bindings {
            let value = self.expr(&b.value);
            if is_constant(&value) && !self.killed.contains(&b.var.id()) {
                self.env.insert(b.var.id(), value);
                self.bindings += 1;
                changed = true;
                continue;
            }
            changed |= !Expr::ptr_eq(&value, &b.value);
            kept.push(Binding { value, ..b.clone() });
        }
        let new_body = self.expr(body);
        if !changed && Expr::ptr_eq(&new_body, body) {
            return e.clone();
        }
        if kept.is_empty() {
            return new_body;
        }
        Expr::new(
            ExprKind::Let {
                bindings: kept,
                body: new_body,
            },
            e.span(),
        )
    }

    /// The folded value of an operator call whose arguments are constants, if it can and may
    /// be folded.
    fn fold_call(&self, call: &Expr) -> Option<Expr> {
        let ExprKind::Call {
            callee,
            args,
            attrs,
        } = call.kind()
        else {
            return None;
        };
        let ExprKind::Op(op) = callee.kind() else {
            return None;
        };
        if !foldable(op) || !args.iter().all(is_constant) {
            return None;
        }
        let (relation, eval) = (op.relation?, op.eval?);
        let types: Vec<Type> = args.iter().map(constant_type).collect();
        let values: Vec<Value> = args.iter().filter_map(constant_value).collect();
        let mut result_type = relation(&types, attrs).ok()?;
        if relay_ops::dynamic::is_value_shaped(op) {
            // Its relation leaves `?` that the constants decide: the shape, before evaluating.
            let shape = relay_ops::dynamic::result_shape(op.name, attrs, &values).ok()?;
            let TypeKind::Tensor { dtype, .. } = result_type.kind() else {
                return None;
            };
            result_type = Type::tensor(&shape, *dtype);
        }
        if elements(&result_type)? > self.max_elements && !within_constants(&result_type, &types) {
            return None;
        }
        let result = eval(&values, attrs).ok()?;
        // The result replaces a call of type `result_type`; anything else would not type-check.
        if !has_type(&result, &result_type) {
            return None;
        }
        value_expr(&result)
    }
}

/// Adds to `out` the variables passed to `memory.kill` in `e`.
fn collect_killed(e: &Expr, out: &mut HashSet<VarId>) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Call { callee, args, .. } if is_op(callee, "memory.kill") => {
            for a in args {
                if let ExprKind::Var(v) = a.kind() {
                    out.insert(v.id());
                }
            }
        }
        ExprKind::Function(f) if is_primitive(f) => {}
        _ => for_each_child(e, |c| collect_killed(c, out)),
    })
}

/// Whether `e` is the operator called `name`.
fn is_op(e: &Expr, name: &str) -> bool {
    matches!(e.kind(), ExprKind::Op(op) if op.name == name)
}

/// Whether calls of `op` may be evaluated at compile time: not the dialect operators, which
/// allocate and invoke kernels.
pub(crate) fn foldable(op: OpRef) -> bool {
    !(op.name.starts_with("memory.") || op.name.starts_with("vm."))
}

/// Whether `e` is a constant or a tuple of constants.
pub(crate) fn is_constant(e: &Expr) -> bool {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Constant(_) => true,
        ExprKind::Tuple(fields) => fields.iter().all(is_constant),
        _ => false,
    })
}

/// The value of a constant or tuple of constants.
pub(crate) fn constant_value(e: &Expr) -> Option<Value> {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Constant(c) => Some(Value::Tensor(c.clone())),
        ExprKind::Tuple(fields) => fields
            .iter()
            .map(constant_value)
            .collect::<Option<Vec<_>>>()
            .map(Value::tuple),
        _ => None,
    })
}

/// The type of a constant or tuple of constants.
pub(crate) fn constant_type(e: &Expr) -> Type {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Constant(c) => Type::tensor(c.shape(), c.dtype()),
        ExprKind::Tuple(fields) => Type::tuple(fields.iter().map(constant_type).collect()),
        _ => Type::from_kind(TypeKind::Incomplete),
    })
}

/// The expression of a tensor or tuple-of-tensors value.
fn value_expr(v: &Value) -> Option<Expr> {
    ensure_sufficient_stack(|| match v {
        Value::Tensor(t) => Some(Expr::new(
            ExprKind::Constant(t.clone()),
            relay_ir::Span::DUMMY,
        )),
        Value::Tuple(fields) => {
            let fields = fields.iter().map(value_expr).collect::<Option<Vec<_>>>()?;
            Some(Expr::new(ExprKind::Tuple(fields), relay_ir::Span::DUMMY))
        }
        _ => None,
    })
}

/// Whether a value has type `t` (dtype and shape of every tensor, arity of every tuple).
fn has_type(v: &Value, t: &Type) -> bool {
    ensure_sufficient_stack(|| match (v, t.kind()) {
        (Value::Tensor(a), TypeKind::Tensor { shape, dtype }) => {
            a.dtype() == *dtype
                && a.ndim() == shape.len()
                && a.shape()
                    .iter()
                    .zip(shape)
                    .all(|(&n, d)| *d == Dim::Known(n))
        }
        (Value::Tuple(fields), TypeKind::Tuple(types)) => {
            fields.len() == types.len() && fields.iter().zip(types).all(|(f, t)| has_type(f, t))
        }
        _ => false,
    })
}

/// Whether a call whose constant arguments have the types `args` and whose result has the
/// type `result` folds at any size: its result takes no more bytes than the constants it
/// reads (a transpose, cast, reshape, slice or concatenation of weights), so folding it at
/// most doubles what the executable already holds, and no kernel is left reading only
/// constants. A result larger than that (a small constant broadcast or tiled) folds only
/// within `max_elements`; beyond, computing it is cheaper than storing it.
pub(crate) fn within_constants(result: &Type, args: &[Type]) -> bool {
    let read = args.iter().try_fold(0u128, |n, t| n.checked_add(bytes(t)?));
    matches!((bytes(result), read), (Some(out), Some(read)) if out <= read)
}

/// The number of bytes of a tensor or tuple type with known shapes.
fn bytes(t: &Type) -> Option<u128> {
    ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Tensor { dtype, .. } => elements(t)?.checked_mul(dtype.size_bytes() as u128),
        TypeKind::Tuple(fields) => fields
            .iter()
            .try_fold(0u128, |n, f| n.checked_add(bytes(f)?)),
        _ => None,
    })
}

/// The number of elements of a tensor or tuple type with known shapes.
fn elements(t: &Type) -> Option<u128> {
    ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Tensor { shape, .. } => shape.iter().try_fold(1u128, |n, d| match d {
            Dim::Known(k) => n.checked_mul(u128::try_from(*k).ok()?),
            Dim::Any => None,
        }),
        TypeKind::Tuple(fields) => fields
            .iter()
            .try_fold(0u128, |n, f| n.checked_add(elements(f)?)),
        _ => None,
    })
}

/// The branch a constant `if` condition takes, read as the interpreter reads it (a
/// one-element tensor, non-zero is true).
fn constant_condition(c: &Expr) -> Option<bool> {
    match c.kind() {
        ExprKind::Constant(t) if t.num_elements() == 1 => t.to_bool_vec().first().copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    fn run(text: &str) -> String {
        crate::testing::run_pass_printed(&FoldConstant, text)
    }

    #[test]
    fn folds_through_lets_tuples_and_ifs() {
        let text = run(r#"#[version = "0.0.5"]
def @main(%x: float32) -> float32 {
  let %a = add(1f, 2f);
  let %t = (%a, 4f);
  let %b = multiply(%t.0, %t.1);
  if (less(%b, 20f)) { add(%x, %b) } else { %x }
}
"#);
        assert!(text.contains("add(%x, 12f)"), "{text}");
        assert!(!text.contains("let") && !text.contains("if"), "{text}");
    }

    /// `text` after `fold_constant` at opt level 2 with `max_elements`, verified, printed.
    fn run_with_max(text: &str, max_elements: i64) -> String {
        let mut manager = crate::PassManager::new(vec![&FoldConstant], 2).verify_each(true);
        manager
            .set_option("fold_constant", "max_elements", &max_elements.to_string())
            .expect("the option is known");
        let (out, _) = manager
            .run(crate::testing::parse_checked(text))
            .expect("the pass runs");
        crate::testing::printed(&out)
    }

    #[test]
    fn results_no_larger_than_their_constants_fold_at_any_size() {
        // A transpose and a cast of weights fold past `max_elements`; a broadcast of a small
        // constant past it stays a call.
        let text = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(3, 2), float32]) {
  let %w = ones(shape=[2, 3], dtype="float32");
  let %t = transpose(%w, axes=None);
  let %b = broadcast_to(1f, shape=[3, 2]);
  add(add(%x, cast(cast(%t, dtype="float16"), dtype="float32")), %b)
}
"#;
        // `ones` (6 elements) folds within the limit; then what is no larger than it.
        let printed = run_with_max(text, 6);
        assert!(
            !printed.contains("transpose") && !printed.contains("cast"),
            "{printed}"
        );
        let printed = run_with_max(text, 0);
        assert!(
            printed.contains("ones(") && printed.contains("broadcast_to("),
            "{printed}"
        );
    }

    #[test]
    fn run_time_errors_stay() {
        let text = run(r#"#[version = "0.0.5"]
def @main() -> int32 {
  divide(7, 0)
}
"#);
        assert!(text.contains("divide(7, 0)"), "{text}");
    }
}
