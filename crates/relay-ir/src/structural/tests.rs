//! Tests of structural equality and hashing on hand-built IR.

use std::sync::Arc;

use relay_runtime::{DType, NDArray};

use super::{module_eq, module_hash, structural_eq, structural_hash, type_eq};
use crate::testing::*;
use crate::{
    AttrValue, Attrs, Binding, BindingKind, Clause, CtorDef, CtorRef, Expr, ExprKind, FuncType,
    Function, GlobalFunc, Module, ModuleKind, OpSchema, Pattern, PatternKind, Span, Type, TypeDef,
    TypeKind, TypeVar, Var,
};

#[track_caller]
fn assert_equal(a: &Expr, b: &Expr) {
    assert!(structural_eq(a, b), "expected equal:\n{a:?}\n{b:?}");
    assert!(structural_eq(b, a), "expected equal (reversed)");
    assert_eq!(
        structural_hash(a),
        structural_hash(b),
        "equal expressions must hash equally"
    );
}

#[track_caller]
fn assert_unequal(a: &Expr, b: &Expr) {
    assert!(!structural_eq(a, b), "expected unequal:\n{a:?}\n{b:?}");
    assert!(!structural_eq(b, a), "expected unequal (reversed)");
}

#[test]
fn alpha_equivalent_lets_are_equal() {
    let (x, y) = (var("x"), var("y"));
    let a = chain(vec![(BindingKind::Let, &x, int(1))], add(r(&x), r(&x)));
    let b = chain(vec![(BindingKind::Let, &y, int(1))], add(r(&y), r(&y)));
    assert_equal(&a, &b);
    let c = chain(vec![(BindingKind::Let, &y, int(2))], add(r(&y), r(&y)));
    assert_unequal(&a, &c);
}

#[test]
fn binding_kinds_are_ignored() {
    let (x, y) = (var("x"), var("y"));
    let a = chain(vec![(BindingKind::Graph, &x, int(1))], r(&x));
    let b = chain(vec![(BindingKind::Let, &y, int(1))], r(&y));
    assert_equal(&a, &b);
}

#[test]
fn binding_order_matters() {
    let (a1, b1, a2, b2) = (var("a"), var("b"), var("a"), var("b"));
    let x = chain(
        vec![
            (BindingKind::Let, &a1, int(1)),
            (BindingKind::Let, &b1, int(1)),
        ],
        tuple(vec![r(&a1), r(&b1)]),
    );
    let y = chain(
        vec![
            (BindingKind::Let, &a2, int(1)),
            (BindingKind::Let, &b2, int(1)),
        ],
        tuple(vec![r(&b2), r(&a2)]),
    );
    assert_unequal(&x, &y);
}

#[test]
fn nested_chains_equal_flat_ones() {
    let (a, b, c, d) = (var("a"), var("b"), var("c"), var("d"));
    let nested = chain(
        vec![(BindingKind::Let, &a, int(1))],
        chain(
            vec![],
            chain(vec![(BindingKind::Graph, &b, add(r(&a), r(&a)))], r(&b)),
        ),
    );
    let flat = chain(
        vec![
            (BindingKind::Let, &c, int(1)),
            (BindingKind::Let, &d, add(r(&c), r(&c))),
        ],
        r(&d),
    );
    assert_equal(&nested, &flat);
    assert_equal(&chain(vec![], int(4)), &int(4));
    assert_unequal(
        &chain(vec![(BindingKind::Seq, &var(""), int(4))], int(4)),
        &int(4),
    );
}

#[test]
fn alpha_equivalent_functions_are_equal() {
    let (x, y) = (var_t("x", f32t()), var_t("y", f32t()));
    let a = lambda(vec![x.clone()], add(r(&x), r(&x)));
    let b = lambda(vec![y.clone()], add(r(&y), r(&y)));
    assert_equal(&a, &b);
    // A different annotation, or none, makes them differ.
    let z = var_t("z", Type::scalar(DType::I32));
    assert_unequal(&a, &lambda(vec![z.clone()], add(r(&z), r(&z))));
    let w = var("w");
    assert_unequal(&a, &lambda(vec![w.clone()], add(r(&w), r(&w))));
    // Bound versus free.
    let (p, q, free) = (var("p"), var("q"), var("free"));
    assert_unequal(&lambda(vec![p.clone()], r(&p)), &lambda(vec![q], r(&free)));
    // Parameters bound at different positions.
    let (p1, p2, q1, q2) = (var("p1"), var("p2"), var("q1"), var("q2"));
    assert_unequal(
        &lambda(vec![p1.clone(), p2.clone()], r(&p1)),
        &lambda(vec![q1, q2.clone()], r(&q2)),
    );
}

