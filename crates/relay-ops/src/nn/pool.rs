//! Pooling: the table entries of the max, average, global and adaptive pools in one, two and
//! three dimensions, and the type relations, reference evaluations and compute definitions of
//! the two-dimensional ones (NCHW).

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, CmpOp, IterVar, ReduceOp, TExpr, TeValue, Tensor, UnaryOp};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, AttrValue, Attrs, DType, Dim, NDArray,
    OpPattern as P, OpSchema, RelationFn, Type, Value,
};

use super::layout::Relayout;
use super::{
    DATA, Num, arg, checked, clamp_index, concrete, count, dilated, in_range, ix, ix_floordiv,
    ix_max, ix_min, ix_mul, ix_sub, padding4, positive_pair, require_nchw, require_numeric,
    require_rank, window_dim,
};
use crate::compute::{self, ix_add};
use crate::support::{attr_bool, inputs_n, tensor, tensor_type};
use crate::{field, op, required};

/// The fields of the max-pooling attrs; note `dilation` comes before `padding`.
const fn max_pool_attrs(
    ones: &'static [i64],
    zeros: &'static [i64],
    layout: &'static str,
) -> [AttrField; 7] {
    [
        required("pool_size", K::IntArray),
        field("strides", K::IntArray, D::Ints(ones)),
        field("dilation", K::IntArray, D::Ints(ones)),
        field("padding", K::IntArray, D::Ints(zeros)),
        field("layout", K::Str, D::Str(layout)),
        field("out_layout", K::Str, D::Str("")),
        field("ceil_mode", K::Bool, D::Bool(false)),
    ]
}

/// The fields of the average-pooling attrs: the max-pooling fields plus `count_include_pad`.
const fn avg_pool_attrs(
    ones: &'static [i64],
    zeros: &'static [i64],
    layout: &'static str,
) -> [AttrField; 8] {
    [
        required("pool_size", K::IntArray),
        field("strides", K::IntArray, D::Ints(ones)),
        field("dilation", K::IntArray, D::Ints(ones)),
        field("padding", K::IntArray, D::Ints(zeros)),
        field("layout", K::Str, D::Str(layout)),
        field("out_layout", K::Str, D::Str("")),
        field("ceil_mode", K::Bool, D::Bool(false)),
        field("count_include_pad", K::Bool, D::Bool(false)),
    ]
}

/// The fields of the adaptive-pooling attrs.
const fn adaptive_pool_attrs(layout: &'static str) -> [AttrField; 3] {
    [
        field("output_size", K::IntArray, D::Ints(&[])),
        field("layout", K::Str, D::Str(layout)),
        field("out_layout", K::Str, D::Str("")),
    ]
}

const MAX_POOL1D_ATTRS: &[AttrField] = &max_pool_attrs(&[1], &[0], "NCW");
const MAX_POOL2D_ATTRS: &[AttrField] = &max_pool_attrs(&[1, 1], &[0, 0], "NCHW");
const MAX_POOL3D_ATTRS: &[AttrField] = &max_pool_attrs(&[1, 1, 1], &[0, 0, 0], "NCDHW");
const AVG_POOL1D_ATTRS: &[AttrField] = &avg_pool_attrs(&[1], &[0], "NCW");
/// `AvgPool2DAttrs`, also used by `qnn.avg_pool2d`.
pub(crate) const AVG_POOL2D_ATTRS: &[AttrField] = &avg_pool_attrs(&[1, 1], &[0, 0], "NCHW");
const AVG_POOL3D_ATTRS: &[AttrField] = &avg_pool_attrs(&[1, 1, 1], &[0, 0, 0], "NCDHW");

/// `GlobalPool2DAttrs`.
const GLOBAL_POOL2D_ATTRS: &[AttrField] = &[
    field("layout", K::Str, D::Str("NCHW")),
    field("out_layout", K::Str, D::Str("")),
];

const ADAPTIVE_POOL1D_ATTRS: &[AttrField] = &adaptive_pool_attrs("NCW");
const ADAPTIVE_POOL2D_ATTRS: &[AttrField] = &adaptive_pool_attrs("NCHW");
const ADAPTIVE_POOL3D_ATTRS: &[AttrField] = &adaptive_pool_attrs("NCDHW");

/// The pools.
pub(super) static OPS: &[OpSchema] = &[
    // Pooling.
    op(
        "nn.max_pool1d",
        DATA,
        "relay.attrs.MaxPool1DAttrs",
        MAX_POOL1D_ATTRS,
    ),
    op(
        "nn.max_pool2d",
        DATA,
        "relay.attrs.MaxPool2DAttrs",
        MAX_POOL2D_ATTRS,
    )
    .with(P::OutEWiseFusable, pool2d_rel, max_pool2d_eval)
    .with_compute(|i, a, o| pool2d_te(i, a, o, true)),
    op(
        "nn.max_pool3d",
        DATA,
        "relay.attrs.MaxPool3DAttrs",
        MAX_POOL3D_ATTRS,
    ),
    op(
        "nn.avg_pool1d",
        DATA,
        "relay.attrs.AvgPool1DAttrs",
        AVG_POOL1D_ATTRS,
    ),
    op(
        "nn.avg_pool2d",
        DATA,
        "relay.attrs.AvgPool2DAttrs",
        AVG_POOL2D_ATTRS,
    )
    .with(P::OutEWiseFusable, pool2d_rel, avg_pool2d_eval)
    .with_compute(|i, a, o| pool2d_te(i, a, o, false)),
    op(
        "nn.avg_pool3d",
        DATA,
        "relay.attrs.AvgPool3DAttrs",
        AVG_POOL3D_ATTRS,
    ),
    op(
        "nn.max_pool2d_grad",
        &["out_grad", "data"],
        "relay.attrs.MaxPool2DAttrs",
        MAX_POOL2D_ATTRS,
    ),
    op(
        "nn.avg_pool2d_grad",
        &["out_grad", "data"],
        "relay.attrs.AvgPool2DAttrs",
        AVG_POOL2D_ATTRS,
    ),
    op(
        "nn.global_max_pool2d",
        DATA,
        "relay.attrs.GlobalPool2DAttrs",
        GLOBAL_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        global_pool2d_rel,
        global_max_pool2d_eval,
    )
    .with_compute(|i, a, o| global_pool2d_te(i, a, o, true)),
    op(
        "nn.global_avg_pool2d",
        DATA,
        "relay.attrs.GlobalPool2DAttrs",
        GLOBAL_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        global_pool2d_rel,
        global_avg_pool2d_eval,
    )
    .with_compute(|i, a, o| global_pool2d_te(i, a, o, false)),
    op(
        "nn.adaptive_max_pool1d",
        DATA,
        "relay.attrs.AdaptivePool1DAttrs",
        ADAPTIVE_POOL1D_ATTRS,
    ),
    op(
        "nn.adaptive_avg_pool1d",
        DATA,
        "relay.attrs.AdaptivePool1DAttrs",
        ADAPTIVE_POOL1D_ATTRS,
    ),
    op(
        "nn.adaptive_max_pool2d",
        DATA,
        "relay.attrs.AdaptivePool2DAttrs",
        ADAPTIVE_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        adaptive_pool2d_rel,
        adaptive_max_pool2d_eval,
    )
    .with_compute(|i, a, o| adaptive_pool2d_te(i, a, o, true)),
    op(
        "nn.adaptive_avg_pool2d",
        DATA,
        "relay.attrs.AdaptivePool2DAttrs",
        ADAPTIVE_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        adaptive_pool2d_rel,
        adaptive_avg_pool2d_eval,
    )
    .with_compute(|i, a, o| adaptive_pool2d_te(i, a, o, false)),
    op(
        "nn.adaptive_max_pool3d",
        DATA,
        "relay.attrs.AdaptivePool3DAttrs",
        ADAPTIVE_POOL3D_ATTRS,
    ),
    op(
        "nn.adaptive_avg_pool3d",
        DATA,
        "relay.attrs.AdaptivePool3DAttrs",
        ADAPTIVE_POOL3D_ATTRS,
    ),
];

