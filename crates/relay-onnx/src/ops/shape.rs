//! Shapes and layout: `Reshape`, `Flatten`, `Transpose`, `Squeeze`/`Unsqueeze`, `Concat`,
//! `Gather`, `Expand`, `Constant`, `Shape` and the reductions. Shape inputs must be
//! constants (initializers, `Constant` nodes or `Shape` of a static value), which makes every
//! reshape static.

use crate::error::ConvertError;
use relay_runtime::{DType, NDArray};

use crate::attrs::{Attrs, axis};
use crate::builder::{Value, attr, ints_of};
use crate::graph::Graph;
use crate::proto::NodeProto;
use crate::shape_vectors::elems_of;
use crate::symbolic::{is_dynamic, is_symbol, product, resolve};

/// `Reshape` to a constant shape, or one computed from dynamic dimensions (`0`: the input's
/// dimension, unless `allowzero`; `-1`: what is left).
pub(super) fn reshape(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let Some(spec) = elems_of(&g.input(node, 1)?) else {
        return super::dynamic::reshape(g, node, None);
    };
    let allow_zero = Attrs(&node.attribute).int("allowzero", 0)? != 0;
    if is_dynamic(&x.shape) || spec.iter().any(|&d| is_symbol(d)) {
        let to = resolve(&x.shape, &spec, allow_zero)?;
        // A static `reshape` names at most one dynamic dimension that is not the input's.
        return match g.reshape(&x, to.clone()) {
            Ok(y) => Ok(y),
            Err(_) => super::dynamic::reshape(g, node, Some(to)),
        };
    }
    let total: i64 = x.shape.iter().product();
    let mut shape: Vec<i64> = spec
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            if d == 0 && !allow_zero {
                x.shape.get(i).copied().unwrap_or(0)
            } else {
                d
            }
        })
        .collect();
    let checked = |dims: Vec<i64>| {
        dims.iter()
            .try_fold(1i64, |p, &d| p.checked_mul(d))
            .ok_or_else(|| ConvertError::from(format!("shape {spec:?} overflows")))
    };
    let known = checked(shape.iter().copied().filter(|&d| d != -1).collect())?;
    match shape.iter().filter(|&&d| d == -1).count() {
        0 => {}
        1 if known > 0 && total % known == 0 => {
            if let Some(d) = shape.iter_mut().find(|d| **d == -1) {
                *d = total / known;
            }
        }
        _ => return Err(format!("shape {spec:?} for {} elements", total).into()),
    }
    if shape.iter().any(|&d| d < 0) || checked(shape.clone())? != total {
        return Err(format!(
            "shape {spec:?} does not hold the {total} elements of {:?}",
            x.shape
        )
        .into());
    }
    if shape.contains(&0) {
        // An empty result (Relay's `reshape` reads a 0 as "keep the input's dimension").
        return g.call(
            "zeros",
            &[],
            &[("shape", attr::ints(&shape)), ("dtype", attr::str(x.dtype))],
        );
    }
    g.reshape(&x, shape)
}

/// `Flatten` at `axis`: a 2-D reshape.
pub(super) fn flatten(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    let k = match a.int("axis", 1)? {
        k if k == rank as i64 => rank,
        k => axis(k, rank)?,
    };
    let shape = vec![product(&x.shape[..k]), product(&x.shape[k..])];
    g.reshape(&x, shape)
}

/// `Transpose` by `perm` (default: reversed).
pub(super) fn transpose(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    let perm = a
        .ints("perm")?
        .unwrap_or_else(|| (0..rank as i64).rev().collect());
    if perm.len() != rank {
        return Err(format!("perm {perm:?} for rank {rank}").into());
    }
    let mut seen = vec![false; rank];
    let mut at = Vec::with_capacity(rank);
    for &p in &perm {
        let p = axis(p, rank)?;
        if std::mem::replace(&mut seen[p], true) {
            return Err(format!("perm {perm:?} repeats an axis").into());
        }
        at.push(p);
    }
    let perm: Vec<i64> = at.iter().map(|&p| p as i64).collect();
    let shape: Vec<i64> = at.iter().map(|&p| x.shape[p]).collect();
    g.call_as("transpose", &[&x], &[("axes", attr::ints(&perm))], &shape)
}

