//! Tests of the printer on hand-built IR.

use std::sync::Arc;
use std::time::{Duration, Instant};

use relay_runtime::{DType, NDArray};

use super::{PrintOptions, print_expr, print_module};
use crate::metadata::{self, MetaEntry};
use crate::testing::*;
use crate::{
    AttrDefault, AttrField, AttrKind, AttrValue, Attrs, Binding, BindingKind, Clause, CtorDef,
    CtorRef, Dim, Expr, ExprKind, FuncType, Function, Module, ModuleKind, OpSchema, Pattern,
    PatternKind, Span, Type, TypeDef, TypeKind, TypeVar, Var,
};
use relay_runtime::half::f32_to_f16_bits;

static CONV: OpSchema = OpSchema {
    name: "nn.conv2d",
    inputs: &["data", "weight"],
    attrs_type: "relay.attrs.Conv2DAttrs",
    pattern: crate::OpPattern::OutEWiseFusable,
    relation: None,
    eval: None,
    compute: None,
    scalar: None,
    input_edge: None,
    attrs: &[
        AttrField {
            name: "strides",
            kind: AttrKind::IntArray,
            default: AttrDefault::Ints(&[1, 1]),
            nullable: false,
        },
        AttrField {
            name: "channels",
            kind: AttrKind::Int,
            default: AttrDefault::Null,
            nullable: true,
        },
        AttrField {
            name: "data_layout",
            kind: AttrKind::Str,
            default: AttrDefault::Str("NCHW"),
            nullable: false,
        },
        AttrField {
            name: "epsilon",
            kind: AttrKind::Float,
            default: AttrDefault::Float(1e-5),
            nullable: false,
        },
        AttrField {
            name: "axis",
            kind: AttrKind::Int,
            default: AttrDefault::Required,
            nullable: false,
        },
    ],
};

fn opts() -> PrintOptions {
    PrintOptions::default()
}

/// Prints an expression and drops the version header.
fn show(e: &Expr) -> String {
    let text = print_expr(e, &opts());
    text.strip_prefix("#[version = \"0.0.5\"]\n")
        .unwrap_or_else(|| panic!("no header: {text}"))
        .to_owned()
}

#[test]
fn scalar_constants_print_inline() {
    let cases: Vec<(Expr, &str)> = vec![
        (scalar(DType::BOOL, &[1]), "True"),
        (scalar(DType::BOOL, &[0]), "False"),
        (scalar(DType::I8, &[0xfb]), "-5i8"),
        (scalar(DType::I16, &300i16.to_ne_bytes()), "300i16"),
        (int(5), "5"),
        (int(i32::MIN), "-2147483648"),
        (scalar(DType::I64, &(-7i64).to_ne_bytes()), "-7i64"),
        (
            scalar(DType::F16, &f32_to_f16_bits(1.5).to_ne_bytes()),
            "1.5f16",
        ),
        (scalar(DType::F16, &0x7e00u16.to_ne_bytes()), "nanf16"),
        (float(1.5), "1.5f"),
        (float(0.1), "0.1f"),
        (float(1e-5), "1e-5f"),
        (float(-0.0), "-0f"),
        (float(f32::INFINITY), "inff"),
        (float(f32::NEG_INFINITY), "-inff"),
        (float(f32::NAN), "nanf"),
        (scalar(DType::F64, &1.5f64.to_ne_bytes()), "1.5f64"),
        (scalar(DType::F64, &f64::INFINITY.to_ne_bytes()), "inff64"),
    ];
    for (e, expected) in cases {
        assert_eq!(show(&e), format!("{expected}\n"));
    }
}

#[test]
fn other_constants_go_to_metadata() {
    let tensor =
        Arc::new(NDArray::from_bytes(DType::F32, &[2], &[0, 0, 128, 63, 0, 0, 0, 64]).unwrap());
    let shared = mk(ExprKind::Constant(tensor.clone()));
    let byte = scalar(DType::U8, &[7]);
    let e = mk(ExprKind::Tuple(vec![
        shared.clone(),
        byte,
        mk(ExprKind::Constant(tensor.clone())),
        shared,
    ]));
    let text = show(&e);
    let (program, section) = text.split_once("#[metadata]\n").unwrap();
    assert_eq!(
        program,
        "(meta[relay.Constant][0], meta[relay.Constant][1], meta[relay.Constant][0], \
         meta[relay.Constant][0])\n"
    );
    let table = metadata::decode(section).unwrap();
    assert_eq!(table.len("relay.Constant"), 2);
    assert_eq!(
        table.get("relay.Constant", 0),
        Some(&MetaEntry::Constant(tensor))
    );
    let Some(MetaEntry::Constant(b)) = table.get("relay.Constant", 1) else {
        panic!("{table:?}")
    };
    assert_eq!((b.dtype(), b.as_bytes()), (DType::U8, &[7u8][..]));
    assert!(text.ends_with("}\n"), "{text}");
}