#[test]
fn generic_functions_rename_type_variables() {
    let (a, b) = (tv("A"), tv("B"));
    let generic = |t: &TypeVar, name: &str| {
        let x = var_t(name, tv_ty(t));
        mk(ExprKind::Function(Function {
            type_params: vec![t.clone()],
            params: vec![x.clone()],
            ret_type: Some(tv_ty(t)),
            body: r(&x),
            attrs: Attrs::new(vec![(sym("Primitive"), AttrValue::Int(1))]),
        }))
    };
    assert_equal(&generic(&a, "x"), &generic(&b, "y"));
    let plain = {
        let x = var_t("x", tv_ty(&a));
        mk(ExprKind::Function(Function {
            type_params: vec![],
            params: vec![x.clone()],
            ret_type: Some(tv_ty(&a)),
            body: r(&x),
            attrs: Attrs::new(vec![(sym("Primitive"), AttrValue::Int(1))]),
        }))
    };
    assert_unequal(&generic(&a, "x"), &plain);
}

#[test]
fn free_variables_map_consistently() {
    let (a, b, c, d) = (var("a"), var("b"), var("c"), var("d"));
    assert_equal(&add(r(&a), r(&b)), &add(r(&c), r(&d)));
    assert_equal(&add(r(&a), r(&a)), &add(r(&c), r(&c)));
    assert_unequal(&add(r(&a), r(&a)), &add(r(&c), r(&d)));
    assert_unequal(&add(r(&a), r(&b)), &add(r(&c), r(&c)));
    // Free variables' annotations are compared.
    let e = var_t("e", f32t());
    assert_unequal(&r(&a), &r(&e));
}

#[test]
fn patterns_bind_variables() {
    let cons = CtorRef {
        adt: sym("List"),
        name: sym("Cons"),
        tag: 0,
    };
    let nil = CtorRef {
        adt: sym("List"),
        name: sym("Nil"),
        tag: 1,
    };
    let pat = |kind| Pattern {
        kind,
        span: Span::DUMMY,
    };
    let matcher = |l: &Var, h: &Var, t: &Var, swap: bool| {
        let body = if swap {
            tuple(vec![r(t), r(h)])
        } else {
            tuple(vec![r(h), r(t)])
        };
        mk(ExprKind::Match {
            scrutinee: r(l),
            clauses: vec![
                Clause {
                    pattern: pat(PatternKind::Ctor(
                        cons,
                        vec![
                            pat(PatternKind::Var(h.clone())),
                            pat(PatternKind::Var(t.clone())),
                        ],
                    )),
                    body,
                },
                Clause {
                    pattern: pat(PatternKind::Ctor(nil, vec![])),
                    body: tuple(vec![]),
                },
            ],
            complete: true,
        })
    };
    let a = matcher(&var("l"), &var("h"), &var("t"), false);
    let b = matcher(&var("m"), &var("x"), &var("y"), false);
    let c = matcher(&var("m"), &var("x"), &var("y"), true);
    assert_equal(&a, &b);
    assert_unequal(&a, &c);
}

#[test]
fn recursive_let_functions() {
    let build = |f: &Var, n: &Var| {
        chain(
            vec![(
                BindingKind::Let,
                f,
                lambda(vec![n.clone()], Expr::call(r(f), vec![r(n)])),
            )],
            Expr::call(r(f), vec![int(0)]),
        )
    };
    assert_equal(&build(&var("f"), &var("n")), &build(&var("g"), &var("m")));
}

