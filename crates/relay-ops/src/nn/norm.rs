//! Normalization and dropout: the table entries of the normalizations, and the type relations,
//! reference evaluations and compute definitions of `nn.batch_norm`, `nn.layer_norm` and
//! `nn.dropout` at inference time (`nn.batch_norm` returns a 3-tuple and `nn.dropout` a
//! 2-tuple).

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, IterVar, ReduceOp, TExpr, TeValue, Tensor, UnaryOp};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, OpPattern as P, OpSchema, Type,
    TypeKind, Value,
};

use super::{
    DATA, Num, arg, axis_split, check_vector, checked, ix, require_float, split_axis, with_axis,
    without_axis,
};
use crate::compute;
use crate::support::{
    attr_bool, attr_float, attr_int, inputs_n, normalize_axis, tensor, tensor_type,
};
use crate::{field, op, required};

/// The fields of `InstanceNormAttrs` and `LayerNormAttrs`.
const fn norm_attrs(axis: i64) -> [AttrField; 4] {
    [
        field("axis", K::Int, D::Int(axis)),
        field("epsilon", K::Float, D::Float(1e-5)),
        field("center", K::Bool, D::Bool(true)),
        field("scale", K::Bool, D::Bool(true)),
    ]
}

/// The normalizations and dropout.
pub(super) static OPS: &[OpSchema] = &[
    // Normalization and dropout. `nn.batch_norm` returns a 3-tuple and `nn.dropout` a 2-tuple.
    op(
        "nn.batch_norm",
        &["data", "gamma", "beta", "moving_mean", "moving_var"],
        "relay.attrs.BatchNormAttrs",
        &norm_attrs(1),
    )
    .with(P::Opaque, batch_norm_rel, batch_norm_eval)
    .with_compute(batch_norm_te),
    op(
        "nn.layer_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.LayerNormAttrs",
        &norm_attrs(-1),
    )
    .with(P::Opaque, layer_norm_rel, layer_norm_eval)
    .with_compute(layer_norm_te),
    op(
        "nn.instance_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.InstanceNormAttrs",
        &norm_attrs(1),
    ),
    op(
        "nn.group_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.GroupNormAttrs",
        &[
            field("num_groups", K::Int, D::Int(0)),
            field("axis", K::Int, D::Int(1)),
            field("epsilon", K::Float, D::Float(1e-5)),
            field("center", K::Bool, D::Bool(true)),
            field("scale", K::Bool, D::Bool(true)),
        ],
    ),
    op(
        "nn.lrn",
        DATA,
        "relay.attrs.LRNAttrs",
        &[
            field("size", K::Int, D::Int(5)),
            field("axis", K::Int, D::Int(1)),
            field("bias", K::Float, D::Float(2.0)),
            field("alpha", K::Float, D::Float(0.0001)),
            field("beta", K::Float, D::Float(0.75)),
        ],
    ),
    op(
        "nn.l2_normalize",
        DATA,
        "relay.attrs.L2NormalizeAttrs",
        &[required("eps", K::Float), required("axis", K::IntArray)],
    ),
    op(
        "nn.dropout",
        DATA,
        "relay.attrs.DropoutAttrs",
        &[field("rate", K::Float, D::Float(0.5))],
    )
    .with(P::Opaque, dropout_rel, dropout_eval)
    .with_compute(dropout_te),
];

// ----- Type relations and reference evaluation -----

/// A float tensor and the index of its normalized `axis`.
fn norm_input<'t>(
    data: &'t Type,
    attrs: &Attrs,
    what: &str,
) -> Result<(&'t [Dim], DType, usize), OpError> {
    let (shape, dtype) = tensor_type(data, what)?;
    require_float(data, dtype, what)?;
    let axis = normalize_axis(attr_int(attrs, "axis")?, shape.len())?;
    attr_float(attrs, "epsilon")?;
    Ok((shape, dtype, axis))
}

