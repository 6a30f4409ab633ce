//! IR-building helpers shared by this crate's unit tests (printer, structural equality).

use relay_runtime::{DType, NDArray};

use crate::{
    Attrs, Binding, BindingKind, CtorDef, CtorRef, Expr, ExprKind, Function, GlobalFunc, Module,
    ModuleKind, OpSchema, Span, Symbol, Type, TypeDef, TypeKind, TypeVar, Var,
};

/// `add`, without the operator registry (which depends on this crate).
pub static ADD: OpSchema = OpSchema {
    name: "add",
    inputs: &["lhs", "rhs"],
    attrs_type: "",
    attrs: &[],
    pattern: crate::OpPattern::Broadcast,
    relation: None,
    eval: None,
    compute: None,
    scalar: None,
    input_edge: None,
};

/// `subtract`.
pub static SUB: OpSchema = OpSchema {
    name: "subtract",
    inputs: &["lhs", "rhs"],
    attrs_type: "",
    attrs: &[],
    pattern: crate::OpPattern::Broadcast,
    relation: None,
    eval: None,
    compute: None,
    scalar: None,
    input_edge: None,
};

pub fn sym(s: &str) -> Symbol {
    Symbol::intern(s)
}

pub fn var(name: &str) -> Var {
    Var::new(sym(name), None, Span::DUMMY)
}

pub fn var_t(name: &str, ty: Type) -> Var {
    Var::new(sym(name), Some(ty), Span::DUMMY)
}

pub fn r(v: &Var) -> Expr {
    Expr::var(v)
}

pub fn mk(kind: ExprKind) -> Expr {
    Expr::new(kind, Span::DUMMY)
}

pub fn scalar(dtype: DType, bytes: &[u8]) -> Expr {
    Expr::constant(NDArray::from_bytes(dtype, &[], bytes).expect("test scalar"))
}

pub fn int(x: i32) -> Expr {
    scalar(DType::I32, &x.to_ne_bytes())
}

pub fn float(x: f32) -> Expr {
    scalar(DType::F32, &x.to_ne_bytes())
}

pub fn op(schema: &'static OpSchema) -> Expr {
    mk(ExprKind::Op(schema))
}

pub fn add(a: Expr, b: Expr) -> Expr {
    Expr::call(op(&ADD), vec![a, b])
}

pub fn global(name: &str) -> Expr {
    mk(ExprKind::Global(sym(name)))
}

pub fn tuple(fields: Vec<Expr>) -> Expr {
    mk(ExprKind::Tuple(fields))
}

/// A flat binding chain.
pub fn chain(bindings: Vec<(BindingKind, &Var, Expr)>, body: Expr) -> Expr {
    let bindings = bindings
        .into_iter()
        .map(|(kind, var, value)| Binding {
            var: var.clone(),
            value,
            kind,
        })
        .collect();
    mk(ExprKind::Let { bindings, body })
}

pub fn func(params: Vec<Var>, body: Expr) -> Function {
    Function {
        type_params: vec![],
        params,
        ret_type: None,
        body,
        attrs: Attrs::empty(),
    }
}

pub fn lambda(params: Vec<Var>, body: Expr) -> Expr {
    mk(ExprKind::Function(func(params, body)))
}

pub fn def(name: &str, f: Function) -> GlobalFunc {
    GlobalFunc {
        name: sym(name),
        func: f,
        span: Span::DUMMY,
    }
}

pub fn module(types: Vec<TypeDef>, functions: Vec<GlobalFunc>) -> Module {
    Module {
        functions,
        types,
        kind: ModuleKind::Definitions,
        source: None,
    }
}

pub fn f32t() -> Type {
    Type::scalar(DType::F32)
}

pub fn tv(name: &str) -> TypeVar {
    TypeVar::new(sym(name), Span::DUMMY)
}

pub fn tv_ty(v: &TypeVar) -> Type {
    Type::from_kind(TypeKind::Var(v.clone()))
}

/// `type List[<param>] { Cons(<param>, List[<param>]), Nil }` and its two constructors.
pub fn list_adt(param: &str) -> (TypeDef, CtorRef, CtorRef) {
    let a = tv(param);
    let list_a = Type::from_kind(TypeKind::Adt {
        name: sym("List"),
        args: vec![tv_ty(&a)],
    });
    let ctor = |name: &str, fields| CtorDef {
        name: sym(name),
        fields,
        span: Span::DUMMY,
    };
    let def = TypeDef {
        name: sym("List"),
        params: vec![a.clone()],
        ctors: vec![ctor("Cons", vec![tv_ty(&a), list_a]), ctor("Nil", vec![])],
        external: false,
        span: Span::DUMMY,
    };
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
    (def, cons, nil)
}