// ----- Type relations and reference evaluation -----

/// The attributes of `nn.max_pool2d` and `nn.avg_pool2d`.
struct Pool2d {
    size: [i64; 2],
    strides: [i64; 2],
    dilation: [i64; 2],
    /// Top, left, bottom, right.
    padding: [i64; 4],
    ceil_mode: bool,
    count_include_pad: bool,
}

impl Pool2d {
    fn new(attrs: &Attrs) -> Result<Pool2d, OpError> {
        let count_include_pad = match attrs.get("count_include_pad") {
            Some(_) => attr_bool(attrs, "count_include_pad")?,
            None => false,
        };
        Ok(Pool2d {
            size: positive_pair(attrs, "pool_size")?,
            strides: positive_pair(attrs, "strides")?,
            dilation: positive_pair(attrs, "dilation")?,
            padding: padding4(attrs)?,
            ceil_mode: attr_bool(attrs, "ceil_mode")?,
            count_include_pad,
        })
    }
}

/// An NCHW pooling input: its shape and dtype after the common checks.
fn pool_input<'t>(
    types: &'t [Type],
    attrs: &Attrs,
    layout: &str,
) -> Result<(&'t Type, &'t [Dim], DType), OpError> {
    let [data] = inputs_n::<1>(types)?;
    let (shape, dtype) = tensor_type(data, "pooling data")?;
    require_nchw(attrs, layout, None)?;
    require_rank(data, shape, 4, "pooling data", "NCHW")?;
    require_numeric(data, dtype, "pooling data")?;
    Ok((data, shape, dtype))
}

/// `nn.max_pool2d` and `nn.avg_pool2d` on NCHW data.
fn pool2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.relation(types, pool2d_rel);
    }
    let (_, shape, dtype) = pool_input(types, attrs, "layout")?;
    let p = Pool2d::new(attrs)?;
    let mut spatial = [Dim::Any; 2];
    for (i, axis) in ["height", "width"].into_iter().enumerate() {
        let window = dilated(p.size[i], p.dilation[i])?;
        let pad = p.padding[i].saturating_add(p.padding[i + 2]);
        spatial[i] = window_dim(
            shape[2 + i],
            pad,
            Some(window),
            p.strides[i],
            p.ceil_mode,
            axis,
            "pool window",
        )?;
    }
    Ok(tensor(
        vec![shape[0], shape[1], spatial[0], spatial[1]],
        dtype,
    ))
}

/// Max or average pooling over windows of NCHW data. Max pooling pads with the dtype's lowest
/// value; average pooling divides by the in-bounds taps, or with `count_include_pad` by the
/// taps inside the padded input (TVM's rule, which leaves out what ceil mode adds past the
/// bottom and right padding).
fn pool2d_run<T: Num>(x: &NDArray, p: &Pool2d, shape: &[i64], max: bool) -> Result<Value, OpError> {
    let dtype = x.dtype();
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let (oh, ow) = (shape[2], shape[3]);
    let [kh, kw] = p.size;
    let [sh, sw] = p.strides;
    let [dh, dw] = p.dilation;
    let [pt, pl, pb, pr] = p.padding;
    let xv = T::read(x);
    let planes = count(&shape[..2]);
    let mut out = Vec::with_capacity(count(shape));
    for plane in 0..planes as i64 {
        for i in 0..oh {
            for j in 0..ow {
                let (y0, z0) = (i * sh - pt, j * sw - pl);
                let mut acc = if max { T::lowest(dtype) } else { T::ZERO };
                let mut taps = 0i64;
                for ki in 0..kh {
                    let y = y0 + ki * dh;
                    if y < 0 || y >= h {
                        continue;
                    }
                    for kj in 0..kw {
                        let z = z0 + kj * dw;
                        if z < 0 || z >= w {
                            continue;
                        }
                        let v = xv[((plane * h + y) * w + z) as usize];
                        acc = if max { acc.larger(v) } else { acc.plus(v) };
                        taps += 1;
                    }
                }
                if !max {
                    let divisor = if p.count_include_pad {
                        let rows = (0..kh).filter(|ki| y0 + ki * dh < h + pb).count();
                        let cols = (0..kw).filter(|kj| z0 + kj * dw < w + pr).count();
                        (rows * cols) as i64
                    } else {
                        taps
                    };
                    acc = acc.div_count(divisor);
                }
                out.push(acc);
            }
        }
    }
    T::array(dtype, shape, &out)
}

fn pool2d_eval(args: &[Value], attrs: &Attrs, max: bool) -> Result<Value, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.evaluate(args, |a, at| pool2d_eval(a, at, max));
    }
    let (arrays, result) = checked(args, attrs, pool2d_rel)?;
    let (shape, _) = concrete(&result, None)?;
    let x = arg(&arrays, 0)?;
    let p = Pool2d::new(attrs)?;
    if x.dtype().is_float() {
        pool2d_run::<f64>(x, &p, &shape, max)
    } else {
        pool2d_run::<i128>(x, &p, &shape, max)
    }
}

fn max_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    pool2d_eval(args, attrs, true)
}

fn avg_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    pool2d_eval(args, attrs, false)
}

/// `nn.global_avg_pool2d` and `nn.global_max_pool2d`: `[n, c, h, w]` to `[n, c, 1, 1]`.
fn global_pool2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.relation(types, global_pool2d_rel);
    }
    let (_, shape, dtype) = pool_input(types, attrs, "layout")?;
    Ok(tensor(
        vec![shape[0], shape[1], Dim::Known(1), Dim::Known(1)],
        dtype,
    ))
}

