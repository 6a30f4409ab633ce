//! Reductions over axes: `sum`, `mean`, `max`, …, the index-valued `argmax`/`argmin`, and
//! `variance` (reference §14.3).
//!
//! Every reduction follows TVM: `axis=None` (or `[]`) folds every axis, negative axes count from
//! the end, `exclude=True` folds every axis *not* listed, and `keepdims=True` leaves the folded
//! axes as size 1. Reference evaluation accumulates floats in `f64` and integers in `i128`, then
//! converts to the input dtype (integers wrap, as numpy's do); `argmax`/`argmin` return `int32`
//! positions within the folded axes (row-major over them), like TVM.
//!
//! The compute definitions reduce in the reference's order and accumulator (floats in
//! `float64`, integer sums and products in 64 bits, which agree modulo the dtype's width), then
//! divide (`mean`, `variance`) and convert in an elementwise epilogue. The mean of 64-bit
//! integers and the variance of 32- and 64-bit integers divide 128-bit sums: they sum 32-bit
//! pieces in `int64` and divide the wide sum exactly ([`compute::wide_quotient`]). The max,
//! min, argmax or argmin of an empty reduction (which always fails) has no compute definition.

use relay_ir::OpError;
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, EvalFn, NDArray, OpPattern as P,
    OpSchema, RelationFn, Type, Value,
};

use relay_ir::te::{BinaryOp, CmpOp, IterVar, ReduceOp, TExpr, TeValue, Tensor};

use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, attr_bool, attr_opt_ints, axis_index, broadcast_shapes, dims, expect_inputs,
    shape_text, tensor, tensor_type, value,
};
use crate::{field, nullable, op};

/// `ReduceAttrs`. `axis` is always an array (a single axis prints as `axis=[1]`); `None` reduces
/// over every axis.
const REDUCE_ATTRS: &[AttrField] = &[
    nullable("axis", K::IntArray),
    field("keepdims", K::Bool, D::Bool(false)),
    field("exclude", K::Bool, D::Bool(false)),
];

/// `ArgReduceAttrs`: `select_last_index` comes before `exclude`.
const ARG_REDUCE_ATTRS: &[AttrField] = &[
    nullable("axis", K::IntArray),
    field("keepdims", K::Bool, D::Bool(false)),
    field("select_last_index", K::Bool, D::Bool(false)),
    field("exclude", K::Bool, D::Bool(false)),
];

/// `VarianceAttrs`.
const VARIANCE_ATTRS: &[AttrField] = &[
    nullable("axis", K::IntArray),
    field("keepdims", K::Bool, D::Bool(false)),
    field("exclude", K::Bool, D::Bool(false)),
    field("unbiased", K::Bool, D::Bool(false)),
];

const DATA: &[&str] = &["data"];

/// A commutative reduction with TVM's `ReduceAttrs` (`axis`, `keepdims`, `exclude`).
const fn reduction(name: &'static str, relation: RelationFn, eval: EvalFn) -> OpSchema {
    op(name, DATA, "relay.attrs.ReduceAttrs", REDUCE_ATTRS).with(P::CommReduce, relation, eval)
}

pub(crate) static OPS: &[OpSchema] = &[
    // The inverse of broadcasting: `data` summed down to `like`'s shape (TVM's gradient of a
    // broadcast; no attributes).
    op("collapse_sum_like", &["data", "like"], "", &[])
        .with(P::CommReduce, collapse_sum_like_rel, collapse_sum_like_eval)
        .with_compute(collapse_sum_like_te),
    reduction("sum", reduce_rel, sum_eval).with_compute(|i, a, o| fold_te(i, a, o, Fold::Sum)),
    reduction("mean", reduce_rel, mean_eval).with_compute(|i, a, o| fold_te(i, a, o, Fold::Mean)),
    reduction("max", reduce_rel, max_eval).with_compute(|i, a, o| fold_te(i, a, o, Fold::Max)),
    reduction("min", reduce_rel, min_eval).with_compute(|i, a, o| fold_te(i, a, o, Fold::Min)),
    reduction("prod", reduce_rel, prod_eval).with_compute(|i, a, o| fold_te(i, a, o, Fold::Prod)),
    reduction("all", logical_reduce_rel, all_eval)
        .with_compute(|i, a, o| fold_te(i, a, o, Fold::All)),
    reduction("any", logical_reduce_rel, any_eval)
        .with_compute(|i, a, o| fold_te(i, a, o, Fold::Any)),
    op(
        "argmax",
        DATA,
        "relay.attrs.ArgReduceAttrs",
        ARG_REDUCE_ATTRS,
    )
    .with(P::CommReduce, arg_reduce_rel, argmax_eval)
    .with_compute(|i, a, o| arg_te(i, a, o, true)),
    op(
        "argmin",
        DATA,
        "relay.attrs.ArgReduceAttrs",
        ARG_REDUCE_ATTRS,
    )
    .with(P::CommReduce, arg_reduce_rel, argmin_eval)
    .with_compute(|i, a, o| arg_te(i, a, o, false)),
    // `variance` takes the mean as a second input; `std`, `mean_variance` and `logsumexp` are
    // Python compositions, not operators.
    op(
        "variance",
        &["data", "mean"],
        "relay.attrs.VarianceAttrs",
        VARIANCE_ATTRS,
    )
    .with(P::CommReduce, variance_rel, variance_eval)
    .with_compute(variance_te),
];

// ----- collapse_sum_like -----

/// The axes of `shape` that collapsing it to `target` sums (with `keepdims`): the leading
/// axes `target` lacks, and those where `target` has 1 and `shape` does not. Every other
/// dimension of `target` must be `shape`'s (or unknown).
fn collapse_axes(shape: &[Dim], target: &[Dim]) -> Result<Vec<i64>, OpError> {
    let fail = || {
        OpError::shape(format!(
            "collapse_sum_like cannot sum {} down to {}: the second shape must broadcast to the \
             first",
            shape_text(shape),
            shape_text(target)
        ))
    };
    let lead = shape.len().checked_sub(target.len()).ok_or_else(fail)?;
    let mut axes: Vec<i64> = (0..lead as i64).collect();
    for (i, (&t, &d)) in target.iter().zip(&shape[lead..]).enumerate() {
        match (t, d) {
            (Dim::Known(1), Dim::Known(1)) => {}
            (Dim::Known(1), _) => axes.push((lead + i) as i64),
            (Dim::Known(a), Dim::Known(b)) if a != b => return Err(fail()),
            _ => {}
        }
    }
    Ok(axes)
}

/// The attributes of the `sum` that collapses: `axes` kept as 1s.
fn collapse_attrs(axes: &[i64]) -> Attrs {
    use relay_ir::{AttrValue, Symbol};
    Attrs::new(vec![
        (
            Symbol::intern("axis"),
            AttrValue::Array(axes.iter().map(|&a| AttrValue::Int(a)).collect()),
        ),
        (Symbol::intern("keepdims"), AttrValue::Bool(true)),
        (Symbol::intern("exclude"), AttrValue::Bool(false)),
    ])
}

/// `collapse_sum_like(data, like)`: `like`'s shape, `data`'s dtype.
fn collapse_sum_like_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    expect_inputs(inputs, 2)?;
    let (shape, dtype) = tensor_type(&inputs[0], "the data")?;
    let (target, _) = tensor_type(&inputs[1], "the shape to collapse to")?;
    collapse_axes(shape, target)?;
    Ok(tensor(target.to_vec(), dtype))
}

fn collapse_sum_like_eval(args: &[Value], _: &Attrs) -> Result<Value, OpError> {
    let (x, like) = (arg_tensor(args, 0)?, arg_tensor(args, 1)?);
    let axes = collapse_axes(&dims(x.shape()), &dims(like.shape()))?;
    let summed = if axes.is_empty() {
        x.clone()
    } else {
        let v = sum_eval(&args[..1], &collapse_attrs(&axes))?;
        v.as_tensor()
            .ok_or_else(|| OpError::shape("internal error: a sum that is not a tensor"))?
            .clone()
    };
    value(NDArray::from_bytes(
        x.dtype(),
        like.shape(),
        summed.as_bytes(),
    ))
}

