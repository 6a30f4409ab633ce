//! Neural-network layers: 2-D convolutions and pools, normalizations, softmax, and the
//! matrix products (`MatMul` as `nn.dense` on constant weights, transposed once at import,
//! `nn.matmul` or `nn.batch_matmul` otherwise; `Gemm`).

use crate::error::ConvertError;
use relay_ir::AttrValue;
use relay_runtime::NDArray;

use crate::attrs::{Attrs, axis};
use crate::builder::{Value, attr, finite};
use crate::graph::{Graph, type_text};
use crate::proto::NodeProto;
use crate::symbolic::{ANY, is_dynamic, product, same};

/// The window geometry of a 2-D convolution or pool over an NCHW input of spatial size
/// `size`: explicit `pads` (top, left, bottom, right) or `auto_pad`'s, and the output size.
fn window(
    a: &Attrs<'_>,
    size: [i64; 2],
    kernel: [i64; 2],
    strides: [i64; 2],
    dilations: [i64; 2],
    ceil: bool,
) -> Result<([i64; 4], [i64; 2]), ConvertError> {
    // Bounded, so that the arithmetic below cannot overflow: no real window is this large.
    const LIMIT: i64 = 1 << 31;
    let out_of_range = |v: &i64| !(0..=LIMIT).contains(v);
    if size
        .iter()
        .chain(&kernel)
        .chain(&strides)
        .chain(&dilations)
        .any(out_of_range)
    {
        return Err(format!(
            "window sizes {size:?}, {kernel:?}, {strides:?}, {dilations:?} out of range"
        )
        .into());
    }
    let auto = a.string("auto_pad", "NOTSET")?;
    let extent = |d: usize| (kernel[d] - 1) * dilations[d] + 1;
    let pads = match auto.as_str() {
        "NOTSET" => match a.ints("pads")? {
            None => [0; 4],
            Some(p) if p.len() == 4 && !p.iter().any(out_of_range) => [p[0], p[1], p[2], p[3]],
            Some(p) => return Err(format!("pads {p:?} (2-D windows take four)").into()),
        },
        "VALID" => [0; 4],
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut p = [0; 4];
            for d in 0..2 {
                let out = (size[d] + strides[d] - 1) / strides[d];
                let total = ((out - 1) * strides[d] + extent(d) - size[d]).max(0);
                let (small, large) = (total / 2, total - total / 2);
                let (begin, end) = if auto == "SAME_UPPER" {
                    (small, large)
                } else {
                    (large, small)
                };
                p[d] = begin;
                p[d + 2] = end;
            }
            p
        }
        other => return Err(format!("auto_pad `{other}`").into()),
    };
    let mut out = [0; 2];
    for d in 0..2 {
        let span = size[d] + pads[d] + pads[d + 2] - extent(d);
        if span < 0 {
            return Err(format!("the window is larger than the padded input ({size:?})").into());
        }
        out[d] = if ceil {
            (span + strides[d] - 1) / strides[d]
        } else {
            span / strides[d]
        } + 1;
        // ONNX (and PyTorch): with ceil_mode, a last window that would start in the end
        // padding is dropped.
        if ceil && (out[d] - 1) * strides[d] >= size[d] + pads[d] {
            out[d] -= 1;
        }
    }
    Ok((pads, out))
}

/// The `ceil_mode` Relay's pool needs for the output size `out` ONNX gives: false when every
/// axis has the size rounding down gives (a dropped last window included), true when every
/// axis has the size rounding up gives; an axis of each kind is not supported.
fn relay_ceil(
    size: [i64; 2],
    pads: [i64; 4],
    extent: [i64; 2],
    strides: [i64; 2],
    out: [i64; 2],
) -> Result<bool, ConvertError> {
    let floor = [0, 1].map(|d| (size[d] + pads[d] + pads[d + 2] - extent[d]) / strides[d] + 1);
    if out == floor {
        Ok(false)
    } else if (0..2).all(|d| {
        out[d] != floor[d] || (size[d] + pads[d] + pads[d + 2] - extent[d]) % strides[d] == 0
    }) {
        Ok(true)
    } else {
        Err("ceil_mode dropping the last window along one axis only is not supported".into())
    }
}

