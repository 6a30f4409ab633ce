//! Joining and splitting: `concatenate` and `stack` (which take one tuple) and `split`, with
//! their type relations, reference evaluations and compute definitions.

use relay_ir::OpError;
use relay_ir::te::{CmpOp, TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrKind as K, AttrValue, Attrs, DType, Dim, NDArray, OpPattern as P,
    OpSchema, Type, TypeKind, Value,
};

use super::{
    DATA, concrete, data_type, empty_output, expect_shape, ix_add_c, ix_clamp, list_text,
    num_elements, strided,
};
use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, arg_tensors, attr_int, axis_index, dims, expect_inputs, insert_index, tensor,
    tuple_of_tensors, value,
};
use crate::{field, op, required};

/// The most pieces `split` makes from a number of sections, for the same reason.
const MAX_PIECES: i64 = 1 << 16;

/// The joining and splitting operators.
pub(super) static OPS: &[OpSchema] = &[
    // Joining and splitting; `concatenate` and `stack` take one tuple.
    op(
        "concatenate",
        DATA,
        "relay.attrs.ConcatenateAttrs",
        &[field("axis", K::Int, D::Int(0))],
    )
    .with(P::Injective, concatenate_rel, concatenate_eval)
    .with_compute(concatenate_te),
    op(
        "stack",
        DATA,
        "relay.attrs.StackAttrs",
        &[field("axis", K::Int, D::Int(0))],
    )
    .with(P::Injective, stack_rel, stack_eval)
    .with_compute(stack_te),
    op(
        "split",
        DATA,
        "relay.attrs.SplitAttrs",
        &[
            required("indices_or_sections", K::IntOrIntArray),
            field("axis", K::Int, D::Int(0)),
        ],
    )
    .with(P::Injective, split_rel, split_eval)
    .with_compute(split_te),
];

// ----- Type relations and reference evaluation -----

/// The dimension several tensors must share: the known one (they must agree), or `?`.
fn agree(
    dims: impl Iterator<Item = Dim>,
    what: impl Fn(i64, i64) -> OpError,
) -> Result<Dim, OpError> {
    let mut out = Dim::Any;
    for d in dims {
        match (out, d) {
            (Dim::Known(a), Dim::Known(b)) if a != b => return Err(what(a, b)),
            (Dim::Any, d) => out = d,
            _ => {}
        }
    }
    Ok(out)
}

/// The shapes and common dtype of a tuple of tensors, all of one rank.
fn joined_inputs<'t>(inputs: &'t [Type], op: &str) -> Result<(Vec<&'t [Dim]>, DType), OpError> {
    expect_inputs(inputs, 1)?;
    let fields = tuple_of_tensors(&inputs[0], "the input")?;
    let Some(&(first, dtype)) = fields.first() else {
        return Err(OpError::type_error(format!(
            "{op} needs at least one tensor, got an empty tuple"
        )));
    };
    for (i, &(shape, d)) in fields.iter().enumerate() {
        if d != dtype {
            return Err(OpError::dtype(format!(
                "{op} needs tensors of one dtype: tensor 0 is {dtype}, tensor {i} is {d}"
            )));
        }
        if shape.len() != first.len() {
            return Err(OpError::shape(format!(
                "{op} needs tensors of one rank: tensor 0 has rank {}, tensor {i} rank {}",
                first.len(),
                shape.len()
            )));
        }
    }
    Ok((fields.iter().map(|&(s, _)| s).collect(), dtype))
}

/// `concatenate`'s result shape and its (non-negative) axis.
fn concatenate_shape(shapes: &[&[Dim]], attrs: &Attrs) -> Result<(Vec<Dim>, usize), OpError> {
    let rank = shapes.first().map_or(0, |s| s.len());
    let axis = axis_index(attr_int(attrs, "axis")?, rank)?;
    let mut out = Vec::with_capacity(rank);
    for d in 0..rank {
        if d == axis {
            let mut total = Dim::Known(0);
            for s in shapes {
                total = match (total, s[d]) {
                    (Dim::Known(a), Dim::Known(b)) => Dim::Known(a + b),
                    _ => Dim::Any,
                };
            }
            out.push(total);
        } else {
            out.push(agree(shapes.iter().map(|s| s[d]), |a, b| {
                OpError::shape(format!(
                    "concatenate needs equal dimensions off axis {axis}, got {a} and {b} on axis {d}"
                ))
            })?);
        }
    }
    Ok((out, axis))
}

