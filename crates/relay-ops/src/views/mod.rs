//! Reshape-only functions (TVM's `reshape_only`): a primitive function whose body only gives
//! one parameter's elements, in row-major order, a new shape — on a compact tensor a view of
//! the same bytes. `manifest_alloc` makes a call of one a `vm.reshape_tensor` when the result's
//! shape is known before the call; with more `?` dimensions, the kernel compiler makes it a
//! view whose shape the chain's relations compute from the arguments' shapes at run time
//! ([`ReshapeChain::output_shape`], its shape function).

use std::collections::HashMap;

mod layout;

pub use layout::{LayoutChain, View, layout_chain};
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
    /// `take`'s index.
    pub index: Option<TakeIndex>,
}

/// The scalar index of a `take` in a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeIndex {
    /// A constant.
    Constant(i128),
    /// A parameter of the function (an integer scalar), read at run time.
    Param(usize),
}

/// The chain of primitive function `f` if it only reshapes a parameter: the body is a chain of
/// one or more reshape-like calls (`reshape`, `contrib_reverse_reshape`, `reshape_like`,
/// `squeeze`, `expand_dims`, `nn.batch_flatten`), written nested or as a let-chain binding
/// each link once, ending at a tensor parameter; `reshape_like`'s shape source is a
/// parameter. The parameter and the result are tensors of the same dtype, with the same
/// element count when both are static.
pub fn reshape_chain(f: &Function) -> Option<ReshapeChain> {
    let (data, links) = chain(f, &|name| RESHAPE_LIKE.contains(&name))?;
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

/// The links of primitive function `f` when its body is a chain of one or more calls of
/// operators `accept` takes, each on the previous one's result, ending at a tensor
/// parameter (the first of the pair), written nested or as a let-chain binding each link
/// once; `reshape_like`'s shape source is a parameter and `take`'s indices a constant or a
/// parameter. The links are in the order they apply.
fn chain(f: &Function, accept: &dyn Fn(&str) -> bool) -> Option<(usize, Vec<Link>)> {
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
                if !accept(op.name) {
                    return None;
                }
                let mut link = Link {
                    op,
                    attrs: attrs.clone(),
                    like: None,
                    index: None,
                };
                let next = match (op.name, args) {
                    ("reshape_like", [data, like]) => match like.kind() {
                        ExprKind::Var(v) => {
                            link.like = Some(param(v)?);
                            data
                        }
                        _ => return None,
                    },
                    ("take", [data, index]) => {
                        link.index = Some(match index.kind() {
                            ExprKind::Var(v) => TakeIndex::Param(param(v)?),
                            _ => TakeIndex::Constant(scalar_index(index)?),
                        });
                        data
                    }
                    ("reshape_like" | "take", _) => return None,
                    (_, [data]) => data,
                    _ => return None,
                };
                links.push(link);
                e = next;
            }
            _ => return None,
        }
    };
    // Every binding is a link of the chain (no computation on the side), and there is at
    // least one link.
    if links.is_empty() || followed != bindings.len() {
        return None;
    }
    links.reverse();
    Some((data, links))
}

/// The value of a constant integer scalar.
fn scalar_index(e: &Expr) -> Option<i128> {
    match e.kind() {
        ExprKind::Constant(c) if c.dtype().is_int() && c.shape().is_empty() => {
            c.to_i128_vec().first().copied()
        }
        _ => None,
    }
}

impl ReshapeChain {
    /// The result's shape for arguments of shapes `inputs` (the function's parameters in
    /// order): each link's type relation applied to the concrete types (TVM's shape function).
    pub fn output_shape(&self, inputs: &[&[i64]]) -> Result<Vec<i64>, OpError> {
        chain_shape(self.data, &self.links, inputs, self.dtype)
    }
}

/// The shape after `links` of argument `data`, for arguments of shapes `inputs`.
fn chain_shape(
    data: usize,
    links: &[Link],
    inputs: &[&[i64]],
    dtype: DType,
) -> Result<Vec<i64>, OpError> {
    let mut shape = input_shape(inputs, data)?.to_vec();
    for link in links {
        shape = link.output_shape(&shape, inputs, dtype)?;
    }
    Ok(shape)
}

impl Link {
    /// The shape of this link's result for data of shape `data` (its type relation applied
    /// to the concrete types; `inputs` are the function's arguments' shapes, for
    /// `reshape_like`'s shape source).
    pub fn output_shape(
        &self,
        data: &[i64],
        inputs: &[&[i64]],
        dtype: DType,
    ) -> Result<Vec<i64>, OpError> {
        let like = self.like.map(|i| input_shape(inputs, i)).transpose()?;
        if self.index.is_none() {
            let like = like.map(crate::support::dims);
            let shape = crate::transform::view_shape(
                self.op.name,
                &crate::support::dims(data),
                like.as_deref(),
                &self.attrs,
            );
            if let Some(shape) = shape {
                return static_dims(&shape?, self.op.name);
            }
        }
        let relation = self
            .op
            .relation
            .ok_or_else(|| OpError::unsupported(format!("`{}` has no relation", self.op.name)))?;
        let mut types = vec![Type::tensor(data, dtype)];
        if let Some(like) = like {
            types.push(Type::tensor(like, dtype));
        }
        if self.index.is_some() {
            types.push(Type::tensor(&[], DType::I64));
        }
        let ty = relation(&types, &self.attrs)?;
        match tensor_dims(&ty) {
            Some((dims, _)) => static_dims(dims, self.op.name),
            None => Err(OpError::shape(format!("`{}` to `{ty}`", self.op.name))),
        }
    }
}

/// The extents of `dims`, all known, the result of operator `op`.
fn static_dims(dims: &[Dim], op: &str) -> Result<Vec<i64>, OpError> {
    dims.iter()
        .map(|d| match d {
            Dim::Known(n) => Ok(*n),
            Dim::Any => Err(OpError::shape(format!(
                "`{op}` to `{}` is not static",
                crate::support::shape_text(dims)
            ))),
        })
        .collect()
}

/// The shape of argument `i` of `inputs`.
fn input_shape<'a>(inputs: &[&'a [i64]], i: usize) -> Result<&'a [i64], OpError> {
    inputs
        .get(i)
        .copied()
        .ok_or_else(|| OpError::arity(i + 1, inputs.len()))
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
