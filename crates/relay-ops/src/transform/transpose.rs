//! Axis permutation and insertion: `transpose`, `expand_dims` and `squeeze`, with their type
//! relations, reference evaluations and compute definitions (`expand_dims` and `squeeze` keep
//! the element order, so they compute as reshapes).

use relay_ir::OpError;
use relay_ir::te::{TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, Dim, NDArray, OpPattern as P, OpSchema,
    Type, Value,
};

use super::reshape::reshape_te;
use super::{DATA, data_type, expect_shape, gather, reshaped};
use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, attr_int, attr_opt_ints, axis_index, dims, insert_index, strides, tensor, value,
};
use crate::{field, nullable, op, required, required_nullable};

/// `SqueezeAttrs`; `axis=None` squeezes every dimension of size 1.
pub(crate) const SQUEEZE_ATTRS: &[AttrField] = &[nullable("axis", K::IntArray)];

/// The most dimensions `expand_dims` adds at once; more is surely a mistake, and would
/// exhaust memory.
const MAX_RANK: i64 = 1024;

/// The axis permutation and insertion operators.
pub(super) static OPS: &[OpSchema] = &[
    op(
        "transpose",
        DATA,
        "relay.attrs.TransposeAttrs",
        &[required_nullable("axes", K::IntArray)],
    )
    .with(P::Injective, transpose_rel, transpose_eval)
    .with_compute(transpose_te),
    op(
        "expand_dims",
        DATA,
        "relay.attrs.ExpandDimsAttrs",
        &[
            required("axis", K::Int),
            field("num_newaxis", K::Int, D::Int(1)),
        ],
    )
    .with(P::Injective, expand_dims_rel, expand_dims_eval)
    .with_compute(|i, _, o| reshape_te("T_expand_dims", i, o)),
    op("squeeze", DATA, "relay.attrs.SqueezeAttrs", SQUEEZE_ATTRS)
        .with(P::Injective, squeeze_rel, squeeze_eval)
        .with_compute(|i, _, o| reshape_te("T_squeeze", i, o)),
];

// ----- Type relations and reference evaluation -----

/// The permutation `transpose` applies: `axes`, or the reversed axes when `None` or empty.
pub(crate) fn permutation(rank: usize, attrs: &Attrs) -> Result<Vec<usize>, OpError> {
    let axes = attr_opt_ints(attrs, "axes")?.unwrap_or_default();
    if axes.is_empty() {
        return Ok((0..rank).rev().collect());
    }
    if axes.len() != rank {
        return Err(OpError::attribute(
            "axes",
            format!(
                "`axes` must have {rank} values for a tensor of rank {rank}, got {}",
                axes.len()
            ),
        ));
    }
    let mut seen = vec![false; rank];
    let mut perm = Vec::with_capacity(rank);
    for &a in &axes {
        let d = axis_index(a, rank)?;
        if seen[d] {
            return Err(OpError::attribute(
                "axes",
                format!("`axes` lists dimension {d} twice"),
            ));
        }
        seen[d] = true;
        perm.push(d);
    }
    Ok(perm)
}

/// `transpose`: the dimensions in the order of its [`permutation`].
pub(crate) fn transpose_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    let perm = permutation(shape.len(), attrs)?;
    Ok(perm.iter().map(|&p| shape[p]).collect())
}

fn transpose_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(transpose_shape(shape, attrs)?, dtype))
}

fn transpose_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let perm = permutation(x.ndim(), attrs)?;
    value(transposed(x, &perm))
}

/// `x` with its axes permuted: axis `k` of the result is axis `perm[k]` of `x`.
pub(crate) fn transposed(x: &NDArray, perm: &[usize]) -> Result<NDArray, OpError> {
    if perm == [1, 0] {
        return x.transposed_2d().map_err(OpError::from_runtime);
    }
    let out_shape: Vec<i64> = perm.iter().map(|&p| x.shape()[p]).collect();
    let st = strides(x.shape());
    gather(x, &out_shape, |idx| {
        Ok(idx.iter().zip(perm).map(|(&i, &p)| i * st[p]).sum())
    })
}

