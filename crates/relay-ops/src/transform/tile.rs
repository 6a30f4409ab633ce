//! Repetition and reversal: `tile`, `repeat` and `reverse`, with their type relations,
//! reference evaluations and compute definitions, and the table entry of `reverse_sequence`.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrKind as K, Attrs, Dim, OpPattern as P, OpSchema, Type, Value,
};

use super::{
    DATA, concrete, data_type, dim_mul, empty_output, expect_shape, gather, ix_div_c, ix_mod_c,
    list_text, num_elements, unflatten,
};
use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, attr_int, attr_ints, attr_opt_int, axis_index, dims, element_count, strides,
    tensor, value,
};
use crate::{field, nullable, op, required};

/// The repetition and reversal operators.
pub(super) static OPS: &[OpSchema] = &[
    // Repetition and reversal.
    op(
        "tile",
        DATA,
        "relay.attrs.TileAttrs",
        &[required("reps", K::IntArray)],
    )
    .with(P::Injective, tile_rel, tile_eval)
    .with_compute(tile_te),
    op(
        "repeat",
        DATA,
        "relay.attrs.RepeatAttrs",
        &[required("repeats", K::Int), nullable("axis", K::Int)],
    )
    .with(P::Injective, repeat_rel, repeat_eval)
    .with_compute(repeat_te),
    op(
        "reverse",
        DATA,
        "relay.attrs.ReverseAttrs",
        &[nullable("axis", K::Int)],
    )
    .with(P::Injective, reverse_rel, reverse_eval)
    .with_compute(reverse_te),
    op(
        "reverse_sequence",
        &["data", "seq_lengths"],
        "relay.attrs.ReverseSequenceAttrs",
        &[
            field("seq_axis", K::Int, D::Int(1)),
            field("batch_axis", K::Int, D::Int(0)),
        ],
    ),
];

// ----- Type relations and reference evaluation -----

/// `tile`: the shape and the `reps` both padded with leading 1s to the longer rank, then
/// multiplied. Every repetition count must be positive (TVM).
fn tile_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    let reps = attr_ints(attrs, "reps")?;
    if let Some(&r) = reps.iter().find(|&&r| r <= 0) {
        return Err(OpError::attribute(
            "reps",
            format!("`reps` must be positive, got {r} in {}", list_text(&reps)),
        ));
    }
    let rank = shape.len().max(reps.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let d = if i + shape.len() >= rank {
            shape[i + shape.len() - rank]
        } else {
            Dim::Known(1)
        };
        let r = if i + reps.len() >= rank {
            reps[i + reps.len() - rank]
        } else {
            1
        };
        out.push(dim_mul(d, Dim::Known(r))?);
    }
    Ok(out)
}

fn tile_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(tile_shape(shape, attrs)?, dtype))
}

fn tile_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let out_shape = concrete(&tile_shape(&dims(x.shape()), attrs)?)?;
    let xs = x.shape().to_vec();
    let st = strides(&xs);
    let offset = out_shape.len() - xs.len();
    value(gather(x, &out_shape, |idx| {
        Ok(xs
            .iter()
            .enumerate()
            .map(|(d, &n)| (idx[offset + d] % n.max(1)) * st[d])
            .sum())
    }))
}

/// `repeat`'s axis (`None`: the data is flattened first, as numpy does) and count.
fn repeat_args(rank: usize, attrs: &Attrs) -> Result<(Option<usize>, i64), OpError> {
    let repeats = attr_int(attrs, "repeats")?;
    if repeats < 1 {
        return Err(OpError::attribute(
            "repeats",
            format!("`repeats` must be at least 1, got {repeats}"),
        ));
    }
    let axis = match attr_opt_int(attrs, "axis")? {
        Some(a) => Some(axis_index(a, rank)?),
        None => None,
    };
    Ok((axis, repeats))
}

fn repeat_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    let (axis, repeats) = repeat_args(shape.len(), attrs)?;
    Ok(match axis {
        Some(a) => {
            let mut out = shape.to_vec();
            out[a] = dim_mul(shape[a], Dim::Known(repeats))?;
            out
        }
        None => {
            let total = element_count(shape).map_or(Dim::Any, |n| Dim::Known(n as i64));
            vec![dim_mul(total, Dim::Known(repeats))?]
        }
    })
}

fn repeat_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(repeat_shape(shape, attrs)?, dtype))
}

fn repeat_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let (axis, repeats) = repeat_args(x.ndim(), attrs)?;
    let out_shape = concrete(&repeat_shape(&dims(x.shape()), attrs)?)?;
    let st = strides(x.shape());
    value(gather(x, &out_shape, |idx| {
        Ok(match axis {
            Some(a) => idx
                .iter()
                .enumerate()
                .map(|(d, &i)| if d == a { i / repeats } else { i } * st[d])
                .sum(),
            None => idx[0] / repeats,
        })
    }))
}

