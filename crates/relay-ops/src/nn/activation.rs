//! Activations and the operators TVM lists with them: `nn.relu`, `nn.leaky_relu`, `nn.prelu`,
//! the softmax family, `nn.bias_add` and `nn.batch_flatten`, each with its type relation,
//! reference evaluation and compute definition.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, CmpOp, IterVar, ReduceOp, TExpr, TeValue, Tensor, UnaryOp};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, NDArray, OpPattern as P,
    OpSchema, Type, Value,
};

use super::{
    DATA, Num, arg, axis_split, check_vector, checked, concrete, ix, require_float,
    require_numeric, split_axis, with_axis, without_axis,
};
use crate::compute;
use crate::support::{attr_float, attr_int, inputs_n, normalize_axis, tensor, tensor_type, value};
use crate::{field, op, plain};

/// `SoftmaxAttrs`, shared by the softmax family and `qnn.softmax`.
pub(crate) const SOFTMAX_ATTRS: &[AttrField] = &[field("axis", K::Int, D::Int(-1))];

/// `LeakyReluAttrs`, also used by `qnn.leaky_relu`. Python's default is 0.01, so text usually
/// shows `alpha=0.01f`.
pub(crate) const LEAKY_RELU_ATTRS: &[AttrField] = &[field("alpha", K::Float, D::Float(0.25))];

/// The activations, bias and flattening.
pub(super) static OPS: &[OpSchema] = &[
    // Activations, bias and flattening.
    plain("nn.relu", DATA)
        .with(P::ElemWise, numeric_unary_rel, relu_eval)
        .with_compute(relu_te),
    op(
        "nn.leaky_relu",
        DATA,
        "relay.attrs.LeakyReluAttrs",
        LEAKY_RELU_ATTRS,
    )
    .with(P::ElemWise, numeric_unary_rel, leaky_relu_eval)
    .with_compute(leaky_relu_te),
    op(
        "nn.prelu",
        &["data", "alpha"],
        "relay.attrs.PReluAttrs",
        &[field("axis", K::Int, D::Int(1))],
    )
    .with(P::Broadcast, prelu_rel, prelu_eval)
    .with_compute(|i, a, o| channel_te(i, a, o, "nn.prelu")),
    op(
        "nn.softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    )
    .with(P::OutEWiseFusable, softmax_rel, softmax_eval)
    .with_input_edge(P::CommReduce)
    .with_compute(|i, a, o| softmax_te(i, a, o, false)),
    op(
        "nn.fast_softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    )
    .with(P::OutEWiseFusable, softmax_rel, softmax_eval),
    op(
        "nn.log_softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    )
    .with(P::OutEWiseFusable, softmax_rel, log_softmax_eval)
    .with_input_edge(P::CommReduce)
    .with_compute(|i, a, o| softmax_te(i, a, o, true)),
    op(
        "nn.bias_add",
        &["data", "bias"],
        "relay.attrs.BiasAddAttrs",
        &[field("axis", K::Int, D::Int(1))],
    )
    .with(P::Broadcast, bias_add_rel, bias_add_eval)
    .with_compute(|i, a, o| channel_te(i, a, o, "nn.bias_add")),
    plain("nn.batch_flatten", DATA)
        .with(P::Injective, batch_flatten_rel, batch_flatten_eval)
        .with_compute(batch_flatten_te),
];

// ----- Type relations and reference evaluation -----

/// The type of a numeric elementwise operator: its input's.
fn numeric_unary_rel(types: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data] = inputs_n::<1>(types)?;
    let (_, dtype) = tensor_type(data, "the input")?;
    require_numeric(data, dtype, "the input")?;
    Ok(data.clone())
}

/// Applies `f` to every element in the number type of the tensor's dtype.
fn map_elements(x: &NDArray, f: fn(f64) -> f64, g: fn(i128) -> i128) -> Result<Value, OpError> {
    if x.dtype().is_float() {
        let out: Vec<f64> = x.to_f64_vec().into_iter().map(f).collect();
        f64::array(x.dtype(), x.shape(), &out)
    } else {
        let out: Vec<i128> = x.to_i128_vec().into_iter().map(g).collect();
        i128::array(x.dtype(), x.shape(), &out)
    }
}

fn relu_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, numeric_unary_rel)?;
    map_elements(
        arg(&arrays, 0)?,
        |v| v.max(0.0),
        |v| if v > 0 { v } else { 0 },
    )
}