/// Two values of an `INTS` attribute, or `default`.
fn pair(a: &Attrs<'_>, name: &str, default: i64) -> Result<[i64; 2], ConvertError> {
    match a.ints(name)? {
        None => Ok([default; 2]),
        Some(v) if v.len() == 2 && v.iter().all(|&x| x > 0) => Ok([v[0], v[1]]),
        Some(v) => Err(format!("{name} {v:?} (2-D windows take two positive values)").into()),
    }
}

/// The NCHW spatial size of `x` (rank 4 only).
pub(super) fn spatial(x: &Value) -> Result<[i64; 2], ConvertError> {
    match x.shape.as_slice() {
        &[_, _, h, w] => Ok([h, w]),
        s => Err(format!("only 2-D (NCHW) inputs are supported, not shape {s:?}").into()),
    }
}

/// `op(args, attrs)` whose result, of rank `rank`, begins with the dimensions `lead` (a
/// batch, its symbols kept); the other dimensions are the relation's.
fn led(
    g: &mut Graph,
    op: &str,
    args: &[&Value],
    attrs: &[(&str, AttrValue)],
    lead: &[i64],
    rank: usize,
) -> Result<Value, ConvertError> {
    if !is_dynamic(lead) {
        return g.call(op, args, attrs);
    }
    let mut hint = lead.to_vec();
    hint.resize(rank, ANY);
    g.call_as(op, args, attrs, &hint)
}

/// A float attribute holding `v` in `dtype` (an infinity: the largest finite value).
fn float_attr(v: f32, dtype: relay_runtime::DType) -> AttrValue {
    attr::float(finite(f64::from(v), dtype))
}

/// `Conv`: `nn.conv2d`, plus `nn.bias_add` for a bias.
pub(super) fn conv(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let (x, w) = (g.input(node, 0)?, g.input(node, 1)?);
    let size = spatial(&x)?;
    let &[o, _, kh, kw] = w.shape.as_slice() else {
        return Err(format!("weights of shape {:?}", w.shape).into());
    };
    let (strides, dilations) = (pair(a, "strides", 1)?, pair(a, "dilations", 1)?);
    let groups = a.int("group", 1)?;
    let (pads, _) = window(a, size, [kh, kw], strides, dilations, false)?;
    let attrs = [
        ("strides", attr::ints(&strides)),
        ("padding", attr::ints(&pads)),
        ("dilation", attr::ints(&dilations)),
        ("groups", attr::int(groups)),
        ("channels", attr::int(o)),
        ("kernel_size", attr::ints(&[kh, kw])),
    ];
    let y = led(g, "nn.conv2d", &[&x, &w], &attrs, &x.shape[..1], 4)?;
    with_bias(g, node, y)
}

/// `y` plus the channel bias of a convolution `node` (input 2), if it has one.
pub(super) fn with_bias(g: &mut Graph, node: &NodeProto, y: Value) -> Result<Value, ConvertError> {
    match g.optional_input(node, 2)? {
        None => Ok(y),
        Some(b) => g.call_as(
            "nn.bias_add",
            &[&y, &b],
            &[("axis", attr::int(1))],
            &y.shape,
        ),
    }
}

/// A 2-D pool's window: kernel, strides, dilations, pads (begin, begin, end, end), output
/// size, and whether Relay's `ceil_mode` is needed.
pub(super) struct PoolWindow {
    pub kernel: [i64; 2],
    pub strides: [i64; 2],
    pub dilations: [i64; 2],
    pub pads: [i64; 4],
    pub out: [i64; 2],
    pub ceil: bool,
}

/// The window of pool `node` over an input of spatial `size`.
pub(super) fn pool_window(a: &Attrs<'_>, size: [i64; 2]) -> Result<PoolWindow, ConvertError> {
    let kernel = a.ints("kernel_shape")?.ok_or("kernel_shape is required")?;
    let &[kh, kw] = kernel.as_slice() else {
        return Err(format!("kernel_shape {kernel:?}").into());
    };
    let strides = pair(a, "strides", 1)?;
    let dilations = pair(a, "dilations", 1)?;
    let ceil = a.int("ceil_mode", 0)? != 0;
    let (pads, out) = window(a, size, [kh, kw], strides, dilations, ceil)?;
    let extent = [0, 1].map(|d| (kernel[d] - 1) * dilations[d] + 1);
    let ceil = ceil && relay_ceil(size, pads, extent, strides, out)?;
    Ok(PoolWindow {
        kernel: [kh, kw],
        strides,
        dilations,
        pads,
        out,
        ceil,
    })
}

