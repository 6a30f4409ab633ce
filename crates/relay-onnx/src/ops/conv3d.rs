//! A 3-D `Conv` (`[N, C, D, H, W]`) as 2-D convolutions over depth slices: relayc has no
//! `nn.conv3d` kernel, and a 3-D convolution is the sum, over the kernel's depth taps `k`, of
//! the 2-D convolution of the input's depth slices `k·dilation, k·dilation + stride, ...` (as a
//! batch of `N · D_out` images) with the weights' slice `k`. So each tap is one `nn.conv2d`
//! the contraction kernels run, and the input is transposed once to put depth beside the
//! batch:
//!
//! ```text
//! x [N, C, D, H, W] --pad depth, transpose--> [N, D', C, H, W]
//!   for k in 0..KD: slice depth k·dd + s·t (t < D_out) -> reshape [N·D_out, C, H, W]
//!                   conv2d with w[:, :, k] -> [N·D_out, O, H_out, W_out]
//! sum over k -> reshape [N, D_out, O, H_out, W_out] -> transpose [N, O, D_out, H_out, W_out]
//! ```
//!
//! Height and width keep every attribute of the 2-D operator (pads, `auto_pad`, strides,
//! dilations, groups); depth takes its own.

use super::nn;
use super::norm::{flipped, spread};
use super::slice::window;
use crate::attrs::Attrs;
use crate::builder::{Value, attr};
use crate::error::ConvertError;
use crate::graph::Graph;
use crate::proto::{AttributeProto, NodeProto};

/// The deepest 3-D kernel converted (each depth tap is one `nn.conv2d`).
const MAX_DEPTH_TAPS: i64 = 1024;

/// `Conv` of a rank-5 input.
pub(super) fn conv3d(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, w) = (g.input(node, 0)?, g.input(node, 1)?);
    let &[n, c, d, h, wd] = x.shape.as_slice() else {
        return Err(format!("input of shape {:?}", x.shape).into());
    };
    let &[o, cg, kd, kh, kw] = w.shape.as_slice() else {
        return Err(format!("weights of shape {:?} for a 3-D input", w.shape).into());
    };
    let triple = |name: &str, default: i64| -> Result<[i64; 3], ConvertError> {
        match a.ints(name)? {
            None => Ok([default; 3]),
            Some(v) if v.len() == 3 && v.iter().all(|&s| (1..1 << 31).contains(&s)) => {
                Ok([v[0], v[1], v[2]])
            }
            Some(v) => Err(format!("{name} {v:?} (3-D windows take three positive values)").into()),
        }
    };
    let (strides, dilations) = (triple("strides", 1)?, triple("dilations", 1)?);
    let (sd, dd) = (strides[0], dilations[0]);
    // One 2-D convolution per depth tap: real kernels have a handful.
    if !(1..=MAX_DEPTH_TAPS).contains(&kd) || d >= 1 << 31 {
        return Err(format!(
            "weights of shape {:?}: a 3-D kernel takes 1 to {MAX_DEPTH_TAPS} depth taps",
            w.shape
        )
        .into());
    }
    let extent = (kd - 1) * dd + 1;
    let (front, back, plane_pads) = depth_pads(a, d, sd, extent)?;
    let padded = d + front + back;
    if padded < extent {
        return Err(
            format!("a depth window of {extent} does not fit the padded depth {padded}").into(),
        );
    }
    let od = (padded - extent) / sd + 1;

    // [N, D', C, H, W]: depth beside the batch, zero-padded.
    let mut e = x.clone();
    if front + back > 0 {
        let zero = g.float(0.0, x.dtype)?;
        let width = [[0, 0], [0, 0], [front, back], [0, 0], [0, 0]].map(Vec::from);
        e = g.call(
            "nn.pad",
            &[&e, &zero],
            &[("pad_width", attr::int_lists(&width))],
        )?;
    }
    let deep = transpose(g, &e)?;
    let key = |s: String| format!("\u{0}conv3d{s}:{}", node.output.first().map_or("", |o| o));
    let mut sum: Option<Value> = None;
    for k in 0..kd {
        let start = k * dd;
        let slice = g.call(
            "strided_slice",
            &[&deep],
            &[
                ("begin", attr::ints(&[0, start, 0, 0, 0])),
                ("end", attr::ints(&[n, start + (od - 1) * sd + 1, c, h, wd])),
                ("strides", attr::ints(&[1, sd, 1, 1, 1])),
                ("axes", attr::null()),
            ],
        )?;
        let images = reshape(g, &slice, &[n * od, c, h, wd])?;
        let tap = window(g, &w, &[0, 0, k, 0, 0], &[o, cg, k + 1, kh, kw])?;
        let taps = reshape(g, &tap, &[o, cg, kh, kw])?;
        g.define(key(format!("x{k}")), images);
        g.define(key(format!("w{k}")), taps);
        let mut planar = node.clone();
        planar.input = vec![key(format!("x{k}")), key(format!("w{k}"))];
        planar.attribute = plane_attributes(node, plane_pads.as_deref());
        let y = nn::conv(g, &planar, &Attrs(&planar.attribute))?;
        sum = Some(match sum {
            None => y,
            Some(s) => g.call("add", &[&s, &y], &[])?,
        });
    }
    let y = sum.ok_or("a 3-D kernel of depth 0")?;
    let (oh, ow) = (y.shape[2], y.shape[3]);
    let y = reshape(g, &y, &[n, od, o, oh, ow])?;
    let y = transpose(g, &y)?;
    nn::with_bias(g, node, y)
}

