//! Operators whose shape-like input is computed at run time (from a dynamic dimension, or from
//! data): `Range`, `ConstantOfShape`, `Expand`, `Tile`, `Reshape`, `Slice` and `NonZero` as the
//! value-shaped Relay operators (`arange`, `dyn.full`, `dyn.broadcast_to`, `dyn.tile`,
//! `dyn.reshape`, `dyn.strided_slice`, `argwhere`), whose kernels read the shape at run time.
//! The result's shape keeps what the import knows of it: the symbols of a shape vector's
//! elements ([`crate::symbolic`]), the static dimensions, [`ANY`] for the rest.

use relay_runtime::DType;

use super::{Value, attr};
use crate::attrs::Attrs;
use crate::builder::ints_of;
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::proto::NodeProto;
use crate::shape_vectors::elems_of;
use crate::symbolic::{ANY, broadcast_dim, is_symbol};

/// `v` as an `int64` tensor (itself when it is one).
pub(super) fn int64(g: &mut Graph, v: &Value) -> Result<Value, ConvertError> {
    if v.dtype == DType::I64 {
        return Ok(v.clone());
    }
    g.call("cast", &[v], &[("dtype", attr::str(DType::I64))])
}

/// The static length of shape vector `v` (a 1-D tensor of integers).
fn vector_length(v: &Value, what: &str) -> Result<usize, ConvertError> {
    match v.shape.as_slice() {
        [n] if *n >= 0 && v.dtype.is_int() => Ok(*n as usize),
        _ => Err(format!(
            "the {what} must be a vector of integers of static length, got {}",
            crate::graph::type_text(&v.shape, v.dtype)
        )
        .into()),
    }
}

/// The elements the import knows of shape vector `v` (symbols included), or `n` unknowns.
fn known_elements(v: &Value, n: usize) -> Vec<i64> {
    elems_of(v).unwrap_or_else(|| vec![ANY; n])
}

/// `Range` of bounds computed at run time: `arange`. Its length is the limit's symbol when
/// the range counts from 0 by 1.
pub(super) fn range(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let [start, limit, delta] = [0, 1, 2].map(|i| g.input(node, i));
    let (start, limit, delta) = (start?, limit?, delta?);
    let dtype = start.dtype;
    if [&start, &limit, &delta]
        .iter()
        .any(|v| !v.shape.is_empty() || v.dtype != dtype)
    {
        return Err("Range takes three scalars of one type".into());
    }
    let counts = ints_of(&start) == Some(vec![0]) && ints_of(&delta) == Some(vec![1]);
    let length = match elems_of(&limit).as_deref() {
        Some([n]) if counts => *n,
        _ => ANY,
    };
    g.call_as(
        "arange",
        &[&start, &limit, &delta],
        &[("dtype", attr::str(dtype))],
        &[length],
    )
}

/// `ConstantOfShape` of a shape computed at run time: `dyn.full`.
pub(super) fn constant_of_shape(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let shape = g.input(node, 0)?;
    let n = vector_length(&shape, "shape")?;
    let fill = match a.tensor("value")? {
        Some(t) => crate::tensor::array(t, None).map_err(|e| e.to_string())?,
        None => relay_runtime::NDArray::scalar_f64(DType::F32, 0.0).map_err(|e| e.to_string())?,
    };
    if fill.num_elements() != 1 {
        return Err("ConstantOfShape's value must have one element".into());
    }
    let dtype = fill.dtype();
    let scalar = relay_runtime::NDArray::from_bytes(dtype, &[], fill.as_bytes())
        .map_err(|e| e.to_string())?;
    let fill = g.constant("fill", scalar);
    let shape_i64 = int64(g, &shape)?;
    let dims: Vec<i64> = known_elements(&shape, n)
        .into_iter()
        .map(|d| if d >= 0 || is_symbol(d) { d } else { ANY })
        .collect();
    g.call_as(
        "dyn.full",
        &[&fill, &shape_i64],
        &[("dtype", attr::str(dtype))],
        &dims,
    )
}