#[test]
fn names_are_made_unique() {
    let x1 = var("x");
    let x2 = var("x");
    let x3 = var("x1");
    let digit = var("1");
    let anon1 = var("");
    let anon2 = var("");
    let dotted = var("conv.weight:0");
    let slashed = var("base/x");
    let body = mk(ExprKind::Tuple(
        [&x1, &x2, &x3, &digit, &anon1, &anon2, &dotted, &slashed]
            .into_iter()
            .map(r)
            .collect(),
    ));
    let e = chain(
        vec![
            (BindingKind::Let, &x1, int(1)),
            (BindingKind::Let, &x2, int(2)),
            (BindingKind::Let, &x3, int(3)),
            (BindingKind::Let, &digit, int(4)),
            (BindingKind::Let, &anon1, int(5)),
            (BindingKind::Let, &anon2, int(6)),
            (BindingKind::Let, &dotted, int(7)),
            (BindingKind::Let, &slashed, int(8)),
        ],
        body,
    );
    assert_eq!(
        show(&e),
        "let %x = 1;\nlet %x1 = 2;\nlet %x11 = 3;\nlet %v1 = 4;\nlet %v = 5;\nlet %v2 = 6;\n\
         let %conv_weight_0 = 7;\nlet %base/x = 8;\n\
         (%x, %x1, %x11, %v1, %v, %v2, %conv_weight_0, %base/x)\n"
    );
}

#[test]
fn graph_bindings_number_per_def_and_continue_into_functions() {
    let x = var("x");
    let a = var("a");
    let b = var("b");
    let p = var("p");
    let c = var("c");
    let inner = mk(ExprKind::Function(func(
        vec![p.clone()],
        chain(vec![(BindingKind::Graph, &c, add(r(&p), r(&a)))], r(&c)),
    )));
    let body = chain(
        vec![
            (BindingKind::Graph, &a, add(r(&x), r(&x))),
            (BindingKind::Graph, &b, inner),
        ],
        Expr::call(r(&b), vec![r(&a)]),
    );
    let y = var("y");
    let d = var("d");
    let other = chain(vec![(BindingKind::Graph, &d, add(r(&y), r(&y)))], r(&d));
    let m = module(
        vec![],
        vec![
            def("main", func(vec![x.clone()], body)),
            def("f", func(vec![y.clone()], other)),
        ],
    );
    assert_eq!(
        print_module(&m, &opts()),
        "#[version = \"0.0.5\"]\n\
         def @f(%y) {\n  %0 = add(%y, %y);\n  %0\n}\n\
         def @main(%x) {\n  %0 = add(%x, %x);\n  %1 = fn (%p) {\n    %2 = add(%p, %0);\n    %2\n  };\n  %1(%0)\n}\n"
    );
}

#[test]
fn binding_chains_as_values_are_parenthesised() {
    let a = var("a");
    let b = var("b");
    let s = var("");
    let inner = chain(vec![(BindingKind::Let, &b, int(1))], r(&b));
    let e = chain(
        vec![
            (BindingKind::Let, &a, inner.clone()),
            (BindingKind::Seq, &s, add(r(&a), inner.clone())),
        ],
        mk(ExprKind::Proj {
            tuple: mk(ExprKind::Tuple(vec![inner])),
            index: 0,
        }),
    );
    assert_eq!(
        show(&e),
        "let %a = (\n  let %b = 1;\n  %b\n);\nadd(%a, (\n  let %b1 = 1;\n  %b1\n));\n((\n  let %b2 = 1;\n  %b2\n),).0\n"
    );
}

#[test]
fn nested_and_empty_chains_print_flat() {
    let a = var("a");
    let b = var("b");
    let nested = chain(
        vec![(BindingKind::Let, &a, int(1))],
        chain(
            vec![],
            chain(vec![(BindingKind::Graph, &b, add(r(&a), r(&a)))], r(&b)),
        ),
    );
    assert_eq!(show(&nested), "let %a = 1;\n%0 = add(%a, %a);\n%0\n");
    let empty = chain(vec![], int(3));
    assert_eq!(
        show(&Expr::call(op(&ADD), vec![empty.clone(), empty])),
        "add(3, 3)\n"
    );
}

