//! Reshape-only functions (TVM's `reshape_only`): a primitive function whose body only gives
//! one parameter's elements, in row-major order, a new shape — on a compact tensor a view of
//! the same bytes. `manifest_alloc` makes a call of one a `vm.reshape_tensor` when the result's
//! shape is known before the call; with more `?` dimensions, the kernel compiler makes it a
//! view whose shape the chain's relations compute from the arguments' shapes at run time
//! ([`ReshapeChain::output_shape`], its shape function).

use std::collections::HashMap;

use relay_ir::visit::is_primitive;
use relay_ir::{
    Attrs, DType, Dim, Expr, ExprKind, Function, OpError, OpRef, Type, TypeKind, Var, VarId,
};

/// The operators that give their first argument's elements, in row-major order, a new shape.
/// `reshape_like` reads only the shape of its second argument.
const RESHAPE_LIKE: &[&str] = &[
    "reshape",
    "contrib_reverse_reshape",
    "reshape_like",
    "squeeze",
    "expand_dims",
    "nn.batch_flatten",
];

/// The reshapes a reshape-only function applies to its parameter `data`, in order.
#[derive(Clone, Debug)]
pub struct ReshapeChain {
    /// The parameter reshaped.
    pub data: usize,
    /// Each reshape, innermost (applied first) first.
    pub links: Vec<Link>,
    /// The element type.
    pub dtype: DType,
}

/// One reshape of a [`ReshapeChain`].
#[derive(Clone, Debug)]
pub struct Link {
    /// The operator.
    pub op: OpRef,
    /// Its attributes.
    pub attrs: Attrs,
    /// `reshape_like`'s shape source: a parameter.
    pub like: Option<usize>,
}

/// The chain of primitive function `f` if it only reshapes a parameter: the body is a chain of
/// one or more reshape-like calls (`reshape`, `contrib_reverse_reshape`, `reshape_like`,
/// `squeeze`, `expand_dims`, `nn.batch_flatten`), written nested or as a let-chain binding
/// each link once, ending at a tensor parameter; `reshape_like`'s shape source is a
/// parameter. The parameter and the result are tensors of the same dtype, with the same
/// element count when both are static.
pub fn reshape_chain(f: &Function) -> Option<ReshapeChain> {
    if !is_primitive(f) {
        return None;
    }
    let param = |v: &Var| f.params.iter().position(|p| p == v);
    let (bindings, mut e) = match f.body.kind() {
        ExprKind::Let { bindings, body } => (bindings.as_slice(), body),
        _ => (&[][..], &f.body),
    };
    let bound: HashMap<VarId, &Expr> = bindings.iter().map(|b| (b.var.id(), &b.value)).collect();
    let mut links = Vec::new();
    let mut followed = 0usize;
    let data = loop {
        match e.kind() {
            ExprKind::Var(v) => match param(v) {
                Some(i) => break i,
                None => {
                    e = bound.get(&v.id())?;
                    followed += 1;
                }
            },
            ExprKind::Call { .. } => {
                let (op, args, attrs) = e.op_call()?;
                if !RESHAPE_LIKE.contains(&op.name) {
                    return None;
                }
                let (next, like) = match (op.name, args) {
                    ("reshape_like", [data, like]) => match like.kind() {
                        ExprKind::Var(v) => (data, Some(param(v)?)),
                        _ => return None,
                    },
                    ("reshape_like", _) => return None,
                    (_, [data]) => (data, None),
                    _ => return None,
                };
                links.push(Link {
                    op,
                    attrs: attrs.clone(),
                    like,
                });
                e = next;
            }
            _ => return None,
        }
    };
    // Every binding is a link of the chain (no computation on the side), and there is at
    // least one reshape.
    if links.is_empty() || followed != bindings.len() {
        return None;
    }
    links.reverse();
    let p = &f.params[data];
    let (input, dtype) = tensor_dims(p.checked_type().or(p.ty())?)?;
    let (output, out_dtype) = tensor_dims(f.body.checked_type().or(f.ret_type.as_ref())?)?;
    if dtype != out_dtype {
        return None;
    }
    match (static_count(input), static_count(output)) {
        (Some(a), Some(b)) if a != b => None,
        _ => Some(ReshapeChain { data, links, dtype }),
    }
}

impl ReshapeChain {
    /// The result's shape for arguments of shapes `inputs` (the function's parameters in
    /// order): each link's type relation applied to the concrete types (TVM's shape function).
    pub fn output_shape(&self, inputs: &[&[i64]]) -> Result<Vec<i64>, OpError> {
        let ty = |shape: &[i64]| Type::tensor(shape, self.dtype);
        let arg = |i: usize| {
            inputs
                .get(i)
                .ok_or_else(|| OpError::arity(i + 1, inputs.len()))
        };
        let mut current = ty(arg(self.data)?);
        for link in &self.links {
            let relation = link.op.relation.ok_or_else(|| {
                OpError::unsupported(format!("`{}` has no relation", link.op.name))
            })?;
            let mut types = vec![current];
            if let Some(like) = link.like {
                types.push(ty(arg(like)?));
            }
            current = relation(&types, &link.attrs)?;
        }
        match tensor_dims(&current) {
            Some((dims, _)) => dims
                .iter()
                .map(|d| match d {
                    Dim::Known(n) => Ok(*n),
                    Dim::Any => Err(OpError::shape(format!(
                        "the reshape to `{current}` is not static"
                    ))),
                })
                .collect(),
            None => Err(OpError::shape(format!("a reshape to `{current}`"))),
        }
    }
}

/// The dimensions and dtype of a tensor type.
fn tensor_dims(ty: &Type) -> Option<(&[Dim], DType)> {
    match ty.kind() {
        TypeKind::Tensor { shape, dtype } => Some((shape.as_slice(), *dtype)),
        _ => None,
    }
}

/// The element count of a static shape (`None` with a `?` or on overflow).
fn static_count(dims: &[Dim]) -> Option<i64> {
    dims.iter().try_fold(1i64, |n, d| match d {
        Dim::Known(k) => n.checked_mul(*k),
        Dim::Any => None,
    })
}
