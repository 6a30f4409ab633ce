//! `eta_expand`: constructors and global functions used as values become function literals.
//!
//! A constructor or global in callee position (`Cons(%x, %xs)`, `@f(%x)`) is left alone. Used
//! as a value anywhere else (an argument, a tuple field, a binding's value, a returned value),
//! it becomes a function literal that calls it, typed from the use site's checked type (the
//! instance the type checker chose there):
//!
//! ```text
//! @map(Cons, %l)  ==>  @map(fn (%x: int32, %x1: List[int32]) -> List[int32] {
//!                            Cons(%x, %x1)
//!                          }, %l)
//! (@f, 1)         ==>  (fn (%x: float32) -> float32 { @f(%x) }, 1)
//! ```
//!
//! Zero-arity constructors (`Nil`) are values already and stay. A use site whose type is still
//! polymorphic (a polymorphic global passed where a polymorphic function is expected, as in
//! `@both(@id, 1, True)` with `%f: fn [A](A) -> A`) is left alone: the literal would have to be
//! polymorphic, which later passes (ANF's annotated bindings, lambda lifting) cannot keep. Type
//! variables of the use site's type that no enclosing `def` or `fn` binds are instances nothing
//! constrains (the `A` of an unused `Cons`): any type fits them, and they become the unit type
//! `()`, so the literal stays monomorphic. Primitive functions are not entered. Use sites without
//! a function type (which type checking rules out) are left alone.
//!
//! Options: `expand_constructor` and `expand_global_var` (both on by default; TVM's VM pipeline
//! turns the second off). Statistics: `constructors expanded`, `globals expanded`. Its tests are
//! in `ir-tests/eta_expand/`.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{is_primitive, map_children};
use relay_ir::{
    Attrs, CtorRef, Expr, ExprKind, FuncType, Function, Module, Type, TypeKind, TypeVar, TypeVarId,
    ensure_sufficient_stack,
};

use crate::util::fresh_var;
use crate::{OptionValue, Pass, PassContext, PassError, PassOption};

/// The `eta_expand` pass.
pub struct EtaExpand;

impl Pass for EtaExpand {
    fn name(&self) -> &'static str {
        "eta_expand"
    }

    fn description(&self) -> &'static str {
        "constructors and global functions used as values become function literals"
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn options(&self) -> &'static [PassOption] {
        &[
            PassOption {
                name: "expand_constructor",
                default: OptionValue::Bool(true),
                min: 0,
                doc: "expand constructors used as values",
            },
            PassOption {
                name: "expand_global_var",
                default: OptionValue::Bool(true),
                min: 0,
                doc: "expand global functions used as values",
            },
        ]
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let arities: HashMap<CtorRef, usize> = module
            .constructors()
            .into_values()
            .filter_map(|c| Some((c, module.ctor_def(c)?.fields.len())))
            .collect();
        let mut ex = Expander {
            arities,
            constructors: cx.bool_option("expand_constructor"),
            globals: cx.bool_option("expand_global_var"),
            scope: HashSet::new(),
            ctors_expanded: 0,
            globals_expanded: 0,
        };
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            ex.scope = g.func.type_params.iter().map(TypeVar::id).collect();
            g.func.body = ex.expr(&g.func.body);
        }
        cx.stat("constructors expanded", ex.ctors_expanded);
        cx.stat("globals expanded", ex.globals_expanded);
        Ok(module)
    }
}

/// The walk's state.
struct Expander {
    /// The number of fields of every constructor.
    arities: HashMap<CtorRef, usize>,
    /// Whether to expand constructors.
    constructors: bool,
    /// Whether to expand globals.
    globals: bool,
    /// Type variables bound by the enclosing `def` and `fn`s.
    scope: HashSet<TypeVarId>,
    ctors_expanded: i64,
    globals_expanded: i64,
}

