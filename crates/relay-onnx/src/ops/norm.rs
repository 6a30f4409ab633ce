//! Normalizations over windows of a tensor and the transposed convolution, written with
//! Relay's reductions, pools and `nn.conv2d`: `InstanceNormalization`, `LRN`,
//! `ConvTranspose`.

use crate::attrs::Attrs;
use crate::builder::{Value, attr};
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::proto::NodeProto;

/// `[C]` reshaped to broadcast along axis 1 of a rank-`rank` tensor: `[C, 1, ...]`.
fn per_channel(g: &mut Graph, v: &Value, rank: usize) -> Result<Value, ConvertError> {
    let mut shape = v.shape.clone();
    shape.extend(std::iter::repeat_n(1, rank.saturating_sub(2)));
    reshape(g, v, &shape)
}

/// `reshape(x, newshape=shape)` to a static shape.
fn reshape(g: &mut Graph, x: &Value, shape: &[i64]) -> Result<Value, ConvertError> {
    g.call("reshape", &[x], &[("newshape", attr::ints(shape))])
}

/// The mean of `x` over axes 2.. kept as 1s (`x`'s batch symbol kept).
fn plane_mean(g: &mut Graph, x: &Value) -> Result<Value, ConvertError> {
    let axes: Vec<i64> = (2..x.shape.len() as i64).collect();
    let mut shape = x.shape.clone();
    shape[2..].fill(1);
    let attrs = [("axis", attr::ints(&axes)), ("keepdims", attr::bool(true))];
    g.call_as("mean", &[x], &attrs, &shape)
}

/// `InstanceNormalization`: each (batch, channel) plane normalized by its own mean and
/// variance, then scaled and shifted per channel.
pub(super) fn instance_norm(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, scale, bias) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let rank = x.shape.len();
    if rank < 3 || scale.shape != [x.shape[1]] || bias.shape != [x.shape[1]] {
        return Err(format!(
            "input {:?} with scale {:?} and bias {:?}",
            x.shape, scale.shape, bias.shape
        )
        .into());
    }
    let eps = g.float(f64::from(a.float("epsilon", 1e-5)?), x.dtype)?;
    let mean = plane_mean(g, &x)?;
    let centered = g.call("subtract", &[&x, &mean], &[])?;
    let (s, b) = (per_channel(g, &scale, rank)?, per_channel(g, &bias, rank)?);
    let squares = g.call("multiply", &[&centered, &centered], &[])?;
    let variance = plane_mean(g, &squares)?;
    let variance = g.call("add", &[&variance, &eps], &[])?;
    let deviation = g.call("sqrt", &[&variance], &[])?;
    let normalized = g.call("divide", &[&centered, &deviation], &[])?;
    let scaled = g.call("multiply", &[&normalized, &s], &[])?;
    g.call("add", &[&scaled, &b], &[])
}

