//! Primitives with `?` dimensions that only move elements, computed by the kernel library's
//! strided copy ([`relay_linalg::copy`]) at every shape:
//! - a layout chain ([`relay_ops::views::layout_chain`]: reshapes, then transposes, slices
//!   and constant-index `take`s, then reshapes): the strided view of its data the chain gives
//!   for the arguments' shapes, copied into the compact result;
//! - a `concatenate` of parameters: each copied into its slice of the result;
//! - a `split` of a parameter: each result copied from its slice of it;
//! - a `take` of a parameter by a parameter of integer indices (a gather from a table of
//!   `?` extents): a block of elements copied per index.
//!
//! Any dtype (elements of 1, 2, 4 or 8 bytes).

use std::sync::Arc;

use relay_ir::{Attrs, DType, ExprKind, Function, Type, TypeKind};
use relay_linalg::copy::{Bits, Strided, strided_copy};
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
    /// `take` of parameter 0 by the integer indices of parameter 1.
    Take {
        /// The take's attributes.
        attrs: Attrs,
        /// The axis, non-negative (`None`: the data flattened).
        axis: Option<usize>,
        /// What an index outside the axis means: `"clip"`, `"wrap"` or `"fast"` (an error).
        mode: String,
        /// The element types of the data and the indices.
        dtypes: [DType; 2],
    },
    /// `split` of parameter 0 along `axis`.
    Split {
        /// The split's attributes.
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
    if op.name == "take" {
        return take(func, args, attrs);
    }
    let [arg] = args else { return None };
    match op.name {
        "concatenate" => {
            let fields = concatenated_params(func, arg)?;
            let (dtype, shape) = tensor_type(func.body.checked_type()?)?;
            let axis = axis_of(attrs, shape.len())?;
            Some(CopyOp::Concat {
                fields,
                attrs: attrs.clone(),
                axis,
                dtype,
            })
        }
        "split"
            if func.params.len() == 1
                && matches!(arg.kind(), ExprKind::Var(v) if func.params[0] == *v) =>
        {
            let (dtype, shape) = tensor_type(func.params.first()?.checked_type()?)?;
            let axis = axis_of(attrs, shape.len())?;
            Some(CopyOp::Split {
                attrs: attrs.clone(),
                axis,
                dtype,
            })
        }
        _ => None,
    }
}

/// `take(%p0, %p1)` of two parameters, integer indices.
fn take(func: &Function, args: &[relay_ir::Expr], attrs: &Attrs) -> Option<CopyOp> {
    let is_param = |e: &relay_ir::Expr, i: usize| matches!(e.kind(), ExprKind::Var(v) if func.params.get(i) == Some(v));
    let [data, indices] = args else { return None };
    if func.params.len() != 2 || !is_param(data, 0) || !is_param(indices, 1) {
        return None;
    }
    let (dtype, shape) = tensor_type(func.params[0].checked_type()?)?;
    let (index_dtype, _) = tensor_type(func.params[1].checked_type()?)?;
    if index_dtype.code != relay_ir::DTypeCode::Int || index_dtype.lanes != 1 {
        return None;
    }
    let axis = match relay_ops::support::attr_opt_int(attrs, "axis").ok()? {
        Some(_) => Some(axis_of(attrs, shape.len())?),
        None => None,
    };
    let mode = relay_ops::support::attr_str(attrs, "mode").unwrap_or("clip");
    Some(CopyOp::Take {
        attrs: attrs.clone(),
        axis,
        mode: mode.to_owned(),
        dtypes: [dtype, index_dtype],
    })
}

/// A tensor type's element type and shape.
fn tensor_type(ty: &Type) -> Option<(DType, &[relay_ir::Dim])> {
    match ty.kind() {
        TypeKind::Tensor { dtype, shape } => Some((*dtype, shape)),
        _ => None,
    }
}

