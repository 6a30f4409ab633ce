//! Convolutions: the table entries of every `nn.conv*` operator and its variants, and the type
//! relation, reference evaluation and compute definition of `nn.conv2d` (NCHW data, OIHW
//! kernels, groups, strides, padding and dilation; other layouts through [`Relayout`]).

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, IterVar, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, NDArray, OpPattern as P,
    OpSchema, Type, TypeKind, Value,
};

use super::layout::Relayout;
use super::{
    DATA_WEIGHT, Num, arg, checked, clamp_index, concrete, contraction, contraction_dtype, count,
    differ, dilated, in_range, ix, ix_mul, ix_sub, padding4, positive_pair, read_as, require_nchw,
    require_rank, unify, window_dim,
};
use crate::compute::{self, ix_add};
use crate::support::{
    attr_int, attr_opt_int, attr_opt_ints, dim_text, inputs_n, tensor, tensor_type,
};
use crate::{dtype, field, nullable, op, required};

/// The fields of `Conv1DAttrs`, `Conv2DAttrs` and `Conv3DAttrs`, which differ only in their
/// defaults.
const fn conv_attrs(
    ones: &'static [i64],
    padding: &'static [i64],
    data_layout: &'static str,
    kernel_layout: &'static str,
) -> [AttrField; 10] {
    [
        field("strides", K::IntArray, D::Ints(ones)),
        field("padding", K::IntArray, D::Ints(padding)),
        field("dilation", K::IntArray, D::Ints(ones)),
        field("groups", K::Int, D::Int(1)),
        nullable("channels", K::Int),
        nullable("kernel_size", K::IntArray),
        field("data_layout", K::Str, D::Str(data_layout)),
        field("kernel_layout", K::Str, D::Str(kernel_layout)),
        field("out_layout", K::Str, D::Str("")),
        dtype("out_dtype"),
    ]
}

/// The fields of the transposed-convolution attrs, which lead with `channels` and
/// `kernel_size`.
const fn conv_transpose_attrs(
    ones: &'static [i64],
    zeros: &'static [i64],
    data_layout: &'static str,
    kernel_layout: &'static str,
) -> [AttrField; 11] {
    [
        nullable("channels", K::Int),
        nullable("kernel_size", K::IntArray),
        field("strides", K::IntArray, D::Ints(ones)),
        field("output_padding", K::IntArray, D::Ints(zeros)),
        field("padding", K::IntArray, D::Ints(zeros)),
        field("dilation", K::IntArray, D::Ints(ones)),
        field("groups", K::Int, D::Int(1)),
        field("data_layout", K::Str, D::Str(data_layout)),
        field("kernel_layout", K::Str, D::Str(kernel_layout)),
        field("out_layout", K::Str, D::Str("")),
        dtype("out_dtype"),
    ]
}

const CONV1D_ATTRS: &[AttrField] = &conv_attrs(&[1], &[0, 0], "NCW", "OIW");
/// `Conv2DAttrs`, also used by the NCHWc, gemm and backward-weight variants and `qnn.conv2d`.
pub(crate) const CONV2D_ATTRS: &[AttrField] = &conv_attrs(&[1, 1], &[0, 0], "NCHW", "OIHW");
const CONV3D_ATTRS: &[AttrField] = &conv_attrs(&[1, 1, 1], &[0, 0, 0], "NCDHW", "OIDHW");

const CONV1D_TRANSPOSE_ATTRS: &[AttrField] = &conv_transpose_attrs(&[1], &[0], "NCW", "IOW");
/// `Conv2DTransposeAttrs`, also used by `qnn.conv2d_transpose`.
pub(crate) const CONV2D_TRANSPOSE_ATTRS: &[AttrField] =
    &conv_transpose_attrs(&[1, 1], &[0, 0], "NCHW", "IOHW");
const CONV3D_TRANSPOSE_ATTRS: &[AttrField] =
    &conv_transpose_attrs(&[1, 1, 1], &[0, 0, 0], "NCDHW", "IODHW");

/// `Conv2DWinogradAttrs`: `tile_size` and then the `Conv2DAttrs` fields.
const CONV2D_WINOGRAD_ATTRS: &[AttrField] = &[
    required("tile_size", K::Int),
    field("strides", K::IntArray, D::Ints(&[1, 1])),
    field("padding", K::IntArray, D::Ints(&[0, 0])),
    field("dilation", K::IntArray, D::Ints(&[1, 1])),
    field("groups", K::Int, D::Int(1)),
    nullable("channels", K::Int),
    nullable("kernel_size", K::IntArray),
    field("data_layout", K::Str, D::Str("NCHW")),
    field("kernel_layout", K::Str, D::Str("OIHW")),
    field("out_layout", K::Str, D::Str("")),
    dtype("out_dtype"),
];