fn collapse_sum_like_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> ComputeResult {
    let (target, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let axes = collapse_axes(&dims(&x.shape), &dims(&target))?;
    let lead = x.shape.len() - target.len();
    let summed = if axes.is_empty() {
        x.clone()
    } else {
        let mut kept = x.shape.clone();
        axes.iter().for_each(|&a| kept[a as usize] = 1);
        let kept = tensor(dims(&kept), dtype);
        let v = fold_te(&inputs[..1], &collapse_attrs(&axes), &kept, Fold::Sum)?;
        v.as_tensor()
            .ok_or_else(|| OpError::shape("internal error: a sum that is not a tensor"))?
            .clone()
    };
    let t = Tensor::compute("T_collapse_sum", &target, |i| {
        let mut at = vec![TExpr::index(0); lead];
        at.extend_from_slice(i);
        summed.at(&at)
    });
    compute::tensor_value(t)
}

// ----- Which axes fold -----

/// For each dimension of a tensor of `rank` dimensions, whether the reduction folds it
/// (TVM's `GetReduceAxes`).
pub fn reduced_mask(rank: usize, attrs: &Attrs) -> Result<Vec<bool>, OpError> {
    let exclude = attr_bool(attrs, "exclude")?;
    let axes = attr_opt_ints(attrs, "axis")?.unwrap_or_default();
    if axes.is_empty() {
        return Ok(vec![true; rank]);
    }
    let mut listed = vec![false; rank];
    for &axis in &axes {
        let d = axis_index(axis, rank)?;
        if listed[d] {
            return Err(OpError::attribute(
                "axis",
                format!("`axis` lists dimension {d} twice"),
            ));
        }
        listed[d] = true;
    }
    Ok(listed.into_iter().map(|l| l != exclude).collect())
}

/// The shape left by folding the dimensions `mask` marks: removed, or kept as `one` with
/// `keepdims`.
fn reduced_shape<T: Copy>(shape: &[T], mask: &[bool], keepdims: bool, one: T) -> Vec<T> {
    shape
        .iter()
        .zip(mask)
        .filter_map(|(&d, &folded)| match (folded, keepdims) {
            (false, _) => Some(d),
            (true, true) => Some(one),
            (true, false) => None,
        })
        .collect()
}

// ----- Type relations -----

/// The single tensor input of a reduction.
fn data_type(inputs: &[Type], count: usize) -> Result<(&[Dim], DType), OpError> {
    expect_inputs(inputs, count)?;
    tensor_type(&inputs[0], "the data")
}

/// The type of a reduction of `data` with the attributes' axes, in `dtype`.
fn reduced_type(shape: &[Dim], dtype: DType, attrs: &Attrs) -> Result<Type, OpError> {
    let mask = reduced_mask(shape.len(), attrs)?;
    let keepdims = attr_bool(attrs, "keepdims")?;
    Ok(tensor(
        reduced_shape(shape, &mask, keepdims, Dim::Known(1)),
        dtype,
    ))
}

/// `sum`, `mean`, `max`, `min`, `prod`: the input dtype over the remaining axes.
fn reduce_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs, 1)?;
    reduced_type(shape, dtype, attrs)
}

/// `all`, `any`: a bool tensor reduced to bool.
fn logical_reduce_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs, 1)?;
    if dtype != DType::BOOL {
        return Err(OpError::dtype(format!(
            "the data must be a bool tensor, got `{}`",
            inputs[0]
        )));
    }
    reduced_type(shape, dtype, attrs)
}

/// `argmax`, `argmin`: `int32` positions over the remaining axes.
fn arg_reduce_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, _) = data_type(inputs, 1)?;
    attr_bool(attrs, "select_last_index")?;
    reduced_type(shape, DType::I32, attrs)
}

/// `variance(data, mean)`: `mean` has the rank and dtype of `data` and broadcasts to it.
fn variance_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs, 2)?;
    let (mean_shape, mean_dtype) = tensor_type(&inputs[1], "the mean")?;
    if mean_dtype != dtype {
        return Err(OpError::dtype(format!(
            "the mean must have the data's dtype {dtype}, got `{}`",
            inputs[1]
        )));
    }
    let fits = mean_shape.len() == shape.len()
        && broadcast_shapes(shape, mean_shape).is_some_and(|b| {
            b.iter().zip(shape).all(|(b, d)| match (b, d) {
                (Dim::Known(x), Dim::Known(y)) => x == y,
                _ => true,
            })
        });
    if !fits {
        return Err(OpError::shape(format!(
            "the mean of shape {} does not broadcast to the data's shape {}",
            shape_text(mean_shape),
            shape_text(shape)
        )));
    }
    attr_bool(attrs, "unbiased")?;
    reduced_type(shape, dtype, attrs)
}

// ----- Reference evaluation -----

/// Where each input element of a reduction goes: its output position and its position among
/// the folded axes (row-major over them), listed in the input's row-major order.
struct Walk {
    /// Output flat index of every input element.
    out: Vec<usize>,
    /// Flat index within the folded axes of every input element.
    inner: Vec<usize>,
    /// Number of output elements.
    out_len: usize,
    /// Number of elements each output folds.
    inner_len: usize,
}

impl Walk {
    fn new(shape: &[i64], mask: &[bool]) -> Walk {
        let rank = shape.len();
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        let mut out_stride = vec![0usize; rank];
        let mut inner_stride = vec![0usize; rank];
        let (mut out_len, mut inner_len) = (1usize, 1usize);
        for d in (0..rank).rev() {
            if mask[d] {
                inner_stride[d] = inner_len;
                inner_len *= dims[d];
            } else {
                out_stride[d] = out_len;
                out_len *= dims[d];
            }
        }
        let total = out_len * inner_len;
        let mut walk = Walk {
            out: Vec::with_capacity(total),
            inner: Vec::with_capacity(total),
            out_len,
            inner_len,
        };
        let mut idx = vec![0usize; rank];
        for _ in 0..total {
            walk.out
                .push(idx.iter().zip(&out_stride).map(|(i, s)| i * s).sum());
            walk.inner
                .push(idx.iter().zip(&inner_stride).map(|(i, s)| i * s).sum());
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < dims[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        walk
    }
}

/// The input tensor, the fold mask, the output shape and the walk of a reduction call.
fn prepare<'a>(args: &'a [Value], attrs: &Attrs) -> Result<(&'a NDArray, Vec<i64>, Walk), OpError> {
    let x = arg_tensor(args, 0)?;
    let mask = reduced_mask(x.ndim(), attrs)?;
    let keepdims = attr_bool(attrs, "keepdims")?;
    let out_shape = reduced_shape(x.shape(), &mask, keepdims, 1);
    let walk = Walk::new(x.shape(), &mask);
    Ok((x, out_shape, walk))
}

/// The plain reductions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fold {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    All,
    Any,
}

impl Fold {
    fn name(self) -> &'static str {
        match self {
            Fold::Sum => "sum",
            Fold::Mean => "mean",
            Fold::Max => "max",
            Fold::Min => "min",
            Fold::Prod => "prod",
            Fold::All => "all",
            Fold::Any => "any",
        }
    }

    fn start_f64(self) -> f64 {
        match self {
            Fold::Sum | Fold::Mean | Fold::Any => 0.0,
            Fold::Prod | Fold::All => 1.0,
            Fold::Max => f64::NEG_INFINITY,
            Fold::Min => f64::INFINITY,
        }
    }

    /// Combines an accumulator with one element; NaN propagates through `max` and `min` as in
    /// numpy.
    fn step_f64(self, acc: f64, x: f64) -> f64 {
        match self {
            Fold::Sum | Fold::Mean => acc + x,
            Fold::Prod => acc * x,
            Fold::Max => {
                if x > acc || x.is_nan() {
                    x
                } else {
                    acc
                }
            }
            Fold::Min => {
                if x < acc || x.is_nan() {
                    x
                } else {
                    acc
                }
            }
            Fold::All => f64::from(u8::from(acc != 0.0 && x != 0.0)),
            Fold::Any => f64::from(u8::from(acc != 0.0 || x != 0.0)),
        }
    }

    fn start_i128(self) -> i128 {
        match self {
            Fold::Sum | Fold::Mean | Fold::Any => 0,
            Fold::Prod | Fold::All => 1,
            Fold::Max => i128::MIN,
            Fold::Min => i128::MAX,
        }
    }

    /// Combines an accumulator with one element; products wrap (the result is truncated to
    /// the dtype's width anyway).
    fn step_i128(self, acc: i128, x: i128) -> i128 {
        match self {
            Fold::Sum | Fold::Mean => acc.wrapping_add(x),
            Fold::Prod => acc.wrapping_mul(x),
            Fold::Max => acc.max(x),
            Fold::Min => acc.min(x),
            Fold::All => i128::from(acc != 0 && x != 0),
            Fold::Any => i128::from(acc != 0 || x != 0),
        }
    }
}

