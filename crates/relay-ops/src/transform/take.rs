//! Gathering: `take` (every `mode`, `axis` and `batch_dims`) and `gather` (numpy's
//! `take_along_axis`, ONNX's `GatherElements`) with their type relations, reference
//! evaluations and compute definitions, and the table entries of `gather_nd` and
//! `adv_index`.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrKind as K, Attrs, DType, Dim, OpPattern as P, OpSchema, Type, Value,
};

use super::{concrete, empty_output, expect_shape, gather, ix_clamp, num_elements, unflatten};
use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, attr_int, attr_opt_int, attr_str, axis_index, dims, expect_inputs, strides, tensor,
    tensor_type, value,
};
use crate::{field, nullable, op, plain};

/// The gathering operators.
pub(super) static OPS: &[OpSchema] = &[
    // Gathering.
    op(
        "take",
        &["data", "indices"],
        "relay.attrs.TakeAttrs",
        &[
            field("batch_dims", K::Int, D::Int(0)),
            nullable("axis", K::Int),
            field("mode", K::Str, D::Str("clip")),
        ],
    )
    .with(P::Injective, take_rel, take_eval)
    .with_compute(take_te),
    op(
        "gather",
        &["data", "indices"],
        "relay.attrs.GatherAttrs",
        &[nullable("axis", K::Int)],
    )
    .with(P::Injective, gather_rel, gather_eval)
    .with_compute(gather_te),
    op(
        "gather_nd",
        &["data", "indices"],
        "relay.attrs.GatherNDAttrs",
        &[
            field("batch_dims", K::Int, D::Int(0)),
            nullable("index_rank", K::Int),
        ],
    ),
    plain("adv_index", &["inputs"]),
];

// ----- Type relations and reference evaluation -----

/// How `take` treats an index outside `0..n`.
#[derive(Clone, Copy)]
enum TakeMode {
    Clip,
    Wrap,
    Fast,
}

fn take_mode(attrs: &Attrs) -> Result<TakeMode, OpError> {
    match attr_str(attrs, "mode")? {
        "clip" => Ok(TakeMode::Clip),
        "wrap" => Ok(TakeMode::Wrap),
        "fast" => Ok(TakeMode::Fast),
        other => Err(OpError::attribute(
            "mode",
            format!("`mode` must be \"clip\", \"wrap\" or \"fast\", got \"{other}\""),
        )),
    }
}

/// The axis and the non-negative `batch_dims` of a `take` with an axis.
fn take_axes(
    data_rank: usize,
    indices_rank: usize,
    attrs: &Attrs,
) -> Result<Option<(usize, usize)>, OpError> {
    let Some(axis) = attr_opt_int(attrs, "axis")? else {
        return Ok(None);
    };
    let axis = axis_index(axis, data_rank)?;
    let given = attr_int(attrs, "batch_dims")?;
    let batch = if given < 0 {
        given + indices_rank as i64
    } else {
        given
    };
    if batch < 0 || batch > indices_rank as i64 || batch > axis as i64 {
        return Err(OpError::attribute(
            "batch_dims",
            format!(
                "`batch_dims` {given} must be within the indices' rank {indices_rank} and at most the axis {axis}"
            ),
        ));
    }
    Ok(Some((axis, batch as usize)))
}

/// The result shape of `take`: the indices' shape without an axis (the data is flattened),
/// else `data[..axis] ++ indices[batch_dims..] ++ data[axis + 1..]`.
fn take_shape(data: &[Dim], indices: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    take_mode(attrs)?;
    let Some((axis, batch)) = take_axes(data.len(), indices.len(), attrs)? else {
        return Ok(indices.to_vec());
    };
    for d in 0..batch {
        if let (Dim::Known(a), Dim::Known(b)) = (data[d], indices[d])
            && a != b
        {
            return Err(OpError::shape(format!(
                "batch dimension {d} differs: {a} in the data, {b} in the indices"
            )));
        }
    }
    Ok(data[..axis]
        .iter()
        .chain(&indices[batch..])
        .chain(&data[axis + 1..])
        .copied()
        .collect())
}

fn take_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    expect_inputs(inputs, 2)?;
    let (data, dtype) = tensor_type(&inputs[0], "the data")?;
    let (indices, index_dtype) = tensor_type(&inputs[1], "the indices")?;
    if !index_dtype.is_int() {
        return Err(OpError::dtype(format!(
            "the indices must be an integer tensor, got `{}`",
            inputs[1]
        )));
    }
    Ok(tensor(take_shape(data, indices, attrs)?, dtype))
}