fn concatenate_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shapes, dtype) = joined_inputs(inputs, "concatenate")?;
    Ok(tensor(concatenate_shape(&shapes, attrs)?.0, dtype))
}

/// Interleaves the row-major blocks of `parts` from `axis` on: for every index before `axis`,
/// each part's block in turn.
fn interleave(
    parts: &[std::sync::Arc<NDArray>],
    axis: usize,
    out_shape: &[i64],
) -> Result<Value, OpError> {
    let Some(first) = parts.first() else {
        return Err(OpError::shape("internal error: nothing to join"));
    };
    let dtype = first.dtype();
    let size = dtype.size_bytes();
    let outer: i64 = out_shape[..axis].iter().product();
    let mut bytes = Vec::new();
    let blocks: Vec<usize> = parts
        .iter()
        .map(|p| p.shape()[axis.min(p.ndim())..].iter().product::<i64>() as usize * size)
        .collect();
    for o in 0..outer.max(0) as usize {
        for (p, &block) in parts.iter().zip(&blocks) {
            let from = p
                .as_bytes()
                .get(o * block..(o + 1) * block)
                .ok_or_else(|| {
                    OpError::shape(format!(
                        "internal error: block {o} is outside a part of shape {:?}",
                        p.shape()
                    ))
                })?;
            bytes.extend_from_slice(from);
        }
    }
    value(NDArray::from_bytes(dtype, out_shape, &bytes))
}

fn concatenate_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let parts = arg_tensors(args, 0)?;
    check_dtypes(&parts)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(p.shape())).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() != refs[0].len()) {
        return Err(OpError::shape("concatenate needs tensors of one rank"));
    }
    let (out, axis) = concatenate_shape(&refs, attrs)?;
    interleave(&parts, axis, &concrete(&out)?)
}

/// Run-time check that the joined tensors share a dtype (the byte copy relies on it).
fn check_dtypes(parts: &[std::sync::Arc<NDArray>]) -> Result<(), OpError> {
    match parts.first() {
        None => Err(OpError::type_error(
            "needs at least one tensor, got an empty tuple",
        )),
        Some(first) if parts.iter().any(|p| p.dtype() != first.dtype()) => {
            Err(OpError::dtype("needs tensors of one dtype"))
        }
        Some(_) => Ok(()),
    }
}

/// `stack`'s result shape and its insertion axis.
fn stack_shape(shapes: &[&[Dim]], attrs: &Attrs) -> Result<(Vec<Dim>, usize), OpError> {
    let rank = shapes.first().map_or(0, |s| s.len());
    let axis = insert_index(attr_int(attrs, "axis")?, rank)?;
    let mut out = Vec::with_capacity(rank + 1);
    for d in 0..rank {
        out.push(agree(shapes.iter().map(|s| s[d]), |a, b| {
            OpError::shape(format!(
                "stack needs tensors of one shape, got {a} and {b} on axis {d}"
            ))
        })?);
    }
    out.insert(axis, Dim::Known(shapes.len() as i64));
    Ok((out, axis))
}

fn stack_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shapes, dtype) = joined_inputs(inputs, "stack")?;
    Ok(tensor(stack_shape(&shapes, attrs)?.0, dtype))
}

fn stack_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let parts = arg_tensors(args, 0)?;
    check_dtypes(&parts)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(p.shape())).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() != refs[0].len()) {
        return Err(OpError::shape("stack needs tensors of one rank"));
    }
    let (out, axis) = stack_shape(&refs, attrs)?;
    interleave(&parts, axis, &concrete(&out)?)
}

