//! Small helpers the passes share (the generic walks live in `relay_ir::visit`).

use relay_ir::{AttrValue, Attrs, Dim, Expr, Function, Span, Symbol, Type, TypeKind, Var};

/// A fresh variable named `name` with annotation `ty` (passes annotate the variables they
/// create with the checked type, so the output type-checks without the input's inference).
pub fn fresh_var(name: &str, ty: Option<Type>) -> Var {
    let var = Var::new(Symbol::intern(name), ty.clone(), Span::DUMMY);
    if let Some(ty) = ty {
        var.set_checked_type(ty);
    }
    var
}

/// The index of the parameter a primitive function only reshapes (TVM's `reshape_only`
/// functions; [`relay_ops::views::reshape_chain`]), or `None`. `manifest_alloc` makes a call of
/// such a function a `vm.reshape_tensor` view of that argument.
pub fn reshape_only(f: &Function) -> Option<usize> {
    relay_ops::views::reshape_chain(f).map(|chain| chain.data)
}

/// The `newshape` of a `vm.reshape_tensor` giving a view of type `ty`: its dimensions, a `?`
/// written `-1` (inferred from the element count at run time, numpy's rule). `None` when `ty`
/// is not a tensor type, has two or more `?`, or has a `?` beside a zero dimension (the
/// element count could not tell it).
pub fn view_shape(ty: &Type) -> Option<Vec<i64>> {
    let (dims, _) = tensor_dims(ty)?;
    let unknown = dims.iter().filter(|d| matches!(d, Dim::Any)).count();
    let zero = dims.iter().any(|d| matches!(d, Dim::Known(0)));
    if unknown > 1 || (unknown == 1 && zero) {
        return None;
    }
    Some(
        dims.iter()
            .map(|d| match d {
                Dim::Known(n) => *n,
                Dim::Any => -1,
            })
            .collect(),
    )
}

/// A call of `name` with the schema's attributes, `set` among them (`None` if no operator has
/// that name).
pub fn op_call(name: &str, args: Vec<Expr>, set: &[(&str, AttrValue)], span: Span) -> Option<Expr> {
    let attrs = relay_ops::schema_attrs(relay_ops::lookup(name)?, set);
    relay_ops::call(name, args, attrs, span)
}

/// `reshape(x, newshape)`.
pub fn reshape(x: &Expr, newshape: &[i64], span: Span) -> Option<Expr> {
    op_call(
        "reshape",
        vec![x.clone()],
        &[("newshape", ints(newshape))],
        span,
    )
}

/// An integer-list attribute.
pub fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect())
}

/// A string attribute.
pub fn str_attr<'a>(attrs: &'a Attrs, name: &str) -> Option<&'a str> {
    attrs.get(name).and_then(|v| v.as_str())
}

/// The static shape of `e`'s tensor type (any dtype).
pub fn shape(e: &Expr) -> Option<Vec<i64>> {
    match e.checked_type()?.kind() {
        TypeKind::Tensor { shape, .. } => relay_ops::support::known(shape),
        _ => None,
    }
}

/// The dimensions and dtype of a tensor type.
fn tensor_dims(ty: &Type) -> Option<(&[Dim], relay_ir::DType)> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => Some((shape.as_slice(), *dtype)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay_ir::ExprKind;

    /// The primitive function `text` (a whole module whose `@main` returns it) and whether
    /// it is reshape-only.
    fn reshapes(function: &str) -> Option<usize> {
        let text = format!("#[version = \"0.0.5\"]\ndef @main() {{\n{function}\n}}\n");
        let m = crate::testing::parse_checked(&text);
        let main = m.function(Symbol::intern("main")).expect("@main");
        let ExprKind::Function(f) = main.func.body.kind() else {
            panic!("@main returns a function literal");
        };
        reshape_only(f)
    }

    #[test]
    fn reshape_chains_are_reshape_only() {
        assert_eq!(
            reshapes(
                "fn (%p0: Tensor[(4, 40, 40), float32], Primitive=1) { \
                 reshape(%p0, newshape=[1, 4, 40, 40]) }"
            ),
            Some(0)
        );
        assert_eq!(
            reshapes(
                "fn (%p0: Tensor[(2, 3), float32], %p1: Tensor[(1, 2, 3), int8], Primitive=1) { \
                 nn.batch_flatten(expand_dims(squeeze(reshape_like(%p0, %p1), axis=[0]), axis=0)) }"
            ),
            Some(0)
        );
        assert_eq!(
            reshapes(
                "fn (%p0: Tensor[(6), float32], %p1: Tensor[(1, 6), float32], Primitive=1) { \
                 let %a = contrib_reverse_reshape(%p1, newshape=[3, 2]); \
                 let %b = reshape(%a, newshape=[-1]); %b }"
            ),
            Some(1)
        );
        assert_eq!(
            reshapes(
                "fn (%p0: Tensor[(?, 4), float32], Primitive=1) { reshape(%p0, newshape=[-1]) }"
            ),
            Some(0)
        );
    }

    #[test]
    fn anything_else_is_not() {
        for f in [
            // A computation.
            "fn (%p0: Tensor[(2, 3), float32], Primitive=1) { reshape(exp(%p0), newshape=[6]) }",
            // No reshape at all.
            "fn (%p0: Tensor[(2, 3), float32], Primitive=1) { %p0 }",
            // A transpose moves elements.
            "fn (%p0: Tensor[(2, 3), float32], Primitive=1) { transpose(%p0, axes=None) }",
            // A shape source that is computed.
            "fn (%p0: Tensor[(2, 3), float32], %p1: Tensor[(3, 2), float32], Primitive=1) { \
             reshape_like(%p0, exp(%p1)) }",
            // A binding off the chain.
            "fn (%p0: Tensor[(2, 3), float32], Primitive=1) { \
             let %x = exp(%p0); reshape(%p0, newshape=[6]) }",
            // A tuple result.
            "fn (%p0: Tensor[(2, 3), float32], Primitive=1) { (reshape(%p0, newshape=[6]),) }",
        ] {
            assert_eq!(reshapes(f), None, "{f}");
        }
        let not_primitive = "fn (%p0: Tensor[(2, 3), float32]) { reshape(%p0, newshape=[6]) }";
        assert_eq!(reshapes(not_primitive), None);
    }

    #[test]
    fn view_shapes() {
        let t = |dims: &[i64]| {
            Type::from_kind(TypeKind::Tensor {
                shape: dims
                    .iter()
                    .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
                    .collect(),
                dtype: relay_ir::DType::F32,
            })
        };
        assert_eq!(view_shape(&t(&[1, 4, 40, 40])), Some(vec![1, 4, 40, 40]));
        assert_eq!(view_shape(&t(&[])), Some(vec![]));
        assert_eq!(view_shape(&t(&[-1, 4])), Some(vec![-1, 4]));
        assert_eq!(view_shape(&t(&[-1, -1])), None);
        assert_eq!(view_shape(&t(&[-1, 0])), None);
        assert_eq!(view_shape(&t(&[0, 3])), Some(vec![0, 3]));
        assert_eq!(view_shape(&Type::tuple(vec![t(&[2])])), None);
    }
}
