//! Padding: `nn.pad` (constant, edge and reflect modes, the pad value as the second input) with
//! its type relation, reference evaluation and compute definition, and the table entry of
//! `nn.mirror_pad`.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, AttrValue, Attrs, DType, Dim, NDArray,
    OpPattern as P, OpSchema, Type, Value,
};

use super::{
    DATA, Num, arg, checked, clamp_index, concrete, count, in_range, ix, ix_max, ix_sub, read_as,
};
use crate::compute;
use crate::support::{attr_str, inputs_n, strides, tensor, tensor_type, unravel};
use crate::{field, op, required};

/// `PadAttrs`: `pad_width` is one `[before, after]` pair per axis.
const PAD_ATTRS: &[AttrField] = &[
    required("pad_width", K::IntArrayArray),
    field("pad_mode", K::Str, D::Str("constant")),
];

/// The padding operators.
pub(super) static OPS: &[OpSchema] = &[
    // Padding; `nn.pad` takes the pad value as its second input.
    op(
        "nn.pad",
        &["data", "pad_value"],
        "relay.attrs.PadAttrs",
        PAD_ATTRS,
    )
    .with(P::Injective, pad_rel, pad_eval)
    .with_compute(pad_te),
    op(
        "nn.mirror_pad",
        DATA,
        "relay.attrs.MirrorPadAttrs",
        &[
            field("mode", K::Str, D::Str("SYMMETRIC")),
            required("pad_width", K::IntArrayArray),
        ],
    ),
];

// ----- Type relation and reference evaluation -----

/// How `nn.pad` fills the border.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PadMode {
    /// With `pad_value`.
    Constant,
    /// By repeating the edge element.
    Edge,
    /// By mirroring without repeating the edge element (numpy's `reflect`).
    Reflect,
}

/// `pad_width` as one `[before, after]` pair per axis.
fn pad_widths(attrs: &Attrs) -> Result<Vec<[i64; 2]>, OpError> {
    let malformed = || {
        OpError::attribute(
            "pad_width",
            "`pad_width` must be a list of [before, after] pairs",
        )
    };
    let items = attrs
        .get("pad_width")
        .and_then(AttrValue::as_array)
        .ok_or_else(malformed)?;
    items
        .iter()
        .enumerate()
        .map(|(axis, item)| match item.as_ints().as_deref() {
            Some(&[before, after]) if before >= 0 && after >= 0 => Ok([before, after]),
            Some(&[before, after]) => Err(OpError::attribute(
                "pad_width",
                format!(
                    "`pad_width` must not be negative, got [{before}, {after}] for axis {axis}"
                ),
            )),
            _ => Err(malformed()),
        })
        .collect()
}

fn pad_mode(attrs: &Attrs) -> Result<PadMode, OpError> {
    match attr_str(attrs, "pad_mode")? {
        "constant" => Ok(PadMode::Constant),
        "edge" => Ok(PadMode::Edge),
        "reflect" => Ok(PadMode::Reflect),
        other => Err(OpError::attribute(
            "pad_mode",
            format!("`pad_mode` must be \"constant\", \"edge\" or \"reflect\", got \"{other}\""),
        )),
    }
}