/// `reshape(x, newshape=shape)` to a static shape.
fn reshape(g: &mut Graph, x: &Value, shape: &[i64]) -> Result<Value, ConvertError> {
    g.call("reshape", &[x], &[("newshape", attr::ints(shape))])
}

/// `x` with axes 1 and 2 exchanged (depth and channels).
fn transpose(g: &mut Graph, x: &Value) -> Result<Value, ConvertError> {
    g.call("transpose", &[x], &[("axes", attr::ints(&[0, 2, 1, 3, 4]))])
}

/// The depth padding (front, back) and the height/width `pads` (`None` under `auto_pad`,
/// which the 2-D convolution then applies to height and width itself).
fn depth_pads(
    a: &Attrs<'_>,
    d: i64,
    stride: i64,
    extent: i64,
) -> Result<(i64, i64, Option<Vec<i64>>), ConvertError> {
    let auto = a.string("auto_pad", "NOTSET")?;
    Ok(match auto.as_str() {
        "NOTSET" => match a.ints("pads")? {
            None => (0, 0, None),
            Some(p) if p.len() == 6 && p.iter().all(|v| (0..1 << 31).contains(v)) => {
                (p[0], p[3], Some(vec![p[1], p[2], p[4], p[5]]))
            }
            Some(p) => return Err(format!("pads {p:?} (3-D windows take six)").into()),
        },
        "VALID" => (0, 0, None),
        "SAME_UPPER" | "SAME_LOWER" => {
            let out = (d + stride - 1) / stride;
            let total = ((out - 1) * stride + extent - d).max(0);
            let (small, large) = (total / 2, total - total / 2);
            if auto == "SAME_UPPER" {
                (small, large, None)
            } else {
                (large, small, None)
            }
        }
        other => return Err(format!("auto_pad `{other}`").into()),
    })
}

/// The 2-D convolution's attributes: each window attribute without its depth entry, `pads`
/// replaced by the height/width ones.
fn plane_attributes(node: &NodeProto, pads: Option<&[i64]>) -> Vec<AttributeProto> {
    node.attribute
        .iter()
        .filter_map(|attr| {
            let ints = match attr.name.as_str() {
                "kernel_shape" | "strides" | "dilations" => attr.ints.get(1..)?.to_vec(),
                "pads" => pads?.to_vec(),
                _ => return Some(attr.clone()),
            };
            Some(AttributeProto {
                ints,
                ..attr.clone()
            })
        })
        .collect()
}

