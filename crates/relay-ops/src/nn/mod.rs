//! Neural-network operators (`nn.*`): convolutions, dense and matrix products, activations,
//! pooling, normalization, padding, resampling and losses (reference §14.5). Each family has a
//! file holding its operators' table entries and, for the Tier 1 operators of SPEC §4, their
//! fusion pattern, type relation, reference evaluation and compute definition
//! (`relay_ir::te`), side by side:
//!
//! - [`conv`]: the convolutions;
//! - [`dense`]: dense and matrix products, and the packed and sparse products;
//! - [`activation`]: activations, softmax, `nn.bias_add` and `nn.batch_flatten`;
//! - [`pool`]: max, average, global and adaptive pooling;
//! - [`norm`]: the normalizations and dropout;
//! - [`pad`]: `nn.pad` and `nn.mirror_pad`;
//! - [`resample`]: resampling and rearrangement (table entries only);
//! - [`rnn`]: the recurrences of LSTM and GRU layers (relayc's own operators).
//!
//! This file holds what the families share — the number types of the reference evaluations,
//! checks of types and window attributes, index arithmetic and contractions for the compute
//! definitions — and the table entries of the losses and optical-flow correlation. Convolution
//! and pooling support the NCHW (and OIHW kernel) layouts only; the normalizations and dropout
//! compute their inference-time results, as TVM's `simplify_inference` would rewrite them.

use relay_ir::OpError;
use std::sync::Arc;

use relay_ir::te::{BinaryOp, CmpOp, IterVar, ReduceOp, TExpr, Tensor, UnaryOp};
use relay_ir::{
    AttrDefault as D, AttrKind as K, Attrs, DType, DTypeCode, Dim, NDArray, OpSchema, RelationFn,
    Type, TypeKind, Value,
};

use crate::compute;
use crate::support::{
    arg_tensor, attr_dtype, attr_ints_len, attr_str, known, shape_text, tensor, tensor_type, value,
};
use crate::{field, op, plain, required};

mod activation;
mod conv;
mod dense;
mod layout;
mod norm;
mod pad;
mod pool;
mod resample;
mod rnn;
#[cfg(test)]
mod testing;

pub(crate) use activation::{LEAKY_RELU_ATTRS, SOFTMAX_ATTRS};
pub(crate) use conv::{CONV2D_ATTRS, CONV2D_TRANSPOSE_ATTRS};
pub(crate) use dense::{BATCH_MATMUL_ATTRS, DENSE_ATTRS};
pub(crate) use pool::AVG_POOL2D_ATTRS;
pub use rnn::recurrence_clip;

/// The family tables in their stable order, the order in which [`crate::all`] lists them.
pub(crate) fn tables() -> [&'static [OpSchema]; 9] {
    [
        conv::OPS,
        dense::OPS,
        activation::OPS,
        pool::OPS,
        norm::OPS,
        pad::OPS,
        resample::OPS,
        rnn::OPS,
        LOSS_AND_CORRELATION_OPS,
    ]
}

const DATA: &[&str] = &["data"];
const DATA_WEIGHT: &[&str] = &["data", "weight"];

/// The losses and optical-flow correlation, which have table entries only.
static LOSS_AND_CORRELATION_OPS: &[OpSchema] = &[
    // Losses.
    plain("nn.cross_entropy", &["x", "y"]),
    plain("nn.cross_entropy_with_logits", &["x", "y"]),
    op(
        "nn.nll_loss",
        &["predictions", "targets", "weights"],
        "relay.attrs.NLLLossAttrs",
        &[
            field("reduction", K::Str, D::Str("mean")),
            required("ignore_index", K::Int),
        ],
    ),
    // Optical-flow correlation.
    op(
        "nn.correlation",
        &["data1", "data2"],
        "relay.attrs.CorrelationAttrs",
        &[
            field("kernel_size", K::Int, D::Int(1)),
            field("max_displacement", K::Int, D::Int(1)),
            field("stride1", K::Int, D::Int(1)),
            field("stride2", K::Int, D::Int(1)),
            field("padding", K::IntArray, D::Ints(&[0, 0])),
            field("is_multiply", K::Bool, D::Bool(true)),
            field("layout", K::Str, D::Str("NCHW")),
        ],
    ),
];