/// The axis and position a `take` with `attrs` of the scalar `index` selects from data of the
/// static `shape` (the layout chains' view of it, [`crate::views::LayoutChain`]).
pub(crate) fn take_view(
    shape: &[i64],
    index: i128,
    attrs: &Attrs,
) -> Result<(usize, i64), OpError> {
    let mode = take_mode(attrs)?;
    let (axis, _) = take_axes(shape.len(), 0, attrs)?
        .ok_or_else(|| OpError::unsupported("a `take` without an axis is not a view"))?;
    Ok((axis, resolve(index, shape[axis], mode)?))
}

/// The position an index selects along a dimension of `n` elements.
fn resolve(index: i128, n: i64, mode: TakeMode) -> Result<i64, OpError> {
    let n128 = i128::from(n);
    if n <= 0 {
        return Err(OpError::value(format!(
            "take index {index} is out of bounds for an empty axis"
        )));
    }
    Ok(match mode {
        TakeMode::Clip => index.clamp(0, n128 - 1) as i64,
        TakeMode::Wrap => index.rem_euclid(n128) as i64,
        TakeMode::Fast if (0..n128).contains(&index) => index as i64,
        TakeMode::Fast => {
            return Err(OpError::value(format!(
                "take index {index} is out of bounds for an axis of {n} elements (mode \"fast\")"
            )));
        }
    })
}

fn take_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let ind = arg_tensor(args, 1)?;
    let mode = take_mode(attrs)?;
    let out_shape = concrete(&take_shape(&dims(x.shape()), &dims(ind.shape()), attrs)?)?;
    let indices = ind.to_i128_vec();
    let ind_strides = strides(ind.shape());
    let flat_at = |idx: &[i64]| -> usize {
        idx.iter()
            .zip(&ind_strides)
            .map(|(i, s)| i * s)
            .sum::<i64>() as usize
    };
    let index_at = |pos: usize| -> Result<i128, OpError> {
        indices
            .get(pos)
            .copied()
            .ok_or_else(|| OpError::shape("internal error: index position out of range"))
    };
    let Some((axis, batch)) = take_axes(x.ndim(), ind.ndim(), attrs)? else {
        let n = x.num_elements() as i64;
        return value(gather(x, &out_shape, |idx| {
            resolve(index_at(flat_at(idx))?, n, mode)
        }));
    };
    let xs = x.shape().to_vec();
    let st = strides(&xs);
    let ir = ind.ndim();
    let picked = ir - batch;
    value(gather(x, &out_shape, |idx| {
        // The output index is `data[..axis] ++ indices[batch..] ++ data[axis + 1..]`.
        let mut at: Vec<i64> = idx[..batch].to_vec();
        at.extend_from_slice(&idx[axis..axis + picked]);
        let chosen = resolve(index_at(flat_at(&at))?, xs[axis], mode)?;
        let mut flat = 0i64;
        for d in 0..axis {
            flat += idx[d] * st[d];
        }
        flat += chosen * st[axis];
        for d in axis + 1..xs.len() {
            flat += idx[d - 1 + picked] * st[d];
        }
        Ok(flat)
    }))
}

/// `gather`'s axis and the checks of its operands: the same rank, and along every other
/// axis no more indices than data.
fn gather_axis(data: &[Dim], indices: &[Dim], attrs: &Attrs) -> Result<usize, OpError> {
    let axis =
        attr_opt_int(attrs, "axis")?.ok_or_else(|| OpError::shape("gather needs an `axis`"))?;
    let axis = axis_index(axis, data.len())?;
    if data.len() != indices.len() {
        return Err(OpError::shape(format!(
            "the indices' rank {} differs from the data's {}",
            indices.len(),
            data.len()
        )));
    }
    for (d, (&a, &b)) in data.iter().zip(indices).enumerate() {
        if let (Dim::Known(a), Dim::Known(b)) = (a, b)
            && d != axis
            && b > a
        {
            return Err(OpError::shape(format!(
                "dimension {d} has {b} indices for {a} data elements"
            )));
        }
    }
    Ok(axis)
}