/// `MaxPool`, `AveragePool`: `nn.max_pool2d`, `nn.avg_pool2d`.
pub(super) fn pool(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    if node.output.len() > 1 && node.output.get(1).is_some_and(|o| !o.is_empty()) {
        return Err("MaxPool's indices output is supported for 2-D pools only".into());
    }
    let size = spatial(&x)?;
    let PoolWindow {
        kernel,
        strides,
        dilations,
        pads,
        ceil,
        ..
    } = pool_window(a, size)?;
    let mut attrs = vec![
        ("pool_size", attr::ints(&kernel)),
        ("strides", attr::ints(&strides)),
        ("padding", attr::ints(&pads)),
        ("ceil_mode", attr::bool(ceil)),
        ("dilation", attr::ints(&dilations)),
    ];
    let op = if node.op_type == "MaxPool" {
        "nn.max_pool2d"
    } else {
        let include = a.int("count_include_pad", 0)? != 0;
        attrs.push(("count_include_pad", attr::bool(include)));
        "nn.avg_pool2d"
    };
    led(g, op, &[&x], &attrs, &x.shape[..1], 4)
}

/// `GlobalAveragePool`, `GlobalMaxPool`.
pub(super) fn global_pool(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    spatial(&x)?;
    let op = if node.op_type == "GlobalAveragePool" {
        "nn.global_avg_pool2d"
    } else {
        "nn.global_max_pool2d"
    };
    led(g, op, &[&x], &[], &x.shape[..2], 4)
}

/// The normalized output of `nn.batch_norm` on `ins` (data, scale, bias, mean, variance)
/// with `epsilon`: the data's shape, symbols included.
fn batch_norm_call(g: &mut Graph, ins: &[&Value], epsilon: f32) -> Result<Value, ConvertError> {
    let x = ins[0];
    let attrs = [
        ("axis", attr::int(1)),
        ("epsilon", float_attr(epsilon, x.dtype)),
    ];
    let y = g.call_fields("nn.batch_norm", ins, &attrs)?.swap_remove(0);
    Ok(Value {
        shape: x.shape.clone(),
        ..y
    })
}

/// `BatchNormalization` in inference: `nn.batch_norm`'s first output.
pub(super) fn batch_norm(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    if node.output.iter().skip(1).any(|o| !o.is_empty()) || a.int("training_mode", 0)? != 0 {
        return Err(
            "training-mode BatchNormalization is supported from opset 14 (`training_mode`)".into(),
        );
    }
    let ins = (0..5)
        .map(|i| g.input(node, i))
        .collect::<Result<Vec<_>, _>>()?;
    let ins: Vec<&Value> = ins.iter().collect();
    batch_norm_call(g, &ins, a.float("epsilon", 1e-5)?)
}

/// `BatchNormalization` in training mode (opset 14 on): normalized by the batch's own mean
/// and (population) variance over every axis but the channels, and the running statistics
/// `input · momentum + current · (1 - momentum)` as outputs 1 and 2.
pub(super) fn batch_norm_training(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let ins = (0..5)
        .map(|i| g.input(node, i))
        .collect::<Result<Vec<_>, _>>()?;
    let x = &ins[0];
    let (dt, rank) = (x.dtype, x.shape.len());
    if rank < 2 {
        return Err(format!("input of shape {:?}", x.shape).into());
    }
    let axes: Vec<i64> = (0..rank as i64).filter(|&k| k != 1).collect();
    let reduce = [("axis", attr::ints(&axes)), ("keepdims", attr::bool(false))];
    let mean = g.call("mean", &[x], &reduce)?;
    let mut kept = vec![1; rank];
    kept[1] = x.shape[1];
    let mean_c = g.reshape(&mean, kept)?;
    let centered = g.call("subtract", &[x, &mean_c], &[])?;
    let square = g.call("multiply", &[&centered, &centered], &[])?;
    let var = g.call("mean", &[&square], &reduce)?;
    let epsilon = a.float("epsilon", 1e-5)?;
    let y = batch_norm_call(g, &[x, &ins[1], &ins[2], &mean, &var], epsilon)?;
    let momentum = f64::from(a.float("momentum", 0.9)?);
    let (keep, take) = (g.float(momentum, dt)?, g.float(1.0 - momentum, dt)?);
    let mut running = |old: &Value, current: &Value| -> Result<Value, ConvertError> {
        let old = g.call("multiply", &[old, &keep], &[])?;
        let current = g.call("multiply", &[current, &take], &[])?;
        g.call("add", &[&old, &current], &[])
    };
    let running_mean = running(&ins[3], &mean)?;
    let running_var = running(&ins[4], &var)?;
    Ok(vec![y, running_mean, running_var])
}