/// `output_size` of an adaptive pool: (height, width), `None` keeping the input's extent.
fn adaptive_output_size(attrs: &Attrs) -> Result<[Option<i64>; 2], OpError> {
    let items: &[AttrValue] = match attrs.get("output_size") {
        None | Some(AttrValue::Null) => &[],
        Some(v) => v.as_array().ok_or_else(|| {
            OpError::attribute(
                "output_size",
                "attribute `output_size` must be a list of integers",
            )
        })?,
    };
    let sizes = items
        .iter()
        .map(|item| match item {
            AttrValue::Null => Ok(None),
            AttrValue::Int(n) if *n >= 1 => Ok(Some(*n)),
            AttrValue::Int(n) => Err(OpError::attribute(
                "output_size",
                format!("`output_size` must be positive, got {n}"),
            )),
            _ => Err(OpError::attribute(
                "output_size",
                "attribute `output_size` must be a list of integers",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    match *sizes.as_slice() {
        [] => Ok([None, None]),
        [s] => Ok([s, s]),
        [h, w] => Ok([h, w]),
        _ => Err(OpError::attribute(
            "output_size",
            format!(
                "`output_size` must have 0, 1 or 2 values, got {}",
                sizes.len()
            ),
        )),
    }
}

/// `nn.adaptive_avg_pool2d`: NCHW data pooled to `output_size`.
fn adaptive_pool2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.relation(types, adaptive_pool2d_rel);
    }
    let (_, shape, dtype) = pool_input(types, attrs, "layout")?;
    let [oh, ow] = adaptive_output_size(attrs)?;
    let pick = |size: Option<i64>, input: Dim| size.map_or(input, Dim::Known);
    Ok(tensor(
        vec![shape[0], shape[1], pick(oh, shape[2]), pick(ow, shape[3])],
        dtype,
    ))
}

/// Adaptive pooling as TVM computes it: output cell `(i, j)` averages (or takes the maximum of)
/// input rows `floor(i * h / oh) .. ceil((i + 1) * h / oh)` and the columns found the same way.
/// With a 1x1 output this is global pooling over the whole plane.
fn plane_pool_run<T: Num>(x: &NDArray, shape: &[i64], max: bool) -> Result<Value, OpError> {
    let dtype = x.dtype();
    let (h, w) = (i128::from(x.shape()[2]), i128::from(x.shape()[3]));
    let (oh, ow) = (i128::from(shape[2]), i128::from(shape[3]));
    let xv = T::read(x);
    let planes = count(&shape[..2]);
    let mut out = Vec::with_capacity(count(shape));
    for plane in 0..planes as i128 {
        for i in 0..oh {
            let (y0, y1) = ((i * h) / oh, ((i + 1) * h + oh - 1) / oh);
            for j in 0..ow {
                let (z0, z1) = ((j * w) / ow, ((j + 1) * w + ow - 1) / ow);
                let mut acc = if max { T::lowest(dtype) } else { T::ZERO };
                for y in y0..y1 {
                    for z in z0..z1 {
                        let v = xv[((plane * h + y) * w + z) as usize];
                        acc = if max { acc.larger(v) } else { acc.plus(v) };
                    }
                }
                if !max {
                    acc = acc.div_count(((y1 - y0) * (z1 - z0)) as i64);
                }
                out.push(acc);
            }
        }
    }
    T::array(dtype, shape, &out)
}

fn plane_pool_eval(
    args: &[Value],
    attrs: &Attrs,
    relation: RelationFn,
    max: bool,
) -> Result<Value, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.evaluate(args, |a, at| plane_pool_eval(a, at, relation, max));
    }
    let (arrays, result) = checked(args, attrs, relation)?;
    let (shape, _) = concrete(&result, None)?;
    let x = arg(&arrays, 0)?;
    if x.dtype().is_float() {
        plane_pool_run::<f64>(x, &shape, max)
    } else {
        plane_pool_run::<i128>(x, &shape, max)
    }
}

fn global_avg_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    plane_pool_eval(args, attrs, global_pool2d_rel, false)
}

fn global_max_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    plane_pool_eval(args, attrs, global_pool2d_rel, true)
}

fn adaptive_avg_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    plane_pool_eval(args, attrs, adaptive_pool2d_rel, false)
}

fn adaptive_max_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    plane_pool_eval(args, attrs, adaptive_pool2d_rel, true)
}

// ----- Compute definitions -----

/// The sums of an average's windows.
enum WindowSum {
    /// One sum, in `float64` for floats (as the reference) and in `int64` for integers up to
    /// 32 bits.
    One(Tensor),
    /// For 64-bit integers, whose exact sum needs more than 64 bits: `int64` sums of the high
    /// halves (`v >> 32`, signed for `int64`) and of the low halves (`v & 0xffffffff`).
    Halves(Tensor, Tensor),
}

/// The most taps a window of 64-bit integers may have: its sums of halves then stay far from
/// overflowing 63 bits, and so does every step of [`window_mean`].
const HALVES_LIMIT: i64 = 1 << 30;

/// A window tap: the value read (of the data's dtype) and, when some taps fall outside the
/// data, whether this one is inside.
type Tap = (TExpr, Option<TExpr>);

/// The window sums `name_sum[i] = Σ_r tap(i, r)` of an average over `dtype` data, with
/// reduction axes of extents `taps` (taps outside the window count 0).
fn window_sum(
    name: &str,
    shape: &[i64],
    dtype: DType,
    taps: [i64; 2],
    tap: impl Fn(&[TExpr], &[TExpr]) -> Tap,
) -> Result<WindowSum, OpError> {
    let sum = |suffix: &str, acc: DType, part: &dyn Fn(TExpr) -> TExpr| {
        let axes = taps.map(IterVar::new);
        Tensor::compute(format!("{name}_{suffix}"), shape, |i| {
            let (v, inside) = tap(i, &[axes[0].expr(), axes[1].expr()]);
            let v = part(v);
            let v = match inside {
                Some(inside) => inside.select(v, compute::zero(acc)),
                None => v,
            };
            v.reduce(ReduceOp::Sum, axes.to_vec())
        })
    };
    if dtype.is_float() {
        Ok(WindowSum::One(sum("sum", DType::F64, &|v| {
            v.cast(DType::F64)
        })))
    } else if dtype.bits <= 32 {
        Ok(WindowSum::One(sum("sum", DType::I64, &|v| {
            v.cast(DType::I64)
        })))
    } else if taps[0].saturating_mul(taps[1]) <= HALVES_LIMIT {
        let hi = sum("sum_hi", DType::I64, &|v| compute::high_half(&v));
        let lo = sum("sum_lo", DType::I64, &|v| compute::low_half(&v));
        Ok(WindowSum::Halves(hi, lo))
    } else {
        Err(OpError::unsupported(format!(
            "an average of {dtype} values over windows of {} taps is not supported (at most \
             {HALVES_LIMIT})",
            taps[0].saturating_mul(taps[1])
        )))
    }
}

