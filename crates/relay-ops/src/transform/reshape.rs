//! Reshaping: `reshape` (TVM's `newshape` codes), `contrib_reverse_reshape` and `reshape_like`,
//! with their type relations, reference evaluations and compute definitions.

use relay_ir::OpError;
use relay_ir::te::{TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, Dim, OpPattern as P, OpSchema, Type, Value,
};

use super::{
    DATA, data_type, dim_mul, empty_output, flat_position, list_text, num_elements, reshaped,
    unflatten,
};
use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, attr_bool, attr_int, attr_ints, attr_opt_int, dims, element_count, expect_inputs,
    shape_text, tensor, tensor_type,
};
use crate::{field, nullable, op, required};

/// `ReshapeAttrs`, shared by `reshape` and `contrib_reverse_reshape`.
const RESHAPE_ATTRS: &[AttrField] = &[
    required("newshape", K::IntArray),
    field("allowzero", K::Bool, D::Bool(false)),
];

/// The reshaping operators.
pub(super) static OPS: &[OpSchema] = &[
    // Reshaping.
    op("reshape", DATA, "relay.attrs.ReshapeAttrs", RESHAPE_ATTRS)
        .with(P::Injective, reshape_rel, reshape_eval)
        .with_compute(|i, _, o| reshape_te("T_reshape", i, o)),
    op(
        "contrib_reverse_reshape",
        DATA,
        "relay.attrs.ReshapeAttrs",
        RESHAPE_ATTRS,
    )
    .with(P::Injective, reverse_reshape_rel, reverse_reshape_eval)
    .with_compute(|i, _, o| reshape_te("T_reverse_reshape", i, o)),
    op(
        "reshape_like",
        &["data", "shape_like"],
        "relay.attrs.ReshapeLikeAttrs",
        &[
            field("lhs_begin", K::Int, D::Int(0)),
            nullable("lhs_end", K::Int),
            field("rhs_begin", K::Int, D::Int(0)),
            nullable("rhs_end", K::Int),
        ],
    )
    .with(P::Injective, reshape_like_rel, reshape_like_eval)
    .with_compute(|i, _, o| reshape_te("T_reshape_like", i, o)),
];

// ----- Type relations and reference evaluation -----

/// TVM's `InferNewShape`: the shape `newshape` asks of a tensor of shape `ishape`, with the
/// special values `0` (copy a dimension, unless `allowzero`), `-1` (infer one dimension), `-2`
/// (copy the rest), `-3` (merge two dimensions) and `-4` (split one dimension in two, the next
/// two values, one of which may be `-1`). Unlike TVM, `-1` after `-2`, `-3` or `-4` fills its
/// own output position. The element counts must agree when every dimension is known.
fn infer_reshape(ishape: &[Dim], newshape: &[i64], allowzero: bool) -> Result<Vec<Dim>, OpError> {
    let fail = |why: String| {
        OpError::shape(format!(
            "reshape cannot turn {} into {}: {why}",
            shape_text(ishape),
            list_text(newshape)
        ))
    };
    let mut codes = read_codes(ishape, newshape, allowzero, &fail)?;
    if let Some(k) = codes.infer {
        codes.out[k] = infer_dim(ishape, &codes, k, &fail)?;
    }
    if let (Some(a), Some(b)) = (element_count(ishape), element_count(&codes.out))
        && a != b
    {
        return Err(fail(format!(
            "the input has {a} elements, the new shape {b}"
        )));
    }
    Ok(codes.out)
}

/// The output dimensions a `newshape` describes before its `-1` is inferred.
struct Codes {
    out: Vec<Dim>,
    /// Whether each input (output) dimension was copied, merged or split, so that inference
    /// can skip the dimensions that cancel out.
    used_in: Vec<bool>,
    used_out: Vec<bool>,
    /// The output position of the `-1`, if any (it holds 1 until inferred).
    infer: Option<usize>,
}