/// `LayerNormalization` over the axes from `axis` on: `nn.layer_norm` (a missing bias is
/// zeros), or, when the mean and inverse standard deviation are outputs too, the definition
/// written out (those two keep the normalized axes as 1s).
pub(super) fn layer_norm(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    if node.output.iter().skip(1).any(|o| !o.is_empty()) {
        return layer_norm_stats(g, node, a);
    }
    layer_norm_fused(g, node, a).map(|y| vec![y])
}

/// [`layer_norm`] with its statistics: `mean`, `inv = 1 / sqrt(mean((x - mean)²) + ε)`,
/// `y = (x - mean) · inv · scale + bias` (scale and bias broadcast numpy's way).
fn layer_norm_stats(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let (x, scale) = (g.input(node, 0)?, g.input(node, 1)?);
    let rank = x.shape.len();
    let k = axis(a.int("axis", -1)?, rank)?;
    let axes: Vec<i64> = (k as i64..rank as i64).collect();
    let reduce = [("axis", attr::ints(&axes)), ("keepdims", attr::bool(true))];
    let eps = g.float(f64::from(a.float("epsilon", 1e-5)?), x.dtype)?;
    let lead = &x.shape[..k];
    let mean = led(g, "mean", &[&x], &reduce, lead, rank)?;
    let centered = g.call("subtract", &[&x, &mean], &[])?;
    let square = g.call("multiply", &[&centered, &centered], &[])?;
    let var = led(g, "mean", &[&square], &reduce, lead, rank)?;
    let var = g.call("add", &[&var, &eps], &[])?;
    let inv = g.call("rsqrt", &[&var], &[])?;
    let y = g.call("multiply", &[&centered, &inv], &[])?;
    let mut y = g.call("multiply", &[&y, &scale], &[])?;
    if let Some(b) = g.optional_input(node, 2)? {
        y = g.call("add", &[&y, &b], &[])?;
    }
    Ok(vec![y, mean, inv])
}

/// [`layer_norm`] as `nn.layer_norm` over the normalized axes flattened into one.
fn layer_norm_fused(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let (x, scale) = (g.input(node, 0)?, g.input(node, 1)?);
    let rank = x.shape.len();
    let k = axis(a.int("axis", -1)?, rank)?;
    let bias = match g.optional_input(node, 2)? {
        Some(b) => b,
        None => {
            let zeros = NDArray::zeros(scale.dtype, &scale.shape).map_err(|e| e.to_string())?;
            g.constant("ln_bias", zeros)
        }
    };
    let eps = float_attr(a.float("epsilon", 1e-5)?, x.dtype);
    // Over the axes from `k` on: those flattened into one, and the scale and bias with them
    // (both are broadcast onto them; a full-shape one is reshaped, a smaller one is not
    // supported).
    let inner = product(&x.shape[k..]);
    if inner < 0 {
        return Err(format!(
            "normalizing the dynamic axes {k}.. of {}: give the model's symbolic dimensions \
             with --input-shape",
            type_text(&x.shape, x.dtype)
        )
        .into());
    }
    let flat = |g: &mut Graph, v: &Value| -> Result<Value, ConvertError> {
        if product(&v.shape) != inner {
            return Err(format!("a scale or bias of shape {:?} for axes {k}..", v.shape).into());
        }
        g.reshape(v, vec![inner])
    };
    let (scale, bias) = (flat(g, &scale)?, flat(g, &bias)?);
    let x2 = if k == rank - 1 {
        x.clone()
    } else {
        g.reshape(&x, vec![product(&x.shape[..k]), inner])?
    };
    let attrs = [("axis", attr::int(-1)), ("epsilon", eps)];
    let y = g.call_as("nn.layer_norm", &[&x2, &scale, &bias], &attrs, &x2.shape)?;
    if k == rank - 1 {
        return Ok(y);
    }
    if is_dynamic(&x.shape) {
        return g.call_as("reshape_like", &[&y, &x], &[], &x.shape);
    }
    g.reshape(&y, x.shape.clone())
}