/// `nn.pad(data, pad_value)`: every axis grown by its `[before, after]` pair.
fn pad_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data, pad_value] = inputs_n::<2>(types)?;
    let (shape, dtype) = tensor_type(data, "pad data")?;
    let (value_shape, _) = tensor_type(pad_value, "the pad value")?;
    if !value_shape.is_empty() {
        return Err(OpError::shape(format!(
            "the pad value must be a scalar, got `{pad_value}`"
        )));
    }
    let widths = pad_widths(attrs)?;
    let mode = pad_mode(attrs)?;
    if widths.len() != shape.len() {
        return Err(OpError::attribute(
            "pad_width",
            format!(
                "`pad_width` has {} pairs but data `{data}` has rank {}",
                widths.len(),
                shape.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(shape.len());
    for (axis, (&d, &[before, after])) in shape.iter().zip(&widths).enumerate() {
        let Dim::Known(n) = d else {
            out.push(Dim::Any);
            continue;
        };
        let widest = before.max(after);
        if mode == PadMode::Reflect && widest >= n.max(1) && widest > 0 {
            return Err(OpError::shape(format!(
                "reflect padding of {widest} on axis {axis} needs that axis to be longer than \
                 {widest}, got {n}"
            )));
        }
        if mode == PadMode::Edge && n == 0 && widest > 0 {
            return Err(OpError::shape(format!(
                "edge padding needs axis {axis} to be non-empty, got `{data}`"
            )));
        }
        let grown = n
            .checked_add(before)
            .and_then(|m| m.checked_add(after))
            .ok_or_else(|| {
                OpError::shape(format!(
                    "padding axis {axis} of `{data}` makes it too large"
                ))
            })?;
        out.push(Dim::Known(grown));
    }
    Ok(tensor(out, dtype))
}

fn pad_run<T: Num>(
    x: &NDArray,
    fill: T,
    widths: &[[i64; 2]],
    mode: PadMode,
    shape: &[i64],
) -> Result<Value, OpError> {
    let xs = x.shape();
    let xstrides = strides(xs);
    let xv = T::read(x);
    let mut out = Vec::with_capacity(count(shape));
    for flat in 0..count(shape) as i64 {
        let index = unravel(flat, shape);
        let mut source = Some(0i64);
        for (axis, &i) in index.iter().enumerate() {
            let n = xs[axis];
            let mut s = i - widths[axis][0];
            if s < 0 || s >= n {
                s = match mode {
                    PadMode::Constant => {
                        source = None;
                        break;
                    }
                    PadMode::Edge => s.clamp(0, n - 1),
                    PadMode::Reflect if s < 0 => -s,
                    PadMode::Reflect => 2 * (n - 1) - s,
                };
            }
            source = source.map(|f| f + s * xstrides[axis]);
        }
        out.push(source.map_or(fill, |f| xv[f as usize]));
    }
    T::array(x.dtype(), shape, &out)
}

fn pad_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, result) = checked(args, attrs, pad_rel)?;
    let (shape, _) = concrete(&result, None)?;
    let (x, fill) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let widths = pad_widths(attrs)?;
    let mode = pad_mode(attrs)?;
    if x.dtype().is_float() {
        let fill = fill
            .to_f64_vec()
            .first()
            .copied()
            .ok_or_else(|| OpError::value("the pad value is empty"))?;
        pad_run::<f64>(x, fill, &widths, mode, &shape)
    } else {
        let fill = fill
            .to_i128_vec()
            .first()
            .copied()
            .ok_or_else(|| OpError::value("the pad value is empty"))?;
        pad_run::<i128>(x, fill, &widths, mode, &shape)
    }
}

// ----- Compute definition -----

/// `nn.pad`: every axis grown by its `[before, after]` pair; the border is the pad value
/// (converted to the data's dtype as the reference converts it), the edge element, or the
/// mirror image without the edge.
fn pad_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, value) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let widths = pad_widths(attrs)?;
    let mode = pad_mode(attrs)?;
    let fits = widths.len() == x.shape.len()
        && value.shape.is_empty()
        && x.dtype == dtype
        && x.shape
            .iter()
            .zip(&widths)
            .zip(&shape)
            .all(|((&n, &[b, a]), &o)| n.checked_add(b).and_then(|m| m.checked_add(a)) == Some(o));
    if !fits || shape.len() != x.shape.len() {
        return Err(OpError::shape(format!(
            "nn.pad of {:?} with pad_width {widths:?} cannot give {shape:?}",
            x.shape
        )));
    }
    let fill = if dtype.is_float() {
        value.at(&[]).cast(DType::F64).cast(dtype)
    } else {
        read_as(value.at(&[]), dtype)
    };
    let empty = x.shape.contains(&0);
    compute::tensor_value(Tensor::compute("T_pad", &shape, |i| {
        // Data without elements: every element is the pad value, and nothing may be read.
        if empty {
            return fill.clone();
        }
        let mut inside: Option<TExpr> = None;
        let mut index = Vec::with_capacity(i.len());
        for ((e, &n), &[before, _]) in i.iter().zip(&x.shape).zip(&widths) {
            let s = ix_sub(e, &ix(before));
            let source = match mode {
                PadMode::Constant => {
                    let ok = in_range(&s, n);
                    inside = Some(match inside {
                        Some(acc) => compute::bin(BinaryOp::LogicalAnd, &acc, &ok),
                        None => ok,
                    });
                    s
                }
                PadMode::Edge => s,
                // (n - 1) - |(n - 1) - |s||: -s before the start, 2(n - 1) - s past the end.
                PadMode::Reflect => {
                    let abs = |v: &TExpr| ix_max(v, &ix_sub(&ix(0), v));
                    ix_sub(&ix(n - 1), &abs(&ix_sub(&ix(n - 1), &abs(&s))))
                }
            };
            index.push(clamp_index(&source, n));
        }
        let v = x.at(&index);
        match inside {
            Some(inside) => inside.select(v, fill.clone()),
            None => v,
        }
    }))
}

