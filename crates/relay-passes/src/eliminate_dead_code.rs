//! `eliminate_dead_code`: drops unused pure bindings and functions unreachable from the entry.
//!
//! Bindings. A binding is dead when its variable is never used and evaluating its value can
//! have no observable effect: no call of a global, closure or function value (it may diverge,
//! fail or write a reference), no `ref_write`, no `match` (a clause may be missing), no call of
//! a `memory.*`/`vm.*` dialect operator, and no operator call that can fail at run time on
//! well-typed inputs (integer division and modulo, which fail on zero, any operator whose
//! argument types have `?` dimensions, which fail when the shapes disagree, except `transpose`,
//! which only reorders its operand's axes, and any operator on an empty tensor, such as an
//! empty integer `mean`). Other operator calls, constructor
//! applications, tuples, projections, `ref`, `ref_read`, `if` and function literals built from
//! pure parts are pure.
//!
//! Algorithm. Per global function: one walk counts the uses of every variable. Then each
//! let-chain is processed from its body backwards: a binding whose count is zero (or whose only
//! uses are inside its own function value) and whose value is pure is dropped, and the uses in
//! its value are subtracted from the counts, which may make earlier bindings dead in the same
//! backward sweep; a binding that stays has its value processed (nested chains) before the
//! bindings before it are decided. Every value is walked a bounded number of times, so a chain of
//! 100,000 bindings is linear, and dead code that only dead code used disappears in one pass.
//!
//! Functions. When the module has the entry function (`@main`, unless the pipeline names another
//! with `PassManager::entry`), global functions not reachable from it (through any `@name`
//! reference) are removed; a module without it keeps all of them. Primitive functions are never
//! entered. Statistics: `bindings removed`, `functions removed`.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{for_each_child, is_primitive, map_children};
use relay_ir::{
    Binding, DTypeCode, Dim, Expr, ExprKind, ExprNode, Module, Symbol, Type, TypeKind, VarId,
    ensure_sufficient_stack,
};

use crate::{Pass, PassContext, PassError};

/// The `eliminate_dead_code` pass.
pub struct EliminateDeadCode;

impl Pass for EliminateDeadCode {
    fn name(&self) -> &'static str {
        "eliminate_dead_code"
    }

    fn description(&self) -> &'static str {
        "drops unused pure bindings and functions unreachable from the entry"
    }

    fn opt_level(&self) -> u32 {
        1
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut removed = 0usize;
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            let mut dce = Dce::default();
            count_uses(&g.func.body, &mut dce.uses, 1);
            g.func.body = dce.expr(&g.func.body);
            removed += dce.removed;
        }
        let before = module.functions.len();
        if module.function(cx.entry).is_some() {
            let reachable = reachable_globals(&module, cx.entry);
            module.functions.retain(|g| reachable.contains(&g.name));
        }
        cx.stat("bindings removed", removed as i64);
        cx.stat(
            "functions removed",
            (before - module.functions.len()) as i64,
        );
        Ok(module)
    }
}

/// The state of the binding elimination in one global function.
#[derive(Default)]
struct Dce {
    /// How many live uses each variable has.
    uses: HashMap<VarId, usize>,
    /// Bindings dropped so far.
    removed: usize,
}

impl Dce {
    /// `e` without its dead bindings.
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => self.chain(e, bindings, body),
            _ => map_children(e, |c| self.expr(c)),
        })
    }

    /// A let-chain, swept backwards from its body.
    fn chain(&mut self, e: &Expr, bindings: &[Binding], body: &Expr) -> Expr {
        let new_body = self.expr(body);
        let mut changed = !Expr::ptr_eq(&new_body, body);
        let mut kept: Vec<Binding> = Vec::with_capacity(bindings.len());
        for b in bindings.iter().rev() {
            let uses = self.uses.get(&b.var.id()).copied().unwrap_or(0);
            let dead = is_pure(&b.value)
                && (uses == 0
                    || (matches!(b.value.kind(), ExprKind::Function(_))
                        && self_uses(&b.value, b.var.id()) == uses));
            if dead {
                count_uses(&b.value, &mut self.uses, -1);
                self.removed += 1;
                changed = true;
                continue;
            }
            let value = self.expr(&b.value);
            changed |= !Expr::ptr_eq(&value, &b.value);
            kept.push(Binding { value, ..b.clone() });
        }
        if !changed {
            return e.clone();
        }
        if kept.is_empty() {
            return new_body;
        }
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

/// Adds `delta` to the use count of every variable occurrence in `e`.
fn count_uses(e: &Expr, uses: &mut HashMap<VarId, usize>, delta: isize) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Var(v) => {
            let n = uses.entry(v.id()).or_insert(0);
            *n = n.saturating_add_signed(delta);
        }
        _ => for_each_child(e, |c| count_uses(c, uses, delta)),
    })
}