/// `Softmax`, `LogSoftmax`: along `axis` from opset 13; before, over the flattened trailing
/// axes, which is the last axis alone when `axis` is the last.
pub(super) fn softmax(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    let default = if g.opset >= 13 { -1 } else { 1 };
    let k = axis(a.int("axis", default)?, rank)?;
    if g.opset < 13 && k != rank - 1 {
        return Err(format!(
            "{} of opset {} over axes {k}.. is not supported",
            node.op_type, g.opset
        )
        .into());
    }
    let f = if node.op_type == "Softmax" {
        "nn.softmax"
    } else {
        "nn.log_softmax"
    };
    g.call_as(f, &[&x], &[("axis", attr::int(k as i64))], &x.shape)
}

/// `ArgMax`, `ArgMin` along `axis` (the first index of the extreme, or the last with
/// `select_last_index`): `int64` indices.
pub(super) fn arg(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let k = axis(a.int("axis", 0)?, x.shape.len())?;
    // The last index of the extreme: the first one of the reversed axis, counted back.
    let last = a.int("select_last_index", 0)? != 0;
    if last && x.shape[k] < 0 {
        return Err(format!(
            "select_last_index along the dynamic axis {k}: give the model's symbolic \
             dimensions with --input-shape"
        )
        .into());
    }
    let data = if last {
        g.call_as("reverse", &[&x], &[("axis", attr::int(k as i64))], &x.shape)?
    } else {
        x.clone()
    };
    let keep = a.int("keepdims", 1)? != 0;
    // The symbols of the kept axes.
    let mut shape = x.shape.clone();
    if keep {
        shape[k] = 1;
    } else {
        shape.remove(k);
    }
    let f = if node.op_type == "ArgMax" {
        "argmax"
    } else {
        "argmin"
    };
    let attrs = [
        ("axis", attr::ints(&[k as i64])),
        ("keepdims", attr::bool(keep)),
    ];
    let i = g.call_as(f, &[&data], &attrs, &shape)?;
    let i = g.call(
        "cast",
        &[&i],
        &[("dtype", attr::str(relay_runtime::DType::I64))],
    )?;
    if !last {
        return Ok(i);
    }
    let end = g.int(x.shape[k] - 1, relay_runtime::DType::I64)?;
    g.call("subtract", &[&end, &i], &[])
}

/// Constant `w` (`k × n`) transposed into a new constant `n × k`, for `nn.dense`.
fn transposed_weight(g: &mut Graph, w: &Value) -> Option<Value> {
    let t = w.konst.as_ref()?.transposed_2d().ok()?;
    Some(g.constant("weight_t", t))
}

/// `a` (`… × k`) times `b` (`k × n`) as `nn.dense` on rows, `a` flattened to 2-D and the
/// result shaped back.
fn dense(g: &mut Graph, a: &Value, b: &Value) -> Result<Value, ConvertError> {
    let (k, n) = (b.shape[0], b.shape[1]);
    let lead: Vec<i64> = a.shape[..a.shape.len() - 1].to_vec();
    // Dynamic leading axes stay: `nn.dense` and `nn.matmul` take them as they are.
    let flat = a.shape.len() > 2 && !is_dynamic(&lead);
    let a2 = if flat {
        g.reshape(a, vec![lead.iter().product(), k])?
    } else {
        a.clone()
    };
    let rows = &a2.shape[..a2.shape.len() - 1];
    let rank = a2.shape.len();
    let y = match transposed_weight(g, b) {
        Some(wt) => led(
            g,
            "nn.dense",
            &[&a2, &wt],
            &[("units", attr::int(n))],
            rows,
            rank,
        )?,
        None => led(
            g,
            "nn.matmul",
            &[&a2, b],
            &[("units", attr::null())],
            rows,
            rank,
        )?,
    };
    if !flat {
        return Ok(y);
    }
    g.reshape(&y, [lead, vec![n]].concat())
}