pub(crate) fn expand_dims_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    let axis = attr_int(attrs, "axis")?;
    let count = attr_int(attrs, "num_newaxis")?;
    if !(0..=MAX_RANK).contains(&count) {
        return Err(OpError::attribute(
            "num_newaxis",
            format!("`num_newaxis` must be between 0 and {MAX_RANK}, got {count}"),
        ));
    }
    let at = insert_index(axis, shape.len())?;
    let mut out = shape[..at].to_vec();
    out.extend(std::iter::repeat_n(Dim::Known(1), count as usize));
    out.extend_from_slice(&shape[at..]);
    Ok(out)
}

fn expand_dims_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(expand_dims_shape(shape, attrs)?, dtype))
}

fn expand_dims_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &expand_dims_shape(&dims(x.shape()), attrs)?)
}

/// `squeeze`: the listed dimensions removed (each must be 1), or with `axis=None` every
/// dimension known to be 1.
pub(crate) fn squeeze_shape(shape: &[Dim], attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    let Some(axes) = attr_opt_ints(attrs, "axis")? else {
        return Ok(shape
            .iter()
            .copied()
            .filter(|&d| d != Dim::Known(1))
            .collect());
    };
    let mut drop = vec![false; shape.len()];
    for &a in &axes {
        let d = axis_index(a, shape.len())?;
        if let Dim::Known(n) = shape[d]
            && n != 1
        {
            return Err(OpError::shape(format!(
                "cannot squeeze axis {a}: its dimension is {n}, not 1"
            )));
        }
        drop[d] = true;
    }
    Ok(shape
        .iter()
        .zip(&drop)
        .filter(|&(_, &dropped)| !dropped)
        .map(|(&d, _)| d)
        .collect())
}

fn squeeze_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(squeeze_shape(shape, attrs)?, dtype))
}

fn squeeze_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &squeeze_shape(&dims(x.shape()), attrs)?)
}

// ----- Compute definitions -----