/// `Expand` to a shape computed at run time: `dyn.broadcast_to` to ONNX's two-way broadcast
/// of the data's shape and the given one (a data dimension of 1 takes the given extent, any
/// other stays).
pub(super) fn expand(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let (x, to) = (g.input(node, 0)?, g.input(node, 1)?);
    let k = vector_length(&to, "shape")?;
    let rank = k.max(x.shape.len());
    let ones =
        |g: &mut Graph, n: usize| g.int64_constant("ones", &[n as i64], std::iter::repeat_n(1, n));
    let padded = |g: &mut Graph, v: Value, n: usize| -> Result<Value, ConvertError> {
        if n == rank {
            return Ok(v);
        }
        let pad = ones(g, rank - n)?;
        g.call_tuple("concatenate", &[&pad, &v], &[("axis", attr::int(0))])
    };
    let xs = g.call("shape_of", &[&x], &[("dtype", attr::str(DType::I64))])?;
    let xs = padded(g, xs, x.shape.len())?;
    let to_i64 = int64(g, &to)?;
    let wanted = padded(g, to_i64, k)?;
    let one = g.int(1, DType::I64)?;
    let unit = g.call("equal", &[&xs, &one], &[])?;
    let target = g.call("where", &[&unit, &wanted, &xs], &[])?;
    // What the import knows of the result: the two-way broadcast of the shapes.
    let given = known_elements(&to, k);
    let lead = |s: &[i64]| {
        std::iter::repeat_n(1, rank - s.len())
            .chain(s.iter().copied())
            .collect::<Vec<_>>()
    };
    let (xd, gd) = (lead(&x.shape), lead(&given));
    let dims = xd
        .iter()
        .zip(&gd)
        .map(|(&a, &b)| match (a, b) {
            (1, b) => b,
            (a, _) if a >= 0 => a,
            (a, b) => broadcast_dim(a, b).unwrap_or(ANY),
        })
        .collect::<Vec<_>>();
    g.call_as("dyn.broadcast_to", &[&x, &target], &[], &dims)
}

/// `Tile` by repeats computed at run time: `dyn.tile`.
pub(super) fn tile(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let (x, reps) = (g.input(node, 0)?, g.input(node, 1)?);
    let n = vector_length(&reps, "repeats")?;
    if n != x.shape.len() {
        return Err(format!("{n} repeats for rank {}", x.shape.len()).into());
    }
    let dims = known_elements(&reps, n)
        .iter()
        .zip(&x.shape)
        .map(|(&r, &d)| match (r, d) {
            (1, d) => d,
            (r, d) if r >= 0 && d >= 0 => r.saturating_mul(d),
            _ => ANY,
        })
        .collect::<Vec<_>>();
    let reps = int64(g, &reps)?;
    g.call_as("dyn.tile", &[&x, &reps], &[], &dims)
}

/// `Reshape` to a shape computed at run time (or one whose dynamic dimensions a static
/// `reshape` cannot name): `dyn.reshape`, ONNX's `0` and `-1` being Relay's. `to` is what the
/// import knows of the result.
pub(super) fn reshape(
    g: &mut Graph,
    node: &NodeProto,
    to: Option<Vec<i64>>,
) -> Result<Value, ConvertError> {
    let (x, shape) = (g.input(node, 0)?, g.input(node, 1)?);
    let n = vector_length(&shape, "shape")?;
    let allow_zero = Attrs(&node.attribute).int("allowzero", 0)? != 0;
    let dims = to.unwrap_or_else(|| vec![ANY; n]);
    let shape = int64(g, &shape)?;
    g.call_as(
        "dyn.reshape",
        &[&x, &shape],
        &[("allowzero", attr::bool(allow_zero))],
        &dims,
    )
}

/// `Slice` by starts, ends or steps computed at run time: `dyn.strided_slice` (TVM's index
/// rules are ONNX's: negative indices count from the end, then clamp).
pub(super) fn slice(
    g: &mut Graph,
    node: &NodeProto,
    axes: &[usize],
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let n = axes.len();
    let starts = g.input(node, 1)?;
    let ends = g.input(node, 2)?;
    let steps = match g.optional_input(node, 4)? {
        Some(s) => s,
        None => g.int64_constant("steps", &[n as i64], std::iter::repeat_n(1, n))?,
    };
    for (v, what) in [(&starts, "starts"), (&ends, "ends"), (&steps, "steps")] {
        if vector_length(v, what)? != n {
            return Err(format!("{n} axes and {what} of another length").into());
        }
    }
    let mut dims = x.shape.clone();
    for &k in axes {
        dims[k] = ANY;
    }
    let (starts, ends, steps) = (int64(g, &starts)?, int64(g, &ends)?, int64(g, &steps)?);
    let axes: Vec<i64> = axes.iter().map(|&k| k as i64).collect();
    g.call_as(
        "dyn.strided_slice",
        &[&x, &starts, &ends, &steps],
        &[("axes", attr::ints(&axes))],
        &dims,
    )
}

/// `NonZero`: `argwhere` (positions as rows), transposed to ONNX's one row per axis, `int64`.
pub(super) fn non_zero(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len() as i64;
    let rows = g.call_as("argwhere", &[&x], &[], &[ANY, rank])?;
    let cols = g.call_as(
        "transpose",
        &[&rows],
        &[("axes", attr::ints(&[1, 0]))],
        &[rank, ANY],
    )?;
    int64(g, &cols)
}