/// `MatMul` (numpy's `matmul`): by a matrix, or batched with equal batch dimensions.
pub(super) fn matmul(g: &mut Graph, node: &NodeProto) -> Result<Value, ConvertError> {
    let (a, b) = (g.input(node, 0)?, g.input(node, 1)?);
    if a.shape.is_empty() || b.shape.is_empty() {
        return Err("MatMul of scalars".into());
    }
    // numpy's vectors: a row `[1, k]` on the left, a column `[k, 1]` on the right, the
    // added axis removed from the result.
    let (va, vb) = (a.shape.len() == 1, b.shape.len() == 1);
    let a = if va {
        g.reshape(&a, vec![1, a.shape[0]])?
    } else {
        a
    };
    let b = if vb {
        g.reshape(&b, vec![b.shape[0], 1])?
    } else {
        b
    };
    let y = matrices(g, &a, &b)?;
    let mut shape = y.shape.clone();
    let r = shape.len();
    match (va, vb) {
        (false, false) => return Ok(y),
        (true, true) => {
            shape.truncate(r - 2);
        }
        (true, false) => {
            shape.remove(r - 2);
        }
        (false, true) => {
            shape.pop();
        }
    }
    g.reshape(&y, shape)
}

/// [`matmul`] of operands of rank 2 or more: `nn.dense`/`nn.matmul` when the right one is
/// a matrix, else `nn.batch_matmul` over the batch axes broadcast numpy's way.
fn matrices(g: &mut Graph, a: &Value, b: &Value) -> Result<Value, ConvertError> {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (ka, kb) = (a.shape[ra - 1], b.shape[rb - 2]);
    // A dynamic side is checked at run time (by the product's kernel).
    if ka != kb && ka >= 0 && kb >= 0 {
        return Err(format!("MatMul of shapes {:?} and {:?}", a.shape, b.shape).into());
    }
    if rb == 2 {
        return dense(g, a, b);
    }
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    // Dynamic batch axes, or dynamic matrices between the same static batch axes (the
    // reshapes to and from `[batch, rows, cols]` below would need the symbols' values).
    let same_batches = a.shape[..ra - 2] == b.shape[..rb - 2];
    if is_dynamic(&a.shape[..ra - 2])
        || is_dynamic(&b.shape[..rb - 2])
        || same_batches && is_dynamic(&[m, k, n])
    {
        return dynamic_batches(g, a, b);
    }
    let lead = super::elementwise::broadcast(&a.shape[..ra - 2], &b.shape[..rb - 2])?;
    let batch = lead
        .iter()
        .try_fold(1i64, |p, &d| p.checked_mul(d))
        .filter(|&n| n < 1 << 48)
        .ok_or_else(|| ConvertError::from(format!("broadcast batch axes {lead:?}")))?;
    // Each operand broadcast to the common batch axes, then `[batch, rows, cols]`.
    let batched = |g: &mut Graph, v: &Value, rows: i64, cols: i64| -> Result<Value, ConvertError> {
        let full: Vec<i64> = lead.iter().copied().chain([rows, cols]).collect();
        let x = if v.shape == full {
            v.clone()
        } else {
            g.call("broadcast_to", &[v], &[("shape", attr::ints(&full))])?
        };
        g.reshape(&x, vec![batch, rows, cols])
    };
    let a3 = batched(g, a, m, k)?;
    let b3 = batched(g, b, k, n)?;
    let y = g.call("nn.batch_matmul", &[&a3, &b3], &batch_matmul_attrs())?;
    let mut shape = lead;
    shape.extend([m, n]);
    g.reshape(&y, shape)
}