#[test]
fn sequencing_and_special_bindings() {
    let r0 = var("r");
    let s = var("");
    let used = var("");
    let annotated = var_t("g", f32t());
    let f = var("f");
    let n = var("n");
    let recursive = mk(ExprKind::Function(func(
        vec![n.clone()],
        Expr::call(r(&f), vec![r(&n)]),
    )));
    let e = chain(
        vec![
            (BindingKind::Let, &r0, mk(ExprKind::RefNew(int(0)))),
            (BindingKind::Seq, &s, mk(ExprKind::RefWrite(r(&r0), int(1)))),
            // A sequencing binding whose variable is used, an annotated graph binding and a
            // recursive graph binding all need `let`.
            (BindingKind::Seq, &used, mk(ExprKind::RefRead(r(&r0)))),
            (BindingKind::Graph, &annotated, float(2.0)),
            (BindingKind::Graph, &f, recursive),
        ],
        mk(ExprKind::Tuple(vec![r(&used), r(&annotated), r(&f)])),
    );
    assert_eq!(
        show(&e),
        "let %r = ref(0);\nref_write(%r, 1);\nlet %v = ref_read(%r);\nlet %g: float32 = 2f;\n\
         let %f = fn (%n) {\n  %f(%n)\n};\n(%v, %g, %f)\n"
    );
}

#[test]
fn free_vars_come_first_in_order_of_occurrence() {
    let x = var_t("x", Type::tensor(&[3], DType::F32));
    let y = var("y");
    let z = var("z");
    let e = chain(
        vec![(BindingKind::Let, &z, add(r(&y), r(&x)))],
        add(r(&z), r(&x)),
    );
    assert_eq!(
        show(&e),
        "free_var %y;\nfree_var %x: Tensor[(3), float32];\nlet %z = add(%y, %x);\nadd(%z, %x)\n"
    );
}

#[test]
fn expression_modules_print_as_programs() {
    let x = var_t("x", f32t());
    let y = var("x");
    let body = chain(vec![(BindingKind::Graph, &y, add(r(&x), r(&x)))], r(&y));
    let mut m = module(vec![], vec![def("main", func(vec![x.clone()], body))]);
    m.kind = ModuleKind::Expr;
    assert_eq!(
        print_module(&m, &opts()),
        "#[version = \"0.0.5\"]\nfree_var %x: float32;\n%0 = add(%x, %x);\n%0\n"
    );
    // With anything an expression program cannot hold, the module prints as definitions.
    m.functions.push(def("g", func(vec![], int(1))));
    assert_eq!(
        print_module(&m, &opts()),
        "#[version = \"0.0.5\"]\ndef @g() {\n  1\n}\ndef @main(%x: float32) {\n  %0 = add(%x, %x);\n  %0\n}\n"
    );
}