// ----- Type relations and reference evaluation -----
//
// Every reference evaluation first re-runs its operator's type relation on the concrete types of
// its arguments, so an evaluation sees exactly the inputs type inference accepts and never
// indexes out of bounds. Contractions, convolutions and pools accumulate in `f64` for float
// results and in wrapping `i128` for integer ones, then convert to the result dtype.

/// The number type a reference evaluation computes in: `f64` for float results and `i128`
/// (wrapping, which agrees with the result dtype's wrapping) for integer ones.
trait Num: Copy + PartialOrd {
    /// Zero.
    const ZERO: Self;
    /// Every element of `array` in this number type.
    fn read(array: &NDArray) -> Vec<Self>;
    /// A tensor of `dtype` holding `values`.
    fn array(dtype: DType, shape: &[i64], values: &[Self]) -> Result<Value, OpError>;
    /// A float constant (an attribute such as `alpha`); integers truncate it as TVM's
    /// `make_const` does.
    fn from_f64(v: f64) -> Self;
    /// The sum.
    fn plus(self, other: Self) -> Self;
    /// The product.
    fn times(self, other: Self) -> Self;
    /// The larger value.
    fn larger(self, other: Self) -> Self {
        if other > self { other } else { self }
    }
    /// The mean of `count` values summing to `self`: integer division truncates, and an empty
    /// window gives NaN for floats and 0 for integers.
    fn div_count(self, count: i64) -> Self;
    /// The value padding takes in max pooling: -inf, or the dtype's smallest integer.
    fn lowest(dtype: DType) -> Self;
}

/// The value a max pool starts from and pads with for a float type: -inf, or, for an 8-bit
/// float without infinities (where -inf would be NaN), its lowest finite value (TVM's
/// `min_value`).
pub(crate) fn lowest_float(dtype: DType) -> f64 {
    dtype
        .minifloat()
        .filter(|f| !f.has_infinity())
        .map_or(f64::NEG_INFINITY, |f| -f.max_finite())
}

impl Num for f64 {
    const ZERO: f64 = 0.0;

    fn read(array: &NDArray) -> Vec<f64> {
        array.to_f64_vec()
    }

    fn array(dtype: DType, shape: &[i64], values: &[f64]) -> Result<Value, OpError> {
        value(NDArray::from_f64_slice(dtype, shape, values))
    }

    fn from_f64(v: f64) -> f64 {
        v
    }

    fn plus(self, other: f64) -> f64 {
        self + other
    }

    fn times(self, other: f64) -> f64 {
        self * other
    }

    fn div_count(self, count: i64) -> f64 {
        self / count as f64
    }

    fn lowest(dtype: DType) -> f64 {
        lowest_float(dtype)
    }
}

impl Num for i128 {
    const ZERO: i128 = 0;

    fn read(array: &NDArray) -> Vec<i128> {
        array.to_i128_vec()
    }

    fn array(dtype: DType, shape: &[i64], values: &[i128]) -> Result<Value, OpError> {
        value(NDArray::from_i128_slice(dtype, shape, values))
    }

    fn from_f64(v: f64) -> i128 {
        v as i128
    }

    fn plus(self, other: i128) -> i128 {
        self.wrapping_add(other)
    }

    fn times(self, other: i128) -> i128 {
        self.wrapping_mul(other)
    }

    fn div_count(self, count: i64) -> i128 {
        if count == 0 {
            0
        } else {
            self / i128::from(count)
        }
    }

    fn lowest(dtype: DType) -> i128 {
        match dtype.code {
            DTypeCode::Int if dtype.bits >= 1 => -(1i128 << (dtype.bits - 1)),
            _ => 0,
        }
    }
}

/// Whether two dimensions are known to differ (`?` matches anything).
fn differ(a: Dim, b: Dim) -> bool {
    matches!((a, b), (Dim::Known(x), Dim::Known(y)) if x != y)
}

/// The more precise of two dimensions that do not differ.
fn unify(a: Dim, b: Dim) -> Dim {
    match a {
        Dim::Known(_) => a,
        Dim::Any => b,
    }
}

/// Checks that a tensor has an integer or float scalar dtype.
fn require_numeric(t: &Type, dtype: DType, what: &str) -> Result<(), OpError> {
    if dtype.lanes == 1 && (dtype.is_float() || dtype.is_int()) {
        Ok(())
    } else {
        Err(OpError::dtype(format!(
            "{what} must have an integer or float dtype, got `{t}`"
        )))
    }
}