/// `split`'s axis and the length of every piece along it: `indices_or_sections` is either a
/// number of equal sections or the ascending split points (TVM requires each piece to be
/// non-empty).
fn split_pieces(shape: &[Dim], attrs: &Attrs) -> Result<(usize, Vec<Dim>), OpError> {
    let axis = axis_index(attr_int(attrs, "axis")?, shape.len())?;
    let dim = shape[axis];
    let how = attrs.get("indices_or_sections").ok_or_else(|| {
        OpError::attribute(
            "indices_or_sections",
            "attribute `indices_or_sections` is missing",
        )
    })?;
    if let AttrValue::Int(sections) = *how {
        if !(1..=MAX_PIECES).contains(&sections) {
            return Err(OpError::attribute(
                "indices_or_sections",
                format!(
                    "`indices_or_sections` must be a number of sections between 1 and {MAX_PIECES}, got {sections}"
                ),
            ));
        }
        let piece = match dim {
            Dim::Known(n) if n % sections != 0 => {
                return Err(OpError::attribute(
                    "indices_or_sections",
                    format!("`indices_or_sections` {sections} does not divide dimension {n}"),
                ));
            }
            Dim::Known(n) => Dim::Known(n / sections),
            Dim::Any => Dim::Any,
        };
        return Ok((axis, vec![piece; sections as usize]));
    }
    let points = how.as_ints().ok_or_else(|| {
        OpError::attribute(
            "indices_or_sections",
            "attribute `indices_or_sections` must be an integer or a list of integers",
        )
    })?;
    let mut pieces = Vec::with_capacity(points.len() + 1);
    let mut begin = 0i64;
    for &p in &points {
        if p <= begin {
            return Err(OpError::attribute(
                "indices_or_sections",
                format!(
                    "`indices_or_sections` must be ascending split points above 0, got {}",
                    list_text(&points)
                ),
            ));
        }
        pieces.push(Dim::Known(p - begin));
        begin = p;
    }
    pieces.push(match dim {
        Dim::Known(n) if begin >= n && !points.is_empty() => {
            return Err(OpError::shape(format!(
                "split point {begin} is not inside dimension {n} of axis {axis}"
            )));
        }
        Dim::Known(n) => Dim::Known(n - begin),
        Dim::Any => Dim::Any,
    });
    Ok((axis, pieces))
}

fn split_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    let (axis, pieces) = split_pieces(shape, attrs)?;
    let fields = pieces
        .into_iter()
        .map(|len| {
            let mut s = shape.to_vec();
            s[axis] = len;
            tensor(s, dtype)
        })
        .collect();
    Ok(Type::tuple(fields))
}

fn split_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let (axis, pieces) = split_pieces(&dims(x.shape()), attrs)?;
    let lens = concrete(&pieces)?;
    let step = vec![1i64; x.ndim()];
    let mut begin = vec![0i64; x.ndim()];
    let mut out = Vec::with_capacity(lens.len());
    for len in lens {
        let mut shape = x.shape().to_vec();
        shape[axis] = len;
        out.push(Value::tensor(strided(x, &begin, &step, &shape)?));
        begin[axis] += len;
    }
    Ok(Value::tuple(out))
}

// ----- Compute definitions -----

/// The tensor inputs of a tuple input (`concatenate`, `stack`).
fn tuple_input(inputs: &[TeValue]) -> Result<Vec<&Tensor>, OpError> {
    match inputs {
        [TeValue::Tuple(fields)] => fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.as_tensor().ok_or_else(|| {
                    OpError::type_error(format!("field {i} of the input must be a tensor"))
                })
            })
            .collect(),
        _ => Err(OpError::type_error("expects one input, a tuple of tensors")),
    }
}

/// `concatenate`: along the axis, a chain of selects on the output position, each piece read
/// at that position less its offset, clamped into the piece (a select evaluates both
/// branches). Empty pieces are skipped.
fn concatenate_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let parts = tuple_input(inputs)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(&p.shape)).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() != shape.len()) {
        return Err(OpError::shape(
            "concatenate needs tensors of the output's rank",
        ));
    }
    let (want, axis) = concatenate_shape(&refs, attrs)?;
    expect_shape("concatenate", &shape, &want)?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_concat", &shape, dtype));
    }
    let total = shape[axis];
    // Each non-empty piece with its offset along the axis.
    let mut pieces = Vec::with_capacity(parts.len());
    let mut offset = 0i64;
    for p in parts {
        let n = p.shape[axis];
        if n > 0 {
            pieces.push((p, offset, n));
        }
        offset += n;
    }
    let t = Tensor::compute("T_concat", &shape, |i| {
        let read = |&(p, off, n): &(&Tensor, i64, i64)| {
            let lo = (off > 0).then_some(0);
            let hi = (off + n < total).then_some(n - 1);
            let mut at = i.to_vec();
            at[axis] = ix_clamp(ix_add_c(i[axis].clone(), -off), lo, hi);
            p.at(&at)
        };
        let mut rest = pieces.iter().rev();
        let mut body = rest.next().map_or_else(|| compute::zero(dtype), read);
        for piece in rest {
            let end = TExpr::index(piece.1 + piece.2);
            body = i[axis]
                .clone()
                .compare(CmpOp::Lt, end)
                .select(read(piece), body);
        }
        body
    });
    compute::tensor_value(t)
}