#[test]
fn every_expression_form() {
    let (list, cons, nil) = list_adt("A");
    let ctor = |c: CtorRef| mk(ExprKind::Ctor(c));
    let x = var_t("x", f32t());
    let l = var("l");
    let h = var("h");
    let t = var("t");
    let c = var_t("c", Type::scalar(DType::BOOL));
    let k = var("k");
    let nil_call = Expr::call(ctor(nil), vec![]);
    let cons_call = Expr::call(ctor(cons), vec![r(&x), nil_call.clone()]);
    let matched = mk(ExprKind::Match {
        scrutinee: r(&l),
        clauses: vec![
            Clause {
                pattern: Pattern {
                    kind: PatternKind::Ctor(
                        cons,
                        vec![
                            Pattern {
                                kind: PatternKind::Var(h.clone()),
                                span: Span::DUMMY,
                            },
                            Pattern {
                                kind: PatternKind::Wildcard,
                                span: Span::DUMMY,
                            },
                        ],
                    ),
                    span: Span::DUMMY,
                },
                body: r(&h),
            },
            Clause {
                pattern: Pattern {
                    kind: PatternKind::Ctor(nil, vec![]),
                    span: Span::DUMMY,
                },
                body: float(0.0),
            },
        ],
        complete: true,
    });
    let partial = mk(ExprKind::Match {
        scrutinee: mk(ExprKind::Tuple(vec![r(&x), r(&x)])),
        clauses: vec![Clause {
            pattern: Pattern {
                kind: PatternKind::Tuple(vec![
                    Pattern {
                        kind: PatternKind::Var(t.clone()),
                        span: Span::DUMMY,
                    },
                    Pattern {
                        kind: PatternKind::Tuple(vec![]),
                        span: Span::DUMMY,
                    },
                ]),
                span: Span::DUMMY,
            },
            body: r(&t),
        }],
        complete: false,
    });
    let attrs = Attrs::new(vec![
        (
            sym("strides"),
            AttrValue::Array(vec![AttrValue::Int(2), AttrValue::Int(2)]),
        ),
        (sym("channels"), AttrValue::Null),
        (sym("data_layout"), AttrValue::Str("NH\"W\\C\n\t".into())),
        (sym("epsilon"), AttrValue::Float(0.5)),
        (sym("axis"), AttrValue::Int(-1)),
    ]);
    let conv = mk(ExprKind::Call {
        callee: op(&CONV),
        args: vec![r(&x), r(&x)],
        attrs,
    });
    let defaults = Attrs::new(vec![
        (
            sym("strides"),
            AttrValue::Array(vec![AttrValue::Int(1), AttrValue::Int(1)]),
        ),
        (sym("channels"), AttrValue::Null),
        (sym("data_layout"), AttrValue::Str("NCHW".into())),
        (sym("epsilon"), AttrValue::Float(1e-5)),
        (sym("axis"), AttrValue::Int(1)),
    ]);
    let conv_defaults = mk(ExprKind::Call {
        callee: op(&CONV),
        args: vec![r(&x), r(&x)],
        attrs: defaults,
    });
    let other_attrs = Attrs::new(vec![
        (sym("name"), AttrValue::Str("n".into())),
        (sym("flag"), AttrValue::Bool(true)),
        (sym("rate"), AttrValue::Float(f64::NEG_INFINITY)),
        (
            sym("nested"),
            AttrValue::Array(vec![
                AttrValue::Array(vec![AttrValue::Int(0)]),
                AttrValue::Array(vec![]),
            ]),
        ),
    ]);
    let global_call = mk(ExprKind::Call {
        callee: global("helper"),
        args: vec![r(&x)],
        attrs: other_attrs,
    });
    let lambda = mk(ExprKind::Function(Function {
        type_params: vec![],
        params: vec![k.clone()],
        ret_type: Some(f32t()),
        body: r(&k),
        attrs: Attrs::new(vec![(sym("Primitive"), AttrValue::Int(1))]),
    }));
    let applied = Expr::call(lambda.clone(), vec![r(&x)]);
    let cond = mk(ExprKind::If {
        cond: r(&c),
        then_branch: r(&x),
        else_branch: float(1.0),
    });
    let body = mk(ExprKind::Tuple(vec![
        cons_call,
        nil_call,
        ctor(cons),
        op(&ADD),
        matched,
        partial,
        conv,
        conv_defaults,
        global_call,
        applied,
        mk(ExprKind::Proj {
            tuple: cond.clone(),
            index: 1,
        }),
        cond,
        mk(ExprKind::Proj {
            tuple: mk(ExprKind::Proj {
                tuple: r(&l),
                index: 0,
            }),
            index: 1,
        }),
        mk(ExprKind::Proj {
            tuple: Expr::call(global("pair"), vec![]),
            index: 0,
        }),
        mk(ExprKind::Proj {
            tuple: int(1),
            index: 0,
        }),
        mk(ExprKind::Tuple(vec![])),
        mk(ExprKind::Tuple(vec![int(1)])),
    ]));
    let m = module(
        vec![list],
        vec![def(
            "main",
            func(vec![x.clone(), l.clone(), c.clone()], body),
        )],
    );
    let expected = r#"#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}
def @main(%x: float32, %l, %c: bool) {
  (Cons(%x, Nil), Nil, Cons, add, match (%l) {
    Cons(%h, _) => {
      %h
    },
    Nil => {
      0f
    },
  }, match? ((%x, %x)) {
    (%t, ()) => {
      %t
    },
  }, nn.conv2d(%x, %x, strides=[2, 2], data_layout="NH\"W\\C\n\t", epsilon=0.5f, axis=-1), nn.conv2d(%x, %x, axis=1), @helper(%x, name="n", flag=True, rate=-inff, nested=[[0], []]), (fn (%k, Primitive=1) -> float32 {
    %k
  })(%x), (if (%c) {
    %x
  } else {
    1f
  }).1, if (%c) {
    %x
  } else {
    1f
  }, %l.0.1, @pair().0, (1).0, (), (1,))
}
"#;
    assert_eq!(print_module(&m, &opts()), expected);
}