/// `nn.batch_norm(data, gamma, beta, moving_mean, moving_var)`: the tuple (normalized data,
/// moving_mean, moving_var), the result TVM gives in inference.
fn batch_norm_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data, params @ ..] = inputs_n::<5>(types)?;
    let (shape, dtype, axis) = norm_input(data, attrs, "batch_norm data")?;
    let mut dim = shape.get(axis).copied().unwrap_or(Dim::Known(1));
    for (t, what) in params
        .iter()
        .zip(["gamma", "beta", "moving_mean", "moving_var"])
    {
        dim = check_vector(t, what, dim, dtype, data, axis)?;
    }
    let vector = tensor(vec![dim], dtype);
    Ok(Type::tuple(vec![data.clone(), vector.clone(), vector]))
}

/// `nn.layer_norm(data, gamma, beta)`: data normalized along `axis`.
fn layer_norm_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data, gamma, beta] = inputs_n::<3>(types)?;
    let (shape, dtype, axis) = norm_input(data, attrs, "layer_norm data")?;
    let dim = shape.get(axis).copied().unwrap_or(Dim::Known(1));
    let dim = check_vector(gamma, "gamma", dim, dtype, data, axis)?;
    check_vector(beta, "beta", dim, dtype, data, axis)?;
    Ok(data.clone())
}

/// `(x - mean) / sqrt(var + epsilon) * gamma + beta`, leaving out `gamma` without `scale` and
/// `beta` without `center`.
fn normalize(x: f64, mean: f64, var: f64, gamma: f64, beta: f64, attrs: &NormAttrs) -> f64 {
    let mut y = (x - mean) / (var + attrs.epsilon).sqrt();
    if attrs.scale {
        y *= gamma;
    }
    if attrs.center {
        y += beta;
    }
    y
}

/// The attributes shared by the normalizations.
struct NormAttrs {
    axis: usize,
    epsilon: f64,
    center: bool,
    scale: bool,
}

impl NormAttrs {
    fn new(attrs: &Attrs, rank: usize) -> Result<NormAttrs, OpError> {
        Ok(NormAttrs {
            axis: normalize_axis(attr_int(attrs, "axis")?, rank)?,
            epsilon: attr_float(attrs, "epsilon")?,
            center: attr_bool(attrs, "center")?,
            scale: attr_bool(attrs, "scale")?,
        })
    }
}

fn batch_norm_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, batch_norm_rel)?;
    let x = arg(&arrays, 0)?;
    let a = NormAttrs::new(attrs, x.ndim())?;
    let [gamma, beta, mean, var] = [1, 2, 3, 4].map(|i| arrays.get(i).map(|t| t.to_f64_vec()));
    let (Some(gamma), Some(beta), Some(mean), Some(var)) = (gamma, beta, mean, var) else {
        return Err(OpError::type_error(format!(
            "expects 5 arguments, got {}",
            arrays.len()
        )));
    };
    let (_, extent, inner) = axis_split(x.shape(), a.axis);
    let out: Vec<f64> = x
        .to_f64_vec()
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let c = (i / inner.max(1)) % extent.max(1);
            normalize(v, mean[c], var[c], gamma[c], beta[c], &a)
        })
        .collect();
    Ok(Value::tuple(vec![
        f64::array(x.dtype(), x.shape(), &out)?,
        Value::Tensor(arrays[3].clone()),
        Value::Tensor(arrays[4].clone()),
    ]))
}

fn layer_norm_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, layer_norm_rel)?;
    let x = arg(&arrays, 0)?;
    let a = NormAttrs::new(attrs, x.ndim())?;
    let (gamma, beta) = (arg(&arrays, 1)?.to_f64_vec(), arg(&arrays, 2)?.to_f64_vec());
    let (outer, extent, inner) = axis_split(x.shape(), a.axis);
    let xs = x.to_f64_vec();
    let mut out = vec![0.0; xs.len()];
    for o in 0..outer {
        for r in 0..inner {
            let at = |d: usize| (o * extent + d) * inner + r;
            let n = extent as f64;
            let mean = (0..extent).map(|d| xs[at(d)]).sum::<f64>() / n;
            let var = (0..extent).map(|d| (xs[at(d)] - mean).powi(2)).sum::<f64>() / n;
            for d in 0..extent {
                out[at(d)] = normalize(xs[at(d)], mean, var, gamma[d], beta[d], &a);
            }
        }
    }
    f64::array(x.dtype(), x.shape(), &out)
}