fn fold_eval(args: &[Value], attrs: &Attrs, fold: Fold) -> Result<Value, OpError> {
    let (x, out_shape, walk) = prepare(args, attrs)?;
    let dtype = x.dtype();
    if walk.inner_len == 0 && walk.out_len > 0 && matches!(fold, Fold::Max | Fold::Min) {
        return Err(OpError::value(format!(
            "cannot take the {} of an empty reduction (input shape {:?})",
            fold.name(),
            x.shape()
        )));
    }
    if dtype.is_float() {
        let mut acc = vec![fold.start_f64(); walk.out_len];
        for (i, v) in x.to_f64_vec().into_iter().enumerate() {
            let o = walk.out[i];
            acc[o] = fold.step_f64(acc[o], v);
        }
        if fold == Fold::Mean {
            let count = walk.inner_len as f64;
            acc.iter_mut().for_each(|a| *a /= count);
        }
        value(NDArray::from_f64_slice(dtype, &out_shape, &acc))
    } else {
        let mut acc = vec![fold.start_i128(); walk.out_len];
        for (i, v) in x.to_i128_vec().into_iter().enumerate() {
            let o = walk.out[i];
            acc[o] = fold.step_i128(acc[o], v);
        }
        if fold == Fold::Mean && walk.out_len > 0 {
            if walk.inner_len == 0 {
                return Err(OpError::value(
                    "integer division by zero: the mean of an empty reduction",
                ));
            }
            let count = walk.inner_len as i128;
            acc.iter_mut().for_each(|a| *a /= count);
        }
        value(NDArray::from_i128_slice(dtype, &out_shape, &acc))
    }
}

fn sum_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::Sum)
}

fn mean_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::Mean)
}

fn max_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::Max)
}

fn min_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::Min)
}

fn prod_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::Prod)
}

fn all_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::All)
}

fn any_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    fold_eval(args, attrs, Fold::Any)
}

/// Whether `x` replaces the best value `best` so far of an `argmax` (`max`) or `argmin`.
/// NaN counts as the extreme value, as in numpy; ties keep the first position unless
/// `last` (`select_last_index`).
fn replaces<T: PartialOrd>(
    x: T,
    x_nan: bool,
    best: T,
    best_nan: bool,
    max: bool,
    last: bool,
) -> bool {
    if best_nan {
        return last && x_nan;
    }
    if x_nan {
        return true;
    }
    let strictly = if max { x > best } else { x < best };
    strictly || (last && x == best)
}

/// The position within the folded axes of the extreme element of every output.
fn arg_positions<T: PartialOrd + Copy>(
    values: &[T],
    is_nan: fn(T) -> bool,
    walk: &Walk,
    max: bool,
    last: bool,
) -> Vec<i128> {
    let mut best: Vec<Option<(T, usize)>> = vec![None; walk.out_len];
    for (i, &x) in values.iter().enumerate() {
        let o = walk.out[i];
        let take = match best[o] {
            None => true,
            Some((b, _)) => replaces(x, is_nan(x), b, is_nan(b), max, last),
        };
        if take {
            best[o] = Some((x, walk.inner[i]));
        }
    }
    best.into_iter()
        .map(|b| b.map_or(0, |(_, pos)| pos as i128))
        .collect()
}

fn arg_eval(args: &[Value], attrs: &Attrs, max: bool) -> Result<Value, OpError> {
    let (x, out_shape, walk) = prepare(args, attrs)?;
    let last = attr_bool(attrs, "select_last_index")?;
    if walk.inner_len == 0 && walk.out_len > 0 {
        return Err(OpError::value(format!(
            "cannot take the {} of an empty reduction (input shape {:?})",
            if max { "argmax" } else { "argmin" },
            x.shape()
        )));
    }
    let positions = if x.dtype().is_float() {
        arg_positions(&x.to_f64_vec(), f64::is_nan, &walk, max, last)
    } else {
        arg_positions(&x.to_i128_vec(), |_| false, &walk, max, last)
    };
    value(NDArray::from_i128_slice(DType::I32, &out_shape, &positions))
}

fn argmax_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    arg_eval(args, attrs, true)
}

fn argmin_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    arg_eval(args, attrs, false)
}

