//! Normalizations over windows of a tensor and the transposed convolution, written with
//! Relay's reductions, pools and `nn.conv2d`: `InstanceNormalization`, `LRN`,
//! `ConvTranspose`.

use super::{Attrs, float_text, list};
use crate::graph::{Graph, Value};
use crate::proto::NodeProto;

/// `[C]` reshaped to broadcast along axis 1 of a rank-`rank` tensor: `[C, 1, ...]`.
fn per_channel(g: &mut Graph, v: &Value, rank: usize) -> Value {
    let mut shape = v.shape.clone();
    shape.extend(std::iter::repeat_n(1, rank.saturating_sub(2)));
    g.bind(
        format!("reshape({}, newshape={})", v.expr, list(&shape)),
        shape,
        v.dtype,
    )
}

/// `InstanceNormalization`: each (batch, channel) plane normalized by its own mean and
/// variance, then scaled and shifted per channel.
pub(super) fn instance_norm(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, String> {
    let (x, scale, bias) = (g.input(node, 0)?, g.input(node, 1)?, g.input(node, 2)?);
    let rank = x.shape.len();
    if rank < 3 || scale.shape != [x.shape[1]] || bias.shape != [x.shape[1]] {
        return Err(format!(
            "input {:?} with scale {:?} and bias {:?}",
            x.shape, scale.shape, bias.shape
        ));
    }
    let axes: Vec<i64> = (2..rank as i64).collect();
    let eps = float_text(f64::from(a.float("epsilon", 1e-5)?), x.dtype);
    let (dt, shape) = (x.dtype, x.shape.clone());
    let centered = g.bind(
        format!(
            "subtract({x}, mean({x}, axis={}, keepdims=True))",
            list(&axes),
            x = x.expr
        ),
        shape.clone(),
        dt,
    );
    let (s, b) = (per_channel(g, &scale, rank), per_channel(g, &bias, rank));
    Ok(g.bind(
        format!(
            "add(multiply(divide({c}, sqrt(add(mean(multiply({c}, {c}), axis={}, keepdims=True), {eps}))), {}), {})",
            list(&axes),
            s.expr,
            b.expr,
            c = centered.expr
        ),
        shape,
        dt,
    ))
}

/// `LRN`: `x / (bias + alpha/size · Σ x²)^beta`, the sum over `size` channels around each
/// one — an average pool of `x²` over a `size × 1` window along the channels (padding
/// counted), times `size`.
pub(super) fn lrn(g: &mut Graph, node: &NodeProto, a: &Attrs<'_>) -> Result<Value, String> {
    let x = g.input(node, 0)?;
    let size = a.int("size", 0)?;
    let rank = x.shape.len();
    if size <= 0 || rank < 3 || !x.dtype.is_float() {
        return Err(format!("size {size} on {:?} {}", x.shape, x.dtype));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let rest: i64 = x.shape[2..].iter().product();
    let (lo, hi) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
    let f = |v: f64| float_text(v, x.dtype);
    let alpha = f64::from(a.float("alpha", 1e-4)?);
    let (beta, bias) = (
        f64::from(a.float("beta", 0.75)?),
        f64::from(a.float("bias", 1.0)?),
    );
    let mean = format!(
        "reshape(nn.avg_pool2d(reshape(multiply({x}, {x}), newshape={}), pool_size=[{size}, 1], strides=[1, 1], padding=[{lo}, 0, {hi}, 0], count_include_pad=True), newshape={})",
        list(&[n, 1, c, rest]),
        list(&x.shape),
        x = x.expr
    );
    Ok(g.bind(
        format!(
            "divide({}, power(add({}, multiply({}, {mean})), {}))",
            x.expr,
            f(bias),
            f(alpha),
            f(beta)
        ),
        x.shape.clone(),
        x.dtype,
    ))
}

/// A pair attribute of a 2-D window, or `default` twice.
fn pair(a: &Attrs<'_>, name: &str, default: i64) -> Result<[i64; 2], String> {
    match a.ints(name)?.as_deref() {
        None => Ok([default; 2]),
        Some(&[x, y]) => Ok([x, y]),
        Some(v) => Err(format!("`{name}` {v:?} (2-D windows take two)")),
    }
}

/// A `ConvTranspose`'s `group`, checked against its `c` input channels and the weights' `wc`.
pub(super) fn transpose_groups(a: &Attrs<'_>, c: i64, wc: i64, w: &Value) -> Result<i64, String> {
    let groups = a.int("group", 1)?;
    if groups <= 0 || wc != c || c % groups != 0 {
        return Err(format!(
            "{c} channels, weights {:?}, {groups} groups",
            w.shape
        ));
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
) -> Result<Value, String> {
    let (x, w) = (g.input(node, 0)?, g.input(node, 1)?);
    let (&[n, c, h, wd], &[wc, mg, kh, kw]) = (x.shape.as_slice(), w.shape.as_slice()) else {
        return Err(format!("input {:?} and weights {:?}", x.shape, w.shape));
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
            .ok_or_else(|| format!("output_shape {output_shape:?}"))?;
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
            Some(p) => return Err(format!("pads {p:?}")),
        }
    };
    let out = [full[0] - pads[0] - pads[2], full[1] - pads[1] - pads[3]];
    if out.iter().any(|&v| v <= 0) {
        return Err(format!("an output of {out:?}"));
    }
    let dt = x.dtype;
    // The input spread by the strides: [N, C, (H - 1)·sh + 1, (W - 1)·sw + 1].
    let spread = [0, 1].map(|i| (size[i] - 1) * s[i] + 1);
    let xs = if s == [1, 1] {
        x.expr.clone()
    } else {
        format!(
            "strided_slice(reshape(nn.pad(reshape({}, newshape={}), {}, pad_width=[[0, 0], [0, 0], [0, 0], [0, {}], [0, 0], [0, {}]]), newshape={}), begin=[0, 0, 0, 0], end={}, strides=[1, 1, 1, 1], axes=None)",
            x.expr,
            list(&[n, c, h, 1, wd, 1]),
            float_text(0.0, x.dtype),
            s[0] - 1,
            s[1] - 1,
            list(&[n, c, h * s[0], wd * s[1]]),
            list(&[n, c, spread[0], spread[1]])
        )
    };
    // Weights [C, M/g, kh, kw] → [M, C/g, kh, kw], flipped in both spatial axes.
    let m = mg
        .checked_mul(groups)
        .filter(|&m| m < LIMIT)
        .ok_or_else(|| format!("{mg} output channels in each of {groups} groups"))?;
    let wt = format!(
        "reverse(reverse(reshape(transpose(reshape({}, newshape={}), axes=[0, 2, 1, 3, 4]), newshape={}), axis=2), axis=3)",
        w.expr,
        list(&[groups, c / groups, mg, kh, kw]),
        list(&[m, c / groups, kh, kw])
    );
    // Convolution padding: extent - 1 - pads (output_padding at the end); negative: cropped.
    let conv_pad = [
        extent[0] - 1 - pads[0],
        extent[1] - 1 - pads[1],
        extent[0] - 1 - pads[2] + op[0],
        extent[1] - 1 - pads[3] + op[1],
    ];
    let padded = conv_pad.map(|p| p.max(0));
    let conv_out = [
        spread[0] + padded[0] + padded[2] - extent[0] + 1,
        spread[1] + padded[1] + padded[3] - extent[1] + 1,
    ];
    let mut y = g.bind(
        format!(
            "nn.conv2d({xs}, {wt}, padding={}, dilation={}, groups={groups}, channels={m}, kernel_size={})",
            list(&padded),
            list(&d),
            list(&[kh, kw])
        ),
        vec![n, m, conv_out[0], conv_out[1]],
        dt,
    );
    if conv_pad.iter().any(|&p| p < 0) {
        let begin = [0, 0, (-conv_pad[0]).max(0), (-conv_pad[1]).max(0)];
        let end = [n, m, begin[2] + out[0], begin[3] + out[1]];
        y = g.bind(
            format!(
                "strided_slice({}, begin={}, end={}, strides=[1, 1, 1, 1], axes=None)",
                y.expr,
                list(&begin),
                list(&end)
            ),
            vec![n, m, out[0], out[1]],
            dt,
        );
    }
    match g.optional_input(node, 2)? {
        None => Ok(y),
        Some(b) => Ok(g.bind(
            format!("nn.bias_add({}, {}, axis=1)", y.expr, b.expr),
            y.shape.clone(),
            dt,
        )),
    }
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