#[cfg(test)]
mod tests {

    use relay_ir::AttrValue as V;

    use super::*;

    use crate::compute::op_tests::{DTYPES, Rng, random};
    use crate::nn::testing::*;
    use crate::testing::{attrs, ints};

    #[test]
    fn pad_relation() {
        let x = f32s(&[1, 4, 2, 2]);
        let pad = |data: Type, widths: &[[i64; 2]], mode: &str| {
            let widths = V::Array(widths.iter().map(|w| ints(w)).collect());
            rel(
                "nn.pad",
                &[data, f32s(&[])],
                &[("pad_width", widths), ("pad_mode", s(mode))],
            )
        };
        assert_eq!(
            pad(x.clone(), &[[0, 0], [0, 0], [1, 2], [2, 1]], "constant").unwrap(),
            "Tensor[(1, 4, 5, 5), float32]"
        );
        assert_eq!(
            pad(f32s(&[-1, 3]), &[[1, 1], [1, 0]], "edge").unwrap(),
            "Tensor[(?, 4), float32]"
        );
        assert_eq!(
            pad(x.clone(), &[[0, 0], [1, 1]], "constant").unwrap_err(),
            "`pad_width` has 2 pairs but data `Tensor[(1, 4, 2, 2), float32]` has rank 4"
        );
        assert_eq!(
            pad(f32s(&[3]), &[[3, 0]], "reflect").unwrap_err(),
            "reflect padding of 3 on axis 0 needs that axis to be longer than 3, got 3"
        );
        assert_eq!(
            pad(f32s(&[3]), &[[-1, 0]], "constant").unwrap_err(),
            "`pad_width` must not be negative, got [-1, 0] for axis 0"
        );
        assert!(
            pad(f32s(&[3]), &[[1, 0]], "wrap")
                .unwrap_err()
                .starts_with("`pad_mode` must be")
        );
        assert_eq!(
            err(
                "nn.pad",
                &[f32s(&[3]), f32s(&[1])],
                &[("pad_width", V::Array(vec![ints(&[1, 1])]))]
            ),
            "the pad value must be a scalar, got `Tensor[(1), float32]`"
        );
    }