/// `Conv3DWinogradAttrs`: `tile_size` and then the `Conv3DAttrs` fields.
const CONV3D_WINOGRAD_ATTRS: &[AttrField] = &[
    required("tile_size", K::Int),
    field("strides", K::IntArray, D::Ints(&[1, 1, 1])),
    field("padding", K::IntArray, D::Ints(&[0, 0, 0])),
    field("dilation", K::IntArray, D::Ints(&[1, 1, 1])),
    field("groups", K::Int, D::Int(1)),
    nullable("channels", K::Int),
    nullable("kernel_size", K::IntArray),
    field("data_layout", K::Str, D::Str("NCDHW")),
    field("kernel_layout", K::Str, D::Str("OIDHW")),
    field("out_layout", K::Str, D::Str("")),
    dtype("out_dtype"),
];

/// `ConvWinogradWeightTransformAttrs`.
const WINOGRAD_WEIGHT_TRANSFORM_ATTRS: &[AttrField] = &[required("tile_size", K::Int)];

/// The convolutions.
pub(super) static OPS: &[OpSchema] = &[
    // Convolutions.
    op(
        "nn.conv1d",
        DATA_WEIGHT,
        "relay.attrs.Conv1DAttrs",
        CONV1D_ATTRS,
    ),
    op(
        "nn.conv2d",
        DATA_WEIGHT,
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    )
    .with(P::OutEWiseFusable, conv2d_rel, conv2d_eval)
    .with_compute(conv2d_te),
    op(
        "nn.conv3d",
        DATA_WEIGHT,
        "relay.attrs.Conv3DAttrs",
        CONV3D_ATTRS,
    ),
    op(
        "nn.conv1d_transpose",
        DATA_WEIGHT,
        "relay.attrs.Conv1DTransposeAttrs",
        CONV1D_TRANSPOSE_ATTRS,
    ),
    op(
        "nn.conv2d_transpose",
        DATA_WEIGHT,
        "relay.attrs.Conv2DTransposeAttrs",
        CONV2D_TRANSPOSE_ATTRS,
    ),
    op(
        "nn.conv3d_transpose",
        DATA_WEIGHT,
        "relay.attrs.Conv3DTransposeAttrs",
        CONV3D_TRANSPOSE_ATTRS,
    ),
    op(
        "nn.deformable_conv2d",
        &["data", "offset", "weight"],
        "relay.attrs.DeformableConv2DAttrs",
        &[
            field("strides", K::IntArray, D::Ints(&[1, 1])),
            field("padding", K::IntArray, D::Ints(&[0, 0])),
            field("dilation", K::IntArray, D::Ints(&[1, 1])),
            field("deformable_groups", K::Int, D::Int(1)),
            field("groups", K::Int, D::Int(1)),
            nullable("channels", K::Int),
            nullable("kernel_size", K::IntArray),
            field("data_layout", K::Str, D::Str("NCHW")),
            field("kernel_layout", K::Str, D::Str("OIHW")),
            field("out_layout", K::Str, D::Str("")),
            dtype("out_dtype"),
        ],
    ),
    op(
        "nn.conv2d_backward_weight",
        &["grad", "data"],
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    ),
    op(
        "nn.contrib_conv2d_NCHWc",
        DATA_WEIGHT,
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    )
    .with(P::OutEWiseFusable, conv2d_rel, conv2d_eval)
    .with_compute(conv2d_te),
    op(
        "nn.contrib_depthwise_conv2d_NCHWc",
        DATA_WEIGHT,
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        depthwise_nchwc_rel,
        depthwise_nchwc_eval,
    )
    .with_compute(depthwise_nchwc_te),
    op(
        "nn.contrib_conv2d_gemm_without_weight_transform",
        DATA_WEIGHT,
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    ),
    op(
        "nn.contrib_conv2d_gemm_weight_transform",
        &["weights"],
        "relay.attrs.ConvGemmWeightTransformAttrs",
        &[required("tile_N", K::Int), required("tile_K", K::Int)],
    ),
    op(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        DATA_WEIGHT,
        "relay.attrs.Conv2DWinogradAttrs",
        CONV2D_WINOGRAD_ATTRS,
    ),
    op(
        "nn.contrib_conv3d_winograd_without_weight_transform",
        DATA_WEIGHT,
        "relay.attrs.Conv3DWinogradAttrs",
        CONV3D_WINOGRAD_ATTRS,
    ),
    op(
        "nn.contrib_conv2d_winograd_weight_transform",
        &["weight"],
        "relay.attrs.ConvWinogradWeightTransformAttrs",
        WINOGRAD_WEIGHT_TRANSFORM_ATTRS,
    ),
    op(
        "nn.contrib_conv3d_winograd_weight_transform",
        &["weight"],
        "relay.attrs.ConvWinogradWeightTransformAttrs",
        WINOGRAD_WEIGHT_TRANSFORM_ATTRS,
    ),
    op(
        "nn.contrib_conv2d_winograd_nnpack_weight_transform",
        &["weight"],
        "relay.attrs.Conv2DWinogradNNPACKWeightTransformAttrs",
        &[
            required("convolution_algorithm", K::Int),
            dtype("out_dtype"),
        ],
    ),
    op(
        "nn.bitserial_conv2d",
        DATA_WEIGHT,
        "relay.attrs.BinaryConv2DAttrs",
        &[
            field("strides", K::IntArray, D::Ints(&[1, 1])),
            field("padding", K::IntArray, D::Ints(&[0, 0])),
            field("kernel_size", K::IntArray, D::Ints(&[3, 3])),
            nullable("channels", K::Int),
            field("activation_bits", K::Int, D::Int(1)),
            field("weight_bits", K::Int, D::Int(1)),
            field("data_layout", K::Str, D::Str("NCHW")),
            field("kernel_layout", K::Str, D::Str("OIHW")),
            dtype("pack_dtype"),
            dtype("out_dtype"),
            field("unipolar", K::Bool, D::Bool(true)),
        ],
    ),
];

