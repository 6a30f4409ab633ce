//! Operators whose result shape depends on values (reference §14.6): the `dyn.*` twins of the
//! shape operators, `arange` and `argwhere`.
//!
//! A `dyn.*` operator is its static twin with the shape-like attribute made an input (TVM's
//! `dyn.reshape(data, newshape)` for `reshape(data, newshape=[...])`). Its relation knows the
//! result's rank from that input's static length, and a dimension only where the data fixes
//! it (`?` elsewhere). At run time the call is [`resolve`]d for the input's values to the static
//! twin and its attributes: the reference evaluation runs the twin's evaluation, and the
//! kernels take the twin's relation on the arguments' shapes as the shape function (TVM's
//! data-dependent `shape_func`). `arange` of non-constant bounds and `argwhere` have no twin;
//! [`arange`] and [`arange_length`] serve the evaluation and the kernels alike.

use std::sync::Arc;

use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, AttrValue, Attrs, DType, Dim, NDArray, OpError,
    OpPattern as P, OpRef, OpSchema, Symbol, Type, Value,
};

use crate::support::{
    arg_tensor, attr_dtype, attr_int, element_count, inputs_n, required_dtype, tensor, tensor_type,
    value,
};
use crate::transform::SQUEEZE_ATTRS;
use crate::{dtype, field, nullable, op, plain};

/// The most elements a value-shaped result may have (as the importer's limit).
const MAX_ELEMENTS: i128 = 1 << 48;

/// `InitOpAttrs` of the twins, whose shape is an input (`None`, TVM's value, by default).
const INIT_ATTRS: &[AttrField] = &[nullable("shape", K::IntArray), dtype("dtype")];

/// `StridedSliceAttrs` of `dyn.strided_slice`: the indices are inputs.
const SLICE_ATTRS: &[AttrField] = &[
    nullable("begin", K::IntArray),
    nullable("end", K::IntArray),
    nullable("strides", K::IntArray),
    field("slice_mode", K::Str, D::Str("end")),
    nullable("axes", K::IntArray),
];

/// The operators of this module.
pub(crate) static OPS: &[OpSchema] = &[
    op(
        "dyn.reshape",
        &["data", "newshape"],
        "relay.attrs.ReshapeAttrs",
        &[
            nullable("newshape", K::IntArray),
            field("allowzero", K::Bool, D::Bool(false)),
        ],
    )
    .with(P::Opaque, reshape_rel, |a, t| eval("dyn.reshape", a, t)),
    op(
        "dyn.broadcast_to",
        &["data", "broadcast_shape"],
        "relay.attrs.InitOpAttrs",
        INIT_ATTRS,
    )
    .with(P::Opaque, broadcast_to_rel, |a, t| {
        eval("dyn.broadcast_to", a, t)
    }),
    op(
        "dyn.zeros",
        &["shape"],
        "relay.attrs.InitOpAttrs",
        INIT_ATTRS,
    )
    .with(P::Opaque, init_rel, |a, t| eval("dyn.zeros", a, t)),
    op(
        "dyn.ones",
        &["shape"],
        "relay.attrs.InitOpAttrs",
        INIT_ATTRS,
    )
    .with(P::Opaque, init_rel, |a, t| eval("dyn.ones", a, t)),
    op(
        "dyn.full",
        &["fill_value", "shape"],
        "relay.attrs.InitOpAttrs",
        INIT_ATTRS,
    )
    .with(P::Opaque, full_rel, |a, t| eval("dyn.full", a, t)),
    op(
        "dyn.expand_dims",
        &["data", "axis"],
        "relay.attrs.DynExpandDimsAttrs",
        &[field("num_newaxis", K::Int, D::Int(1))],
    )
    .with(P::Opaque, expand_dims_rel, |a, t| {
        eval("dyn.expand_dims", a, t)
    }),
    op(
        "dyn.squeeze",
        &["data", "axis"],
        "relay.attrs.SqueezeAttrs",
        SQUEEZE_ATTRS,
    )
    .with(P::Opaque, squeeze_rel, |a, t| eval("dyn.squeeze", a, t)),
    op(
        "dyn.strided_slice",
        &["data", "begin", "end", "strides"],
        "relay.attrs.StridedSliceAttrs",
        SLICE_ATTRS,
    )
    .with(P::Opaque, strided_slice_rel, |a, t| {
        eval("dyn.strided_slice", a, t)
    }),
    op(
        "dyn.tile",
        &["data", "reps"],
        "relay.attrs.TileAttrs",
        &[nullable("reps", K::IntArray)],
    )
    .with(P::Opaque, tile_rel, |a, t| eval("dyn.tile", a, t)),
    // TVM's `ArangeAttrs` duplicates the inputs as `Expr` fields, which it prints as meta
    // references; a number there makes the length static.
    op(
        "arange",
        &["start", "stop", "step"],
        "relay.attrs.ArangeAttrs",
        &[
            nullable("start", K::Any),
            nullable("stop", K::Any),
            nullable("step", K::Any),
            dtype("dtype"),
        ],
    )
    .with(P::Opaque, arange_rel, arange_eval),
    plain("argwhere", &["condition"]).with(P::Opaque, argwhere_rel, argwhere_eval),
];