fn leaky_relu_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, numeric_unary_rel)?;
    let x = arg(&arrays, 0)?;
    let alpha = attr_float(attrs, "alpha")?;
    if x.dtype().is_float() {
        let out: Vec<f64> = x
            .to_f64_vec()
            .into_iter()
            .map(|v| if v > 0.0 { v } else { v * alpha })
            .collect();
        f64::array(x.dtype(), x.shape(), &out)
    } else {
        let alpha = i128::from_f64(alpha);
        let out: Vec<i128> = x
            .to_i128_vec()
            .into_iter()
            .map(|v| if v > 0 { v } else { v.wrapping_mul(alpha) })
            .collect();
        i128::array(x.dtype(), x.shape(), &out)
    }
}

/// The relation of `nn.bias_add` and `nn.prelu`: a numeric tensor and a vector as long as its
/// `axis` dimension, of the same dtype.
fn channel_vector_rel(types: &[Type], attrs: &Attrs, what: &str) -> Result<Type, OpError> {
    let [data, vector] = inputs_n::<2>(types)?;
    let (ds, dd) = tensor_type(data, "the data")?;
    require_numeric(data, dd, "the data")?;
    let axis = normalize_axis(attr_int(attrs, "axis")?, ds.len())?;
    let dim = ds.get(axis).copied().unwrap_or(Dim::Known(1));
    check_vector(vector, what, dim, dd, data, axis)?;
    Ok(data.clone())
}

fn bias_add_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    channel_vector_rel(types, attrs, "bias")
}

fn prelu_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    channel_vector_rel(types, attrs, "alpha")
}

/// Combines every element of `x` with the element of the vector `v` at its `axis` index.
fn channel_map<T: Num>(
    x: &NDArray,
    v: &NDArray,
    axis: usize,
    f: impl Fn(T, T) -> T,
) -> Result<Value, OpError> {
    let (_, extent, inner) = axis_split(x.shape(), axis);
    let vs = T::read(v);
    let out: Vec<T> = T::read(x)
        .into_iter()
        .enumerate()
        .map(|(i, e)| f(e, vs[(i / inner.max(1)) % extent.max(1)]))
        .collect();
    T::array(x.dtype(), x.shape(), &out)
}

fn bias_add_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, bias_add_rel)?;
    let (x, b) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let axis = normalize_axis(attr_int(attrs, "axis")?, x.ndim())?;
    if x.dtype().is_float() {
        channel_map::<f64>(x, b, axis, Num::plus)
    } else {
        channel_map::<i128>(x, b, axis, Num::plus)
    }
}

fn prelu_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, prelu_rel)?;
    let (x, alpha) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let axis = normalize_axis(attr_int(attrs, "axis")?, x.ndim())?;
    if x.dtype().is_float() {
        channel_map::<f64>(x, alpha, axis, |v, a| if v > 0.0 { v } else { v * a })
    } else {
        channel_map::<i128>(x, alpha, axis, |v, a| if v > 0 { v } else { v.times(a) })
    }
}

/// `nn.softmax` and `nn.log_softmax`: a float tensor, normalized along `axis`.
fn softmax_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data] = inputs_n::<1>(types)?;
    let (shape, dtype) = tensor_type(data, "softmax data")?;
    require_float(data, dtype, "softmax data")?;
    normalize_axis(attr_int(attrs, "axis")?, shape.len())?;
    Ok(data.clone())
}

