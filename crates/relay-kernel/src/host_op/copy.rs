//! Primitives with `?` dimensions that only move elements, computed by the kernel library's
//! strided copy ([`relay_linalg::copy`]) at every shape:
//! - a layout chain ([`relay_ops::views::layout_chain`]: reshapes, then transposes, slices
//!   and constant-index `take`s, then reshapes): the strided view of its data the chain gives
//!   for the arguments' shapes, copied into the compact result;
//! - a `concatenate` of parameters: each copied into its slice of the result.
//!
//! Any dtype (elements of 1, 2, 4 or 8 bytes).

use std::sync::Arc;

use relay_ir::{Attrs, DType, ExprKind, Function, Type, TypeKind};
use relay_linalg::copy::{Strided, strided_copy};
use relay_ops::views::{LayoutChain, layout_chain};

/// What a copy primitive moves.
#[derive(Clone, Debug)]
pub enum CopyOp {
    /// A view of one parameter.
    Layout(Arc<LayoutChain>),
    /// `concatenate` of the parameters `fields` (in the tuple's order) along `axis`.
    Concat {
        /// The parameter of each field.
        fields: Vec<usize>,
        /// The concatenation's attributes.
        attrs: Attrs,
        /// The axis, non-negative.
        axis: usize,
        /// The element type.
        dtype: DType,
    },
}

/// The copy primitive `func` is, when it has `?` dimensions and is one.
pub(super) fn recognize(func: &Function) -> Option<CopyOp> {
    if !crate::is_dynamic(func) {
        return None;
    }
    let tuples = func.params.iter().any(is_tuple);
    // A chain's parameter indices are its kernel arguments' when no parameter is a tuple.
    if let Some(chain) = layout_chain(func).filter(|_| !tuples) {
        return Some(CopyOp::Layout(Arc::new(chain)));
    }
    let (op, args, attrs) = func.body.op_call()?;
    let [tuple] = args else { return None };
    if op.name != "concatenate" {
        return None;
    }
    let fields = concatenated_params(func, tuple)?;
    let ty = func.body.checked_type()?;
    let TypeKind::Tensor { dtype, shape } = ty.kind() else {
        return None;
    };
    let rank = i64::try_from(shape.len()).ok()?;
    let axis = relay_ops::support::attr_int(attrs, "axis").ok()?;
    let axis = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok()?;
    (axis < shape.len()).then(|| CopyOp::Concat {
        fields,
        attrs: attrs.clone(),
        axis,
        dtype: *dtype,
    })
}

/// The kernel arguments (parameters with tuples flattened) a concatenation's tuple holds: a
/// tuple of tensor parameters, or the one parameter when it is a tuple of tensors.
fn concatenated_params(func: &Function, tuple: &relay_ir::Expr) -> Option<Vec<usize>> {
    let param = |e: &relay_ir::Expr| match e.kind() {
        ExprKind::Var(v) => func.params.iter().position(|p| p == v),
        _ => None,
    };
    if func.params.iter().any(is_tuple) {
        // Only the form `fn (%p: (T, ...)) { concatenate(%p) }`.
        let Some(TypeKind::Tuple(fields)) = func.params[0].checked_type().map(|t| t.kind()) else {
            return None;
        };
        return (func.params.len() == 1 && param(tuple) == Some(0) && !fields.is_empty())
            .then(|| (0..fields.len()).collect());
    }
    let ExprKind::Tuple(items) = tuple.kind() else {
        return None;
    };
    let fields = items.iter().map(param).collect::<Option<Vec<usize>>>()?;
    (!fields.is_empty()).then_some(fields)
}

/// Whether parameter `p` is a tuple.
fn is_tuple(p: &relay_ir::Var) -> bool {
    matches!(
        p.checked_type().or(p.ty()).map(|t| t.kind()),
        Some(TypeKind::Tuple(_))
    )
}

/// One copy: from a view of input `source` into a view of the output.
pub(super) struct Move {
    source: usize,
    from: Strided,
    into: Strided,
}