/// `stack`: the output index without the new axis, in the piece that axis selects.
fn stack_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let parts = tuple_input(inputs)?;
    let shapes: Vec<Vec<Dim>> = parts.iter().map(|p| dims(&p.shape)).collect();
    let refs: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
    if refs.iter().any(|s| s.len() + 1 != shape.len()) {
        return Err(OpError::shape(
            "stack needs tensors of one rank less than the output's",
        ));
    }
    let (want, axis) = stack_shape(&refs, attrs)?;
    expect_shape("stack", &shape, &want)?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_stack", &shape, dtype));
    }
    let t = Tensor::compute("T_stack", &shape, |i| {
        let mut at = i.to_vec();
        at.remove(axis);
        let mut rest = parts.iter().enumerate().rev();
        let mut body = rest
            .next()
            .map_or_else(|| compute::zero(dtype), |(_, p)| p.at(&at));
        for (k, p) in rest {
            body = i[axis]
                .clone()
                .compare(CmpOp::Eq, TExpr::index(k as i64))
                .select(p.at(&at), body);
        }
        body
    });
    compute::tensor_value(t)
}

/// `split`: a tuple of slices along the axis.
fn split_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let x = compute::input(inputs, 0)?;
    let (axis, pieces) = split_pieces(&dims(&x.shape), attrs)?;
    let lens = concrete(&pieces)?;
    let TypeKind::Tuple(fields) = out.kind() else {
        return Err(OpError::type_error(format!(
            "split's output must be a tuple, got `{out}`"
        )));
    };
    if fields.len() != lens.len() {
        return Err(OpError::shape(format!(
            "split makes {} pieces, its output type has {}",
            lens.len(),
            fields.len()
        )));
    }
    let mut begin = 0i64;
    let mut outs = Vec::with_capacity(lens.len());
    for (field, len) in fields.iter().zip(lens) {
        let (shape, dtype) = compute::static_tensor(field)?;
        let mut want = dims(&x.shape);
        want[axis] = Dim::Known(len);
        expect_shape("split", &shape, &want)?;
        outs.push(if num_elements(&shape) == 0 {
            empty_output("T_split", &shape, dtype)
        } else {
            let start = begin;
            TeValue::Tensor(Tensor::compute("T_split", &shape, |i| {
                let mut at = i.to_vec();
                at[axis] = ix_add_c(i[axis].clone(), start);
                x.at(&at)
            }))
        });
        begin += len;
    }
    Ok(TeValue::Tuple(outs))
}

#[cfg(test)]
mod tests {

    use relay_ir::{AttrValue, DType, NDArray, Type, Value};

    use crate::compute::op_tests::{DTYPES, Rng, random};

    use crate::testing::{attrs, ints};
    use crate::transform::testing::*;

    fn tuple_ty(fields: &[Type]) -> Type {
        Type::tuple(fields.to_vec())
    }

    fn tuple(fields: &[&Value]) -> Value {
        Value::tuple(fields.iter().map(|&v| v.clone()).collect())
    }