/// Reads the sizes and special values of `newshape` against `ishape` (see [`infer_reshape`]);
/// `fail` words the errors about the codes.
fn read_codes(
    ishape: &[Dim],
    newshape: &[i64],
    allowzero: bool,
    fail: &impl Fn(String) -> OpError,
) -> Result<Codes, OpError> {
    let rank = ishape.len();
    let mut codes = Codes {
        out: Vec::with_capacity(newshape.len()),
        used_in: vec![false; rank],
        used_out: Vec::with_capacity(newshape.len()),
        infer: None,
    };
    let mut src = 0usize;
    let mut i = 0usize;
    while i < newshape.len() {
        match newshape[i] {
            v if v > 0 || (v == 0 && allowzero) => {
                codes.out.push(Dim::Known(v));
                codes.used_out.push(false);
                src += 1;
            }
            0 => {
                let d = *ishape.get(src).ok_or_else(|| {
                    fail(format!(
                        "`0` at position {i} copies input dimension {src}, which does not exist"
                    ))
                })?;
                codes.used_in[src] = true;
                codes.out.push(d);
                codes.used_out.push(true);
                src += 1;
            }
            -1 => {
                if codes.infer.is_some() {
                    return Err(fail("only one dimension can be -1".into()));
                }
                codes.infer = Some(codes.out.len());
                codes.out.push(Dim::Known(1));
                codes.used_out.push(false);
                src += 1;
            }
            -2 => {
                while src < rank {
                    codes.used_in[src] = true;
                    codes.out.push(ishape[src]);
                    codes.used_out.push(true);
                    src += 1;
                }
            }
            -3 => {
                if src + 1 >= rank {
                    return Err(fail(format!(
                        "`-3` at position {i} merges input dimensions {src} and {}, which do not both exist",
                        src + 1
                    )));
                }
                codes.used_in[src] = true;
                codes.used_in[src + 1] = true;
                codes.out.push(dim_mul(ishape[src], ishape[src + 1])?);
                codes.used_out.push(true);
                src += 2;
            }
            -4 => {
                let (x, y) = split_code(ishape, newshape, i, src, fail)?;
                codes.used_in[src] = true;
                codes.out.extend([x, y]);
                codes.used_out.extend([true, true]);
                src += 1;
                i += 2;
            }
            v => {
                return Err(fail(format!(
                    "{v} is not a size or a special value (0, -1, -2, -3, -4)"
                )));
            }
        }
        i += 1;
    }
    Ok(codes)
}

/// The two dimensions a `-4` at position `i` of `newshape` splits input dimension `src` into:
/// the next two values, one of which may be `-1`.
fn split_code(
    ishape: &[Dim],
    newshape: &[i64],
    i: usize,
    src: usize,
    fail: &impl Fn(String) -> OpError,
) -> Result<(Dim, Dim), OpError> {
    let (Some(&a), Some(&b)) = (newshape.get(i + 1), newshape.get(i + 2)) else {
        return Err(fail(format!(
            "`-4` at position {i} must be followed by two values"
        )));
    };
    let d0 = *ishape.get(src).ok_or_else(|| {
        fail(format!(
            "`-4` at position {i} splits input dimension {src}, which does not exist"
        ))
    })?;
    if a < -1 || b < -1 || (a == -1 && b == -1) {
        return Err(fail(format!(
            "`-4` must be followed by two sizes, at most one of them -1, got {a} and {b}"
        )));
    }
    let split = |d0: Dim, by: i64| -> Result<Dim, OpError> {
        match d0 {
            Dim::Known(n) if by == 0 || n % by != 0 => Err(fail(format!(
                "dimension {n} does not split into ({a}, {b})"
            ))),
            Dim::Known(n) => Ok(Dim::Known(n / by)),
            Dim::Any => Ok(Dim::Any),
        }
    };
    Ok(match (a, b) {
        (-1, b) => (split(d0, b)?, Dim::Known(b)),
        (a, -1) => (Dim::Known(a), split(d0, a)?),
        (a, b) => (Dim::Known(a), Dim::Known(b)),
    })
}