// ----- Type relation and reference evaluation -----

/// The attributes that shape `nn.conv2d`'s computation.
struct Conv2d {
    strides: [i64; 2],
    /// Top, left, bottom, right.
    padding: [i64; 4],
    dilation: [i64; 2],
    groups: i64,
}

impl Conv2d {
    fn new(attrs: &Attrs) -> Result<Conv2d, OpError> {
        let groups = attr_int(attrs, "groups")?;
        if groups < 1 {
            return Err(OpError::attribute(
                "groups",
                format!("`groups` must be positive, got {groups}"),
            ));
        }
        Ok(Conv2d {
            strides: positive_pair(attrs, "strides")?,
            padding: padding4(attrs)?,
            dilation: positive_pair(attrs, "dilation")?,
            groups,
        })
    }
}

/// `nn.conv2d(data[n, c, h, w], weight[o, c / groups, kh, kw]) -> [n, o, oh, ow]`.
fn conv2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    if let Some(r) = Relayout::of(attrs, "data_layout", Some("kernel_layout"))? {
        return r.relation(types, conv2d_rel);
    }
    let [data, weight] = inputs_n::<2>(types)?;
    let (ds, dd) = tensor_type(data, "conv2d data")?;
    let (ws, wd) = tensor_type(weight, "conv2d weight")?;
    require_nchw(attrs, "data_layout", Some("kernel_layout"))?;
    let dtype = contraction_dtype(
        attrs,
        (data, dd, "conv2d data"),
        (weight, wd, "conv2d weight"),
    )?;
    require_rank(data, ds, 4, "conv2d data", "NCHW")?;
    require_rank(weight, ws, 4, "conv2d weight", "OIHW")?;
    let p = Conv2d::new(attrs)?;
    let groups = p.groups;
    let mut out_channels = ws[0];
    if let Some(channels) = attr_opt_int(attrs, "channels")? {
        if differ(out_channels, Dim::Known(channels)) {
            return Err(OpError::attribute(
                "channels",
                format!(
                    "conv2d `channels`={channels} does not match weight `{weight}` with {} output \
                 channels",
                    dim_text(out_channels)
                ),
            ));
        }
        out_channels = unify(out_channels, Dim::Known(channels));
    }
    let mut kernel = [ws[2], ws[3]];
    if let Some(size) = attr_opt_ints(attrs, "kernel_size")? {
        let &[kh, kw] = size.as_slice() else {
            return Err(OpError::attribute(
                "kernel_size",
                format!("`kernel_size` must have 2 values, got {}", size.len()),
            ));
        };
        if differ(kernel[0], Dim::Known(kh)) || differ(kernel[1], Dim::Known(kw)) {
            return Err(OpError::attribute(
                "kernel_size",
                format!(
                    "conv2d `kernel_size`=[{kh}, {kw}] does not match weight `{weight}` with kernel \
                 ({}, {})",
                    dim_text(kernel[0]),
                    dim_text(kernel[1])
                ),
            ));
        }
        kernel = [
            unify(kernel[0], Dim::Known(kh)),
            unify(kernel[1], Dim::Known(kw)),
        ];
    }
    if let (Dim::Known(c), Dim::Known(per_group)) = (ds[1], ws[1])
        && i128::from(per_group) * i128::from(groups) != i128::from(c)
    {
        return Err(OpError::shape(format!(
            "conv2d weight has {per_group} input channels per group but data has {c} channels \
             and groups={groups}"
        )));
    }
    if let Dim::Known(o) = out_channels
        && o % groups != 0
    {
        return Err(OpError::shape(format!(
            "conv2d weight has {o} output channels, which groups={groups} does not divide"
        )));
    }
    let mut spatial = [Dim::Any; 2];
    for (i, axis) in ["height", "width"].into_iter().enumerate() {
        let window = match kernel[i] {
            Dim::Known(k) if k < 1 => {
                return Err(OpError::shape(format!(
                    "conv2d weight must have a non-empty kernel, got `{weight}`"
                )));
            }
            Dim::Known(k) => Some(dilated(k, p.dilation[i])?),
            Dim::Any => None,
        };
        let pad = p.padding[i].saturating_add(p.padding[i + 2]);
        spatial[i] = window_dim(
            ds[2 + i],
            pad,
            window,
            p.strides[i],
            false,
            axis,
            "dilated kernel",
        )?;
    }
    Ok(tensor(
        vec![ds[0], out_channels, spatial[0], spatial[1]],
        dtype,
    ))
}