/// Whether `op` is one whose result shape its input values decide (this module's).
pub fn is_value_shaped(op: OpRef) -> bool {
    OPS.iter().any(|o| std::ptr::eq(o, op))
}

/// A `dyn.*` call resolved for its inputs' values: the static twin, its attributes, and which
/// of the call's inputs it takes (in order).
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The static operator (`reshape` for `dyn.reshape`).
    pub op: OpRef,
    /// Its attributes, the values filled in.
    pub attrs: Attrs,
    /// The call's inputs that stay inputs of the twin.
    pub data: &'static [usize],
}

/// The inputs of a `dyn.*` operator that it reads as values.
pub fn value_inputs(name: &str) -> &'static [usize] {
    match name {
        "dyn.zeros" | "dyn.ones" => &[0],
        "dyn.strided_slice" => &[1, 2, 3],
        "dyn.reshape" | "dyn.broadcast_to" | "dyn.full" | "dyn.expand_dims" | "dyn.squeeze"
        | "dyn.tile" => &[1],
        _ => &[],
    }
}

/// `dyn.*` call `name` with attributes `attrs` as its static twin, `values(i)` being the
/// integer values of input `i` (its elements, row-major).
pub fn resolve(
    name: &str,
    attrs: &Attrs,
    values: &dyn Fn(usize) -> Result<Vec<i64>, OpError>,
) -> Result<Resolved, OpError> {
    let ints = |i: usize| -> Result<AttrValue, OpError> {
        Ok(AttrValue::Array(
            values(i)?.into_iter().map(AttrValue::Int).collect(),
        ))
    };
    let (twin, data, attrs): (&str, &'static [usize], Attrs) = match name {
        "dyn.reshape" => ("reshape", &[0], attrs.with("newshape", ints(1)?)),
        "dyn.broadcast_to" => ("broadcast_to", &[0], attrs.with("shape", ints(1)?)),
        "dyn.zeros" => ("zeros", &[], attrs.with("shape", ints(0)?)),
        "dyn.ones" => ("ones", &[], attrs.with("shape", ints(0)?)),
        "dyn.full" => ("full", &[0], attrs.with("shape", ints(1)?)),
        "dyn.tile" => ("tile", &[0], attrs.with("reps", ints(1)?)),
        "dyn.squeeze" => ("squeeze", &[0], attrs.with("axis", ints(1)?)),
        "dyn.expand_dims" => {
            let axis = match values(1)?.as_slice() {
                [a] => *a,
                other => {
                    return Err(OpError::value(format!(
                        "the axis must be one integer, got {other:?}"
                    )));
                }
            };
            (
                "expand_dims",
                &[0],
                attrs.with("axis", AttrValue::Int(axis)),
            )
        }
        "dyn.strided_slice" => {
            let attrs = attrs
                .with("begin", ints(1)?)
                .with("end", ints(2)?)
                .with("strides", ints(3)?);
            ("strided_slice", &[0], attrs)
        }
        other => {
            return Err(OpError::unsupported(format!(
                "`{other}` has no static twin"
            )));
        }
    };
    let op =
        crate::lookup(twin).ok_or_else(|| OpError::unsupported(format!("no operator `{twin}`")))?;
    // Every field of the twin, in its declaration order (as the parser stores a call's).
    let attrs = Attrs::new(
        op.attrs
            .iter()
            .map(|f| {
                let v = attrs.get(f.name).cloned().or_else(|| f.default.value());
                (Symbol::intern(f.name), v.unwrap_or(AttrValue::Null))
            })
            .collect(),
    );
    Ok(Resolved { op, attrs, data })
}

