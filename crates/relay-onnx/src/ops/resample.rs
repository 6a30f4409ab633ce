//! Resampling and block rearrangement: `Resize` and `Upsample` as separable gathers with
//! weights computed at import, `DepthToSpace` and `SpaceToDepth` as reshape–transpose–reshape.
//!
//! Shapes are static, so for each resized axis the input positions each output position reads
//! and their weights are known at import: ONNX's coordinate transformation gives the position
//! `x` in the input, then `nearest` reads one element (by `nearest_mode`), `linear` the two
//! around `x` and `cubic` four (`cubic_coeff_a`, `exclude_outside`; with `antialias`, wider
//! filters when downscaling), positions outside the input reading its edge (ONNX's reference
//! pads with edge values) or, for `tf_crop_and_resize`, the extrapolation value. The axis then becomes
//! `Σ_t take(x, index_t, axis) · weight_t`: constant index and weight vectors, one `take` per
//! tap; a whole-image `Resize` is one such step per axis that changes.

use crate::error::ConvertError;
use relay_runtime::NDArray;

use crate::attrs::{Attrs, axis};
use crate::builder::{Value, attr, floats_of, ints_of};
use crate::graph::Graph;
use crate::proto::NodeProto;

/// How output positions map back into the input along one axis.
struct Mapping<'a> {
    /// `coordinate_transformation_mode`.
    transform: &'a str,
    /// `mode`: nearest, linear, cubic.
    mode: &'a str,
    nearest: &'a str,
    cubic_a: f64,
    exclude_outside: bool,
    antialias: bool,
    /// `tf_crop_and_resize`'s region of interest on each axis (start, end; fractions of the
    /// input) and the value of positions outside it.
    roi: Vec<(f64, f64)>,
    extrapolation: f64,
}

/// The taps of one output position: input indices (inside the input) and weights, and
/// a constant added (`tf_crop_and_resize`'s extrapolation value outside the input).
type Taps = (Vec<(i64, f64)>, f64);

impl Mapping<'_> {
    /// The input coordinate of output position `o` of `out` along axis `ax` of `len` inputs,
    /// at `scale`.
    fn source(
        &self,
        ax: usize,
        o: i64,
        len: i64,
        out: i64,
        scale: f64,
    ) -> Result<f64, ConvertError> {
        // The output width as ONNX's reference reads it: `scale · len`, not rounded.
        let (o, n, m) = (o as f64, len as f64, scale * len as f64);
        Ok(match self.transform {
            "half_pixel" => (o + 0.5) / scale - 0.5,
            "half_pixel_symmetric" => {
                let adjustment = out as f64 / m;
                n / 2.0 * (1.0 - adjustment) + (o + 0.5) / scale - 0.5
            }
            "pytorch_half_pixel" if m > 1.0 => (o + 0.5) / scale - 0.5,
            "pytorch_half_pixel" => 0.0,
            "align_corners" if m != 1.0 => o * (n - 1.0) / (m - 1.0),
            "align_corners" => 0.0,
            "asymmetric" => o / scale,
            "tf_half_pixel_for_nn" => (o + 0.5) / scale,
            "tf_crop_and_resize" => {
                let (start, end) = self.roi.get(ax).copied().unwrap_or((0.0, 1.0));
                if out > 1 {
                    start * (n - 1.0) + o * (end - start) * (n - 1.0) / (m - 1.0)
                } else {
                    0.5 * (start + end) * (n - 1.0)
                }
            }
            other => return Err(format!("coordinate_transformation_mode `{other}`").into()),
        })
    }

    /// The coefficients of `mode` at `ratio` (in (0, 1]: the distance past the left tap) and
    /// the offset of the first tap from that left tap, as ONNX's reference computes them
    /// (antialiasing widens linear and cubic filters by `1 / scale` when downscaling).
    fn coefficients(
        &self,
        ratio: f64,
        scale: f64,
        integer: bool,
    ) -> Result<(i64, Vec<f64>), ConvertError> {
        let a = self.cubic_a;
        let cubic = |x: f64| {
            let x = x.abs();
            if x <= 1.0 {
                ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
            } else if x < 2.0 {
                ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
            } else {
                0.0
            }
        };
        let filter = |support: f64, f: &dyn Fn(f64) -> f64| {
            let scale = if self.antialias { scale.min(1.0) } else { 1.0 };
            let start = (-support / scale).floor() as i64 + 1;
            let end = 2 - start;
            let w: Vec<f64> = (start..end)
                .map(|i| f(scale * (i as f64 - ratio)))
                .collect();
            let sum: f64 = w.iter().sum();
            let w = if self.antialias {
                w.iter().map(|v| v / sum).collect()
            } else {
                w
            };
            (start, w)
        };
        Ok(match self.mode {
            "nearest" => {
                let up = match self.nearest {
                    _ if integer => true,
                    "round_prefer_floor" => ratio > 0.5,
                    "round_prefer_ceil" => ratio >= 0.5,
                    "floor" => false,
                    "ceil" => true,
                    other => return Err(format!("nearest_mode `{other}`").into()),
                };
                (0, vec![f64::from(u8::from(!up)), f64::from(u8::from(up))])
            }
            "linear" => filter(1.0, &|x: f64| (1.0 - x.abs()).clamp(0.0, 1.0)),
            "cubic" => filter(2.0, &cubic),
            other => return Err(format!("mode `{other}`").into()),
        })
    }

    /// The taps of output position `o` along axis `ax`.
    fn taps(
        &self,
        ax: usize,
        o: i64,
        len: i64,
        out: i64,
        scale: f64,
    ) -> Result<Taps, ConvertError> {
        let x = self.source(ax, o, len, out, scale)?;
        if self.transform == "tf_crop_and_resize" && !(0.0..=(len - 1) as f64).contains(&x) {
            return Ok((vec![(0, 0.0)], self.extrapolation));
        }
        // The left tap and the ratio past it, in (0, 1]: an integer position is the right
        // end of its interval (ONNX's reference prefers the pixel on the left).
        let integer = x.fract() == 0.0;
        let left = if integer {
            x as i64 - 1
        } else {
            x.floor() as i64
        };
        let ratio = x - left as f64;
        let (first, w) = self.coefficients(ratio, scale, integer)?;
        let taps: Vec<(i64, f64)> = w
            .into_iter()
            .enumerate()
            .map(|(k, w)| (left + first + k as i64, w))
            .collect();
        let clamp = |i: i64| i.clamp(0, len - 1);
        let taps = if self.exclude_outside {
            let inside: Vec<(i64, f64)> = taps
                .iter()
                .map(|&(i, w)| (clamp(i), if (0..len).contains(&i) { w } else { 0.0 }))
                .collect();
            let sum: f64 = inside.iter().map(|t| t.1).sum();
            inside.into_iter().map(|(i, w)| (i, w / sum)).collect()
        } else {
            taps.into_iter().map(|(i, w)| (clamp(i), w)).collect()
        };
        Ok((taps, 0.0))
    }
}