fn conv2d_run<T: Num>(
    x: &NDArray,
    w: &NDArray,
    p: &Conv2d,
    shape: &[i64],
    dtype: DType,
) -> Result<Value, OpError> {
    let (xs, ws) = (x.shape(), w.shape());
    let (c, h, wd) = (xs[1], xs[2], xs[3]);
    let (o, per_group, kh, kw) = (ws[0], ws[1], ws[2], ws[3]);
    let (n, oh, ow) = (shape[0], shape[2], shape[3]);
    let [sh, sw] = p.strides;
    let [dh, dw] = p.dilation;
    let (pt, pl) = (p.padding[0], p.padding[1]);
    let per_group_out = (o / p.groups).max(1);
    let (xv, wv) = (T::read(x), T::read(w));
    let mut out = Vec::with_capacity(count(shape));
    for b in 0..n {
        for oc in 0..o {
            let g = oc / per_group_out;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = T::ZERO;
                    for ic in 0..per_group {
                        let ci = g * per_group + ic;
                        for ki in 0..kh {
                            let y = i * sh - pt + ki * dh;
                            if y < 0 || y >= h {
                                continue;
                            }
                            for kj in 0..kw {
                                let z = j * sw - pl + kj * dw;
                                if z < 0 || z >= wd {
                                    continue;
                                }
                                let xi = ((b * c + ci) * h + y) * wd + z;
                                let wi = ((oc * per_group + ic) * kh + ki) * kw + kj;
                                acc = acc.plus(xv[xi as usize].times(wv[wi as usize]));
                            }
                        }
                    }
                    out.push(acc);
                }
            }
        }
    }
    T::array(dtype, shape, &out)
}

fn conv2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    if let Some(r) = Relayout::of(attrs, "data_layout", Some("kernel_layout"))? {
        return r.evaluate(args, conv2d_eval);
    }
    let (arrays, result) = checked(args, attrs, conv2d_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (x, w) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let p = Conv2d::new(attrs)?;
    if dtype.is_float() {
        conv2d_run::<f64>(x, w, &p, &shape, dtype)
    } else {
        conv2d_run::<i128>(x, w, &p, &shape, dtype)
    }
}

// ----- The blocked (NCHWc) variants -----
//
// TVM's `nn.contrib_conv2d_NCHWc` is `nn.conv2d` in the layouts its attributes name
// (`NCHW8c` data, `OIHW8i8o` kernel, `NCHW8c` result), which [`Relayout`] moves; its entry
// shares `nn.conv2d`'s functions. `nn.contrib_depthwise_conv2d_NCHWc` (`OIHW1i8o` kernel) is
// depthwise whatever `groups` says — TVM's compute never reads it — so its functions set
// `groups` to the data's channels first.

/// `attrs` with `groups` the data's number of `channels` (NCHW's `C`).
fn depthwise_groups(attrs: &Attrs, channels: Option<Dim>) -> Result<Attrs, OpError> {
    match channels {
        Some(Dim::Known(c)) => Ok(attrs.with("groups", relay_ir::AttrValue::Int(c))),
        _ => Err(OpError::shape(
            "nn.contrib_depthwise_conv2d_NCHWc needs 4-d data with a known number of channels",
        )),
    }
}