/// The `axis` attribute of an operator of a rank-`rank` tensor, non-negative.
fn axis_of(attrs: &Attrs, rank: usize) -> Option<usize> {
    let axis = relay_ops::support::attr_int(attrs, "axis").ok()?;
    let axis = if axis < 0 {
        axis + i64::try_from(rank).ok()?
    } else {
        axis
    };
    usize::try_from(axis).ok().filter(|&a| a < rank)
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

/// One copy: from a view of input `source` into a view of output `dest`.
#[derive(Debug)]
pub(crate) struct Move {
    source: usize,
    from: Strided,
    dest: usize,
    into: Strided,
}

impl CopyOp {
    /// The results' shapes for arguments of shapes `inputs`.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let out = match self {
            CopyOp::Layout(chain) => chain.output_shape(inputs).map(|s| vec![s]),
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
                related("concatenate", &[Type::tuple(types)], attrs)
            }
            CopyOp::Split { attrs, dtype, .. } => {
                let shape = inputs.first().ok_or("a missing argument")?;
                related("split", &[Type::tensor(shape, *dtype)], attrs)
            }
            CopyOp::Take { attrs, dtypes, .. } => {
                let types = inputs
                    .iter()
                    .zip(dtypes)
                    .map(|(s, &d)| Type::tensor(s, d))
                    .collect::<Vec<_>>();
                related("take", &types, attrs)
            }
        };
        out.map_err(|e| e.to_string())
    }

    /// The copies that compute the results, of shapes `outs`, from arguments of shapes
    /// `inputs`.
    pub(super) fn moves(
        &self,
        inputs: &[&[i64]],
        outs: &[&[i64]],
        scalars: &[Option<i128>],
    ) -> Result<Vec<Move>, String> {
        let out = extents(outs.first().ok_or("a copy has an output")?)?;
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
                    dest: 0,
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
                        dest: 0,
                        into,
                    });
                }
                Ok(moves)
            }
            CopyOp::Take { .. } => Err("a gather is not a strided copy".into()),
            CopyOp::Split { axis, .. } => {
                let whole = Strided::compact(&extents(inputs.first().ok_or("no data")?)?, 0);
                let step = *whole.strides.get(*axis).ok_or("a bad axis")?;
                let mut start = 0usize;
                let mut moves = Vec::with_capacity(outs.len());
                for (dest, out) in outs.iter().enumerate() {
                    let shape = extents(out)?;
                    let from = Strided {
                        shape: shape.clone(),
                        strides: whole.strides.clone(),
                        offset: start * step as usize,
                    };
                    start += *shape.get(*axis).ok_or("a bad axis")?;
                    let into = Strided::compact(&shape, 0);
                    moves.push(Move {
                        source: 0,
                        from,
                        dest,
                        into,
                    });
                }
                Ok(moves)
            }
        }
    }

    /// How many of `args` arguments are inputs: a split has one input and a result per
    /// part; the others, one result.
    pub(super) fn inputs(&self, args: usize) -> Result<usize, String> {
        match self {
            CopyOp::Split { .. } => Ok(1),
            _ => Ok(args.checked_sub(1).ok_or("a copy has an output")?),
        }
    }

    /// Copies the inputs' elements into the outputs (the last arguments, after
    /// [`CopyOp::inputs`] inputs) by `moves`, of elements of type `T` (the others passed
    /// empty).
    pub(super) fn run<T: Bits>(&self, args: &mut [&mut [T]], moves: &[Move]) -> Result<(), String> {
        let (sources, outs) = args.split_at_mut(self.inputs(args.len())?);
        for m in moves {
            let src = sources.get(m.source).ok_or("a missing argument")?;
            let out = outs.get_mut(m.dest).ok_or("a missing result")?;
            strided_copy(src, &m.from, out, &m.into).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl CopyOp {
    /// Gathers the blocks of the data (the first of `args`) that `indices` (the second
    /// argument's values) pick into the result (the last), for arguments of shapes `shapes`.
    pub(super) fn gather<T: Copy>(
        &self,
        args: &mut [&mut [T]],
        shapes: &[&[i64]],
        indices: &[i64],
    ) -> Result<(), String> {
        let CopyOp::Take { axis, mode, .. } = self else {
            return Err("not a gather".into());
        };
        let data = extents(shapes.first().ok_or("no data")?)?;
        let (outer, n, inner) = match axis {
            Some(a) => (
                data[..*a].iter().product::<usize>(),
                data[*a],
                data[a + 1..].iter().product::<usize>(),
            ),
            None => (1, data.iter().product(), 1),
        };
        let (out, rest) = args.split_last_mut().ok_or("no result")?;
        let table = rest.first().ok_or("no data")?;
        let m = indices.len();
        if out.len() != outer * m * inner || table.len() != outer * n * inner {
            return Err("arguments of the wrong size".into());
        }
        for (j, &ix) in indices.iter().enumerate() {
            let k = pick(ix, n, mode)?;
            for o in 0..outer {
                let from = (o * n + k) * inner;
                let to = (o * m + j) * inner;
                out[to..to + inner].copy_from_slice(&table[from..from + inner]);
            }
        }
        Ok(())
    }
}

/// The position index `ix` picks on an axis of `n` in `mode`.
fn pick(ix: i64, n: usize, mode: &str) -> Result<usize, String> {
    let len = i64::try_from(n).map_err(|_| "an axis too long")?;
    let k = match mode {
        _ if len == 0 => return Err(format!("index {ix} into an axis of 0 elements")),
        "clip" => ix.clamp(0, len - 1),
        "wrap" => ix.rem_euclid(len),
        _ if (0..len).contains(&ix) => ix,
        _ => return Err(format!("index {ix} is outside an axis of {n} elements")),
    };
    Ok(k as usize)
}

/// The static shapes of the tensors operator `name`'s relation gives for arguments of types
/// `types` (a tuple's fields).
fn related(name: &str, types: &[Type], attrs: &Attrs) -> Result<Vec<Vec<i64>>, relay_ir::OpError> {
    let unsupported = |m: String| relay_ir::OpError::unsupported(m);
    let op = relay_ops::lookup(name).ok_or_else(|| unsupported(format!("no `{name}`")))?;
    let relation = op
        .relation
        .ok_or_else(|| unsupported(format!("`{name}` has no relation")))?;
    let ty = relation(types, attrs)?;
    let fields = match ty.kind() {
        TypeKind::Tuple(fields) => fields.clone(),
        _ => vec![ty.clone()],
    };
    fields
        .iter()
        .map(|f| match tensor_type(f) {
            Some((_, shape)) => shape
                .iter()
                .map(|d| match d {
                    relay_ir::Dim::Known(n) => Ok(*n),
                    relay_ir::Dim::Any => Err(relay_ir::OpError::shape("not static")),
                })
                .collect(),
            None => Err(relay_ir::OpError::shape(format!("`{name}` gives `{ty}`"))),
        })
        .collect()
}

/// A shape's extents as `usize`.
fn extents(shape: &[i64]) -> Result<Vec<usize>, String> {
    shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("a negative extent in {shape:?}")))
        .collect()
}