#[test]
fn types_and_type_variables() {
    let a = TypeVar::new(sym("A"), Span::DUMMY);
    let a2 = TypeVar::new(sym("A"), Span::DUMMY);
    let bad = TypeVar::new(sym("int"), Span::DUMMY);
    let b = TypeVar::new(sym("B"), Span::DUMMY);
    let fn_ty = Type::from_kind(TypeKind::Func(FuncType {
        type_params: vec![b.clone()],
        params: vec![tv_ty(&b)],
        ret: tv_ty(&b),
    }));
    let types = vec![
        Type::tensor(&[2, 3], DType::F32),
        Type::tensor(&[5], DType::F32),
        Type::from_kind(TypeKind::Tensor {
            shape: vec![Dim::Any, Dim::Known(3)],
            dtype: DType::I64,
        }),
        Type::scalar(DType::parse("int8x4").unwrap()),
        Type::scalar(DType::parse("bfloat16").unwrap()),
        Type::tuple(vec![]),
        Type::tuple(vec![f32t()]),
        Type::tuple(vec![f32t(), tv_ty(&a2)]),
        Type::from_kind(TypeKind::Func(FuncType {
            type_params: vec![],
            params: vec![tv_ty(&a), f32t()],
            ret: Type::tuple(vec![]),
        })),
        fn_ty,
        Type::from_kind(TypeKind::Adt {
            name: sym("nat"),
            args: vec![],
        }),
        Type::from_kind(TypeKind::Ref(tv_ty(&bad))),
        Type::from_kind(TypeKind::Incomplete),
    ];
    let params: Vec<Var> = types
        .into_iter()
        .enumerate()
        .map(|(i, t)| var_t(&format!("p{i}"), t))
        .collect();
    let f = Function {
        type_params: vec![a.clone(), a2.clone(), bad.clone()],
        params: params.clone(),
        ret_type: Some(tv_ty(&a)),
        body: r(&params[0]),
        attrs: Attrs::empty(),
    };
    let m = module(vec![], vec![def("f", f)]);
    let expected = "#[version = \"0.0.5\"]\n\
        def @f[A, A1, Tint](%p0: Tensor[(2, 3), float32], %p1: Tensor[(5), float32], \
        %p2: Tensor[(?, 3), int64], %p3: int8x4, %p4: Tensor[(), bfloat16], %p5: (), %p6: (float32,), \
        %p7: (float32, A1), %p8: fn (A, float32) -> (), %p9: fn [B](B) -> B, %p10: nat, \
        %p11: ref(Tint), %p12: _) -> A {\n  %p0\n}\n";
    assert_eq!(print_module(&m, &opts()), expected);
}

#[test]
fn type_definitions() {
    let (list, _, _) = list_adt("A");
    let s = TypeVar::new(sym("S"), Span::DUMMY);
    let storage = TypeDef {
        name: sym("Storage"),
        params: vec![s],
        ctors: vec![],
        external: true,
        span: Span::DUMMY,
    };
    let void = TypeDef {
        name: sym("Void"),
        params: vec![],
        ctors: vec![],
        external: false,
        span: Span::DUMMY,
    };
    // A type variable may not print as the name of a type in the module.
    let clash = TypeVar::new(sym("List"), Span::DUMMY);
    let boxed = TypeDef {
        name: sym("Box"),
        params: vec![clash.clone()],
        ctors: vec![CtorDef {
            name: sym("MkBox"),
            fields: vec![
                tv_ty(&clash),
                Type::from_kind(TypeKind::Adt {
                    name: sym("List"),
                    args: vec![tv_ty(&clash)],
                }),
            ],
            span: Span::DUMMY,
        }],
        external: false,
        span: Span::DUMMY,
    };
    let m = module(vec![void, list, storage, boxed], vec![]);
    assert_eq!(
        print_module(&m, &opts()),
        "#[version = \"0.0.5\"]\n\
         type Box[List1] {\n  MkBox(List1, List[List1]),\n}\n\
         type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}\n\
         extern type Storage[S]\n\
         type Void {\n}\n"
    );
}