/// Softmax along `axis` (its logarithm when `log`), computed in `f64` with the maximum
/// subtracted first.
fn softmax_run(args: &[Value], attrs: &Attrs, log: bool) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, softmax_rel)?;
    let x = arg(&arrays, 0)?;
    let axis = normalize_axis(attr_int(attrs, "axis")?, x.ndim())?;
    let (outer, extent, inner) = axis_split(x.shape(), axis);
    let xs = x.to_f64_vec();
    let mut out = vec![0.0; xs.len()];
    for o in 0..outer {
        for r in 0..inner {
            let at = |d: usize| (o * extent + d) * inner + r;
            let max = (0..extent)
                .map(|d| xs[at(d)])
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..extent).map(|d| (xs[at(d)] - max).exp()).sum();
            for d in 0..extent {
                let shifted = xs[at(d)] - max;
                out[at(d)] = if log {
                    shifted - sum.ln()
                } else {
                    shifted.exp() / sum
                };
            }
        }
    }
    f64::array(x.dtype(), x.shape(), &out)
}

fn softmax_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    softmax_run(args, attrs, false)
}

fn log_softmax_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    softmax_run(args, attrs, true)
}

/// `nn.batch_flatten`: `[n, d1, d2, ...]` to `[n, d1 * d2 * ...]`.
fn batch_flatten_rel(types: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data] = inputs_n::<1>(types)?;
    let (shape, dtype) = tensor_type(data, "batch_flatten data")?;
    let Some((&n, rest)) = shape.split_first() else {
        return Err(OpError::shape(format!(
            "batch_flatten data must have rank at least 1, got `{data}`"
        )));
    };
    let mut flat = Some(1i64);
    for d in rest {
        flat = match (flat, d) {
            (Some(f), Dim::Known(k)) => Some(f.checked_mul(*k).ok_or_else(|| {
                OpError::shape(format!("batch_flatten of `{data}` is too large"))
            })?),
            _ => None,
        };
    }
    Ok(tensor(vec![n, flat.map_or(Dim::Any, Dim::Known)], dtype))
}

fn batch_flatten_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, result) = checked(args, attrs, batch_flatten_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    value(NDArray::from_bytes(
        dtype,
        &shape,
        arg(&arrays, 0)?.as_bytes(),
    ))
}

// ----- Compute definitions -----

/// `nn.relu`: `x > 0 ? x : 0` (NaN gives 0, as `f64::max` does in the reference evaluation).
fn relu_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, _) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    compute::broadcast_compute("T_relu", &shape, &[a], |r| {
        let zero = compute::zero(r[0].dtype());
        Ok(compute::cmp(CmpOp::Gt, &r[0], &zero).select(r[0].clone(), zero))
    })
}

/// `nn.leaky_relu`: `x > 0 ? x : x * alpha`, with `alpha` truncated toward zero for integers
/// (whose product wraps).
fn leaky_relu_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    let alpha = attr_float(attrs, "alpha")?;
    let alpha = if dtype.is_float() {
        compute::const_of(alpha, dtype)
    } else {
        compute::int_const(alpha as i128, dtype)
    };
    // float16 (bfloat16, float8) scales in float64 with the exact `alpha`, as the reference
    // does (`alpha` rounded to the narrow type would be off by up to one of its steps).
    let wide = dtype.is_narrow_float();
    let alpha_wide = compute::const_of(attr_float(attrs, "alpha")?, DType::F64);
    compute::broadcast_compute("T_leaky_relu", &shape, &[a], |r| {
        let x = &r[0];
        let zero = compute::zero(dtype);
        let scaled = if wide {
            compute::bin(BinaryOp::Mul, &x.clone().cast(DType::F64), &alpha_wide).cast(dtype)
        } else {
            compute::bin(BinaryOp::Mul, x, &alpha)
        };
        Ok(compute::cmp(CmpOp::Gt, x, &zero).select(x.clone(), scaled))
    })
}

