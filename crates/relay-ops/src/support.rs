//! Helpers shared by the operator families' type relations and reference evaluations: reading
//! tensor types, numpy broadcasting, axes, typed attribute access, arguments and row-major
//! index arithmetic. Messages follow the project's style (lowercase, no final period) and name
//! what was expected and what was given.

use relay_ir::OpError;
use std::sync::Arc;

use relay_ir::{AttrValue, Attrs, DType, Dim, NDArray, Type, TypeKind, Value};

/// The shape and dtype of a tensor type, or an error naming what the input is instead.
pub fn tensor_type<'t>(t: &'t Type, what: &str) -> Result<(&'t [Dim], DType), OpError> {
    match t.kind() {
        TypeKind::Tensor { shape, dtype } => Ok((shape, *dtype)),
        _ => Err(OpError::type_error(format!(
            "{what} must be a tensor, got `{t}`"
        ))),
    }
}

/// The tensor types inside a tuple type (for `concatenate`, `stack`).
pub fn tuple_of_tensors<'t>(t: &'t Type, what: &str) -> Result<Vec<(&'t [Dim], DType)>, OpError> {
    match t.kind() {
        TypeKind::Tuple(fields) => fields.iter().map(|f| tensor_type(f, what)).collect(),
        _ => Err(OpError::type_error(format!(
            "{what} must be a tuple of tensors, got `{t}`"
        ))),
    }
}

/// A tensor type.
pub fn tensor(shape: Vec<Dim>, dtype: DType) -> Type {
    Type::from_kind(TypeKind::Tensor { shape, dtype })
}

/// A tensor type with known dimensions.
pub fn tensor_of(shape: &[i64], dtype: DType) -> Type {
    Type::tensor(shape, dtype)
}

/// Known dimensions as `Dim`s.
pub fn dims(shape: &[i64]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// A dimension as the text format writes it: its size, or `?`.
pub fn dim_text(d: Dim) -> String {
    match d {
        Dim::Known(n) => n.to_string(),
        Dim::Any => "?".to_owned(),
    }
}

/// Text of a shape as the text format writes it, e.g. `(2, ?, 3)`.
pub fn shape_text(shape: &[Dim]) -> String {
    let dims: Vec<String> = shape.iter().map(|&d| dim_text(d)).collect();
    format!("({})", dims.join(", "))
}

/// Numpy broadcasting of two shapes (`?` broadcasts with anything, staying `?` unless the
/// other side is a known dimension other than 1).
pub fn broadcast_shapes(a: &[Dim], b: &[Dim]) -> Option<Vec<Dim>> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            Dim::Known(1)
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            Dim::Known(1)
        };
        out.push(match (da, db) {
            (Dim::Known(x), Dim::Known(y)) if x == y => Dim::Known(x),
            (Dim::Known(1), d) | (d, Dim::Known(1)) => d,
            (Dim::Any, Dim::Known(n)) | (Dim::Known(n), Dim::Any) => Dim::Known(n),
            (Dim::Any, Dim::Any) => Dim::Any,
            _ => return None,
        });
    }
    Some(out)
}

/// The two input types of a binary broadcasting operator with equal dtypes, broadcast.
pub fn broadcast_types(inputs: &[Type]) -> Result<(Vec<Dim>, DType), OpError> {
    let [a, b] = inputs_n(inputs)?;
    let (sa, da) = tensor_type(a, "the first input")?;
    let (sb, db) = tensor_type(b, "the second input")?;
    if da != db {
        return Err(OpError::dtype(format!(
            "input dtypes differ: `{a}` and `{b}`"
        )));
    }
    let shape = broadcast_shapes(sa, sb)
        .ok_or_else(|| OpError::shape(format!("cannot broadcast `{a}` with `{b}`")))?;
    Ok((shape, da))
}

// ----- Arity, axes and element counts -----

/// The input types of a relation, which must be exactly `N`.
pub fn inputs_n<const N: usize>(inputs: &[Type]) -> Result<&[Type; N], OpError> {
    inputs
        .try_into()
        .map_err(|_| OpError::arity(N, inputs.len()))
}

/// Checks that a relation has exactly `count` input types.
pub fn expect_inputs(inputs: &[Type], count: usize) -> Result<(), OpError> {
    if inputs.len() == count {
        Ok(())
    } else {
        Err(OpError::arity(count, inputs.len()))
    }
}