/// `Squeeze` and `Unsqueeze`: reshapes, the axes from the attribute (before opset 13) or a
/// constant input.
pub(super) fn squeeze(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let axes = if g.opset < 13 {
        a.ints("axes")?
    } else {
        match g.optional_input(node, 1)? {
            None => None,
            Some(v) => Some(ints_of(&v).ok_or("the axes are not a constant")?),
        }
    };
    let shape = if node.op_type == "Unsqueeze" {
        let axes = axes.ok_or("Unsqueeze needs axes")?;
        let rank = x.shape.len() + axes.len();
        let mut at = axes
            .iter()
            .map(|&k| axis(k, rank))
            .collect::<Result<Vec<_>, _>>()?;
        at.sort_unstable();
        let mut dims = x.shape.iter();
        (0..rank)
            .map(|i| {
                if at.contains(&i) {
                    1
                } else {
                    dims.next().copied().unwrap_or(1)
                }
            })
            .collect()
    } else {
        let rank = x.shape.len();
        let at = match axes {
            Some(axes) => axes
                .iter()
                .map(|&k| axis(k, rank))
                .collect::<Result<Vec<_>, _>>()?,
            None => (0..rank).filter(|&i| x.shape[i] == 1).collect(),
        };
        if at.iter().any(|&i| x.shape[i] != 1) {
            return Err(format!("squeezing axes {at:?} of shape {:?}", x.shape).into());
        }
        (0..rank)
            .filter(|i| !at.contains(i))
            .map(|i| x.shape[i])
            .collect()
    };
    g.reshape(&x, shape)
}

/// `Concat` along `axis`.
pub(super) fn concat(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let xs = (0..node.input.len())
        .map(|i| g.input(node, i))
        .collect::<Result<Vec<_>, _>>()?;
    let first = xs.first().ok_or("Concat of nothing")?;
    let rank = first.shape.len();
    let k = axis(a.int("axis", 0)?, rank)?;
    // The other axes' dynamic dimensions are the first input's; the joined one is a sum.
    let mut dims = first.shape.clone();
    dims[k] = crate::symbolic::ANY;
    let items: Vec<&Value> = xs.iter().collect();
    let y = g.call_tuple("concatenate", &items, &[("axis", attr::int(k as i64))])?;
    Ok(y.with_symbols(&dims))
}

/// `Gather` along `axis`: `take`.
pub(super) fn gather(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, i) = (g.input(node, 0)?, g.input(node, 1)?);
    let k = axis(a.int("axis", 0)?, x.shape.len())?;
    let mut shape = x.shape[..k].to_vec();
    shape.extend(&i.shape);
    shape.extend(&x.shape[k + 1..]);
    // Negative indices count from the end: `wrap` maps [-n, n) onto [0, n) (other indices
    // are an error in ONNX).
    let attrs = [("axis", attr::int(k as i64)), ("mode", attr::str("wrap"))];
    g.call_as("take", &[&x, &i], &attrs, &shape)
}

/// `GatherElements`: Relay's `gather` along `axis` (numpy's `take_along_axis`; negative
/// indices count from the end).
pub(super) fn gather_elements(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, i) = (g.input(node, 0)?, g.input(node, 1)?);
    let k = axis(a.int("axis", 0)?, x.shape.len())?;
    if i.shape.len() != x.shape.len() {
        return Err(format!("indices {:?} for data {:?}", i.shape, x.shape).into());
    }
    g.call("gather", &[&x, &i], &[("axis", attr::int(k as i64))])
}

/// `Expand` to a constant shape (numpy broadcasting): `broadcast_to`.
pub(super) fn expand(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let to = ints_of(&g.input(node, 1)?).ok_or("the shape is not a constant")?;
    let shape = super::elementwise::broadcast(&x.shape, &to)?;
    g.call("broadcast_to", &[&x], &[("shape", attr::ints(&shape))])
}

/// `Constant` from its `value` (or `value_float(s)`, `value_int(s)`).
pub(super) fn constant(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let name = node.output.first().ok_or("a Constant without an output")?;
    let array = if let Some(t) = a.tensor("value")? {
        crate::tensor::array(t, None).map_err(|e| e.to_string())?
    } else if let Some(v) = a.ints("value_ints")? {
        NDArray::from_i128_slice(
            DType::I64,
            &[v.len() as i64],
            &v.iter().map(|&x| i128::from(x)).collect::<Vec<_>>(),
        )
        .map_err(|e| e.to_string())?
    } else if a.0.iter().any(|x| x.name == "value_int") {
        NDArray::from_i128_slice(DType::I64, &[], &[i128::from(a.int("value_int", 0)?)])
            .map_err(|e| e.to_string())?
    } else if a.0.iter().any(|x| x.name == "value_float") {
        NDArray::from_f64_slice(DType::F32, &[], &[f64::from(a.float("value_float", 0.0)?)])
            .map_err(|e| e.to_string())?
    } else {
        return Err("Constant without a supported value attribute".into());
    };
    Ok(g.named_constant(name, array))
}