/// The average at output `i`: its window sum divided by `count` (an `int64` expression at
/// most the window's taps) and converted to `dtype`, as the reference divides: floats in
/// `float64` (0/0 is NaN), integers truncating toward zero, an empty window giving 0.
fn window_mean(sum: &WindowSum, i: &[TExpr], count: &TExpr, dtype: DType) -> TExpr {
    let (hi, lo) = match sum {
        WindowSum::One(t) if dtype.is_float() => {
            let count = count.clone().cast(DType::F64);
            return compute::bin(BinaryOp::Div, &t.at(i), &count).cast(dtype);
        }
        WindowSum::One(t) => {
            let q = compute::bin(BinaryOp::Div, &t.at(i), &ix_max(count, &ix(1)));
            return compute::cmp(CmpOp::Eq, count, &ix(0))
                .select(ix(0), q)
                .cast(dtype);
        }
        WindowSum::Halves(hi, lo) => (hi.at(i), lo.at(i)),
    };
    let q = compute::wide_quotient(&[lo, hi], &ix_max(count, &ix(1)), false);
    compute::cmp(CmpOp::Eq, count, &ix(0))
        .select(ix(0), q)
        .cast(dtype)
}

/// The value max pooling starts from and pads with: -inf (`super::lowest_float`), or the
/// dtype's lowest integer.
fn pool_lowest(dtype: DType) -> TExpr {
    if dtype.is_float() {
        TExpr::float(super::lowest_float(dtype), dtype)
    } else {
        TExpr::int(compute::int_range(dtype).0, dtype)
    }
}

/// A tap of a max pool: ignored (the lowest value) outside the input or when NaN, as the
/// reference's comparison skips NaN.
fn max_candidate((v, inside): Tap) -> TExpr {
    let lowest = pool_lowest(v.dtype());
    let outside = inside.map(|inside| inside.unary(UnaryOp::LogicalNot));
    let skip = match (v.dtype().is_float(), outside) {
        (true, Some(outside)) => Some(compute::bin(
            BinaryOp::LogicalOr,
            &outside,
            &compute::is_nan(&v),
        )),
        (true, None) => Some(compute::is_nan(&v)),
        (false, outside) => outside,
    };
    match skip {
        Some(skip) => skip.select(lowest, v),
        None => v,
    }
}

/// `name[i] = max_r tap(i, r)` over reduction axes of extents `taps` (see [`max_candidate`]).
/// Without taps (an empty plane), the pool's lowest value: a reduction's identity, -inf, would
/// be NaN in an 8-bit float without infinities.
fn window_max(
    name: &str,
    shape: &[i64],
    dtype: DType,
    taps: [i64; 2],
    tap: impl Fn(&[TExpr], &[TExpr]) -> Tap,
) -> Result<TeValue, OpError> {
    if taps.contains(&0) {
        return compute::tensor_value(Tensor::compute(name, shape, |_| pool_lowest(dtype)));
    }
    let axes = taps.map(IterVar::new);
    compute::tensor_value(Tensor::compute(name, shape, |i| {
        max_candidate(tap(i, &[axes[0].expr(), axes[1].expr()]))
            .reduce(ReduceOp::Max, axes.to_vec())
    }))
}

/// How many taps `t` in `0..k` put `start + t * d` below `end` and, when `from_zero`, at or
/// above 0 (`d >= 1`).
fn tap_count(start: &TExpr, k: i64, d: i64, end: i64, from_zero: bool) -> TExpr {
    let first = if from_zero {
        ix_max(&ix(0), &ix_sub(&ix(0), &ix_floordiv(start, d)))
    } else {
        ix(0)
    };
    let last = ix_min(&ix(k - 1), &ix_floordiv(&ix_sub(&ix(end - 1), start), d));
    ix_max(&ix(0), &ix_add(ix_sub(&last, &first), ix(1)))
}

/// A pooling operator's NCHW input, its height and width, and the result's shape and dtype.
struct PoolTe<'t> {
    x: &'t Tensor,
    h: i64,
    w: i64,
    shape: [i64; 4],
    dtype: DType,
}

/// The NCHW input and result shapes of a pooling operator, checked.
fn pool_shapes<'t>(
    inputs: &'t [TeValue],
    attrs: &Attrs,
    out: &Type,
    what: &str,
) -> Result<PoolTe<'t>, OpError> {
    require_nchw(attrs, "layout", None)?;
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    match (x.shape.as_slice(), shape.as_slice()) {
        (&[n, c, h, w], &[on, oc, oh, ow]) if on == n && oc == c && x.dtype == dtype => {
            Ok(PoolTe {
                x,
                h,
                w,
                shape: [on, oc, oh, ow],
                dtype,
            })
        }
        _ => Err(OpError::shape(format!(
            "{what} expects NCHW data and result, got {:?} and {shape:?}",
            x.shape
        ))),
    }
}

/// `nn.max_pool2d` and `nn.avg_pool2d`: a reduction over the window taps, skipping taps in the
/// padding (reads clamped into the input). Max pooling ignores NaN as the reference does;
/// average pooling divides by the in-bounds taps, or with `count_include_pad` by the taps
/// inside the padded input (what ceil mode adds past the bottom and right padding left out).
fn pool2d_te(inputs: &[TeValue], attrs: &Attrs, out: &Type, max: bool) -> Result<TeValue, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.compute(inputs, out, |i, a, o| pool2d_te(i, a, o, max));
    }
    let what = if max {
        "nn.max_pool2d"
    } else {
        "nn.avg_pool2d"
    };
    let PoolTe {
        x,
        h,
        w,
        shape,
        dtype,
    } = pool_shapes(inputs, attrs, out, what)?;
    let p = Pool2d::new(attrs)?;
    let [kh, kw] = p.size;
    let [sh, sw] = p.strides;
    let [dh, dw] = p.dilation;
    let [pt, pl, pb, pr] = p.padding;
    let starts = |i: &[TExpr]| {
        (
            ix_sub(&ix_mul(&i[2], sh), &ix(pt)),
            ix_sub(&ix_mul(&i[3], sw), &ix(pl)),
        )
    };
    let tap = |i: &[TExpr], r: &[TExpr]| -> Tap {
        if h == 0 || w == 0 {
            // Every tap is padding, and nothing may be read.
            let fill = if max {
                pool_lowest(dtype)
            } else {
                compute::zero(dtype)
            };
            return (fill, Some(TExpr::int(0, DType::BOOL)));
        }
        let (y0, x0) = starts(i);
        let iy = ix_add(y0.clone(), ix_mul(&r[0], dh));
        let iw = ix_add(x0.clone(), ix_mul(&r[1], dw));
        let inside = compute::bin(BinaryOp::LogicalAnd, &in_range(&iy, h), &in_range(&iw, w));
        let index = [
            i[0].clone(),
            i[1].clone(),
            clamp_index(&iy, h),
            clamp_index(&iw, w),
        ];
        (x.at(&index), Some(inside))
    };
    if max {
        return window_max("T_max_pool2d", &shape, dtype, [kh, kw], tap);
    }
    let sum = window_sum("T_avg_pool2d", &shape, dtype, [kh, kw], tap)?;
    compute::tensor_value(Tensor::compute("T_avg_pool2d", &shape, |i| {
        let (y0, x0) = starts(i);
        let (rows, cols) = if p.count_include_pad {
            (
                tap_count(&y0, kh, dh, h.saturating_add(pb), false),
                tap_count(&x0, kw, dw, w.saturating_add(pr), false),
            )
        } else {
            (
                tap_count(&y0, kh, dh, h, true),
                tap_count(&x0, kw, dw, w, true),
            )
        };
        let count = compute::bin(BinaryOp::Mul, &rows, &cols);
        window_mean(&sum, i, &count, dtype)
    }))
}