/// A possibly negative axis of a tensor of `rank` dimensions, made non-negative (a rank-0
/// tensor has no axis).
pub fn axis_index(axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    let a = if axis < 0 {
        axis.saturating_add(r)
    } else {
        axis
    };
    if a < 0 || a >= r {
        return Err(OpError::shape(format!(
            "axis {axis} is out of range for a tensor of rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// A possibly negative axis made non-negative for a tensor of `rank` dimensions, as
/// [`axis_index`] does, except that a rank-0 tensor accepts axis 0 (the operators that work
/// along one axis treat a scalar as a single element).
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize, OpError> {
    if rank == 0 && axis == 0 {
        return Ok(0);
    }
    axis_index(axis, rank)
}

/// An insertion position for a new axis in a tensor of `rank` dimensions: `-rank - 1..=rank`,
/// negative positions counting from the end of the result.
pub fn insert_index(axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    let a = if axis < 0 {
        axis.saturating_add(r + 1)
    } else {
        axis
    };
    if a < 0 || a > r {
        return Err(OpError::shape(format!(
            "axis {axis} is out of range for inserting into a tensor of rank {rank}"
        )));
    }
    Ok(a as usize)
}

/// The number of elements of `shape`, if every dimension is known (and the product fits).
pub fn element_count(shape: &[Dim]) -> Option<i128> {
    shape.iter().try_fold(1i128, |n, d| match d {
        Dim::Known(k) => n.checked_mul(i128::from(*k)),
        Dim::Any => None,
    })
}

// ----- Attributes -----

fn attr<'a>(attrs: &'a Attrs, name: &str) -> Result<&'a AttrValue, OpError> {
    attrs
        .get(name)
        .ok_or_else(|| OpError::attribute(name, format!("attribute `{name}` is missing")))
}

/// An integer attribute.
pub fn attr_int(attrs: &Attrs, name: &str) -> Result<i64, OpError> {
    attr(attrs, name)?
        .as_int()
        .ok_or_else(|| OpError::attribute(name, format!("attribute `{name}` must be an integer")))
}

/// An integer attribute that may be `None`.
pub fn attr_opt_int(attrs: &Attrs, name: &str) -> Result<Option<i64>, OpError> {
    match attrs.get(name) {
        None | Some(AttrValue::Null) => Ok(None),
        Some(v) => v.as_int().map(Some).ok_or_else(|| {
            OpError::attribute(name, format!("attribute `{name}` must be an integer"))
        }),
    }
}

/// A float attribute (integers accepted).
pub fn attr_float(attrs: &Attrs, name: &str) -> Result<f64, OpError> {
    attr(attrs, name)?
        .as_float()
        .ok_or_else(|| OpError::attribute(name, format!("attribute `{name}` must be a number")))
}

/// A boolean attribute.
pub fn attr_bool(attrs: &Attrs, name: &str) -> Result<bool, OpError> {
    attr(attrs, name)?.as_bool().ok_or_else(|| {
        OpError::attribute(name, format!("attribute `{name}` must be True or False"))
    })
}

/// A string attribute.
pub fn attr_str<'a>(attrs: &'a Attrs, name: &str) -> Result<&'a str, OpError> {
    attr(attrs, name)?
        .as_str()
        .ok_or_else(|| OpError::attribute(name, format!("attribute `{name}` must be a string")))
}

/// A list-of-integers attribute that may be `None`.
pub fn attr_opt_ints(attrs: &Attrs, name: &str) -> Result<Option<Vec<i64>>, OpError> {
    match attrs.get(name) {
        None | Some(AttrValue::Null) => Ok(None),
        Some(v) => v.as_ints().map(Some).ok_or_else(|| {
            OpError::attribute(
                name,
                format!("attribute `{name}` must be a list of integers"),
            )
        }),
    }
}

/// A list-of-integers attribute.
pub fn attr_ints(attrs: &Attrs, name: &str) -> Result<Vec<i64>, OpError> {
    attr_opt_ints(attrs, name)?.ok_or_else(|| {
        OpError::attribute(
            name,
            format!("attribute `{name}` must be a list of integers"),
        )
    })
}

/// A list-of-integers attribute that must have one of the given lengths, e.g. padding with
/// 1, 2 or 4 values: "`padding` must have 1, 2 or 4 values, got 3".
pub fn attr_ints_len(attrs: &Attrs, name: &str, lens: &[usize]) -> Result<Vec<i64>, OpError> {
    let v = attr_ints(attrs, name)?;
    if !lens.contains(&v.len()) {
        let allowed: Vec<String> = lens.iter().map(|l| l.to_string()).collect();
        let allowed = match allowed.as_slice() {
            [one] => one.clone(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
            [] => "no".into(),
        };
        return Err(OpError::attribute(
            name,
            format!("`{name}` must have {allowed} values, got {}", v.len()),
        ));
    }
    Ok(v)
}

/// A dtype attribute; `None` when unset (`""`).
pub fn attr_dtype(attrs: &Attrs, name: &str) -> Result<Option<DType>, OpError> {
    match attrs.get(name) {
        None | Some(AttrValue::Null) => Ok(None),
        Some(AttrValue::Str(s)) if s.is_empty() => Ok(None),
        Some(AttrValue::Str(s)) => DType::parse(s)
            .map(Some)
            .ok_or_else(|| OpError::attribute(name, format!("unknown dtype \"{s}\" in `{name}`"))),
        Some(_) => Err(OpError::attribute(
            name,
            format!("attribute `{name}` must be a dtype string"),
        )),
    }
}

/// The `dtype` attribute, which must be set.
pub fn required_dtype(attrs: &Attrs) -> Result<DType, OpError> {
    attr_dtype(attrs, "dtype")?
        .ok_or_else(|| OpError::attribute("dtype", "attribute `dtype` must be set, got \"\""))
}

// ----- Arguments -----

/// Argument `i` as a tensor.
pub fn arg_tensor(args: &[Value], i: usize) -> Result<&Arc<NDArray>, OpError> {
    match args.get(i) {
        Some(Value::Tensor(t)) => Ok(t),
        Some(v) => Err(OpError::type_error(format!(
            "argument {i} must be a tensor, got {}",
            v.kind_name()
        ))),
        None => Err(OpError::type_error(format!("missing argument {i}"))),
    }
}

/// Argument `i` as a tuple of tensors.
pub fn arg_tensors(args: &[Value], i: usize) -> Result<Vec<Arc<NDArray>>, OpError> {
    match args.get(i) {
        Some(Value::Tuple(fields)) => fields
            .iter()
            .map(|f| {
                f.as_tensor().cloned().ok_or_else(|| {
                    OpError::type_error(format!("argument {i} must be a tuple of tensors"))
                })
            })
            .collect(),
        Some(v) => Err(OpError::type_error(format!(
            "argument {i} must be a tuple of tensors, got {}",
            v.kind_name()
        ))),
        None => Err(OpError::type_error(format!("missing argument {i}"))),
    }
}

/// Wraps a freshly computed array as a value, turning a construction error into a message.
pub fn value<E: std::fmt::Display>(array: Result<NDArray, E>) -> Result<Value, OpError> {
    array.map(Value::tensor).map_err(OpError::from_runtime)
}

// ----- Row-major indices -----

/// Row-major strides of `shape`, in elements.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: i64, shape: &[i64]) -> Vec<i64> {
    let mut idx = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = flat % shape[d];
            flat /= shape[d];
        }
    }
    idx
}