/// Checks that a tensor has a float scalar dtype.
fn require_float(t: &Type, dtype: DType, what: &str) -> Result<(), OpError> {
    if dtype.lanes == 1 && dtype.is_float() {
        Ok(())
    } else {
        Err(OpError::dtype(format!(
            "{what} must have a float dtype, got `{t}`"
        )))
    }
}

/// Checks a tensor's rank; `layout` names the dimensions, e.g. `NCHW`.
fn require_rank(
    t: &Type,
    shape: &[Dim],
    rank: usize,
    what: &str,
    layout: &str,
) -> Result<(), OpError> {
    if shape.len() == rank {
        Ok(())
    } else {
        Err(OpError::shape(format!(
            "{what} must have rank {rank} ({layout}), got `{t}`"
        )))
    }
}

/// Checks that the layout attributes describe NCHW data (and OIHW kernels when `kernel` names
/// the kernel layout attribute): the only layouts the reference evaluation implements.
fn require_nchw(attrs: &Attrs, data: &str, kernel: Option<&str>) -> Result<(), OpError> {
    let data_layout = attr_str(attrs, data)?;
    let out_layout = attr_str(attrs, "out_layout")?;
    let out_ok = out_layout.is_empty() || out_layout == "NCHW";
    match kernel {
        Some(kernel) => {
            let kernel_layout = attr_str(attrs, kernel)?;
            if data_layout == "NCHW" && kernel_layout == "OIHW" && out_ok {
                return Ok(());
            }
            Err(OpError::unsupported(format!(
                "only NCHW/OIHW layouts are supported, got {data}=\"{data_layout}\", \
                 {kernel}=\"{kernel_layout}\", out_layout=\"{out_layout}\""
            )))
        }
        None if data_layout == "NCHW" && out_ok => Ok(()),
        None => Err(OpError::unsupported(format!(
            "only the NCHW layout is supported, got {data}=\"{data_layout}\", \
             out_layout=\"{out_layout}\""
        ))),
    }
}

/// The largest stride, dilation, window or padding value accepted (TVM holds them in 32 bits),
/// which keeps index arithmetic far from overflow.
const ATTR_LIMIT: i64 = i32::MAX as i64;

/// Checks that no value of a window attribute exceeds [`ATTR_LIMIT`].
fn within_limit(name: &str, values: &[i64]) -> Result<(), OpError> {
    if values.iter().any(|&v| v > ATTR_LIMIT) {
        return Err(OpError::attribute(
            name,
            format!("`{name}` values must be at most {ATTR_LIMIT}, got {values:?}"),
        ));
    }
    Ok(())
}

/// A two-value attribute such as `strides` or `dilation`, each value at least 1.
pub fn positive_pair(attrs: &Attrs, name: &str) -> Result<[i64; 2], OpError> {
    let v = attr_ints_len(attrs, name, &[2])?;
    within_limit(name, &v)?;
    match *v.as_slice() {
        [a, b] if a >= 1 && b >= 1 => Ok([a, b]),
        _ => Err(OpError::attribute(
            name,
            format!("`{name}` must be positive, got {v:?}"),
        )),
    }
}

/// `padding` as (top, left, bottom, right), as TVM's `get_pad_tuple2d` reads it: one value pads
/// every side, two values are (top and bottom, left and right).
pub fn padding4(attrs: &Attrs) -> Result<[i64; 4], OpError> {
    let v = attr_ints_len(attrs, "padding", &[1, 2, 4])?;
    if v.iter().any(|&p| p < 0) {
        return Err(OpError::attribute(
            "padding",
            format!("`padding` must not be negative, got {v:?}"),
        ));
    }
    within_limit("padding", &v)?;
    match *v.as_slice() {
        [p] => Ok([p; 4]),
        [h, w] => Ok([h, w, h, w]),
        [t, l, b, r] => Ok([t, l, b, r]),
        _ => Err(OpError::attribute(
            "padding",
            format!("`padding` must have 1, 2 or 4 values, got {}", v.len()),
        )),
    }
}