/// The dimension the `-1` at output position `k` stands for: the element counts divided when
/// every dimension is known, else those of the dimensions not copied, merged or split (as in
/// TVM), `?` when they are not known either.
fn infer_dim(
    ishape: &[Dim],
    codes: &Codes,
    k: usize,
    fail: &impl Fn(String) -> OpError,
) -> Result<Dim, OpError> {
    let others: Vec<Dim> = codes
        .out
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != k)
        .map(|(_, &d)| d)
        .collect();
    if let (Some(total), Some(rest)) = (element_count(ishape), element_count(&others)) {
        if rest == 0 {
            return Err(fail(
                "the -1 cannot be inferred next to a dimension of size 0".into(),
            ));
        }
        if total % rest != 0 {
            return Err(fail(format!("{total} elements do not divide by {rest}")));
        }
        return Ok(Dim::Known((total / rest) as i64));
    }
    let free_in: Vec<Dim> = (0..ishape.len())
        .filter(|&j| !codes.used_in[j])
        .map(|j| ishape[j])
        .collect();
    let free_out: Vec<Dim> = (0..codes.out.len())
        .filter(|&j| !codes.used_out[j] && j != k)
        .map(|j| codes.out[j])
        .collect();
    match (element_count(&free_in), element_count(&free_out)) {
        (Some(a), Some(b)) if b != 0 && a % b == 0 => Ok(Dim::Known((a / b) as i64)),
        (Some(a), Some(b)) if b != 0 => Err(fail(format!("{a} elements do not divide by {b}"))),
        _ => Ok(Dim::Any),
    }
}

/// The new shape of a `reshape` (or, `reverse`, of a `contrib_reverse_reshape`, which reads
/// both shapes from the right).
pub(crate) fn reshape_shape(
    shape: &[Dim],
    attrs: &Attrs,
    reverse: bool,
) -> Result<Vec<Dim>, OpError> {
    let newshape = attr_ints(attrs, "newshape")?;
    let allowzero = attr_bool(attrs, "allowzero")?;
    if !reverse {
        return infer_reshape(shape, &newshape, allowzero);
    }
    let rshape: Vec<Dim> = shape.iter().rev().copied().collect();
    let rnew: Vec<i64> = newshape.iter().rev().copied().collect();
    let mut out = infer_reshape(&rshape, &rnew, allowzero)?;
    out.reverse();
    Ok(out)
}

fn reshape_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(reshape_shape(shape, attrs, false)?, dtype))
}

fn reshape_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &reshape_shape(&dims(x.shape()), attrs, false)?)
}

fn reverse_reshape_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(reshape_shape(shape, attrs, true)?, dtype))
}

fn reverse_reshape_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    reshaped(x, &reshape_shape(&dims(x.shape()), attrs, true)?)
}

/// `reshape_like`: `data`'s dimensions `lhs_begin..lhs_end` replaced by `shape_like`'s
/// `rhs_begin..rhs_end` (ends default to the rank; negative values count from the end).
pub(crate) fn reshape_like_shape(
    lhs: &[Dim],
    rhs: &[Dim],
    attrs: &Attrs,
) -> Result<Vec<Dim>, OpError> {
    // The attributes by their whole names (a shape function reads them at every new shape).
    let range = |[b, e]: [&str; 2], rank: usize| -> Result<(usize, usize), OpError> {
        let r = rank as i64;
        let norm = |v: i64| if v < 0 { v + r } else { v };
        let begin = norm(attr_int(attrs, b)?);
        let end = norm(attr_opt_int(attrs, e)?.unwrap_or(r));
        if !(0 <= begin && begin <= end && end <= r) {
            return Err(OpError::shape(format!(
                "`{b}` and `{e}` select dimensions {begin}..{end}, outside a tensor of rank {rank}"
            )));
        }
        Ok((begin as usize, end as usize))
    };
    let (lb, le) = range(["lhs_begin", "lhs_end"], lhs.len())?;
    let (rb, re) = range(["rhs_begin", "rhs_end"], rhs.len())?;
    let out: Vec<Dim> = lhs[..lb]
        .iter()
        .chain(&rhs[rb..re])
        .chain(&lhs[le..])
        .copied()
        .collect();
    if let (Some(a), Some(b)) = (element_count(lhs), element_count(&out))
        && a != b
    {
        return Err(OpError::shape(format!(
            "reshape_like cannot turn {} into {}: {a} elements, not {b}",
            shape_text(lhs),
            shape_text(&out)
        )));
    }
    Ok(out)
}