/// `gather(data, indices, axis)`: `out[i] = data[i with axis replaced by indices[i]]`, of the
/// indices' shape; a negative index counts from the end, and indices are clamped to the axis
/// (never read out of bounds).
fn gather_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    expect_inputs(inputs, 2)?;
    let (data, dtype) = tensor_type(&inputs[0], "the data")?;
    let (indices, index_dtype) = tensor_type(&inputs[1], "the indices")?;
    if !index_dtype.is_int() {
        return Err(OpError::dtype(format!(
            "the indices must be an integer tensor, got `{}`",
            inputs[1]
        )));
    }
    gather_axis(data, indices, attrs)?;
    Ok(tensor(indices.to_vec(), dtype))
}

/// The position a `gather` index selects among `n` elements.
fn gather_position(index: i128, n: i64) -> i64 {
    let n = i128::from(n);
    let i = if index < 0 { index + n } else { index };
    i.clamp(0, n - 1) as i64
}

fn gather_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let ind = arg_tensor(args, 1)?;
    let axis = gather_axis(&dims(x.shape()), &dims(ind.shape()), attrs)?;
    let out_shape = ind.shape().to_vec();
    if x.shape()[axis] == 0 && ind.num_elements() > 0 {
        return Err(OpError::value("gather selects from an empty axis"));
    }
    let indices = ind.to_i128_vec();
    let (st, ist) = (strides(x.shape()), strides(ind.shape()));
    let n = x.shape()[axis];
    value(gather(x, &out_shape, |idx| {
        let at: i64 = idx.iter().zip(&ist).map(|(i, s)| i * s).sum();
        let index = indices
            .get(at as usize)
            .copied()
            .ok_or_else(|| OpError::shape("internal error: index position out of range"))?;
        Ok(idx
            .iter()
            .enumerate()
            .map(|(d, &i)| if d == axis { gather_position(index, n) } else { i } * st[d])
            .sum())
    }))
}

// ----- Compute definitions -----

/// `gather`: the data at the indices' positions along the axis.
fn gather_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let ind = compute::input(inputs, 1)?;
    let axis = gather_axis(&dims(&x.shape), &dims(&ind.shape), attrs)?;
    expect_shape("gather", &shape, &dims(&ind.shape))?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_gather", &shape, dtype));
    }
    let n = x.shape[axis];
    if n == 0 {
        return Err(OpError::value("gather selects from an empty axis"));
    }
    let t = Tensor::compute("T_gather", &shape, |i| {
        let index = ind.at(i);
        let pos = if index.dtype() == DType::U64 {
            index
                .binary(
                    BinaryOp::Min,
                    compute::int_const(i128::from(n - 1), DType::U64),
                )
                .cast(DType::I64)
        } else {
            // Clamped to -n..n, then a negative one counts from the end: `floor_mod` by n.
            ix_clamp(index.cast(DType::I64), Some(-n), Some(n - 1))
                .binary(BinaryOp::FloorMod, TExpr::index(n))
        };
        let mut at = i.to_vec();
        at[axis] = pos;
        x.at(&at)
    });
    compute::tensor_value(t)
}

/// The position an index read from `take`'s indices selects along `n > 0` elements, as an
/// `int64` inside `0..n`: clipped (modes `clip` and `fast`, which must not read out of bounds
/// either) or wrapped. A `uint64` index is resolved before it is converted, since it may not
/// fit an `int64`.
fn take_position(index: TExpr, n: i64, mode: TakeMode) -> TExpr {
    let dtype = index.dtype();
    let unsigned64 = dtype == DType::U64;
    match mode {
        TakeMode::Wrap if unsigned64 => index
            .binary(BinaryOp::FloorMod, compute::int_const(i128::from(n), dtype))
            .cast(DType::I64),
        TakeMode::Wrap => index
            .cast(DType::I64)
            .binary(BinaryOp::FloorMod, TExpr::index(n)),
        TakeMode::Clip | TakeMode::Fast if unsigned64 => index
            .binary(BinaryOp::Min, compute::int_const(i128::from(n - 1), dtype))
            .cast(DType::I64),
        TakeMode::Clip | TakeMode::Fast => ix_clamp(index.cast(DType::I64), Some(0), Some(n - 1)),
    }
}