/// The extent `(k - 1) * dilation + 1` of a dilated window.
fn dilated(k: i64, dilation: i64) -> Result<i64, OpError> {
    let extent = (i128::from(k) - 1) * i128::from(dilation) + 1;
    i64::try_from(extent).map_err(|_| {
        OpError::shape(format!(
            "dilated window {k} with dilation {dilation} is too large"
        ))
    })
}

/// One spatial output extent, `(input + pad - window) / stride + 1` with the division rounded
/// up in ceil mode; `?` when the input or window extent is unknown.
fn window_dim(
    input: Dim,
    pad: i64,
    window: Option<i64>,
    stride: i64,
    ceil_mode: bool,
    axis: &str,
    noun: &str,
) -> Result<Dim, OpError> {
    let (Dim::Known(n), Some(k)) = (input, window) else {
        return Ok(Dim::Any);
    };
    let span = i128::from(n) + i128::from(pad) - i128::from(k);
    if span < 0 {
        return Err(OpError::shape(format!(
            "input {axis} {n} with padding {pad} is smaller than the {noun} {axis} {k}"
        )));
    }
    let stride = i128::from(stride.max(1));
    let steps = if ceil_mode {
        (span + stride - 1) / stride
    } else {
        span / stride
    };
    i64::try_from(steps + 1)
        .map(Dim::Known)
        .map_err(|_| OpError::shape(format!("output {axis} {} is too large", steps + 1)))
}

/// The sizes before, at and after `axis` of a row-major shape: (outer, extent, inner).
fn axis_split(shape: &[i64], axis: usize) -> (usize, usize, usize) {
    let product = |dims: &[i64]| dims.iter().map(|&d| d.max(0) as usize).product::<usize>();
    let extent = shape.get(axis).map_or(1, |&d| d.max(0) as usize);
    (
        product(&shape[..axis.min(shape.len())]),
        extent,
        product(&shape[(axis + 1).min(shape.len())..]),
    )
}

/// The number of elements of a known shape.
fn count(shape: &[i64]) -> usize {
    shape.iter().map(|&d| d.max(0) as usize).product()
}