/// `nn.prelu` (`x > 0 ? x : x * alpha[c]`) and `nn.bias_add` (`x + bias[c]`), where `c` is the
/// index along `axis`.
fn channel_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    name: &str,
) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, v) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let axis = normalize_axis(attr_int(attrs, "axis")?, shape.len())?;
    let extent = shape.get(axis).copied().unwrap_or(1);
    if (v.shape != [extent] && v.shape != [1]) || v.dtype != dtype || x.shape != shape {
        return Err(OpError::shape(format!(
            "`{name}` expects a vector of {extent} elements of {dtype} for axis {axis}"
        )));
    }
    let short = name.strip_prefix("nn.").unwrap_or(name);
    let tensor = Tensor::compute(format!("T_{short}"), &shape, |index| {
        let c = if v.shape == [1] {
            TExpr::index(0)
        } else {
            index[axis].clone()
        };
        let (e, w) = (x.at(index), v.at(&[c]));
        if name == "nn.bias_add" {
            compute::bin(BinaryOp::Add, &e, &w)
        } else {
            let zero = compute::zero(dtype);
            let scaled = compute::bin(BinaryOp::Mul, &e, &w);
            compute::cmp(CmpOp::Gt, &e, &zero).select(e, scaled)
        }
    });
    compute::tensor_value(tensor)
}

/// `nn.softmax` and `nn.log_softmax` along `axis`, with the maximum subtracted:
/// `exp(x - max) * (1 / Σ exp(x - max))` or `(x - max) - log Σ exp(x - max)`. `float32` data
/// is computed in `float32` (SPEC §4's reduction tolerance, as ONNX Runtime), so that the
/// kernel's loops run on 32-bit vector lanes; `float64` and `float16` data in `float64` (a
/// `float16` result is then the reference's, rounded once).
fn softmax_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    log: bool,
) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    if x.shape != shape || !dtype.is_float() {
        return Err(OpError::shape(format!(
            "softmax expects a float tensor of shape {shape:?}, got {:?} of {}",
            x.shape, x.dtype
        )));
    }
    let rank = shape.len();
    let axis = normalize_axis(attr_int(attrs, "axis")?, rank)?;
    let (rest, extent) = split_axis(&shape, axis);
    // float32 data computes in float32, and so does a float16 softmax (as ONNX Runtime and
    // the contractions compute it: within one float16 ulp of the float64 reference); the
    // others in float64 (a float16 log-softmax near 0 is a difference of nearly equal
    // values, whose float32 error is many float16 ulps of a tiny result).
    let work = if dtype == DType::F32 || dtype == DType::F16 && !log {
        DType::F32
    } else {
        DType::F64
    };
    let at = |index: &[TExpr]| x.at(index).cast(work);
    let k = IterVar::new(extent);
    let max = Tensor::compute("T_softmax_max", &rest, |i| {
        at(&with_axis(i, axis, k.expr(), rank)).reduce(ReduceOp::Max, vec![k])
    });
    let k = IterVar::new(extent);
    let sum = Tensor::compute("T_softmax_sum", &rest, |i| {
        let shifted = compute::bin(
            BinaryOp::Sub,
            &at(&with_axis(i, axis, k.expr(), rank)),
            &max.at(i),
        );
        shifted.unary(UnaryOp::Exp).reduce(ReduceOp::Sum, vec![k])
    });
    let name = if log { "T_log_softmax" } else { "T_softmax" };
    compute::tensor_value(Tensor::compute(name, &shape, |i| {
        let r = without_axis(i, axis);
        let shifted = compute::bin(BinaryOp::Sub, &at(i), &max.at(&r));
        let v = if log {
            compute::bin(BinaryOp::Sub, &shifted, &sum.at(&r).unary(UnaryOp::Log))
        } else {
            let one = TExpr::float(1.0, work);
            let inv = compute::bin(BinaryOp::Div, &one, &sum.at(&r));
            compute::bin(BinaryOp::Mul, &shifted.unary(UnaryOp::Exp), &inv)
        };
        v.cast(dtype)
    }))
}

