//! Cutting and tiling: `Slice` (`strided_slice`, with ONNX's clamping of starts and ends),
//! `Split` (a tuple, one output each), `Pad` (constant, edge, reflect, wrap), `Tile`; and values known at
//! import — `Range`, `ConstantOfShape`, `Size` — as constants.

use crate::error::ConvertError;
use relay_ir::AttrValue;
use relay_runtime::{DType, NDArray};

use crate::attrs::{Attrs, axis};
use crate::builder::{MAX_ELEMENTS, Value, attr, elements, floats_of, ints_of};
use crate::graph::Graph;
use crate::proto::NodeProto;

/// Integers from attribute `name` (before `opset`) or constant input `input` (from it).
fn ints_from(
    g: &Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
    name: &str,
    input: usize,
    opset: i64,
) -> Result<Option<Vec<i64>>, ConvertError> {
    if g.opset < opset {
        return a.ints(name);
    }
    match g.optional_input(node, input)? {
        None => Ok(None),
        Some(v) => ints_of(&v)
            .map(Some)
            .ok_or_else(|| ConvertError::from(format!("{name} are not a constant"))),
    }
}

/// `Slice`.
pub(super) fn slice(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    let axes = match ints_from(g, node, a, "axes", 3, 10)? {
        Some(axes) => Some(
            axes.iter()
                .map(|&k| axis(k, rank))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let starts = ints_from(g, node, a, "starts", 1, 10);
    let ends = ints_from(g, node, a, "ends", 2, 10);
    let steps = ints_from(g, node, a, "steps", 4, 10);
    let (starts, ends, steps) = match (starts, ends, steps) {
        (Ok(starts), Ok(ends), Ok(steps)) => (starts, ends, steps),
        // Indices computed at run time (opset 10 on, where they are inputs).
        _ => {
            let n = g.input(node, 1)?.shape.first().copied().unwrap_or(0).max(0) as usize;
            let axes = axes.unwrap_or_else(|| (0..n).collect());
            return super::dynamic::slice(g, node, &axes);
        }
    };
    let starts = starts.ok_or("starts are required")?;
    let ends = ends.ok_or("ends are required")?;
    let axes = axes.unwrap_or_else(|| (0..starts.len()).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if [ends.len(), axes.len(), steps.len()]
        .iter()
        .any(|&n| n != starts.len())
        || steps.contains(&0)
    {
        return Err("starts, ends, axes and steps disagree".into());
    }
    if crate::symbolic::is_dynamic(&x.shape) {
        return dynamic_slice(g, &x, &axes, [&starts, &ends, &steps]);
    }
    let (mut begin, mut end, mut stride) = (
        (0..rank).map(|_| 0).collect::<Vec<i64>>(),
        x.shape.clone(),
        vec![1i64; rank],
    );
    for (((&k, &s), &e), &st) in axes.iter().zip(&starts).zip(&ends).zip(&steps) {
        let n = x.shape[k];
        // ONNX's clamping: negative indices count from the end; a forward slice clamps to
        // [0, n], a backward one to [-1, n - 1].
        let fix = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
        let (lo, hi) = if st > 0 { (0, n) } else { (-1, n - 1) };
        let (b, e) = (fix(s).clamp(lo, hi), fix(e).clamp(lo, hi));
        begin[k] = b;
        end[k] = e;
        stride[k] = st;
    }
    // A backward axis is a forward slice of the reversed axis (index i is n - 1 - i there):
    // `strided_slice`'s negative ends would count from the end instead.
    let mut data = x.clone();
    for k in 0..rank {
        if stride[k] < 0 {
            let n = x.shape[k];
            data = g.call("reverse", &[&data], &[("axis", attr::int(k as i64))])?;
            (begin[k], end[k], stride[k]) = (n - 1 - begin[k], n - 1 - end[k], -stride[k]);
        }
    }
    strided_slice(g, &data, &begin, &end, &stride, attr::null())
}

/// `strided_slice(x, begin, end, strides, axes)` (`axes` null: every axis, from the first).
fn strided_slice(
    g: &mut Graph,
    x: &Value,
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
    axes: AttrValue,
) -> Result<Value, ConvertError> {
    g.call(
        "strided_slice",
        &[x],
        &slice_attrs(begin, end, strides, axes),
    )
}

/// The attributes of a `strided_slice`.
fn slice_attrs(
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
    axes: AttrValue,
) -> [(&'static str, AttrValue); 4] {
    [
        ("begin", attr::ints(begin)),
        ("end", attr::ints(end)),
        ("strides", attr::ints(strides)),
        ("axes", axes),
    ]
}

/// [`slice`] of a tensor with dynamic dimensions, forward only: a `strided_slice` of the
/// sliced axes alone (`axes=`), with the starts and ends as ONNX gives them, which Relay
/// counts from the end when negative and clamps at run time as ONNX does. A dynamic axis
/// keeps its symbol when sliced whole, else becomes [`crate::symbolic::ANY`].
fn dynamic_slice(
    g: &mut Graph,
    x: &Value,
    axes: &[usize],
    [starts, ends, steps]: [&[i64]; 3],
) -> Result<Value, ConvertError> {
    let mut shape = x.shape.clone();
    for (((&k, &s), &e), &st) in axes.iter().zip(starts).zip(ends).zip(steps) {
        if st < 0 {
            return Err(format!(
                "a backward Slice of {}: give the model's symbolic dimensions with \
                 --input-shape",
                crate::graph::type_text(&x.shape, x.dtype)
            )
            .into());
        }
        // A static axis's length is the relation's.
        let whole = s == 0 && e >= i64::from(i32::MAX) && st == 1;
        if !(whole && x.shape[k] < 0) {
            shape[k] = crate::symbolic::ANY;
        }
    }
    let axes: Vec<i64> = axes.iter().map(|&k| k as i64).collect();
    let attrs = slice_attrs(starts, ends, steps, attr::ints(&axes));
    g.call_as("strided_slice", &[x], &attrs, &shape)
}

/// `x[begin..end]`, elementwise per axis, as a `strided_slice` of unit steps.
pub(super) fn window(
    g: &mut Graph,
    x: &Value,
    begin: &[i64],
    end: &[i64],
) -> Result<Value, ConvertError> {
    let ones = vec![1; begin.len()];
    strided_slice(g, x, begin, end, &ones, attr::null())
}

/// `Split` along `axis`, by sizes (attribute before opset 13, else input) or evenly.
pub(super) fn split(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let x = g.input(node, 0)?;
    let k = axis(a.int("axis", 0)?, x.shape.len())?;
    let n = x.shape[k];
    if n < 0 {
        return Err(format!(
            "splitting the dynamic axis {k} of {}: give the model's symbolic dimensions with \
             --input-shape",
            crate::graph::type_text(&x.shape, x.dtype)
        )
        .into());
    }
    let parts = node.output.len().max(1) as i64;
    let sizes = match ints_from(g, node, a, "split", 1, 13)? {
        Some(s) => s,
        None if n % parts == 0 => vec![n / parts; parts as usize],
        // Opset 18: the last part is smaller.
        None if g.opset >= 18 && (n + parts - 1) / parts * (parts - 1) < n => {
            let chunk = (n + parts - 1) / parts;
            let mut sizes = vec![chunk; parts as usize - 1];
            sizes.push(n - chunk * (parts - 1));
            sizes
        }
        None => return Err(format!("{n} does not split into {parts} equal parts").into()),
    };
    if sizes.iter().sum::<i64>() != n
        || sizes.len() != node.output.len()
        || sizes.iter().any(|&s| s < 0)
    {
        return Err(format!(
            "split sizes {sizes:?} for {n} elements into {} outputs",
            node.output.len()
        )
        .into());
    }
    if sizes.is_empty() {
        return Err("Split into no outputs".into());
    }
    if sizes.contains(&0) && crate::symbolic::is_dynamic(&x.shape) {
        return Err("an empty part of a Split of a tensor with dynamic dimensions".into());
    }
    if sizes.contains(&0) {
        // Relay's `split` makes no empty parts: each output its own slice.
        let rank = x.shape.len();
        let mut at = 0;
        return sizes
            .iter()
            .map(|&size| {
                let (mut begin, mut end) = (vec![0; rank], x.shape.clone());
                (begin[k], end[k]) = (at, at + size);
                at += size;
                window(g, &x, &begin, &end)
            })
            .collect();
    }
    let mut at = 0;
    let cuts: Vec<i64> = sizes[..sizes.len() - 1]
        .iter()
        .map(|s| {
            at += s;
            at
        })
        .collect();
    let parts = g.call_fields(
        "split",
        &[&x],
        &[
            ("indices_or_sections", attr::ints(&cuts)),
            ("axis", attr::int(k as i64)),
        ],
    )?;
    // The parts' dynamic dimensions are the input's, symbols included.
    Ok(parts
        .into_iter()
        .map(|v| v.with_symbols(&x.shape))
        .collect())
}

/// `Pad`: constant, edge or reflect mode (`wrap` is not supported), over every axis or
/// `axes` (opset 18); a negative pad crops.
pub(super) fn pad(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    let mode = a.string("mode", "constant")?;
    if !["constant", "edge", "reflect", "wrap"].contains(&mode.as_str()) {
        return Err(format!("Pad mode `{mode}` is not supported").into());
    }
    let given = ints_from(g, node, a, "pads", 1, 11)?.ok_or("pads are required")?;
    // Pads of the axes given (opset 18's `axes` input), as pads of every axis.
    let axes: Vec<usize> = match g.optional_input(node, 3)? {
        None => (0..rank).collect(),
        Some(v) => ints_of(&v)
            .ok_or("the axes are not a constant")?
            .iter()
            .map(|&k| axis(k, rank))
            .collect::<Result<_, _>>()?,
    };
    if given.len() != 2 * axes.len() {
        return Err(format!("pads {given:?} for {} axes", axes.len()).into());
    }
    let mut pads = vec![0i64; 2 * rank];
    for (i, &ax) in axes.iter().enumerate() {
        pads[ax] = given[i];
        pads[ax + rank] = given[i + axes.len()];
    }
    if pads.iter().any(|p| p.unsigned_abs() > 1 << 31)
        || (0..rank).any(|d| x.shape[d] + pads[d].min(0) + pads[d + rank].min(0) < 0)
    {
        return Err(format!("pads {pads:?} for shape {:?}", x.shape).into());
    }
    // A negative pad crops: the positive ones pad, then a slice takes off the rest.
    let x = if pads.iter().any(|&p| p < 0) {
        let begin: Vec<i64> = (0..rank).map(|d| (-pads[d]).max(0)).collect();
        let end: Vec<i64> = (0..rank)
            .map(|d| x.shape[d] - (-pads[d + rank]).max(0))
            .collect();
        window(g, &x, &begin, &end)?
    } else {
        x
    };
    let pads: Vec<i64> = pads.iter().map(|&p| p.max(0)).collect();
    if mode == "wrap" {
        return wrap(g, x, &pads);
    }
    let value = if g.opset < 11 {
        f64::from(a.float("value", 0.0)?)
    } else {
        match g.optional_input(node, 2)? {
            None => 0.0,
            Some(v) => floats_of(&v)
                .and_then(|f| f.first().copied())
                .ok_or("the pad value is not a constant")?,
        }
    };
    let width: Vec<Vec<i64>> = (0..rank).map(|d| vec![pads[d], pads[d + rank]]).collect();
    let v = if x.dtype.is_float() {
        g.float(value, x.dtype)?
    } else {
        g.int(value as i64, x.dtype)?
    };
    g.call(
        "nn.pad",
        &[&x, &v],
        &[
            ("pad_width", attr::int_lists(&width)),
            ("pad_mode", attr::str(mode)),
        ],
    )
}

/// `Pad` in `wrap` mode: along each axis, the last `before` elements, the data, then the
/// first `after` (at most the axis's length each).
fn wrap(g: &mut Graph, x: Value, pads: &[i64]) -> Result<Value, ConvertError> {
    let rank = x.shape.len();
    let mut y = x;
    for k in 0..rank {
        let (before, after, n) = (pads[k], pads[k + rank], y.shape[k]);
        if before == 0 && after == 0 {
            continue;
        }
        if before > n || after > n {
            return Err(format!("wrap pads of {before} and {after} around {n} elements").into());
        }
        let part = |g: &mut Graph, from: i64, to: i64| {
            let (mut begin, mut end) = (vec![0; rank], y.shape.clone());
            (begin[k], end[k]) = (from, to);
            window(g, &y, &begin, &end)
        };
        let (head, tail) = (part(g, n - before, n)?, part(g, 0, after)?);
        y = g.call_tuple(
            "concatenate",
            &[&head, &y, &tail],
            &[("axis", attr::int(k as i64))],
        )?;
    }
    Ok(y)
}

/// `Tile` by constant repeats.
pub(super) fn tile(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let reps = ints_of(&g.input(node, 1)?).ok_or("the repeats are not a constant")?;
    if reps.len() != x.shape.len() || reps.iter().any(|&r| r < 0) {
        return Err(format!("repeats {reps:?} for rank {}", x.shape.len()).into());
    }
    // The result's element count must stay in range.
    x.shape
        .iter()
        .zip(&reps)
        .map(|(d, r)| d.checked_mul(*r))
        .collect::<Option<Vec<i64>>>()
        .filter(|s| {
            s.iter()
                .try_fold(1i64, |p, &d| p.checked_mul(d))
                .is_some_and(|n| n < 1 << 48)
        })
        .ok_or_else(|| ConvertError::from(format!("repeats {reps:?} of shape {:?}", x.shape)))?;
    g.call("tile", &[&x], &[("reps", attr::ints(&reps))])
}

/// `Range`, `ConstantOfShape` and `Size` of constant or static operands: constants.
pub(super) fn known(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let name = node.output.first().ok_or("no output")?.clone();
    let array = match node.op_type.as_str() {
        "Size" => {
            let x = g.input(node, 0)?;
            NDArray::from_i128_slice(
                DType::I64,
                &[],
                &[i128::from(x.shape.iter().product::<i64>())],
            )
        }
        "ConstantOfShape" => {
            let shape = ints_of(&g.input(node, 0)?).ok_or("the shape is not a constant")?;
            let (dtype, value) = match a.tensor("value")? {
                Some(t) => {
                    let v = crate::tensor::array(t, None).map_err(|e| e.to_string())?;
                    (v.dtype(), v.to_f64_vec().first().copied().unwrap_or(0.0))
                }
                None => (DType::F32, 0.0),
            };
            let count = elements(&shape)?;
            NDArray::from_f64_slice(dtype, &shape, &vec![value; count])
        }
        _ => {
            let v: Vec<Value> = (0..3).map(|i| g.input(node, i)).collect::<Result<_, _>>()?;
            let f: Vec<f64> = v
                .iter()
                .map(|x| {
                    floats_of(x)
                        .and_then(|f| f.first().copied())
                        .ok_or("Range of non-constants")
                })
                .collect::<Result<_, _>>()?;
            let (start, limit, delta) = (f[0], f[1], f[2]);
            if delta == 0.0 {
                return Err("Range with delta 0".into());
            }
            let n = ((limit - start) / delta).ceil().max(0.0);
            if n.is_nan() || n > MAX_ELEMENTS as f64 {
                return Err(format!("Range of {n} elements").into());
            }
            let n = n as usize;
            let values: Vec<f64> = (0..n).map(|i| start + i as f64 * delta).collect();
            NDArray::from_f64_slice(v[0].dtype, &[n as i64], &values)
        }
    }
    .map_err(|e| e.to_string())?;
    Ok(g.named_constant(&name, array))
}