/// The tensor arguments, and the result type the relation gives for their concrete types.
fn checked(
    args: &[Value],
    attrs: &Attrs,
    relation: RelationFn,
) -> Result<(Vec<Arc<NDArray>>, Type), OpError> {
    let arrays = (0..args.len())
        .map(|i| arg_tensor(args, i).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let types: Vec<Type> = arrays
        .iter()
        .map(|a| Type::tensor(a.shape(), a.dtype()))
        .collect();
    let result = relation(&types, attrs)?;
    Ok((arrays, result))
}

/// The concrete shape and dtype of a result type (field `field` of a tuple type, if given).
fn concrete(t: &Type, field: Option<usize>) -> Result<(Vec<i64>, DType), OpError> {
    let t = match (t.kind(), field) {
        (TypeKind::Tuple(fields), Some(i)) => fields
            .get(i)
            .ok_or_else(|| OpError::type_error(format!("the result `{t}` has no field {i}")))?,
        _ => t,
    };
    let (shape, dtype) = tensor_type(t, "the result")?;
    let shape = known(shape).ok_or_else(|| {
        OpError::unsupported(format!(
            "the result shape {} is not fully known",
            shape_text(shape)
        ))
    })?;
    NDArray::byte_len(dtype, &shape).map_err(OpError::from_runtime)?;
    Ok((shape, dtype))
}

/// The argument at `i` (present once `checked` succeeded).
fn arg(arrays: &[Arc<NDArray>], i: usize) -> Result<&NDArray, OpError> {
    arrays
        .get(i)
        .map(|a| &**a)
        .ok_or_else(|| OpError::type_error(format!("missing argument {i}")))
}

/// The result dtype of a contraction: `out_dtype` when set, else the inputs' common dtype.
fn contraction_dtype(
    attrs: &Attrs,
    (a, da, a_name): (&Type, DType, &str),
    (b, db, b_name): (&Type, DType, &str),
) -> Result<DType, OpError> {
    require_numeric(a, da, a_name)?;
    require_numeric(b, db, b_name)?;
    match attr_dtype(attrs, "out_dtype")? {
        Some(d) if d.lanes == 1 && (d.is_float() || d.is_int()) => Ok(d),
        Some(d) => Err(OpError::attribute(
            "out_dtype",
            format!("`out_dtype` must be an integer or float dtype, got {d}"),
        )),
        None if da == db => Ok(da),
        None => Err(OpError::dtype(format!(
            "{a_name} `{a}` and {b_name} `{b}` have different dtypes and no `out_dtype` is set"
        ))),
    }
}

/// Checks that `t` is a vector of `dim` elements of `dtype`, matching axis `axis` of `data`,
/// and returns the unified length.
fn check_vector(
    t: &Type,
    what: &str,
    dim: Dim,
    dtype: DType,
    data: &Type,
    axis: usize,
) -> Result<Dim, OpError> {
    let mismatch = || {
        OpError::shape(format!(
            "{what} must be `{}` to match axis {axis} of data `{data}`, got `{t}`",
            tensor(vec![dim], dtype)
        ))
    };
    let (shape, d) = tensor_type(t, what)?;
    match shape {
        [n] if d == dtype && !differ(*n, dim) => Ok(unify(dim, *n)),
        _ => Err(mismatch()),
    }
}

// ----- Compute definitions: shared index arithmetic and contractions -----
//
// Contractions (`nn.dense`, `nn.matmul`, `nn.batch_matmul`, `nn.conv2d`) are written in the
// form the kernel compiler recognizes: a sum over reduction axes of the product of two reads,
// each index a bare output index, a bare reduction axis or 0, in the output dtype. The other
// reductions accumulate floats in `float64` as the reference evaluation does, so they agree
// with it exactly.

/// The `int64` index constant `v`.
fn ix(v: i64) -> TExpr {
    TExpr::index(v)
}

/// `a - b` on index expressions.
fn ix_sub(a: &TExpr, b: &TExpr) -> TExpr {
    compute::bin(BinaryOp::Sub, a, b)
}

/// `a * b` for an index expression and a constant.
fn ix_mul(a: &TExpr, b: i64) -> TExpr {
    compute::bin(BinaryOp::Mul, a, &ix(b))
}

/// `floor(a / b)` for an index expression and a positive constant.
fn ix_floordiv(a: &TExpr, b: i64) -> TExpr {
    compute::bin(BinaryOp::FloorDiv, a, &ix(b))
}

/// `max(a, b)` on index expressions.
fn ix_max(a: &TExpr, b: &TExpr) -> TExpr {
    compute::bin(BinaryOp::Max, a, b)
}

/// `min(a, b)` on index expressions.
fn ix_min(a: &TExpr, b: &TExpr) -> TExpr {
    compute::bin(BinaryOp::Min, a, b)
}

/// `i` clamped into `0..n`, for reads a `select` guards (both branches are evaluated).
fn clamp_index(i: &TExpr, n: i64) -> TExpr {
    ix_max(&ix(0), &ix_min(i, &ix(n - 1)))
}

/// `0 <= i < n`.
fn in_range(i: &TExpr, n: i64) -> TExpr {
    let lo = compute::cmp(CmpOp::Ge, i, &ix(0));
    let hi = compute::cmp(CmpOp::Lt, i, &ix(n));
    compute::bin(BinaryOp::LogicalAnd, &lo, &hi)
}

/// A float `x` converted to the integer or boolean `dtype` as the reference evaluation reads
/// floats as integers: truncated toward zero into `i128` (NaN as 0, saturating), then wrapped
/// to the width of `dtype` (booleans: non-zero). A plain cast would saturate at the width of
/// `dtype` instead.
fn float_as_int(x: TExpr, dtype: DType) -> TExpr {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 2.0 * TWO_63;
    const TWO_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    let f = |v: f64| TExpr::float(v, DType::F64);
    let v = x.cast(DType::F64);
    let t = v.clone().unary(UnaryOp::Trunc);
    if compute::is_bool(dtype) {
        let nonzero = compute::cmp(CmpOp::Ne, &t, &f(0.0));
        return compute::is_nan(&v).select(compute::zero(dtype), nonzero.cast(dtype));
    }
    // The remainder modulo 2^64 is exact; it moves into the int64 range without rounding.
    let r = compute::bin(BinaryOp::Mod, &t, &f(TWO_64));
    let low = compute::cmp(CmpOp::Lt, &r, &f(-TWO_63))
        .select(compute::bin(BinaryOp::Add, &r, &f(TWO_64)), r.clone());
    let r = compute::cmp(CmpOp::Ge, &r, &f(TWO_63))
        .select(compute::bin(BinaryOp::Sub, &r, &f(TWO_64)), low);
    // From 2^127 up the `i128` saturates at its maximum, whose low 64 bits are all ones; from
    // -2^127 down at its minimum (low bits zero), which the remainder already gives.
    compute::cmp(CmpOp::Ge, &v, &f(TWO_127))
        .select(ix(-1), r.cast(DType::I64))
        .cast(dtype)
}

/// A value read from an input, in the number type the reference evaluation computes `dtype`
/// results in: floats read as integers as [`float_as_int`] does, anything else cast.
fn read_as(x: TExpr, dtype: DType) -> TExpr {
    if x.dtype().is_float() && !dtype.is_float() {
        float_as_int(x, dtype)
    } else {
        x.cast(dtype)
    }
}

/// `name[i] = Σ_k a[ia] · b[ib]` over the reduction axes `k`, where `index` maps an output
/// index to `(ia, ib)`; `a` and `b` have the result's dtype (see
/// [`dense::contraction_operand`]).
fn contraction(
    name: &str,
    shape: &[i64],
    (a, b): (&Tensor, &Tensor),
    k: &[IterVar],
    index: impl Fn(&[TExpr]) -> (Vec<TExpr>, Vec<TExpr>),
) -> Tensor {
    Tensor::compute(name, shape, |i| {
        let (ia, ib) = index(i);
        a.at(&ia)
            .binary(BinaryOp::Mul, b.at(&ib))
            .reduce(ReduceOp::Sum, k.to_vec())
    })
}

/// `index` (without `axis`) with `at` inserted at `axis`; a rank-0 tensor has no index.
fn with_axis(index: &[TExpr], axis: usize, at: TExpr, rank: usize) -> Vec<TExpr> {
    let mut v = index.to_vec();
    if rank > 0 {
        v.insert(axis, at);
    }
    v
}

/// `index` without `axis` (a rank-0 index stays empty).
fn without_axis(index: &[TExpr], axis: usize) -> Vec<TExpr> {
    index
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, e)| e.clone())
        .collect()
}