/// `nn.batch_flatten`: `out[n, j] = data[n, unravel(j)]`.
fn batch_flatten_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, _) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let rest = x.shape.get(1..).unwrap_or_default();
    if shape.len() != 2 || x.shape.first() != shape.first() {
        return Err(OpError::shape(format!(
            "nn.batch_flatten of {:?} cannot give {shape:?}",
            x.shape
        )));
    }
    compute::tensor_value(Tensor::compute("T_batch_flatten", &shape, |i| {
        let mut index = vec![i[0].clone()];
        let mut stride = 1i64;
        let mut dims = Vec::with_capacity(rest.len());
        for &d in rest.iter().rev() {
            let e = compute::bin(BinaryOp::Div, &i[1], &ix(stride.max(1)));
            dims.push(compute::bin(BinaryOp::Mod, &e, &ix(d.max(1))));
            stride = stride.saturating_mul(d);
        }
        index.extend(dims.into_iter().rev());
        x.at(&index)
    }))
}

#[cfg(test)]
mod tests {
    use std::slice::from_ref;

    use relay_ir::AttrValue as V;
    use relay_ir::{DType, NDArray};

    use crate::compute::op_tests::{DTYPES, Rng, check, random};
    use crate::nn::testing::*;
    use crate::testing::attrs;