/// `x` resized along axis `ax` to `out` positions at `scale`.
fn resize_axis(
    g: &mut Graph,
    x: Value,
    ax: usize,
    out: i64,
    scale: f64,
    m: &Mapping<'_>,
) -> Result<Value, ConvertError> {
    let len = x.shape[ax];
    let mut per: Vec<Taps> = (0..out)
        .map(|o| m.taps(ax, o, len, out, scale))
        .collect::<Result<_, _>>()?;
    if m.mode == "nearest" {
        // The one tap of weight 1.
        for (taps, _) in &mut per {
            let best = taps
                .iter()
                .copied()
                .fold((0, f64::MIN), |b, t| if t.1 > b.1 { t } else { b });
            *taps = vec![best];
        }
    }
    // Every position gets as many taps (an extrapolated one has a single empty tap).
    let count = per.iter().map(|p| p.0.len()).max().unwrap_or(1);
    for (taps, _) in &mut per {
        taps.resize(count, (0, 0.0));
    }
    // Per-position vectors broadcast along the axis: `[out, 1, ...]` after it.
    let wshape: Vec<i64> = std::iter::once(out)
        .chain(std::iter::repeat_n(1, x.shape.len() - ax - 1))
        .collect();
    let dt = x.dtype;
    let vector = |g: &mut Graph, hint: &str, v: Vec<f64>| -> Result<Value, ConvertError> {
        let a = NDArray::from_f64_slice(dt, &wshape, &v).map_err(|e| e.to_string())?;
        Ok(g.constant(hint, a))
    };
    let exact = m.mode == "nearest" && per.iter().all(|p| p.1 == 0.0 && p.0[0].1 == 1.0);
    let mut sum: Option<Value> = None;
    for t in 0..count {
        let idx = g.int64_constant("resize_index", &[out], per.iter().map(|p| p.0[t].0))?;
        let mut term = g.call("take", &[&x, &idx], &[("axis", attr::int(ax as i64))])?;
        if !exact {
            let w = vector(g, "resize_weight", per.iter().map(|p| p.0[t].1).collect())?;
            term = g.call("multiply", &[&term, &w], &[])?;
        }
        sum = Some(match sum {
            None => term,
            Some(acc) => g.call("add", &[&acc, &term], &[])?,
        });
    }
    let sum = sum.ok_or("a resize of no taps")?;
    if per.iter().any(|p| p.1 != 0.0) {
        let c = vector(g, "resize_extrapolation", per.iter().map(|p| p.1).collect())?;
        return g.call("add", &[&sum, &c], &[]);
    }
    Ok(sum)
}