impl CopyOp {
    /// The result's shape for arguments of shapes `inputs`.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let out = match self {
            CopyOp::Layout(chain) => chain.output_shape(inputs),
            CopyOp::Concat {
                fields,
                attrs,
                dtype,
                ..
            } => {
                let mut types = Vec::with_capacity(fields.len());
                for &f in fields {
                    let shape = inputs.get(f).ok_or("a missing argument")?;
                    types.push(Type::tensor(shape, *dtype));
                }
                concatenated(&types, attrs)
            }
        };
        Ok(vec![out.map_err(|e| e.to_string())?])
    }

    /// The copies that compute the result, of shape `out`, from arguments of shapes
    /// `inputs`.
    fn moves(
        &self,
        inputs: &[&[i64]],
        out: &[i64],
        scalars: &[Option<i128>],
    ) -> Result<Vec<Move>, String> {
        let out = extents(out)?;
        match self {
            CopyOp::Layout(chain) => {
                let scalar = |i: usize| scalars.get(i).copied().flatten();
                let (view, _) = chain.view(inputs, &scalar).map_err(|e| e.to_string())?;
                let from = Strided {
                    shape: extents(&view.shape)?,
                    strides: view.strides.iter().map(|&s| s as isize).collect(),
                    offset: usize::try_from(view.offset).map_err(|_| "a negative offset")?,
                };
                let into = Strided::compact(&from.shape, 0);
                Ok(vec![Move {
                    source: chain.data,
                    from,
                    into,
                }])
            }
            CopyOp::Concat { fields, axis, .. } => {
                let whole = Strided::compact(&out, 0);
                let step = *whole.strides.get(*axis).ok_or("a bad axis")?;
                let mut start = 0usize;
                let mut moves = Vec::with_capacity(fields.len());
                for &f in fields {
                    let shape = extents(inputs.get(f).ok_or("a missing argument")?)?;
                    let n = *shape.get(*axis).ok_or("a bad axis")?;
                    let into = Strided {
                        shape: shape.clone(),
                        strides: whole.strides.clone(),
                        offset: start * step as usize,
                    };
                    start += n;
                    let from = Strided::compact(&shape, 0);
                    moves.push(Move {
                        source: f,
                        from,
                        into,
                    });
                }
                Ok(moves)
            }
        }
    }

    /// Copies the inputs' elements into the output (the last argument), for arguments of
    /// shapes `shapes`, of elements of type `T` (the others passed empty), the integer
    /// scalars among them of values `scalars`.
    pub(super) fn run<T: Copy>(
        &self,
        args: &mut [&mut [T]],
        shapes: &[&[i64]],
        scalars: &[Option<i128>],
    ) -> Result<(), String> {
        let (out_shape, inputs) = shapes.split_last().ok_or("a copy has an output")?;
        let moves = self.moves(inputs, out_shape, scalars)?;
        let (out, sources) = args.split_last_mut().ok_or("a copy has an output")?;
        for m in moves {
            let src = sources.get(m.source).ok_or("a missing argument")?;
            strided_copy(src, &m.from, out, &m.into).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// `concatenate`'s result shape for fields of types `types`.
fn concatenated(types: &[Type], attrs: &Attrs) -> Result<Vec<i64>, relay_ir::OpError> {
    let op = relay_ops::lookup("concatenate")
        .ok_or_else(|| relay_ir::OpError::unsupported("no `concatenate`"))?;
    let relation = op
        .relation
        .ok_or_else(|| relay_ir::OpError::unsupported("`concatenate` has no relation"))?;
    let ty = relation(&[Type::tuple(types.to_vec())], attrs)?;
    match ty.kind() {
        TypeKind::Tensor { shape, .. } => shape
            .iter()
            .map(|d| match d {
                relay_ir::Dim::Known(n) => Ok(*n),
                relay_ir::Dim::Any => Err(relay_ir::OpError::shape("not static")),
            })
            .collect(),
        _ => Err(relay_ir::OpError::shape(format!(
            "a concatenation to `{ty}`"
        ))),
    }
}

/// A shape's extents as `usize`.
fn extents(shape: &[i64]) -> Result<Vec<usize>, String> {
    shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("a negative extent in {shape:?}")))
        .collect()
}