/// `shape` without `axis`, and the extent of `axis` (1 for a rank-0 tensor).
fn split_axis(shape: &[i64], axis: usize) -> (Vec<i64>, i64) {
    let rest = shape
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, &n)| n)
        .collect();
    (rest, shape.get(axis).copied().unwrap_or(1))
}

#[cfg(test)]
mod tests {

    use relay_ir::te::TeValue as TV;
    use relay_ir::{AttrValue as V, OpPattern as P};

    use super::*;

    use crate::compute::op_tests::Rng;
    use crate::nn::testing::*;
    use crate::testing::{attrs, ints};

    #[test]
    fn patterns() {
        let pattern = |name: &str| schema(name).pattern;
        for name in [
            "nn.conv2d",
            "nn.dense",
            "nn.matmul",
            "nn.batch_matmul",
            "nn.softmax",
        ] {
            assert_eq!(pattern(name), P::OutEWiseFusable, "{name}");
        }
        for name in ["nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d"] {
            assert_eq!(pattern(name), P::OutEWiseFusable, "{name}");
        }
        assert_eq!(pattern("nn.relu"), P::ElemWise);
        assert_eq!(pattern("nn.bias_add"), P::Broadcast);
        assert_eq!(pattern("nn.batch_norm"), P::Opaque);
        assert_eq!(pattern("nn.pad"), P::Injective);
        assert_eq!(pattern("nn.batch_flatten"), P::Injective);
        for name in [
            "nn.dense",
            "nn.matmul",
            "nn.batch_matmul",
            "nn.bias_add",
            "nn.relu",
            "nn.leaky_relu",
            "nn.prelu",
            "nn.softmax",
            "nn.log_softmax",
            "nn.conv2d",
            "nn.max_pool2d",
            "nn.avg_pool2d",
            "nn.global_avg_pool2d",
            "nn.global_max_pool2d",
            "nn.adaptive_avg_pool2d",
            "nn.adaptive_max_pool2d",
            "nn.batch_norm",
            "nn.layer_norm",
            "nn.dropout",
            "nn.pad",
            "nn.batch_flatten",
        ] {
            let op = schema(name);
            assert!(op.relation.is_some() && op.eval.is_some(), "{name}");
        }
    }