/// The dimensions `reverse` flips: `axis`, or every one when `None`.
fn reversed_axes(rank: usize, attrs: &Attrs) -> Result<Vec<bool>, OpError> {
    match attr_opt_int(attrs, "axis")? {
        Some(a) => {
            let d = axis_index(a, rank)?;
            Ok((0..rank).map(|i| i == d).collect())
        }
        None => Ok(vec![true; rank]),
    }
}

fn reverse_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    reversed_axes(shape.len(), attrs)?;
    Ok(tensor(shape.to_vec(), dtype))
}

fn reverse_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let flip = reversed_axes(x.ndim(), attrs)?;
    let xs = x.shape().to_vec();
    let st = strides(&xs);
    value(gather(x, &xs, |idx| {
        Ok(idx
            .iter()
            .enumerate()
            .map(|(d, &i)| if flip[d] { xs[d] - 1 - i } else { i } * st[d])
            .sum())
    }))
}

// ----- Compute definitions -----

/// `tile`: every input dimension read at the output index modulo its extent.
fn tile_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    expect_shape("tile", &shape, &tile_shape(&dims(&x.shape), attrs)?)?;
    let offset = shape
        .len()
        .checked_sub(x.shape.len())
        .ok_or_else(|| OpError::shape("tile's output has a lower rank than its input"))?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_tile", &shape, dtype));
    }
    let t = Tensor::compute("T_tile", &shape, |i| {
        let at: Vec<TExpr> = x
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                if n == shape[offset + d] {
                    i[offset + d].clone()
                } else {
                    ix_mod_c(i[offset + d].clone(), n)
                }
            })
            .collect();
        x.at(&at)
    });
    compute::tensor_value(t)
}

/// `repeat`: the output index along the axis (or the flat output position) divided by the
/// count.
fn repeat_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let (axis, repeats) = repeat_args(x.shape.len(), attrs)?;
    expect_shape("repeat", &shape, &repeat_shape(&dims(&x.shape), attrs)?)?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_repeat", &shape, dtype));
    }
    let t = Tensor::compute("T_repeat", &shape, |i| match axis {
        Some(a) => {
            let mut at = i.to_vec();
            at[a] = ix_div_c(i[a].clone(), repeats);
            x.at(&at)
        }
        None => x.at(&unflatten(ix_div_c(i[0].clone(), repeats), &x.shape)),
    });
    compute::tensor_value(t)
}

/// `reverse`: `n - 1 - i` along the flipped dimensions.
fn reverse_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let flip = reversed_axes(x.shape.len(), attrs)?;
    expect_shape("reverse", &shape, &dims(&x.shape))?;
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_reverse", &shape, dtype));
    }
    let t = Tensor::compute("T_reverse", &shape, |i| {
        let at: Vec<TExpr> = i
            .iter()
            .zip(&flip)
            .zip(&x.shape)
            .map(|((i, &f), &n)| {
                if f && n > 1 {
                    TExpr::index(n - 1).binary(BinaryOp::Sub, i.clone())
                } else if f {
                    TExpr::index(0)
                } else {
                    i.clone()
                }
            })
            .collect();
        x.at(&at)
    });
    compute::tensor_value(t)
}

#[cfg(test)]
mod tests {

    use relay_ir::{AttrValue, DType};

    use crate::compute::op_tests::Rng;

    use crate::testing::ints;
    use crate::transform::testing::*;