/// `nn.dropout`: the tuple (output, mask), both of the input's type.
fn dropout_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data] = inputs_n::<1>(types)?;
    tensor_type(data, "dropout data")?;
    attr_float(attrs, "rate")?;
    Ok(Type::tuple(vec![data.clone(), data.clone()]))
}

/// Inference dropout: the data unchanged and a mask of ones.
fn dropout_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, _) = checked(args, attrs, dropout_rel)?;
    let x = arg(&arrays, 0)?;
    let ones = vec![1.0; x.num_elements()];
    Ok(Value::tuple(vec![
        Value::Tensor(arrays[0].clone()),
        f64::array(x.dtype(), x.shape(), &ones)?,
    ]))
}

// ----- Compute definitions -----

/// `(x - mean) / sqrt(var + epsilon) * gamma + beta` in `work` (`gamma` only with `scale`,
/// `beta` only with `center`), as the reference's `normalize` (in `float64`).
fn normalize_te(
    x: TExpr,
    mean: &TExpr,
    var: &TExpr,
    (gamma, beta): (TExpr, TExpr),
    a: &NormAttrs,
    work: DType,
) -> TExpr {
    let wide = |e: TExpr| e.cast(work);
    let eps = TExpr::float(a.epsilon, work);
    let denom = compute::bin(BinaryOp::Add, var, &eps).unary(UnaryOp::Sqrt);
    let mut y = compute::bin(
        BinaryOp::Div,
        &compute::bin(BinaryOp::Sub, &wide(x), mean),
        &denom,
    );
    if a.scale {
        y = compute::bin(BinaryOp::Mul, &y, &wide(gamma));
    }
    if a.center {
        y = compute::bin(BinaryOp::Add, &y, &wide(beta));
    }
    y
}

/// The data and the per-channel vectors of a normalization, checked: the vectors have the
/// length of the data's `axis` dimension (1 for rank 0).
fn norm_operands<'t>(
    inputs: &'t [TeValue],
    count: usize,
    out: &Type,
    attrs: &Attrs,
    what: &str,
) -> Result<(Vec<&'t Tensor>, NormAttrs, DType), OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let tensors = (0..count)
        .map(|i| compute::input(inputs, i))
        .collect::<Result<Vec<_>, _>>()?;
    let a = NormAttrs::new(attrs, shape.len())?;
    let extent = shape.get(a.axis).copied().unwrap_or(1);
    let fits = tensors[0].shape == shape
        && tensors[1..]
            .iter()
            .all(|t| t.shape == [extent] && t.dtype == dtype);
    if !fits || !dtype.is_float() {
        return Err(OpError::shape(format!(
            "{what} expects float data of shape {shape:?} and vectors of {extent} elements"
        )));
    }
    Ok((tensors, a, dtype))
}

/// The element of a per-channel vector for the data element at `index`.
fn channel_of(v: &Tensor, index: &[TExpr], axis: usize) -> TExpr {
    v.at(&[index.get(axis).cloned().unwrap_or_else(|| ix(0))])
}

/// An identity copy of `t` (a tuple field that passes an input through).
fn copy_of(t: &Tensor, name: &str) -> TeValue {
    TeValue::Tensor(Tensor::compute(name, &t.shape, |i| t.at(i)))
}

/// `nn.batch_norm` in inference: the tuple (data normalized with the moving statistics,
/// moving_mean, moving_var).
fn batch_norm_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let field = match out.kind() {
        TypeKind::Tuple(fields) => fields.first().cloned(),
        _ => None,
    }
    .ok_or_else(|| {
        OpError::type_error(format!("nn.batch_norm expects a tuple result, got `{out}`"))
    })?;
    let (t, a, dtype) = norm_operands(inputs, 5, &field, attrs, "nn.batch_norm")?;
    let (x, gamma, beta, mean, var) = (t[0], t[1], t[2], t[3], t[4]);
    let normalized = Tensor::compute("T_batch_norm", &x.shape, |i| {
        let at = |v: &Tensor| channel_of(v, i, a.axis);
        normalize_te(
            x.at(i),
            &at(mean).cast(DType::F64),
            &at(var).cast(DType::F64),
            (at(gamma), at(beta)),
            &a,
            DType::F64,
        )
        .cast(dtype)
    });
    Ok(TeValue::Tuple(vec![
        TeValue::Tensor(normalized),
        copy_of(mean, "T_batch_norm_moving_mean"),
        copy_of(var, "T_batch_norm_moving_var"),
    ]))
}