impl Resolved {
    /// The result's shape for data inputs (the twin's, in order) of `types`: the twin's
    /// relation, which on static types is its shape function. An error when the values do
    /// not fit the data, or the result is too large.
    pub fn output_shape(&self, types: &[Type]) -> Result<Vec<i64>, OpError> {
        let relation = self
            .op
            .relation
            .ok_or_else(|| OpError::unsupported(format!("`{}` has no relation", self.op.name)))?;
        let ty = relation(types, &self.attrs)?;
        let (shape, _) = tensor_type(&ty, "the result")?;
        let known = crate::support::known(shape).ok_or_else(|| {
            OpError::shape(format!("`{}` left a dimension unknown", self.op.name))
        })?;
        checked_count(&known)?;
        Ok(known)
    }
}

/// An error when a result of `shape` has more elements than [`MAX_ELEMENTS`].
fn checked_count(shape: &[i64]) -> Result<(), OpError> {
    let dims: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
    match element_count(&dims) {
        Some(n) if n < MAX_ELEMENTS => Ok(()),
        _ => Err(OpError::value(format!(
            "a result of shape {shape:?} is too large"
        ))),
    }
}

// ----- Type relations -----

/// The static length of a shape-like input: a vector of integers (a scalar counts as one).
fn shape_length(ty: &Type, what: &str) -> Result<usize, OpError> {
    let (shape, dtype) = tensor_type(ty, what)?;
    if !dtype.is_int() {
        return Err(OpError::dtype(format!(
            "{what} must hold integers, got `{ty}`"
        )));
    }
    match shape {
        [] => Ok(1),
        [Dim::Known(n)] => Ok(*n as usize),
        _ => Err(OpError::shape(format!(
            "{what} must be a vector of static length, got `{ty}`"
        ))),
    }
}

fn reshape_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data, newshape] = inputs_n(inputs)?;
    let (_, dtype) = tensor_type(data, "the data")?;
    let rank = shape_length(newshape, "the new shape")?;
    Ok(tensor(vec![Dim::Any; rank], dtype))
}

/// The data's dimensions right-aligned in a result of rank `rank`: a dimension other than 1
/// stays (a broadcast keeps it), any other is `?`.
fn broadcast_dims(data: &[Dim], rank: usize) -> Result<Vec<Dim>, OpError> {
    if data.len() > rank {
        return Err(OpError::shape(format!(
            "cannot broadcast rank {} to rank {rank}",
            data.len()
        )));
    }
    let mut out = vec![Dim::Any; rank - data.len()];
    out.extend(data.iter().map(|&d| match d {
        Dim::Known(n) if n != 1 => d,
        _ => Dim::Any,
    }));
    Ok(out)
}

fn broadcast_to_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data, shape] = inputs_n(inputs)?;
    let (dims, dtype) = tensor_type(data, "the data")?;
    let rank = shape_length(shape, "the shape")?;
    Ok(tensor(broadcast_dims(dims, rank)?, dtype))
}

fn init_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [shape] = inputs_n(inputs)?;
    let rank = shape_length(shape, "the shape")?;
    Ok(tensor(vec![Dim::Any; rank], required_dtype(attrs)?))
}

fn full_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [fill, shape] = inputs_n(inputs)?;
    let (fill_shape, fill_dtype) = tensor_type(fill, "the fill value")?;
    if !fill_shape.is_empty() {
        return Err(OpError::shape(format!(
            "the fill value must be a scalar, got `{fill}`"
        )));
    }
    let rank = shape_length(shape, "the shape")?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(fill_dtype);
    Ok(tensor(vec![Dim::Any; rank], dtype))
}