    #[test]
    fn pad_evaluation() {
        let pad = |x: Value, value: Value, widths: &[[i64; 2]], mode: &str| {
            let widths = V::Array(widths.iter().map(|w| ints(w)).collect());
            eval(
                "nn.pad",
                &[x, value],
                &[("pad_width", widths), ("pad_mode", s(mode))],
            )
        };
        let x = t(&[3], &[1., 2., 3.]);
        let zero = t(&[], &[0.5]);
        let out = |v: Result<Value, String>| v.unwrap().as_tensor().unwrap().to_f64_vec();
        assert_eq!(
            out(pad(x.clone(), zero.clone(), &[[2, 2]], "constant")),
            [0.5, 0.5, 1., 2., 3., 0.5, 0.5]
        );
        assert_eq!(
            out(pad(x.clone(), zero.clone(), &[[2, 2]], "edge")),
            [1., 1., 1., 2., 3., 3., 3.]
        );
        assert_eq!(
            out(pad(x.clone(), zero.clone(), &[[2, 2]], "reflect")),
            [3., 2., 1., 2., 3., 2., 1.]
        );
        assert!(pad(x, zero.clone(), &[[3, 0]], "reflect").is_err());
        let m = t(&[2, 2], &[1., 2., 3., 4.]);
        let v = pad(m, zero, &[[1, 0], [0, 1]], "constant").unwrap();
        let a = v.as_tensor().unwrap();
        assert_eq!(a.shape(), [3, 3]);
        assert_eq!(a.to_f64_vec(), [0.5, 0.5, 0.5, 1., 2., 0.5, 3., 4., 0.5]);
        // An integer tensor padded with a float value converts it as TVM's cast does.
        let xi = t_of("int32", &[2], &[1., 2.]);
        let v = pad(xi, t(&[], &[7.9]), &[[1, 1]], "constant").unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [7, 1, 2, 7]);
    }

    #[test]
    fn pad_compute() {
        let mut rng = Rng(0x5eed_0007);
        let widths = |w: &[[i64; 2]]| V::Array(w.iter().map(|p| ints(p)).collect());
        for dtype in DTYPES {
            for (shape, pads) in [
                (&[3][..], &[[2, 1]][..]),
                (&[2, 3], &[[1, 0], [0, 2]]),
                (&[2, 3, 4], &[[0, 0], [1, 1], [2, 3]]),
                (&[1, 4], &[[0, 0], [0, 0]]),
                (&[0, 2], &[[1, 1], [1, 0]]),
                (&[], &[]),
            ] {
                for mode in ["constant", "edge", "reflect"] {
                    let value_dtype = if rng.below(2) == 0 {
                        dtype
                    } else {
                        DTYPES[rng.below(12) as usize]
                    };
                    let x = random(&mut rng, dtype, shape);
                    let v = random(&mut rng, value_dtype, &[]);
                    let a = attrs(
                        "nn.pad",
                        &[("pad_width", widths(pads)), ("pad_mode", s(mode))],
                    );
                    verify("nn.pad", &[x, v], &a, exact);
                }
            }
        }
        // Pad values converted as the reference converts them: floats into integers truncate
        // and wrap, into booleans are non-zero after truncation.
        for (dtype, value) in [
            (DType::I8, 300.7),
            (DType::U8, -1.5),
            (DType::BOOL, 0.5),
            (DType::BOOL, f64::NAN),
            (DType::I32, 1e30),
            (DType::U64, f64::INFINITY),
            (DType::F16, 1e-8),
        ] {
            let x = random(&mut rng, dtype, &[2]);
            let v = NDArray::from_f64_slice(DType::F64, &[], &[value]).unwrap();
            let a = attrs("nn.pad", &[("pad_width", widths(&[[1, 1]]))]);
            assert!(verify("nn.pad", &[x, v], &a, exact), "{dtype} {value}");
        }
        // Reflection and edges also on accepted shapes of every mode.
        let x = random(&mut rng, DType::I32, &[3, 4]);
        let v = random(&mut rng, DType::I32, &[]);
        for mode in ["constant", "edge", "reflect"] {
            let a = attrs(
                "nn.pad",
                &[
                    ("pad_width", widths(&[[2, 2], [3, 1]])),
                    ("pad_mode", s(mode)),
                ],
            );
            assert!(
                verify("nn.pad", &[x.clone(), v.clone()], &a, exact),
                "{mode}"
            );
        }
    }
}