impl Expander {
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Ctor(c)
                if self.constructors && self.arities.get(c).is_some_and(|&n| n > 0) =>
            {
                self.expand(e)
                    .inspect(|_| self.ctors_expanded += 1)
                    .unwrap_or_else(|| e.clone())
            }
            ExprKind::Global(_) if self.globals => self
                .expand(e)
                .inspect(|_| self.globals_expanded += 1)
                .unwrap_or_else(|| e.clone()),
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => {
                let new_callee = match callee.kind() {
                    ExprKind::Ctor(_) | ExprKind::Global(_) => callee.clone(),
                    _ => self.expr(callee),
                };
                let new_args: Vec<Expr> = args.iter().map(|a| self.expr(a)).collect();
                let same = Expr::ptr_eq(&new_callee, callee)
                    && new_args.iter().zip(args).all(|(n, o)| Expr::ptr_eq(n, o));
                if same {
                    return e.clone();
                }
                Expr::new(
                    ExprKind::Call {
                        callee: new_callee,
                        args: new_args,
                        attrs: attrs.clone(),
                    },
                    e.span(),
                )
            }
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Function(f) => {
                let added: Vec<TypeVarId> = f
                    .type_params
                    .iter()
                    .map(TypeVar::id)
                    .filter(|id| self.scope.insert(*id))
                    .collect();
                let out = map_children(e, |c| self.expr(c));
                for id in added {
                    self.scope.remove(&id);
                }
                out
            }
            _ => map_children(e, |c| self.expr(c)),
        })
    }

    /// The function literal calling the constructor or global `e`, from `e`'s checked type;
    /// `None` when that type is missing or polymorphic.
    fn expand(&self, e: &Expr) -> Option<Expr> {
        let TypeKind::Func(ft) = e.checked_type()?.kind() else {
            return None;
        };
        if !ft.type_params.is_empty() {
            return None;
        }
        // Type variables no enclosing scope binds are instances nothing constrains: any type
        // does, and the unit type keeps the literal monomorphic.
        let mut free = Vec::new();
        for t in ft.params.iter().chain([&ft.ret]) {
            free_type_vars(t, &mut HashSet::new(), &mut free);
        }
        let map: HashMap<TypeVarId, Type> = free
            .iter()
            .filter(|v| !self.scope.contains(&v.id()))
            .map(|v| (v.id(), Type::tuple(Vec::new())))
            .collect();
        let params: Vec<_> = ft
            .params
            .iter()
            .map(|t| fresh_var("x", Some(subst_type(t, &map))))
            .collect();
        let callee = match e.kind() {
            ExprKind::Ctor(c) => ExprKind::Ctor(*c),
            ExprKind::Global(g) => ExprKind::Global(*g),
            _ => return None,
        };
        let body = Expr::new(
            ExprKind::Call {
                callee: Expr::new(callee, e.span()),
                args: params.iter().map(Expr::var).collect(),
                attrs: Attrs::empty(),
            },
            e.span(),
        );
        Some(Expr::new(
            ExprKind::Function(Function {
                type_params: Vec::new(),
                params,
                ret_type: Some(subst_type(&ft.ret, &map)),
                body,
                attrs: Attrs::empty(),
            }),
            e.span(),
        ))
    }
}

/// Appends to `out` the type variables of `t` not in `bound` (in order of first appearance,
/// each once), treating the type parameters of function types inside `t` as bound there.
fn free_type_vars(t: &Type, bound: &mut HashSet<TypeVarId>, out: &mut Vec<TypeVar>) {
    ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Var(v) => {
            if !bound.contains(&v.id()) && !out.contains(v) {
                out.push(v.clone());
            }
        }
        TypeKind::Tensor { .. } | TypeKind::Incomplete => {}
        TypeKind::Tuple(fields) => fields.iter().for_each(|f| free_type_vars(f, bound, out)),
        TypeKind::Adt { args, .. } => args.iter().for_each(|a| free_type_vars(a, bound, out)),
        TypeKind::Ref(inner) => free_type_vars(inner, bound, out),
        TypeKind::Func(ft) => {
            let added: Vec<TypeVarId> = ft
                .type_params
                .iter()
                .map(TypeVar::id)
                .filter(|id| bound.insert(*id))
                .collect();
            for p in ft.params.iter().chain([&ft.ret]) {
                free_type_vars(p, bound, out);
            }
            for id in added {
                bound.remove(&id);
            }
        }
    })
}

/// `t` with the type variables in `map` replaced.
fn subst_type(t: &Type, map: &HashMap<TypeVarId, Type>) -> Type {
    ensure_sufficient_stack(|| match t.kind() {
        TypeKind::Var(v) => map.get(&v.id()).cloned().unwrap_or_else(|| t.clone()),
        TypeKind::Tensor { .. } | TypeKind::Incomplete => t.clone(),
        TypeKind::Tuple(fields) => Type::tuple(fields.iter().map(|f| subst_type(f, map)).collect()),
        TypeKind::Adt { name, args } => Type::from_kind(TypeKind::Adt {
            name: *name,
            args: args.iter().map(|a| subst_type(a, map)).collect(),
        }),
        TypeKind::Ref(inner) => Type::from_kind(TypeKind::Ref(subst_type(inner, map))),
        TypeKind::Func(ft) => Type::from_kind(TypeKind::Func(FuncType {
            type_params: ft.type_params.clone(),
            params: ft.params.iter().map(|p| subst_type(p, map)).collect(),
            ret: subst_type(&ft.ret, map),
        })),
    })
}

#[cfg(test)]
mod tests {

    use super::*;

    fn run(text: &str) -> String {
        crate::testing::run_pass_printed(&EtaExpand, text)
    }

    #[test]
    fn constructors_and_globals_as_values_expand() {
        let text = run(r#"#[version = "0.0.5"]
type List[A] { Cons(A, List[A]), Nil }
def @inc(%x: int32) -> int32 { add(%x, 1) }
def @main() {
  let %c = Cons;
  let %f = @inc;
  %c(%f(1), Nil)
}
"#);
        assert!(
            text.contains("fn (%x: int32, %x1: List[int32]) -> List[int32]"),
            "{text}"
        );
        assert!(text.contains("fn (%x2: int32) -> int32"), "{text}");
        assert!(text.contains("Nil"), "{text}");
    }
}