    #[test]
    fn concatenate_and_stack() {
        let a = f32ty(&[2, 2]);
        let b = f32ty(&[2, 3]);
        let axis = |a: i64| [("axis", int(a))];
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(1)
            )
            .unwrap(),
            "Tensor[(2, 5), float32]"
        );
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(-1)
            )
            .unwrap(),
            "Tensor[(2, 5), float32]"
        );
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(0)
            )
            .unwrap_err(),
            "concatenate needs equal dimensions off axis 0, got 2 and 3 on axis 1"
        );
        assert!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), b.clone()])],
                &axis(2)
            )
            .is_err()
        );
        assert!(rel("concatenate", &[&tuple_ty(&[])], &axis(0)).is_err());
        assert!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), ty(&[2, 2], DType::I32)])],
                &axis(0)
            )
            .is_err()
        );
        assert!(
            rel(
                "concatenate",
                &[&tuple_ty(&[a.clone(), f32ty(&[4])])],
                &axis(0)
            )
            .is_err()
        );
        assert!(rel("concatenate", &[&a], &axis(0)).is_err());
        assert_eq!(
            rel(
                "concatenate",
                &[&tuple_ty(&[any_ty(&[-1, 3]), any_ty(&[2, -1])])],
                &axis(0)
            )
            .unwrap(),
            "Tensor[(?, 3), float32]"
        );
        assert_eq!(
            rel(
                "stack",
                &[&tuple_ty(&[a.clone(), a.clone(), a.clone()])],
                &axis(1)
            )
            .unwrap(),
            "Tensor[(2, 3, 2), float32]"
        );
        assert_eq!(
            rel("stack", &[&tuple_ty(&[a.clone(), a.clone()])], &axis(-1)).unwrap(),
            "Tensor[(2, 2, 2), float32]"
        );
        assert!(rel("stack", &[&tuple_ty(&[a.clone(), a.clone()])], &axis(3)).is_err());
        assert_eq!(
            rel("stack", &[&tuple_ty(&[a.clone(), b.clone()])], &axis(0)).unwrap_err(),
            "stack needs tensors of one shape, got 2 and 3 on axis 1"
        );
        for dtype in SHAPE_DTYPES {
            let map = |v: &[i128]| -> Vec<i128> {
                v.iter()
                    .map(|&i| {
                        if dtype == DType::BOOL {
                            i128::from(i % 2 != 0)
                        } else {
                            i
                        }
                    })
                    .collect()
            };
            let x = typed(dtype, &[2, 2], &map(&[0, 1, 2, 3]));
            let y = typed(dtype, &[2, 3], &map(&[10, 11, 12, 13, 14, 15]));
            let (s, d, v) = parts(&eval("concatenate", &[&tuple(&[&x, &y])], &axis(1)).unwrap());
            assert_eq!((s, d), (vec![2, 5], dtype));
            assert_eq!(v, map(&[0, 1, 10, 11, 12, 2, 3, 13, 14, 15]));
            let z = typed(dtype, &[2, 2], &map(&[10, 11, 12, 13]));
            let (s, _, v) = parts(&eval("stack", &[&tuple(&[&x, &z])], &axis(1)).unwrap());
            assert_eq!(s, vec![2, 2, 2]);
            assert_eq!(v, map(&[0, 1, 10, 11, 2, 3, 12, 13]));
            let (_, _, v) = parts(&eval("stack", &[&tuple(&[&x, &z])], &axis(-1)).unwrap());
            assert_eq!(v, map(&[0, 10, 1, 11, 2, 12, 3, 13]));
        }
        let e = iota(DType::F32, &[0, 2]);
        let x = iota(DType::F32, &[1, 2]);
        let (s, v) =
            shape_values(&eval("concatenate", &[&tuple(&[&e, &x, &e])], &axis(0)).unwrap());
        assert_eq!((s, v), (vec![1, 2], vec![0, 1]));
        assert!(
            eval(
                "concatenate",
                &[&tuple(&[&x, &iota(DType::F32, &[1, 3])])],
                &axis(0)
            )
            .is_err()
        );
        assert!(eval("stack", &[&tuple(&[])], &axis(0)).is_err());
    }

    #[test]
    fn split_pieces_and_values() {
        let x = f32ty(&[2, 3, 4]);
        let s = |how: AttrValue, axis: i64| {
            rel(
                "split",
                &[&x],
                &[("indices_or_sections", how), ("axis", int(axis))],
            )
        };
        assert_eq!(
            s(int(2), 2).unwrap(),
            "(Tensor[(2, 3, 2), float32], Tensor[(2, 3, 2), float32])"
        );
        assert_eq!(
            s(ints(&[1, 3]), -1).unwrap(),
            "(Tensor[(2, 3, 1), float32], Tensor[(2, 3, 2), float32], Tensor[(2, 3, 1), float32])"
        );
        assert_eq!(s(ints(&[]), 0).unwrap(), "(Tensor[(2, 3, 4), float32],)");
        assert_eq!(
            s(int(5), 2).unwrap_err(),
            "`indices_or_sections` 5 does not divide dimension 4"
        );
        assert!(s(int(0), 2).is_err());
        assert!(s(ints(&[2, 1]), 2).is_err());
        assert!(s(ints(&[0, 2]), 2).is_err());
        assert!(
            s(ints(&[4]), 2)
                .unwrap_err()
                .contains("not inside dimension 4")
        );
        assert!(s(int(1), 3).is_err());
        assert_eq!(
            rel(
                "split",
                &[&any_ty(&[-1, 2])],
                &[("indices_or_sections", ints(&[1]))]
            )
            .unwrap(),
            "(Tensor[(1, 2), float32], Tensor[(?, 2), float32])"
        );
        for dtype in SHAPE_DTYPES {
            let v = iota(dtype, &[2, 3, 4]);
            let r = eval(
                "split",
                &[&v],
                &[("indices_or_sections", ints(&[1, 3])), ("axis", int(2))],
            )
            .unwrap();
            let fields = r.as_tuple().unwrap();
            assert_eq!(fields.len(), 3);
            let (s, d, got) = parts(&fields[1]);
            assert_eq!((s, d), (vec![2, 3, 2], dtype));
            let expect: Vec<i128> = [1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22]
                .iter()
                .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                .collect();
            assert_eq!(got, expect);
        }
        let v = iota(DType::I32, &[6]);
        let r = eval("split", &[&v], &[("indices_or_sections", int(3))]).unwrap();
        let pieces: Vec<_> = r.as_tuple().unwrap().iter().map(shape_values).collect();
        assert_eq!(
            pieces,
            [
                (vec![2], vec![0, 1]),
                (vec![2], vec![2, 3]),
                (vec![2], vec![4, 5])
            ]
        );
    }

    #[test]
    fn concatenate_and_stack_compute() {
        let mut rng = Rng(0x5eed_0004);
        let concats: &[(&[&[i64]], i64)] = &[
            (&[&[2, 3], &[4, 3]], 0),
            (&[&[2, 3], &[2, 1], &[2, 0], &[2, 5]], 1),
            (&[&[2, 3], &[2, 1], &[2, 0], &[2, 5]], -1),
            (&[&[0, 3], &[2, 3]], 0),
            (&[&[2, 3], &[0, 3]], 0),
            (&[&[0, 2], &[3, 2], &[0, 2], &[1, 2], &[0, 2]], -2),
            (&[&[1], &[1], &[1]], 0),
            (&[&[3, 2]], 1),
            (&[&[2, 0], &[2, 0]], 0),
            (&[&[0, 2], &[0, 3]], 1),
            (&[&[2, 1, 3], &[2, 2, 3], &[2, 1, 3]], 1),
            (&[&[0], &[0]], 0),
        ];
        for &(shapes, axis) in concats {
            let a = attrs("concatenate", &[("axis", int(axis))]);
            for dtype in DTYPES {
                let parts: Vec<NDArray> =
                    shapes.iter().map(|s| random(&mut rng, dtype, s)).collect();
                assert!(
                    check_tuple("concatenate", &parts, true, &a),
                    "{shapes:?} {axis}"
                );
            }
        }
        for (shape, count, axis) in [
            (&[2, 3][..], 3, 0),
            (&[2, 3], 3, 1),
            (&[2, 3], 2, 2),
            (&[2, 3], 3, -1),
            (&[2, 3], 2, -3),
            (&[], 2, 0),
            (&[], 1, -1),
            (&[0, 2], 2, 1),
            (&[1], 1, 0),
            (&[3, 1], 4, 1),
        ] {
            let a = attrs("stack", &[("axis", int(axis))]);
            for dtype in DTYPES {
                let parts: Vec<NDArray> =
                    (0..count).map(|_| random(&mut rng, dtype, shape)).collect();
                assert!(
                    check_tuple("stack", &parts, true, &a),
                    "{shape:?} {count} {axis}"
                );
            }
        }
        // A mismatched piece is the relation's error, not the compute's.
        let bad = [
            random(&mut rng, DType::F32, &[2, 3]),
            random(&mut rng, DType::F32, &[3, 3]),
        ];
        assert!(!check_tuple(
            "concatenate",
            &bad,
            true,
            &attrs("concatenate", &[("axis", int(1))])
        ));
    }

    #[test]
    fn split_sections_and_indices() {
        let mut rng = Rng(0x5eed_0005);
        let cases: &[(&[i64], AttrValue, i64)] = &[
            (&[6, 4], int(1), 0),
            (&[6, 4], int(2), 0),
            (&[6, 4], int(3), 0),
            (&[6, 4], int(6), 0),
            (&[6, 4], int(2), -1),
            (&[6, 4], int(4), 1),
            (&[6, 4], ints(&[1, 3]), 0),
            (&[6, 4], ints(&[2]), 1),
            (&[6, 4], ints(&[]), 0),
            (&[0, 3], int(1), 0),
            (&[0, 3], int(3), 0),
            (&[0, 3], int(3), 1),
            (&[5, 1], ints(&[1, 4]), 0),
            (&[7], ints(&[1, 2, 6]), 0),
            (&[3, 5, 2], ints(&[2, 3]), -2),
        ];
        for (shape, how, axis) in cases {
            let a = attrs(
                "split",
                &[("indices_or_sections", how.clone()), ("axis", int(*axis))],
            );
            for dtype in DTYPES {
                let x = random(&mut rng, dtype, shape);
                assert!(
                    check_tuple("split", &[x], false, &a),
                    "{shape:?} {how:?} {axis}"
                );
            }
        }
    }
}