fn reshape_like_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    expect_inputs(inputs, 2)?;
    let (lhs, dtype) = tensor_type(&inputs[0], "the data")?;
    let (rhs, _) = tensor_type(&inputs[1], "`shape_like`")?;
    Ok(tensor(reshape_like_shape(lhs, rhs, attrs)?, dtype))
}

fn reshape_like_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let like = arg_tensor(args, 1)?;
    reshaped(
        x,
        &reshape_like_shape(&dims(x.shape()), &dims(like.shape()), attrs)?,
    )
}

// ----- Compute definitions -----

/// The index into a tensor of shape `from` of the element a reshape to `to` puts at `index`
/// (both shapes of the same positive number of elements). The shapes are cut into the shortest
/// groups of consecutive dimensions with equal products, and each group is mapped on its own,
/// so that dimensions a reshape leaves alone keep their loop variables.
fn reshape_index(index: &[TExpr], to: &[i64], from: &[i64]) -> Vec<TExpr> {
    let mut out = Vec::with_capacity(from.len());
    let (mut i, mut j) = (0usize, 0usize);
    while i < from.len() || j < to.len() {
        let (i0, j0) = (i, j);
        let (mut pi, mut pj) = (1i64, 1i64);
        loop {
            if (pi <= pj && i < from.len()) || j >= to.len() {
                pi *= from[i];
                i += 1;
            } else {
                pj *= to[j];
                j += 1;
            }
            if pi == pj || (i >= from.len() && j >= to.len()) {
                break;
            }
        }
        let flat = flat_position(&index[j0..j], &to[j0..j]);
        out.extend(unflatten(flat, &from[i0..i]));
    }
    out
}

/// `data` read in the output's shape, row-major order kept: `reshape`,
/// `contrib_reverse_reshape`, `reshape_like`, `expand_dims` and `squeeze`.
pub(super) fn reshape_te(name: &str, inputs: &[TeValue], out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    if num_elements(&x.shape) != num_elements(&shape) {
        return Err(OpError::shape(format!(
            "{name} cannot turn shape {:?} into {shape:?}",
            x.shape
        )));
    }
    if num_elements(&shape) == 0 {
        return Ok(empty_output(name, &shape, dtype));
    }
    let t = Tensor::compute(name, &shape, |i| x.at(&reshape_index(i, &shape, &x.shape)));
    compute::tensor_value(t)
}

#[cfg(test)]
mod tests {

    use relay_ir::te::{TeValue, Tensor};
    use relay_ir::{AttrValue, DType, Type};

    use crate::compute::op_tests::{DTYPES, Rng, random};

    use crate::testing::{attrs, ints};
    use crate::transform::testing::*;