/// `nn.layer_norm`: the data normalized along `axis` with its own mean and (biased) variance,
/// in `float64` — float16 data in `float32` (as ONNX Runtime and the contractions compute
/// it: statistics over thousands of elements carry 13 bits beyond float16's, so the result
/// is within one float16 ulp of the `float64` one), four lanes to a vector.
fn layer_norm_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (t, a, dtype) = norm_operands(inputs, 3, out, attrs, "nn.layer_norm")?;
    let (x, gamma, beta) = (t[0], t[1], t[2]);
    let work = if dtype == DType::F16 {
        DType::F32
    } else {
        DType::F64
    };
    let rank = x.shape.len();
    let (rest, extent) = split_axis(&x.shape, a.axis);
    let count = TExpr::float(extent as f64, work);
    let wide_at = |index: &[TExpr]| x.at(index).cast(work);
    let k = IterVar::new(extent);
    let sum = Tensor::compute("T_layer_norm_sum", &rest, |i| {
        wide_at(&with_axis(i, a.axis, k.expr(), rank)).reduce(ReduceOp::Sum, vec![k])
    });
    let mean = Tensor::compute("T_layer_norm_mean", &rest, |i| {
        compute::bin(BinaryOp::Div, &sum.at(i), &count)
    });
    let k = IterVar::new(extent);
    let squares = Tensor::compute("T_layer_norm_squares", &rest, |i| {
        let d = compute::bin(
            BinaryOp::Sub,
            &wide_at(&with_axis(i, a.axis, k.expr(), rank)),
            &mean.at(i),
        );
        compute::bin(BinaryOp::Mul, &d, &d).reduce(ReduceOp::Sum, vec![k])
    });
    compute::tensor_value(Tensor::compute("T_layer_norm", &x.shape, |i| {
        let r = without_axis(i, a.axis);
        let var = compute::bin(BinaryOp::Div, &squares.at(&r), &count);
        let channel = |v: &Tensor| channel_of(v, i, a.axis);
        normalize_te(
            x.at(i),
            &mean.at(&r),
            &var,
            (channel(gamma), channel(beta)),
            &a,
            work,
        )
        .cast(dtype)
    }))
}

/// `nn.dropout` in inference: the tuple (data, a mask of ones).
fn dropout_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let x = compute::input(inputs, 0)?;
    let fits = match out.kind() {
        TypeKind::Tuple(fields) if fields.len() == 2 => fields
            .iter()
            .all(|f| compute::static_tensor(f).is_ok_and(|(s, d)| s == x.shape && d == x.dtype)),
        _ => false,
    };
    if !fits {
        return Err(OpError::shape(format!(
            "nn.dropout expects a result of two tensors like its input {:?}, got `{out}`",
            x.shape
        )));
    }
    let one = compute::one(x.dtype);
    Ok(TeValue::Tuple(vec![
        copy_of(x, "T_dropout"),
        TeValue::Tensor(Tensor::compute("T_dropout_mask", &x.shape, |_| one)),
    ]))
}

#[cfg(test)]
mod tests {
    use std::slice::from_ref;

    use relay_ir::te::TeValue as TV;
    use relay_ir::{AttrValue as V, NDArray};

    use super::*;
    use crate::compute::interp::Interp;
    use crate::compute::op_tests::{DTYPES, Rng, agree_within, random};
    use crate::nn::testing::*;
    use crate::testing::attrs;