/// Resamples `x` to `sizes` at `scales` (one each per axis).
fn resample(
    g: &mut Graph,
    x: Value,
    sizes: &[i64],
    scales: &[f64],
    m: &Mapping<'_>,
) -> Result<Value, ConvertError> {
    if (m.mode != "nearest" || m.transform == "tf_crop_and_resize") && !x.dtype.is_float() {
        return Err(format!("{} resizing of {}", m.mode, x.dtype).into());
    }
    let mut y = x;
    for ax in 0..sizes.len() {
        if sizes[ax] == y.shape[ax] && scales[ax] == 1.0 {
            continue;
        }
        // The index and weight vectors hold one entry per output position.
        const MAX_POSITIONS: i64 = 1 << 20;
        if sizes[ax] <= 0
            || sizes[ax] > MAX_POSITIONS
            || y.shape[ax] == 0
            || !scales[ax].is_finite()
            || scales[ax] <= 0.0
        {
            return Err(format!("axis {ax} of {} resized to {}", y.shape[ax], sizes[ax]).into());
        }
        // An antialiasing filter spans 2·support/scale taps a position: at most 1024.
        if m.antialias && scales[ax] < 1.0 / 256.0 {
            return Err(format!(
                "antialiasing a {}-fold reduction (at most 256-fold)",
                1.0 / scales[ax]
            )
            .into());
        }
        y = resize_axis(g, y, ax, sizes[ax], scales[ax], m)?;
    }
    Ok(y)
}