/// The layouts of a blocked operator, which are never all canonical.
fn blocked(attrs: &Attrs) -> Result<Relayout, OpError> {
    Relayout::of(attrs, "data_layout", Some("kernel_layout"))?.ok_or_else(|| {
        OpError::attribute(
            "data_layout",
            "nn.contrib_depthwise_conv2d_NCHWc expects blocked layouts such as NCHW8c and \
             OIHW1i8o",
        )
    })
}

fn depthwise_nchwc_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    blocked(attrs)?.relation(types, |types, canonical| {
        let channels = match types.first().map(Type::kind) {
            Some(TypeKind::Tensor { shape, .. }) if shape.len() == 4 => Some(shape[1]),
            _ => None,
        };
        conv2d_rel(types, &depthwise_groups(canonical, channels)?)
    })
}

fn depthwise_nchwc_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    blocked(attrs)?.evaluate(args, |args, canonical| {
        let channels = match args.first() {
            Some(Value::Tensor(t)) if t.ndim() == 4 => Some(Dim::Known(t.shape()[1])),
            _ => None,
        };
        conv2d_eval(args, &depthwise_groups(canonical, channels)?)
    })
}

fn depthwise_nchwc_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    blocked(attrs)?.compute(inputs, out, |inputs, canonical, out| {
        let x = compute::input(inputs, 0)?;
        let channels = (x.shape.len() == 4).then(|| Dim::Known(x.shape[1]));
        conv2d_te(inputs, &depthwise_groups(canonical, channels)?, out)
    })
}

// ----- Compute definition -----

/// `nn.conv2d` on NCHW data and OIHW weights as a contraction over an im2col of the (padded)
/// data, per group: `col[n, g, c, kh, kw, y, x]` is the data element tap `(kh, kw)` of output
/// `(y, x)` reads (0 in the padding), `wg[g, o, c, kh, kw]` the weight of output channel
/// `g * Og + o`, and `conv[n, g, o, y, x] = Σ_{c, kh, kw} col · wg`.
fn conv2d_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    if let Some(r) = Relayout::of(attrs, "data_layout", Some("kernel_layout"))? {
        return r.compute(inputs, out, conv2d_te);
    }
    require_nchw(attrs, "data_layout", Some("kernel_layout"))?;
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, w) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let p = Conv2d::new(attrs)?;
    let (&[n, c, h, wd], &[o, cg, kh, kw], &[_, _, oh, ow]) =
        (x.shape.as_slice(), w.shape.as_slice(), shape.as_slice())
    else {
        return Err(OpError::shape(format!(
            "nn.conv2d expects NCHW data, OIHW weights and an NCHW result, got {:?}, {:?} and \
             {shape:?}",
            x.shape, w.shape
        )));
    };
    let g = p.groups;
    if cg.checked_mul(g) != Some(c) || o % g != 0 || shape[1] != o {
        return Err(OpError::shape(format!(
            "nn.conv2d with groups={g} cannot take data {:?} and weight {:?}",
            x.shape, w.shape
        )));
    }
    let og = o / g;
    let [sh, sw] = p.strides;
    let [dh, dw] = p.dilation;
    let (pt, pl) = (p.padding[0], p.padding[1]);
    let zero = compute::zero(dtype);
    let col = Tensor::compute("T_conv2d_col", &[n, g, cg, kh, kw, oh, ow], |i| {
        // Data without elements: every tap is padding, and nothing may be read.
        if h == 0 || wd == 0 {
            return zero.clone();
        }
        let iy = ix_sub(&ix_add(ix_mul(&i[5], sh), ix_mul(&i[3], dh)), &ix(pt));
        let iw = ix_sub(&ix_add(ix_mul(&i[6], sw), ix_mul(&i[4], dw)), &ix(pl));
        let inside = compute::bin(BinaryOp::LogicalAnd, &in_range(&iy, h), &in_range(&iw, wd));
        let channel = ix_add(ix_mul(&i[1], cg), i[2].clone());
        let v = x.at(&[
            i[0].clone(),
            channel,
            clamp_index(&iy, h),
            clamp_index(&iw, wd),
        ]);
        inside.select(read_as(v, dtype), zero.clone())
    });
    let wg = Tensor::compute("T_conv2d_weight", &[g, og, cg, kh, kw], |i| {
        let oc = ix_add(ix_mul(&i[0], og), i[1].clone());
        read_as(w.at(&[oc, i[2].clone(), i[3].clone(), i[4].clone()]), dtype)
    });
    let (rc, rh, rw) = (IterVar::new(cg), IterVar::new(kh), IterVar::new(kw));
    let conv = contraction(
        "T_conv2d_gemm",
        &[n, g, og, oh, ow],
        (&col, &wg),
        &[rc, rh, rw],
        |i| {
            let ia = vec![
                i[0].clone(),
                i[1].clone(),
                rc.expr(),
                rh.expr(),
                rw.expr(),
                i[3].clone(),
                i[4].clone(),
            ];
            let ib = vec![i[1].clone(), i[2].clone(), rc.expr(), rh.expr(), rw.expr()];
            (ia, ib)
        },
    );
    let og = og.max(1);
    compute::tensor_value(Tensor::compute("T_conv2d", &shape, |i| {
        conv.at(&[
            i[0].clone(),
            compute::bin(BinaryOp::Div, &i[1], &ix(og)),
            compute::bin(BinaryOp::Mod, &i[1], &ix(og)),
            i[2].clone(),
            i[3].clone(),
        ])
    }))
}