/// How many times `var` occurs in `e`.
fn self_uses(e: &Expr, var: VarId) -> usize {
    let mut uses = HashMap::new();
    count_uses(e, &mut uses, 1);
    uses.get(&var).copied().unwrap_or(0)
}

/// Whether evaluating `e` can have no observable effect and cannot fail (see the module docs).
fn is_pure(e: &Expr) -> bool {
    Purity::default().of(e)
}

/// [`is_pure`] of the expressions of one graph, each shared node judged once (a dataflow
/// graph's expressions share their operands: judged as trees, their cost would double with
/// every node read twice).
#[derive(Default)]
pub(crate) struct Purity(HashMap<*const ExprNode, bool>);

impl Purity {
    /// Whether evaluating `e` can have no observable effect and cannot fail.
    pub(crate) fn of(&mut self, e: &Expr) -> bool {
        let key = &**e as *const ExprNode;
        if let Some(&known) = self.0.get(&key) {
            return known;
        }
        let pure = ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Constant(_)
            | ExprKind::Var(_)
            | ExprKind::Global(_)
            | ExprKind::Op(_)
            | ExprKind::Ctor(_)
            | ExprKind::Function(_) => true,
            ExprKind::Call { callee, args, .. } => {
                let callee_ok = match callee.kind() {
                    ExprKind::Ctor(_) => true,
                    ExprKind::Op(op) => pure_op_call(op.name, e, args),
                    _ => false,
                };
                callee_ok && args.iter().all(|a| self.of(a))
            }
            ExprKind::Let { bindings, body } => {
                bindings.iter().all(|b| self.of(&b.value)) && self.of(body)
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => self.of(cond) && self.of(then_branch) && self.of(else_branch),
            ExprKind::Tuple(fields) => fields.iter().all(|f| self.of(f)),
            ExprKind::Proj { tuple, .. } => self.of(tuple),
            ExprKind::RefNew(x) | ExprKind::RefRead(x) => self.of(x),
            ExprKind::Match { .. } | ExprKind::RefWrite(..) => false,
        });
        self.0.insert(key, pure);
        pure
    }
}

/// Whether a call of operator `name` (the call `call` with arguments `args`) is free of effects
/// and cannot fail at run time.
pub(crate) fn pure_op_call(name: &str, call: &Expr, args: &[Expr]) -> bool {
    if name.starts_with("memory.") || name.starts_with("vm.") {
        return false;
    }
    // Reordering the axes its operand's type has cannot fail, whatever their extents.
    if name == "transpose" {
        return true;
    }
    let static_types = args.iter().all(|a| a.checked_type().is_some_and(is_static));
    if !static_types {
        return false;
    }
    let divides = matches!(
        name,
        "divide" | "floor_divide" | "trunc_divide" | "mod" | "floor_mod" | "trunc_mod"
    );
    if divides {
        let int_result = call.checked_type().is_none_or(|t| match t.kind() {
            TypeKind::Tensor { dtype, .. } => dtype.code != DTypeCode::Float,
            _ => true,
        });
        return !int_result;
    }
    true
}

/// Whether a type has no `?` dimension, no empty dimension (an empty reduction or `take` from
/// an empty axis can fail) and no type variable.
fn is_static(t: &Type) -> bool {
    ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Tensor { shape, .. } => {
            shape.iter().all(|d| matches!(d, Dim::Known(n) if *n > 0))
        }
        TypeKind::Tuple(fields) => fields.iter().all(is_static),
        TypeKind::Var(_) | TypeKind::Incomplete => false,
        TypeKind::Func(_) | TypeKind::Adt { .. } | TypeKind::Ref(_) => true,
    })
}

/// The globals reachable from `entry` through `@name` references.
fn reachable_globals(module: &Module, entry: Symbol) -> HashSet<Symbol> {
    let index: HashMap<Symbol, usize> = module
        .functions
        .iter()
        .enumerate()
        .map(|(i, g)| (g.name, i))
        .collect();
    let mut seen = HashSet::from([entry]);
    let mut work = vec![entry];
    while let Some(name) = work.pop() {
        let Some(&i) = index.get(&name) else {
            continue;
        };
        visit_globals(&module.functions[i].func.body, &mut |g| {
            if seen.insert(g) {
                work.push(g);
            }
        });
    }
    seen
}