#[test]
fn leaves_compare_by_value() {
    let tensor = |bytes: &[u8]| {
        Expr::constant(NDArray::from_bytes(DType::U8, &[bytes.len() as i64], bytes).unwrap())
    };
    assert_equal(&tensor(&[1, 2]), &tensor(&[1, 2]));
    assert_unequal(&tensor(&[1, 2]), &tensor(&[1, 3]));
    assert_unequal(
        &int(1),
        &Expr::constant(NDArray::from_bytes(DType::U32, &[], &1u32.to_ne_bytes()).unwrap()),
    );
    let nan = |bits: u32| {
        Expr::constant(NDArray::from_bytes(DType::F32, &[], &bits.to_ne_bytes()).unwrap())
    };
    assert_equal(&nan(0x7fc0_0000), &nan(0x7fc0_0000));
    let shared = Arc::new(NDArray::zeros(DType::F32, &[3]).unwrap());
    assert_equal(
        &mk(ExprKind::Constant(shared.clone())),
        &mk(ExprKind::Constant(shared)),
    );

    let op = |o: &'static OpSchema| mk(ExprKind::Op(o));
    assert_equal(&op(&ADD), &op(&ADD));
    assert_unequal(&op(&ADD), &op(&SUB));
    let global = |n: &str| mk(ExprKind::Global(sym(n)));
    assert_unequal(&global("f"), &global("g"));
    let cons = CtorRef {
        adt: sym("List"),
        name: sym("Cons"),
        tag: 0,
    };
    let other = CtorRef {
        adt: sym("Other"),
        name: sym("Cons"),
        tag: 0,
    };
    assert_unequal(&mk(ExprKind::Ctor(cons)), &mk(ExprKind::Ctor(other)));

    let call = |attrs: Vec<(&str, AttrValue)>| {
        let attrs = Attrs::new(attrs.into_iter().map(|(k, v)| (sym(k), v)).collect());
        mk(ExprKind::Call {
            callee: global("f"),
            args: vec![int(1)],
            attrs,
        })
    };
    assert_equal(
        &call(vec![("a", AttrValue::Float(f64::NAN))]),
        &call(vec![("a", AttrValue::Float(f64::NAN))]),
    );
    assert_unequal(
        &call(vec![("a", AttrValue::Float(0.0))]),
        &call(vec![("a", AttrValue::Float(-0.0))]),
    );
    assert_unequal(
        &call(vec![("a", AttrValue::Int(1))]),
        &call(vec![("b", AttrValue::Int(1))]),
    );
    assert_unequal(&call(vec![]), &call(vec![("a", AttrValue::Null)]));
}

#[test]
fn other_forms() {
    let x = var("x");
    let cond = |then: Expr| {
        mk(ExprKind::If {
            cond: r(&x),
            then_branch: then,
            else_branch: int(0),
        })
    };
    assert_equal(&cond(int(1)), &cond(int(1)));
    assert_unequal(&cond(int(1)), &cond(int(2)));
    let proj = |i| {
        mk(ExprKind::Proj {
            tuple: r(&x),
            index: i,
        })
    };
    assert_unequal(&proj(0), &proj(1));
    assert_unequal(
        &mk(ExprKind::RefNew(int(1))),
        &mk(ExprKind::RefRead(int(1))),
    );
    assert_equal(
        &mk(ExprKind::RefWrite(r(&x), int(1))),
        &mk(ExprKind::RefWrite(r(&x), int(1))),
    );
    assert_unequal(&tuple(vec![int(1)]), &tuple(vec![int(1), int(1)]));
}

#[test]
fn types_compare_up_to_renaming() {
    let (a, b, c) = (tv("A"), tv("B"), tv("C"));
    let poly = |t: &TypeVar| {
        Type::from_kind(TypeKind::Func(FuncType {
            type_params: vec![t.clone()],
            params: vec![tv_ty(t)],
            ret: tv_ty(t),
        }))
    };
    assert!(type_eq(&poly(&a), &poly(&b)));
    // Free type variables map consistently.
    assert!(type_eq(
        &Type::tuple(vec![tv_ty(&a), tv_ty(&a)]),
        &Type::tuple(vec![tv_ty(&b), tv_ty(&b)])
    ));
    assert!(!type_eq(
        &Type::tuple(vec![tv_ty(&a), tv_ty(&a)]),
        &Type::tuple(vec![tv_ty(&b), tv_ty(&c)])
    ));
    assert!(type_eq(
        &Type::tensor(&[2, 3], DType::F32),
        &Type::tensor(&[2, 3], DType::F32)
    ));
    assert!(!type_eq(
        &Type::tensor(&[2, 3], DType::F32),
        &Type::tensor(&[3, 2], DType::F32)
    ));
    assert!(!type_eq(
        &Type::tensor(&[2], DType::F32),
        &Type::tensor(&[2], DType::F16)
    ));
    let adt = |name: &str| {
        Type::from_kind(TypeKind::Adt {
            name: sym(name),
            args: vec![f32t()],
        })
    };
    assert!(type_eq(&adt("List"), &adt("List")));
    assert!(!type_eq(&adt("List"), &adt("Tree")));
    let reference = Type::from_kind(TypeKind::Ref(f32t()));
    assert!(type_eq(&reference, &Type::from_kind(TypeKind::Ref(f32t()))));
    assert!(!type_eq(&reference, &f32t()));
}