    #[test]
    fn norm_and_dropout_relations() {
        let x = f32s(&[1, 4, 2, 2]);
        let c = f32s(&[4]);
        let bn = [x.clone(), c.clone(), c.clone(), c.clone(), c.clone()];
        assert_eq!(
            ok("nn.batch_norm", &bn, &[]),
            "(Tensor[(1, 4, 2, 2), float32], Tensor[(4), float32], Tensor[(4), float32])"
        );
        let mut bad = bn.clone();
        bad[3] = f32s(&[3]);
        assert_eq!(
            err("nn.batch_norm", &bad, &[]),
            "moving_mean must be `Tensor[(4), float32]` to match axis 1 of data \
             `Tensor[(1, 4, 2, 2), float32]`, got `Tensor[(3), float32]`"
        );
        let any = [
            f32s(&[1, -1]),
            f32s(&[-1]),
            f32s(&[3]),
            f32s(&[-1]),
            f32s(&[-1]),
        ];
        assert_eq!(
            ok("nn.batch_norm", &any, &[]),
            "(Tensor[(1, ?), float32], Tensor[(3), float32], Tensor[(3), float32])"
        );
        assert_eq!(
            ok("nn.layer_norm", &[x.clone(), f32s(&[2]), f32s(&[2])], &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert!(
            err("nn.layer_norm", &[x.clone(), f32s(&[4]), f32s(&[4])], &[])
                .starts_with("gamma must be")
        );
        assert_eq!(
            ok("nn.dropout", from_ref(&x), &[]),
            "(Tensor[(1, 4, 2, 2), float32], Tensor[(1, 4, 2, 2), float32])"
        );
    }

    #[test]
    fn norm_and_dropout_evaluation() {
        let x = t(&[1, 2, 1, 2], &[1., 2., 3., 4.]);
        let v = |values: &[f64]| t(&[2], values);
        let args = [
            x.clone(),
            v(&[1., 2.]),
            v(&[0., 1.]),
            v(&[1.5, 3.5]),
            v(&[0.25, 0.25]),
        ];
        let out = eval("nn.batch_norm", &args, &[("epsilon", V::Float(0.0))]).unwrap();
        let fields = out.as_tuple().unwrap();
        assert_eq!(fields.len(), 3);
        assert_eq!(
            fields[0].as_tensor().unwrap().to_f64_vec(),
            [-1., 1., -1., 3.]
        );
        assert_eq!(fields[1].as_tensor().unwrap().to_f64_vec(), [1.5, 3.5]);
        assert_eq!(fields[2].as_tensor().unwrap().to_f64_vec(), [0.25, 0.25]);
        let out = eval(
            "nn.batch_norm",
            &args,
            &[
                ("epsilon", V::Float(0.0)),
                ("center", V::Bool(false)),
                ("scale", V::Bool(false)),
            ],
        )
        .unwrap();
        let fields = out.as_tuple().unwrap();
        assert_eq!(
            fields[0].as_tensor().unwrap().to_f64_vec(),
            [-1., 1., -1., 1.]
        );

        let (_, out) = run(
            "nn.layer_norm",
            &[
                t(&[2, 4], &[1., 2., 3., 4., 0., 0., 4., 4.]),
                t(&[4], &[1., 1., 2., 2.]),
                t(&[4], &[0., 0., 0., 1.]),
            ],
            &[("epsilon", V::Float(0.0))],
        );
        let z = 1.5 / 1.25f64.sqrt();
        let y = 0.5 / 1.25f64.sqrt();
        assert_close(&out, &[-z, -y, 2. * y, 2. * z + 1., -1., -1., 2., 3.]);
        let (_, out) = run(
            "nn.layer_norm",
            &[t(&[2, 2], &[1., 5., 3., 7.]), v(&[1., 1.]), v(&[0., 0.])],
            &[("axis", V::Int(0)), ("epsilon", V::Float(0.0))],
        );
        assert_close(&out, &[-1., -1., 1., 1.]);

        let out = eval("nn.dropout", &[x], &[]).unwrap();
        let fields = out.as_tuple().unwrap();
        assert_eq!(
            fields[0].as_tensor().unwrap().to_f64_vec(),
            [1., 2., 3., 4.]
        );
        let mask = fields[1].as_tensor().unwrap();
        assert_eq!(mask.shape(), [1, 2, 1, 2]);
        assert_eq!(mask.dtype(), DType::F32);
        assert_eq!(mask.to_f64_vec(), [1.; 4]);
    }

    /// As `check`, for an operator returning a tuple: every field of the compute definition
    /// agrees with the reference evaluation's.
    fn check_tuple(name: &str, inputs: &[NDArray], set: &Attrs) -> bool {
        let op = schema(name);
        let types: Vec<Type> = inputs
            .iter()
            .map(|a| Type::tensor(a.shape(), a.dtype()))
            .collect();
        let Ok(out) = (op.relation.unwrap())(&types, set) else {
            return false;
        };
        let placeholders = crate::compute::op_tests::placeholders(inputs);
        let values: Vec<Value> = inputs.iter().map(|a| Value::tensor(a.clone())).collect();
        let want = (op.eval.unwrap())(&values, set).unwrap();
        let TV::Tuple(got) = (op.compute.unwrap())(&placeholders, set, &out).unwrap() else {
            panic!("`{name}` computes no tuple");
        };
        let want = want.as_tuple().unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(want) {
            assert_reads_in_bounds(g.as_tensor().unwrap());
            let g = Interp::new(inputs).tensor(g.as_tensor().unwrap()).unwrap();
            let w = w.as_tensor().unwrap();
            let rtol = match w.dtype().bits {
                64 => 1e-12,
                32 => 1e-6,
                _ => 4e-3,
            };
            assert!(
                agree_within(w, &g, rtol),
                "`{name}` on {inputs:?} with {set:?}:\n eval {:?}\n te   {:?}",
                w.to_f64_vec(),
                g.to_f64_vec()
            );
        }
        true
    }

    #[test]
    fn normalizations_and_dropout_compute() {
        let mut rng = Rng(0x5eed_0006);
        for dtype in DTYPES {
            for (shape, axis) in [
                (&[2, 3, 4][..], 1),
                (&[2, 3, 4], -1),
                (&[3, 2], 0),
                (&[1, 5], 1),
                (&[4], 0),
                (&[0, 3], 1),
                (&[2, 0], 0),
                (&[], 0),
            ] {
                let n = shape
                    .get(normalize_axis(axis, shape.len()).unwrap())
                    .copied()
                    .unwrap_or(1);
                for (center, scale) in [(true, true), (false, true), (true, false), (false, false)]
                {
                    for epsilon in [1e-5, 0.5] {
                        let set = [
                            ("axis", V::Int(axis)),
                            ("epsilon", V::Float(epsilon)),
                            ("center", V::Bool(center)),
                            ("scale", V::Bool(scale)),
                        ];
                        let x = random(&mut rng, dtype, shape);
                        let vectors: Vec<NDArray> =
                            (0..4).map(|_| random(&mut rng, dtype, &[n])).collect();
                        let mut args = vec![x.clone()];
                        args.extend(vectors[..2].iter().cloned());
                        let a = attrs("nn.layer_norm", &set);
                        assert_eq!(verify("nn.layer_norm", &args, &a, exact), dtype.is_float());
                        // Variances from the random values may be negative; keep some positive.
                        let var = NDArray::from_f64_slice(
                            dtype,
                            &[n],
                            &vectors[3]
                                .to_f64_vec()
                                .iter()
                                .map(|v| v.abs())
                                .collect::<Vec<_>>(),
                        )
                        .unwrap();
                        let mut args = vec![x];
                        args.extend(vectors[..3].iter().cloned());
                        args.push(if rng.below(2) == 0 {
                            var
                        } else {
                            vectors[3].clone()
                        });
                        let a = attrs("nn.batch_norm", &set);
                        assert_eq!(check_tuple("nn.batch_norm", &args, &a), dtype.is_float());
                    }
                }
            }
            for shape in [&[2, 3][..], &[], &[0, 4], &[1, 1, 2]] {
                let x = random(&mut rng, dtype, shape);
                let a = attrs("nn.dropout", &[("rate", V::Float(0.3))]);
                assert!(check_tuple("nn.dropout", &[x], &a));
            }
        }
    }
}