/// `variance(data, mean)`: the mean over the folded axes of `(data - mean)²`, dividing by
/// `N - 1` instead of `N` when `unbiased` (TVM's `VarianceCompute`).
fn variance_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (x, out_shape, walk) = prepare(args, attrs)?;
    let mean = arg_tensor(args, 1)?;
    let unbiased = attr_bool(attrs, "unbiased")?;
    let (shape, mean_shape) = (x.shape(), mean.shape());
    let fits = mean_shape.len() == shape.len()
        && mean_shape
            .iter()
            .zip(shape)
            .all(|(&m, &d)| m == d || m == 1);
    if !fits {
        return Err(OpError::shape(format!(
            "the mean of shape {mean_shape:?} does not broadcast to the data's shape {shape:?}"
        )));
    }
    // The flat position in `mean` of every data element, broadcasting size-1 dimensions.
    let rank = shape.len();
    let mut mean_stride = vec![0usize; rank];
    let mut s = 1usize;
    for d in (0..rank).rev() {
        if mean_shape[d] != 1 {
            mean_stride[d] = s;
        }
        s *= mean_shape[d].max(0) as usize;
    }
    let mut mean_pos = Vec::with_capacity(x.num_elements());
    let mut idx = vec![0usize; rank];
    for _ in 0..x.num_elements() {
        mean_pos.push(
            idx.iter()
                .zip(&mean_stride)
                .map(|(i, s)| i * s)
                .sum::<usize>(),
        );
        for d in (0..rank).rev() {
            idx[d] += 1;
            if (idx[d] as i64) < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let count = walk.inner_len as i128 - i128::from(unbiased);
    let dtype = x.dtype();
    if dtype.is_float() {
        let m = mean.to_f64_vec();
        let mut acc = vec![0.0f64; walk.out_len];
        for (i, v) in x.to_f64_vec().into_iter().enumerate() {
            let diff = v - m[mean_pos[i]];
            acc[walk.out[i]] += diff * diff;
        }
        acc.iter_mut().for_each(|a| *a /= count as f64);
        value(NDArray::from_f64_slice(dtype, &out_shape, &acc))
    } else {
        if count <= 0 && walk.out_len > 0 {
            return Err(OpError::value(format!(
                "integer division by zero: the variance divides by {count}"
            )));
        }
        let m = mean.to_i128_vec();
        let mut acc = vec![0i128; walk.out_len];
        for (i, v) in x.to_i128_vec().into_iter().enumerate() {
            let diff = v.wrapping_sub(m[mean_pos[i]]);
            let o = walk.out[i];
            acc[o] = acc[o].wrapping_add(diff.wrapping_mul(diff));
        }
        acc.iter_mut().for_each(|a| *a /= count.max(1));
        value(NDArray::from_i128_slice(dtype, &out_shape, &acc))
    }
}

// ----- Compute definitions -----

/// The parts of a reduction's compute definition: the input read at an output index and the
/// reduction axes, and the sizes involved.
struct Folding {
    /// For each input dimension, whether it folds.
    mask: Vec<bool>,
    /// Whether folded dimensions stay as size 1 in the output.
    keepdims: bool,
    /// The output's shape and dtype.
    out_shape: Vec<i64>,
    out_dtype: DType,
    /// Number of output elements and of elements each one folds.
    out_len: i64,
    inner_len: i64,
}

impl Folding {
    fn new(data: &Tensor, attrs: &Attrs, out: &Type) -> Result<Folding, OpError> {
        let (out_shape, out_dtype) = compute::static_tensor(out)?;
        let mask = reduced_mask(data.shape.len(), attrs)?;
        let keepdims = attr_bool(attrs, "keepdims")?;
        let (mut out_len, mut inner_len) = (1i64, 1i64);
        for (&d, &folded) in data.shape.iter().zip(&mask) {
            if folded {
                inner_len = inner_len.saturating_mul(d);
            } else {
                out_len = out_len.saturating_mul(d);
            }
        }
        if reduced_shape(&data.shape, &mask, keepdims, 1) != out_shape {
            return Err(OpError::shape(format!(
                "the output shape {out_shape:?} is not the reduced shape of {:?}",
                data.shape
            )));
        }
        Ok(Folding {
            mask,
            keepdims,
            out_shape,
            out_dtype,
            out_len,
            inner_len,
        })
    }

    /// Fresh reduction axes (one per folded dimension) and the input index they and the output
    /// index `out` address.
    fn index(&self, shape: &[i64], out: &[TExpr]) -> (Vec<IterVar>, Vec<TExpr>) {
        let mut axes = Vec::new();
        let mut index = Vec::with_capacity(shape.len());
        let mut j = 0;
        for (&d, &folded) in shape.iter().zip(&self.mask) {
            if folded {
                let axis = IterVar::new(d);
                index.push(axis.expr());
                axes.push(axis);
                j += usize::from(self.keepdims);
            } else {
                index.push(out.get(j).cloned().unwrap_or_else(|| TExpr::index(0)));
                j += 1;
            }
        }
        (axes, index)
    }

    /// Whether the reduction folds no element into a non-empty output.
    fn empty(&self) -> bool {
        self.inner_len == 0 && self.out_len > 0
    }
}

/// The dtype `fold` accumulates elements of `dtype` in: floats in `float64` (as the reference
/// does), integer sums and products in 64 bits (equal modulo the dtype's width; a mean of
/// 64-bit integers sums halves instead, see [`wide_mean`]), extremes in the dtype itself.
fn accumulator(fold: Fold, dtype: DType) -> DType {
    if dtype.is_float() {
        DType::F64
    } else {
        match fold {
            Fold::Sum | Fold::Mean | Fold::Prod if dtype == DType::U64 => DType::U64,
            Fold::Sum | Fold::Mean | Fold::Prod => DType::I64,
            Fold::Max | Fold::Min | Fold::All | Fold::Any => dtype,
        }
    }
}

/// `name_red[i] = reduce(body(i, r)) over r`, then `T_name[i] = epilogue(T_name_red[i])` when
/// the epilogue is not the identity.
fn reduce_then(
    name: &str,
    f: &Folding,
    body: impl FnOnce(&[TExpr]) -> TExpr,
    epilogue: impl FnOnce(TExpr) -> TExpr,
) -> ComputeResult {
    let red = Tensor::compute(format!("T_{name}_red"), &f.out_shape, body);
    let out = Tensor::compute(format!("T_{name}"), &f.out_shape, |i| epilogue(red.at(i)));
    if let relay_ir::te::TensorOp::Compute { body, .. } = &out.op
        && matches!(body.kind(), relay_ir::te::TExprKind::Read { .. })
    {
        return compute::tensor_value(red);
    }
    compute::tensor_value(out)
}

/// `sum`, `mean`, `max`, `min`, `prod`, `all`, `any`: a reduction in the accumulator dtype,
/// then the division of `mean` and the conversion to the output dtype.
fn fold_te(inputs: &[TeValue], attrs: &Attrs, out: &Type, fold: Fold) -> ComputeResult {
    let x = compute::input(inputs, 0)?;
    let f = Folding::new(x, attrs, out)?;
    if f.empty() && matches!(fold, Fold::Max | Fold::Min) {
        return Err(OpError::value(format!(
            "cannot take the {} of an empty reduction (input shape {:?})",
            fold.name(),
            x.shape
        )));
    }
    let dtype = x.dtype;
    if fold == Fold::Mean && !dtype.is_float() && dtype.bits == 64 {
        return wide_mean(x, &f);
    }
    let acc = accumulator(fold, dtype);
    let op = match fold {
        Fold::Sum | Fold::Mean => ReduceOp::Sum,
        Fold::Max => ReduceOp::Max,
        Fold::Min => ReduceOp::Min,
        Fold::Prod => ReduceOp::Prod,
        Fold::All => ReduceOp::All,
        Fold::Any => ReduceOp::Any,
    };
    let count = f.inner_len;
    let out_dtype = f.out_dtype;
    reduce_then(
        fold.name(),
        &f,
        |i| {
            let (axes, index) = f.index(&x.shape, i);
            x.at(&index).cast(acc).reduce(op, axes)
        },
        |r| {
            let r = if fold != Fold::Mean {
                r
            } else if acc.is_float() {
                compute::bin(BinaryOp::Div, &r, &TExpr::float(count as f64, acc))
            } else {
                // An empty mean divides by zero: the reference's run-time error.
                compute::bin(BinaryOp::Div, &r, &TExpr::int(i128::from(count), acc))
            };
            r.cast(out_dtype)
        },
    )
}

/// `argmax`, `argmin`: the position of the extreme element, in `int32`.
fn arg_te(inputs: &[TeValue], attrs: &Attrs, out: &Type, max: bool) -> ComputeResult {
    let x = compute::input(inputs, 0)?;
    let f = Folding::new(x, attrs, out)?;
    let name = if max { "argmax" } else { "argmin" };
    if f.empty() {
        return Err(OpError::value(format!(
            "cannot take the {name} of an empty reduction (input shape {:?})",
            x.shape
        )));
    }
    let last = attr_bool(attrs, "select_last_index")?;
    let op = if max {
        ReduceOp::ArgMax { last }
    } else {
        ReduceOp::ArgMin { last }
    };
    let value = if x.dtype.is_float() {
        DType::F64
    } else {
        x.dtype
    };
    let out_dtype = f.out_dtype;
    reduce_then(
        name,
        &f,
        |i| {
            let (axes, index) = f.index(&x.shape, i);
            x.at(&index).cast(value).arg_reduce(op, axes)
        },
        |r| r.cast(out_dtype),
    )
}

/// The most elements one output of a mean of 64-bit integers, or of a variance of 32-bit
/// integers, may fold: the `int64` sums of 32-bit halves then stay below 2^62 and the divisor
/// below 2^31, as [`compute::wide_quotient`] requires.
const HALVES_LIMIT: i64 = 1 << 30;

/// The most elements one output of a variance of 64-bit integers may fold: its `int64` sums of
/// up to three 32-bit pieces per element stay below 3·2^61.
const LIMBS_LIMIT: i64 = 1 << 29;

/// Fails when each output of `f` folds more than `limit` elements.
fn within(f: &Folding, limit: i64, what: &str, dtype: DType) -> Result<(), OpError> {
    if f.inner_len > limit {
        return Err(OpError::unsupported(format!(
            "the {what} of {} {dtype} values is not supported (at most {limit})",
            f.inner_len
        )));
    }
    Ok(())
}

/// `mean` of 64-bit integers, whose exact sum needs more than 64 bits: `int64` sums of the
/// high halves and of the low halves, then the exact truncating division of their 128-bit
/// total, as the reference divides its `i128` sum.
fn wide_mean(x: &Tensor, f: &Folding) -> ComputeResult {
    within(f, HALVES_LIMIT, "mean", x.dtype)?;
    let sum = |part: &str, half: fn(&TExpr) -> TExpr| {
        Tensor::compute(format!("T_mean_{part}"), &f.out_shape, |i| {
            let (axes, index) = f.index(&x.shape, i);
            half(&x.at(&index)).reduce(ReduceOp::Sum, axes)
        })
    };
    let (hi, lo) = (sum("hi", compute::high_half), sum("lo", compute::low_half));
    // An empty mean divides by zero: the reference's run-time error.
    let count = TExpr::int(i128::from(f.inner_len), DType::I64);
    compute::tensor_value(Tensor::compute("T_mean", &f.out_shape, |i| {
        compute::wide_quotient(&[lo.at(i), hi.at(i)], &count, false).cast(f.out_dtype)
    }))
}

/// `variance(data, mean)`: the sum of `(data - mean)²` (the mean broadcast along its size-1
/// dimensions), divided by `N` or `N - 1`.
fn variance_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let x = compute::input(inputs, 0)?;
    let mean = compute::input(inputs, 1)?;
    let f = Folding::new(x, attrs, out)?;
    let unbiased = attr_bool(attrs, "unbiased")?;
    let fits = mean.shape.len() == x.shape.len()
        && mean
            .shape
            .iter()
            .zip(&x.shape)
            .all(|(&m, &d)| m == d || m == 1);
    if !fits {
        return Err(OpError::shape(format!(
            "the mean of shape {:?} does not broadcast to the data's shape {:?}",
            mean.shape, x.shape
        )));
    }
    // The data and the mean read at an output index, and the reduction axes.
    let reads = |i: &[TExpr]| {
        let (axes, index) = f.index(&x.shape, i);
        let at_mean: Vec<TExpr> = index
            .iter()
            .zip(&mean.shape)
            .map(|(ix, &m)| if m == 1 { TExpr::index(0) } else { ix.clone() })
            .collect();
        (axes, x.at(&index), mean.at(&at_mean))
    };
    let count = f.inner_len - i64::from(unbiased);
    let dtype = x.dtype;
    if !dtype.is_float() && dtype.bits > 16 {
        return wide_variance(&f, dtype, count, reads);
    }
    // Integer differences of narrow dtypes are squared and summed exactly in 64 bits.
    let acc = if dtype.is_float() {
        DType::F64
    } else {
        DType::I64
    };
    let out_dtype = f.out_dtype;
    reduce_then(
        "variance",
        &f,
        |i| {
            let (axes, v, m) = reads(i);
            let diff = compute::bin(BinaryOp::Sub, &v.cast(acc), &m.cast(acc));
            compute::bin(BinaryOp::Mul, &diff, &diff).reduce(ReduceOp::Sum, axes)
        },
        |r| {
            let divisor = if acc.is_float() {
                TExpr::float(count as f64, acc)
            } else {
                // A count of zero or less is the reference's division by zero.
                TExpr::int(i128::from(count.max(0)), acc)
            };
            compute::bin(BinaryOp::Div, &r, &divisor).cast(out_dtype)
        },
    )
}