/// `ConvTranspose` of a rank-5 input, as ONNX Runtime computes the 2-D one here
/// (`norm::conv_transpose`): the input spread by the strides, the weights' channels swapped
/// and their taps reversed, and a 3-D convolution of stride 1 ([`conv3d`]) padded by
/// `extent - 1 - pads` (negative: cropped after).
pub(super) fn conv_transpose3d(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let (x, w) = (g.input(node, 0)?, g.input(node, 1)?);
    let (&[n, c, dd, h, wd], &[wc, mg, kd, kh, kw]) = (x.shape.as_slice(), w.shape.as_slice())
    else {
        return Err(format!("input {:?} and weights {:?}", x.shape, w.shape).into());
    };
    let groups = super::norm::transpose_groups(a, c, wc, &w)?;
    const LIMIT: i64 = 1 << 20;
    let triple = |name: &str, default: i64, low: i64| -> Result<[i64; 3], ConvertError> {
        match a.ints(name)?.as_deref() {
            None => Ok([default; 3]),
            Some(&[p, q, r]) if [p, q, r].iter().all(|v| (low..LIMIT).contains(v)) => Ok([p, q, r]),
            Some(v) => Err(format!("{name} {v:?} (3-D windows take three)").into()),
        }
    };
    let (s, d, op) = (
        triple("strides", 1, 1)?,
        triple("dilations", 1, 1)?,
        triple("output_padding", 0, 0)?,
    );
    let size = [dd, h, wd];
    let kernel = [kd, kh, kw];
    if size.iter().chain(&kernel).any(|v| !(1..LIMIT).contains(v)) {
        return Err("window sizes out of range".into());
    }
    let extent = [0, 1, 2].map(|i| (kernel[i] - 1) * d[i] + 1);
    let full = [0, 1, 2].map(|i| s[i] * (size[i] - 1) + extent[i] + op[i]);
    let pads = transpose_pads(a, size, s, full)?;
    let out = [0, 1, 2].map(|i| full[i] - pads[i] - pads[i + 3]);
    if out.iter().any(|&v| v <= 0) {
        return Err(format!("an output of {out:?}").into());
    }
    let xv = spread(g, &x, &s)?;
    let m = mg * groups;
    let wv = flipped(g, &w, groups)?;
    let key = |s: &str| format!("\u{0}convt3d{s}:{}", node.output.first().map_or("", |o| o));
    g.define(key("x"), xv);
    g.define(key("w"), wv);
    // The convolution's padding: extent - 1 - pads (output_padding at the end).
    let conv_pad: Vec<i64> = (0..6)
        .map(|j| extent[j % 3] - 1 - pads[j] + if j >= 3 { op[j - 3] } else { 0 })
        .collect();
    let int_attr = |name: &str, ints: Vec<i64>| AttributeProto {
        name: name.into(),
        r#type: crate::proto::attribute_type::INTS,
        ints,
        ..Default::default()
    };
    let mut conv = node.clone();
    conv.op_type = "Conv".into();
    conv.input = vec![key("x"), key("w")];
    conv.attribute = vec![
        int_attr("pads", conv_pad.iter().map(|p| (*p).max(0)).collect()),
        int_attr("dilations", d.to_vec()),
        int_attr("kernel_shape", kernel.to_vec()),
        AttributeProto {
            name: "group".into(),
            r#type: crate::proto::attribute_type::INT,
            i: groups,
            ..Default::default()
        },
    ];
    let mut y = conv3d(g, &conv, &Attrs(&conv.attribute))?;
    if conv_pad.iter().any(|&p| p < 0) {
        let begin: Vec<i64> = [0, 0]
            .into_iter()
            .chain((0..3).map(|i| (-conv_pad[i]).max(0)))
            .collect();
        let end: Vec<i64> = [n, m]
            .into_iter()
            .chain((0..3).map(|i| begin[i + 2] + out[i]))
            .collect();
        y = window(g, &y, &begin, &end)?;
    }
    nn::with_bias(g, node, y)
}

/// A 3-D `ConvTranspose`'s pads (begin ×3, end ×3): from `output_shape` or `auto_pad`
/// (SAME_UPPER puts the odd one at the end; an output larger than the full one is a negative
/// end padding), else the `pads` attribute.
fn transpose_pads(
    a: &Attrs<'_>,
    size: [i64; 3],
    s: [i64; 3],
    full: [i64; 3],
) -> Result<[i64; 6], ConvertError> {
    let auto = a.string("auto_pad", "NOTSET")?;
    let output_shape = a.ints("output_shape")?;
    if output_shape.is_none() && !auto.starts_with("SAME") {
        return match a.ints("pads")?.as_deref() {
            None => Ok([0; 6]),
            Some(p) if p.len() == 6 && p.iter().all(|v| (0..1 << 20).contains(v)) => {
                Ok([p[0], p[1], p[2], p[3], p[4], p[5]])
            }
            Some(p) => Err(format!("pads {p:?} (3-D windows take six)").into()),
        };
    }
    let target = match output_shape.as_deref() {
        Some(&[.., od, oh, ow]) => [od, oh, ow],
        Some(v) => return Err(format!("output_shape {v:?}").into()),
        None => [0, 1, 2].map(|i| size[i] * s[i]),
    };
    if target.iter().any(|v| !(1..1 << 20).contains(v)) {
        return Err(format!("output_shape {target:?}").into());
    }
    let mut pads = [0; 6];
    for i in 0..3 {
        let t = (full[i] - target[i]).max(0);
        let head = if auto == "SAME_UPPER" {
            t / 2
        } else {
            t - t / 2
        };
        pads[i] = head;
        pads[i + 3] = full[i] - head - target[i];
    }
    Ok(pads)
}