/// `Resize` (opset 10 on): sizes or scales (constants), every mode, coordinate
/// transformation (`tf_crop_and_resize` with a constant roi), antialiasing and aspect-ratio
/// policy.
pub(super) fn resize(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let rank = x.shape.len();
    let policy = a.string("keep_aspect_ratio_policy", "stretch")?;
    // The resized axes: all, or `axes` (opset 18).
    let axes: Vec<usize> = match a.ints("axes")? {
        Some(v) => v.iter().map(|&k| axis(k, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let (scales_at, sizes_at) = if g.opset < 11 {
        (1, None)
    } else {
        (2, Some(3))
    };
    let given = |v: Option<Value>| v.filter(|v| v.shape.iter().product::<i64>() > 0);
    let scales = given(g.optional_input(node, scales_at)?);
    let sizes = match sizes_at {
        Some(i) => given(g.optional_input(node, i)?),
        None => None,
    };
    let (mut out, mut scale) = (x.shape.clone(), vec![1.0; rank]);
    let scales_given = scales.is_some();
    match (scales, sizes) {
        (Some(s), None) => {
            let s = floats_of(&s).ok_or("the scales are not a constant")?;
            if s.len() != axes.len() {
                return Err(format!("{} scales for {} axes", s.len(), axes.len()).into());
            }
            for (&ax, &f) in axes.iter().zip(&s) {
                scale[ax] = f;
                out[ax] = (x.shape[ax] as f64 * f).floor() as i64;
            }
        }
        (None, Some(n)) => {
            let n = ints_of(&n).ok_or("the sizes are not a constant")?;
            if n.len() != axes.len() {
                return Err(format!("{} sizes for {} axes", n.len(), axes.len()).into());
            }
            let ratios = axes
                .iter()
                .zip(&n)
                .map(|(&ax, &v)| v as f64 / x.shape[ax].max(1) as f64);
            // `not_larger`/`not_smaller`: one scale for every axis, the smallest or largest.
            let common = match policy.as_str() {
                "stretch" => None,
                "not_larger" => ratios.clone().reduce(f64::min),
                "not_smaller" => ratios.clone().reduce(f64::max),
                other => return Err(format!("keep_aspect_ratio_policy `{other}`").into()),
            };
            for ((&ax, &v), r) in axes.iter().zip(&n).zip(ratios) {
                let r = common.unwrap_or(r);
                scale[ax] = r;
                out[ax] = match common {
                    Some(r) => (x.shape[ax] as f64 * r).round() as i64,
                    None => v,
                };
            }
        }
        _ => return Err("exactly one of scales and sizes must be given".into()),
    }
    let (transform, mode, nearest) = (
        a.string("coordinate_transformation_mode", "half_pixel")?,
        a.string("mode", "nearest")?,
        a.string("nearest_mode", "round_prefer_floor")?,
    );
    let transform = if g.opset < 11 {
        "asymmetric".into()
    } else {
        transform
    };
    let mut roi = vec![(0.0, 1.0); rank];
    if transform == "tf_crop_and_resize" {
        let r = g
            .optional_input(node, 1)?
            .ok_or("tf_crop_and_resize needs a roi")?;
        let r = floats_of(&r).ok_or("the roi is not a constant")?;
        if r.len() != 2 * axes.len() {
            return Err(format!("a roi of {} values for {} axes", r.len(), axes.len()).into());
        }
        for (k, &ax) in axes.iter().enumerate() {
            roi[ax] = (r[k], r[axes.len() + k]);
            if scales_given {
                out[ax] =
                    (x.shape[ax] as f64 * (r[axes.len() + k] - r[k]) * scale[ax]).floor() as i64;
            }
        }
    }
    let m = Mapping {
        transform: &transform,
        mode: &mode,
        nearest: if g.opset < 11 { "floor" } else { &nearest },
        cubic_a: f64::from(a.float("cubic_coeff_a", -0.75)?),
        exclude_outside: a.int("exclude_outside", 0)? != 0,
        antialias: a.int("antialias", 0)? != 0,
        roi,
        extrapolation: f64::from(a.float("extrapolation_value", 0.0)?),
    };
    resample(g, x, &out, &scale, &m)
}

/// `Upsample` (opsets 7–9): `scales` from the attribute (7) or the second input (9), nearest
/// (floor) or linear, asymmetric coordinates.
pub(super) fn upsample(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let scales = match g.optional_input(node, 1)? {
        Some(s) => floats_of(&s).ok_or("the scales are not a constant")?,
        None => {
            a.0.iter()
                .find(|at| at.name == "scales")
                .map(|at| at.floats.iter().map(|&f| f64::from(f)).collect())
                .ok_or("the scales are missing")?
        }
    };
    if scales.len() != x.shape.len() {
        return Err(format!("{} scales for rank {}", scales.len(), x.shape.len()).into());
    }
    let out: Vec<i64> = x
        .shape
        .iter()
        .zip(&scales)
        .map(|(&n, &s)| (n as f64 * s).floor() as i64)
        .collect();
    let mode = a.string("mode", "nearest")?;
    let mode = if mode == "bilinear" {
        "linear".into()
    } else {
        mode
    };
    let m = Mapping {
        transform: "asymmetric",
        mode: &mode,
        nearest: "floor",
        cubic_a: -0.75,
        exclude_outside: false,
        antialias: false,
        roi: Vec::new(),
        extrapolation: 0.0,
    };
    resample(g, x, &out, &scales, &m)
}

/// `DepthToSpace` (DCR or CRD) and `SpaceToDepth` on NCHW data.
pub(super) fn depth_space(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Value, ConvertError> {
    let x = g.input(node, 0)?;
    let b = a.int("blocksize", 0)?;
    let &[n, c, h, w] = x.shape.as_slice() else {
        return Err(format!("input of shape {:?}", x.shape).into());
    };
    // Bounded, so that the products below cannot overflow.
    if !(1..=1 << 16).contains(&b) || [n, c, h, w].iter().any(|&d| d > 1 << 31) {
        return Err(format!("blocksize {b} for shape {:?}", x.shape).into());
    }
    let (inner, perm, out) = if node.op_type == "DepthToSpace" {
        if c % (b * b) != 0 {
            return Err(format!("{c} channels for blocksize {b}").into());
        }
        let co = c / (b * b);
        let out = vec![n, co, h * b, w * b];
        if a.string("mode", "DCR")? == "CRD" {
            (vec![n, co, b, b, h, w], vec![0, 1, 4, 2, 5, 3], out)
        } else {
            (vec![n, b, b, co, h, w], vec![0, 3, 4, 1, 5, 2], out)
        }
    } else {
        if h % b != 0 || w % b != 0 {
            return Err(format!("{h}×{w} for blocksize {b}").into());
        }
        (
            vec![n, c, h / b, b, w / b, b],
            vec![0, 3, 5, 1, 2, 4],
            vec![n, c * b * b, h / b, w / b],
        )
    };
    let inner = g.call("reshape", &[&x], &[("newshape", attr::ints(&inner))])?;
    let moved = g.call("transpose", &[&inner], &[("axes", attr::ints(&perm))])?;
    g.call("reshape", &[&moved], &[("newshape", attr::ints(&out))])
}