/// `nn.global_max_pool2d` and `nn.global_avg_pool2d`: a reduction over each plane (NaN
/// ignored by the maximum; an empty plane's mean is NaN, or 0 for integers).
fn global_pool2d_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    max: bool,
) -> Result<TeValue, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.compute(inputs, out, |i, a, o| global_pool2d_te(i, a, o, max));
    }
    let what = if max {
        "nn.global_max_pool2d"
    } else {
        "nn.global_avg_pool2d"
    };
    let PoolTe {
        x,
        h,
        w,
        shape,
        dtype,
    } = pool_shapes(inputs, attrs, out, what)?;
    if shape[2..] != [1, 1] {
        return Err(OpError::shape(format!(
            "{what} expects a [n, c, 1, 1] result, got {shape:?}"
        )));
    }
    let tap = |i: &[TExpr], r: &[TExpr]| -> Tap {
        let index = [i[0].clone(), i[1].clone(), r[0].clone(), r[1].clone()];
        (x.at(&index), None)
    };
    if max {
        return window_max("T_global_max_pool2d", &shape, dtype, [h, w], tap);
    }
    let sum = window_sum("T_global_avg_pool2d", &shape, dtype, [h, w], tap)?;
    let count = ix(h.saturating_mul(w));
    compute::tensor_value(Tensor::compute("T_global_avg_pool2d", &shape, |i| {
        window_mean(&sum, i, &count, dtype)
    }))
}

/// Adaptive pooling windows along one axis of `n` elements pooled to `o`: output `i` covers
/// `floor(i * n / o) .. ceil((i + 1) * n / o)`. Returns the start and length expressions of
/// output index `i`.
fn adaptive_window(i: &TExpr, n: i64, o: i64) -> (TExpr, TExpr) {
    let o = o.max(1);
    let start = ix_floordiv(&ix_mul(i, n), o);
    let end = ix_floordiv(&ix_add(ix_mul(&ix_add(i.clone(), ix(1)), n), ix(o - 1)), o);
    let len = ix_sub(&end, &start);
    (start, len)
}

/// The longest adaptive pooling window along an axis of `n` elements pooled to `o`.
fn adaptive_widest(n: i64, o: i64) -> i64 {
    let (n, o) = (i128::from(n), i128::from(o.max(1)));
    (0..o)
        .map(|i| ((i + 1) * n + o - 1) / o - (i * n) / o)
        .max()
        .map_or(0, |len| i64::try_from(len).unwrap_or(i64::MAX))
}

/// `nn.adaptive_max_pool2d` and `nn.adaptive_avg_pool2d`: a reduction over the widest window
/// with the taps past each window's end masked. The maximum ignores NaN as the reference does
/// (an empty window gives the lowest value); the mean divides the sum by the window's size.
fn adaptive_pool2d_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    max: bool,
) -> Result<TeValue, OpError> {
    if let Some(r) = Relayout::of(attrs, "layout", None)? {
        return r.compute(inputs, out, |i, a, o| adaptive_pool2d_te(i, a, o, max));
    }
    let (what, name) = if max {
        ("nn.adaptive_max_pool2d", "T_adaptive_max_pool2d")
    } else {
        ("nn.adaptive_avg_pool2d", "T_adaptive_avg_pool2d")
    };
    let PoolTe {
        x,
        h,
        w,
        shape,
        dtype,
    } = pool_shapes(inputs, attrs, out, what)?;
    let (oh, ow) = (shape[2], shape[3]);
    let tap = |i: &[TExpr], r: &[TExpr]| -> Tap {
        let (y0, ylen) = adaptive_window(&i[2], h, oh);
        let (x0, xlen) = adaptive_window(&i[3], w, ow);
        let inside = compute::bin(
            BinaryOp::LogicalAnd,
            &compute::cmp(CmpOp::Lt, &r[0], &ylen),
            &compute::cmp(CmpOp::Lt, &r[1], &xlen),
        );
        // Windows start inside the input, so only the end needs clamping.
        let index = [
            i[0].clone(),
            i[1].clone(),
            ix_min(&ix_add(y0.clone(), r[0].clone()), &ix(h - 1)),
            ix_min(&ix_add(x0.clone(), r[1].clone()), &ix(w - 1)),
        ];
        (x.at(&index), Some(inside))
    };
    let taps = [adaptive_widest(h, oh), adaptive_widest(w, ow)];
    if max {
        return window_max(name, &shape, dtype, taps, tap);
    }
    let sum = window_sum(name, &shape, dtype, taps, tap)?;
    compute::tensor_value(Tensor::compute(name, &shape, |i| {
        let (_, ylen) = adaptive_window(&i[2], h, oh);
        let (_, xlen) = adaptive_window(&i[3], w, ow);
        let count = compute::bin(BinaryOp::Mul, &ylen, &xlen);
        window_mean(&sum, i, &count, dtype)
    }))
}

#[cfg(test)]
mod tests {
    use std::slice::from_ref;

    use relay_ir::AttrValue as V;
    use relay_ir::te::TeValue as TV;

    use super::*;
    use crate::compute::interp::Interp;
    use crate::compute::op_tests::{DTYPES, Rng, random};
    use crate::nn::testing::*;
    use crate::testing::{attrs, ints};