    /// The tensor called `name` among `t` and the tensors it reads.
    fn find_tensor(t: &relay_ir::te::Tensor, name: &str) -> Option<relay_ir::te::Tensor> {
        if t.name == name {
            return Some(t.clone());
        }
        let relay_ir::te::TensorOp::Compute { body, .. } = &t.op else {
            return None;
        };
        let mut reads = Vec::new();
        reads_of(body, &mut reads);
        reads.iter().find_map(|(r, _)| find_tensor(r, name))
    }

    /// Asserts that `t` has the contraction form the kernel compiler hands to its GEMM: a sum
    /// over reduction axes of the product of two reads of tensors of its dtype, each index a
    /// bare output axis, a bare reduction axis or a constant, every reduction axis read by both
    /// operands and every output axis by at least one.
    fn assert_contraction_form(t: &relay_ir::te::Tensor) {
        use relay_ir::te::{ReduceOp, TExprKind, TensorOp};
        let TensorOp::Compute { axes, body } = &t.op else {
            panic!("`{}` is not a compute", t.name);
        };
        let TExprKind::Reduce {
            op: ReduceOp::Sum,
            axes: red,
            body,
        } = body.kind()
        else {
            panic!("`{}` is not a sum", t.name);
        };
        let TExprKind::Binary(BinaryOp::Mul, a, b) = body.kind() else {
            panic!("`{}` does not sum a product", t.name);
        };
        let ids = |e: &relay_ir::te::TExpr| -> Vec<u32> {
            let TExprKind::Read { tensor, indices } = e.kind() else {
                panic!("`{}` multiplies something other than reads", t.name);
            };
            assert_eq!(tensor.dtype, t.dtype, "`{}` reads another dtype", t.name);
            indices
                .iter()
                .filter_map(|i| match i.kind() {
                    TExprKind::Var(v) => Some(v.id),
                    TExprKind::Int(_) => None,
                    k => panic!("`{}` reads at {k:?}", t.name),
                })
                .collect()
        };
        let (ia, ib) = (ids(a), ids(b));
        for r in red {
            assert!(ia.contains(&r.id) && ib.contains(&r.id), "`{}`", t.name);
        }
        for o in axes {
            assert!(ia.contains(&o.id) || ib.contains(&o.id), "`{}`", t.name);
        }
    }

    #[test]
    fn contractions_have_the_gemm_form() {
        let mut rng = Rng(0x5eed_0008);
        // (operator, its contraction, data shape, weight shape, attributes)
        type Case<'a> = (&'a str, &'a str, &'a [i64], &'a [i64], Vec<(&'a str, V)>);
        let cases: [Case; 6] = [
            ("nn.dense", "T_dense", &[2, 3, 4], &[5, 4], vec![]),
            (
                "nn.matmul",
                "T_matmul",
                &[2, 4, 3],
                &[5, 4],
                vec![
                    ("transpose_a", V::Bool(true)),
                    ("transpose_b", V::Bool(true)),
                ],
            ),
            (
                "nn.batch_matmul",
                "T_batch_matmul",
                &[1, 2, 3],
                &[4, 5, 3],
                vec![("transpose_b", V::Bool(true))],
            ),
            (
                "nn.batch_matmul",
                "T_batch_matmul",
                &[1, 2, 3],
                &[1, 3, 2],
                vec![],
            ),
            (
                "nn.conv2d",
                "T_conv2d_gemm",
                &[1, 4, 5, 5],
                &[6, 2, 3, 3],
                vec![("groups", V::Int(2)), ("padding", ints(&[1]))],
            ),
            (
                "nn.dense",
                "T_dense",
                &[2, 3],
                &[5, 3],
                vec![("out_dtype", s("float64"))],
            ),
        ];
        for (name, core, a, b, set) in cases {
            let x = small(&mut rng, DType::F32, a, false);
            let y = small(&mut rng, DType::F32, b, false);
            let Some(TV::Tensor(t)) = te_of(name, &[x, y], &attrs(name, &set)) else {
                panic!("no compute for {name}");
            };
            let core = find_tensor(&t, core).unwrap_or_else(|| panic!("no `{core}`"));
            assert_contraction_form(&core);
        }
    }
}