    #[test]
    fn tile_repeat_reverse() {
        let x = f32ty(&[2, 3]);
        let reps = |r: &[i64]| rel("tile", &[&x], &[("reps", ints(r))]);
        assert_eq!(reps(&[2, 2]).unwrap(), "Tensor[(4, 6), float32]");
        assert_eq!(reps(&[2, 1, 2]).unwrap(), "Tensor[(2, 2, 6), float32]");
        assert_eq!(reps(&[3]).unwrap(), "Tensor[(2, 9), float32]");
        assert!(reps(&[0, 1]).is_err());
        let rep =
            |n: i64, axis: AttrValue| rel("repeat", &[&x], &[("repeats", int(n)), ("axis", axis)]);
        assert_eq!(rep(2, int(1)).unwrap(), "Tensor[(2, 6), float32]");
        assert_eq!(rep(3, int(-2)).unwrap(), "Tensor[(6, 3), float32]");
        assert_eq!(rep(2, AttrValue::Null).unwrap(), "Tensor[(12), float32]");
        assert!(rep(0, int(0)).is_err() && rep(2, int(2)).is_err());
        assert_eq!(
            rel("reverse", &[&x], &[("axis", int(-1))]).unwrap(),
            "Tensor[(2, 3), float32]"
        );
        assert!(rel("reverse", &[&x], &[("axis", int(2))]).is_err());
        assert_eq!(
            rel("tile", &[&any_ty(&[-1, 3])], &[("reps", ints(&[2, 2]))]).unwrap(),
            "Tensor[(?, 6), float32]"
        );
        for dtype in SHAPE_DTYPES {
            let map = |v: &[i128]| -> Vec<i128> {
                v.iter()
                    .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                    .collect()
            };
            let m = iota(dtype, &[2, 3]);
            let (s, d, v) = parts(&eval("tile", &[&m], &[("reps", ints(&[2, 1, 2]))]).unwrap());
            assert_eq!((s, d), (vec![2, 2, 6], dtype));
            assert_eq!(
                v,
                map(&[
                    0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5
                ])
            );
            let (s, _, v) =
                parts(&eval("repeat", &[&m], &[("repeats", int(2)), ("axis", int(1))]).unwrap());
            assert_eq!(s, vec![2, 6]);
            assert_eq!(v, map(&[0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]));
            let x = iota(dtype, &[2, 3, 4]);
            let (s, _, v) = parts(&eval("reverse", &[&x], &[("axis", int(1))]).unwrap());
            assert_eq!(s, vec![2, 3, 4]);
            assert_eq!(
                v,
                map(&[
                    8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3, 20, 21, 22, 23, 16, 17, 18, 19, 12, 13,
                    14, 15
                ])
            );
        }
        let m = iota(DType::I32, &[2, 2]);
        let (s, v) = shape_values(&eval("repeat", &[&m], &[("repeats", int(2))]).unwrap());
        assert_eq!((s, v), (vec![8], vec![0, 0, 1, 1, 2, 2, 3, 3]));
        let (s, v) = shape_values(&eval("reverse", &[&m], &[]).unwrap());
        assert_eq!((s, v), (vec![2, 2], vec![3, 2, 1, 0]));
        let e = iota(DType::F32, &[0, 2]);
        let (s, _) = shape_values(&eval("tile", &[&e], &[("reps", ints(&[3, 1]))]).unwrap());
        assert_eq!(s, vec![0, 2]);
        let (s, _) = shape_values(&eval("reverse", &[&e], &[("axis", int(0))]).unwrap());
        assert_eq!(s, vec![0, 2]);
        let one = iota(DType::I8, &[1]);
        let (s, v) = shape_values(&eval("tile", &[&one], &[("reps", ints(&[3]))]).unwrap());
        assert_eq!((s, v), (vec![3], vec![0, 0, 0]));
    }

    #[test]
    fn tile_repeat_reverse_compute() {
        let mut rng = Rng(0x5eed_0009);
        for (shape, reps) in [
            (&[2, 3][..], &[1][..]),
            (&[2, 3], &[2]),
            (&[2, 3], &[2, 1]),
            (&[2, 3], &[3, 2, 2]),
            (&[2, 3], &[1, 1, 1]),
            (&[], &[3]),
            (&[], &[2, 2]),
            (&[0, 2], &[2, 2]),
            (&[1, 3], &[4, 1]),
            (&[3, 1, 2], &[2, 5]),
        ] {
            check_all(&mut rng, "tile", shape, &[("reps", ints(reps))]);
        }
        for (shape, repeats, axis) in [
            (&[2, 3][..], 1, None),
            (&[2, 3], 2, None),
            (&[2, 3], 3, Some(0)),
            (&[2, 3], 2, Some(1)),
            (&[2, 3], 2, Some(-1)),
            (&[2, 3], 3, Some(-2)),
            (&[], 3, None),
            (&[0, 2], 2, Some(1)),
            (&[0, 2], 2, None),
            (&[1, 5, 1], 4, Some(2)),
        ] {
            let set = [
                ("repeats", int(repeats)),
                ("axis", axis.map_or(AttrValue::Null, int)),
            ];
            check_all(&mut rng, "repeat", shape, &set);
        }
        for (shape, axis) in [
            (&[2, 3, 4][..], None),
            (&[2, 3, 4], Some(0)),
            (&[2, 3, 4], Some(1)),
            (&[2, 3, 4], Some(-1)),
            (&[2, 3, 4], Some(-3)),
            (&[1], None),
            (&[5], Some(0)),
            (&[0, 3], Some(1)),
            (&[3, 1], Some(1)),
            (&[], None),
        ] {
            check_all(
                &mut rng,
                "reverse",
                shape,
                &[("axis", axis.map_or(AttrValue::Null, int))],
            );
        }
    }
}