#[test]
fn patterns() {
    let (list, cons, nil) = list_adt("A");
    let pat = |kind| Pattern {
        kind,
        span: Span::DUMMY,
    };
    let x = var("x");
    let y = var_t("y", f32t());
    let l = var("l");
    let clauses = vec![
        Clause {
            pattern: pat(PatternKind::Ctor(
                cons,
                vec![
                    pat(PatternKind::Tuple(vec![pat(PatternKind::Var(x.clone()))])),
                    pat(PatternKind::Ctor(nil, vec![])),
                ],
            )),
            body: r(&x),
        },
        Clause {
            pattern: pat(PatternKind::Var(y.clone())),
            body: r(&y),
        },
    ];
    let m = mk(ExprKind::Match {
        scrutinee: r(&l),
        clauses,
        complete: true,
    });
    let value = var("v");
    let body = chain(vec![(BindingKind::Let, &value, m)], r(&value));
    let module = module(vec![list], vec![def("f", func(vec![l.clone()], body))]);
    let text = print_module(&module, &opts());
    assert!(
        text.ends_with(
            "def @f(%l) {\n  let %v = (match (%l) {\n    Cons((%x,), Nil) => {\n      %x\n    },\n    \
             %y: float32 => {\n      %y\n    },\n  });\n  %v\n}\n"
        ),
        "{text}"
    );
}

#[test]
fn nullary_constructors_print_bare_only_when_known() {
    let (_, _, nil) = list_adt("A");
    let call = Expr::call(mk(ExprKind::Ctor(nil)), vec![]);
    // Without a module the field count is unknown, so the call stays explicit.
    assert_eq!(show(&call), "Nil()\n");
}

#[test]
fn printing_is_deterministic() {
    let x = var("x");
    let e = chain(
        vec![(BindingKind::Graph, &x, int(1))],
        add(r(&x), float(0.25)),
    );
    assert_eq!(show(&e), show(&e));
    assert_eq!(show(&e), "%0 = 1;\nadd(%0, 0.25f)\n");
}

/// Builds `%0 = add(%x, %x); %1 = add(%0, %0); ...` with `n` bindings.
fn long_chain(n: usize) -> Module {
    let x = var_t("x", f32t());
    let mut bindings = Vec::with_capacity(n);
    let mut prev = x.clone();
    for i in 0..n {
        let v = var("");
        let kind = if i % 2 == 0 {
            BindingKind::Graph
        } else {
            BindingKind::Let
        };
        bindings.push(Binding {
            var: v.clone(),
            value: add(r(&prev), r(&prev)),
            kind,
        });
        prev = v;
    }
    let body = mk(ExprKind::Let {
        bindings,
        body: r(&prev),
    });
    module(vec![], vec![def("main", func(vec![x], body))])
}

#[test]
fn long_chains_print_on_a_small_stack() {
    const N: usize = 100_000;
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let m = long_chain(N);
            let start = Instant::now();
            let text = print_module(&m, &opts());
            let elapsed = start.elapsed();
            drop(m);
            (text, elapsed)
        })
        .unwrap();
    let (text, elapsed) = handle.join().unwrap();
    assert_eq!(text.lines().count(), N + 4);
    assert!(text.contains("\n  %0 = add(%x, %x);\n  let %v = add(%0, %0);\n  %1 = add(%v, %v);\n"));
    assert!(
        elapsed < Duration::from_secs(5),
        "printing took {elapsed:?}"
    );
}

/// An expression nested `depth` levels deep, cycling through calls, tuples, chains used as
/// values, functions and conditionals.
pub(crate) fn deep(depth: usize) -> Expr {
    let mut e = int(0);
    for i in 0..depth {
        e = match i % 5 {
            0 => add(e, int(1)),
            1 => mk(ExprKind::Tuple(vec![e])),
            2 => {
                let v = var("v");
                chain(
                    vec![(BindingKind::Let, &v, e)],
                    mk(ExprKind::Proj {
                        tuple: r(&v),
                        index: 0,
                    }),
                )
            }
            3 => mk(ExprKind::Function(func(vec![var("p")], e))),
            _ => mk(ExprKind::If {
                cond: scalar(DType::BOOL, &[1]),
                then_branch: e,
                else_branch: int(2),
            }),
        };
    }
    e
}

#[test]
fn deep_nesting_prints_on_a_small_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let e = deep(crate::MAX_NESTING as usize);
            let text = show(&e);
            (text.len(), text.lines().count())
        })
        .unwrap();
    let (len, lines) = handle.join().unwrap();
    assert!(len > 1000 && lines > 400, "{len} bytes, {lines} lines");
}