    #[test]
    fn reshape_special_values() {
        let x = f32ty(&[2, 3, 4]);
        let r = |ns: &[i64]| rel("reshape", &[&x], &[("newshape", ints(ns))]);
        assert_eq!(r(&[0, -1]).unwrap(), "Tensor[(2, 12), float32]");
        assert_eq!(r(&[4, 0, 2]).unwrap(), "Tensor[(4, 3, 2), float32]");
        assert_eq!(r(&[2, 0, 0]).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(r(&[6, 1, -1]).unwrap(), "Tensor[(6, 1, 4), float32]");
        assert_eq!(r(&[3, -1, 8]).unwrap(), "Tensor[(3, 1, 8), float32]");
        assert_eq!(r(&[-1]).unwrap(), "Tensor[(24), float32]");
        assert_eq!(r(&[-2]).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(r(&[2, -2]).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(r(&[-2, 1, 1]).unwrap(), "Tensor[(2, 3, 4, 1, 1), float32]");
        assert_eq!(r(&[-3, 4]).unwrap(), "Tensor[(6, 4), float32]");
        assert_eq!(r(&[0, -3]).unwrap(), "Tensor[(2, 12), float32]");
        assert_eq!(r(&[-3, -2]).unwrap(), "Tensor[(6, 4), float32]");
        assert_eq!(r(&[-4, 1, 2, -2]).unwrap(), "Tensor[(1, 2, 3, 4), float32]");
        assert_eq!(
            r(&[2, -4, -1, 3, 4]).unwrap(),
            "Tensor[(2, 1, 3, 4), float32]"
        );
        assert_eq!(
            r(&[-4, 2, -1, -2]).unwrap(),
            "Tensor[(2, 1, 3, 4), float32]"
        );
        assert_eq!(
            rel(
                "reshape",
                &[&f32ty(&[2, 3, 4, 5])],
                &[("newshape", ints(&[-3, -3]))]
            )
            .unwrap(),
            "Tensor[(6, 20), float32]"
        );
        // `allowzero` makes 0 a size.
        assert_eq!(
            rel(
                "reshape",
                &[&f32ty(&[0, 3])],
                &[
                    ("newshape", ints(&[3, 0])),
                    ("allowzero", AttrValue::Bool(true))
                ]
            )
            .unwrap(),
            "Tensor[(3, 0), float32]"
        );
        // Errors.
        assert_eq!(
            r(&[5, -1]).unwrap_err(),
            "reshape cannot turn (2, 3, 4) into (5, -1): 24 elements do not divide by 5"
        );
        assert_eq!(
            r(&[5, 5]).unwrap_err(),
            "reshape cannot turn (2, 3, 4) into (5, 5): the input has 24 elements, the new shape 25"
        );
        assert!(
            r(&[-1, -1])
                .unwrap_err()
                .contains("only one dimension can be -1")
        );
        assert!(r(&[0, 0, 0, 0]).unwrap_err().contains("does not exist"));
        assert!(r(&[2, -3, 1]).is_ok());
        assert!(r(&[2, 3, -3]).unwrap_err().contains("`-3` at position 2"));
        assert!(r(&[-4, 2]).unwrap_err().contains("followed by two values"));
        assert!(r(&[-4, -1, -1, -2]).is_err());
        assert!(
            r(&[-4, 4, -1, -2])
                .unwrap_err()
                .contains("dimension 2 does not split into (4, -1)")
        );
        assert!(r(&[-5]).unwrap_err().contains("-5 is not a size"));
        // Unknown dimensions.
        let d = any_ty(&[-1, 3, 4]);
        let r = |ns: &[i64]| rel("reshape", &[&d], &[("newshape", ints(ns))]);
        assert_eq!(r(&[0, -1]).unwrap(), "Tensor[(?, 12), float32]");
        assert_eq!(r(&[-1, 4]).unwrap(), "Tensor[(?, 4), float32]");
        assert_eq!(r(&[-3, 4]).unwrap(), "Tensor[(?, 4), float32]");
        assert_eq!(
            r(&[-4, 2, -1, -2]).unwrap(),
            "Tensor[(2, ?, 3, 4), float32]"
        );
        assert_eq!(r(&[0, 0, 2, 2]).unwrap(), "Tensor[(?, 3, 2, 2), float32]");
        // contrib_reverse_reshape reads from the right.
        assert_eq!(
            rel(
                "contrib_reverse_reshape",
                &[&f32ty(&[10, 5, 4])],
                &[("newshape", ints(&[-1, 0]))]
            )
            .unwrap(),
            "Tensor[(50, 4), float32]"
        );
    }

    #[test]
    fn reshape_moves_no_data() {
        for dtype in SHAPE_DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let y = eval("reshape", &[&x], &[("newshape", ints(&[-4, 1, 2, -2]))]).unwrap();
            let (s, d, v) = parts(&y);
            assert_eq!((s, d), (vec![1, 2, 3, 4], dtype));
            assert_eq!(v, parts(&x).2);
        }
        let e = iota(DType::F32, &[0, 3]);
        let (s, _) =
            shape_values(&eval("reshape", &[&e], &[("newshape", ints(&[-1, 3]))]).unwrap());
        assert_eq!(s, vec![0, 3]);
        let (s, _) =
            shape_values(&eval("reshape", &[&e], &[("newshape", ints(&[3, -1]))]).unwrap());
        assert_eq!(s, vec![3, 0]);
        let zero = [
            ("newshape", ints(&[-1, 0])),
            ("allowzero", AttrValue::Bool(true)),
        ];
        assert!(
            eval("reshape", &[&e], &zero)
                .unwrap_err()
                .contains("size 0")
        );
        let like = iota(DType::I8, &[3, 8]);
        let x = iota(DType::I32, &[2, 3, 4]);
        let (s, v) = shape_values(&eval("reshape_like", &[&x, &like], &[]).unwrap());
        assert_eq!(s, vec![3, 8]);
        assert_eq!(v, (0..24).collect::<Vec<i128>>());
    }

    #[test]
    fn reshape_like_ranges() {
        let x = f32ty(&[2, 3, 4]);
        let like = ty(&[6, 2, 2], DType::I8);
        assert_eq!(
            rel("reshape_like", &[&x, &like], &[]).unwrap(),
            "Tensor[(6, 2, 2), float32]"
        );
        assert_eq!(
            rel(
                "reshape_like",
                &[&x, &ty(&[12, 5], DType::I8)],
                &[("lhs_begin", int(1)), ("rhs_end", int(1))]
            )
            .unwrap(),
            "Tensor[(2, 12), float32]"
        );
        assert_eq!(
            rel(
                "reshape_like",
                &[&x, &ty(&[6, 7], DType::I8)],
                &[("lhs_end", int(-1)), ("rhs_end", int(-1))]
            )
            .unwrap(),
            "Tensor[(6, 4), float32]"
        );
        assert_eq!(
            rel("reshape_like", &[&x, &ty(&[5], DType::I8)], &[]).unwrap_err(),
            "reshape_like cannot turn (2, 3, 4) into (5): 24 elements, not 5"
        );
        assert!(rel("reshape_like", &[&x, &like], &[("lhs_begin", int(4))]).is_err());
        assert_eq!(
            rel("reshape_like", &[&any_ty(&[-1, 4]), &like], &[]).unwrap(),
            "Tensor[(6, 2, 2), float32]"
        );
    }

    #[test]
    fn reshape_every_special_value() {
        let mut rng = Rng(0x5eed_0001);
        let cases: &[(&[i64], &[i64])] = &[
            (&[2, 3, 4], &[0, -1]),
            (&[2, 3, 4], &[-1]),
            (&[2, 3, 4], &[4, -1, 2]),
            (&[2, 3, 4], &[-2]),
            (&[2, 3, 4], &[0, 0, -2]),
            (&[2, 3, 4], &[-3, 4]),
            (&[2, 3, 4], &[2, -3]),
            (&[2, 3, 4], &[-3, -1]),
            (&[2, 3, 4], &[-4, 1, 2, -2]),
            (&[2, 3, 4], &[-4, 2, -1, 3, 4]),
            (&[2, 3, 4], &[0, -4, -1, 1, 4]),
            (&[2, 3, 4], &[1, 24, 1]),
            (&[2, 3, 4], &[3, 2, 4]),
            (&[2, 3, 4], &[4, 3, 2]),
            (&[2, 3, 4], &[-1, 1, 6]),
            (&[2, 3, 4], &[8, 3]),
            (&[3, 5, 7], &[5, 3, 7]),
            (&[3, 5, 7], &[-1, 7]),
            (&[3, 5, 7], &[35, 3]),
            (&[3, 5, 7], &[7, 15]),
            (&[3, 5, 7], &[0, -3]),
            (&[2, 1, 3], &[3, 2]),
            (&[2, 1, 3], &[6]),
            (&[2, 1, 3], &[1, 6, 1]),
            (&[2, 1, 3], &[0, 0, 0]),
            (&[2, 1, 3], &[-3, -2]),
            (&[], &[1]),
            (&[], &[1, 1]),
            (&[], &[-1]),
            (&[], &[]),
            (&[1], &[]),
            (&[5], &[1, 5, 1]),
            (&[5], &[-4, 5, -1]),
            (&[6], &[-4, -1, 3]),
            (&[0, 3], &[0, 1, 3]),
            (&[0, 3], &[0, 0]),
            (&[0, 3], &[-2]),
            (&[0, 3], &[-3]),
            (&[2, 0, 3], &[0, -3]),
        ];
        for &(shape, newshape) in cases {
            check_all(&mut rng, "reshape", shape, &[("newshape", ints(newshape))]);
        }
        // `allowzero`: a 0 in `newshape` is a size.
        for (shape, newshape) in [(&[0, 3][..], &[3, 0][..]), (&[2, 0], &[0, 5, 7])] {
            let set = [
                ("newshape", ints(newshape)),
                ("allowzero", AttrValue::Bool(true)),
            ];
            check_all(&mut rng, "reshape", shape, &set);
        }
        for (shape, newshape) in [
            (&[2, 3, 4][..], &[-1, 0][..]),
            (&[2, 3, 4], &[0, -1]),
            (&[2, 3, 4], &[6, -1]),
            (&[10, 5, 4], &[-1, 0]),
            (&[3, 5, 7], &[-3, 0]),
        ] {
            let set = [("newshape", ints(newshape))];
            check_all(&mut rng, "contrib_reverse_reshape", shape, &set);
        }
    }

    #[test]
    fn reshape_like_ranges_compute() {
        let mut rng = Rng(0x5eed_0002);
        /// Data shape, `shape_like` shape and the integer attributes set.
        type Case<'a> = (&'a [i64], &'a [i64], &'a [(&'a str, i64)]);
        let cases: &[Case] = &[
            (&[2, 3, 4], &[6, 4], &[]),
            (&[2, 3, 4], &[24], &[]),
            (&[2, 3, 4], &[3, 12], &[("lhs_begin", 1), ("rhs_begin", 1)]),
            (&[2, 3, 4], &[3, 1], &[("lhs_begin", -2), ("lhs_end", -1)]),
            (
                &[2, 3, 4],
                &[1, 2, 12, 9],
                &[("rhs_begin", 1), ("rhs_end", -1)],
            ),
            (
                &[2, 3, 4],
                &[5, 1],
                &[("lhs_begin", 1), ("lhs_end", 1), ("rhs_begin", 1)],
            ),
            (&[0, 4], &[2, 0, 2], &[]),
            (&[], &[1, 1], &[]),
        ];
        for &(lhs, rhs, set) in cases {
            let set: Vec<(&str, AttrValue)> = set.iter().map(|&(k, v)| (k, int(v))).collect();
            let a = attrs("reshape_like", &set);
            for dtype in DTYPES {
                let x = random(&mut rng, dtype, lhs);
                let like = random(&mut rng, DType::F32, rhs);
                assert!(
                    check_op("reshape_like", &[x, like], &a),
                    "{lhs:?} {rhs:?} {set:?}"
                );
            }
        }
    }

    #[test]
    fn reshape_keeps_untouched_dimensions_as_loop_variables() {
        use relay_ir::te::{TExprKind, TensorOp};
        // (2, 3, 4) -> (6, 4): the last dimension is read at the output's own loop variable.
        let x = Tensor::placeholder("p", vec![2, 3, 4], DType::F32, 0);
        let out = Type::tensor(&[6, 4], DType::F32);
        let te = super::reshape_te("T_reshape", &[TeValue::Tensor(x)], &out).unwrap();
        let t = te.as_tensor().unwrap();
        let TensorOp::Compute { axes, body } = &t.op else {
            panic!("expected a compute")
        };
        let TExprKind::Read { indices, .. } = body.kind() else {
            panic!("expected a read")
        };
        assert!(matches!(indices[2].kind(), TExprKind::Var(v) if v.id == axes[1].id));
        // A mismatched output type is an error.
        let x = TeValue::Tensor(Tensor::placeholder("p", vec![2, 3], DType::F32, 0));
        assert!(super::reshape_te("T_reshape", &[x], &out).is_err());
    }
}