/// `transpose`: output dimension `k` indexes input dimension `perm[k]`.
fn transpose_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let perm = permutation(x.shape.len(), attrs)?;
    let want: Vec<Dim> = perm.iter().map(|&p| Dim::Known(x.shape[p])).collect();
    expect_shape("transpose", &shape, &want)?;
    let t = Tensor::compute("T_transpose", &shape, |i| {
        let mut at = vec![TExpr::index(0); perm.len()];
        for (k, &p) in perm.iter().enumerate() {
            at[p] = i[k].clone();
        }
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
    fn transpose_expand_squeeze() {
        let x = f32ty(&[2, 3, 4]);
        let axes = |a: Option<&[i64]>| [("axes", a.map_or(AttrValue::Null, ints))];
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[2, 0, 1]))).unwrap(),
            "Tensor[(4, 2, 3), float32]"
        );
        assert_eq!(
            rel("transpose", &[&x], &axes(None)).unwrap(),
            "Tensor[(4, 3, 2), float32]"
        );
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[-1, 0, 1]))).unwrap(),
            "Tensor[(4, 2, 3), float32]"
        );
        assert!(rel("transpose", &[&x], &axes(Some(&[0, 1]))).is_err());
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[0, 0, 1]))).unwrap_err(),
            "`axes` lists dimension 0 twice"
        );
        assert_eq!(
            rel("transpose", &[&x], &axes(Some(&[0, 1, 3]))).unwrap_err(),
            "axis 3 is out of range for a tensor of rank 3"
        );
        let e = |axis: i64, n: i64| {
            rel(
                "expand_dims",
                &[&x],
                &[("axis", int(axis)), ("num_newaxis", int(n))],
            )
        };
        assert_eq!(e(1, 2).unwrap(), "Tensor[(2, 1, 1, 3, 4), float32]");
        assert_eq!(e(-1, 1).unwrap(), "Tensor[(2, 3, 4, 1), float32]");
        assert_eq!(e(-4, 1).unwrap(), "Tensor[(1, 2, 3, 4), float32]");
        assert_eq!(e(3, 0).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert!(e(4, 1).is_err() && e(-5, 1).is_err() && e(0, -1).is_err());
        let y = f32ty(&[1, 3, 1]);
        let sq = |a: Option<&[i64]>| {
            rel(
                "squeeze",
                &[&y],
                &[("axis", a.map_or(AttrValue::Null, ints))],
            )
        };
        assert_eq!(sq(None).unwrap(), "Tensor[(3), float32]");
        assert_eq!(sq(Some(&[-1])).unwrap(), "Tensor[(1, 3), float32]");
        assert_eq!(
            sq(Some(&[1])).unwrap_err(),
            "cannot squeeze axis 1: its dimension is 3, not 1"
        );
        assert_eq!(
            rel("squeeze", &[&any_ty(&[-1, 1])], &[]).unwrap(),
            "Tensor[(?), float32]"
        );
        for dtype in SHAPE_DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let (s, d, v) = parts(&eval("transpose", &[&x], &axes(Some(&[2, 0, 1]))).unwrap());
            assert_eq!((s, d), (vec![4, 2, 3], dtype));
            let expect: Vec<i128> = [
                0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19,
                23,
            ]
            .iter()
            .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
            .collect();
            assert_eq!(v, expect, "{dtype}");
            let z = eval(
                "expand_dims",
                &[&x],
                &[("axis", int(1)), ("num_newaxis", int(2))],
            )
            .unwrap();
            let (s, _, v) = parts(&z);
            assert_eq!(s, vec![2, 1, 1, 3, 4]);
            let back = eval("squeeze", &[&z], &[("axis", ints(&[1, 2]))]).unwrap();
            assert_eq!(parts(&back), (vec![2, 3, 4], dtype, v));
        }
        let m = iota(DType::I32, &[2, 3]);
        let (s, v) = shape_values(&eval("transpose", &[&m], &axes(None)).unwrap());
        assert_eq!((s, v), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
        let (s, _) =
            shape_values(&eval("transpose", &[&iota(DType::F32, &[0, 2])], &axes(None)).unwrap());
        assert_eq!(s, vec![2, 0]);
        let (s, _) = shape_values(&eval("squeeze", &[&iota(DType::I8, &[1, 1])], &[]).unwrap());
        assert_eq!(s, Vec::<i64>::new());
        assert!(eval("squeeze", &[&m], &[("axis", ints(&[0]))]).is_err());
    }

    #[test]
    fn transpose_expand_dims_squeeze() {
        let mut rng = Rng(0x5eed_0003);
        let transposes: &[(&[i64], Option<&[i64]>)] = &[
            (&[2, 3, 4], None),
            (&[2, 3, 4], Some(&[])),
            (&[2, 3, 4], Some(&[0, 1, 2])),
            (&[2, 3, 4], Some(&[2, 0, 1])),
            (&[2, 3, 4], Some(&[-1, 0, -2])),
            (&[2, 3, 4], Some(&[1, 0, 2])),
            (&[3, 0, 1], Some(&[2, 0, 1])),
            (&[1, 5], None),
            (&[5], Some(&[-1])),
            (&[], None),
            (&[2, 1, 3, 2], Some(&[3, 1, 0, 2])),
        ];
        for &(shape, axes) in transposes {
            let axes = axes.map_or(AttrValue::Null, ints);
            check_all(&mut rng, "transpose", shape, &[("axes", axes)]);
        }
        for (shape, axis, count) in [
            (&[2, 3][..], 0, 1),
            (&[2, 3], 1, 2),
            (&[2, 3], 2, 1),
            (&[2, 3], -1, 3),
            (&[2, 3], -3, 1),
            (&[2, 3], 1, 0),
            (&[], 0, 2),
            (&[0, 2], -2, 1),
        ] {
            let set = [("axis", int(axis)), ("num_newaxis", int(count))];
            check_all(&mut rng, "expand_dims", shape, &set);
        }
        let squeezes: &[(&[i64], Option<&[i64]>)] = &[
            (&[1, 2, 1, 3], None),
            (&[1, 2, 1, 3], Some(&[0])),
            (&[1, 2, 1, 3], Some(&[-2])),
            (&[1, 2, 1, 3], Some(&[0, 2])),
            (&[1, 2, 1, 3], Some(&[])),
            (&[1], None),
            (&[1, 0, 1], None),
            (&[1, 0, 1], Some(&[-1])),
            (&[], None),
            (&[3, 5], None),
        ];
        for &(shape, axis) in squeezes {
            let axis = axis.map_or(AttrValue::Null, ints);
            check_all(&mut rng, "squeeze", shape, &[("axis", axis)]);
        }
    }
}