/// `variance` of 32- and 64-bit integers, whose squared differences and their sum need more
/// than 64 bits. The reference squares and sums the differences in `i128`, wrapping, then
/// divides truncating by `count` and wraps the quotient to the dtype; this sums 32-bit pieces
/// of the squares in `int64` and divides the wide total exactly.
///
/// For 32-bit data a difference is exact in `int64` and its square, below 2^64, exact in
/// `uint64`: two sums of its halves. For 64-bit data the difference's magnitude `d` (below
/// 2^64) is exact in `uint64` (`v - m` or `m - v`, whichever is not negative, wrapping);
/// with `d = a·2^32 + b`, `d² = b² + 2ab·2^32 + a²·2^64`, each product exact in `uint64`, so
/// four sums of their halves at the weights 1, 2^32, 2^64 and 2^96 hold `Σ d²`, taken modulo
/// 2^128 and signed as the reference's wrapping `i128` sum.
fn wide_variance(
    f: &Folding,
    dtype: DType,
    count: i64,
    reads: impl Fn(&[TExpr]) -> (Vec<IterVar>, TExpr, TExpr),
) -> ComputeResult {
    let wide = dtype.bits == 64;
    within(
        f,
        if wide { LIMBS_LIMIT } else { HALVES_LIMIT },
        "variance",
        dtype,
    )?;
    let u64c = |v: i128| TExpr::int(v, DType::U64);
    let i64c = |v: i128| TExpr::int(v, DType::I64);
    let add = |a: TExpr, b: TExpr| compute::bin(BinaryOp::Add, &a, &b);
    let twice = |a: TExpr| compute::bin(BinaryOp::Mul, &a, &i64c(2));
    // The pieces of the square of the difference at weights 2^(32k).
    let pieces = |v: TExpr, m: TExpr| -> Vec<TExpr> {
        if !wide {
            let diff = compute::bin(BinaryOp::Sub, &v.cast(DType::I64), &m.cast(DType::I64));
            let square = compute::bin(BinaryOp::Mul, &diff, &diff).cast(DType::U64);
            return vec![compute::low_half(&square), compute::high_half(&square)];
        }
        let d = compute::cmp(CmpOp::Ge, &v, &m)
            .select(
                compute::bin(BinaryOp::Sub, &v, &m),
                compute::bin(BinaryOp::Sub, &m, &v),
            )
            .cast(DType::U64);
        let a = compute::bin(BinaryOp::Shr, &d, &u64c(32));
        let b = compute::bin(BinaryOp::BitAnd, &d, &u64c(0xffff_ffff));
        let mul = |x: &TExpr, y: &TExpr| compute::bin(BinaryOp::Mul, x, y);
        let (aa, ab, bb) = (mul(&a, &a), mul(&a, &b), mul(&b, &b));
        let (high, low) = (compute::high_half, compute::low_half);
        vec![
            low(&bb),
            add(high(&bb), twice(low(&ab))),
            add(twice(high(&ab)), low(&aa)),
            high(&aa),
        ]
    };
    let n = if wide { 4 } else { 2 };
    let sums: Vec<Tensor> = (0..n)
        .map(|k| {
            Tensor::compute(format!("T_variance_sum{k}"), &f.out_shape, |i| {
                let (axes, v, m) = reads(i);
                pieces(v, m).swap_remove(k).reduce(ReduceOp::Sum, axes)
            })
        })
        .collect();
    // A count of zero or less is the reference's division by zero.
    let divisor = i64c(i128::from(count.max(0)));
    compute::tensor_value(Tensor::compute("T_variance", &f.out_shape, |i| {
        let parts: Vec<TExpr> = sums.iter().map(|s| s.at(i)).collect();
        compute::wide_quotient(&parts, &divisor, wide).cast(f.out_dtype)
    }))
}

#[cfg(test)]
mod tests {
    use crate::compute::interp::Interp;
    use crate::compute::op_tests::{Rng, check};
    use crate::testing::{attrs, ints};
    use relay_ir::AttrValue;

    use super::*;

    fn axis(v: &[i64]) -> (&'static str, AttrValue) {
        ("axis", ints(v))
    }

    fn yes(name: &'static str) -> (&'static str, AttrValue) {
        (name, AttrValue::Bool(true))
    }

    fn ty(shape: &[i64], dtype: DType) -> Type {
        Type::tensor(shape, dtype)
    }

    fn any_ty(shape: &[Option<i64>], dtype: DType) -> Type {
        tensor(
            shape
                .iter()
                .map(|d| d.map_or(Dim::Any, Dim::Known))
                .collect(),
            dtype,
        )
    }