fn expand_dims_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data, axis] = inputs_n(inputs)?;
    let (dims, dtype) = tensor_type(data, "the data")?;
    if shape_length(axis, "the axis")? != 1 {
        return Err(OpError::shape(format!(
            "the axis must be one integer, got `{axis}`"
        )));
    }
    let added = attr_int(attrs, "num_newaxis")?;
    let added = usize::try_from(added).map_err(|_| {
        OpError::attribute(
            "num_newaxis",
            format!("`num_newaxis` must be >= 0, got {added}"),
        )
    })?;
    Ok(tensor(vec![Dim::Any; dims.len() + added], dtype))
}

fn squeeze_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data, axis] = inputs_n(inputs)?;
    let (dims, dtype) = tensor_type(data, "the data")?;
    let dropped = shape_length(axis, "the axes")?;
    let rank = dims
        .len()
        .checked_sub(dropped)
        .ok_or_else(|| OpError::shape(format!("cannot drop {dropped} axes of `{data}`")))?;
    Ok(tensor(vec![Dim::Any; rank], dtype))
}

fn strided_slice_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data, begin, end, strides] = inputs_n(inputs)?;
    let (dims, dtype) = tensor_type(data, "the data")?;
    let n = shape_length(begin, "the begin indices")?;
    shape_length(end, "the end indices")?;
    shape_length(strides, "the strides")?;
    let mut out = dims.to_vec();
    match crate::support::attr_opt_ints(attrs, "axes")? {
        Some(axes) => {
            for a in axes {
                let axis = crate::support::axis_index(a, dims.len())?;
                out[axis] = Dim::Any;
            }
        }
        None => {
            for d in out.iter_mut().take(n) {
                *d = Dim::Any;
            }
        }
    }
    Ok(tensor(out, dtype))
}

fn tile_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data, reps] = inputs_n(inputs)?;
    let (dims, dtype) = tensor_type(data, "the data")?;
    let n = shape_length(reps, "the repeats")?;
    Ok(tensor(vec![Dim::Any; n.max(dims.len())], dtype))
}

fn arange_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let dtype = required_dtype(attrs)?;
    for (ty, what) in inputs.iter().zip(["start", "stop", "step"]) {
        let (shape, d) = tensor_type(ty, what)?;
        if !shape.is_empty() || d != dtype {
            return Err(OpError::type_error(format!(
                "`{what}` must be a scalar of the result's dtype {dtype}, got `{ty}`"
            )));
        }
    }
    inputs_n::<3>(inputs)?;
    // Numbers in the attributes (rather than expressions) make the length static.
    let number = |name: &str| {
        attrs
            .get(name)
            .and_then(|v| v.as_float().or_else(|| v.as_int().map(|i| i as f64)))
    };
    let length = match (number("start"), number("stop"), number("step")) {
        (Some(a), Some(b), Some(s)) => {
            let scalar = |v: f64| NDArray::scalar_f64(dtype, v).map_err(OpError::from_runtime);
            Dim::Known(arange_length(&scalar(a)?, &scalar(b)?, &scalar(s)?)?)
        }
        _ => Dim::Any,
    };
    Ok(tensor(vec![length], dtype))
}

fn argwhere_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [condition] = inputs_n(inputs)?;
    let (dims, _) = tensor_type(condition, "the condition")?;
    Ok(tensor(
        vec![Dim::Any, Dim::Known(dims.len() as i64)],
        DType::I32,
    ))
}

// ----- Reference evaluation -----

/// The integer elements of tensor argument `i`.
fn int_values(args: &[Value], i: usize) -> Result<Vec<i64>, OpError> {
    let t = arg_tensor(args, i)?;
    if !t.dtype().is_int() {
        return Err(OpError::dtype(format!(
            "argument {i} must hold integers, got {}",
            t.dtype()
        )));
    }
    t.to_i128_vec()
        .into_iter()
        .map(|v| i64::try_from(v).map_err(|_| OpError::value(format!("{v} is out of range"))))
        .collect()
}