/// `take`: the data (flattened without an axis) at positions read from the indices.
fn take_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let ind = compute::input(inputs, 1)?;
    let mode = take_mode(attrs)?;
    if !ind.dtype.is_int() {
        return Err(OpError::dtype(format!(
            "take's indices must be integers, got {}",
            ind.dtype
        )));
    }
    expect_shape(
        "take",
        &shape,
        &take_shape(&dims(&x.shape), &dims(&ind.shape), attrs)?,
    )?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_take", &shape, dtype));
    }
    let axes = take_axes(x.shape.len(), ind.shape.len(), attrs)?;
    let n = match axes {
        Some((axis, _)) => x.shape[axis],
        None => num_elements(&x.shape),
    };
    if n == 0 {
        return Err(OpError::value(
            "take selects from an empty axis: every index is out of bounds",
        ));
    }
    let t = Tensor::compute("T_take", &shape, |i| match axes {
        None => {
            let pos = take_position(ind.at(i), n, mode);
            x.at(&unflatten(pos, &x.shape))
        }
        Some((axis, batch)) => {
            let picked = ind.shape.len() - batch;
            let mut at: Vec<TExpr> = i[..batch].to_vec();
            at.extend_from_slice(&i[axis..axis + picked]);
            let pos = take_position(ind.at(&at), n, mode);
            let mut from: Vec<TExpr> = i[..axis].to_vec();
            from.push(pos);
            from.extend_from_slice(&i[axis + picked..]);
            x.at(&from)
        }
    });
    compute::tensor_value(t)
}

#[cfg(test)]
mod tests {

    use relay_ir::{AttrValue, DType, NDArray};

    use crate::compute::op_tests::{DTYPES, Rng, random};

    use crate::testing::attrs;
    use crate::transform::testing::*;

    #[test]
    fn take_shapes() {
        let x = f32ty(&[2, 3, 4]);
        let i = ty(&[2, 2], DType::I32);
        let t = |set: &[(&str, AttrValue)]| rel("take", &[&x, &i], set);
        assert_eq!(t(&[]).unwrap(), "Tensor[(2, 2), float32]");
        assert_eq!(
            t(&[("axis", int(1))]).unwrap(),
            "Tensor[(2, 2, 2, 4), float32]"
        );
        assert_eq!(
            t(&[("axis", int(-1))]).unwrap(),
            "Tensor[(2, 3, 2, 2), float32]"
        );
        assert_eq!(
            t(&[("axis", int(2)), ("batch_dims", int(1))]).unwrap(),
            "Tensor[(2, 3, 2), float32]"
        );
        assert_eq!(
            t(&[("axis", int(2)), ("batch_dims", int(-1))]).unwrap(),
            "Tensor[(2, 3, 2), float32]"
        );
        assert!(t(&[("axis", int(3))]).is_err());
        assert!(t(&[("axis", int(0)), ("batch_dims", int(1))]).is_err());
        assert!(t(&[("axis", int(2)), ("batch_dims", int(3))]).is_err());
        assert!(t(&[("mode", text("nearest"))]).is_err());
        assert_eq!(
            rel("take", &[&x, &f32ty(&[2])], &[]).unwrap_err(),
            "the indices must be an integer tensor, got `Tensor[(2), float32]`"
        );
        assert_eq!(
            rel("take", &[&x, &ty(&[], DType::I64)], &[("axis", int(0))]).unwrap(),
            "Tensor[(3, 4), float32]"
        );
        assert!(
            rel(
                "take",
                &[&x, &ty(&[3, 2], DType::I32)],
                &[("axis", int(1)), ("batch_dims", int(1))]
            )
            .is_err()
        );
    }