    /// The relation of `op` on `inputs`, printed.
    fn rel(op: &str, inputs: &[&Type], set: &[(&str, AttrValue)]) -> Result<String, String> {
        let f = crate::lookup(op).unwrap().relation.unwrap();
        let inputs: Vec<Type> = inputs.iter().map(|&t| t.clone()).collect();
        f(&inputs, &attrs(op, set))
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    fn eval(op: &str, args: &[&Value], set: &[(&str, AttrValue)]) -> Result<Value, String> {
        let f = crate::lookup(op).unwrap().eval.unwrap();
        let args: Vec<Value> = args.iter().map(|&v| v.clone()).collect();
        f(&args, &attrs(op, set)).map_err(|e| e.to_string())
    }

    fn f32s(shape: &[i64], v: &[f64]) -> Value {
        Value::tensor(NDArray::from_f64_slice(DType::F32, shape, v).unwrap())
    }

    fn typed(dtype: DType, shape: &[i64], v: &[i128]) -> Value {
        Value::tensor(NDArray::from_i128_slice(dtype, shape, v).unwrap())
    }

    fn bools(shape: &[i64], v: &[bool]) -> Value {
        Value::tensor(NDArray::from_bool_slice(shape, v).unwrap())
    }

    /// Shape, dtype and elements (as `f64`) of a tensor value.
    fn parts(v: &Value) -> (Vec<i64>, DType, Vec<f64>) {
        let t = v.as_tensor().unwrap();
        (t.shape().to_vec(), t.dtype(), t.to_f64_vec())
    }

    #[test]
    fn collapse_sum_like_sums_what_broadcasting_added() {
        let like = |shape: &[i64]| ty(shape, DType::I8);
        let x = ty(&[2, 3, 4], DType::F32);
        assert_eq!(
            rel("collapse_sum_like", &[&x, &like(&[3, 1])], &[]).unwrap(),
            "Tensor[(3, 1), float32]"
        );
        assert_eq!(
            rel("collapse_sum_like", &[&x, &like(&[])], &[]).unwrap(),
            "float32"
        );
        assert_eq!(
            rel("collapse_sum_like", &[&x, &like(&[2, 3, 4])], &[]).unwrap(),
            "Tensor[(2, 3, 4), float32]"
        );
        let dynamic = any_ty(&[None, Some(3), Some(4)], DType::F32);
        assert_eq!(
            rel("collapse_sum_like", &[&dynamic, &like(&[1, 4])], &[]).unwrap(),
            "Tensor[(1, 4), float32]"
        );
        for bad in [&[2, 4][..], &[1, 2, 3, 4], &[5]] {
            let e = rel("collapse_sum_like", &[&x, &like(bad)], &[]).unwrap_err();
            assert!(e.contains("must broadcast to the first"), "{e}");
        }
        // 0..23 in (2, 3, 4) collapsed to (3, 1): per row of 3, both batches and all 4 columns.
        let target = Value::tensor(NDArray::zeros(DType::I8, &[3, 1]).unwrap());
        let (shape, dtype, v) =
            parts(&eval("collapse_sum_like", &[&iota234(), &target], &[]).unwrap());
        assert_eq!((shape, dtype), (vec![3, 1], DType::F32));
        assert_eq!(v, [60.0, 92.0, 124.0]);
        // The compute definition agrees, for every dtype and for real sizes (a bias gradient
        // of a 128x28x28 activation).
        let mut rng = Rng(7);
        for (dtype, shape, target) in [
            (DType::F32, &[2, 3, 4][..], &[3, 1][..]),
            (DType::I32, &[2, 3, 4], &[1, 1, 4]),
            (DType::F16, &[5, 1, 6], &[5, 6, 6]),
            (DType::F64, &[4], &[4]),
            (DType::F32, &[1, 128, 28, 28], &[128, 1, 1]),
        ] {
            let x = crate::compute::op_tests::random(&mut rng, dtype, shape);
            let like = NDArray::zeros(DType::F32, target).unwrap();
            if shape.len() >= target.len()
                && rel(
                    "collapse_sum_like",
                    &[&ty(shape, dtype), &ty(target, DType::F32)],
                    &[],
                )
                .is_ok()
            {
                assert!(
                    check(
                        "collapse_sum_like",
                        &[x, like],
                        &attrs("collapse_sum_like", &[])
                    ),
                    "{dtype} {shape:?} -> {target:?}"
                );
            }
        }
    }

    /// 0, 1, ..., 23 as a float32 tensor of shape (2, 3, 4).
    fn iota234() -> Value {
        let v: Vec<f64> = (0..24).map(f64::from).collect();
        f32s(&[2, 3, 4], &v)
    }

    #[test]
    fn reduce_relations() {
        let x = ty(&[2, 3, 4], DType::F32);
        let t = |set: &[(&str, AttrValue)]| rel("sum", &[&x], set);
        assert_eq!(t(&[]).unwrap(), "float32");
        assert_eq!(t(&[axis(&[1])]).unwrap(), "Tensor[(2, 4), float32]");
        assert_eq!(t(&[axis(&[-1, 0])]).unwrap(), "Tensor[(3), float32]");
        assert_eq!(
            t(&[axis(&[1]), yes("keepdims")]).unwrap(),
            "Tensor[(2, 1, 4), float32]"
        );
        assert_eq!(
            t(&[axis(&[1]), yes("exclude")]).unwrap(),
            "Tensor[(3), float32]"
        );
        assert_eq!(
            t(&[axis(&[-1]), yes("exclude"), yes("keepdims")]).unwrap(),
            "Tensor[(1, 1, 4), float32]"
        );
        assert_eq!(t(&[axis(&[])]).unwrap(), "float32");
        assert_eq!(
            t(&[axis(&[3])]).unwrap_err(),
            "axis 3 is out of range for a tensor of rank 3"
        );
        assert_eq!(
            t(&[axis(&[-4])]).unwrap_err(),
            "axis -4 is out of range for a tensor of rank 3"
        );
        assert_eq!(
            t(&[axis(&[2, -1])]).unwrap_err(),
            "`axis` lists dimension 2 twice"
        );
        // Unknown dimensions stay unknown.
        let d = any_ty(&[None, Some(3)], DType::I64);
        assert_eq!(
            rel("max", &[&d], &[axis(&[1])]).unwrap(),
            "Tensor[(?), int64]"
        );
        assert_eq!(
            rel("argmax", &[&d], &[axis(&[1]), yes("keepdims")]).unwrap(),
            "Tensor[(?, 1), int32]"
        );
        assert_eq!(rel("argmin", &[&x], &[]).unwrap(), "int32");
        assert_eq!(
            rel("all", &[&x], &[]).unwrap_err(),
            "the data must be a bool tensor, got `Tensor[(2, 3, 4), float32]`"
        );
        assert_eq!(
            rel("any", &[&ty(&[2, 3], DType::BOOL)], &[axis(&[0])]).unwrap(),
            "Tensor[(3), bool]"
        );
        assert!(rel("sum", &[&Type::tuple(vec![])], &[]).is_err());
        assert!(rel("sum", &[], &[]).is_err());
        // A rank-0 tensor has no axes to name.
        assert!(rel("sum", &[&ty(&[], DType::F32)], &[axis(&[0])]).is_err());
        assert_eq!(rel("sum", &[&ty(&[], DType::F32)], &[]).unwrap(), "float32");
    }

    #[test]
    fn variance_relation() {
        let x = ty(&[3, 4, 5], DType::F32);
        let m = ty(&[3, 1, 5], DType::F32);
        assert_eq!(
            rel("variance", &[&x, &m], &[axis(&[1])]).unwrap(),
            "Tensor[(3, 5), float32]"
        );
        assert_eq!(
            rel(
                "variance",
                &[&x, &ty(&[3, 2, 5], DType::F32)],
                &[axis(&[1])]
            )
            .unwrap_err(),
            "the mean of shape (3, 2, 5) does not broadcast to the data's shape (3, 4, 5)"
        );
        assert!(rel("variance", &[&x, &ty(&[3, 1, 5], DType::F64)], &[]).is_err());
        assert!(rel("variance", &[&x, &ty(&[5], DType::F32)], &[]).is_err());
        assert!(rel("variance", &[&x], &[]).is_err());
    }

    #[test]
    fn sums_and_means() {
        let x = iota234();
        let (s, d, v) = parts(&eval("sum", &[&x], &[axis(&[1])]).unwrap());
        assert_eq!((s, d), (vec![2, 4], DType::F32));
        assert_eq!(v, [12.0, 15.0, 18.0, 21.0, 48.0, 51.0, 54.0, 57.0]);
        let (s, _, v) = parts(&eval("sum", &[&x], &[]).unwrap());
        assert_eq!((s, v), (vec![], vec![276.0]));
        let (s, _, v) = parts(&eval("sum", &[&x], &[axis(&[-1, 0]), yes("keepdims")]).unwrap());
        assert_eq!((s, v), (vec![1, 3, 1], vec![60.0, 92.0, 124.0]));
        // `exclude` keeps the listed axis.
        let (s, _, v) = parts(&eval("sum", &[&x], &[axis(&[1]), yes("exclude")]).unwrap());
        assert_eq!((s, v), (vec![3], vec![60.0, 92.0, 124.0]));
        let (s, _, v) = parts(&eval("mean", &[&x], &[axis(&[0, 2])]).unwrap());
        assert_eq!((s, v), (vec![3], vec![7.5, 11.5, 15.5]));
        let (_, _, v) = parts(&eval("prod", &[&x], &[axis(&[2])]).unwrap());
        assert_eq!(v[0], 0.0);
        assert_eq!(v[1], 4.0 * 5.0 * 6.0 * 7.0);
        // Integers: exact, and the mean truncates toward zero like TVM's integer division.
        let n = typed(DType::I32, &[2, 3], &[1, 2, 4, -7, 0, 0]);
        let (_, d, v) = parts(&eval("sum", &[&n], &[axis(&[1])]).unwrap());
        assert_eq!((d, v), (DType::I32, vec![7.0, -7.0]));
        let (_, _, v) = parts(&eval("mean", &[&n], &[axis(&[1])]).unwrap());
        assert_eq!(v, [2.0, -2.0]);
        let (_, _, v) = parts(&eval("prod", &[&n], &[axis(&[0])]).unwrap());
        assert_eq!(v, [-7.0, 0.0, 0.0]);
        // int64 sums beyond 2^53 stay exact.
        let big = typed(DType::I64, &[2], &[1 << 60, 3]);
        let r = eval("sum", &[&big], &[]).unwrap();
        assert_eq!(r.as_tensor().unwrap().to_i128_vec(), [(1 << 60) + 3]);
        // Unsigned and float64 keep their dtype.
        let u = typed(DType::U8, &[3], &[200, 50, 10]);
        let (_, d, v) = parts(&eval("max", &[&u], &[]).unwrap());
        assert_eq!((d, v), (DType::U8, vec![200.0]));
        let f = Value::tensor(NDArray::from_f64_slice(DType::F64, &[2], &[0.1, 0.2]).unwrap());
        let (_, d, v) = parts(&eval("sum", &[&f], &[]).unwrap());
        assert_eq!((d, v), (DType::F64, vec![0.1 + 0.2]));
    }

    #[test]
    fn extremes() {
        let x = f32s(&[2, 3], &[1.0, -2.0, 5.0, 3.0, 3.0, -1.0]);
        let (_, _, v) = parts(&eval("max", &[&x], &[axis(&[1])]).unwrap());
        assert_eq!(v, [5.0, 3.0]);
        let (_, _, v) = parts(&eval("min", &[&x], &[]).unwrap());
        assert_eq!(v, [-2.0]);
        let (s, d, v) = parts(&eval("argmax", &[&x], &[axis(&[1])]).unwrap());
        assert_eq!((s, d, v), (vec![2], DType::I32, vec![2.0, 0.0]));
        let (_, _, v) =
            parts(&eval("argmax", &[&x], &[axis(&[1]), yes("select_last_index")]).unwrap());
        assert_eq!(v, [2.0, 1.0]);
        let (s, _, v) = parts(&eval("argmin", &[&x], &[axis(&[0]), yes("keepdims")]).unwrap());
        assert_eq!((s, v), (vec![1, 3], vec![0.0, 0.0, 1.0]));
        // Over all axes the position is row-major over the whole tensor.
        let (s, _, v) = parts(&eval("argmin", &[&x], &[]).unwrap());
        assert_eq!((s, v), (vec![], vec![1.0]));
        // NaN wins, first occurrence, as in numpy.
        let nan = f32s(&[4], &[1.0, f64::NAN, 7.0, f64::NAN]);
        let (_, _, v) = parts(&eval("max", &[&nan], &[]).unwrap());
        assert!(v[0].is_nan());
        let (_, _, v) = parts(&eval("argmax", &[&nan], &[]).unwrap());
        assert_eq!(v, [1.0]);
        let (_, _, v) = parts(&eval("argmin", &[&nan], &[]).unwrap());
        assert_eq!(v, [1.0]);
        // Integers.
        let n = typed(DType::I16, &[4], &[3, -9, 3, 8]);
        let (_, _, v) = parts(&eval("argmin", &[&n], &[]).unwrap());
        assert_eq!(v, [1.0]);
        let (_, d, v) = parts(&eval("min", &[&n], &[]).unwrap());
        assert_eq!((d, v), (DType::I16, vec![-9.0]));
    }

    #[test]
    fn empty_and_unit_dimensions() {
        let empty = f32s(&[2, 0], &[]);
        let (s, _, v) = parts(&eval("sum", &[&empty], &[axis(&[1])]).unwrap());
        assert_eq!((s, v), (vec![2], vec![0.0, 0.0]));
        let (_, _, v) = parts(&eval("prod", &[&empty], &[axis(&[1])]).unwrap());
        assert_eq!(v, [1.0, 1.0]);
        let (_, _, v) = parts(&eval("mean", &[&empty], &[axis(&[1])]).unwrap());
        assert!(v[0].is_nan());
        assert_eq!(
            eval("max", &[&empty], &[axis(&[1])]).unwrap_err(),
            "cannot take the max of an empty reduction (input shape [2, 0])"
        );
        assert!(eval("argmin", &[&empty], &[axis(&[1])]).is_err());
        // Folding the other axis leaves an empty output, which is fine.
        let (s, _, v) = parts(&eval("max", &[&empty], &[axis(&[0])]).unwrap());
        assert_eq!((s, v), (vec![0], vec![]));
        let ints = typed(DType::I32, &[0], &[]);
        assert!(eval("mean", &[&ints], &[]).is_err());
        // Size-1 dimensions.
        let one = f32s(&[1, 1], &[4.5]);
        let (s, _, v) = parts(&eval("max", &[&one], &[axis(&[0])]).unwrap());
        assert_eq!((s, v), (vec![1], vec![4.5]));
        let (s, _, v) = parts(&eval("argmax", &[&one], &[yes("keepdims")]).unwrap());
        assert_eq!((s, v), (vec![1, 1], vec![0.0]));
    }

    #[test]
    fn logical() {
        let b = bools(&[2, 3], &[true, false, true, true, true, true]);
        let r = eval("all", &[&b], &[axis(&[1])]).unwrap();
        let t = r.as_tensor().unwrap();
        assert_eq!(t.dtype(), DType::BOOL);
        assert_eq!(t.to_bool_vec(), [false, true]);
        let r = eval("any", &[&b], &[axis(&[0])]).unwrap();
        assert_eq!(r.as_tensor().unwrap().to_bool_vec(), [true, true, true]);
        let none = bools(&[0], &[]);
        let r = eval("all", &[&none], &[]).unwrap();
        assert_eq!(r.as_tensor().unwrap().to_bool_vec(), [true]);
        let r = eval("any", &[&none], &[]).unwrap();
        assert_eq!(r.as_tensor().unwrap().to_bool_vec(), [false]);
    }

    #[test]
    fn variance() {
        let x = f32s(&[2, 3], &[1.0, 2.0, 6.0, 4.0, 4.0, 4.0]);
        let m = f32s(&[2, 1], &[3.0, 4.0]);
        let (s, _, v) = parts(&eval("variance", &[&x, &m], &[axis(&[1])]).unwrap());
        assert_eq!(s, vec![2]);
        assert!((v[0] - 14.0 / 3.0).abs() < 1e-6 && v[1] == 0.0);
        let (_, _, v) = parts(
            &eval(
                "variance",
                &[&x, &m],
                &[axis(&[1]), yes("unbiased"), yes("keepdims")],
            )
            .unwrap(),
        );
        assert_eq!(v, [7.0, 0.0]);
        // The mean broadcasts along the folded axis; `exclude` folds the other one.
        let m0 = f32s(&[1, 3], &[2.5, 3.0, 5.0]);
        let (s, _, v) =
            parts(&eval("variance", &[&x, &m0], &[axis(&[1]), yes("exclude")]).unwrap());
        assert_eq!((s, v), (vec![3], vec![2.25, 1.0, 1.0]));
        assert!(eval("variance", &[&x, &f32s(&[3], &[0.0; 3])], &[]).is_err());
        let n = typed(DType::I32, &[4], &[1, 2, 3, 6]);
        let (_, d, v) =
            parts(&eval("variance", &[&n, &typed(DType::I32, &[1], &[3])], &[]).unwrap());
        assert_eq!((d, v), (DType::I32, vec![3.0]));
    }

    /// A tensor of `dtype` integers drawn, in one of three regimes, from the dtype's extremes
    /// only, from values near them, or from extremes, small values and random bit patterns.
    fn extreme_ints(rng: &mut Rng, dtype: DType, shape: &[i64]) -> NDArray {
        let (lo, hi) = compute::int_range(dtype);
        let n: i64 = shape.iter().product();
        let regime = rng.below(3);
        let v: Vec<i128> = (0..n)
            .map(|_| match (regime, rng.below(6)) {
                (0, k) => [lo, hi][k as usize % 2],
                (1, k) if k < 3 => lo + i128::from(rng.below(1000)),
                (1, _) => hi - i128::from(rng.below(1000)),
                (_, 0) => lo,
                (_, 1) => hi,
                (_, 2) => i128::from(rng.below(41)) - 20,
                _ => compute::wrap(i128::from(rng.next()), dtype),
            })
            .collect();
        NDArray::from_i128_slice(dtype, shape, &v).unwrap()
    }

    /// Reduction attributes: every `axis` choice for `rank` dimensions (none, empty, each
    /// subset, given positively or negatively), with `keepdims` and `exclude` drawn at random.
    fn reduce_attrs(rng: &mut Rng, rank: usize) -> Vec<Vec<(&'static str, AttrValue)>> {
        let mut axes = vec![None, Some(vec![])];
        for subset in 1u32..(1 << rank) {
            let pos: Vec<i64> = (0..rank as i64)
                .filter(|d| subset & (1 << d) != 0)
                .collect();
            let neg: Vec<i64> = pos.iter().rev().map(|d| d - rank as i64).collect();
            axes.push(Some(pos));
            axes.push(Some(neg));
        }
        axes.into_iter()
            .map(|axes| {
                let mut set = vec![
                    ("keepdims", AttrValue::Bool(rng.below(2) == 1)),
                    ("exclude", AttrValue::Bool(rng.below(2) == 1)),
                ];
                if let Some(axes) = axes {
                    set.push(axis(&axes));
                }
                set
            })
            .collect()
    }

    const WIDE_SHAPES: [&[i64]; 10] = [
        &[],
        &[0],
        &[1],
        &[5],
        &[2, 3],
        &[3, 0],
        &[4, 1, 3],
        &[2, 3, 4],
        &[7, 9],
        &[64],
    ];

    #[test]
    fn wide_means_match_the_reference() {
        let mut rng = Rng(0x5eed_0001);
        let (mut calls, mut accepted) = (0, 0);
        for shape in WIDE_SHAPES {
            for set in reduce_attrs(&mut rng, shape.len()) {
                for dtype in [DType::I64, DType::U64] {
                    for _ in 0..2 {
                        let x = extreme_ints(&mut rng, dtype, shape);
                        calls += 1;
                        accepted += usize::from(check("mean", &[x], &attrs("mean", &set)));
                    }
                }
            }
        }
        assert_eq!(accepted, calls);
    }

    #[test]
    fn wide_variances_match_the_reference() {
        let mut rng = Rng(0x5eed_0002);
        let (mut calls, mut accepted) = (0, 0);
        for shape in WIDE_SHAPES {
            for set in reduce_attrs(&mut rng, shape.len()) {
                for dtype in [DType::I32, DType::U32, DType::I64, DType::U64] {
                    let x = extreme_ints(&mut rng, dtype, shape);
                    let mean_shape: Vec<i64> = shape
                        .iter()
                        .map(|&d| if rng.below(2) == 0 { 1 } else { d })
                        .collect();
                    let m = extreme_ints(&mut rng, dtype, &mean_shape);
                    for unbiased in [false, true] {
                        let mut set = set.clone();
                        set.push(("unbiased", AttrValue::Bool(unbiased)));
                        let inputs = [x.clone(), m.clone()];
                        calls += 1;
                        accepted +=
                            usize::from(check("variance", &inputs, &attrs("variance", &set)));
                    }
                }
            }
        }
        assert_eq!(accepted, calls);
    }

    /// The compute definition of `op` on `inputs`, evaluated.
    fn te_eval(op: &str, inputs: &[NDArray], set: &[(&str, AttrValue)]) -> Vec<i128> {
        let schema = crate::lookup(op).unwrap();
        let types: Vec<Type> = inputs
            .iter()
            .map(|a| Type::tensor(a.shape(), a.dtype()))
            .collect();
        let set = attrs(op, set);
        let out = (schema.relation.unwrap())(&types, &set).unwrap();
        let placeholders = crate::compute::op_tests::placeholders(inputs);
        let te = (schema.compute.unwrap())(&placeholders, &set, &out).unwrap();
        let t = te.as_tensor().unwrap();
        Interp::new(inputs).tensor(t).unwrap().to_i128_vec()
    }

    #[test]
    fn wide_sums_divide_exactly() {
        let ints =
            |dtype, v: &[i128]| NDArray::from_i128_slice(dtype, &[v.len() as i64], v).unwrap();
        let (min, max) = (i128::from(i64::MIN), i128::from(i64::MAX));
        let umax = i128::from(u64::MAX);
        // Sums that overflow 64 bits, truncating toward zero.
        assert_eq!(
            te_eval("mean", &[ints(DType::I64, &[max, max, max])], &[]),
            [max]
        );
        assert_eq!(
            te_eval("mean", &[ints(DType::I64, &[min, min, -1])], &[]),
            [(2 * min - 1) / 3]
        );
        assert_eq!(
            te_eval("mean", &[ints(DType::I64, &[min, min, 1])], &[]),
            [(2 * min + 1) / 3]
        );
        assert_eq!(
            te_eval("mean", &[ints(DType::U64, &[umax, umax - 4])], &[]),
            [umax - 2]
        );
        // A 32-bit variance whose squares overflow 64 bits once summed: 2·(2^32 - 1)² / 2,
        // wrapped to int32.
        let x = ints(DType::I32, &[-(1 << 31), (1 << 31) - 1, -(1 << 31)]);
        let m = ints(DType::I32, &[(1 << 31) - 1]);
        let want = compute::wrap(2 * ((1 << 32) - 1i128).pow(2) / 2, DType::I32);
        let set = [yes("unbiased")];
        assert_eq!(te_eval("variance", &[x, m], &set), [want]);
        // A 64-bit variance whose 128-bit sum wraps negative: (2^64 - 1)² - 2^128 = 1 - 2^65,
        // halved toward zero and wrapped to int64.
        let x = ints(DType::I64, &[min, max]);
        let m = ints(DType::I64, &[min]);
        let want = compute::wrap((1 - (1i128 << 65)) / 2, DType::I64);
        assert_eq!(want, 1);
        assert_eq!(te_eval("variance", &[x.clone(), m.clone()], &[]), [want]);
        let r = eval("variance", &[&Value::tensor(x), &Value::tensor(m)], &[]).unwrap();
        assert_eq!(r.as_tensor().unwrap().to_i128_vec(), [want]);
        // The same in uint64: two squares (2^64 - 1)², each 1 - 2^65 as a wrapping i128.
        let x = ints(DType::U64, &[0, umax, umax]);
        let m = ints(DType::U64, &[0]);
        let square = umax.wrapping_mul(umax);
        assert_eq!(square, 1 - (1i128 << 65));
        let want = compute::wrap(square.wrapping_mul(2) / 3, DType::U64);
        assert_eq!(te_eval("variance", &[x, m], &[]), [want]);
    }

    /// `wide_quotient` of constant parts, evaluated.
    fn quotient(parts: &[i64], c: i64, modular: bool) -> i128 {
        let parts: Vec<TExpr> = parts
            .iter()
            .map(|&p| TExpr::int(i128::from(p), DType::I64))
            .collect();
        let c = TExpr::int(i128::from(c), DType::I64);
        let t = Tensor::compute("q", &[], |_| compute::wide_quotient(&parts, &c, modular));
        Interp::new(&[]).tensor(&t).unwrap().to_i128_vec()[0]
    }

    #[test]
    fn wide_quotients_at_their_bounds() {
        let mut rng = Rng(0x5eed_0003);
        let bound = (1i64 << 62) + ((1 << 62) - (1 << 32));
        let part = |rng: &mut Rng| match rng.below(5) {
            0 => bound,
            1 => -bound,
            2 => rng.below(1 << 32) as i64,
            3 => rng.below(41) as i64 - 20,
            _ => (rng.next() as i64) >> rng.below(2),
        };
        for _ in 0..2000 {
            let c = match rng.below(4) {
                0 => 1,
                1 => (1 << 31) - 1,
                2 => 3,
                _ => 1 + rng.below((1 << 31) - 1) as i64,
            };
            // Two parts: S = p1·2^32 + p0 is exact in i128.
            let p = [part(&mut rng), part(&mut rng)];
            let s = i128::from(p[1]) * (1 << 32) + i128::from(p[0]);
            let want = compute::wrap(s / i128::from(c), DType::I64);
            assert_eq!(quotient(&p, c, false), want, "{p:?} / {c}");
            // Modulo 2^(32n), n = 1 to 4: S wraps as an i128 would, then as n·32 bits.
            for n in 1..=4 {
                let p: Vec<i64> = (0..n).map(|_| part(&mut rng)).collect();
                let s = p.iter().enumerate().fold(0i128, |s, (k, &v)| {
                    s.wrapping_add(i128::from(v).wrapping_shl(32 * k as u32))
                });
                let s = if n == 4 {
                    s
                } else {
                    let bits = 32 * n as u32;
                    (s << (128 - bits)) >> (128 - bits)
                };
                let want = compute::wrap(s / i128::from(c), DType::I64);
                assert_eq!(quotient(&p, c, true), want, "{p:?} / {c} (modular)");
            }
        }
        assert!(
            Interp::new(&[])
                .tensor(&Tensor::compute("q", &[], |_| {
                    compute::wide_quotient(
                        &[TExpr::int(5, DType::I64)],
                        &TExpr::int(0, DType::I64),
                        false,
                    )
                }))
                .is_err()
        );
    }

    #[test]
    fn patterns() {
        for name in [
            "sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin", "variance",
        ] {
            let op = crate::lookup(name).unwrap();
            assert_eq!(op.pattern, P::CommReduce, "{name}");
            assert!(op.relation.is_some() && op.eval.is_some(), "{name}");
        }
    }
}