/// `nn.batch_matmul`'s attributes for `[b, m, k]` by `[b, k, n]` (neither transposed).
fn batch_matmul_attrs() -> [(&'static str, AttrValue); 2] {
    [
        ("transpose_a", attr::bool(false)),
        ("transpose_b", attr::bool(false)),
    ]
}

/// [`matrices`] with the same batch axes on both sides, dynamic ones or static ones around
/// dynamic matrices (`[B, heads, S, d]` by `[B, heads, d, S]`; two dynamic ones are taken to
/// be equal, as ONNX Runtime checks at run time, and so does `nn.batch_matmul`): the batch
/// axes merged into one by Relay's `-3` code, one pair at a time, `nn.batch_matmul`, and the
/// result given `a`'s batch axes back by `reshape_like`.
fn dynamic_batches(g: &mut Graph, a: &Value, b: &Value) -> Result<Value, ConvertError> {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let lead = a.shape[..ra - 2].to_vec();
    let equal = ra == rb
        && lead
            .iter()
            .zip(&b.shape)
            .all(|(&x, &y)| same(x, y) || x < 0 && y < 0);
    if !equal {
        return Err(format!(
            "MatMul broadcasting dynamic batch axes ({} by {}): give the model's symbolic \
             dimensions with --input-shape",
            type_text(&a.shape, a.dtype),
            type_text(&b.shape, b.dtype)
        )
        .into());
    }
    let merged = |g: &mut Graph, v: &Value| -> Result<Value, ConvertError> {
        let mut v = v.clone();
        while v.shape.len() > 3 {
            let codes = [vec![-3], vec![0; v.shape.len() - 2]].concat();
            let shape = [vec![ANY], v.shape[2..].to_vec()].concat();
            v = g.call_as(
                "reshape",
                &[&v],
                &[("newshape", attr::ints(&codes))],
                &shape,
            )?;
        }
        Ok(v)
    };
    let (a3, b3) = (merged(g, a)?, merged(g, b)?);
    let (m, n) = (a.shape[ra - 2], b.shape[rb - 1]);
    let hint = [a3.shape[0], m, n];
    let y = g.call_as("nn.batch_matmul", &[&a3, &b3], &batch_matmul_attrs(), &hint)?;
    let shape = [lead.clone(), vec![m, n]].concat();
    if ra == 3 {
        return Ok(Value { shape, ..y });
    }
    let attrs = [
        ("lhs_begin", attr::int(0)),
        ("lhs_end", attr::int(1)),
        ("rhs_begin", attr::int(0)),
        ("rhs_end", attr::int(lead.len() as i64)),
    ];
    g.call_as("reshape_like", &[&y, a], &attrs, &shape)
}

/// `v` (a matrix) transposed, its dimensions' symbols swapped with it.
fn transposed(g: &mut Graph, v: &Value) -> Result<Value, ConvertError> {
    let shape = [v.shape[1], v.shape[0]];
    g.call_as("transpose", &[v], &[("axes", attr::ints(&[1, 0]))], &shape)
}

/// `Gemm`: `alpha · A' · B' + beta · C`.
pub(super) fn gemm(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let (mut x, mut w) = (g.input(node, 0)?, g.input(node, 1)?);
    if x.shape.len() != 2 || w.shape.len() != 2 {
        return Err("Gemm takes matrices".into());
    }
    if a.int("transA", 0)? != 0 {
        x = transposed(g, &x)?;
    }
    if a.int("transB", 0)? != 0 {
        w = match w.konst.as_ref() {
            // Already `n × k`: nn.dense reads it as it is.
            Some(_) => {
                let units = [("units", attr::int(w.shape[0]))];
                let y = led(g, "nn.dense", &[&x, &w], &units, &x.shape[..1], 2)?;
                return gemm_rest(g, node, a, y);
            }
            None => transposed(g, &w)?,
        };
    }
    let y = dense(g, &x, &w)?;
    gemm_rest(g, node, a, y)
}

/// `alpha · y + beta · C` of a `Gemm` whose product is `y`.
fn gemm_rest(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
    mut y: Value,
) -> Result<Value, ConvertError> {
    let (alpha, beta) = (a.float("alpha", 1.0)?, a.float("beta", 1.0)?);
    if alpha != 1.0 {
        let alpha = g.float(f64::from(alpha), y.dtype)?;
        y = g.call("multiply", &[&y, &alpha], &[])?;
    }
    if let Some(c) = g.optional_input(node, 2)? {
        let c = if beta == 1.0 {
            c
        } else {
            let beta = g.float(f64::from(beta), c.dtype)?;
            g.call("multiply", &[&c, &beta], &[])?
        };
        super::elementwise::broadcast(&y.shape, &c.shape)?;
        y = g.call("add", &[&y, &c], &[])?;
    }
    Ok(y)
}