/// `LRN`: `x / (bias + alpha/size · Σ x²)^beta`, the sum over `size` channels around each
/// one — an average pool of `x²` over a `size × 1` window along the channels (padding
/// counted), times `size`.
pub(super) fn lrn(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let size = a.int("size", 0)?;
    let rank = x.shape.len();
    if size <= 0 || rank < 3 || !x.dtype.is_float() {
        return Err(format!("size {size} on {:?} {}", x.shape, x.dtype).into());
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let rest: i64 = x.shape[2..].iter().product();
    let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let alpha = g.float(f64::from(a.float("alpha", 1e-4)?), x.dtype)?;
    let beta = g.float(f64::from(a.float("beta", 0.75)?), x.dtype)?;
    let bias = g.float(f64::from(a.float("bias", 1.0)?), x.dtype)?;
    let squares = g.call("multiply", &[&x, &x], &[])?;
    let planes = reshape(g, &squares, &[n, 1, c, rest])?;
    let pooled = g.call(
        "nn.avg_pool2d",
        &[&planes],
        &[
            ("pool_size", attr::ints(&[size, 1])),
            ("strides", attr::ints(&[1, 1])),
            ("padding", attr::ints(&[lo, 0, hi, 0])),
            ("count_include_pad", attr::bool(true)),
        ],
    )?;
    let mean = reshape(g, &pooled, &x.shape)?;
    let scaled = g.call("multiply", &[&alpha, &mean], &[])?;
    let base = g.call("add", &[&bias, &scaled], &[])?;
    let divisor = g.call("power", &[&base, &beta], &[])?;
    g.call("divide", &[&x, &divisor], &[])
}

/// A pair attribute of a 2-D window, or `default` twice.
fn pair(a: &Attrs<'_>, name: &str, default: i64) -> Result<[i64; 2], ConvertError> {
    match a.ints(name)?.as_deref() {
        None => Ok([default; 2]),
        Some(&[x, y]) => Ok([x, y]),
        Some(v) => Err(format!("`{name}` {v:?} (2-D windows take two)").into()),
    }
}

/// A `ConvTranspose`'s `group`, checked against its `c` input channels and the weights' `wc`.
pub(super) fn transpose_groups(
    a: &Attrs<'_>,
    c: i64,
    wc: i64,
    w: &Value,
) -> Result<i64, ConvertError> {
    let groups = a.int("group", 1)?;
    if groups <= 0 || wc != c || c % groups != 0 {
        return Err(format!("{c} channels, weights {:?}, {groups} groups", w.shape).into());
    }
    Ok(groups)
}

/// `ConvTranspose` (2-D, NCHW): the input spread out by the strides (zeros between), then an
/// ordinary convolution with the weights flipped and their channel axes exchanged (per
/// group), padded by `dilation·(k - 1) - pads` (cropped where that is negative), plus the
/// bias.
pub(super) fn conv_transpose(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, w) = (g.input(node, 0)?, g.input(node, 1)?);
    let (&[n, c, h, wd], &[wc, mg, kh, kw]) = (x.shape.as_slice(), w.shape.as_slice()) else {
        return Err(format!("input {:?} and weights {:?}", x.shape, w.shape).into());
    };
    let groups = transpose_groups(a, c, wc, &w)?;
    let (s, d) = (pair(a, "strides", 1)?, pair(a, "dilations", 1)?);
    let op = pair(a, "output_padding", 0)?;
    const LIMIT: i64 = 1 << 20;
    if s.iter().chain(&d).any(|&v| !(1..LIMIT).contains(&v))
        || op.iter().any(|&v| !(0..LIMIT).contains(&v))
        || [h, wd, kh, kw].iter().any(|&v| !(1..LIMIT).contains(&v))
    {
        return Err("window sizes out of range".into());
    }
    let size = [h, wd];
    let extent = [(kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1];
    // The full output before padding is taken off: s·(n - 1) + extent + output_padding.
    let full = [0, 1].map(|i| s[i] * (size[i] - 1) + extent[i] + op[i]);
    let auto = a.string("auto_pad", "NOTSET")?;
    let output_shape = a.ints("output_shape")?;
    let pads: [i64; 4] = if output_shape.is_some() || auto.starts_with("SAME") {
        let target = o_or(&output_shape, size, s)
            .filter(|t| t.iter().all(|v| (1..LIMIT).contains(v)))
            .ok_or_else(|| ConvertError::from(format!("output_shape {output_shape:?}")))?;
        // ONNX: SAME_UPPER puts the odd padding at the end, otherwise at the start. An
        // output larger than the full one (ONNX Runtime) is padded at the end: a negative
        // end padding.
        let head = |i: usize| {
            let t = (full[i] - target[i]).max(0);
            if auto == "SAME_UPPER" {
                t / 2
            } else {
                t - t / 2
            }
        };
        let (t0, t1) = (head(0), head(1));
        [t0, t1, full[0] - t0 - target[0], full[1] - t1 - target[1]]
    } else {
        match a.ints("pads")?.as_deref() {
            None => [0; 4],
            Some(&[t, l, b, r]) if [t, l, b, r].iter().all(|v| (0..LIMIT).contains(v)) => {
                [t, l, b, r]
            }
            Some(p) => return Err(format!("pads {p:?}").into()),
        }
    };
    let out = [full[0] - pads[0] - pads[2], full[1] - pads[1] - pads[3]];
    if out.iter().any(|&v| v <= 0) {
        return Err(format!("an output of {out:?}").into());
    }
    // The input spread by the strides: [N, C, (H - 1)·sh + 1, (W - 1)·sw + 1].
    let xs = spread(g, &x, &s)?;
    let m = mg
        .checked_mul(groups)
        .filter(|&m| m < LIMIT)
        .ok_or_else(|| {
            ConvertError::from(format!("{mg} output channels in each of {groups} groups"))
        })?;
    let wt = flipped(g, &w, groups)?;
    // Convolution padding: extent - 1 - pads (output_padding at the end); negative: cropped.
    let conv_pad = [
        extent[0] - 1 - pads[0],
        extent[1] - 1 - pads[1],
        extent[0] - 1 - pads[2] + op[0],
        extent[1] - 1 - pads[3] + op[1],
    ];
    let padded = conv_pad.map(|p| p.max(0));
    let mut y = g.call(
        "nn.conv2d",
        &[&xs, &wt],
        &[
            ("padding", attr::ints(&padded)),
            ("dilation", attr::ints(&d)),
            ("groups", attr::int(groups)),
            ("channels", attr::int(m)),
            ("kernel_size", attr::ints(&[kh, kw])),
        ],
    )?;
    if conv_pad.iter().any(|&p| p < 0) {
        let begin = [0, 0, (-conv_pad[0]).max(0), (-conv_pad[1]).max(0)];
        let end = [n, m, begin[2] + out[0], begin[3] + out[1]];
        y = super::slice::window(g, &y, &begin, &end)?;
    }
    match g.optional_input(node, 2)? {
        None => Ok(y),
        Some(b) => g.call("nn.bias_add", &[&y, &b], &[("axis", attr::int(1))]),
    }
}

/// `x` (`[N, C, spatial...]`) spread by strides `s`: `s - 1` zeros between neighbours along
/// each spatial axis, `[N, C, (d - 1)·s + 1, ...]` (`x` itself for unit strides). Each axis
/// gets an axis of `s` beside it (the element, then zeros), flattened into it, and the
/// trailing zeros cut off.
pub(super) fn spread(g: &mut Graph, x: &Value, s: &[i64]) -> Result<Value, ConvertError> {
    if s.iter().all(|&v| v == 1) {
        return Ok(x.clone());
    }
    let (batch, dims) = x.shape.split_at(2);
    let mut inner = batch.to_vec();
    let mut width = vec![vec![0, 0]; 2];
    let (mut wide, mut end) = (batch.to_vec(), batch.to_vec());
    for (&d, &st) in dims.iter().zip(s) {
        inner.extend([d, 1]);
        width.extend([vec![0, 0], vec![0, st - 1]]);
        wide.push(d * st);
        end.push((d - 1) * st + 1);
    }
    let zero = g.float(0.0, x.dtype)?;
    let paired = reshape(g, x, &inner)?;
    let padded = g.call(
        "nn.pad",
        &[&paired, &zero],
        &[("pad_width", attr::int_lists(&width))],
    )?;
    let flat = reshape(g, &padded, &wide)?;
    super::slice::window(g, &flat, &vec![0; end.len()], &end)
}

/// A transposed convolution's weights `[C, M/g, k...]` as an ordinary one's: `[M, C/g, k...]`
/// (the channel axes exchanged per group), flipped along every spatial axis.
pub(super) fn flipped(g: &mut Graph, w: &Value, groups: i64) -> Result<Value, ConvertError> {
    let &[c, mg, ref kernel @ ..] = w.shape.as_slice() else {
        return Err(format!("weights of shape {:?}", w.shape).into());
    };
    let rank = w.shape.len() as i64;
    let grouped = [&[groups, c / groups, mg][..], kernel].concat();
    let perm: Vec<i64> = [0, 2, 1].into_iter().chain(3..=rank).collect();
    let m = [&[mg * groups, c / groups][..], kernel].concat();
    let grouped = reshape(g, w, &grouped)?;
    let swapped = g.call("transpose", &[&grouped], &[("axes", attr::ints(&perm))])?;
    let mut y = reshape(g, &swapped, &m)?;
    for k in 2..rank {
        y = g.call("reverse", &[&y], &[("axis", attr::int(k))])?;
    }
    Ok(y)
}

/// The target output size of a `ConvTranspose`: `output_shape`'s spatial sizes, or, for
/// `SAME_*` padding, the input size times the stride.
fn o_or(output_shape: &Option<Vec<i64>>, size: [i64; 2], s: [i64; 2]) -> Option<[i64; 2]> {
    match output_shape.as_deref() {
        Some(&[.., oh, ow]) => Some([oh, ow]),
        Some(_) => None,
        None => Some([size[0] * s[0], size[1] * s[1]]),
    }
}