/// `Shape`: a constant of a static value's, `shape_of` of a dynamic one's (whose elements
/// the import keeps, symbols included: [`crate::symbolic::elements`]).
pub(super) fn shape_of(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let name = node.output.first().ok_or("a Shape without an output")?;
    // `start` and `end` (opset 15) select a range of the dimensions, clamped.
    let rank = x.shape.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let (start, end) = (clamp(a.int("start", 0)?), clamp(a.int("end", rank)?));
    if is_dynamic(&x.shape) {
        let n = end.saturating_sub(start) as i64;
        let dims = g.call("shape_of", &[&x], &[("dtype", attr::str(DType::I64))])?;
        if n == rank {
            return Ok(dims);
        }
        let start = start as i64;
        return super::slice::window(g, &dims, &[start], &[start + n]);
    }
    let dims: Vec<i128> = x.shape[start..end.max(start)]
        .iter()
        .map(|&d| i128::from(d))
        .collect();
    let array = NDArray::from_i128_slice(DType::I64, &[dims.len() as i64], &dims)
        .map_err(|e| e.to_string())?;
    Ok(g.named_constant(name, array))
}

/// `ReduceMean`, `ReduceSum`, `ReduceMax`, `ReduceMin` over attribute axes (or, from the
/// opsets where they moved, a constant input), all axes when none.
pub(super) fn reduce(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    // The axes moved from an attribute to an input: ReduceSum at opset 13, the others at 18.
    let input_axes = if node.op_type == "ReduceSum" { 13 } else { 18 };
    let axes = if g.opset >= input_axes {
        match g.optional_input(node, 1)? {
            None => None,
            Some(v) => Some(ints_of(&v).ok_or("the axes are not a constant")?),
        }
    } else {
        a.ints("axes")?
    };
    let axes: Vec<usize> = match axes {
        Some(v) if !v.is_empty() => v.iter().map(|&k| axis(k, rank)).collect::<Result<_, _>>()?,
        _ if a.int("noop_with_empty_axes", 0)? != 0 => return Ok(x),
        _ => (0..rank).collect(),
    };
    let keep = a.int("keepdims", 1)? != 0;
    let shape: Vec<i64> = (0..rank)
        .filter_map(|i| match (axes.contains(&i), keep) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(x.shape[i]),
        })
        .collect();
    let empty = axes.iter().any(|&k| x.shape[k] == 0) && !is_dynamic(&shape);
    if empty && matches!(node.op_type.as_str(), "ReduceMax" | "ReduceMin") {
        // Over no elements: the operation's identity (ONNX, opset 18), -inf or +inf, which
        // converts to an integer type's smallest or largest value; false or true.
        let max = node.op_type == "ReduceMax";
        let identity = match (x.dtype == DType::BOOL, max) {
            (true, max) => f64::from(u8::from(!max)),
            (false, true) => f64::NEG_INFINITY,
            (false, false) => f64::INFINITY,
        };
        let n: i64 = shape.iter().product();
        let filled = vec![identity; n.max(0) as usize];
        let array = NDArray::from_f64_slice(x.dtype, &shape, &filled).map_err(|e| e.to_string())?;
        return Ok(g.constant("identity", array));
    }
    let axes: Vec<i64> = axes.iter().map(|&k| k as i64).collect();
    let attrs = [("axis", attr::ints(&axes)), ("keepdims", attr::bool(keep))];
    let over = |g: &mut Graph, f: &str, v: &Value| g.call_as(f, &[v], &attrs, &shape);
    match node.op_type.as_str() {
        "ReduceMean" => over(g, "mean", &x),
        "ReduceSum" => over(g, "sum", &x),
        "ReduceMax" => over(g, "max", &x),
        "ReduceMin" => over(g, "min", &x),
        "ReduceProd" => over(g, "prod", &x),
        "ReduceL2" => {
            let squares = g.call("multiply", &[&x, &x], &[])?;
            let sum = over(g, "sum", &squares)?;
            g.call("sqrt", &[&sum], &[])
        }
        "ReduceL1" => {
            let abs = g.call("abs", &[&x], &[])?;
            over(g, "sum", &abs)
        }
        "ReduceSumSquare" => {
            let squares = g.call("multiply", &[&x, &x], &[])?;
            over(g, "sum", &squares)
        }
        "ReduceLogSum" => {
            let sum = over(g, "sum", &x)?;
            g.call("log", &[&sum], &[])
        }
        _ => {
            let exp = g.call("exp", &[&x], &[])?;
            let sum = over(g, "sum", &exp)?;
            g.call("log", &[&sum], &[])
        }
    }
}