    #[test]
    fn pool_relations() {
        let data = [f32s(&[1, 6, 9, 9])];
        let pool = |set: &[(&str, V)]| ok("nn.max_pool2d", &data, set);
        assert_eq!(
            pool(&[("pool_size", ints(&[2, 2])), ("strides", ints(&[2, 2]))]),
            "Tensor[(1, 6, 4, 4), float32]"
        );
        assert_eq!(
            pool(&[
                ("pool_size", ints(&[2, 2])),
                ("strides", ints(&[2, 2])),
                ("ceil_mode", V::Bool(true))
            ]),
            "Tensor[(1, 6, 5, 5), float32]"
        );
        assert_eq!(
            pool(&[
                ("pool_size", ints(&[2, 2])),
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[0, 0, 1, 1])),
                ("ceil_mode", V::Bool(true))
            ]),
            "Tensor[(1, 6, 5, 5), float32]"
        );
        assert_eq!(
            pool(&[("pool_size", ints(&[3, 3])), ("padding", ints(&[1]))]),
            "Tensor[(1, 6, 9, 9), float32]"
        );
        assert_eq!(
            pool(&[("pool_size", ints(&[3, 3])), ("padding", ints(&[1, 0]))]),
            "Tensor[(1, 6, 9, 7), float32]"
        );
        assert_eq!(
            pool(&[("pool_size", ints(&[3, 3])), ("dilation", ints(&[2, 1]))]),
            "Tensor[(1, 6, 5, 7), float32]"
        );
        assert_eq!(
            ok(
                "nn.avg_pool2d",
                &data,
                &[
                    ("pool_size", ints(&[3, 3])),
                    ("strides", ints(&[2, 2])),
                    ("padding", ints(&[1, 1, 1, 1])),
                    ("count_include_pad", V::Bool(true))
                ]
            ),
            "Tensor[(1, 6, 5, 5), float32]"
        );
        assert_eq!(
            ok(
                "nn.avg_pool2d",
                &[ty(&[-1, 2, -1, 5], "int32")],
                &[("pool_size", ints(&[2, 2]))]
            ),
            "Tensor[(?, 2, ?, 4), int32]"
        );
        assert_eq!(
            err("nn.max_pool2d", &data, &[("pool_size", ints(&[2, 2, 2]))]),
            "`pool_size` must have 2 values, got 3"
        );
        assert_eq!(
            err(
                "nn.max_pool2d",
                &data,
                &[("pool_size", ints(&[2, 2])), ("padding", ints(&[1, 2, 3]))]
            ),
            "`padding` must have 1, 2 or 4 values, got 3"
        );
        assert_eq!(
            err("nn.avg_pool2d", &data, &[("pool_size", ints(&[10, 2]))]),
            "input height 9 with padding 0 is smaller than the pool window height 10"
        );
        assert!(
            err(
                "nn.max_pool2d",
                &data,
                &[("pool_size", ints(&[2, 2])), ("layout", s("HWNCD"))]
            )
            .starts_with("layout=\"HWNCD\" is not supported")
        );
        assert_eq!(
            err(
                "nn.max_pool2d",
                &[ty(&[1, 6, 9, 9], "bool")],
                &[("pool_size", ints(&[2, 2]))]
            ),
            "pooling data must have an integer or float dtype, got `Tensor[(1, 6, 9, 9), bool]`"
        );

        assert_eq!(
            ok("nn.global_avg_pool2d", &data, &[]),
            "Tensor[(1, 6, 1, 1), float32]"
        );
        assert_eq!(
            ok("nn.global_max_pool2d", &[f32s(&[-1, 6, -1, -1])], &[]),
            "Tensor[(?, 6, 1, 1), float32]"
        );
        let adaptive = |set: &[(&str, V)]| rel("nn.adaptive_avg_pool2d", &data, set);
        assert_eq!(
            adaptive(&[("output_size", ints(&[2, 4]))]).unwrap(),
            "Tensor[(1, 6, 2, 4), float32]"
        );
        assert_eq!(
            adaptive(&[("output_size", ints(&[3]))]).unwrap(),
            "Tensor[(1, 6, 3, 3), float32]"
        );
        assert_eq!(adaptive(&[]).unwrap(), "Tensor[(1, 6, 9, 9), float32]");
        assert_eq!(
            adaptive(&[("output_size", V::Array(vec![V::Null, V::Int(2)]))]).unwrap(),
            "Tensor[(1, 6, 9, 2), float32]"
        );
        assert_eq!(
            adaptive(&[("output_size", ints(&[1, 2, 3]))]).unwrap_err(),
            "`output_size` must have 0, 1 or 2 values, got 3"
        );
    }

    #[test]
    fn pool_evaluation() {
        let x = t(&[1, 1, 3, 3], &NINE);
        let set = |extra: &[(&'static str, V)]| {
            let mut v = vec![
                ("pool_size", ints(&[2, 2])),
                ("strides", ints(&[1, 1])),
                ("padding", ints(&[1])),
            ];
            v.extend(extra.iter().cloned());
            v
        };
        let (shape, out) = run("nn.avg_pool2d", from_ref(&x), &set(&[]));
        assert_eq!(shape, [1, 1, 4, 4]);
        assert_eq!(&out[..4], [1., 1.5, 2.5, 3.]);
        let (_, out) = run(
            "nn.avg_pool2d",
            from_ref(&x),
            &set(&[("count_include_pad", V::Bool(true))]),
        );
        assert_eq!(&out[..4], [0.25, 0.75, 1.25, 0.75]);
        assert_eq!(out[5], 3.);
        let (_, out) = run("nn.max_pool2d", from_ref(&x), &set(&[]));
        assert_eq!(&out[..4], [1., 2., 3., 3.]);
        // Max pooling pads with -inf, so negative inputs stay negative.
        let negative = t(&[1, 1, 1, 1], &[-3.]);
        let (_, out) = run(
            "nn.max_pool2d",
            &[negative],
            &[("pool_size", ints(&[2, 2])), ("padding", ints(&[1]))],
        );
        assert_eq!(out, [-3.; 4]);
        // Ceil mode keeps the partial last window.
        let ceil = [
            ("pool_size", ints(&[2, 2])),
            ("strides", ints(&[2, 2])),
            ("ceil_mode", V::Bool(true)),
        ];
        assert_eq!(
            run("nn.max_pool2d", from_ref(&x), &ceil),
            (vec![1, 1, 2, 2], vec![5., 6., 8., 9.])
        );
        assert_eq!(
            run("nn.avg_pool2d", from_ref(&x), &ceil).1,
            [3., 4.5, 7.5, 9.]
        );
        // Dilated max pooling reads the corners.
        assert_eq!(
            run(
                "nn.max_pool2d",
                &[t(&[1, 1, 3, 3], &[9., 1., 7., 1., 1., 1., 3., 1., 5.])],
                &[("pool_size", ints(&[2, 2])), ("dilation", ints(&[2, 2]))]
            ),
            (vec![1, 1, 1, 1], vec![9.])
        );
        // Integers: max exactly, average with truncating division.
        let xi = t_of("int32", &[1, 1, 3, 3], &NINE);
        let v = eval("nn.avg_pool2d", from_ref(&xi), &ceil).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [3, 4, 7, 9]);
        let v = eval("nn.global_max_pool2d", &[xi], &[]).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [9]);

        assert_eq!(
            run("nn.global_avg_pool2d", from_ref(&x), &[]),
            (vec![1, 1, 1, 1], vec![5.])
        );
        assert_eq!(
            run("nn.global_max_pool2d", from_ref(&x), &[]),
            (vec![1, 1, 1, 1], vec![9.])
        );
        assert_eq!(
            run(
                "nn.adaptive_avg_pool2d",
                from_ref(&x),
                &[("output_size", ints(&[2, 2]))]
            ),
            (vec![1, 1, 2, 2], vec![3., 4., 6., 7.])
        );
        assert_eq!(
            run(
                "nn.adaptive_avg_pool2d",
                &[x],
                &[("output_size", ints(&[1]))]
            )
            .1,
            [5.]
        );
    }

    #[test]
    fn pools_against_make_expected() {
        let x = t(&[1, 2, 4, 4], &pattern(32, 7, 11, 5.0, 4.0));
        let window = |extra: &[(&'static str, V)]| {
            let mut v = vec![
                ("pool_size", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[1, 1, 1, 1])),
            ];
            v.extend(extra.iter().cloned());
            v
        };
        let (shape, out) = run("nn.avg_pool2d", from_ref(&x), &window(&[]));
        assert_eq!(shape, [1, 2, 2, 2]);
        assert_close(
            &out,
            &[
                -0.3125, 0.25, -0.125, 0.055556, 0.1875, -0.166667, 0.375, -0.055556,
            ],
        );
        let (_, out) = run(
            "nn.avg_pool2d",
            from_ref(&x),
            &window(&[("count_include_pad", V::Bool(true))]),
        );
        assert_close(
            &out,
            &[
                -0.138889, 0.166667, -0.083333, 0.055556, 0.083333, -0.111111, 0.25, -0.055556,
            ],
        );
        let ceil = [
            ("pool_size", ints(&[3, 3])),
            ("strides", ints(&[2, 2])),
            ("ceil_mode", V::Bool(true)),
        ];
        let (shape, out) = run("nn.max_pool2d", from_ref(&x), &ceil);
        assert_eq!(shape, [1, 2, 2, 2]);
        assert_close(&out, &[1., 1.25, 1.25, 1.25, 1.25, 0.5, 1.25, 0.75]);
        let (_, out) = run("nn.avg_pool2d", from_ref(&x), &ceil);
        assert_close(
            &out,
            &[
                -0.138889, 0.041667, 0.125, 0., 0.055556, -0.375, 0.166667, -0.1875,
            ],
        );
        let mut ceil_padded = ceil.to_vec();
        ceil_padded.push(("padding", ints(&[0, 0, 1, 1])));
        ceil_padded.push(("count_include_pad", V::Bool(true)));
        let (_, out) = run("nn.avg_pool2d", from_ref(&x), &ceil_padded);
        assert_close(
            &out,
            &[
                -0.138889, 0.027778, 0.083333, 0., 0.055556, -0.25, 0.111111, -0.083333,
            ],
        );
        let (shape, out) = run(
            "nn.adaptive_avg_pool2d",
            &[x],
            &[("output_size", ints(&[2, 3]))],
        );
        assert_eq!(shape, [1, 2, 2, 3]);
        assert_close(
            &out,
            &[
                -0.3125, 0.0625, 0.4375, -0.0625, 0.3125, 0., 0.1875, -0.125, -0.4375, 0.4375,
                0.125, -0.1875,
            ],
        );
    }

    #[test]
    fn pool2d_compute() {
        let mut rng = Rng(0x5eed_0004);
        let shapes: [&[i64]; 6] = [
            &[1, 1, 1, 1],
            &[1, 2, 5, 4],
            &[2, 1, 3, 7],
            &[1, 1, 4, 4],
            &[1, 1, 0, 3],
            &[0, 2, 3, 3],
        ];
        let sizes: [&[i64]; 4] = [&[1, 1], &[2, 2], &[3, 2], &[1, 3]];
        let strides: [&[i64]; 3] = [&[1, 1], &[2, 1], &[3, 2]];
        let dilations: [&[i64]; 2] = [&[1, 1], &[2, 1]];
        let paddings: [&[i64]; 5] = [&[0], &[1], &[1, 0], &[0, 2], &[2, 1, 0, 1]];
        let mut accepted = [0; 2];
        for (n, name) in ["nn.max_pool2d", "nn.avg_pool2d"].into_iter().enumerate() {
            for dtype in DTYPES {
                for shape in shapes {
                    for _ in 0..12 {
                        let mut set = vec![
                            ("pool_size", ints(pick(&mut rng, &sizes))),
                            ("strides", ints(pick(&mut rng, &strides))),
                            ("dilation", ints(pick(&mut rng, &dilations))),
                            ("padding", ints(pick(&mut rng, &paddings))),
                            ("ceil_mode", V::Bool(rng.below(2) == 1)),
                        ];
                        if n == 1 {
                            set.push(("count_include_pad", V::Bool(rng.below(2) == 1)));
                        }
                        let x = random(&mut rng, dtype, shape);
                        if verify(name, &[x], &attrs(name, &set), exact) {
                            accepted[n] += 1;
                            assert!(dtype != DType::BOOL);
                        }
                    }
                }
            }
        }
        assert!(accepted.iter().all(|&a| a > 300), "{accepted:?}");
        // Ceil mode adding a window past the padding, which counts no tap at all.
        for name in ["nn.max_pool2d", "nn.avg_pool2d"] {
            for include in [false, true] {
                let mut set = vec![
                    ("pool_size", ints(&[1, 1])),
                    ("strides", ints(&[3, 3])),
                    ("padding", ints(&[1])),
                    ("ceil_mode", V::Bool(true)),
                ];
                if name == "nn.avg_pool2d" {
                    set.push(("count_include_pad", V::Bool(include)));
                }
                for dtype in [DType::F32, DType::I32, DType::U8] {
                    let x = random(&mut rng, dtype, &[1, 2, 3, 5]);
                    assert!(verify(name, &[x], &attrs(name, &set), exact));
                }
            }
        }
        // 64-bit integer windows of more than 2^30 taps are refused.
        let a = attrs(
            "nn.avg_pool2d",
            &[
                ("pool_size", ints(&[40000, 40000])),
                ("padding", ints(&[40000])),
            ],
        );
        let x = TV::Tensor(relay_ir::te::Tensor::placeholder(
            "x",
            vec![1, 1, 1, 1],
            DType::I64,
            0,
        ));
        let op = schema("nn.avg_pool2d");
        let out = (op.relation.unwrap())(&[ty(&[1, 1, 1, 1], "int64")], &a).unwrap();
        let err = (op.compute.unwrap())(&[x], &a, &out).unwrap_err();
        assert!(err.to_string().contains("not supported"), "{err}");
    }

    #[test]
    fn global_and_adaptive_pools_compute() {
        let mut rng = Rng(0x5eed_0005);
        let shapes: [&[i64]; 6] = [
            &[1, 1, 1, 1],
            &[1, 2, 5, 7],
            &[2, 1, 3, 3],
            &[1, 1, 0, 2],
            &[0, 1, 2, 2],
            &[2, 3, 4, 1],
        ];
        let sizes: [Option<&[i64]>; 6] = [
            None,
            Some(&[1]),
            Some(&[2, 3]),
            Some(&[3, 2]),
            Some(&[4, 4]),
            Some(&[1, 5]),
        ];
        for dtype in DTYPES {
            for shape in shapes {
                for name in ["nn.global_max_pool2d", "nn.global_avg_pool2d"] {
                    let x = random(&mut rng, dtype, shape);
                    assert_eq!(
                        verify(name, &[x], &attrs(name, &[]), exact),
                        dtype != DType::BOOL
                    );
                }
                for size in sizes {
                    for name in ["nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d"] {
                        let set: Vec<(&str, V)> =
                            size.map(|v| ("output_size", ints(v))).into_iter().collect();
                        let x = random(&mut rng, dtype, shape);
                        assert_eq!(
                            verify(name, &[x], &attrs(name, &set), exact),
                            dtype != DType::BOOL
                        );
                    }
                }
            }
        }
        // An output size with a null entry keeps the input's extent.
        let set = [("output_size", V::Array(vec![V::Int(2), V::Null]))];
        for name in ["nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d"] {
            let x = random(&mut rng, DType::F32, &[1, 1, 5, 3]);
            assert!(verify(name, &[x], &attrs(name, &set), exact));
        }
    }

    #[test]
    fn adaptive_max_pool2d_compute_on_random_shapes() {
        let mut rng = Rng(0x5eed_0006);
        let name = "nn.adaptive_max_pool2d";
        for dtype in DTYPES {
            for _ in 0..8 {
                let shape: Vec<i64> = [3, 3, 9, 9]
                    .iter()
                    .map(|&n| rng.below(n) as i64 + 1)
                    .collect();
                let size = [rng.below(6) as i64 + 1, rng.below(6) as i64 + 1];
                let x = random(&mut rng, dtype, &shape);
                let set = [("output_size", ints(&size))];
                assert_eq!(
                    verify(name, &[x], &attrs(name, &set), exact),
                    dtype != DType::BOOL
                );
            }
        }
    }

    #[test]
    fn adaptive_max_pool2d_skips_nan_and_keeps_windows() {
        let op = schema("nn.adaptive_max_pool2d");
        let compute = op.compute.unwrap();
        let set = attrs("nn.adaptive_max_pool2d", &[("output_size", ints(&[2, 2]))]);
        let nan = f64::NAN;
        // Rows 0..2 and 1..3, columns likewise: a NaN is skipped, an all-NaN window is -inf.
        let x = NDArray::from_f64_slice(
            DType::F32,
            &[1, 1, 3, 3],
            &[1., nan, 3., 4., 5., nan, nan, 8., 2.],
        )
        .unwrap();
        let out = (op.relation.unwrap())(&[ty(&[1, 1, 3, 3], "float32")], &set).unwrap();
        let placeholders = crate::compute::op_tests::placeholders(from_ref(&x));
        let te = compute(&placeholders, &set, &out).unwrap();
        let got = Interp::new(from_ref(&x))
            .tensor(te.as_tensor().unwrap())
            .unwrap();
        assert_eq!(got.shape(), [1, 1, 2, 2]);
        assert_eq!(got.to_f64_vec(), [5., 5., 8., 8.]);
        let all_nan = NDArray::from_f64_slice(DType::F32, &[1, 1, 3, 3], &[nan; 9]).unwrap();
        let got = Interp::new(from_ref(&all_nan))
            .tensor(te.as_tensor().unwrap())
            .unwrap();
        assert_eq!(got.to_f64_vec(), [f64::NEG_INFINITY; 4]);
        assert!(verify("nn.adaptive_max_pool2d", from_ref(&x), &set, exact));
        // A blocked layout that does not fit the data is a typed error, not a panic.
        let blocked = attrs(
            "nn.adaptive_max_pool2d",
            &[("output_size", ints(&[2, 2])), ("layout", s("NCHW4c"))],
        );
        let err = compute(&placeholders, &blocked, &out).unwrap_err();
        assert!(
            err.to_string()
                .contains("the data has 4 dimensions, but layout has 5 axes"),
            "{err}"
        );
    }

    #[test]
    fn averages_of_64_bit_integers_are_exact() {
        // Sums beyond 64 bits, negative quotients with and without remainders, empty windows.
        let max = i128::from(i64::MAX);
        let planes: [&[i128]; 6] = [
            &[max, max, max, 1],
            &[-max - 1, -max - 1, -max - 1, -1],
            &[-7, 0, 0, 0],
            &[-8, 0, 0, 0],
            &[max, -max - 1, 5, -6],
            &[
                i128::from(u64::MAX),
                i128::from(u64::MAX),
                i128::from(u64::MAX),
                2,
            ],
        ];
        for dtype in [DType::I64, DType::U64] {
            let values: Vec<i128> = planes.iter().flat_map(|p| p.iter().copied()).collect();
            let x = NDArray::from_i128_slice(dtype, &[1, 6, 2, 2], &values).unwrap();
            let none = attrs("nn.global_avg_pool2d", &[]);
            assert!(verify("nn.global_avg_pool2d", from_ref(&x), &none, exact));
            let sizes = [("output_size", ints(&[1, 2]))];
            let a = attrs("nn.adaptive_avg_pool2d", &sizes);
            assert!(verify("nn.adaptive_avg_pool2d", from_ref(&x), &a, exact));
            for include in [false, true] {
                let a = attrs(
                    "nn.avg_pool2d",
                    &[
                        ("pool_size", ints(&[2, 2])),
                        ("padding", ints(&[1])),
                        ("strides", ints(&[2, 1])),
                        ("count_include_pad", V::Bool(include)),
                    ],
                );
                assert!(verify("nn.avg_pool2d", from_ref(&x), &a, exact));
            }
        }
    }
}