    #[test]
    fn activation_relations() {
        let x = f32s(&[1, 4, 2, 2]);
        assert_eq!(
            ok("nn.relu", from_ref(&x), &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            ok("nn.bias_add", &[x.clone(), f32s(&[4])], &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            ok(
                "nn.bias_add",
                &[x.clone(), f32s(&[2])],
                &[("axis", V::Int(-1))]
            ),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            err("nn.bias_add", &[x.clone(), f32s(&[5])], &[]),
            "bias must be `Tensor[(4), float32]` to match axis 1 of data \
             `Tensor[(1, 4, 2, 2), float32]`, got `Tensor[(5), float32]`"
        );
        assert!(
            err(
                "nn.bias_add",
                &[x.clone(), f32s(&[4])],
                &[("axis", V::Int(4))]
            )
            .contains("out of range")
        );
        assert_eq!(
            ok("nn.prelu", &[x.clone(), f32s(&[4])], &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert!(
            err("nn.prelu", &[x.clone(), ty(&[4], "float64")], &[]).starts_with("alpha must be")
        );
        assert_eq!(
            ok("nn.softmax", from_ref(&x), &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            err("nn.log_softmax", &[ty(&[3], "int32")], &[]),
            "softmax data must have a float dtype, got `Tensor[(3), int32]`"
        );
        assert_eq!(
            ok("nn.batch_flatten", from_ref(&x), &[]),
            "Tensor[(1, 16), float32]"
        );
        assert_eq!(
            ok("nn.batch_flatten", &[f32s(&[-1, 3, -1])], &[]),
            "Tensor[(?, ?), float32]"
        );
        assert!(err("nn.batch_flatten", &[f32s(&[])], &[]).contains("rank at least 1"));
    }

    #[test]
    fn activation_evaluation() {
        let x = t(&[1, 2, 2], &[-2., 1., -4., 3.]);
        assert_eq!(run("nn.relu", from_ref(&x), &[]).1, [0., 1., 0., 3.]);
        assert_eq!(
            run("nn.leaky_relu", from_ref(&x), &[("alpha", V::Float(0.5))]).1,
            [-1., 1., -2., 3.]
        );
        assert_eq!(
            run("nn.prelu", &[x.clone(), t(&[2], &[0.5, 0.25])], &[]).1,
            [-1., 1., -1., 3.]
        );
        assert_eq!(
            run("nn.bias_add", &[x.clone(), t(&[2], &[10., 20.])], &[]).1,
            [8., 11., 16., 23.]
        );
        assert_eq!(
            run(
                "nn.bias_add",
                &[x.clone(), t(&[2], &[10., 20.])],
                &[("axis", V::Int(-1))]
            )
            .1,
            [8., 21., 6., 23.]
        );
        let xi = t_of("int64", &[3], &[-5., 0., 5.]);
        let v = eval("nn.relu", &[xi], &[]).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [0, 0, 5]);

        let (_, out) = run("nn.softmax", &[t(&[3], &[1., 2., 3.])], &[]);
        assert_close(&out, &[0.09003057, 0.24472847, 0.66524096]);
        let (_, out) = run("nn.log_softmax", &[t(&[3], &[1., 2., 3.])], &[]);
        assert_close(&out, &[-2.40760596, -1.40760596, -0.40760596]);
        let (_, out) = run(
            "nn.softmax",
            &[t(&[2, 2], &[0., 0., 1000., 0.])],
            &[("axis", V::Int(0))],
        );
        assert_close(&out, &[0., 0.5, 1., 0.5]);

        assert_eq!(
            run("nn.batch_flatten", &[t(&[2, 1, 2], &[1., 2., 3., 4.])], &[]),
            (vec![2, 2], vec![1., 2., 3., 4.])
        );
    }

    #[test]
    fn softmax_and_log_softmax_compute() {
        let mut rng = Rng(0x5eed_0002);
        for name in ["nn.softmax", "nn.log_softmax"] {
            for dtype in DTYPES {
                for (shape, axis) in [
                    (&[3, 4][..], -1),
                    (&[3, 4], 0),
                    (&[2, 3, 4], 1),
                    (&[1], 0),
                    (&[5, 1], 1),
                    (&[0, 3], 1),
                    (&[2, 0], 1),
                    (&[], 0),
                ] {
                    let x = random(&mut rng, dtype, shape);
                    let a = attrs(name, &[("axis", V::Int(axis))]);
                    assert_eq!(
                        verify(name, &[x], &a, spec_reduction),
                        dtype.is_float(),
                        "{name} {dtype}"
                    );
                }
            }
        }
    }

    /// SPEC §4's reduction tolerance (rtol 1e-4, atol 1e-5) for `float32` results, which
    /// softmax computes in `float32`; [`exact`] for the others.
    fn spec_reduction(w: &NDArray, g: &NDArray) -> bool {
        if w.dtype() != DType::F32 || g.dtype() != DType::F32 || w.shape() != g.shape() {
            return exact(w, g);
        }
        w.to_f64_vec().iter().zip(g.to_f64_vec()).all(|(&w, g)| {
            w == g || (w.is_nan() && g.is_nan()) || (w - g).abs() <= 1e-5 + 1e-4 * w.abs()
        })
    }

    #[test]
    fn leaky_relu_prelu_and_bias_add() {
        let mut rng = Rng(19);
        for dtype in DTYPES {
            for alpha in [0.5, 2.7, -1.3, 0.1] {
                let a = attrs("nn.leaky_relu", &[("alpha", V::Float(alpha))]);
                check("nn.leaky_relu", &[random(&mut rng, dtype, &[3, 4])], &a);
            }
            for (shape, axis) in [
                (&[2, 3, 4][..], 1),
                (&[2, 3, 4], -1),
                (&[2, 3], 0),
                (&[0, 3], 1),
                (&[2, 1], 1),
                (&[5], 0),
            ] {
                let n = shape[(axis + shape.len() as i64) as usize % shape.len()];
                for name in ["nn.prelu", "nn.bias_add"] {
                    let a = attrs(name, &[("axis", V::Int(axis))]);
                    let x = random(&mut rng, dtype, shape);
                    let v = random(&mut rng, dtype, &[n]);
                    check(name, &[x, v], &a);
                }
            }
        }
    }

    #[test]
    fn batch_flatten_compute() {
        let mut rng = Rng(0x5eed_0007);
        for dtype in DTYPES {
            for shape in [
                &[2, 3, 4][..],
                &[3],
                &[0, 2],
                &[2, 0, 3],
                &[1, 1, 1, 1],
                &[2, 5, 1],
            ] {
                let x = random(&mut rng, dtype, shape);
                assert!(verify(
                    "nn.batch_flatten",
                    &[x],
                    &attrs("nn.batch_flatten", &[]),
                    exact
                ));
            }
        }
    }
}