/// Calls `f` on every global referenced in `e`.
fn visit_globals(e: &Expr, f: &mut impl FnMut(Symbol)) {
    ensure_sufficient_stack(|| match e.kind() {
        ExprKind::Global(name) => f(*name),
        _ => for_each_child(e, |c| visit_globals(c, f)),
    })
}

#[cfg(test)]
mod tests {
    use relay_ir::{PrintOptions, print_module};

    use super::*;
    use crate::PassManager;

    fn run(text: &str) -> String {
        crate::testing::run_pass_printed(&EliminateDeadCode, text)
    }

    #[test]
    fn chains_of_dead_bindings_go_in_one_sweep() {
        let text = run(r#"#[version = "0.0.5"]
def @main(%x: float32) -> float32 {
  let %a = add(%x, 1f);
  let %b = multiply(%a, %a);
  let %c = (%b, %a);
  %x
}
"#);
        assert!(!text.contains("let"), "{text}");
    }

    #[test]
    fn effects_and_integer_division_stay() {
        let text = run(r#"#[version = "0.0.5"]
def @f(%x: int32) -> int32 { %x }
def @main(%x: int32, %r: ref(int32)) -> int32 {
  let %a = divide(%x, 0);
  let %b = @f(%x);
  let %c = ref_write(%r, 1);
  let %d = add(%x, 1);
  %x
}
"#);
        assert!(text.contains("divide") && text.contains("@f(") && text.contains("ref_write"));
        assert!(!text.contains("add("), "{text}");
    }

    #[test]
    fn unreachable_globals_go() {
        let text = run(r#"#[version = "0.0.5"]
def @unused() -> int32 { @also_unused() }
def @also_unused() -> int32 { @unused() }
def @used() -> int32 { 1 }
def @main(%x: int32) -> int32 { add(%x, @used()) }
"#);
        assert!(
            !text.contains("unused") && text.contains("def @used"),
            "{text}"
        );
    }

    #[test]
    fn globals_the_entry_reaches_stay() {
        let module = crate::testing::parse_checked(
            r#"#[version = "0.0.5"]
def @helper(%x: int32) -> int32 { add(%x, 1) }
def @f(%x: int32) -> int32 { @helper(%x) }
def @main(%x: int32) -> int32 { %x }
"#,
        );
        let (out, _) = PassManager::new(vec![&EliminateDeadCode], 2)
            .entry("@f")
            .run(module)
            .expect("runs");
        let text = print_module(&out, &PrintOptions::default());
        // `@f` and what it calls stay; `@main` does not reach them, and goes.
        assert!(
            text.contains("def @f") && text.contains("def @helper"),
            "{text}"
        );
        assert!(!text.contains("def @main"), "{text}");
    }

    /// The early passes of the pipeline (this file's and its neighbours') on a chain of 100,000
    /// bindings: no deep recursion, no quadratic work.
    #[test]
    fn early_passes_handle_100000_bindings() {
        use crate::{
            const_pool_layout::ConstPoolLayout, eta_expand::EtaExpand, fold_constant::FoldConstant,
            simplify_inference::SimplifyInference,
        };
        let n = 50_000;
        let mut src = String::from("#[version = \"0.0.5\"]\ntype Opt[A] { Some(A), None }\n");
        src.push_str("def @main(%x: float32) -> float32 {\n  let %v0 = %x;\n");
        for i in 1..n {
            let value = match i % 4 {
                0 => format!("add(%v{}, multiply(2f, 3f))", i - 1),
                1 => format!("nn.dropout(%v{}).0", i - 1),
                2 => format!(
                    "(match (Some(%v{})) {{ Some(%y) => %y, None => 0f }})",
                    i - 1
                ),
                _ => format!("(Some, %v{}).1", i - 1),
            };
            src.push_str(&format!(
                "  let %v{i} = {value};\n  let %dead{i} = add(%x, 1f);\n"
            ));
        }
        src.push_str(&format!("  %v{}\n}}\n", n - 1));
        let m = relay_syntax::parse(&src, "long.relay").expect("parses");
        relay_types::check_module(&m).expect("type-checks");
        let passes: Vec<&'static dyn crate::Pass> = vec![
            &SimplifyInference,
            &EtaExpand,
            &FoldConstant,
            &EliminateDeadCode,
            &ConstPoolLayout,
        ];
        let (out, _) = PassManager::new(passes, 2)
            .verify_each(true)
            .run(m)
            .expect("runs");
        let text = print_module(&out, &PrintOptions::default());
        assert!(!text.contains("%dead") && !text.contains("nn.dropout"));
        assert!(text.contains("add(%v") && text.contains(", 6f)"));
    }
}