#[cfg(test)]
mod tests {

    use relay_ir::AttrValue as V;

    use super::*;

    use crate::compute::op_tests::Rng;
    use crate::nn::testing::*;
    use crate::testing::{attrs, ints};

    #[test]
    fn conv2d_relation() {
        let data = f32s(&[1, 4, 9, 9]);
        let w = f32s(&[6, 4, 3, 3]);
        let two = [data.clone(), w.clone()];
        assert_eq!(ok("nn.conv2d", &two, &[]), "Tensor[(1, 6, 7, 7), float32]");
        // One padding value pads every side; two are (vertical, horizontal).
        assert_eq!(
            ok("nn.conv2d", &two, &[("padding", ints(&[1]))]),
            "Tensor[(1, 6, 9, 9), float32]"
        );
        assert_eq!(
            ok("nn.conv2d", &two, &[("padding", ints(&[1, 0]))]),
            "Tensor[(1, 6, 9, 7), float32]"
        );
        // Four are (top, left, bottom, right).
        assert_eq!(
            ok(
                "nn.conv2d",
                &two,
                &[("strides", ints(&[1, 2])), ("padding", ints(&[0, 1, 2, 0]))]
            ),
            "Tensor[(1, 6, 9, 4), float32]"
        );
        assert_eq!(
            ok(
                "nn.conv2d",
                &two,
                &[
                    ("padding", ints(&[2, 2])),
                    ("dilation", ints(&[2, 2])),
                    ("channels", V::Int(6)),
                    ("kernel_size", ints(&[3, 3]))
                ]
            ),
            "Tensor[(1, 6, 9, 9), float32]"
        );
        // Depthwise.
        let depthwise = [data.clone(), f32s(&[4, 1, 3, 3])];
        assert_eq!(
            ok(
                "nn.conv2d",
                &depthwise,
                &[
                    ("strides", ints(&[2, 2])),
                    ("padding", ints(&[1, 1, 1, 1])),
                    ("groups", V::Int(4))
                ]
            ),
            "Tensor[(1, 4, 5, 5), float32]"
        );
        // Grouped, and `?` dimensions.
        assert_eq!(
            ok(
                "nn.conv2d",
                &[f32s(&[-1, 4, -1, 9]), f32s(&[6, 2, 3, 3])],
                &[("groups", V::Int(2))]
            ),
            "Tensor[(?, 6, ?, 7), float32]"
        );
        assert_eq!(
            ok(
                "nn.conv2d",
                &[data.clone(), f32s(&[-1, 4, -1, -1])],
                &[("channels", V::Int(8)), ("kernel_size", ints(&[3, 5]))]
            ),
            "Tensor[(1, 8, 7, 5), float32]"
        );
        assert_eq!(
            ok(
                "nn.conv2d",
                &[ty(&[1, 4, 9, 9], "int8"), ty(&[6, 4, 3, 3], "int8")],
                &[("out_dtype", s("int32"))]
            ),
            "Tensor[(1, 6, 7, 7), int32]"
        );

        assert_eq!(
            err("nn.conv2d", &[data.clone(), f32s(&[6, 3, 3, 3])], &[]),
            "conv2d weight has 3 input channels per group but data has 4 channels and groups=1"
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("groups", V::Int(4))]),
            "conv2d weight has 4 input channels per group but data has 4 channels and groups=4"
        );
        assert_eq!(
            err(
                "nn.conv2d",
                &[data.clone(), f32s(&[6, 1, 3, 3])],
                &[("groups", V::Int(4))]
            ),
            "conv2d weight has 6 output channels, which groups=4 does not divide"
        );
        assert!(
            err("nn.conv2d", &two, &[("data_layout", s("NCWHX"))])
                .starts_with("data_layout=\"NCWHX\" is not supported")
        );
        assert!(
            err("nn.conv2d", &two, &[("kernel_layout", s("HWIOX"))])
                .starts_with("kernel_layout=\"HWIOX\" is not supported")
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("padding", ints(&[1, 1, 1]))]),
            "`padding` must have 1, 2 or 4 values, got 3"
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("padding", ints(&[-1]))]),
            "`padding` must not be negative, got [-1]"
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("strides", ints(&[0, 1]))]),
            "`strides` must be positive, got [0, 1]"
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("dilation", ints(&[1]))]),
            "`dilation` must have 2 values, got 1"
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("channels", V::Int(8))]),
            "conv2d `channels`=8 does not match weight `Tensor[(6, 4, 3, 3), float32]` with 6 \
             output channels"
        );
        assert_eq!(
            err("nn.conv2d", &two, &[("kernel_size", ints(&[5, 5]))]),
            "conv2d `kernel_size`=[5, 5] does not match weight `Tensor[(6, 4, 3, 3), float32]` \
             with kernel (3, 3)"
        );
        assert_eq!(
            err("nn.conv2d", &[f32s(&[1, 4, 2, 9]), w.clone()], &[]),
            "input height 2 with padding 0 is smaller than the dilated kernel height 3"
        );
        assert_eq!(
            err("nn.conv2d", &[f32s(&[1, 4, 9]), w.clone()], &[]),
            "conv2d data must have rank 4 (NCHW), got `Tensor[(1, 4, 9), float32]`"
        );
        assert!(
            err("nn.conv2d", &[data, ty(&[6, 4, 3, 3], "float64")], &[])
                .contains("different dtypes")
        );
        assert_eq!(err("nn.conv2d", &[w], &[]), "expects 2 inputs, got 1");
    }

    #[test]
    fn conv2d_evaluation() {
        let x = t(&[1, 1, 3, 3], &NINE);
        let ones = t(&[1, 1, 2, 2], &[1.0; 4]);
        assert_eq!(
            run("nn.conv2d", &[x.clone(), ones.clone()], &[]),
            (vec![1, 1, 2, 2], vec![12., 16., 24., 28.])
        );
        // A Laplacian with one pixel of padding.
        let laplacian = t(&[1, 1, 3, 3], &[0., 1., 0., 1., -4., 1., 0., 1., 0.]);
        let (shape, out) = run(
            "nn.conv2d",
            &[x.clone(), laplacian],
            &[("padding", ints(&[1, 1]))],
        );
        assert_eq!(shape, [1, 1, 3, 3]);
        assert_eq!(out, [2., 1., -4., -3., 0., -7., -16., -11., -22.]);
        // Strides and dilation on the 3x3 input: a dilated 2x2 kernel reads the corners.
        assert_eq!(
            run(
                "nn.conv2d",
                &[x.clone(), ones.clone()],
                &[("dilation", ints(&[2, 2]))]
            )
            .1,
            [20.]
        );
        assert_eq!(
            run(
                "nn.conv2d",
                &[x.clone(), ones.clone()],
                &[("strides", ints(&[2, 2])), ("padding", ints(&[1]))]
            ),
            (vec![1, 1, 2, 2], vec![1., 5., 11., 28.])
        );
        // Integers accumulate exactly.
        let xi = t_of("int32", &[1, 1, 3, 3], &NINE);
        let wi = t_of("int32", &[1, 1, 2, 2], &[1., -1., 2., 3.]);
        let v = eval("nn.conv2d", &[xi, wi], &[]).unwrap();
        let a = v.as_tensor().unwrap();
        assert_eq!(a.dtype(), DType::I32);
        assert_eq!(a.to_i128_vec(), [22, 27, 37, 42]);
        // float16 goes through f64 and back.
        let xh = t_of("float16", &[1, 1, 3, 3], &NINE);
        let wh = t_of("float16", &[1, 1, 2, 2], &[1.0; 4]);
        let v = eval("nn.conv2d", &[xh, wh], &[]).unwrap();
        assert_eq!(v.as_tensor().unwrap().dtype(), DType::F16);
        assert_eq!(v.as_tensor().unwrap().to_f64_vec(), [12., 16., 24., 28.]);
        // Mismatched arguments are errors, not panics.
        assert!(eval("nn.conv2d", &[x.clone(), t(&[1, 2, 2, 2], &[0.; 8])], &[]).is_err());
        assert!(eval("nn.conv2d", &[x], &[]).is_err());
    }

    #[test]
    fn conv2d_against_make_expected() {
        let x = t(&[1, 2, 4, 4], &pattern(32, 7, 11, 5.0, 4.0));
        let dw = t(&[2, 1, 3, 3], &pattern(18, 5, 7, 3.0, 2.0));
        let w = t(&[2, 2, 3, 3], &pattern(36, 3, 5, 2.0, 2.0));
        let (shape, out) = run(
            "nn.conv2d",
            &[x.clone(), dw],
            &[
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[1, 1, 1, 1])),
                ("groups", V::Int(2)),
            ],
        );
        assert_eq!(shape, [1, 2, 2, 2]);
        assert_close(
            &out,
            &[-2.75, -1.75, -2.125, -1., -0.875, 1.25, -2.75, 2.875],
        );
        let (shape, out) = run(
            "nn.conv2d",
            &[x.clone(), w.clone()],
            &[("padding", ints(&[2, 2])), ("dilation", ints(&[2, 2]))],
        );
        assert_eq!(shape, [1, 2, 4, 4]);
        assert_close(
            &out,
            &[
                -0.375, -0.875, -0.625, -1.625, 1.75, -0.125, -3.25, -0.125, 0.125, 0.625, 0.5,
                0.5, -2., -0.125, 0.5, 0.5, 0.375, 1.375, 0.125, 0.625, 3., -0.125, -2., -0.125,
                -0.375, -0.875, -0.625, -1.625, 1.75, -0.125, -3.25, -0.125,
            ],
        );
        let (shape, out) = run(
            "nn.conv2d",
            &[x, w],
            &[("strides", ints(&[1, 2])), ("padding", ints(&[0, 1, 2, 0]))],
        );
        assert_eq!(shape, [1, 2, 4, 2]);
        assert_close(
            &out,
            &[
                2.25, -5.25, -1.875, 2.875, 1.75, -2.625, -0.5, 2.375, -1.5, -1.125, 1.125, -5.25,
                -1.5, 0.125, 1.5, -1.75,
            ],
        );
    }

    #[test]
    fn conv2d_compute() {
        let mut rng = Rng(0x5eed_0003);
        // (data, weight, groups)
        let cases: [(&[i64], &[i64], i64); 9] = [
            (&[1, 1, 3, 3], &[1, 1, 2, 2], 1),
            (&[2, 2, 4, 5], &[3, 2, 3, 2], 1),
            (&[1, 4, 3, 4], &[4, 2, 2, 2], 2),
            (&[1, 3, 5, 3], &[3, 1, 3, 3], 3),
            (&[1, 2, 4, 4], &[4, 1, 1, 3], 2),
            (&[1, 1, 1, 1], &[2, 1, 1, 1], 1),
            (&[0, 2, 3, 3], &[2, 2, 2, 2], 1),
            (&[1, 2, 0, 2], &[2, 2, 1, 1], 1),
            (&[1, 0, 3, 3], &[2, 0, 2, 2], 1),
        ];
        let paddings: [&[i64]; 5] = [&[0], &[1], &[1, 0], &[0, 2], &[2, 1, 0, 1]];
        let strides: [&[i64]; 3] = [&[1, 1], &[2, 1], &[2, 3]];
        let dilations: [&[i64]; 3] = [&[1, 1], &[2, 1], &[1, 2]];
        let mut accepted = 0;
        for (dtype, out) in contraction_dtypes() {
            let result = out.unwrap_or(dtype);
            for (data, weight, groups) in cases {
                for _ in 0..4 {
                    let set = [
                        ("out_dtype", out_dtype(out)),
                        ("groups", V::Int(groups)),
                        ("padding", ints(pick(&mut rng, &paddings))),
                        ("strides", ints(pick(&mut rng, &strides))),
                        ("dilation", ints(pick(&mut rng, &dilations))),
                    ];
                    let x = operand(&mut rng, dtype, result, data, true);
                    // Weights stay finite: the reference skips padded taps, the compute
                    // multiplies them by 0 (which a NaN or infinite weight would not give).
                    let w = operand(&mut rng, dtype, result, weight, false);
                    if verify("nn.conv2d", &[x, w], &attrs("nn.conv2d", &set), close) {
                        accepted += 1;
                    }
                }
            }
        }
        assert!(accepted > 300, "{accepted}");
        // Depthwise with a channel multiplier, padding on every side, with every option set.
        let set = [
            ("groups", V::Int(2)),
            ("padding", ints(&[1, 2, 2, 0])),
            ("strides", ints(&[2, 2])),
            ("dilation", ints(&[2, 1])),
            ("channels", V::Int(4)),
            ("kernel_size", ints(&[2, 3])),
        ];
        let x = small(&mut rng, DType::F32, &[2, 2, 5, 6], true);
        let w = small(&mut rng, DType::F32, &[4, 1, 2, 3], false);
        assert!(verify(
            "nn.conv2d",
            &[x, w],
            &attrs("nn.conv2d", &set),
            close
        ));
    }
}