/// The evaluation of `dyn.*` operator `name`: its twin's, for the arguments' values.
fn eval(name: &str, args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let r = resolve(name, attrs, &|i| int_values(args, i))?;
    let eval =
        r.op.eval
            .ok_or_else(|| OpError::unsupported(format!("`{}` has no evaluation", r.op.name)))?;
    let data: Vec<Value> = r
        .data
        .iter()
        .map(|&i| args.get(i).cloned())
        .collect::<Option<_>>()
        .ok_or_else(|| OpError::arity(value_inputs(name).len() + r.data.len(), args.len()))?;
    // The twin's shape is checked for size before anything is allocated.
    let types: Vec<Type> = data
        .iter()
        .map(|v| match v {
            Value::Tensor(t) => Ok(Type::tensor(t.shape(), t.dtype())),
            _ => Err(OpError::type_error("a tensor argument")),
        })
        .collect::<Result<_, _>>()?;
    r.output_shape(&types)?;
    eval(&data, &r.attrs)
}

/// The shape of the result of value-shaped operator `name` on `args`, computed without
/// evaluating it (so a caller can refuse a large result first).
pub fn result_shape(name: &str, attrs: &Attrs, args: &[Value]) -> Result<Vec<i64>, OpError> {
    match name {
        "arange" => {
            let [a, b, s] = [0, 1, 2].map(|i| arg_tensor(args, i));
            Ok(vec![arange_length(a?, b?, s?)?])
        }
        "argwhere" => {
            let t = arg_tensor(args, 0)?;
            let count = match t.dtype().is_float() {
                true => t.to_f64_vec().iter().filter(|&&v| v != 0.0).count(),
                false => t.to_i128_vec().iter().filter(|&&v| v != 0).count(),
            };
            Ok(vec![count as i64, t.ndim() as i64])
        }
        _ => {
            let r = resolve(name, attrs, &|i| int_values(args, i))?;
            let types = r
                .data
                .iter()
                .map(|&i| match args.get(i) {
                    Some(Value::Tensor(t)) => Ok(Type::tensor(t.shape(), t.dtype())),
                    _ => Err(OpError::type_error("a tensor argument")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            r.output_shape(&types)
        }
    }
}

/// The number of elements of `arange(start, stop, step)`: `ceil((stop - start) / step)`, at
/// least 0, exact for integers; an error for a zero step or a length past the limit.
pub fn arange_length(start: &NDArray, stop: &NDArray, step: &NDArray) -> Result<i64, OpError> {
    let n = if start.dtype().is_int() {
        let [a, b, s] = [start, stop, step].map(|t| t.to_i128_vec().first().copied().unwrap_or(0));
        if s == 0 {
            return Err(OpError::value("`arange` with a step of 0"));
        }
        let span = b - a;
        let q = span / s;
        let n = if span % s != 0 && (span < 0) == (s < 0) {
            q + 1
        } else {
            q
        };
        n.max(0)
    } else {
        let [a, b, s] = [start, stop, step].map(|t| t.to_f64_vec().first().copied().unwrap_or(0.0));
        if s == 0.0 {
            return Err(OpError::value("`arange` with a step of 0"));
        }
        let n = ((b - a) / s).ceil();
        if n.is_nan() {
            return Err(OpError::value(format!(
                "`arange({a}, {b}, {s})` has no length"
            )));
        }
        n.clamp(0.0, MAX_ELEMENTS as f64) as i128
    };
    if n >= MAX_ELEMENTS {
        return Err(OpError::value(format!(
            "`arange` of {n} elements is too large"
        )));
    }
    Ok(n as i64)
}

/// `arange(start, stop, step)` in the scalars' dtype: element `i` is `start + i * step`,
/// computed exactly for integers (wrapping into the dtype) and in `f64`, rounded once, for
/// floats.
pub fn arange(start: &NDArray, stop: &NDArray, step: &NDArray) -> Result<NDArray, OpError> {
    let n = arange_length(start, stop, step)?;
    let dtype = start.dtype();
    let array = if dtype.is_int() {
        let [a, s] = [start, step].map(|t| t.to_i128_vec().first().copied().unwrap_or(0));
        let values: Vec<i128> = (0..i128::from(n)).map(|i| a + i * s).collect();
        NDArray::from_i128_slice(dtype, &[n], &values)
    } else {
        let [a, s] = [start, step].map(|t| t.to_f64_vec().first().copied().unwrap_or(0.0));
        let values: Vec<f64> = (0..n).map(|i| a + i as f64 * s).collect();
        NDArray::from_f64_slice(dtype, &[n], &values)
    };
    array.map_err(OpError::from_runtime)
}

fn arange_eval(args: &[Value], _: &Attrs) -> Result<Value, OpError> {
    let [a, b, s] = [0, 1, 2].map(|i| arg_tensor(args, i));
    value(arange(a?, b?, s?))
}

/// The row-major positions of the non-zero elements of `condition` (NaN counts as non-zero),
/// as an `int32` tensor `[count, rank]`.
fn argwhere_eval(args: &[Value], _: &Attrs) -> Result<Value, OpError> {
    let t: &Arc<NDArray> = arg_tensor(args, 0)?;
    let rank = t.ndim();
    let nonzero: Vec<bool> = match t.dtype().is_float() {
        true => t.to_f64_vec().iter().map(|&v| v != 0.0).collect(),
        false => t.to_i128_vec().iter().map(|&v| v != 0).collect(),
    };
    let strides = crate::support::strides(t.shape());
    let mut out = Vec::new();
    for (flat, _) in nonzero.iter().enumerate().filter(|(_, nz)| **nz) {
        let mut rest = flat as i64;
        for &s in &strides {
            out.push(i128::from(rest / s.max(1)));
            rest %= s.max(1);
        }
    }
    let count = nonzero.iter().filter(|&&b| b).count();
    value(NDArray::from_i128_slice(
        DType::I32,
        &[count as i64, rank as i64],
        &out,
    ))
}

#[cfg(test)]
mod tests {
    use relay_ir::{AttrValue, DType, Dim, NDArray, Type, Value};

    use crate::testing::attrs;

    fn rel(
        op: &str,
        inputs: &[Type],
        set: &[(&str, AttrValue)],
    ) -> Result<Type, relay_ir::OpError> {
        let schema = crate::lookup(op).unwrap();
        (schema.relation.unwrap())(inputs, &attrs(op, set))
    }

    fn eval(
        op: &str,
        args: &[NDArray],
        set: &[(&str, AttrValue)],
    ) -> Result<NDArray, relay_ir::OpError> {
        let schema = crate::lookup(op).unwrap();
        let args: Vec<Value> = args.iter().cloned().map(Value::tensor).collect();
        match (schema.eval.unwrap())(&args, &attrs(op, set))? {
            Value::Tensor(t) => Ok((*t).clone()),
            _ => panic!("not a tensor"),
        }
    }

    fn ints(shape: &[i64], v: &[i128]) -> NDArray {
        NDArray::from_i128_slice(DType::I64, shape, v).unwrap()
    }

    fn t(shape: &[i64], dtype: DType) -> Type {
        Type::tensor(shape, dtype)
    }

    #[test]
    fn relations_know_the_rank_from_the_shape_input_and_keep_what_the_data_fixes() {
        let x = t(&[1, 5], DType::F32);
        let shape3 = t(&[3], DType::I64);
        let got = rel("dyn.reshape", &[x.clone(), shape3.clone()], &[]).unwrap();
        assert_eq!(got.to_string(), "Tensor[(?, ?, ?), float32]");
        // A data dimension other than 1 survives a broadcast.
        let got = rel("dyn.broadcast_to", &[x.clone(), shape3.clone()], &[]).unwrap();
        assert_eq!(got.to_string(), "Tensor[(?, ?, 5), float32]");
        let got = rel("argwhere", std::slice::from_ref(&x), &[]).unwrap();
        assert_eq!(got.to_string(), "Tensor[(?, 2), int32]");
        // A shape of unknown length, or of floats, is an error.
        assert!(
            rel(
                "dyn.zeros",
                &[crate::support::tensor(vec![Dim::Any], DType::I64)],
                &[("dtype", AttrValue::Str("float32".into()))]
            )
            .is_err()
        );
        assert!(rel("dyn.tile", &[x.clone(), t(&[2], DType::F32)], &[]).is_err());
        // `arange`'s scalars must be of its dtype; numbers in the attributes fix its length.
        let s = t(&[], DType::I64);
        let dtype = ("dtype", AttrValue::Str("int64".into()));
        assert!(
            rel(
                "arange",
                &[s.clone(), t(&[], DType::I32), s.clone()],
                std::slice::from_ref(&dtype)
            )
            .is_err()
        );
        let got = rel(
            "arange",
            &[s.clone(), s.clone(), s.clone()],
            std::slice::from_ref(&dtype),
        )
        .unwrap();
        assert_eq!(got.to_string(), "Tensor[(?), int64]");
        let numbers = [
            ("start", AttrValue::Int(1)),
            ("stop", AttrValue::Int(10)),
            ("step", AttrValue::Int(3)),
            dtype,
        ];
        let got = rel("arange", &[s.clone(), s.clone(), s], &numbers).unwrap();
        assert_eq!(got.to_string(), "Tensor[(3), int64]");
    }

    #[test]
    fn evaluations_are_the_static_twins_for_the_values() {
        let x = NDArray::from_f64_slice(DType::F32, &[2, 3], &[1., 2., 3., 4., 5., 6.]).unwrap();
        let y = eval("dyn.reshape", &[x.clone(), ints(&[2], &[3, -1])], &[]).unwrap();
        assert_eq!(y.shape(), &[3, 2]);
        let y = eval("dyn.tile", &[x.clone(), ints(&[2], &[2, 1])], &[]).unwrap();
        assert_eq!(y.shape(), &[4, 3]);
        assert_eq!(y.to_f64_vec()[6..], [1., 2., 3., 4., 5., 6.]);
        let y = eval(
            "dyn.strided_slice",
            &[
                x.clone(),
                ints(&[2], &[1, -1]),
                ints(&[2], &[2, -4]),
                ints(&[2], &[1, -1]),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(y.to_f64_vec(), [6., 5., 4.]);
        // Values that do not fit the data are errors, not panics.
        assert!(eval("dyn.reshape", &[x.clone(), ints(&[2], &[4, -1])], &[]).is_err());
        assert!(eval("dyn.broadcast_to", &[x.clone(), ints(&[2], &[2, 4])], &[]).is_err());
        assert!(
            eval(
                "dyn.zeros",
                &[ints(&[2], &[1 << 40, 1 << 40])],
                &[("dtype", AttrValue::Str("int8".into()))]
            )
            .is_err()
        );
        assert!(eval("dyn.tile", &[x, ints(&[2], &[-1, 1])], &[]).is_err());
    }

    #[test]
    fn arange_counts_like_numpy_and_argwhere_lists_positions() {
        let s = |v: i128| NDArray::scalar_i128(DType::I64, v).unwrap();
        let f = |v: f64| NDArray::scalar_f64(DType::F32, v).unwrap();
        assert_eq!(super::arange_length(&s(0), &s(10), &s(3)).unwrap(), 4);
        assert_eq!(super::arange_length(&s(10), &s(0), &s(-3)).unwrap(), 4);
        assert_eq!(super::arange_length(&s(5), &s(0), &s(1)).unwrap(), 0);
        assert_eq!(super::arange_length(&f(0.5), &f(2.0), &f(0.25)).unwrap(), 6);
        assert!(super::arange_length(&s(0), &s(1), &s(0)).is_err());
        assert!(super::arange_length(&f(0.0), &f(1e30), &f(1.0)).is_err());
        let c = NDArray::from_f64_slice(DType::F32, &[2, 2], &[0., f64::NAN, -0., 2.]).unwrap();
        let y = eval("argwhere", &[c], &[]).unwrap();
        assert_eq!(y.shape(), &[2, 2]);
        assert_eq!(y.to_i128_vec(), [0, 1, 1, 1]);
    }
}