/// The flat position, in a tensor of `shape` broadcast to `out_rank` dimensions, of output
/// multi-index `idx` (numpy broadcasting: size-1 dimensions repeat).
pub fn broadcast_index(idx: &[i64], shape: &[i64]) -> usize {
    let offset = idx.len() - shape.len();
    let mut flat = 0i64;
    for (d, &n) in shape.iter().enumerate() {
        let i = if n == 1 { 0 } else { idx[offset + d] };
        flat = flat * n + i;
    }
    flat as usize
}

/// The known dimensions of a concrete shape (all evaluation-time shapes are known).
pub fn known(shape: &[Dim]) -> Option<Vec<i64>> {
    shape
        .iter()
        .map(|d| match d {
            Dim::Known(n) => Some(*n),
            Dim::Any => None,
        })
        .collect()
}

/// The value of a one-element `float32` constant (a scaling's factor).
pub fn scalar_f32_constant(e: &relay_ir::Expr) -> Option<f32> {
    match e.kind() {
        relay_ir::ExprKind::Constant(c)
            if c.dtype() == DType::F32 && c.shape().iter().product::<i64>() == 1 =>
        {
            c.to_f64_vec().first().map(|&v| v as f32)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting() {
        let k = |v: &[i64]| v.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>();
        assert_eq!(
            broadcast_shapes(&k(&[2, 1, 3]), &k(&[4, 1])),
            Some(k(&[2, 4, 3]))
        );
        assert_eq!(broadcast_shapes(&k(&[2, 3]), &k(&[4, 3])), None);
        assert_eq!(
            broadcast_shapes(&[Dim::Any, Dim::Known(3)], &k(&[3])),
            Some(vec![Dim::Any, Dim::Known(3)])
        );
        assert_eq!(
            broadcast_index(&[1, 2, 0], &[3, 1]),
            2 /* row 2, col 0 */
        );
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(normalize_axis(-1, 3), Ok(2));
        assert!(normalize_axis(3, 3).is_err());
        assert_eq!(normalize_axis(0, 0), Ok(0));
        assert!(normalize_axis(-1, 0).is_err());
        assert!(axis_index(0, 0).is_err());
        assert_eq!(axis_index(i64::MIN, 3).ok(), None);
        assert_eq!(insert_index(-1, 2), Ok(2));
        assert!(insert_index(3, 2).is_err());
        assert_eq!(
            inputs_n::<1>(&[]).err().map(|e| e.to_string()).as_deref(),
            Some("expects 1 input, got 0")
        );
        assert_eq!(
            expect_inputs(&[], 2)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("expects 2 inputs, got 0")
        );
    }
}