fn unit_def() -> TypeDef {
    TypeDef {
        name: sym("Unit"),
        params: vec![],
        ctors: vec![CtorDef {
            name: sym("MkUnit"),
            fields: vec![],
            span: Span::DUMMY,
        }],
        external: false,
        span: Span::DUMMY,
    }
}

fn global_fn(name: &str, body_const: i32) -> GlobalFunc {
    let x = var("x");
    let func = Function {
        type_params: vec![],
        params: vec![x.clone()],
        ret_type: None,
        body: add(r(&x), int(body_const)),
        attrs: Attrs::empty(),
    };
    GlobalFunc {
        name: sym(name),
        func,
        span: Span::DUMMY,
    }
}

#[test]
fn modules_compare_by_name_in_any_order() {
    let a = Module {
        functions: vec![global_fn("main", 1), global_fn("f", 2)],
        types: vec![list_adt("A").0, unit_def()],
        kind: ModuleKind::Definitions,
        source: None,
    };
    let b = Module {
        functions: vec![global_fn("f", 2), global_fn("main", 1)],
        types: vec![unit_def(), list_adt("T").0],
        kind: ModuleKind::Definitions,
        source: None,
    };
    assert!(module_eq(&a, &b));
    assert!(module_eq(&b, &a));
    assert_eq!(module_hash(&a), module_hash(&b));

    let mut other_kind = b.clone();
    other_kind.kind = ModuleKind::Expr;
    assert!(!module_eq(&a, &other_kind));
    let mut other_body = b.clone();
    other_body.functions[0] = global_fn("f", 3);
    assert!(!module_eq(&a, &other_body));
    let mut renamed = b.clone();
    renamed.functions[0] = global_fn("g", 2);
    assert!(!module_eq(&a, &renamed));
    let mut fewer = b.clone();
    fewer.types.pop();
    assert!(!module_eq(&a, &fewer));
    let mut reordered_ctors = b;
    reordered_ctors.types[1].ctors.reverse();
    assert!(!module_eq(&a, &reordered_ctors));
}

#[test]
fn hashes_tell_common_differences_apart() {
    let (x, y) = (var("x"), var("y"));
    let exprs = [
        int(1),
        int(2),
        add(int(1), int(2)),
        add(int(2), int(1)),
        tuple(vec![int(1), int(2)]),
        lambda(vec![x.clone()], r(&x)),
        lambda(vec![x.clone(), y.clone()], r(&x)),
        lambda(vec![x.clone(), y.clone()], r(&y)),
    ];
    for (i, a) in exprs.iter().enumerate() {
        for b in &exprs[i + 1..] {
            assert_ne!(structural_hash(a), structural_hash(b), "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn long_chains_compare_and_hash_on_a_small_stack() {
    fn build(n: usize) -> Expr {
        let first = var("x");
        let mut bindings = Vec::with_capacity(n);
        let mut prev = first.clone();
        bindings.push(Binding {
            var: first,
            value: int(0),
            kind: BindingKind::Let,
        });
        for _ in 0..n {
            let v = var("v");
            bindings.push(Binding {
                var: v.clone(),
                value: add(r(&prev), int(1)),
                kind: BindingKind::Graph,
            });
            prev = v;
        }
        mk(ExprKind::Let {
            bindings,
            body: r(&prev),
        })
    }
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let (a, b) = (build(100_000), build(100_000));
            (
                structural_eq(&a, &b),
                structural_hash(&a) == structural_hash(&b),
            )
        })
        .unwrap();
    assert_eq!(handle.join().unwrap(), (true, true));
}

#[test]
fn deep_nesting_compares_and_hashes_on_a_small_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let depth = crate::MAX_NESTING as usize;
            let (a, b) = (
                crate::printer::tests::deep(depth),
                crate::printer::tests::deep(depth),
            );
            (
                structural_eq(&a, &b),
                structural_hash(&a) == structural_hash(&b),
            )
        })
        .unwrap();
    assert_eq!(handle.join().unwrap(), (true, true));
}