    #[test]
    fn take_values() {
        let idx = typed(DType::I32, &[2, 2], &[0, 4, -1, 2]);
        for dtype in SHAPE_DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let map = |v: &[i128]| -> Vec<i128> {
                v.iter()
                    .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                    .collect()
            };
            let (s, d, v) = parts(
                &eval(
                    "take",
                    &[&x, &idx],
                    &[("axis", int(1)), ("mode", text("wrap"))],
                )
                .unwrap(),
            );
            assert_eq!((s, d), (vec![2, 2, 2, 4], dtype));
            assert_eq!(
                v,
                map(&[
                    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                    19, 20, 21, 22, 23, 20, 21, 22, 23
                ])
            );
            let (s, _, v) = parts(&eval("take", &[&x, &idx], &[("axis", int(2))]).unwrap());
            assert_eq!(s, vec![2, 3, 2, 2]);
            assert_eq!(
                v,
                map(&[
                    0, 3, 0, 2, 4, 7, 4, 6, 8, 11, 8, 10, 12, 15, 12, 14, 16, 19, 16, 18, 20, 23,
                    20, 22
                ])
            );
        }
        let x = iota(DType::I64, &[2, 3, 4]);
        // Without an axis the data is flattened.
        let flat = typed(DType::U8, &[2, 2], &[23, 0, 5, 7]);
        let (s, v) = shape_values(&eval("take", &[&x, &flat], &[]).unwrap());
        assert_eq!((s, v), (vec![2, 2], vec![23, 0, 5, 7]));
        // Batch dimensions pair the leading axes of data and indices.
        let b = typed(DType::I64, &[2, 2], &[2, 0, 1, 1]);
        let (s, v) = shape_values(
            &eval(
                "take",
                &[&x, &b],
                &[("axis", int(2)), ("batch_dims", int(1))],
            )
            .unwrap(),
        );
        assert_eq!(s, vec![2, 3, 2]);
        assert_eq!(v, [2, 0, 6, 4, 10, 8, 13, 13, 17, 17, 21, 21]);
        // "fast" never reads out of bounds: it reports the bad index.
        let fast = [("axis", int(1)), ("mode", text("fast"))];
        assert_eq!(
            eval("take", &[&x, &idx], &fast).unwrap_err(),
            "take index 4 is out of bounds for an axis of 3 elements (mode \"fast\")"
        );
        let ok = typed(DType::I32, &[2], &[2, 0]);
        let (s, _) = shape_values(&eval("take", &[&x, &ok], &fast).unwrap());
        assert_eq!(s, vec![2, 2, 4]);
        // Nothing to take from.
        let empty = iota(DType::F32, &[0, 2]);
        assert!(eval("take", &[&empty, &ok], &[("axis", int(0))]).is_err());
        let none = typed(DType::I32, &[0], &[]);
        let (s, _) = shape_values(&eval("take", &[&empty, &none], &[("axis", int(0))]).unwrap());
        assert_eq!(s, vec![0, 2]);
    }

    #[test]
    fn gather_shapes_and_values() {
        let x = f32ty(&[2, 3]);
        let g = |i: &relay_ir::Type, axis: i64| rel("gather", &[&x, i], &[("axis", int(axis))]);
        assert_eq!(
            g(&ty(&[2, 2], DType::I64), 1).unwrap(),
            "Tensor[(2, 2), float32]"
        );
        assert_eq!(
            g(&ty(&[4, 3], DType::I32), 0).unwrap(),
            "Tensor[(4, 3), float32]"
        );
        assert!(g(&ty(&[2], DType::I64), 0).is_err());
        assert!(g(&ty(&[3, 3], DType::I64), 1).is_err());
        assert!(g(&ty(&[2, 3], DType::I64), 2).is_err());
        assert!(rel("gather", &[&x, &f32ty(&[2, 3])], &[("axis", int(0))]).is_err());
        // ONNX's GatherElements example: a negative index counts from the end.
        let data = iota(DType::I64, &[3, 3]);
        let idx = typed(DType::I64, &[2, 3], &[1, 2, 0, 2, 0, -3]);
        let (s, v) = shape_values(&eval("gather", &[&data, &idx], &[("axis", int(0))]).unwrap());
        assert_eq!((s, v), (vec![2, 3], vec![3, 7, 2, 6, 1, 2]));
        let (s, v) = shape_values(&eval("gather", &[&data, &idx], &[("axis", int(1))]).unwrap());
        assert_eq!((s, v), (vec![2, 3], vec![1, 2, 0, 5, 3, 3]));
    }

    #[test]
    fn gather_kernels_match_the_reference() {
        let mut rng = Rng(0x5eed_0009);
        let cases: &[(&[i64], &[i64], i64)] = &[
            (&[5], &[7], 0),
            (&[3, 4], &[3, 6], 1),
            (&[3, 4], &[5, 4], 0),
            (&[2, 3, 4], &[2, 2, 4], -2),
            (&[64, 128], &[64, 300], 1),
            (&[2, 0, 4], &[2, 0, 4], 1),
        ];
        for (k, &(data, ind, axis)) in cases.iter().enumerate() {
            let a = attrs("gather", &[("axis", int(axis))]);
            let n = data[(axis + data.len() as i64) as usize % data.len()];
            // Every element dtype on one shape, every index dtype on the small ones.
            let dtypes: &[DType] = if k == 1 { &DTYPES } else { &[DType::F32] };
            let index_dtypes: &[DType] = if data.len() == 2 && data[0] == 64 {
                &[DType::I64]
            } else {
                &[DType::I32, DType::I64, DType::U8, DType::U64]
            };
            for &dtype in dtypes {
                for &index_dtype in index_dtypes {
                    let x = random(&mut rng, dtype, data);
                    let count: i64 = ind.iter().product();
                    // Inside -n..n (negatives count from the end), for unsigned 0..n.
                    let v: Vec<i128> = (0..count)
                        .map(|_| {
                            let r = i128::from(rng.below((2 * n).max(1) as u64));
                            if matches!(index_dtype, DType::I32 | DType::I64) {
                                r - i128::from(n)
                            } else {
                                r / 2
                            }
                        })
                        .collect();
                    let i = NDArray::from_i128_slice(index_dtype, ind, &v).unwrap();
                    assert!(check_op("gather", &[x, i], &a), "{data:?} {ind:?} {axis}");
                }
            }
        }
    }

    /// Random indices of `dtype`: anything (`in_range` false) or inside `0..n`.
    fn indices(rng: &mut Rng, dtype: DType, shape: &[i64], n: i64, in_range: bool) -> NDArray {
        if !in_range {
            return random(rng, dtype, shape);
        }
        let count: i64 = shape.iter().product();
        let v: Vec<i128> = (0..count)
            .map(|_| i128::from(rng.below(n.max(1) as u64)))
            .collect();
        NDArray::from_i128_slice(dtype, shape, &v).unwrap()
    }

    #[test]
    fn take_every_mode_axis_and_index_dtype() {
        let mut rng = Rng(0x5eed_0008);
        let index_dtypes = [
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::U64,
        ];
        /// Data shape, indices shape, axis and `batch_dims`.
        type Case<'a> = (&'a [i64], &'a [i64], Option<i64>, i64);
        let cases: &[Case] = &[
            (&[5], &[4], None, 0),
            (&[3, 4], &[2, 3], None, 0),
            (&[3, 4], &[], None, 0),
            (&[3, 4], &[0], None, 0),
            (&[0, 3], &[0], None, 0),
            (&[5], &[4], Some(0), 0),
            (&[3, 4], &[2, 3], Some(0), 0),
            (&[3, 4], &[2, 3], Some(1), 0),
            (&[3, 4], &[5], Some(-1), 0),
            (&[3, 4], &[], Some(1), 0),
            (&[2, 3, 4], &[2, 5], Some(1), 1),
            (&[2, 3, 4], &[2, 5], Some(2), 1),
            (&[2, 3, 4], &[2, 3, 2], Some(2), -1),
            (&[2, 3, 4], &[2, 3], Some(2), 2),
            (&[2, 1, 4], &[3], Some(1), 0),
            (&[2, 0, 4], &[0], Some(1), 0),
            (&[2, 3, 0], &[2], Some(1), 0),
        ];
        for &(data, ind, axis, batch) in cases {
            let n = match axis {
                Some(a) => data[(a + data.len() as i64) as usize % data.len()],
                None => data.iter().product(),
            };
            for mode in ["clip", "wrap", "fast"] {
                let set = [
                    ("axis", axis.map_or(AttrValue::Null, int)),
                    ("batch_dims", int(batch)),
                    ("mode", text(mode)),
                ];
                let a = attrs("take", &set);
                for dtype in DTYPES {
                    for index_dtype in index_dtypes {
                        let x = random(&mut rng, dtype, data);
                        // `fast` assumes the indices are in range; the reference reports those
                        // that are not.
                        let i = indices(&mut rng, index_dtype, ind, n, mode == "fast");
                        assert!(check_op("take", &[x, i], &a), "{data:?} {ind:?} {set:?}");
                    }
                }
            }
        }
        // `fast` with indices out of range: the reference reports them, the kernel clamps
        // them, and never reads out of bounds.
        for &(data, ind, axis, batch) in cases {
            let set = [
                ("axis", axis.map_or(AttrValue::Null, int)),
                ("batch_dims", int(batch)),
                ("mode", text("fast")),
            ];
            for index_dtype in index_dtypes {
                let x = random(&mut rng, DType::F32, data);
                let i = random(&mut rng, index_dtype, ind);
                assert_reads_in_bounds("take", &[x, i], false, &attrs("take", &set));
            }
        }
        // Taking from an empty axis fails in both.
        let x = random(&mut rng, DType::F32, &[2, 0]);
        let i = random(&mut rng, DType::I32, &[3]);
        assert!(check_op(
            "take",
            &[x, i],
            &attrs("take", &[("axis", int(1))])
        ));
    }
}
