//! Neural-network operators (`nn.*`): convolutions, dense and matrix products, activations,
//! pooling, normalization, padding, resampling and losses (reference §14.5).
//!
//! The Tier 1 operators of SPEC §4 also carry their fusion pattern, type relation, reference
//! evaluation and compute definition (`relay_ir::te`). Convolution and pooling support the NCHW
//! (and OIHW kernel) layouts only; the normalizations and dropout compute their inference-time
//! results, as TVM's `simplify_inference` would rewrite them.

use std::sync::Arc;

use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, AttrValue, Attrs, DType, DTypeCode, Dim, NDArray,
    OpPattern as P, OpSchema, RelationFn, Type, TypeKind, Value,
};

use relay_ir::te::{BinaryOp, CmpOp, IterVar, ReduceOp, TExpr, TeValue, Tensor, UnaryOp};

use crate::compute::{self, ix_add};
use crate::support::{
    arg_tensor, attr_bool, attr_dtype, attr_float, attr_int, attr_ints_len, attr_opt_int,
    attr_opt_ints, attr_str, broadcast_shapes, inputs_n, known, normalize_axis, shape_text,
    strides, tensor, tensor_type, unravel, value,
};
use crate::{dtype, field, nullable, op, plain, required, required_nullable};

const DATA: &[&str] = &["data"];
const DATA_WEIGHT: &[&str] = &["data", "weight"];
const SPARSE_INPUTS: &[&str] = &[
    "dense_data",
    "sparse_data",
    "sparse_indices",
    "sparse_indptr",
];

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

/// The fields of the max-pooling attrs; note `dilation` comes before `padding`.
const fn max_pool_attrs(
    ones: &'static [i64],
    zeros: &'static [i64],
    layout: &'static str,
) -> [AttrField; 7] {
    [
        required("pool_size", K::IntArray),
        field("strides", K::IntArray, D::Ints(ones)),
        field("dilation", K::IntArray, D::Ints(ones)),
        field("padding", K::IntArray, D::Ints(zeros)),
        field("layout", K::Str, D::Str(layout)),
        field("out_layout", K::Str, D::Str("")),
        field("ceil_mode", K::Bool, D::Bool(false)),
    ]
}

/// The fields of the average-pooling attrs: the max-pooling fields plus `count_include_pad`.
const fn avg_pool_attrs(
    ones: &'static [i64],
    zeros: &'static [i64],
    layout: &'static str,
) -> [AttrField; 8] {
    [
        required("pool_size", K::IntArray),
        field("strides", K::IntArray, D::Ints(ones)),
        field("dilation", K::IntArray, D::Ints(ones)),
        field("padding", K::IntArray, D::Ints(zeros)),
        field("layout", K::Str, D::Str(layout)),
        field("out_layout", K::Str, D::Str("")),
        field("ceil_mode", K::Bool, D::Bool(false)),
        field("count_include_pad", K::Bool, D::Bool(false)),
    ]
}

/// The fields of the adaptive-pooling attrs.
const fn adaptive_pool_attrs(layout: &'static str) -> [AttrField; 3] {
    [
        field("output_size", K::IntArray, D::Ints(&[])),
        field("layout", K::Str, D::Str(layout)),
        field("out_layout", K::Str, D::Str("")),
    ]
}

/// The fields of `InstanceNormAttrs` and `LayerNormAttrs`.
const fn norm_attrs(axis: i64) -> [AttrField; 4] {
    [
        field("axis", K::Int, D::Int(axis)),
        field("epsilon", K::Float, D::Float(1e-5)),
        field("center", K::Bool, D::Bool(true)),
        field("scale", K::Bool, D::Bool(true)),
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

/// `DenseAttrs`, also used by `qnn.dense`. `units` has no default; TVM prints `units=None`.
pub(crate) const DENSE_ATTRS: &[AttrField] =
    &[required_nullable("units", K::Int), dtype("out_dtype")];

/// `BatchMatmulAttrs`, also used by `qnn.batch_matmul`. Python's default is
/// `transpose_b=True`, so text usually shows it.
pub(crate) const BATCH_MATMUL_ATTRS: &[AttrField] = &[
    dtype("out_dtype"),
    field("transpose_a", K::Bool, D::Bool(false)),
    field("transpose_b", K::Bool, D::Bool(false)),
];

/// `SoftmaxAttrs`, shared by the softmax family and `qnn.softmax`.
pub(crate) const SOFTMAX_ATTRS: &[AttrField] = &[field("axis", K::Int, D::Int(-1))];

/// `LeakyReluAttrs`, also used by `qnn.leaky_relu`. Python's default is 0.01, so text usually
/// shows `alpha=0.01f`.
pub(crate) const LEAKY_RELU_ATTRS: &[AttrField] = &[field("alpha", K::Float, D::Float(0.25))];

const MAX_POOL1D_ATTRS: &[AttrField] = &max_pool_attrs(&[1], &[0], "NCW");
const MAX_POOL2D_ATTRS: &[AttrField] = &max_pool_attrs(&[1, 1], &[0, 0], "NCHW");
const MAX_POOL3D_ATTRS: &[AttrField] = &max_pool_attrs(&[1, 1, 1], &[0, 0, 0], "NCDHW");
const AVG_POOL1D_ATTRS: &[AttrField] = &avg_pool_attrs(&[1], &[0], "NCW");
/// `AvgPool2DAttrs`, also used by `qnn.avg_pool2d`.
pub(crate) const AVG_POOL2D_ATTRS: &[AttrField] = &avg_pool_attrs(&[1, 1], &[0, 0], "NCHW");
const AVG_POOL3D_ATTRS: &[AttrField] = &avg_pool_attrs(&[1, 1, 1], &[0, 0, 0], "NCDHW");

/// `GlobalPool2DAttrs`.
const GLOBAL_POOL2D_ATTRS: &[AttrField] = &[
    field("layout", K::Str, D::Str("NCHW")),
    field("out_layout", K::Str, D::Str("")),
];

const ADAPTIVE_POOL1D_ATTRS: &[AttrField] = &adaptive_pool_attrs("NCW");
const ADAPTIVE_POOL2D_ATTRS: &[AttrField] = &adaptive_pool_attrs("NCHW");
const ADAPTIVE_POOL3D_ATTRS: &[AttrField] = &adaptive_pool_attrs("NCDHW");

/// `PadAttrs`: `pad_width` is one `[before, after]` pair per axis.
const PAD_ATTRS: &[AttrField] = &[
    required("pad_width", K::IntArrayArray),
    field("pad_mode", K::Str, D::Str("constant")),
];

/// `SubPixelAttrs`, shared by `nn.depth_to_space` and `nn.space_to_depth`.
const SUBPIXEL_ATTRS: &[AttrField] = &[
    field("block_size", K::Int, D::Int(1)),
    field("layout", K::Str, D::Str("NCHW")),
    field("mode", K::Str, D::Str("DCR")),
];

/// `SparseDenseAttrs`.
const SPARSE_DENSE_ATTRS: &[AttrField] = &[field("sparse_lhs", K::Bool, D::Bool(false))];

pub(crate) static OPS: &[OpSchema] = &[
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
    ),
    op(
        "nn.contrib_depthwise_conv2d_NCHWc",
        DATA_WEIGHT,
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    ),
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
    // Dense and matrix products.
    op(
        "nn.dense",
        DATA_WEIGHT,
        "relay.attrs.DenseAttrs",
        DENSE_ATTRS,
    )
    .with(P::OutEWiseFusable, dense_rel, dense_eval)
    .with_compute(dense_te),
    op(
        "nn.matmul",
        &["tensor_a", "tensor_b"],
        "relay.attrs.MatmulAttrs",
        &[
            required_nullable("units", K::Int),
            dtype("out_dtype"),
            field("transpose_a", K::Bool, D::Bool(false)),
            field("transpose_b", K::Bool, D::Bool(false)),
        ],
    )
    .with(P::OutEWiseFusable, matmul_rel, matmul_eval)
    .with_compute(matmul_te),
    op(
        "nn.batch_matmul",
        &["tensor_a", "tensor_b"],
        "relay.attrs.BatchMatmulAttrs",
        BATCH_MATMUL_ATTRS,
    )
    .with(P::OutEWiseFusable, batch_matmul_rel, batch_matmul_eval)
    .with_compute(batch_matmul_te),
    // TVM registers `nn.contrib_dense_pack` with `DenseAttrs` but builds `DensePackAttrs`; the
    // fields here are those of the struct the calls carry.
    op(
        "nn.contrib_dense_pack",
        DATA_WEIGHT,
        "relay.attrs.DensePackAttrs",
        &[
            required_nullable("units", K::Int),
            dtype("out_dtype"),
            field("weight_layout", K::Str, D::Str("NC")),
        ],
    ),
    op(
        "nn.bitserial_dense",
        DATA_WEIGHT,
        "relay.attrs.BinaryDenseAttrs",
        &[
            required_nullable("units", K::Int),
            field("data_bits", K::Int, D::Int(1)),
            field("weight_bits", K::Int, D::Int(1)),
            dtype("pack_dtype"),
            dtype("out_dtype"),
            field("unipolar", K::Bool, D::Bool(true)),
        ],
    ),
    op(
        "nn.bitpack",
        DATA,
        "relay.attrs.BitPackAttrs",
        &[
            field("bits", K::Int, D::Int(1)),
            field("pack_axis", K::Int, D::Int(1)),
            field("bit_axis", K::Int, D::Int(-1)),
            dtype("pack_type"),
            field("name", K::Str, D::Str("BitPack")),
        ],
    ),
    op(
        "nn.sparse_dense",
        SPARSE_INPUTS,
        "relay.attrs.SparseDenseAttrs",
        SPARSE_DENSE_ATTRS,
    ),
    op(
        "nn.internal.sparse_dense_padded",
        &["data", "weight_data", "weight_indices", "weight_indptr"],
        "relay.attrs.SparseDenseAttrs",
        SPARSE_DENSE_ATTRS,
    ),
    // `SparseTransposeAttrs` declares no fields.
    op(
        "nn.sparse_transpose",
        &["sparse_data", "sparse_indices", "sparse_indptr"],
        "relay.attrs.SparseTransposeAttrs",
        &[],
    ),
    plain("nn.sparse_add", SPARSE_INPUTS),
    op(
        "nn.sparse_conv2d",
        SPARSE_INPUTS,
        "relay.attrs.SparseConv2DAttrs",
        &[
            field("layout", K::Str, D::Str("NHWC")),
            field("kernel_size", K::IntArray, D::Ints(&[1, 1])),
        ],
    ),
    op(
        "nn.fifo_buffer",
        &["data", "buffer"],
        "relay.attrs.FIFOBufferAttrs",
        &[field("axis", K::Int, D::Int(0))],
    ),
    // Activations, bias and flattening.
    plain("nn.relu", DATA)
        .with(P::ElemWise, numeric_unary_rel, relu_eval)
        .with_compute(relu_te),
    op(
        "nn.leaky_relu",
        DATA,
        "relay.attrs.LeakyReluAttrs",
        LEAKY_RELU_ATTRS,
    )
    .with(P::ElemWise, numeric_unary_rel, leaky_relu_eval)
    .with_compute(leaky_relu_te),
    op(
        "nn.prelu",
        &["data", "alpha"],
        "relay.attrs.PReluAttrs",
        &[field("axis", K::Int, D::Int(1))],
    )
    .with(P::Broadcast, prelu_rel, prelu_eval)
    .with_compute(|i, a, o| channel_te(i, a, o, "nn.prelu")),
    op(
        "nn.softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    )
    .with(P::OutEWiseFusable, softmax_rel, softmax_eval)
    .with_compute(|i, a, o| softmax_te(i, a, o, false)),
    op(
        "nn.fast_softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    )
    .with(P::OutEWiseFusable, softmax_rel, softmax_eval),
    op(
        "nn.log_softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    )
    .with(P::OutEWiseFusable, softmax_rel, log_softmax_eval)
    .with_compute(|i, a, o| softmax_te(i, a, o, true)),
    op(
        "nn.bias_add",
        &["data", "bias"],
        "relay.attrs.BiasAddAttrs",
        &[field("axis", K::Int, D::Int(1))],
    )
    .with(P::Broadcast, bias_add_rel, bias_add_eval)
    .with_compute(|i, a, o| channel_te(i, a, o, "nn.bias_add")),
    plain("nn.batch_flatten", DATA)
        .with(P::Injective, batch_flatten_rel, batch_flatten_eval)
        .with_compute(batch_flatten_te),
    // Pooling.
    op(
        "nn.max_pool1d",
        DATA,
        "relay.attrs.MaxPool1DAttrs",
        MAX_POOL1D_ATTRS,
    ),
    op(
        "nn.max_pool2d",
        DATA,
        "relay.attrs.MaxPool2DAttrs",
        MAX_POOL2D_ATTRS,
    )
    .with(P::OutEWiseFusable, pool2d_rel, max_pool2d_eval)
    .with_compute(|i, a, o| pool2d_te(i, a, o, true)),
    op(
        "nn.max_pool3d",
        DATA,
        "relay.attrs.MaxPool3DAttrs",
        MAX_POOL3D_ATTRS,
    ),
    op(
        "nn.avg_pool1d",
        DATA,
        "relay.attrs.AvgPool1DAttrs",
        AVG_POOL1D_ATTRS,
    ),
    op(
        "nn.avg_pool2d",
        DATA,
        "relay.attrs.AvgPool2DAttrs",
        AVG_POOL2D_ATTRS,
    )
    .with(P::OutEWiseFusable, pool2d_rel, avg_pool2d_eval)
    .with_compute(|i, a, o| pool2d_te(i, a, o, false)),
    op(
        "nn.avg_pool3d",
        DATA,
        "relay.attrs.AvgPool3DAttrs",
        AVG_POOL3D_ATTRS,
    ),
    op(
        "nn.max_pool2d_grad",
        &["out_grad", "data"],
        "relay.attrs.MaxPool2DAttrs",
        MAX_POOL2D_ATTRS,
    ),
    op(
        "nn.avg_pool2d_grad",
        &["out_grad", "data"],
        "relay.attrs.AvgPool2DAttrs",
        AVG_POOL2D_ATTRS,
    ),
    op(
        "nn.global_max_pool2d",
        DATA,
        "relay.attrs.GlobalPool2DAttrs",
        GLOBAL_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        global_pool2d_rel,
        global_max_pool2d_eval,
    )
    .with_compute(|i, a, o| global_pool2d_te(i, a, o, true)),
    op(
        "nn.global_avg_pool2d",
        DATA,
        "relay.attrs.GlobalPool2DAttrs",
        GLOBAL_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        global_pool2d_rel,
        global_avg_pool2d_eval,
    )
    .with_compute(|i, a, o| global_pool2d_te(i, a, o, false)),
    op(
        "nn.adaptive_max_pool1d",
        DATA,
        "relay.attrs.AdaptivePool1DAttrs",
        ADAPTIVE_POOL1D_ATTRS,
    ),
    op(
        "nn.adaptive_avg_pool1d",
        DATA,
        "relay.attrs.AdaptivePool1DAttrs",
        ADAPTIVE_POOL1D_ATTRS,
    ),
    op(
        "nn.adaptive_max_pool2d",
        DATA,
        "relay.attrs.AdaptivePool2DAttrs",
        ADAPTIVE_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        adaptive_pool2d_rel,
        adaptive_max_pool2d_eval,
    )
    .with_compute(|i, a, o| adaptive_pool2d_te(i, a, o, true)),
    op(
        "nn.adaptive_avg_pool2d",
        DATA,
        "relay.attrs.AdaptivePool2DAttrs",
        ADAPTIVE_POOL2D_ATTRS,
    )
    .with(
        P::OutEWiseFusable,
        adaptive_pool2d_rel,
        adaptive_avg_pool2d_eval,
    )
    .with_compute(|i, a, o| adaptive_pool2d_te(i, a, o, false)),
    op(
        "nn.adaptive_max_pool3d",
        DATA,
        "relay.attrs.AdaptivePool3DAttrs",
        ADAPTIVE_POOL3D_ATTRS,
    ),
    op(
        "nn.adaptive_avg_pool3d",
        DATA,
        "relay.attrs.AdaptivePool3DAttrs",
        ADAPTIVE_POOL3D_ATTRS,
    ),
    // Normalization and dropout. `nn.batch_norm` returns a 3-tuple and `nn.dropout` a 2-tuple.
    op(
        "nn.batch_norm",
        &["data", "gamma", "beta", "moving_mean", "moving_var"],
        "relay.attrs.BatchNormAttrs",
        &norm_attrs(1),
    )
    .with(P::Opaque, batch_norm_rel, batch_norm_eval)
    .with_compute(batch_norm_te),
    op(
        "nn.layer_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.LayerNormAttrs",
        &norm_attrs(-1),
    )
    .with(P::Opaque, layer_norm_rel, layer_norm_eval)
    .with_compute(layer_norm_te),
    op(
        "nn.instance_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.InstanceNormAttrs",
        &norm_attrs(1),
    ),
    op(
        "nn.group_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.GroupNormAttrs",
        &[
            field("num_groups", K::Int, D::Int(0)),
            field("axis", K::Int, D::Int(1)),
            field("epsilon", K::Float, D::Float(1e-5)),
            field("center", K::Bool, D::Bool(true)),
            field("scale", K::Bool, D::Bool(true)),
        ],
    ),
    op(
        "nn.lrn",
        DATA,
        "relay.attrs.LRNAttrs",
        &[
            field("size", K::Int, D::Int(5)),
            field("axis", K::Int, D::Int(1)),
            field("bias", K::Float, D::Float(2.0)),
            field("alpha", K::Float, D::Float(0.0001)),
            field("beta", K::Float, D::Float(0.75)),
        ],
    ),
    op(
        "nn.l2_normalize",
        DATA,
        "relay.attrs.L2NormalizeAttrs",
        &[required("eps", K::Float), required("axis", K::IntArray)],
    ),
    op(
        "nn.dropout",
        DATA,
        "relay.attrs.DropoutAttrs",
        &[field("rate", K::Float, D::Float(0.5))],
    )
    .with(P::Opaque, dropout_rel, dropout_eval)
    .with_compute(dropout_te),
    // Padding; `nn.pad` takes the pad value as its second input.
    op(
        "nn.pad",
        &["data", "pad_value"],
        "relay.attrs.PadAttrs",
        PAD_ATTRS,
    )
    .with(P::Injective, pad_rel, pad_eval)
    .with_compute(pad_te),
    op(
        "nn.mirror_pad",
        DATA,
        "relay.attrs.MirrorPadAttrs",
        &[
            field("mode", K::Str, D::Str("SYMMETRIC")),
            required("pad_width", K::IntArrayArray),
        ],
    ),
    // Resampling and rearrangement.
    op(
        "nn.upsampling",
        DATA,
        "relay.attrs.UpSamplingAttrs",
        &[
            required("scale_h", K::Float),
            required("scale_w", K::Float),
            field("layout", K::Str, D::Str("NCHW")),
            field("method", K::Str, D::Str("nearest_neighbor")),
            field("align_corners", K::Bool, D::Bool(false)),
        ],
    ),
    op(
        "nn.upsampling3d",
        DATA,
        "relay.attrs.UpSampling3DAttrs",
        &[
            required("scale_d", K::Float),
            required("scale_h", K::Float),
            required("scale_w", K::Float),
            field("layout", K::Str, D::Str("NCDHW")),
            field("method", K::Str, D::Str("nearest_neighbor")),
            field(
                "coordinate_transformation_mode",
                K::Str,
                D::Str("half_pixel"),
            ),
        ],
    ),
    op(
        "nn.depth_to_space",
        DATA,
        "relay.attrs.SubPixelAttrs",
        SUBPIXEL_ATTRS,
    ),
    op(
        "nn.space_to_depth",
        DATA,
        "relay.attrs.SubPixelAttrs",
        SUBPIXEL_ATTRS,
    ),
    // `nn.dilate` builds `DilateAttrs` (`strides`, `dilation_value`) but its registration
    // declares no attrs type, so TVM prints them as a meta reference.
    plain("nn.dilate", &["x"]),
    op(
        "nn.space_to_batch_nd",
        DATA,
        "relay.attrs.SpaceToBatchNDAttrs",
        &[
            field("block_shape", K::IntArray, D::Ints(&[1, 1])),
            required("paddings", K::IntArrayArray),
            field("pad_value", K::Float, D::Float(0.0)),
        ],
    ),
    op(
        "nn.batch_to_space_nd",
        DATA,
        "relay.attrs.BatchToSpaceNDAttrs",
        &[
            field("block_shape", K::IntArray, D::Ints(&[1, 1])),
            required("crops", K::IntArrayArray),
        ],
    ),
    // Losses.
    plain("nn.cross_entropy", &["x", "y"]),
    plain("nn.cross_entropy_with_logits", &["x", "y"]),
    op(
        "nn.nll_loss",
        &["predictions", "targets", "weights"],
        "relay.attrs.NLLLossAttrs",
        &[
            field("reduction", K::Str, D::Str("mean")),
            required("ignore_index", K::Int),
        ],
    ),
    // Optical-flow correlation.
    op(
        "nn.correlation",
        &["data1", "data2"],
        "relay.attrs.CorrelationAttrs",
        &[
            field("kernel_size", K::Int, D::Int(1)),
            field("max_displacement", K::Int, D::Int(1)),
            field("stride1", K::Int, D::Int(1)),
            field("stride2", K::Int, D::Int(1)),
            field("padding", K::IntArray, D::Ints(&[0, 0])),
            field("is_multiply", K::Bool, D::Bool(true)),
            field("layout", K::Str, D::Str("NCHW")),
        ],
    ),
];

// ----- Type relations and reference evaluation -----
//
// Every reference evaluation first re-runs its operator's type relation on the concrete types of
// its arguments, so an evaluation sees exactly the inputs type inference accepts and never
// indexes out of bounds. Contractions, convolutions and pools accumulate in `f64` for float
// results and in wrapping `i128` for integer ones, then convert to the result dtype.

/// The number type a reference evaluation computes in: `f64` for float results and `i128`
/// (wrapping, which agrees with the result dtype's wrapping) for integer ones.
trait Num: Copy + PartialOrd {
    /// Zero.
    const ZERO: Self;
    /// Every element of `array` in this number type.
    fn read(array: &NDArray) -> Vec<Self>;
    /// A tensor of `dtype` holding `values`.
    fn array(dtype: DType, shape: &[i64], values: &[Self]) -> Result<Value, String>;
    /// A float constant (an attribute such as `alpha`); integers truncate it as TVM's
    /// `make_const` does.
    fn from_f64(v: f64) -> Self;
    /// The sum.
    fn plus(self, other: Self) -> Self;
    /// The product.
    fn times(self, other: Self) -> Self;
    /// The larger value.
    fn larger(self, other: Self) -> Self {
        if other > self { other } else { self }
    }
    /// The mean of `count` values summing to `self`: integer division truncates, and an empty
    /// window gives NaN for floats and 0 for integers.
    fn div_count(self, count: i64) -> Self;
    /// The value padding takes in max pooling: -inf, or the dtype's smallest integer.
    fn lowest(dtype: DType) -> Self;
}

impl Num for f64 {
    const ZERO: f64 = 0.0;

    fn read(array: &NDArray) -> Vec<f64> {
        array.to_f64_vec()
    }

    fn array(dtype: DType, shape: &[i64], values: &[f64]) -> Result<Value, String> {
        value(NDArray::from_f64_slice(dtype, shape, values))
    }

    fn from_f64(v: f64) -> f64 {
        v
    }

    fn plus(self, other: f64) -> f64 {
        self + other
    }

    fn times(self, other: f64) -> f64 {
        self * other
    }

    fn div_count(self, count: i64) -> f64 {
        self / count as f64
    }

    fn lowest(_: DType) -> f64 {
        f64::NEG_INFINITY
    }
}

impl Num for i128 {
    const ZERO: i128 = 0;

    fn read(array: &NDArray) -> Vec<i128> {
        array.to_i128_vec()
    }

    fn array(dtype: DType, shape: &[i64], values: &[i128]) -> Result<Value, String> {
        value(NDArray::from_i128_slice(dtype, shape, values))
    }

    fn from_f64(v: f64) -> i128 {
        v as i128
    }

    fn plus(self, other: i128) -> i128 {
        self.wrapping_add(other)
    }

    fn times(self, other: i128) -> i128 {
        self.wrapping_mul(other)
    }

    fn div_count(self, count: i64) -> i128 {
        if count == 0 {
            0
        } else {
            self / i128::from(count)
        }
    }

    fn lowest(dtype: DType) -> i128 {
        match dtype.code {
            DTypeCode::Int if dtype.bits >= 1 => -(1i128 << (dtype.bits - 1)),
            _ => 0,
        }
    }
}

/// A dimension as the text format writes it.
fn dim_text(d: Dim) -> String {
    match d {
        Dim::Known(n) => n.to_string(),
        Dim::Any => "?".to_owned(),
    }
}

/// Whether two dimensions are known to differ (`?` matches anything).
fn differ(a: Dim, b: Dim) -> bool {
    matches!((a, b), (Dim::Known(x), Dim::Known(y)) if x != y)
}

/// The more precise of two dimensions that do not differ.
fn unify(a: Dim, b: Dim) -> Dim {
    match a {
        Dim::Known(_) => a,
        Dim::Any => b,
    }
}

/// A boolean as Relay's text writes it.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Checks that a tensor has an integer or float scalar dtype.
fn require_numeric(t: &Type, dtype: DType, what: &str) -> Result<(), String> {
    if dtype.lanes == 1 && (dtype.is_float() || dtype.is_int()) {
        Ok(())
    } else {
        Err(format!(
            "{what} must have an integer or float dtype, got `{t}`"
        ))
    }
}

/// Checks that a tensor has a float scalar dtype.
fn require_float(t: &Type, dtype: DType, what: &str) -> Result<(), String> {
    if dtype.lanes == 1 && dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{what} must have a float dtype, got `{t}`"))
    }
}

/// Checks a tensor's rank; `layout` names the dimensions, e.g. `NCHW`.
fn require_rank(
    t: &Type,
    shape: &[Dim],
    rank: usize,
    what: &str,
    layout: &str,
) -> Result<(), String> {
    if shape.len() == rank {
        Ok(())
    } else {
        Err(format!(
            "{what} must have rank {rank} ({layout}), got `{t}`"
        ))
    }
}

/// Checks that the layout attributes describe NCHW data (and OIHW kernels when `kernel` names
/// the kernel layout attribute): the only layouts the reference evaluation implements.
fn require_nchw(attrs: &Attrs, data: &str, kernel: Option<&str>) -> Result<(), String> {
    let data_layout = attr_str(attrs, data)?;
    let out_layout = attr_str(attrs, "out_layout")?;
    let out_ok = out_layout.is_empty() || out_layout == "NCHW";
    match kernel {
        Some(kernel) => {
            let kernel_layout = attr_str(attrs, kernel)?;
            if data_layout == "NCHW" && kernel_layout == "OIHW" && out_ok {
                return Ok(());
            }
            Err(format!(
                "only NCHW/OIHW layouts are supported, got {data}=\"{data_layout}\", \
                 {kernel}=\"{kernel_layout}\", out_layout=\"{out_layout}\""
            ))
        }
        None if data_layout == "NCHW" && out_ok => Ok(()),
        None => Err(format!(
            "only the NCHW layout is supported, got {data}=\"{data_layout}\", \
             out_layout=\"{out_layout}\""
        )),
    }
}

/// The largest stride, dilation, window or padding value accepted (TVM holds them in 32 bits),
/// which keeps index arithmetic far from overflow.
const ATTR_LIMIT: i64 = i32::MAX as i64;

/// Checks that no value of a window attribute exceeds [`ATTR_LIMIT`].
fn within_limit(name: &str, values: &[i64]) -> Result<(), String> {
    if values.iter().any(|&v| v > ATTR_LIMIT) {
        return Err(format!(
            "`{name}` values must be at most {ATTR_LIMIT}, got {values:?}"
        ));
    }
    Ok(())
}

/// A two-value attribute such as `strides` or `dilation`, each value at least 1.
fn positive_pair(attrs: &Attrs, name: &str) -> Result<[i64; 2], String> {
    let v = attr_ints_len(attrs, name, &[2])?;
    within_limit(name, &v)?;
    match *v.as_slice() {
        [a, b] if a >= 1 && b >= 1 => Ok([a, b]),
        _ => Err(format!("`{name}` must be positive, got {v:?}")),
    }
}

/// `padding` as (top, left, bottom, right), as TVM's `get_pad_tuple2d` reads it: one value pads
/// every side, two values are (top and bottom, left and right).
fn padding4(attrs: &Attrs) -> Result<[i64; 4], String> {
    let v = attr_ints_len(attrs, "padding", &[1, 2, 4])?;
    if v.iter().any(|&p| p < 0) {
        return Err(format!("`padding` must not be negative, got {v:?}"));
    }
    within_limit("padding", &v)?;
    match *v.as_slice() {
        [p] => Ok([p; 4]),
        [h, w] => Ok([h, w, h, w]),
        [t, l, b, r] => Ok([t, l, b, r]),
        _ => Err(format!(
            "`padding` must have 1, 2 or 4 values, got {}",
            v.len()
        )),
    }
}

/// The extent `(k - 1) * dilation + 1` of a dilated window.
fn dilated(k: i64, dilation: i64) -> Result<i64, String> {
    let extent = (i128::from(k) - 1) * i128::from(dilation) + 1;
    i64::try_from(extent)
        .map_err(|_| format!("dilated window {k} with dilation {dilation} is too large"))
}

/// One spatial output extent, `(input + pad - window) / stride + 1` with the division rounded
/// up in ceil mode; `?` when the input or window extent is unknown.
fn window_dim(
    input: Dim,
    pad: i64,
    window: Option<i64>,
    stride: i64,
    ceil_mode: bool,
    axis: &str,
    noun: &str,
) -> Result<Dim, String> {
    let (Dim::Known(n), Some(k)) = (input, window) else {
        return Ok(Dim::Any);
    };
    let span = i128::from(n) + i128::from(pad) - i128::from(k);
    if span < 0 {
        return Err(format!(
            "input {axis} {n} with padding {pad} is smaller than the {noun} {axis} {k}"
        ));
    }
    let stride = i128::from(stride.max(1));
    let steps = if ceil_mode {
        (span + stride - 1) / stride
    } else {
        span / stride
    };
    i64::try_from(steps + 1)
        .map(Dim::Known)
        .map_err(|_| format!("output {axis} {} is too large", steps + 1))
}

/// The sizes before, at and after `axis` of a row-major shape: (outer, extent, inner).
fn axis_split(shape: &[i64], axis: usize) -> (usize, usize, usize) {
    let product = |dims: &[i64]| dims.iter().map(|&d| d.max(0) as usize).product::<usize>();
    let extent = shape.get(axis).map_or(1, |&d| d.max(0) as usize);
    (
        product(&shape[..axis.min(shape.len())]),
        extent,
        product(&shape[(axis + 1).min(shape.len())..]),
    )
}

/// The number of elements of a known shape.
fn count(shape: &[i64]) -> usize {
    shape.iter().map(|&d| d.max(0) as usize).product()
}

/// The tensor arguments, and the result type the relation gives for their concrete types.
fn checked(
    args: &[Value],
    attrs: &Attrs,
    relation: RelationFn,
) -> Result<(Vec<Arc<NDArray>>, Type), String> {
    let arrays = (0..args.len())
        .map(|i| arg_tensor(args, i).cloned())
        .collect::<Result<Vec<_>, _>>()?;
    let types: Vec<Type> = arrays
        .iter()
        .map(|a| Type::tensor(a.shape(), a.dtype()))
        .collect();
    let result = relation(&types, attrs)?;
    Ok((arrays, result))
}

/// The concrete shape and dtype of a result type (field `field` of a tuple type, if given).
fn concrete(t: &Type, field: Option<usize>) -> Result<(Vec<i64>, DType), String> {
    let t = match (t.kind(), field) {
        (TypeKind::Tuple(fields), Some(i)) => fields
            .get(i)
            .ok_or_else(|| format!("the result `{t}` has no field {i}"))?,
        _ => t,
    };
    let (shape, dtype) = tensor_type(t, "the result")?;
    let shape = known(shape)
        .ok_or_else(|| format!("the result shape {} is not fully known", shape_text(shape)))?;
    NDArray::byte_len(dtype, &shape).map_err(|e| e.to_string())?;
    Ok((shape, dtype))
}

/// The argument at `i` (present once `checked` succeeded).
fn arg(arrays: &[Arc<NDArray>], i: usize) -> Result<&NDArray, String> {
    arrays
        .get(i)
        .map(|a| &**a)
        .ok_or_else(|| format!("missing argument {i}"))
}

// ----- Dense and matrix products -----

/// The result dtype of a contraction: `out_dtype` when set, else the inputs' common dtype.
fn contraction_dtype(
    attrs: &Attrs,
    (a, da, a_name): (&Type, DType, &str),
    (b, db, b_name): (&Type, DType, &str),
) -> Result<DType, String> {
    require_numeric(a, da, a_name)?;
    require_numeric(b, db, b_name)?;
    match attr_dtype(attrs, "out_dtype")? {
        Some(d) if d.lanes == 1 && (d.is_float() || d.is_int()) => Ok(d),
        Some(d) => Err(format!(
            "`out_dtype` must be an integer or float dtype, got {d}"
        )),
        None if da == db => Ok(da),
        None => Err(format!(
            "{a_name} `{a}` and {b_name} `{b}` have different dtypes and no `out_dtype` is set"
        )),
    }
}

/// Checks `units` against the weight's output dimension and returns the output dimension.
fn units_dim(attrs: &Attrs, n: Dim, weight: &Type, what: &str) -> Result<Dim, String> {
    match attr_opt_int(attrs, "units")? {
        Some(u) if differ(n, Dim::Known(u)) => Err(format!(
            "`units`={u} does not match {what} `{weight}` with {} output units",
            dim_text(n)
        )),
        Some(u) => Ok(unify(n, Dim::Known(u))),
        None => Ok(n),
    }
}

/// `nn.dense(data[..., k], weight[units, k]) -> [..., units]`: data times weight transposed.
fn dense_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [data, weight] = inputs_n::<2>(types)?;
    let (ds, dd) = tensor_type(data, "dense data")?;
    let (ws, wd) = tensor_type(weight, "dense weight")?;
    let dtype = contraction_dtype(
        attrs,
        (data, dd, "dense data"),
        (weight, wd, "dense weight"),
    )?;
    let Some(&k) = ds.last() else {
        return Err(format!(
            "dense data must have rank at least 1, got `{data}`"
        ));
    };
    let &[units, wk] = ws else {
        return Err(format!(
            "dense weight must have rank 2 (units, k), got `{weight}`"
        ));
    };
    if differ(wk, k) {
        return Err(format!(
            "dense weight `{weight}` does not match data `{data}`: reduction dims {} and {} differ",
            dim_text(wk),
            dim_text(k)
        ));
    }
    let mut shape = ds.to_vec();
    let last = shape.len() - 1;
    shape[last] = units_dim(attrs, units, weight, "dense weight")?;
    Ok(tensor(shape, dtype))
}

/// Operand layout for [`contract`]: element strides per batch, per output row or column, and
/// per step along the reduction.
#[derive(Clone, Copy)]
struct Operand {
    batch: usize,
    outer: usize,
    k: usize,
}

/// `out[b, i, j] = Σ_k a[b, i, k] · b[b, k, j]` over the operands' layouts.
fn contract<T: Num>(
    (a, la): (&[T], Operand),
    (b, lb): (&[T], Operand),
    [batch, m, n, k]: [usize; 4],
) -> Vec<T> {
    let mut out = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::ZERO;
                for kk in 0..k {
                    let x = a[bi * la.batch + i * la.outer + kk * la.k];
                    let y = b[bi * lb.batch + j * lb.outer + kk * lb.k];
                    acc = acc.plus(x.times(y));
                }
                out.push(acc);
            }
        }
    }
    out
}

/// Runs [`contract`] in the number type of `dtype` and wraps the result.
fn contract_to(
    dtype: DType,
    shape: &[i64],
    (a, la): (&NDArray, Operand),
    (b, lb): (&NDArray, Operand),
    sizes: [usize; 4],
) -> Result<Value, String> {
    if dtype.is_float() {
        let out = contract::<f64>((&f64::read(a), la), (&f64::read(b), lb), sizes);
        f64::array(dtype, shape, &out)
    } else {
        let out = contract::<i128>((&i128::read(a), la), (&i128::read(b), lb), sizes);
        i128::array(dtype, shape, &out)
    }
}

fn dense_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, dense_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (x, w) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let k = x.shape().last().map_or(0, |&d| d as usize);
    let rows = count(&x.shape()[..x.ndim() - 1]);
    let units = w.shape()[0] as usize;
    let layout = Operand {
        batch: 0,
        outer: k,
        k: 1,
    };
    contract_to(dtype, &shape, (x, layout), (w, layout), [1, rows, units, k])
}

/// `nn.matmul(a, b)`: `a` is `[..., m, k]` (`[..., k, m]` with `transpose_a`) and `b` is
/// `[k, n]` (`[n, k]` with `transpose_b`); the result is `[..., m, n]`.
fn matmul_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [a, b] = inputs_n::<2>(types)?;
    let (sa, da) = tensor_type(a, "matmul tensor_a")?;
    let (sb, db) = tensor_type(b, "matmul tensor_b")?;
    let dtype = contraction_dtype(
        attrs,
        (a, da, "matmul tensor_a"),
        (b, db, "matmul tensor_b"),
    )?;
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let min_rank = if ta { 2 } else { 1 };
    if sa.len() < min_rank {
        return Err(format!(
            "matmul tensor_a must have rank at least {min_rank}, got `{a}`"
        ));
    }
    let &[b0, b1] = sb else {
        return Err(format!("matmul tensor_b must have rank 2, got `{b}`"));
    };
    let r = sa.len();
    let mut shape = sa.to_vec();
    let ka = if ta {
        shape[r - 2] = sa[r - 1];
        sa[r - 2]
    } else {
        sa[r - 1]
    };
    let (kb, n) = if tb { (b1, b0) } else { (b0, b1) };
    if differ(ka, kb) {
        return Err(format!(
            "matmul reduction dims {} and {} differ: tensor_a `{a}`, tensor_b `{b}`, \
             transpose_a={}, transpose_b={}",
            dim_text(ka),
            dim_text(kb),
            py_bool(ta),
            py_bool(tb)
        ));
    }
    shape[r - 1] = units_dim(attrs, n, b, "matmul tensor_b")?;
    Ok(tensor(shape, dtype))
}

fn matmul_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, matmul_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (a, b) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let sa = a.shape();
    let r = sa.len();
    let dim = |i: usize| sa[i] as usize;
    let (m, k, la) = if ta {
        let (k, m) = (dim(r - 2), dim(r - 1));
        (
            m,
            k,
            Operand {
                batch: m * k,
                outer: 1,
                k: m,
            },
        )
    } else {
        let k = dim(r - 1);
        let m = if r >= 2 { dim(r - 2) } else { 1 };
        (
            m,
            k,
            Operand {
                batch: m * k,
                outer: k,
                k: 1,
            },
        )
    };
    let batch = count(&sa[..r.saturating_sub(2)]);
    let (b0, b1) = (b.shape()[0] as usize, b.shape()[1] as usize);
    let (n, lb) = if tb {
        (
            b0,
            Operand {
                batch: 0,
                outer: b1,
                k: 1,
            },
        )
    } else {
        (
            b1,
            Operand {
                batch: 0,
                outer: 1,
                k: b1,
            },
        )
    };
    contract_to(dtype, &shape, (a, la), (b, lb), [batch, m, n, k])
}

/// `nn.batch_matmul(a[b, m, k], b[b, k, n])`, with `transpose_a` reading `a` as `[b, k, m]` and
/// `transpose_b` reading `b` as `[b, n, k]`; a batch dimension of 1 broadcasts.
fn batch_matmul_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [a, b] = inputs_n::<2>(types)?;
    let (sa, da) = tensor_type(a, "batch_matmul tensor_a")?;
    let (sb, db) = tensor_type(b, "batch_matmul tensor_b")?;
    let dtype = contraction_dtype(
        attrs,
        (a, da, "batch_matmul tensor_a"),
        (b, db, "batch_matmul tensor_b"),
    )?;
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let &[a0, a1, a2] = sa else {
        return Err(format!("batch_matmul tensor_a must have rank 3, got `{a}`"));
    };
    let &[b0, b1, b2] = sb else {
        return Err(format!("batch_matmul tensor_b must have rank 3, got `{b}`"));
    };
    let (m, ka) = if ta { (a2, a1) } else { (a1, a2) };
    let (kb, n) = if tb { (b2, b1) } else { (b1, b2) };
    if differ(ka, kb) {
        return Err(format!(
            "batch_matmul reduction dims {} and {} differ: tensor_a `{a}`, tensor_b `{b}`, \
             transpose_a={}, transpose_b={}",
            dim_text(ka),
            dim_text(kb),
            py_bool(ta),
            py_bool(tb)
        ));
    }
    let batch = match broadcast_shapes(&[a0], &[b0]).as_deref() {
        Some(&[d]) => d,
        _ => {
            return Err(format!(
                "batch_matmul batch dims {} and {} differ and neither is 1: `{a}` and `{b}`",
                dim_text(a0),
                dim_text(b0)
            ));
        }
    };
    Ok(tensor(vec![batch, m, n], dtype))
}

fn batch_matmul_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, batch_matmul_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (a, b) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let d = |t: &NDArray, i: usize| t.shape()[i] as usize;
    let (a0, a1, a2) = (d(a, 0), d(a, 1), d(a, 2));
    let (b0, b1, b2) = (d(b, 0), d(b, 1), d(b, 2));
    let a_batch = if a0 == 1 { 0 } else { a1 * a2 };
    let b_batch = if b0 == 1 { 0 } else { b1 * b2 };
    let (m, k, la) = if ta {
        (
            a2,
            a1,
            Operand {
                batch: a_batch,
                outer: 1,
                k: a2,
            },
        )
    } else {
        (
            a1,
            a2,
            Operand {
                batch: a_batch,
                outer: a2,
                k: 1,
            },
        )
    };
    let (n, lb) = if tb {
        (
            b1,
            Operand {
                batch: b_batch,
                outer: b2,
                k: 1,
            },
        )
    } else {
        (
            b2,
            Operand {
                batch: b_batch,
                outer: 1,
                k: b2,
            },
        )
    };
    let batch = shape[0] as usize;
    contract_to(dtype, &shape, (a, la), (b, lb), [batch, m, n, k])
}

// ----- Activations, bias and flattening -----

/// The type of a numeric elementwise operator: its input's.
fn numeric_unary_rel(types: &[Type], _: &Attrs) -> Result<Type, String> {
    let [data] = inputs_n::<1>(types)?;
    let (_, dtype) = tensor_type(data, "the input")?;
    require_numeric(data, dtype, "the input")?;
    Ok(data.clone())
}

/// Applies `f` to every element in the number type of the tensor's dtype.
fn map_elements(x: &NDArray, f: fn(f64) -> f64, g: fn(i128) -> i128) -> Result<Value, String> {
    if x.dtype().is_float() {
        let out: Vec<f64> = x.to_f64_vec().into_iter().map(f).collect();
        f64::array(x.dtype(), x.shape(), &out)
    } else {
        let out: Vec<i128> = x.to_i128_vec().into_iter().map(g).collect();
        i128::array(x.dtype(), x.shape(), &out)
    }
}

fn relu_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, numeric_unary_rel)?;
    map_elements(
        arg(&arrays, 0)?,
        |v| v.max(0.0),
        |v| if v > 0 { v } else { 0 },
    )
}

fn leaky_relu_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, numeric_unary_rel)?;
    let x = arg(&arrays, 0)?;
    let alpha = attr_float(attrs, "alpha")?;
    if x.dtype().is_float() {
        let out: Vec<f64> = x
            .to_f64_vec()
            .into_iter()
            .map(|v| if v > 0.0 { v } else { v * alpha })
            .collect();
        f64::array(x.dtype(), x.shape(), &out)
    } else {
        let alpha = i128::from_f64(alpha);
        let out: Vec<i128> = x
            .to_i128_vec()
            .into_iter()
            .map(|v| if v > 0 { v } else { v.wrapping_mul(alpha) })
            .collect();
        i128::array(x.dtype(), x.shape(), &out)
    }
}

/// The relation of `nn.bias_add` and `nn.prelu`: a numeric tensor and a vector as long as its
/// `axis` dimension, of the same dtype.
fn channel_vector_rel(types: &[Type], attrs: &Attrs, what: &str) -> Result<Type, String> {
    let [data, vector] = inputs_n::<2>(types)?;
    let (ds, dd) = tensor_type(data, "the data")?;
    require_numeric(data, dd, "the data")?;
    let axis = normalize_axis(attr_int(attrs, "axis")?, ds.len())?;
    let dim = ds.get(axis).copied().unwrap_or(Dim::Known(1));
    check_vector(vector, what, dim, dd, data, axis)?;
    Ok(data.clone())
}

/// Checks that `t` is a vector of `dim` elements of `dtype`, matching axis `axis` of `data`,
/// and returns the unified length.
fn check_vector(
    t: &Type,
    what: &str,
    dim: Dim,
    dtype: DType,
    data: &Type,
    axis: usize,
) -> Result<Dim, String> {
    let mismatch = || {
        format!(
            "{what} must be `{}` to match axis {axis} of data `{data}`, got `{t}`",
            tensor(vec![dim], dtype)
        )
    };
    let (shape, d) = tensor_type(t, what)?;
    match shape {
        [n] if d == dtype && !differ(*n, dim) => Ok(unify(dim, *n)),
        _ => Err(mismatch()),
    }
}

fn bias_add_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    channel_vector_rel(types, attrs, "bias")
}

fn prelu_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    channel_vector_rel(types, attrs, "alpha")
}

/// Combines every element of `x` with the element of the vector `v` at its `axis` index.
fn channel_map<T: Num>(
    x: &NDArray,
    v: &NDArray,
    axis: usize,
    f: impl Fn(T, T) -> T,
) -> Result<Value, String> {
    let (_, extent, inner) = axis_split(x.shape(), axis);
    let vs = T::read(v);
    let out: Vec<T> = T::read(x)
        .into_iter()
        .enumerate()
        .map(|(i, e)| f(e, vs[(i / inner.max(1)) % extent.max(1)]))
        .collect();
    T::array(x.dtype(), x.shape(), &out)
}

fn bias_add_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, bias_add_rel)?;
    let (x, b) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let axis = normalize_axis(attr_int(attrs, "axis")?, x.ndim())?;
    if x.dtype().is_float() {
        channel_map::<f64>(x, b, axis, Num::plus)
    } else {
        channel_map::<i128>(x, b, axis, Num::plus)
    }
}

fn prelu_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, prelu_rel)?;
    let (x, alpha) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let axis = normalize_axis(attr_int(attrs, "axis")?, x.ndim())?;
    if x.dtype().is_float() {
        channel_map::<f64>(x, alpha, axis, |v, a| if v > 0.0 { v } else { v * a })
    } else {
        channel_map::<i128>(x, alpha, axis, |v, a| if v > 0 { v } else { v.times(a) })
    }
}

// ----- Compute definitions of the elementwise activations and `nn.bias_add` -----

/// `nn.relu`: `x > 0 ? x : 0` (NaN gives 0, as `f64::max` does in the reference evaluation).
fn relu_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, _) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    compute::broadcast_compute("T_relu", &shape, &[a], |r| {
        let zero = compute::zero(r[0].dtype());
        Ok(compute::cmp(CmpOp::Gt, &r[0], &zero).select(r[0].clone(), zero))
    })
}

/// `nn.leaky_relu`: `x > 0 ? x : x * alpha`, with `alpha` truncated toward zero for integers
/// (whose product wraps).
fn leaky_relu_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let a = compute::input(inputs, 0)?;
    let alpha = attr_float(attrs, "alpha")?;
    let alpha = if dtype.is_float() {
        compute::const_of(alpha, dtype)
    } else {
        compute::int_const(alpha as i128, dtype)
    };
    // float16 scales in float64 with the exact `alpha`, as the reference does (`alpha`
    // rounded to float16 would be off by up to one float16 step).
    let wide = dtype == DType::F16;
    let alpha_wide = compute::const_of(attr_float(attrs, "alpha")?, DType::F64);
    compute::broadcast_compute("T_leaky_relu", &shape, &[a], |r| {
        let x = &r[0];
        let zero = compute::zero(dtype);
        let scaled = if wide {
            compute::bin(BinaryOp::Mul, &x.clone().cast(DType::F64), &alpha_wide).cast(dtype)
        } else {
            compute::bin(BinaryOp::Mul, x, &alpha)
        };
        Ok(compute::cmp(CmpOp::Gt, x, &zero).select(x.clone(), scaled))
    })
}

/// `nn.prelu` (`x > 0 ? x : x * alpha[c]`) and `nn.bias_add` (`x + bias[c]`), where `c` is the
/// index along `axis`.
fn channel_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    name: &str,
) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, v) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let axis = normalize_axis(attr_int(attrs, "axis")?, shape.len())?;
    let extent = shape.get(axis).copied().unwrap_or(1);
    if (v.shape != [extent] && v.shape != [1]) || v.dtype != dtype || x.shape != shape {
        return Err(format!(
            "`{name}` expects a vector of {extent} elements of {dtype} for axis {axis}"
        ));
    }
    let short = name.strip_prefix("nn.").unwrap_or(name);
    let tensor = Tensor::compute(format!("T_{short}"), &shape, |index| {
        let c = if v.shape == [1] {
            TExpr::index(0)
        } else {
            index[axis].clone()
        };
        let (e, w) = (x.at(index), v.at(&[c]));
        if name == "nn.bias_add" {
            compute::bin(BinaryOp::Add, &e, &w)
        } else {
            let zero = compute::zero(dtype);
            let scaled = compute::bin(BinaryOp::Mul, &e, &w);
            compute::cmp(CmpOp::Gt, &e, &zero).select(e, scaled)
        }
    });
    compute::tensor_value(tensor)
}

/// `nn.softmax` and `nn.log_softmax`: a float tensor, normalized along `axis`.
fn softmax_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [data] = inputs_n::<1>(types)?;
    let (shape, dtype) = tensor_type(data, "softmax data")?;
    require_float(data, dtype, "softmax data")?;
    normalize_axis(attr_int(attrs, "axis")?, shape.len())?;
    Ok(data.clone())
}

/// Softmax along `axis` (its logarithm when `log`), computed in `f64` with the maximum
/// subtracted first.
fn softmax_run(args: &[Value], attrs: &Attrs, log: bool) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, softmax_rel)?;
    let x = arg(&arrays, 0)?;
    let axis = normalize_axis(attr_int(attrs, "axis")?, x.ndim())?;
    let (outer, extent, inner) = axis_split(x.shape(), axis);
    let xs = x.to_f64_vec();
    let mut out = vec![0.0; xs.len()];
    for o in 0..outer {
        for r in 0..inner {
            let at = |d: usize| (o * extent + d) * inner + r;
            let max = (0..extent)
                .map(|d| xs[at(d)])
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..extent).map(|d| (xs[at(d)] - max).exp()).sum();
            for d in 0..extent {
                let shifted = xs[at(d)] - max;
                out[at(d)] = if log {
                    shifted - sum.ln()
                } else {
                    shifted.exp() / sum
                };
            }
        }
    }
    f64::array(x.dtype(), x.shape(), &out)
}

fn softmax_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    softmax_run(args, attrs, false)
}

fn log_softmax_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    softmax_run(args, attrs, true)
}

/// `nn.batch_flatten`: `[n, d1, d2, ...]` to `[n, d1 * d2 * ...]`.
fn batch_flatten_rel(types: &[Type], _: &Attrs) -> Result<Type, String> {
    let [data] = inputs_n::<1>(types)?;
    let (shape, dtype) = tensor_type(data, "batch_flatten data")?;
    let Some((&n, rest)) = shape.split_first() else {
        return Err(format!(
            "batch_flatten data must have rank at least 1, got `{data}`"
        ));
    };
    let mut flat = Some(1i64);
    for d in rest {
        flat = match (flat, d) {
            (Some(f), Dim::Known(k)) => Some(
                f.checked_mul(*k)
                    .ok_or_else(|| format!("batch_flatten of `{data}` is too large"))?,
            ),
            _ => None,
        };
    }
    Ok(tensor(vec![n, flat.map_or(Dim::Any, Dim::Known)], dtype))
}

fn batch_flatten_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, batch_flatten_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    value(NDArray::from_bytes(
        dtype,
        &shape,
        arg(&arrays, 0)?.as_bytes(),
    ))
}

// ----- Convolution -----

/// The attributes that shape `nn.conv2d`'s computation.
struct Conv2d {
    strides: [i64; 2],
    /// Top, left, bottom, right.
    padding: [i64; 4],
    dilation: [i64; 2],
    groups: i64,
}

impl Conv2d {
    fn new(attrs: &Attrs) -> Result<Conv2d, String> {
        let groups = attr_int(attrs, "groups")?;
        if groups < 1 {
            return Err(format!("`groups` must be positive, got {groups}"));
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
fn conv2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
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
            return Err(format!(
                "conv2d `channels`={channels} does not match weight `{weight}` with {} output \
                 channels",
                dim_text(out_channels)
            ));
        }
        out_channels = unify(out_channels, Dim::Known(channels));
    }
    let mut kernel = [ws[2], ws[3]];
    if let Some(size) = attr_opt_ints(attrs, "kernel_size")? {
        let &[kh, kw] = size.as_slice() else {
            return Err(format!(
                "`kernel_size` must have 2 values, got {}",
                size.len()
            ));
        };
        if differ(kernel[0], Dim::Known(kh)) || differ(kernel[1], Dim::Known(kw)) {
            return Err(format!(
                "conv2d `kernel_size`=[{kh}, {kw}] does not match weight `{weight}` with kernel \
                 ({}, {})",
                dim_text(kernel[0]),
                dim_text(kernel[1])
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
        return Err(format!(
            "conv2d weight has {per_group} input channels per group but data has {c} channels \
             and groups={groups}"
        ));
    }
    if let Dim::Known(o) = out_channels
        && o % groups != 0
    {
        return Err(format!(
            "conv2d weight has {o} output channels, which groups={groups} does not divide"
        ));
    }
    let mut spatial = [Dim::Any; 2];
    for (i, axis) in ["height", "width"].into_iter().enumerate() {
        let window = match kernel[i] {
            Dim::Known(k) if k < 1 => {
                return Err(format!(
                    "conv2d weight must have a non-empty kernel, got `{weight}`"
                ));
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
) -> Result<Value, String> {
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

fn conv2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
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

// ----- Pooling -----

/// The attributes of `nn.max_pool2d` and `nn.avg_pool2d`.
struct Pool2d {
    size: [i64; 2],
    strides: [i64; 2],
    dilation: [i64; 2],
    /// Top, left, bottom, right.
    padding: [i64; 4],
    ceil_mode: bool,
    count_include_pad: bool,
}

impl Pool2d {
    fn new(attrs: &Attrs) -> Result<Pool2d, String> {
        let count_include_pad = match attrs.get("count_include_pad") {
            Some(_) => attr_bool(attrs, "count_include_pad")?,
            None => false,
        };
        Ok(Pool2d {
            size: positive_pair(attrs, "pool_size")?,
            strides: positive_pair(attrs, "strides")?,
            dilation: positive_pair(attrs, "dilation")?,
            padding: padding4(attrs)?,
            ceil_mode: attr_bool(attrs, "ceil_mode")?,
            count_include_pad,
        })
    }
}

/// An NCHW pooling input: its shape and dtype after the common checks.
fn pool_input<'t>(
    types: &'t [Type],
    attrs: &Attrs,
    layout: &str,
) -> Result<(&'t Type, &'t [Dim], DType), String> {
    let [data] = inputs_n::<1>(types)?;
    let (shape, dtype) = tensor_type(data, "pooling data")?;
    require_nchw(attrs, layout, None)?;
    require_rank(data, shape, 4, "pooling data", "NCHW")?;
    require_numeric(data, dtype, "pooling data")?;
    Ok((data, shape, dtype))
}

/// `nn.max_pool2d` and `nn.avg_pool2d` on NCHW data.
fn pool2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (_, shape, dtype) = pool_input(types, attrs, "layout")?;
    let p = Pool2d::new(attrs)?;
    let mut spatial = [Dim::Any; 2];
    for (i, axis) in ["height", "width"].into_iter().enumerate() {
        let window = dilated(p.size[i], p.dilation[i])?;
        let pad = p.padding[i].saturating_add(p.padding[i + 2]);
        spatial[i] = window_dim(
            shape[2 + i],
            pad,
            Some(window),
            p.strides[i],
            p.ceil_mode,
            axis,
            "pool window",
        )?;
    }
    Ok(tensor(
        vec![shape[0], shape[1], spatial[0], spatial[1]],
        dtype,
    ))
}

/// Max or average pooling over windows of NCHW data. Max pooling pads with the dtype's lowest
/// value; average pooling divides by the in-bounds taps, or with `count_include_pad` by the
/// taps inside the padded input (TVM's rule, which leaves out what ceil mode adds past the
/// bottom and right padding).
fn pool2d_run<T: Num>(x: &NDArray, p: &Pool2d, shape: &[i64], max: bool) -> Result<Value, String> {
    let dtype = x.dtype();
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let (oh, ow) = (shape[2], shape[3]);
    let [kh, kw] = p.size;
    let [sh, sw] = p.strides;
    let [dh, dw] = p.dilation;
    let [pt, pl, pb, pr] = p.padding;
    let xv = T::read(x);
    let planes = count(&shape[..2]);
    let mut out = Vec::with_capacity(count(shape));
    for plane in 0..planes as i64 {
        for i in 0..oh {
            for j in 0..ow {
                let (y0, z0) = (i * sh - pt, j * sw - pl);
                let mut acc = if max { T::lowest(dtype) } else { T::ZERO };
                let mut taps = 0i64;
                for ki in 0..kh {
                    let y = y0 + ki * dh;
                    if y < 0 || y >= h {
                        continue;
                    }
                    for kj in 0..kw {
                        let z = z0 + kj * dw;
                        if z < 0 || z >= w {
                            continue;
                        }
                        let v = xv[((plane * h + y) * w + z) as usize];
                        acc = if max { acc.larger(v) } else { acc.plus(v) };
                        taps += 1;
                    }
                }
                if !max {
                    let divisor = if p.count_include_pad {
                        let rows = (0..kh).filter(|ki| y0 + ki * dh < h + pb).count();
                        let cols = (0..kw).filter(|kj| z0 + kj * dw < w + pr).count();
                        (rows * cols) as i64
                    } else {
                        taps
                    };
                    acc = acc.div_count(divisor);
                }
                out.push(acc);
            }
        }
    }
    T::array(dtype, shape, &out)
}

fn pool2d_eval(args: &[Value], attrs: &Attrs, max: bool) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, pool2d_rel)?;
    let (shape, _) = concrete(&result, None)?;
    let x = arg(&arrays, 0)?;
    let p = Pool2d::new(attrs)?;
    if x.dtype().is_float() {
        pool2d_run::<f64>(x, &p, &shape, max)
    } else {
        pool2d_run::<i128>(x, &p, &shape, max)
    }
}

fn max_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    pool2d_eval(args, attrs, true)
}

fn avg_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    pool2d_eval(args, attrs, false)
}

/// `nn.global_avg_pool2d` and `nn.global_max_pool2d`: `[n, c, h, w]` to `[n, c, 1, 1]`.
fn global_pool2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (_, shape, dtype) = pool_input(types, attrs, "layout")?;
    Ok(tensor(
        vec![shape[0], shape[1], Dim::Known(1), Dim::Known(1)],
        dtype,
    ))
}

/// `output_size` of an adaptive pool: (height, width), `None` keeping the input's extent.
fn adaptive_output_size(attrs: &Attrs) -> Result<[Option<i64>; 2], String> {
    let items: &[AttrValue] = match attrs.get("output_size") {
        None | Some(AttrValue::Null) => &[],
        Some(v) => v
            .as_array()
            .ok_or("attribute `output_size` must be a list of integers")?,
    };
    let sizes = items
        .iter()
        .map(|item| match item {
            AttrValue::Null => Ok(None),
            AttrValue::Int(n) if *n >= 1 => Ok(Some(*n)),
            AttrValue::Int(n) => Err(format!("`output_size` must be positive, got {n}")),
            _ => Err("attribute `output_size` must be a list of integers".to_owned()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    match *sizes.as_slice() {
        [] => Ok([None, None]),
        [s] => Ok([s, s]),
        [h, w] => Ok([h, w]),
        _ => Err(format!(
            "`output_size` must have 0, 1 or 2 values, got {}",
            sizes.len()
        )),
    }
}

/// `nn.adaptive_avg_pool2d`: NCHW data pooled to `output_size`.
fn adaptive_pool2d_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let (_, shape, dtype) = pool_input(types, attrs, "layout")?;
    let [oh, ow] = adaptive_output_size(attrs)?;
    let pick = |size: Option<i64>, input: Dim| size.map_or(input, Dim::Known);
    Ok(tensor(
        vec![shape[0], shape[1], pick(oh, shape[2]), pick(ow, shape[3])],
        dtype,
    ))
}

/// Adaptive pooling as TVM computes it: output cell `(i, j)` averages (or takes the maximum of)
/// input rows `floor(i * h / oh) .. ceil((i + 1) * h / oh)` and the columns found the same way.
/// With a 1x1 output this is global pooling over the whole plane.
fn plane_pool_run<T: Num>(x: &NDArray, shape: &[i64], max: bool) -> Result<Value, String> {
    let dtype = x.dtype();
    let (h, w) = (i128::from(x.shape()[2]), i128::from(x.shape()[3]));
    let (oh, ow) = (i128::from(shape[2]), i128::from(shape[3]));
    let xv = T::read(x);
    let planes = count(&shape[..2]);
    let mut out = Vec::with_capacity(count(shape));
    for plane in 0..planes as i128 {
        for i in 0..oh {
            let (y0, y1) = ((i * h) / oh, ((i + 1) * h + oh - 1) / oh);
            for j in 0..ow {
                let (z0, z1) = ((j * w) / ow, ((j + 1) * w + ow - 1) / ow);
                let mut acc = if max { T::lowest(dtype) } else { T::ZERO };
                for y in y0..y1 {
                    for z in z0..z1 {
                        let v = xv[((plane * h + y) * w + z) as usize];
                        acc = if max { acc.larger(v) } else { acc.plus(v) };
                    }
                }
                if !max {
                    acc = acc.div_count(((y1 - y0) * (z1 - z0)) as i64);
                }
                out.push(acc);
            }
        }
    }
    T::array(dtype, shape, &out)
}

fn plane_pool_eval(
    args: &[Value],
    attrs: &Attrs,
    relation: RelationFn,
    max: bool,
) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, relation)?;
    let (shape, _) = concrete(&result, None)?;
    let x = arg(&arrays, 0)?;
    if x.dtype().is_float() {
        plane_pool_run::<f64>(x, &shape, max)
    } else {
        plane_pool_run::<i128>(x, &shape, max)
    }
}

fn global_avg_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    plane_pool_eval(args, attrs, global_pool2d_rel, false)
}

fn global_max_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    plane_pool_eval(args, attrs, global_pool2d_rel, true)
}

fn adaptive_avg_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    plane_pool_eval(args, attrs, adaptive_pool2d_rel, false)
}

fn adaptive_max_pool2d_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    plane_pool_eval(args, attrs, adaptive_pool2d_rel, true)
}

// ----- Normalization and dropout -----

/// A float tensor and the index of its normalized `axis`.
fn norm_input<'t>(
    data: &'t Type,
    attrs: &Attrs,
    what: &str,
) -> Result<(&'t [Dim], DType, usize), String> {
    let (shape, dtype) = tensor_type(data, what)?;
    require_float(data, dtype, what)?;
    let axis = normalize_axis(attr_int(attrs, "axis")?, shape.len())?;
    attr_float(attrs, "epsilon")?;
    Ok((shape, dtype, axis))
}

/// `nn.batch_norm(data, gamma, beta, moving_mean, moving_var)`: the tuple (normalized data,
/// moving_mean, moving_var), the result TVM gives in inference.
fn batch_norm_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [data, params @ ..] = inputs_n::<5>(types)?;
    let (shape, dtype, axis) = norm_input(data, attrs, "batch_norm data")?;
    let mut dim = shape.get(axis).copied().unwrap_or(Dim::Known(1));
    for (t, what) in params
        .iter()
        .zip(["gamma", "beta", "moving_mean", "moving_var"])
    {
        dim = check_vector(t, what, dim, dtype, data, axis)?;
    }
    let vector = tensor(vec![dim], dtype);
    Ok(Type::tuple(vec![data.clone(), vector.clone(), vector]))
}

/// `nn.layer_norm(data, gamma, beta)`: data normalized along `axis`.
fn layer_norm_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [data, gamma, beta] = inputs_n::<3>(types)?;
    let (shape, dtype, axis) = norm_input(data, attrs, "layer_norm data")?;
    let dim = shape.get(axis).copied().unwrap_or(Dim::Known(1));
    let dim = check_vector(gamma, "gamma", dim, dtype, data, axis)?;
    check_vector(beta, "beta", dim, dtype, data, axis)?;
    Ok(data.clone())
}

/// `(x - mean) / sqrt(var + epsilon) * gamma + beta`, leaving out `gamma` without `scale` and
/// `beta` without `center`.
fn normalize(x: f64, mean: f64, var: f64, gamma: f64, beta: f64, attrs: &NormAttrs) -> f64 {
    let mut y = (x - mean) / (var + attrs.epsilon).sqrt();
    if attrs.scale {
        y *= gamma;
    }
    if attrs.center {
        y += beta;
    }
    y
}

/// The attributes shared by the normalizations.
struct NormAttrs {
    axis: usize,
    epsilon: f64,
    center: bool,
    scale: bool,
}

impl NormAttrs {
    fn new(attrs: &Attrs, rank: usize) -> Result<NormAttrs, String> {
        Ok(NormAttrs {
            axis: normalize_axis(attr_int(attrs, "axis")?, rank)?,
            epsilon: attr_float(attrs, "epsilon")?,
            center: attr_bool(attrs, "center")?,
            scale: attr_bool(attrs, "scale")?,
        })
    }
}

fn batch_norm_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, batch_norm_rel)?;
    let x = arg(&arrays, 0)?;
    let a = NormAttrs::new(attrs, x.ndim())?;
    let [gamma, beta, mean, var] = [1, 2, 3, 4].map(|i| arrays.get(i).map(|t| t.to_f64_vec()));
    let (Some(gamma), Some(beta), Some(mean), Some(var)) = (gamma, beta, mean, var) else {
        return Err(format!("expects 5 arguments, got {}", arrays.len()));
    };
    let (_, extent, inner) = axis_split(x.shape(), a.axis);
    let out: Vec<f64> = x
        .to_f64_vec()
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let c = (i / inner.max(1)) % extent.max(1);
            normalize(v, mean[c], var[c], gamma[c], beta[c], &a)
        })
        .collect();
    Ok(Value::tuple(vec![
        f64::array(x.dtype(), x.shape(), &out)?,
        Value::Tensor(arrays[3].clone()),
        Value::Tensor(arrays[4].clone()),
    ]))
}

fn layer_norm_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, layer_norm_rel)?;
    let x = arg(&arrays, 0)?;
    let a = NormAttrs::new(attrs, x.ndim())?;
    let (gamma, beta) = (arg(&arrays, 1)?.to_f64_vec(), arg(&arrays, 2)?.to_f64_vec());
    let (outer, extent, inner) = axis_split(x.shape(), a.axis);
    let xs = x.to_f64_vec();
    let mut out = vec![0.0; xs.len()];
    for o in 0..outer {
        for r in 0..inner {
            let at = |d: usize| (o * extent + d) * inner + r;
            let n = extent as f64;
            let mean = (0..extent).map(|d| xs[at(d)]).sum::<f64>() / n;
            let var = (0..extent).map(|d| (xs[at(d)] - mean).powi(2)).sum::<f64>() / n;
            for d in 0..extent {
                out[at(d)] = normalize(xs[at(d)], mean, var, gamma[d], beta[d], &a);
            }
        }
    }
    f64::array(x.dtype(), x.shape(), &out)
}

/// `nn.dropout`: the tuple (output, mask), both of the input's type.
fn dropout_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [data] = inputs_n::<1>(types)?;
    tensor_type(data, "dropout data")?;
    attr_float(attrs, "rate")?;
    Ok(Type::tuple(vec![data.clone(), data.clone()]))
}

/// Inference dropout: the data unchanged and a mask of ones.
fn dropout_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, _) = checked(args, attrs, dropout_rel)?;
    let x = arg(&arrays, 0)?;
    let ones = vec![1.0; x.num_elements()];
    Ok(Value::tuple(vec![
        Value::Tensor(arrays[0].clone()),
        f64::array(x.dtype(), x.shape(), &ones)?,
    ]))
}

// ----- Padding -----

/// How `nn.pad` fills the border.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PadMode {
    /// With `pad_value`.
    Constant,
    /// By repeating the edge element.
    Edge,
    /// By mirroring without repeating the edge element (numpy's `reflect`).
    Reflect,
}

/// `pad_width` as one `[before, after]` pair per axis.
fn pad_widths(attrs: &Attrs) -> Result<Vec<[i64; 2]>, String> {
    let malformed = || "`pad_width` must be a list of [before, after] pairs".to_owned();
    let items = attrs
        .get("pad_width")
        .and_then(AttrValue::as_array)
        .ok_or_else(malformed)?;
    items
        .iter()
        .enumerate()
        .map(|(axis, item)| match item.as_ints().as_deref() {
            Some(&[before, after]) if before >= 0 && after >= 0 => Ok([before, after]),
            Some(&[before, after]) => Err(format!(
                "`pad_width` must not be negative, got [{before}, {after}] for axis {axis}"
            )),
            _ => Err(malformed()),
        })
        .collect()
}

fn pad_mode(attrs: &Attrs) -> Result<PadMode, String> {
    match attr_str(attrs, "pad_mode")? {
        "constant" => Ok(PadMode::Constant),
        "edge" => Ok(PadMode::Edge),
        "reflect" => Ok(PadMode::Reflect),
        other => Err(format!(
            "`pad_mode` must be \"constant\", \"edge\" or \"reflect\", got \"{other}\""
        )),
    }
}

/// `nn.pad(data, pad_value)`: every axis grown by its `[before, after]` pair.
fn pad_rel(types: &[Type], attrs: &Attrs) -> Result<Type, String> {
    let [data, pad_value] = inputs_n::<2>(types)?;
    let (shape, dtype) = tensor_type(data, "pad data")?;
    let (value_shape, _) = tensor_type(pad_value, "the pad value")?;
    if !value_shape.is_empty() {
        return Err(format!("the pad value must be a scalar, got `{pad_value}`"));
    }
    let widths = pad_widths(attrs)?;
    let mode = pad_mode(attrs)?;
    if widths.len() != shape.len() {
        return Err(format!(
            "`pad_width` has {} pairs but data `{data}` has rank {}",
            widths.len(),
            shape.len()
        ));
    }
    let mut out = Vec::with_capacity(shape.len());
    for (axis, (&d, &[before, after])) in shape.iter().zip(&widths).enumerate() {
        let Dim::Known(n) = d else {
            out.push(Dim::Any);
            continue;
        };
        let widest = before.max(after);
        if mode == PadMode::Reflect && widest >= n.max(1) && widest > 0 {
            return Err(format!(
                "reflect padding of {widest} on axis {axis} needs that axis to be longer than \
                 {widest}, got {n}"
            ));
        }
        if mode == PadMode::Edge && n == 0 && widest > 0 {
            return Err(format!(
                "edge padding needs axis {axis} to be non-empty, got `{data}`"
            ));
        }
        let grown = n
            .checked_add(before)
            .and_then(|m| m.checked_add(after))
            .ok_or_else(|| format!("padding axis {axis} of `{data}` makes it too large"))?;
        out.push(Dim::Known(grown));
    }
    Ok(tensor(out, dtype))
}

fn pad_run<T: Num>(
    x: &NDArray,
    fill: T,
    widths: &[[i64; 2]],
    mode: PadMode,
    shape: &[i64],
) -> Result<Value, String> {
    let xs = x.shape();
    let xstrides = strides(xs);
    let xv = T::read(x);
    let mut out = Vec::with_capacity(count(shape));
    for flat in 0..count(shape) as i64 {
        let index = unravel(flat, shape);
        let mut source = Some(0i64);
        for (axis, &i) in index.iter().enumerate() {
            let n = xs[axis];
            let mut s = i - widths[axis][0];
            if s < 0 || s >= n {
                s = match mode {
                    PadMode::Constant => {
                        source = None;
                        break;
                    }
                    PadMode::Edge => s.clamp(0, n - 1),
                    PadMode::Reflect if s < 0 => -s,
                    PadMode::Reflect => 2 * (n - 1) - s,
                };
            }
            source = source.map(|f| f + s * xstrides[axis]);
        }
        out.push(source.map_or(fill, |f| xv[f as usize]));
    }
    T::array(x.dtype(), shape, &out)
}

fn pad_eval(args: &[Value], attrs: &Attrs) -> Result<Value, String> {
    let (arrays, result) = checked(args, attrs, pad_rel)?;
    let (shape, _) = concrete(&result, None)?;
    let (x, fill) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let widths = pad_widths(attrs)?;
    let mode = pad_mode(attrs)?;
    if x.dtype().is_float() {
        let fill = fill
            .to_f64_vec()
            .first()
            .copied()
            .ok_or("the pad value is empty")?;
        pad_run::<f64>(x, fill, &widths, mode, &shape)
    } else {
        let fill = fill
            .to_i128_vec()
            .first()
            .copied()
            .ok_or("the pad value is empty")?;
        pad_run::<i128>(x, fill, &widths, mode, &shape)
    }
}

// ----- Compute definitions of the contractions, softmax, convolution, pooling, normalization,
// dropout, padding and flattening -----
//
// Contractions (`nn.dense`, `nn.matmul`, `nn.batch_matmul`, `nn.conv2d`) are written in the
// form the kernel compiler recognizes: a sum over reduction axes of the product of two reads,
// each index a bare output index, a bare reduction axis or 0, in the output dtype. The other
// reductions accumulate floats in `float64` as the reference evaluation does, so they agree
// with it exactly.

/// The `int64` index constant `v`.
fn ix(v: i64) -> TExpr {
    TExpr::index(v)
}

/// `a - b` on index expressions.
fn ix_sub(a: &TExpr, b: &TExpr) -> TExpr {
    compute::bin(BinaryOp::Sub, a, b)
}

/// `a * b` for an index expression and a constant.
fn ix_mul(a: &TExpr, b: i64) -> TExpr {
    compute::bin(BinaryOp::Mul, a, &ix(b))
}

/// `floor(a / b)` for an index expression and a positive constant.
fn ix_floordiv(a: &TExpr, b: i64) -> TExpr {
    compute::bin(BinaryOp::FloorDiv, a, &ix(b))
}

/// `max(a, b)` on index expressions.
fn ix_max(a: &TExpr, b: &TExpr) -> TExpr {
    compute::bin(BinaryOp::Max, a, b)
}

/// `min(a, b)` on index expressions.
fn ix_min(a: &TExpr, b: &TExpr) -> TExpr {
    compute::bin(BinaryOp::Min, a, b)
}

/// `i` clamped into `0..n`, for reads a `select` guards (both branches are evaluated).
fn clamp_index(i: &TExpr, n: i64) -> TExpr {
    ix_max(&ix(0), &ix_min(i, &ix(n - 1)))
}

/// `0 <= i < n`.
fn in_range(i: &TExpr, n: i64) -> TExpr {
    let lo = compute::cmp(CmpOp::Ge, i, &ix(0));
    let hi = compute::cmp(CmpOp::Lt, i, &ix(n));
    compute::bin(BinaryOp::LogicalAnd, &lo, &hi)
}

/// A float `x` converted to the integer or boolean `dtype` as the reference evaluation reads
/// floats as integers: truncated toward zero into `i128` (NaN as 0, saturating), then wrapped
/// to the width of `dtype` (booleans: non-zero). A plain cast would saturate at the width of
/// `dtype` instead.
fn float_as_int(x: TExpr, dtype: DType) -> TExpr {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 2.0 * TWO_63;
    const TWO_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    let f = |v: f64| TExpr::float(v, DType::F64);
    let v = x.cast(DType::F64);
    let t = v.clone().unary(UnaryOp::Trunc);
    if compute::is_bool(dtype) {
        let nonzero = compute::cmp(CmpOp::Ne, &t, &f(0.0));
        return compute::is_nan(&v).select(compute::zero(dtype), nonzero.cast(dtype));
    }
    // The remainder modulo 2^64 is exact; it moves into the int64 range without rounding.
    let r = compute::bin(BinaryOp::Mod, &t, &f(TWO_64));
    let low = compute::cmp(CmpOp::Lt, &r, &f(-TWO_63))
        .select(compute::bin(BinaryOp::Add, &r, &f(TWO_64)), r.clone());
    let r = compute::cmp(CmpOp::Ge, &r, &f(TWO_63))
        .select(compute::bin(BinaryOp::Sub, &r, &f(TWO_64)), low);
    // From 2^127 up the `i128` saturates at its maximum, whose low 64 bits are all ones; from
    // -2^127 down at its minimum (low bits zero), which the remainder already gives.
    compute::cmp(CmpOp::Ge, &v, &f(TWO_127))
        .select(ix(-1), r.cast(DType::I64))
        .cast(dtype)
}

/// A value read from an input, in the number type the reference evaluation computes `dtype`
/// results in: floats read as integers as [`float_as_int`] does, anything else cast.
fn read_as(x: TExpr, dtype: DType) -> TExpr {
    if x.dtype().is_float() && !dtype.is_float() {
        float_as_int(x, dtype)
    } else {
        x.cast(dtype)
    }
}

/// A contraction operand in `dtype`: `t` itself, or its elements converted as the reference
/// evaluation reads them (see [`read_as`]), so that the contraction reads plain tensors of its
/// own dtype (the form the kernel compiler hands to its GEMM).
fn contraction_operand(t: &Tensor, dtype: DType) -> Tensor {
    if t.dtype == dtype {
        t.clone()
    } else {
        Tensor::compute(format!("{}_{dtype}", t.name), &t.shape, |i| {
            read_as(t.at(i), dtype)
        })
    }
}

/// `name[i] = Σ_k a[ia] · b[ib]` over the reduction axes `k`, where `index` maps an output
/// index to `(ia, ib)`; `a` and `b` have the result's dtype (see [`contraction_operand`]).
fn contraction(
    name: &str,
    shape: &[i64],
    (a, b): (&Tensor, &Tensor),
    k: &[IterVar],
    index: impl Fn(&[TExpr]) -> (Vec<TExpr>, Vec<TExpr>),
) -> Tensor {
    Tensor::compute(name, shape, |i| {
        let (ia, ib) = index(i);
        a.at(&ia)
            .binary(BinaryOp::Mul, b.at(&ib))
            .reduce(ReduceOp::Sum, k.to_vec())
    })
}

/// `nn.dense`: `out[..., u] = Σ_k data[..., k] · weight[u, k]`.
fn dense_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, w) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let k = x.shape.last().copied();
    let fits = matches!((k, w.shape.as_slice()), (Some(k), &[u, wk])
        if wk == k && shape.len() == x.shape.len() && shape.last() == Some(&u));
    let (true, Some(k)) = (fits, k) else {
        return Err(format!(
            "nn.dense expects data [..., k] and weight [units, k] giving {shape:?}, got {:?} \
             and {:?}",
            x.shape, w.shape
        ));
    };
    let (x, w) = (contraction_operand(x, dtype), contraction_operand(w, dtype));
    let r = IterVar::new(k);
    let last = shape.len() - 1;
    compute::tensor_value(contraction("T_dense", &shape, (&x, &w), &[r], |i| {
        let mut ia = i[..last].to_vec();
        ia.push(r.expr());
        (ia, vec![i[last].clone(), r.expr()])
    }))
}

/// `nn.matmul`: `out[..., m, n] = Σ_k a[..., m, k] · b[k, n]`, with `transpose_a` reading `a`
/// as `[..., k, m]` and `transpose_b` reading `b` as `[n, k]`; a vector `a` is one row.
fn matmul_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (a, b) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let r = a.shape.len();
    let k = match (ta, r) {
        (true, 2..) => a.shape[r - 2],
        (false, 1..) => a.shape[r - 1],
        _ => -1,
    };
    let kb = match (tb, b.shape.as_slice()) {
        (true, &[_, k]) | (false, &[k, _]) => k,
        _ => -2,
    };
    if k != kb || shape.len() != r {
        return Err(format!(
            "nn.matmul cannot contract {:?} with {:?} (transpose_a={ta}, transpose_b={tb})",
            a.shape, b.shape
        ));
    }
    let (a, b) = (contraction_operand(a, dtype), contraction_operand(b, dtype));
    let red = IterVar::new(k);
    compute::tensor_value(contraction("T_matmul", &shape, (&a, &b), &[red], |i| {
        let (kk, n) = (red.expr(), i[r - 1].clone());
        let mut ia = i[..r - 1].to_vec();
        if ta {
            // [..., k, m]: the output's row index `m` is last.
            let m = ia.pop().unwrap_or_else(|| ix(0));
            ia.push(kk.clone());
            ia.push(m);
        } else {
            ia.push(kk.clone());
        }
        let ib = if tb { vec![n, kk] } else { vec![kk, n] };
        (ia, ib)
    }))
}

/// `nn.batch_matmul`: `out[b, m, n] = Σ_k a[b, m, k] · b[b, k, n]` (transposes as
/// `nn.matmul`), an operand with one batch broadcasting to every batch.
fn batch_matmul_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (a, b) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let (&[a0, a1, a2], &[b0, b1, b2], &[batch, _, _]) =
        (a.shape.as_slice(), b.shape.as_slice(), shape.as_slice())
    else {
        return Err(format!(
            "nn.batch_matmul expects rank-3 operands and result, got {:?}, {:?} and {shape:?}",
            a.shape, b.shape
        ));
    };
    let k = if ta { a1 } else { a2 };
    let kb = if tb { b2 } else { b1 };
    let batch_ok = |d: i64| d == batch || d == 1;
    if k != kb || !batch_ok(a0) || !batch_ok(b0) {
        return Err(format!(
            "nn.batch_matmul cannot contract {:?} with {:?} (transpose_a={ta}, transpose_b={tb})",
            a.shape, b.shape
        ));
    }
    let (a, b) = (contraction_operand(a, dtype), contraction_operand(b, dtype));
    let red = IterVar::new(k);
    compute::tensor_value(contraction(
        "T_batch_matmul",
        &shape,
        (&a, &b),
        &[red],
        |i| {
            let pick = |d: i64| if d == batch { i[0].clone() } else { ix(0) };
            let (m, n, kk) = (i[1].clone(), i[2].clone(), red.expr());
            let ia = if ta {
                vec![pick(a0), kk.clone(), m]
            } else {
                vec![pick(a0), m, kk.clone()]
            };
            let ib = if tb {
                vec![pick(b0), n, kk]
            } else {
                vec![pick(b0), kk, n]
            };
            (ia, ib)
        },
    ))
}

/// `index` (without `axis`) with `at` inserted at `axis`; a rank-0 tensor has no index.
fn with_axis(index: &[TExpr], axis: usize, at: TExpr, rank: usize) -> Vec<TExpr> {
    let mut v = index.to_vec();
    if rank > 0 {
        v.insert(axis, at);
    }
    v
}

/// `index` without `axis` (a rank-0 index stays empty).
fn without_axis(index: &[TExpr], axis: usize) -> Vec<TExpr> {
    index
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, e)| e.clone())
        .collect()
}

/// `shape` without `axis`, and the extent of `axis` (1 for a rank-0 tensor).
fn split_axis(shape: &[i64], axis: usize) -> (Vec<i64>, i64) {
    let rest = shape
        .iter()
        .enumerate()
        .filter(|&(d, _)| d != axis)
        .map(|(_, &n)| n)
        .collect();
    (rest, shape.get(axis).copied().unwrap_or(1))
}

/// `nn.softmax` and `nn.log_softmax` along `axis`, in `float64` with the maximum subtracted:
/// `exp(x - max) / Σ exp(x - max)` or `(x - max) - log Σ exp(x - max)`.
fn softmax_te(inputs: &[TeValue], attrs: &Attrs, out: &Type, log: bool) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    if x.shape != shape || !dtype.is_float() {
        return Err(format!(
            "softmax expects a float tensor of shape {shape:?}, got {:?} of {}",
            x.shape, x.dtype
        ));
    }
    let rank = shape.len();
    let axis = normalize_axis(attr_int(attrs, "axis")?, rank)?;
    let (rest, extent) = split_axis(&shape, axis);
    let f64_at = |index: &[TExpr]| x.at(index).cast(DType::F64);
    let k = IterVar::new(extent);
    let max = Tensor::compute("T_softmax_max", &rest, |i| {
        f64_at(&with_axis(i, axis, k.expr(), rank)).reduce(ReduceOp::Max, vec![k])
    });
    let k = IterVar::new(extent);
    let sum = Tensor::compute("T_softmax_sum", &rest, |i| {
        let shifted = compute::bin(
            BinaryOp::Sub,
            &f64_at(&with_axis(i, axis, k.expr(), rank)),
            &max.at(i),
        );
        shifted.unary(UnaryOp::Exp).reduce(ReduceOp::Sum, vec![k])
    });
    let name = if log { "T_log_softmax" } else { "T_softmax" };
    compute::tensor_value(Tensor::compute(name, &shape, |i| {
        let r = without_axis(i, axis);
        let shifted = compute::bin(BinaryOp::Sub, &f64_at(i), &max.at(&r));
        let v = if log {
            compute::bin(BinaryOp::Sub, &shifted, &sum.at(&r).unary(UnaryOp::Log))
        } else {
            compute::bin(BinaryOp::Div, &shifted.unary(UnaryOp::Exp), &sum.at(&r))
        };
        v.cast(dtype)
    }))
}

/// `nn.batch_flatten`: `out[n, j] = data[n, unravel(j)]`.
fn batch_flatten_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, _) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let rest = x.shape.get(1..).unwrap_or_default();
    if shape.len() != 2 || x.shape.first() != shape.first() {
        return Err(format!(
            "nn.batch_flatten of {:?} cannot give {shape:?}",
            x.shape
        ));
    }
    compute::tensor_value(Tensor::compute("T_batch_flatten", &shape, |i| {
        let mut index = vec![i[0].clone()];
        let mut stride = 1i64;
        let mut dims = Vec::with_capacity(rest.len());
        for &d in rest.iter().rev() {
            let e = compute::bin(BinaryOp::Div, &i[1], &ix(stride.max(1)));
            dims.push(compute::bin(BinaryOp::Mod, &e, &ix(d.max(1))));
            stride = stride.saturating_mul(d);
        }
        index.extend(dims.into_iter().rev());
        x.at(&index)
    }))
}

/// `nn.conv2d` on NCHW data and OIHW weights as a contraction over an im2col of the (padded)
/// data, per group: `col[n, g, c, kh, kw, y, x]` is the data element tap `(kh, kw)` of output
/// `(y, x)` reads (0 in the padding), `wg[g, o, c, kh, kw]` the weight of output channel
/// `g * Og + o`, and `conv[n, g, o, y, x] = Σ_{c, kh, kw} col · wg`.
fn conv2d_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    require_nchw(attrs, "data_layout", Some("kernel_layout"))?;
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, w) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let p = Conv2d::new(attrs)?;
    let (&[n, c, h, wd], &[o, cg, kh, kw], &[_, _, oh, ow]) =
        (x.shape.as_slice(), w.shape.as_slice(), shape.as_slice())
    else {
        return Err(format!(
            "nn.conv2d expects NCHW data, OIHW weights and an NCHW result, got {:?}, {:?} and \
             {shape:?}",
            x.shape, w.shape
        ));
    };
    let g = p.groups;
    if cg.checked_mul(g) != Some(c) || o % g != 0 || shape[1] != o {
        return Err(format!(
            "nn.conv2d with groups={g} cannot take data {:?} and weight {:?}",
            x.shape, w.shape
        ));
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

/// The sums of an average's windows.
enum WindowSum {
    /// One sum, in `float64` for floats (as the reference) and in `int64` for integers up to
    /// 32 bits.
    One(Tensor),
    /// For 64-bit integers, whose exact sum needs more than 64 bits: `int64` sums of the high
    /// halves (`v >> 32`, signed for `int64`) and of the low halves (`v & 0xffffffff`).
    Halves(Tensor, Tensor),
}

/// The most taps a window of 64-bit integers may have: its sums of halves then stay far from
/// overflowing 63 bits, and so does every step of [`window_mean`].
const HALVES_LIMIT: i64 = 1 << 30;

/// A window tap: the value read (of the data's dtype) and, when some taps fall outside the
/// data, whether this one is inside.
type Tap = (TExpr, Option<TExpr>);

/// The window sums `name_sum[i] = Σ_r tap(i, r)` of an average over `dtype` data, with
/// reduction axes of extents `taps` (taps outside the window count 0).
fn window_sum(
    name: &str,
    shape: &[i64],
    dtype: DType,
    taps: [i64; 2],
    tap: impl Fn(&[TExpr], &[TExpr]) -> Tap,
) -> Result<WindowSum, String> {
    let sum = |suffix: &str, acc: DType, part: &dyn Fn(TExpr) -> TExpr| {
        let axes = taps.map(IterVar::new);
        Tensor::compute(format!("{name}_{suffix}"), shape, |i| {
            let (v, inside) = tap(i, &[axes[0].expr(), axes[1].expr()]);
            let v = part(v);
            let v = match inside {
                Some(inside) => inside.select(v, compute::zero(acc)),
                None => v,
            };
            v.reduce(ReduceOp::Sum, axes.to_vec())
        })
    };
    if dtype.is_float() {
        Ok(WindowSum::One(sum("sum", DType::F64, &|v| {
            v.cast(DType::F64)
        })))
    } else if dtype.bits <= 32 {
        Ok(WindowSum::One(sum("sum", DType::I64, &|v| {
            v.cast(DType::I64)
        })))
    } else if taps[0].saturating_mul(taps[1]) <= HALVES_LIMIT {
        let hi = sum("sum_hi", DType::I64, &|v| compute::high_half(&v));
        let lo = sum("sum_lo", DType::I64, &|v| compute::low_half(&v));
        Ok(WindowSum::Halves(hi, lo))
    } else {
        Err(format!(
            "an average of {dtype} values over windows of {} taps is not supported (at most \
             {HALVES_LIMIT})",
            taps[0].saturating_mul(taps[1])
        ))
    }
}

/// The average at output `i`: its window sum divided by `count` (an `int64` expression at
/// most the window's taps) and converted to `dtype`, as the reference divides: floats in
/// `float64` (0/0 is NaN), integers truncating toward zero, an empty window giving 0.
fn window_mean(sum: &WindowSum, i: &[TExpr], count: &TExpr, dtype: DType) -> TExpr {
    let (hi, lo) = match sum {
        WindowSum::One(t) if dtype.is_float() => {
            let count = count.clone().cast(DType::F64);
            return compute::bin(BinaryOp::Div, &t.at(i), &count).cast(dtype);
        }
        WindowSum::One(t) => {
            let q = compute::bin(BinaryOp::Div, &t.at(i), &ix_max(count, &ix(1)));
            return compute::cmp(CmpOp::Eq, count, &ix(0))
                .select(ix(0), q)
                .cast(dtype);
        }
        WindowSum::Halves(hi, lo) => (hi.at(i), lo.at(i)),
    };
    let q = compute::wide_quotient(&[lo, hi], &ix_max(count, &ix(1)), false);
    compute::cmp(CmpOp::Eq, count, &ix(0))
        .select(ix(0), q)
        .cast(dtype)
}

/// The value max pooling starts from and pads with: -inf, or the dtype's lowest integer.
fn pool_lowest(dtype: DType) -> TExpr {
    if dtype.is_float() {
        TExpr::float(f64::NEG_INFINITY, dtype)
    } else {
        TExpr::int(compute::int_range(dtype).0, dtype)
    }
}

/// A tap of a max pool: ignored (the lowest value) outside the input or when NaN, as the
/// reference's comparison skips NaN.
fn max_candidate((v, inside): Tap) -> TExpr {
    let lowest = pool_lowest(v.dtype());
    let outside = inside.map(|inside| inside.unary(UnaryOp::LogicalNot));
    let skip = match (v.dtype().is_float(), outside) {
        (true, Some(outside)) => Some(compute::bin(
            BinaryOp::LogicalOr,
            &outside,
            &compute::is_nan(&v),
        )),
        (true, None) => Some(compute::is_nan(&v)),
        (false, outside) => outside,
    };
    match skip {
        Some(skip) => skip.select(lowest, v),
        None => v,
    }
}

/// `name[i] = max_r tap(i, r)` over reduction axes of extents `taps` (see [`max_candidate`]).
fn window_max(
    name: &str,
    shape: &[i64],
    taps: [i64; 2],
    tap: impl Fn(&[TExpr], &[TExpr]) -> Tap,
) -> Result<TeValue, String> {
    let axes = taps.map(IterVar::new);
    compute::tensor_value(Tensor::compute(name, shape, |i| {
        max_candidate(tap(i, &[axes[0].expr(), axes[1].expr()]))
            .reduce(ReduceOp::Max, axes.to_vec())
    }))
}

/// How many taps `t` in `0..k` put `start + t * d` below `end` and, when `from_zero`, at or
/// above 0 (`d >= 1`).
fn tap_count(start: &TExpr, k: i64, d: i64, end: i64, from_zero: bool) -> TExpr {
    let first = if from_zero {
        ix_max(&ix(0), &ix_sub(&ix(0), &ix_floordiv(start, d)))
    } else {
        ix(0)
    };
    let last = ix_min(&ix(k - 1), &ix_floordiv(&ix_sub(&ix(end - 1), start), d));
    ix_max(&ix(0), &ix_add(ix_sub(&last, &first), ix(1)))
}

/// A pooling operator's NCHW input, its height and width, and the result's shape and dtype.
struct PoolTe<'t> {
    x: &'t Tensor,
    h: i64,
    w: i64,
    shape: [i64; 4],
    dtype: DType,
}

/// The NCHW input and result shapes of a pooling operator, checked.
fn pool_shapes<'t>(
    inputs: &'t [TeValue],
    attrs: &Attrs,
    out: &Type,
    what: &str,
) -> Result<PoolTe<'t>, String> {
    require_nchw(attrs, "layout", None)?;
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    match (x.shape.as_slice(), shape.as_slice()) {
        (&[n, c, h, w], &[on, oc, oh, ow]) if on == n && oc == c && x.dtype == dtype => {
            Ok(PoolTe {
                x,
                h,
                w,
                shape: [on, oc, oh, ow],
                dtype,
            })
        }
        _ => Err(format!(
            "{what} expects NCHW data and result, got {:?} and {shape:?}",
            x.shape
        )),
    }
}

/// `nn.max_pool2d` and `nn.avg_pool2d`: a reduction over the window taps, skipping taps in the
/// padding (reads clamped into the input). Max pooling ignores NaN as the reference does;
/// average pooling divides by the in-bounds taps, or with `count_include_pad` by the taps
/// inside the padded input (what ceil mode adds past the bottom and right padding left out).
fn pool2d_te(inputs: &[TeValue], attrs: &Attrs, out: &Type, max: bool) -> Result<TeValue, String> {
    let what = if max {
        "nn.max_pool2d"
    } else {
        "nn.avg_pool2d"
    };
    let PoolTe {
        x,
        h,
        w,
        shape,
        dtype,
    } = pool_shapes(inputs, attrs, out, what)?;
    let p = Pool2d::new(attrs)?;
    let [kh, kw] = p.size;
    let [sh, sw] = p.strides;
    let [dh, dw] = p.dilation;
    let [pt, pl, pb, pr] = p.padding;
    let starts = |i: &[TExpr]| {
        (
            ix_sub(&ix_mul(&i[2], sh), &ix(pt)),
            ix_sub(&ix_mul(&i[3], sw), &ix(pl)),
        )
    };
    let tap = |i: &[TExpr], r: &[TExpr]| -> Tap {
        if h == 0 || w == 0 {
            // Every tap is padding, and nothing may be read.
            let fill = if max {
                pool_lowest(dtype)
            } else {
                compute::zero(dtype)
            };
            return (fill, Some(TExpr::int(0, DType::BOOL)));
        }
        let (y0, x0) = starts(i);
        let iy = ix_add(y0.clone(), ix_mul(&r[0], dh));
        let iw = ix_add(x0.clone(), ix_mul(&r[1], dw));
        let inside = compute::bin(BinaryOp::LogicalAnd, &in_range(&iy, h), &in_range(&iw, w));
        let index = [
            i[0].clone(),
            i[1].clone(),
            clamp_index(&iy, h),
            clamp_index(&iw, w),
        ];
        (x.at(&index), Some(inside))
    };
    if max {
        return window_max("T_max_pool2d", &shape, [kh, kw], tap);
    }
    let sum = window_sum("T_avg_pool2d", &shape, dtype, [kh, kw], tap)?;
    compute::tensor_value(Tensor::compute("T_avg_pool2d", &shape, |i| {
        let (y0, x0) = starts(i);
        let (rows, cols) = if p.count_include_pad {
            (
                tap_count(&y0, kh, dh, h.saturating_add(pb), false),
                tap_count(&x0, kw, dw, w.saturating_add(pr), false),
            )
        } else {
            (
                tap_count(&y0, kh, dh, h, true),
                tap_count(&x0, kw, dw, w, true),
            )
        };
        let count = compute::bin(BinaryOp::Mul, &rows, &cols);
        window_mean(&sum, i, &count, dtype)
    }))
}

/// `nn.global_max_pool2d` and `nn.global_avg_pool2d`: a reduction over each plane (NaN
/// ignored by the maximum; an empty plane's mean is NaN, or 0 for integers).
fn global_pool2d_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    max: bool,
) -> Result<TeValue, String> {
    let what = if max {
        "nn.global_max_pool2d"
    } else {
        "nn.global_avg_pool2d"
    };
    let PoolTe {
        x,
        h,
        w,
        shape,
        dtype,
    } = pool_shapes(inputs, attrs, out, what)?;
    if shape[2..] != [1, 1] {
        return Err(format!(
            "{what} expects a [n, c, 1, 1] result, got {shape:?}"
        ));
    }
    let tap = |i: &[TExpr], r: &[TExpr]| -> Tap {
        let index = [i[0].clone(), i[1].clone(), r[0].clone(), r[1].clone()];
        (x.at(&index), None)
    };
    if max {
        return window_max("T_global_max_pool2d", &shape, [h, w], tap);
    }
    let sum = window_sum("T_global_avg_pool2d", &shape, dtype, [h, w], tap)?;
    let count = ix(h.saturating_mul(w));
    compute::tensor_value(Tensor::compute("T_global_avg_pool2d", &shape, |i| {
        window_mean(&sum, i, &count, dtype)
    }))
}

/// Adaptive pooling windows along one axis of `n` elements pooled to `o`: output `i` covers
/// `floor(i * n / o) .. ceil((i + 1) * n / o)`. Returns the start and length expressions of
/// output index `i`.
fn adaptive_window(i: &TExpr, n: i64, o: i64) -> (TExpr, TExpr) {
    let o = o.max(1);
    let start = ix_floordiv(&ix_mul(i, n), o);
    let end = ix_floordiv(&ix_add(ix_mul(&ix_add(i.clone(), ix(1)), n), ix(o - 1)), o);
    let len = ix_sub(&end, &start);
    (start, len)
}

/// The longest adaptive pooling window along an axis of `n` elements pooled to `o`.
fn adaptive_widest(n: i64, o: i64) -> i64 {
    let (n, o) = (i128::from(n), i128::from(o.max(1)));
    (0..o)
        .map(|i| ((i + 1) * n + o - 1) / o - (i * n) / o)
        .max()
        .map_or(0, |len| i64::try_from(len).unwrap_or(i64::MAX))
}

/// `nn.adaptive_max_pool2d` and `nn.adaptive_avg_pool2d`: a reduction over the widest window
/// with the taps past each window's end masked. The maximum ignores NaN as the reference does
/// (an empty window gives the lowest value); the mean divides the sum by the window's size.
fn adaptive_pool2d_te(
    inputs: &[TeValue],
    attrs: &Attrs,
    out: &Type,
    max: bool,
) -> Result<TeValue, String> {
    let (what, name) = if max {
        ("nn.adaptive_max_pool2d", "T_adaptive_max_pool2d")
    } else {
        ("nn.adaptive_avg_pool2d", "T_adaptive_avg_pool2d")
    };
    let PoolTe {
        x,
        h,
        w,
        shape,
        dtype,
    } = pool_shapes(inputs, attrs, out, what)?;
    let (oh, ow) = (shape[2], shape[3]);
    let tap = |i: &[TExpr], r: &[TExpr]| -> Tap {
        let (y0, ylen) = adaptive_window(&i[2], h, oh);
        let (x0, xlen) = adaptive_window(&i[3], w, ow);
        let inside = compute::bin(
            BinaryOp::LogicalAnd,
            &compute::cmp(CmpOp::Lt, &r[0], &ylen),
            &compute::cmp(CmpOp::Lt, &r[1], &xlen),
        );
        // Windows start inside the input, so only the end needs clamping.
        let index = [
            i[0].clone(),
            i[1].clone(),
            ix_min(&ix_add(y0.clone(), r[0].clone()), &ix(h - 1)),
            ix_min(&ix_add(x0.clone(), r[1].clone()), &ix(w - 1)),
        ];
        (x.at(&index), Some(inside))
    };
    let taps = [adaptive_widest(h, oh), adaptive_widest(w, ow)];
    if max {
        return window_max(name, &shape, taps, tap);
    }
    let sum = window_sum(name, &shape, dtype, taps, tap)?;
    compute::tensor_value(Tensor::compute(name, &shape, |i| {
        let (_, ylen) = adaptive_window(&i[2], h, oh);
        let (_, xlen) = adaptive_window(&i[3], w, ow);
        let count = compute::bin(BinaryOp::Mul, &ylen, &xlen);
        window_mean(&sum, i, &count, dtype)
    }))
}

/// `(x - mean) / sqrt(var + epsilon) * gamma + beta` in `float64` (`gamma` only with `scale`,
/// `beta` only with `center`), as the reference's `normalize`.
fn normalize_te(
    x: TExpr,
    mean: &TExpr,
    var: &TExpr,
    (gamma, beta): (TExpr, TExpr),
    a: &NormAttrs,
) -> TExpr {
    let f64_of = |e: TExpr| e.cast(DType::F64);
    let eps = TExpr::float(a.epsilon, DType::F64);
    let denom = compute::bin(BinaryOp::Add, var, &eps).unary(UnaryOp::Sqrt);
    let mut y = compute::bin(
        BinaryOp::Div,
        &compute::bin(BinaryOp::Sub, &f64_of(x), mean),
        &denom,
    );
    if a.scale {
        y = compute::bin(BinaryOp::Mul, &y, &f64_of(gamma));
    }
    if a.center {
        y = compute::bin(BinaryOp::Add, &y, &f64_of(beta));
    }
    y
}

/// The data and the per-channel vectors of a normalization, checked: the vectors have the
/// length of the data's `axis` dimension (1 for rank 0).
fn norm_operands<'t>(
    inputs: &'t [TeValue],
    count: usize,
    out: &Type,
    attrs: &Attrs,
    what: &str,
) -> Result<(Vec<&'t Tensor>, NormAttrs, DType), String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let tensors = (0..count)
        .map(|i| compute::input(inputs, i))
        .collect::<Result<Vec<_>, _>>()?;
    let a = NormAttrs::new(attrs, shape.len())?;
    let extent = shape.get(a.axis).copied().unwrap_or(1);
    let fits = tensors[0].shape == shape
        && tensors[1..]
            .iter()
            .all(|t| t.shape == [extent] && t.dtype == dtype);
    if !fits || !dtype.is_float() {
        return Err(format!(
            "{what} expects float data of shape {shape:?} and vectors of {extent} elements"
        ));
    }
    Ok((tensors, a, dtype))
}

/// The element of a per-channel vector for the data element at `index`.
fn channel_of(v: &Tensor, index: &[TExpr], axis: usize) -> TExpr {
    v.at(&[index.get(axis).cloned().unwrap_or_else(|| ix(0))])
}

/// An identity copy of `t` (a tuple field that passes an input through).
fn copy_of(t: &Tensor, name: &str) -> TeValue {
    TeValue::Tensor(Tensor::compute(name, &t.shape, |i| t.at(i)))
}

/// `nn.batch_norm` in inference: the tuple (data normalized with the moving statistics,
/// moving_mean, moving_var).
fn batch_norm_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    let field = match out.kind() {
        TypeKind::Tuple(fields) => fields.first().cloned(),
        _ => None,
    }
    .ok_or_else(|| format!("nn.batch_norm expects a tuple result, got `{out}`"))?;
    let (t, a, dtype) = norm_operands(inputs, 5, &field, attrs, "nn.batch_norm")?;
    let (x, gamma, beta, mean, var) = (t[0], t[1], t[2], t[3], t[4]);
    let normalized = Tensor::compute("T_batch_norm", &x.shape, |i| {
        let at = |v: &Tensor| channel_of(v, i, a.axis);
        normalize_te(
            x.at(i),
            &at(mean).cast(DType::F64),
            &at(var).cast(DType::F64),
            (at(gamma), at(beta)),
            &a,
        )
        .cast(dtype)
    });
    Ok(TeValue::Tuple(vec![
        TeValue::Tensor(normalized),
        copy_of(mean, "T_batch_norm_moving_mean"),
        copy_of(var, "T_batch_norm_moving_var"),
    ]))
}

/// `nn.layer_norm`: the data normalized along `axis` with its own mean and (biased) variance,
/// in `float64`.
fn layer_norm_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (t, a, dtype) = norm_operands(inputs, 3, out, attrs, "nn.layer_norm")?;
    let (x, gamma, beta) = (t[0], t[1], t[2]);
    let rank = x.shape.len();
    let (rest, extent) = split_axis(&x.shape, a.axis);
    let count = TExpr::float(extent as f64, DType::F64);
    let f64_at = |index: &[TExpr]| x.at(index).cast(DType::F64);
    let k = IterVar::new(extent);
    let sum = Tensor::compute("T_layer_norm_sum", &rest, |i| {
        f64_at(&with_axis(i, a.axis, k.expr(), rank)).reduce(ReduceOp::Sum, vec![k])
    });
    let mean = Tensor::compute("T_layer_norm_mean", &rest, |i| {
        compute::bin(BinaryOp::Div, &sum.at(i), &count)
    });
    let k = IterVar::new(extent);
    let squares = Tensor::compute("T_layer_norm_squares", &rest, |i| {
        let d = compute::bin(
            BinaryOp::Sub,
            &f64_at(&with_axis(i, a.axis, k.expr(), rank)),
            &mean.at(i),
        );
        compute::bin(BinaryOp::Mul, &d, &d).reduce(ReduceOp::Sum, vec![k])
    });
    compute::tensor_value(Tensor::compute("T_layer_norm", &x.shape, |i| {
        let r = without_axis(i, a.axis);
        let var = compute::bin(BinaryOp::Div, &squares.at(&r), &count);
        let channel = |v: &Tensor| channel_of(v, i, a.axis);
        normalize_te(
            x.at(i),
            &mean.at(&r),
            &var,
            (channel(gamma), channel(beta)),
            &a,
        )
        .cast(dtype)
    }))
}

/// `nn.dropout` in inference: the tuple (data, a mask of ones).
fn dropout_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, String> {
    let x = compute::input(inputs, 0)?;
    let fits = match out.kind() {
        TypeKind::Tuple(fields) if fields.len() == 2 => fields
            .iter()
            .all(|f| compute::static_tensor(f).is_ok_and(|(s, d)| s == x.shape && d == x.dtype)),
        _ => false,
    };
    if !fits {
        return Err(format!(
            "nn.dropout expects a result of two tensors like its input {:?}, got `{out}`",
            x.shape
        ));
    }
    let one = compute::one(x.dtype);
    Ok(TeValue::Tuple(vec![
        copy_of(x, "T_dropout"),
        TeValue::Tensor(Tensor::compute("T_dropout_mask", &x.shape, |_| one)),
    ]))
}

/// `nn.pad`: every axis grown by its `[before, after]` pair; the border is the pad value
/// (converted to the data's dtype as the reference converts it), the edge element, or the
/// mirror image without the edge.
fn pad_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, String> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, value) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let widths = pad_widths(attrs)?;
    let mode = pad_mode(attrs)?;
    let fits = widths.len() == x.shape.len()
        && value.shape.is_empty()
        && x.dtype == dtype
        && x.shape
            .iter()
            .zip(&widths)
            .zip(&shape)
            .all(|((&n, &[b, a]), &o)| n.checked_add(b).and_then(|m| m.checked_add(a)) == Some(o));
    if !fits || shape.len() != x.shape.len() {
        return Err(format!(
            "nn.pad of {:?} with pad_width {widths:?} cannot give {shape:?}",
            x.shape
        ));
    }
    let fill = if dtype.is_float() {
        value.at(&[]).cast(DType::F64).cast(dtype)
    } else {
        read_as(value.at(&[]), dtype)
    };
    let empty = x.shape.contains(&0);
    compute::tensor_value(Tensor::compute("T_pad", &shape, |i| {
        // Data without elements: every element is the pad value, and nothing may be read.
        if empty {
            return fill.clone();
        }
        let mut inside: Option<TExpr> = None;
        let mut index = Vec::with_capacity(i.len());
        for ((e, &n), &[before, _]) in i.iter().zip(&x.shape).zip(&widths) {
            let s = ix_sub(e, &ix(before));
            let source = match mode {
                PadMode::Constant => {
                    let ok = in_range(&s, n);
                    inside = Some(match inside {
                        Some(acc) => compute::bin(BinaryOp::LogicalAnd, &acc, &ok),
                        None => ok,
                    });
                    s
                }
                PadMode::Edge => s,
                // (n - 1) - |(n - 1) - |s||: -s before the start, 2(n - 1) - s past the end.
                PadMode::Reflect => {
                    let abs = |v: &TExpr| ix_max(v, &ix_sub(&ix(0), v));
                    ix_sub(&ix(n - 1), &abs(&ix_sub(&ix(n - 1), &abs(&s))))
                }
            };
            index.push(clamp_index(&source, n));
        }
        let v = x.at(&index);
        match inside {
            Some(inside) => inside.select(v, fill.clone()),
            None => v,
        }
    }))
}

#[cfg(test)]
mod tests {
    use crate::testing::{attrs, ints};
    use std::slice::from_ref;

    use relay_ir::AttrValue as V;

    use super::*;

    fn schema(name: &str) -> &'static OpSchema {
        crate::lookup(name).unwrap()
    }

    fn s(text: &str) -> V {
        V::Str(text.into())
    }

    /// A tensor type; -1 is `?`.
    fn ty(shape: &[i64], dtype: &str) -> Type {
        let dims = shape
            .iter()
            .map(|&d| if d < 0 { Dim::Any } else { Dim::Known(d) })
            .collect();
        tensor(dims, DType::parse(dtype).unwrap())
    }

    fn f32s(shape: &[i64]) -> Type {
        ty(shape, "float32")
    }

    fn rel(name: &str, types: &[Type], set: &[(&str, V)]) -> Result<String, String> {
        let relation = schema(name).relation.unwrap();
        relation(types, &attrs(name, set)).map(|t| t.to_string())
    }

    fn ok(name: &str, types: &[Type], set: &[(&str, V)]) -> String {
        rel(name, types, set).unwrap()
    }

    fn err(name: &str, types: &[Type], set: &[(&str, V)]) -> String {
        rel(name, types, set).unwrap_err()
    }

    fn t_of(dtype: &str, shape: &[i64], values: &[f64]) -> Value {
        Value::tensor(NDArray::from_f64_slice(DType::parse(dtype).unwrap(), shape, values).unwrap())
    }

    fn t(shape: &[i64], values: &[f64]) -> Value {
        t_of("float32", shape, values)
    }

    /// `count` values from a small deterministic pattern (the one the expected numbers below
    /// were computed from with `conformance/make_expected.py`'s `conv2d` and `pool2d`).
    fn pattern(count: usize, mul: usize, modulo: usize, shift: f64, scale: f64) -> Vec<f64> {
        (0..count)
            .map(|i| ((i * mul) % modulo) as f64 / scale - shift / scale)
            .collect()
    }

    fn eval(name: &str, args: &[Value], set: &[(&str, V)]) -> Result<Value, String> {
        let eval = schema(name).eval.unwrap();
        eval(args, &attrs(name, set))
    }

    fn run(name: &str, args: &[Value], set: &[(&str, V)]) -> (Vec<i64>, Vec<f64>) {
        let v = eval(name, args, set).unwrap();
        let a = v.as_tensor().unwrap();
        (a.shape().to_vec(), a.to_f64_vec())
    }

    fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
                "{got:?}\nvs\n{want:?}"
            );
        }
    }

    const NINE: [f64; 9] = [1., 2., 3., 4., 5., 6., 7., 8., 9.];

    #[test]
    fn patterns() {
        let pattern = |name: &str| schema(name).pattern;
        for name in [
            "nn.conv2d",
            "nn.dense",
            "nn.matmul",
            "nn.batch_matmul",
            "nn.softmax",
        ] {
            assert_eq!(pattern(name), P::OutEWiseFusable, "{name}");
        }
        for name in ["nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d"] {
            assert_eq!(pattern(name), P::OutEWiseFusable, "{name}");
        }
        assert_eq!(pattern("nn.relu"), P::ElemWise);
        assert_eq!(pattern("nn.bias_add"), P::Broadcast);
        assert_eq!(pattern("nn.batch_norm"), P::Opaque);
        assert_eq!(pattern("nn.pad"), P::Injective);
        assert_eq!(pattern("nn.batch_flatten"), P::Injective);
        for name in [
            "nn.dense",
            "nn.matmul",
            "nn.batch_matmul",
            "nn.bias_add",
            "nn.relu",
            "nn.leaky_relu",
            "nn.prelu",
            "nn.softmax",
            "nn.log_softmax",
            "nn.conv2d",
            "nn.max_pool2d",
            "nn.avg_pool2d",
            "nn.global_avg_pool2d",
            "nn.global_max_pool2d",
            "nn.adaptive_avg_pool2d",
            "nn.adaptive_max_pool2d",
            "nn.batch_norm",
            "nn.layer_norm",
            "nn.dropout",
            "nn.pad",
            "nn.batch_flatten",
        ] {
            let op = schema(name);
            assert!(op.relation.is_some() && op.eval.is_some(), "{name}");
        }
    }

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
            err("nn.conv2d", &two, &[("data_layout", s("NHWC"))])
                .starts_with("only NCHW/OIHW layouts are supported")
        );
        assert!(
            err("nn.conv2d", &two, &[("kernel_layout", s("HWIO"))])
                .starts_with("only NCHW/OIHW layouts are supported")
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
    fn pool_relations() {
        let data = [f32s(&[1, 6, 9, 9])];
        let pool = |set: &[(&str, V)]| ok("nn.max_pool2d", &data, set);
        assert_eq!(
            pool(&[("pool_size", ints(&[2, 2])), ("strides", ints(&[2, 2]))]),
            "Tensor[(1, 6, 4, 4), float32]"
        );
        assert_eq!(
            pool(&[
                ("pool_size", ints(&[2, 2])),
                ("strides", ints(&[2, 2])),
                ("ceil_mode", V::Bool(true))
            ]),
            "Tensor[(1, 6, 5, 5), float32]"
        );
        assert_eq!(
            pool(&[
                ("pool_size", ints(&[2, 2])),
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[0, 0, 1, 1])),
                ("ceil_mode", V::Bool(true))
            ]),
            "Tensor[(1, 6, 5, 5), float32]"
        );
        assert_eq!(
            pool(&[("pool_size", ints(&[3, 3])), ("padding", ints(&[1]))]),
            "Tensor[(1, 6, 9, 9), float32]"
        );
        assert_eq!(
            pool(&[("pool_size", ints(&[3, 3])), ("padding", ints(&[1, 0]))]),
            "Tensor[(1, 6, 9, 7), float32]"
        );
        assert_eq!(
            pool(&[("pool_size", ints(&[3, 3])), ("dilation", ints(&[2, 1]))]),
            "Tensor[(1, 6, 5, 7), float32]"
        );
        assert_eq!(
            ok(
                "nn.avg_pool2d",
                &data,
                &[
                    ("pool_size", ints(&[3, 3])),
                    ("strides", ints(&[2, 2])),
                    ("padding", ints(&[1, 1, 1, 1])),
                    ("count_include_pad", V::Bool(true))
                ]
            ),
            "Tensor[(1, 6, 5, 5), float32]"
        );
        assert_eq!(
            ok(
                "nn.avg_pool2d",
                &[ty(&[-1, 2, -1, 5], "int32")],
                &[("pool_size", ints(&[2, 2]))]
            ),
            "Tensor[(?, 2, ?, 4), int32]"
        );
        assert_eq!(
            err("nn.max_pool2d", &data, &[("pool_size", ints(&[2, 2, 2]))]),
            "`pool_size` must have 2 values, got 3"
        );
        assert_eq!(
            err(
                "nn.max_pool2d",
                &data,
                &[("pool_size", ints(&[2, 2])), ("padding", ints(&[1, 2, 3]))]
            ),
            "`padding` must have 1, 2 or 4 values, got 3"
        );
        assert_eq!(
            err("nn.avg_pool2d", &data, &[("pool_size", ints(&[10, 2]))]),
            "input height 9 with padding 0 is smaller than the pool window height 10"
        );
        assert!(
            err(
                "nn.max_pool2d",
                &data,
                &[("pool_size", ints(&[2, 2])), ("layout", s("NHWC"))]
            )
            .starts_with("only the NCHW layout is supported")
        );
        assert_eq!(
            err(
                "nn.max_pool2d",
                &[ty(&[1, 6, 9, 9], "bool")],
                &[("pool_size", ints(&[2, 2]))]
            ),
            "pooling data must have an integer or float dtype, got `Tensor[(1, 6, 9, 9), bool]`"
        );

        assert_eq!(
            ok("nn.global_avg_pool2d", &data, &[]),
            "Tensor[(1, 6, 1, 1), float32]"
        );
        assert_eq!(
            ok("nn.global_max_pool2d", &[f32s(&[-1, 6, -1, -1])], &[]),
            "Tensor[(?, 6, 1, 1), float32]"
        );
        let adaptive = |set: &[(&str, V)]| rel("nn.adaptive_avg_pool2d", &data, set);
        assert_eq!(
            adaptive(&[("output_size", ints(&[2, 4]))]).unwrap(),
            "Tensor[(1, 6, 2, 4), float32]"
        );
        assert_eq!(
            adaptive(&[("output_size", ints(&[3]))]).unwrap(),
            "Tensor[(1, 6, 3, 3), float32]"
        );
        assert_eq!(adaptive(&[]).unwrap(), "Tensor[(1, 6, 9, 9), float32]");
        assert_eq!(
            adaptive(&[("output_size", V::Array(vec![V::Null, V::Int(2)]))]).unwrap(),
            "Tensor[(1, 6, 9, 2), float32]"
        );
        assert_eq!(
            adaptive(&[("output_size", ints(&[1, 2, 3]))]).unwrap_err(),
            "`output_size` must have 0, 1 or 2 values, got 3"
        );
    }

    #[test]
    fn dense_and_matmul_relations() {
        assert_eq!(
            ok(
                "nn.dense",
                &[f32s(&[2, 3]), f32s(&[4, 3])],
                &[("units", V::Int(4))]
            ),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            ok(
                "nn.dense",
                &[f32s(&[5, 2, 3]), f32s(&[-1, 3])],
                &[("units", V::Int(7))]
            ),
            "Tensor[(5, 2, 7), float32]"
        );
        assert_eq!(
            ok("nn.dense", &[f32s(&[-1, -1]), f32s(&[4, 3])], &[]),
            "Tensor[(?, 4), float32]"
        );
        assert_eq!(
            err("nn.dense", &[f32s(&[2, 3]), f32s(&[4, 5])], &[]),
            "dense weight `Tensor[(4, 5), float32]` does not match data `Tensor[(2, 3), float32]`: \
             reduction dims 5 and 3 differ"
        );
        assert_eq!(
            err(
                "nn.dense",
                &[f32s(&[2, 3]), f32s(&[4, 3])],
                &[("units", V::Int(5))]
            ),
            "`units`=5 does not match dense weight `Tensor[(4, 3), float32]` with 4 output units"
        );
        assert_eq!(
            err("nn.dense", &[f32s(&[2, 3]), f32s(&[4, 3, 1])], &[]),
            "dense weight must have rank 2 (units, k), got `Tensor[(4, 3, 1), float32]`"
        );
        assert_eq!(
            ok(
                "nn.dense",
                &[ty(&[2, 3], "int8"), ty(&[4, 3], "int8")],
                &[("out_dtype", s("int32"))]
            ),
            "Tensor[(2, 4), int32]"
        );

        let matmul = |a: &[i64], b: &[i64], ta: bool, tb: bool| {
            rel(
                "nn.matmul",
                &[f32s(a), f32s(b)],
                &[("transpose_a", V::Bool(ta)), ("transpose_b", V::Bool(tb))],
            )
        };
        assert_eq!(
            matmul(&[2, 3], &[3, 4], false, false).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            matmul(&[3, 2], &[3, 4], true, false).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            matmul(&[2, 3], &[4, 3], false, true).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            matmul(&[3, 2], &[4, 3], true, true).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert!(
            matmul(&[2, 3], &[4, 3], false, false)
                .unwrap_err()
                .starts_with("matmul reduction dims 3 and 4 differ")
        );

        let bmm = |a: &[i64], b: &[i64], ta: bool, tb: bool| {
            rel(
                "nn.batch_matmul",
                &[f32s(a), f32s(b)],
                &[("transpose_a", V::Bool(ta)), ("transpose_b", V::Bool(tb))],
            )
        };
        assert_eq!(
            bmm(&[2, 3, 4], &[2, 5, 4], false, true).unwrap(),
            "Tensor[(2, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[1, 3, 4], &[6, 4, 5], false, false).unwrap(),
            "Tensor[(6, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[6, 4, 3], &[1, 4, 5], true, false).unwrap(),
            "Tensor[(6, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[-1, 3, 4], &[2, 5, 4], false, true).unwrap(),
            "Tensor[(2, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[2, 3, 4], &[3, 5, 4], false, true).unwrap_err(),
            "batch_matmul batch dims 2 and 3 differ and neither is 1: `Tensor[(2, 3, 4), float32]` \
             and `Tensor[(3, 5, 4), float32]`"
        );
        assert!(
            bmm(&[2, 3, 4], &[2, 5, 4], false, false)
                .unwrap_err()
                .starts_with("batch_matmul reduction dims 4 and 5 differ")
        );
        assert!(
            bmm(&[3, 4], &[2, 5, 4], false, true)
                .unwrap_err()
                .contains("rank 3")
        );
    }

    #[test]
    fn activation_and_norm_relations() {
        let x = f32s(&[1, 4, 2, 2]);
        assert_eq!(
            ok("nn.relu", from_ref(&x), &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            ok("nn.bias_add", &[x.clone(), f32s(&[4])], &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            ok(
                "nn.bias_add",
                &[x.clone(), f32s(&[2])],
                &[("axis", V::Int(-1))]
            ),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            err("nn.bias_add", &[x.clone(), f32s(&[5])], &[]),
            "bias must be `Tensor[(4), float32]` to match axis 1 of data \
             `Tensor[(1, 4, 2, 2), float32]`, got `Tensor[(5), float32]`"
        );
        assert!(
            err(
                "nn.bias_add",
                &[x.clone(), f32s(&[4])],
                &[("axis", V::Int(4))]
            )
            .contains("out of range")
        );
        assert_eq!(
            ok("nn.prelu", &[x.clone(), f32s(&[4])], &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert!(
            err("nn.prelu", &[x.clone(), ty(&[4], "float64")], &[]).starts_with("alpha must be")
        );
        assert_eq!(
            ok("nn.softmax", from_ref(&x), &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert_eq!(
            err("nn.log_softmax", &[ty(&[3], "int32")], &[]),
            "softmax data must have a float dtype, got `Tensor[(3), int32]`"
        );
        assert_eq!(
            ok("nn.batch_flatten", from_ref(&x), &[]),
            "Tensor[(1, 16), float32]"
        );
        assert_eq!(
            ok("nn.batch_flatten", &[f32s(&[-1, 3, -1])], &[]),
            "Tensor[(?, ?), float32]"
        );
        assert!(err("nn.batch_flatten", &[f32s(&[])], &[]).contains("rank at least 1"));

        let c = f32s(&[4]);
        let bn = [x.clone(), c.clone(), c.clone(), c.clone(), c.clone()];
        assert_eq!(
            ok("nn.batch_norm", &bn, &[]),
            "(Tensor[(1, 4, 2, 2), float32], Tensor[(4), float32], Tensor[(4), float32])"
        );
        let mut bad = bn.clone();
        bad[3] = f32s(&[3]);
        assert_eq!(
            err("nn.batch_norm", &bad, &[]),
            "moving_mean must be `Tensor[(4), float32]` to match axis 1 of data \
             `Tensor[(1, 4, 2, 2), float32]`, got `Tensor[(3), float32]`"
        );
        let any = [
            f32s(&[1, -1]),
            f32s(&[-1]),
            f32s(&[3]),
            f32s(&[-1]),
            f32s(&[-1]),
        ];
        assert_eq!(
            ok("nn.batch_norm", &any, &[]),
            "(Tensor[(1, ?), float32], Tensor[(3), float32], Tensor[(3), float32])"
        );
        assert_eq!(
            ok("nn.layer_norm", &[x.clone(), f32s(&[2]), f32s(&[2])], &[]),
            "Tensor[(1, 4, 2, 2), float32]"
        );
        assert!(
            err("nn.layer_norm", &[x.clone(), f32s(&[4]), f32s(&[4])], &[])
                .starts_with("gamma must be")
        );
        assert_eq!(
            ok("nn.dropout", from_ref(&x), &[]),
            "(Tensor[(1, 4, 2, 2), float32], Tensor[(1, 4, 2, 2), float32])"
        );

        let pad = |data: Type, widths: &[[i64; 2]], mode: &str| {
            let widths = V::Array(widths.iter().map(|w| ints(w)).collect());
            rel(
                "nn.pad",
                &[data, f32s(&[])],
                &[("pad_width", widths), ("pad_mode", s(mode))],
            )
        };
        assert_eq!(
            pad(x.clone(), &[[0, 0], [0, 0], [1, 2], [2, 1]], "constant").unwrap(),
            "Tensor[(1, 4, 5, 5), float32]"
        );
        assert_eq!(
            pad(f32s(&[-1, 3]), &[[1, 1], [1, 0]], "edge").unwrap(),
            "Tensor[(?, 4), float32]"
        );
        assert_eq!(
            pad(x.clone(), &[[0, 0], [1, 1]], "constant").unwrap_err(),
            "`pad_width` has 2 pairs but data `Tensor[(1, 4, 2, 2), float32]` has rank 4"
        );
        assert_eq!(
            pad(f32s(&[3]), &[[3, 0]], "reflect").unwrap_err(),
            "reflect padding of 3 on axis 0 needs that axis to be longer than 3, got 3"
        );
        assert_eq!(
            pad(f32s(&[3]), &[[-1, 0]], "constant").unwrap_err(),
            "`pad_width` must not be negative, got [-1, 0] for axis 0"
        );
        assert!(
            pad(f32s(&[3]), &[[1, 0]], "wrap")
                .unwrap_err()
                .starts_with("`pad_mode` must be")
        );
        assert_eq!(
            err(
                "nn.pad",
                &[f32s(&[3]), f32s(&[1])],
                &[("pad_width", V::Array(vec![ints(&[1, 1])]))]
            ),
            "the pad value must be a scalar, got `Tensor[(1), float32]`"
        );
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
    fn pool_evaluation() {
        let x = t(&[1, 1, 3, 3], &NINE);
        let set = |extra: &[(&'static str, V)]| {
            let mut v = vec![
                ("pool_size", ints(&[2, 2])),
                ("strides", ints(&[1, 1])),
                ("padding", ints(&[1])),
            ];
            v.extend(extra.iter().cloned());
            v
        };
        let (shape, out) = run("nn.avg_pool2d", from_ref(&x), &set(&[]));
        assert_eq!(shape, [1, 1, 4, 4]);
        assert_eq!(&out[..4], [1., 1.5, 2.5, 3.]);
        let (_, out) = run(
            "nn.avg_pool2d",
            from_ref(&x),
            &set(&[("count_include_pad", V::Bool(true))]),
        );
        assert_eq!(&out[..4], [0.25, 0.75, 1.25, 0.75]);
        assert_eq!(out[5], 3.);
        let (_, out) = run("nn.max_pool2d", from_ref(&x), &set(&[]));
        assert_eq!(&out[..4], [1., 2., 3., 3.]);
        // Max pooling pads with -inf, so negative inputs stay negative.
        let negative = t(&[1, 1, 1, 1], &[-3.]);
        let (_, out) = run(
            "nn.max_pool2d",
            &[negative],
            &[("pool_size", ints(&[2, 2])), ("padding", ints(&[1]))],
        );
        assert_eq!(out, [-3.; 4]);
        // Ceil mode keeps the partial last window.
        let ceil = [
            ("pool_size", ints(&[2, 2])),
            ("strides", ints(&[2, 2])),
            ("ceil_mode", V::Bool(true)),
        ];
        assert_eq!(
            run("nn.max_pool2d", from_ref(&x), &ceil),
            (vec![1, 1, 2, 2], vec![5., 6., 8., 9.])
        );
        assert_eq!(
            run("nn.avg_pool2d", from_ref(&x), &ceil).1,
            [3., 4.5, 7.5, 9.]
        );
        // Dilated max pooling reads the corners.
        assert_eq!(
            run(
                "nn.max_pool2d",
                &[t(&[1, 1, 3, 3], &[9., 1., 7., 1., 1., 1., 3., 1., 5.])],
                &[("pool_size", ints(&[2, 2])), ("dilation", ints(&[2, 2]))]
            ),
            (vec![1, 1, 1, 1], vec![9.])
        );
        // Integers: max exactly, average with truncating division.
        let xi = t_of("int32", &[1, 1, 3, 3], &NINE);
        let v = eval("nn.avg_pool2d", from_ref(&xi), &ceil).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [3, 4, 7, 9]);
        let v = eval("nn.global_max_pool2d", &[xi], &[]).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [9]);

        assert_eq!(
            run("nn.global_avg_pool2d", from_ref(&x), &[]),
            (vec![1, 1, 1, 1], vec![5.])
        );
        assert_eq!(
            run("nn.global_max_pool2d", from_ref(&x), &[]),
            (vec![1, 1, 1, 1], vec![9.])
        );
        assert_eq!(
            run(
                "nn.adaptive_avg_pool2d",
                from_ref(&x),
                &[("output_size", ints(&[2, 2]))]
            ),
            (vec![1, 1, 2, 2], vec![3., 4., 6., 7.])
        );
        assert_eq!(
            run(
                "nn.adaptive_avg_pool2d",
                &[x],
                &[("output_size", ints(&[1]))]
            )
            .1,
            [5.]
        );
    }

    #[test]
    fn pools_against_make_expected() {
        let x = t(&[1, 2, 4, 4], &pattern(32, 7, 11, 5.0, 4.0));
        let window = |extra: &[(&'static str, V)]| {
            let mut v = vec![
                ("pool_size", ints(&[3, 3])),
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[1, 1, 1, 1])),
            ];
            v.extend(extra.iter().cloned());
            v
        };
        let (shape, out) = run("nn.avg_pool2d", from_ref(&x), &window(&[]));
        assert_eq!(shape, [1, 2, 2, 2]);
        assert_close(
            &out,
            &[
                -0.3125, 0.25, -0.125, 0.055556, 0.1875, -0.166667, 0.375, -0.055556,
            ],
        );
        let (_, out) = run(
            "nn.avg_pool2d",
            from_ref(&x),
            &window(&[("count_include_pad", V::Bool(true))]),
        );
        assert_close(
            &out,
            &[
                -0.138889, 0.166667, -0.083333, 0.055556, 0.083333, -0.111111, 0.25, -0.055556,
            ],
        );
        let ceil = [
            ("pool_size", ints(&[3, 3])),
            ("strides", ints(&[2, 2])),
            ("ceil_mode", V::Bool(true)),
        ];
        let (shape, out) = run("nn.max_pool2d", from_ref(&x), &ceil);
        assert_eq!(shape, [1, 2, 2, 2]);
        assert_close(&out, &[1., 1.25, 1.25, 1.25, 1.25, 0.5, 1.25, 0.75]);
        let (_, out) = run("nn.avg_pool2d", from_ref(&x), &ceil);
        assert_close(
            &out,
            &[
                -0.138889, 0.041667, 0.125, 0., 0.055556, -0.375, 0.166667, -0.1875,
            ],
        );
        let mut ceil_padded = ceil.to_vec();
        ceil_padded.push(("padding", ints(&[0, 0, 1, 1])));
        ceil_padded.push(("count_include_pad", V::Bool(true)));
        let (_, out) = run("nn.avg_pool2d", from_ref(&x), &ceil_padded);
        assert_close(
            &out,
            &[
                -0.138889, 0.027778, 0.083333, 0., 0.055556, -0.25, 0.111111, -0.083333,
            ],
        );
        let (shape, out) = run(
            "nn.adaptive_avg_pool2d",
            &[x],
            &[("output_size", ints(&[2, 3]))],
        );
        assert_eq!(shape, [1, 2, 2, 3]);
        assert_close(
            &out,
            &[
                -0.3125, 0.0625, 0.4375, -0.0625, 0.3125, 0., 0.1875, -0.125, -0.4375, 0.4375,
                0.125, -0.1875,
            ],
        );
    }

    #[test]
    fn dense_and_matmul_evaluation() {
        let x = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let w = t(&[2, 3], &[1., 0., 0., 0., 1., 1.]);
        assert_eq!(
            run("nn.dense", &[x.clone(), w.clone()], &[("units", V::Int(2))]),
            (vec![2, 2], vec![1., 5., 4., 11.])
        );
        let xi = t_of("int8", &[1, 3], &[100., 100., 100.]);
        let wi = t_of("int8", &[1, 3], &[100., 100., 100.]);
        let v = eval("nn.dense", &[xi, wi], &[("out_dtype", s("int32"))]).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [30000]);

        // matmul with each transpose combination computes x · y for x = [[1, 2], [3, 4]] and
        // y = [[5, 6], [7, 8]].
        let a = [1., 2., 3., 4.];
        let at = [1., 3., 2., 4.];
        let b = [5., 6., 7., 8.];
        let bt = [5., 7., 6., 8.];
        for (ta, tb, av, bv) in [
            (false, false, a, b),
            (true, false, at, b),
            (false, true, a, bt),
            (true, true, at, bt),
        ] {
            let out = run(
                "nn.matmul",
                &[t(&[2, 2], &av), t(&[2, 2], &bv)],
                &[("transpose_a", V::Bool(ta)), ("transpose_b", V::Bool(tb))],
            );
            assert_eq!(out, (vec![2, 2], vec![19., 22., 43., 50.]), "{ta} {tb}");
        }
        // batch_matmul broadcasts a batch of 1.
        let left = t(&[1, 2, 2], &a);
        let right = t(&[2, 2, 2], &[5., 7., 6., 8., 1., 0., 0., 1.]);
        assert_eq!(
            run(
                "nn.batch_matmul",
                &[left.clone(), right],
                &[("transpose_b", V::Bool(true))]
            ),
            (vec![2, 2, 2], vec![19., 22., 43., 50., 1., 2., 3., 4.])
        );
        let right = t(&[1, 2, 2], &b);
        assert_eq!(
            run(
                "nn.batch_matmul",
                &[t(&[1, 2, 2], &at), right],
                &[("transpose_a", V::Bool(true))]
            )
            .1,
            [19., 22., 43., 50.]
        );
        assert!(eval("nn.dense", &[x, t(&[2, 2], &a)], &[]).is_err());
    }

    #[test]
    fn activation_evaluation() {
        let x = t(&[1, 2, 2], &[-2., 1., -4., 3.]);
        assert_eq!(run("nn.relu", from_ref(&x), &[]).1, [0., 1., 0., 3.]);
        assert_eq!(
            run("nn.leaky_relu", from_ref(&x), &[("alpha", V::Float(0.5))]).1,
            [-1., 1., -2., 3.]
        );
        assert_eq!(
            run("nn.prelu", &[x.clone(), t(&[2], &[0.5, 0.25])], &[]).1,
            [-1., 1., -1., 3.]
        );
        assert_eq!(
            run("nn.bias_add", &[x.clone(), t(&[2], &[10., 20.])], &[]).1,
            [8., 11., 16., 23.]
        );
        assert_eq!(
            run(
                "nn.bias_add",
                &[x.clone(), t(&[2], &[10., 20.])],
                &[("axis", V::Int(-1))]
            )
            .1,
            [8., 21., 6., 23.]
        );
        let xi = t_of("int64", &[3], &[-5., 0., 5.]);
        let v = eval("nn.relu", &[xi], &[]).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [0, 0, 5]);

        let (_, out) = run("nn.softmax", &[t(&[3], &[1., 2., 3.])], &[]);
        assert_close(&out, &[0.09003057, 0.24472847, 0.66524096]);
        let (_, out) = run("nn.log_softmax", &[t(&[3], &[1., 2., 3.])], &[]);
        assert_close(&out, &[-2.40760596, -1.40760596, -0.40760596]);
        let (_, out) = run(
            "nn.softmax",
            &[t(&[2, 2], &[0., 0., 1000., 0.])],
            &[("axis", V::Int(0))],
        );
        assert_close(&out, &[0., 0.5, 1., 0.5]);

        assert_eq!(
            run("nn.batch_flatten", &[t(&[2, 1, 2], &[1., 2., 3., 4.])], &[]),
            (vec![2, 2], vec![1., 2., 3., 4.])
        );
    }

    #[test]
    fn norm_and_dropout_evaluation() {
        let x = t(&[1, 2, 1, 2], &[1., 2., 3., 4.]);
        let v = |values: &[f64]| t(&[2], values);
        let args = [
            x.clone(),
            v(&[1., 2.]),
            v(&[0., 1.]),
            v(&[1.5, 3.5]),
            v(&[0.25, 0.25]),
        ];
        let out = eval("nn.batch_norm", &args, &[("epsilon", V::Float(0.0))]).unwrap();
        let fields = out.as_tuple().unwrap();
        assert_eq!(fields.len(), 3);
        assert_eq!(
            fields[0].as_tensor().unwrap().to_f64_vec(),
            [-1., 1., -1., 3.]
        );
        assert_eq!(fields[1].as_tensor().unwrap().to_f64_vec(), [1.5, 3.5]);
        assert_eq!(fields[2].as_tensor().unwrap().to_f64_vec(), [0.25, 0.25]);
        let out = eval(
            "nn.batch_norm",
            &args,
            &[
                ("epsilon", V::Float(0.0)),
                ("center", V::Bool(false)),
                ("scale", V::Bool(false)),
            ],
        )
        .unwrap();
        let fields = out.as_tuple().unwrap();
        assert_eq!(
            fields[0].as_tensor().unwrap().to_f64_vec(),
            [-1., 1., -1., 1.]
        );

        let (_, out) = run(
            "nn.layer_norm",
            &[
                t(&[2, 4], &[1., 2., 3., 4., 0., 0., 4., 4.]),
                t(&[4], &[1., 1., 2., 2.]),
                t(&[4], &[0., 0., 0., 1.]),
            ],
            &[("epsilon", V::Float(0.0))],
        );
        let z = 1.5 / 1.25f64.sqrt();
        let y = 0.5 / 1.25f64.sqrt();
        assert_close(&out, &[-z, -y, 2. * y, 2. * z + 1., -1., -1., 2., 3.]);
        let (_, out) = run(
            "nn.layer_norm",
            &[t(&[2, 2], &[1., 5., 3., 7.]), v(&[1., 1.]), v(&[0., 0.])],
            &[("axis", V::Int(0)), ("epsilon", V::Float(0.0))],
        );
        assert_close(&out, &[-1., -1., 1., 1.]);

        let out = eval("nn.dropout", &[x], &[]).unwrap();
        let fields = out.as_tuple().unwrap();
        assert_eq!(
            fields[0].as_tensor().unwrap().to_f64_vec(),
            [1., 2., 3., 4.]
        );
        let mask = fields[1].as_tensor().unwrap();
        assert_eq!(mask.shape(), [1, 2, 1, 2]);
        assert_eq!(mask.dtype(), DType::F32);
        assert_eq!(mask.to_f64_vec(), [1.; 4]);
    }

    #[test]
    fn pad_evaluation() {
        let pad = |x: Value, value: Value, widths: &[[i64; 2]], mode: &str| {
            let widths = V::Array(widths.iter().map(|w| ints(w)).collect());
            eval(
                "nn.pad",
                &[x, value],
                &[("pad_width", widths), ("pad_mode", s(mode))],
            )
        };
        let x = t(&[3], &[1., 2., 3.]);
        let zero = t(&[], &[0.5]);
        let out = |v: Result<Value, String>| v.unwrap().as_tensor().unwrap().to_f64_vec();
        assert_eq!(
            out(pad(x.clone(), zero.clone(), &[[2, 2]], "constant")),
            [0.5, 0.5, 1., 2., 3., 0.5, 0.5]
        );
        assert_eq!(
            out(pad(x.clone(), zero.clone(), &[[2, 2]], "edge")),
            [1., 1., 1., 2., 3., 3., 3.]
        );
        assert_eq!(
            out(pad(x.clone(), zero.clone(), &[[2, 2]], "reflect")),
            [3., 2., 1., 2., 3., 2., 1.]
        );
        assert!(pad(x, zero.clone(), &[[3, 0]], "reflect").is_err());
        let m = t(&[2, 2], &[1., 2., 3., 4.]);
        let v = pad(m, zero, &[[1, 0], [0, 1]], "constant").unwrap();
        let a = v.as_tensor().unwrap();
        assert_eq!(a.shape(), [3, 3]);
        assert_eq!(a.to_f64_vec(), [0.5, 0.5, 0.5, 1., 2., 0.5, 3., 4., 0.5]);
        // An integer tensor padded with a float value converts it as TVM's cast does.
        let xi = t_of("int32", &[2], &[1., 2.]);
        let v = pad(xi, t(&[], &[7.9]), &[[1, 1]], "constant").unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [7, 1, 2, 7]);
    }

    // ----- Compute definitions against the reference evaluation -----

    use crate::compute::interp::Interp;
    use crate::compute::op_tests::{DTYPES, Rng, agree_within, check_with, random};
    use relay_ir::te::TeValue as TV;
    use std::collections::HashMap;

    /// Floats whose sums and products stay exact in every float dtype at the sizes tested
    /// (halves in -4..4), with NaN, infinities and signed zeros when `special`; integers in
    /// -4..4 (0..8 unsigned). Contractions accumulate in their output dtype, so only exact
    /// arithmetic agrees with the `float64` reference at every width.
    fn small(rng: &mut Rng, dtype: DType, shape: &[i64], special: bool) -> NDArray {
        let n: i64 = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|_| {
                if special && rng.below(6) == 0 {
                    [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0][rng.below(5) as usize]
                } else if dtype.is_float() {
                    (rng.below(17) as f64 - 8.0) / 2.0
                } else if dtype.code == DTypeCode::UInt {
                    rng.below(9) as f64
                } else {
                    rng.below(9) as f64 - 4.0
                }
            })
            .collect();
        NDArray::from_f64_slice(dtype, shape, &v).unwrap()
    }

    /// Exact integers and special floats for integer dtypes and inputs of contractions in an
    /// integer dtype; [`small`] values for float contractions.
    fn operand(rng: &mut Rng, dtype: DType, out: DType, shape: &[i64], special: bool) -> NDArray {
        if out.is_float() {
            small(rng, dtype, shape, special)
        } else {
            random(rng, dtype, shape)
        }
    }

    /// A contraction's result within SPEC's tolerance (exact for integers).
    fn close(w: &NDArray, g: &NDArray) -> bool {
        agree_within(w, g, 1e-4)
    }

    /// The placeholders of `inputs` and the compute definition of `name` on them, if the
    /// relation accepts them and the definition compiles.
    fn te_of(name: &str, inputs: &[NDArray], set: &Attrs) -> Option<TV> {
        let op = schema(name);
        let types: Vec<Type> = inputs
            .iter()
            .map(|a| Type::tensor(a.shape(), a.dtype()))
            .collect();
        let out = (op.relation.unwrap())(&types, set).ok()?;
        let placeholders = crate::compute::op_tests::placeholders(inputs);
        (op.compute.unwrap())(&placeholders, set, &out).ok()
    }

    /// The value of an index expression (loop variables, constants and integer arithmetic).
    fn index_value(e: &relay_ir::te::TExpr, env: &HashMap<u32, i128>) -> i128 {
        use relay_ir::te::{BinaryOp as B, TExprKind};
        match e.kind() {
            TExprKind::Var(v) => env[&v.id],
            TExprKind::Int(v) => *v,
            TExprKind::Cast(a) => index_value(a, env),
            TExprKind::Binary(op, a, b) => {
                let (a, b) = (index_value(a, env), index_value(b, env));
                match op {
                    B::Add => a + b,
                    B::Sub => a - b,
                    B::Mul => a * b,
                    B::Div => a / b,
                    B::Mod => a % b,
                    B::FloorDiv => a.div_euclid(b),
                    B::FloorMod => a.rem_euclid(b),
                    B::Min => a.min(b),
                    B::Max => a.max(b),
                    _ => panic!("unexpected {op:?} in an index"),
                }
            }
            k => panic!("unexpected {k:?} in an index"),
        }
    }

    /// Every read in `e` (in every branch of every `select`), with its indices.
    fn reads_of(
        e: &relay_ir::te::TExpr,
        out: &mut Vec<(relay_ir::te::Tensor, Vec<relay_ir::te::TExpr>)>,
    ) {
        use relay_ir::te::TExprKind as K;
        match e.kind() {
            K::Var(_) | K::Int(_) | K::Float(_) => {}
            K::Read { tensor, indices } => {
                out.push((tensor.clone(), indices.clone()));
                indices.iter().for_each(|i| reads_of(i, out));
            }
            K::Unary(_, a) | K::Cast(a) => reads_of(a, out),
            K::Binary(_, a, b) | K::Compare(_, a, b) => {
                reads_of(a, out);
                reads_of(b, out);
            }
            K::Select(c, a, b) => {
                reads_of(c, out);
                reads_of(a, out);
                reads_of(b, out);
            }
            K::Reduce { body, .. } => reads_of(body, out),
        }
    }

    /// Asserts that no read of `t` or of the tensors it reads is ever out of bounds, in any
    /// branch of a `select` (the kernel evaluates both).
    fn assert_reads_in_bounds(t: &relay_ir::te::Tensor) {
        use relay_ir::te::{TExprKind, TensorOp};
        let TensorOp::Compute { axes, body } = &t.op else {
            return;
        };
        let mut all = axes.clone();
        if let TExprKind::Reduce { axes, .. } = body.kind() {
            all.extend(axes);
        }
        let mut reads = Vec::new();
        reads_of(body, &mut reads);
        for (tensor, _) in &reads {
            assert_reads_in_bounds(tensor);
        }
        let points: i64 = all.iter().map(|a| a.extent.max(0)).product();
        for p in 0..points {
            let mut env = HashMap::new();
            let mut rest = p;
            for a in all.iter().rev() {
                env.insert(a.id, i128::from(rest % a.extent));
                rest /= a.extent;
            }
            for (tensor, indices) in &reads {
                for (i, &n) in indices.iter().zip(&tensor.shape) {
                    let v = index_value(i, &env);
                    assert!(
                        (0..i128::from(n)).contains(&v),
                        "`{}` reads `{}` at {v} outside 0..{n}",
                        t.name,
                        tensor.name
                    );
                }
            }
        }
    }

    /// `check_with`, then the compute definition's reads checked in bounds in every branch.
    fn verify(
        name: &str,
        inputs: &[NDArray],
        set: &Attrs,
        agree: impl Fn(&NDArray, &NDArray) -> bool,
    ) -> bool {
        let accepted = check_with(name, inputs, set, agree);
        match te_of(name, inputs, set) {
            Some(TV::Tensor(t)) => assert_reads_in_bounds(&t),
            Some(TV::Tuple(fields)) => fields
                .iter()
                .for_each(|f| assert_reads_in_bounds(f.as_tensor().unwrap())),
            None => {}
        }
        accepted
    }

    /// The plain `check` comparison, through [`verify`].
    fn exact(w: &NDArray, g: &NDArray) -> bool {
        let rtol = match w.dtype().bits {
            64 => 1e-12,
            32 => 1e-6,
            _ => 4e-3,
        };
        agree_within(w, g, rtol)
    }

    fn out_dtype(d: Option<DType>) -> V {
        d.map_or(V::Null, |d| s(&d.to_string()))
    }

    /// The (input, output) dtype pairs tested with `out_dtype` set.
    const OUT_DTYPES: [(DType, DType); 7] = [
        (DType::I8, DType::I32),
        (DType::I32, DType::I8),
        (DType::U8, DType::U64),
        (DType::F32, DType::I32),
        (DType::F64, DType::U8),
        (DType::F16, DType::F32),
        (DType::I16, DType::F64),
    ];

    /// Every numeric dtype (the contraction relations reject `bool`) with no `out_dtype`, and
    /// the [`OUT_DTYPES`] pairs.
    fn contraction_dtypes() -> Vec<(DType, Option<DType>)> {
        let same = DTYPES.iter().map(|&d| (d, None));
        same.chain(OUT_DTYPES.iter().map(|&(i, o)| (i, Some(o))))
            .collect()
    }

    #[test]
    fn dense_matmul_batch_matmul_compute() {
        let mut rng = Rng(0x5eed_0001);
        for (dtype, out) in contraction_dtypes() {
            let od = out_dtype(out);
            let result = out.unwrap_or(dtype);
            let accepted = dtype != DType::BOOL;
            for (data, units) in [
                (&[2, 3][..], 4),
                (&[3], 1),
                (&[1, 1], 1),
                (&[2, 1, 5], 3),
                (&[0, 3], 2),
                (&[2, 0], 3),
                (&[2, 3], 0),
            ] {
                let k = *data.last().unwrap();
                let x = operand(&mut rng, dtype, result, data, true);
                let w = operand(&mut rng, dtype, result, &[units, k], true);
                for set in [
                    vec![("out_dtype", od.clone())],
                    vec![("out_dtype", od.clone()), ("units", V::Int(units))],
                ] {
                    let a = attrs("nn.dense", &set);
                    let ok = verify("nn.dense", &[x.clone(), w.clone()], &a, close);
                    assert_eq!(ok, accepted, "nn.dense {dtype} {data:?}");
                }
            }
            for (a_shape, b_shape, ta, tb) in [
                (&[2, 3][..], &[3, 4][..], false, false),
                (&[2, 3], &[4, 3], false, true),
                (&[3, 2], &[3, 4], true, false),
                (&[3, 2], &[4, 3], true, true),
                (&[3], &[3, 2], false, false),
                (&[2, 1, 3], &[3, 1], false, false),
                (&[2, 3, 3, 2], &[5, 3], true, true),
                (&[0, 2], &[2, 3], false, false),
                (&[2, 0], &[0, 3], false, false),
            ] {
                let a = operand(&mut rng, dtype, result, a_shape, true);
                let b = operand(&mut rng, dtype, result, b_shape, true);
                let set = attrs(
                    "nn.matmul",
                    &[
                        ("out_dtype", od.clone()),
                        ("transpose_a", V::Bool(ta)),
                        ("transpose_b", V::Bool(tb)),
                    ],
                );
                let ok = verify("nn.matmul", &[a, b], &set, close);
                assert_eq!(ok, accepted, "nn.matmul {dtype} {a_shape:?} {b_shape:?}");
            }
            for (a_shape, b_shape, ta, tb) in [
                (&[2, 2, 3][..], &[2, 3, 4][..], false, false),
                (&[1, 2, 3], &[3, 4, 3], false, true),
                (&[3, 3, 2], &[1, 3, 4], true, false),
                (&[2, 3, 2], &[2, 4, 3], true, true),
                (&[1, 1, 1], &[1, 1, 1], false, false),
                (&[0, 2, 3], &[1, 3, 2], false, false),
                (&[2, 2, 0], &[2, 0, 3], false, false),
            ] {
                let a = operand(&mut rng, dtype, result, a_shape, true);
                let b = operand(&mut rng, dtype, result, b_shape, true);
                let set = attrs(
                    "nn.batch_matmul",
                    &[
                        ("out_dtype", od.clone()),
                        ("transpose_a", V::Bool(ta)),
                        ("transpose_b", V::Bool(tb)),
                    ],
                );
                let ok = verify("nn.batch_matmul", &[a, b], &set, close);
                assert_eq!(
                    ok, accepted,
                    "nn.batch_matmul {dtype} {a_shape:?} {b_shape:?}"
                );
            }
        }
    }

    #[test]
    fn floats_contracted_in_integers_wrap_as_the_reference_reads_them() {
        // Large, infinite and NaN floats contracted in an integer dtype: truncated into i128
        // (saturating), then wrapped — not saturated at the integer dtype's range.
        let values = [
            1e30,
            -1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            3e38,
            -3e38,
            1.8446744073709552e19,
            9.3e18,
            -9.3e18,
            300.7,
            -129.5,
            4294967296.0 * 3.0 + 5.0,
        ];
        for dtype in [DType::F32, DType::F64] {
            for out in [
                DType::I8,
                DType::U8,
                DType::I32,
                DType::U32,
                DType::I64,
                DType::U64,
            ] {
                let n = values.len() as i64;
                let x = NDArray::from_f64_slice(dtype, &[n, 1], &values).unwrap();
                let one = NDArray::from_f64_slice(dtype, &[1, 1], &[1.0]).unwrap();
                let a = attrs("nn.dense", &[("out_dtype", s(&out.to_string()))]);
                assert!(verify("nn.dense", &[x, one], &a, exact), "{dtype} -> {out}");
            }
        }
    }

    #[test]
    fn softmax_and_log_softmax_compute() {
        let mut rng = Rng(0x5eed_0002);
        for name in ["nn.softmax", "nn.log_softmax"] {
            for dtype in DTYPES {
                for (shape, axis) in [
                    (&[3, 4][..], -1),
                    (&[3, 4], 0),
                    (&[2, 3, 4], 1),
                    (&[1], 0),
                    (&[5, 1], 1),
                    (&[0, 3], 1),
                    (&[2, 0], 1),
                    (&[], 0),
                ] {
                    let x = random(&mut rng, dtype, shape);
                    let a = attrs(name, &[("axis", V::Int(axis))]);
                    assert_eq!(
                        verify(name, &[x], &a, exact),
                        dtype.is_float(),
                        "{name} {dtype}"
                    );
                }
            }
        }
    }

    /// `n` random values of a 1-D integer attribute with entries from `choices`.
    fn pick<'a>(rng: &mut Rng, choices: &'a [&'a [i64]]) -> &'a [i64] {
        choices[rng.below(choices.len() as u64) as usize]
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

    #[test]
    fn conv2d_compute_rejects_other_layouts() {
        let op = schema("nn.conv2d");
        let a = attrs(
            "nn.conv2d",
            &[("data_layout", s("NHWC")), ("kernel_layout", s("HWIO"))],
        );
        let x = TV::Tensor(relay_ir::te::Tensor::placeholder(
            "x",
            vec![1, 3, 3, 2],
            DType::F32,
            0,
        ));
        let w = TV::Tensor(relay_ir::te::Tensor::placeholder(
            "w",
            vec![2, 2, 2, 2],
            DType::F32,
            1,
        ));
        let err = (op.compute.unwrap())(&[x, w], &a, &f32s(&[1, 2, 2, 2])).unwrap_err();
        assert!(
            err.contains("only NCHW/OIHW layouts are supported"),
            "{err}"
        );
    }

    #[test]
    fn pool2d_compute() {
        let mut rng = Rng(0x5eed_0004);
        let shapes: [&[i64]; 6] = [
            &[1, 1, 1, 1],
            &[1, 2, 5, 4],
            &[2, 1, 3, 7],
            &[1, 1, 4, 4],
            &[1, 1, 0, 3],
            &[0, 2, 3, 3],
        ];
        let sizes: [&[i64]; 4] = [&[1, 1], &[2, 2], &[3, 2], &[1, 3]];
        let strides: [&[i64]; 3] = [&[1, 1], &[2, 1], &[3, 2]];
        let dilations: [&[i64]; 2] = [&[1, 1], &[2, 1]];
        let paddings: [&[i64]; 5] = [&[0], &[1], &[1, 0], &[0, 2], &[2, 1, 0, 1]];
        let mut accepted = [0; 2];
        for (n, name) in ["nn.max_pool2d", "nn.avg_pool2d"].into_iter().enumerate() {
            for dtype in DTYPES {
                for shape in shapes {
                    for _ in 0..12 {
                        let mut set = vec![
                            ("pool_size", ints(pick(&mut rng, &sizes))),
                            ("strides", ints(pick(&mut rng, &strides))),
                            ("dilation", ints(pick(&mut rng, &dilations))),
                            ("padding", ints(pick(&mut rng, &paddings))),
                            ("ceil_mode", V::Bool(rng.below(2) == 1)),
                        ];
                        if n == 1 {
                            set.push(("count_include_pad", V::Bool(rng.below(2) == 1)));
                        }
                        let x = random(&mut rng, dtype, shape);
                        if verify(name, &[x], &attrs(name, &set), exact) {
                            accepted[n] += 1;
                            assert!(dtype != DType::BOOL);
                        }
                    }
                }
            }
        }
        assert!(accepted.iter().all(|&a| a > 300), "{accepted:?}");
        // Ceil mode adding a window past the padding, which counts no tap at all.
        for name in ["nn.max_pool2d", "nn.avg_pool2d"] {
            for include in [false, true] {
                let mut set = vec![
                    ("pool_size", ints(&[1, 1])),
                    ("strides", ints(&[3, 3])),
                    ("padding", ints(&[1])),
                    ("ceil_mode", V::Bool(true)),
                ];
                if name == "nn.avg_pool2d" {
                    set.push(("count_include_pad", V::Bool(include)));
                }
                for dtype in [DType::F32, DType::I32, DType::U8] {
                    let x = random(&mut rng, dtype, &[1, 2, 3, 5]);
                    assert!(verify(name, &[x], &attrs(name, &set), exact));
                }
            }
        }
        // 64-bit integer windows of more than 2^30 taps are refused.
        let a = attrs(
            "nn.avg_pool2d",
            &[
                ("pool_size", ints(&[40000, 40000])),
                ("padding", ints(&[40000])),
            ],
        );
        let x = TV::Tensor(relay_ir::te::Tensor::placeholder(
            "x",
            vec![1, 1, 1, 1],
            DType::I64,
            0,
        ));
        let op = schema("nn.avg_pool2d");
        let out = (op.relation.unwrap())(&[ty(&[1, 1, 1, 1], "int64")], &a).unwrap();
        let err = (op.compute.unwrap())(&[x], &a, &out).unwrap_err();
        assert!(err.contains("not supported"), "{err}");
    }

    #[test]
    fn global_and_adaptive_pools_compute() {
        let mut rng = Rng(0x5eed_0005);
        let shapes: [&[i64]; 6] = [
            &[1, 1, 1, 1],
            &[1, 2, 5, 7],
            &[2, 1, 3, 3],
            &[1, 1, 0, 2],
            &[0, 1, 2, 2],
            &[2, 3, 4, 1],
        ];
        let sizes: [Option<&[i64]>; 6] = [
            None,
            Some(&[1]),
            Some(&[2, 3]),
            Some(&[3, 2]),
            Some(&[4, 4]),
            Some(&[1, 5]),
        ];
        for dtype in DTYPES {
            for shape in shapes {
                for name in ["nn.global_max_pool2d", "nn.global_avg_pool2d"] {
                    let x = random(&mut rng, dtype, shape);
                    assert_eq!(
                        verify(name, &[x], &attrs(name, &[]), exact),
                        dtype != DType::BOOL
                    );
                }
                for size in sizes {
                    for name in ["nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d"] {
                        let set: Vec<(&str, V)> =
                            size.map(|v| ("output_size", ints(v))).into_iter().collect();
                        let x = random(&mut rng, dtype, shape);
                        assert_eq!(
                            verify(name, &[x], &attrs(name, &set), exact),
                            dtype != DType::BOOL
                        );
                    }
                }
            }
        }
        // An output size with a null entry keeps the input's extent.
        let set = [("output_size", V::Array(vec![V::Int(2), V::Null]))];
        for name in ["nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d"] {
            let x = random(&mut rng, DType::F32, &[1, 1, 5, 3]);
            assert!(verify(name, &[x], &attrs(name, &set), exact));
        }
    }

    #[test]
    fn adaptive_max_pool2d_compute_on_random_shapes() {
        let mut rng = Rng(0x5eed_0006);
        let name = "nn.adaptive_max_pool2d";
        for dtype in DTYPES {
            for _ in 0..8 {
                let shape: Vec<i64> = [3, 3, 9, 9]
                    .iter()
                    .map(|&n| rng.below(n) as i64 + 1)
                    .collect();
                let size = [rng.below(6) as i64 + 1, rng.below(6) as i64 + 1];
                let x = random(&mut rng, dtype, &shape);
                let set = [("output_size", ints(&size))];
                assert_eq!(
                    verify(name, &[x], &attrs(name, &set), exact),
                    dtype != DType::BOOL
                );
            }
        }
    }

    #[test]
    fn adaptive_max_pool2d_skips_nan_and_keeps_windows() {
        let op = schema("nn.adaptive_max_pool2d");
        let compute = op.compute.unwrap();
        let set = attrs("nn.adaptive_max_pool2d", &[("output_size", ints(&[2, 2]))]);
        let nan = f64::NAN;
        // Rows 0..2 and 1..3, columns likewise: a NaN is skipped, an all-NaN window is -inf.
        let x = NDArray::from_f64_slice(
            DType::F32,
            &[1, 1, 3, 3],
            &[1., nan, 3., 4., 5., nan, nan, 8., 2.],
        )
        .unwrap();
        let out = (op.relation.unwrap())(&[ty(&[1, 1, 3, 3], "float32")], &set).unwrap();
        let placeholders = crate::compute::op_tests::placeholders(from_ref(&x));
        let te = compute(&placeholders, &set, &out).unwrap();
        let got = Interp::new(from_ref(&x))
            .tensor(te.as_tensor().unwrap())
            .unwrap();
        assert_eq!(got.shape(), [1, 1, 2, 2]);
        assert_eq!(got.to_f64_vec(), [5., 5., 8., 8.]);
        let all_nan = NDArray::from_f64_slice(DType::F32, &[1, 1, 3, 3], &[nan; 9]).unwrap();
        let got = Interp::new(from_ref(&all_nan))
            .tensor(te.as_tensor().unwrap())
            .unwrap();
        assert_eq!(got.to_f64_vec(), [f64::NEG_INFINITY; 4]);
        assert!(verify("nn.adaptive_max_pool2d", from_ref(&x), &set, exact));
        // Other layouts are refused with a typed error, not a panic.
        let nhwc = attrs(
            "nn.adaptive_max_pool2d",
            &[("output_size", ints(&[2, 2])), ("layout", s("NHWC"))],
        );
        let err = compute(&placeholders, &nhwc, &out).unwrap_err();
        assert!(err.contains("only the NCHW layout is supported"), "{err}");
    }

    /// As `check`, for an operator returning a tuple: every field of the compute definition
    /// agrees with the reference evaluation's.
    fn check_tuple(name: &str, inputs: &[NDArray], set: &Attrs) -> bool {
        let op = schema(name);
        let types: Vec<Type> = inputs
            .iter()
            .map(|a| Type::tensor(a.shape(), a.dtype()))
            .collect();
        let Ok(out) = (op.relation.unwrap())(&types, set) else {
            return false;
        };
        let placeholders = crate::compute::op_tests::placeholders(inputs);
        let values: Vec<Value> = inputs.iter().map(|a| Value::tensor(a.clone())).collect();
        let want = (op.eval.unwrap())(&values, set).unwrap();
        let TV::Tuple(got) = (op.compute.unwrap())(&placeholders, set, &out).unwrap() else {
            panic!("`{name}` computes no tuple");
        };
        let want = want.as_tuple().unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(want) {
            assert_reads_in_bounds(g.as_tensor().unwrap());
            let g = Interp::new(inputs).tensor(g.as_tensor().unwrap()).unwrap();
            let w = w.as_tensor().unwrap();
            let rtol = match w.dtype().bits {
                64 => 1e-12,
                32 => 1e-6,
                _ => 4e-3,
            };
            assert!(
                agree_within(w, &g, rtol),
                "`{name}` on {inputs:?} with {set:?}:\n eval {:?}\n te   {:?}",
                w.to_f64_vec(),
                g.to_f64_vec()
            );
        }
        true
    }

    #[test]
    fn normalizations_and_dropout_compute() {
        let mut rng = Rng(0x5eed_0006);
        for dtype in DTYPES {
            for (shape, axis) in [
                (&[2, 3, 4][..], 1),
                (&[2, 3, 4], -1),
                (&[3, 2], 0),
                (&[1, 5], 1),
                (&[4], 0),
                (&[0, 3], 1),
                (&[2, 0], 0),
                (&[], 0),
            ] {
                let n = shape
                    .get(normalize_axis(axis, shape.len()).unwrap())
                    .copied()
                    .unwrap_or(1);
                for (center, scale) in [(true, true), (false, true), (true, false), (false, false)]
                {
                    for epsilon in [1e-5, 0.5] {
                        let set = [
                            ("axis", V::Int(axis)),
                            ("epsilon", V::Float(epsilon)),
                            ("center", V::Bool(center)),
                            ("scale", V::Bool(scale)),
                        ];
                        let x = random(&mut rng, dtype, shape);
                        let vectors: Vec<NDArray> =
                            (0..4).map(|_| random(&mut rng, dtype, &[n])).collect();
                        let mut args = vec![x.clone()];
                        args.extend(vectors[..2].iter().cloned());
                        let a = attrs("nn.layer_norm", &set);
                        assert_eq!(verify("nn.layer_norm", &args, &a, exact), dtype.is_float());
                        // Variances from the random values may be negative; keep some positive.
                        let var = NDArray::from_f64_slice(
                            dtype,
                            &[n],
                            &vectors[3]
                                .to_f64_vec()
                                .iter()
                                .map(|v| v.abs())
                                .collect::<Vec<_>>(),
                        )
                        .unwrap();
                        let mut args = vec![x];
                        args.extend(vectors[..3].iter().cloned());
                        args.push(if rng.below(2) == 0 {
                            var
                        } else {
                            vectors[3].clone()
                        });
                        let a = attrs("nn.batch_norm", &set);
                        assert_eq!(check_tuple("nn.batch_norm", &args, &a), dtype.is_float());
                    }
                }
            }
            for shape in [&[2, 3][..], &[], &[0, 4], &[1, 1, 2]] {
                let x = random(&mut rng, dtype, shape);
                let a = attrs("nn.dropout", &[("rate", V::Float(0.3))]);
                assert!(check_tuple("nn.dropout", &[x], &a));
            }
        }
    }

    #[test]
    fn pad_and_batch_flatten_compute() {
        let mut rng = Rng(0x5eed_0007);
        let widths = |w: &[[i64; 2]]| V::Array(w.iter().map(|p| ints(p)).collect());
        for dtype in DTYPES {
            for (shape, pads) in [
                (&[3][..], &[[2, 1]][..]),
                (&[2, 3], &[[1, 0], [0, 2]]),
                (&[2, 3, 4], &[[0, 0], [1, 1], [2, 3]]),
                (&[1, 4], &[[0, 0], [0, 0]]),
                (&[0, 2], &[[1, 1], [1, 0]]),
                (&[], &[]),
            ] {
                for mode in ["constant", "edge", "reflect"] {
                    let value_dtype = if rng.below(2) == 0 {
                        dtype
                    } else {
                        DTYPES[rng.below(12) as usize]
                    };
                    let x = random(&mut rng, dtype, shape);
                    let v = random(&mut rng, value_dtype, &[]);
                    let a = attrs(
                        "nn.pad",
                        &[("pad_width", widths(pads)), ("pad_mode", s(mode))],
                    );
                    verify("nn.pad", &[x, v], &a, exact);
                }
            }
            for shape in [
                &[2, 3, 4][..],
                &[3],
                &[0, 2],
                &[2, 0, 3],
                &[1, 1, 1, 1],
                &[2, 5, 1],
            ] {
                let x = random(&mut rng, dtype, shape);
                assert!(verify(
                    "nn.batch_flatten",
                    &[x],
                    &attrs("nn.batch_flatten", &[]),
                    exact
                ));
            }
        }
        // Pad values converted as the reference converts them: floats into integers truncate
        // and wrap, into booleans are non-zero after truncation.
        for (dtype, value) in [
            (DType::I8, 300.7),
            (DType::U8, -1.5),
            (DType::BOOL, 0.5),
            (DType::BOOL, f64::NAN),
            (DType::I32, 1e30),
            (DType::U64, f64::INFINITY),
            (DType::F16, 1e-8),
        ] {
            let x = random(&mut rng, dtype, &[2]);
            let v = NDArray::from_f64_slice(DType::F64, &[], &[value]).unwrap();
            let a = attrs("nn.pad", &[("pad_width", widths(&[[1, 1]]))]);
            assert!(verify("nn.pad", &[x, v], &a, exact), "{dtype} {value}");
        }
        // Reflection and edges also on accepted shapes of every mode.
        let x = random(&mut rng, DType::I32, &[3, 4]);
        let v = random(&mut rng, DType::I32, &[]);
        for mode in ["constant", "edge", "reflect"] {
            let a = attrs(
                "nn.pad",
                &[
                    ("pad_width", widths(&[[2, 2], [3, 1]])),
                    ("pad_mode", s(mode)),
                ],
            );
            assert!(
                verify("nn.pad", &[x.clone(), v.clone()], &a, exact),
                "{mode}"
            );
        }
    }

    /// The tensor called `name` among `t` and the tensors it reads.
    fn find_tensor(t: &relay_ir::te::Tensor, name: &str) -> Option<relay_ir::te::Tensor> {
        if t.name == name {
            return Some(t.clone());
        }
        let relay_ir::te::TensorOp::Compute { body, .. } = &t.op else {
            return None;
        };
        let mut reads = Vec::new();
        reads_of(body, &mut reads);
        reads.iter().find_map(|(r, _)| find_tensor(r, name))
    }

    /// Asserts that `t` has the contraction form the kernel compiler hands to its GEMM: a sum
    /// over reduction axes of the product of two reads of tensors of its dtype, each index a
    /// bare output axis, a bare reduction axis or a constant, every reduction axis read by both
    /// operands and every output axis by at least one.
    fn assert_contraction_form(t: &relay_ir::te::Tensor) {
        use relay_ir::te::{ReduceOp, TExprKind, TensorOp};
        let TensorOp::Compute { axes, body } = &t.op else {
            panic!("`{}` is not a compute", t.name);
        };
        let TExprKind::Reduce {
            op: ReduceOp::Sum,
            axes: red,
            body,
        } = body.kind()
        else {
            panic!("`{}` is not a sum", t.name);
        };
        let TExprKind::Binary(BinaryOp::Mul, a, b) = body.kind() else {
            panic!("`{}` does not sum a product", t.name);
        };
        let ids = |e: &relay_ir::te::TExpr| -> Vec<u32> {
            let TExprKind::Read { tensor, indices } = e.kind() else {
                panic!("`{}` multiplies something other than reads", t.name);
            };
            assert_eq!(tensor.dtype, t.dtype, "`{}` reads another dtype", t.name);
            indices
                .iter()
                .filter_map(|i| match i.kind() {
                    TExprKind::Var(v) => Some(v.id),
                    TExprKind::Int(_) => None,
                    k => panic!("`{}` reads at {k:?}", t.name),
                })
                .collect()
        };
        let (ia, ib) = (ids(a), ids(b));
        for r in red {
            assert!(ia.contains(&r.id) && ib.contains(&r.id), "`{}`", t.name);
        }
        for o in axes {
            assert!(ia.contains(&o.id) || ib.contains(&o.id), "`{}`", t.name);
        }
    }

    #[test]
    fn contractions_have_the_gemm_form() {
        let mut rng = Rng(0x5eed_0008);
        // (operator, its contraction, data shape, weight shape, attributes)
        type Case<'a> = (&'a str, &'a str, &'a [i64], &'a [i64], Vec<(&'a str, V)>);
        let cases: [Case; 6] = [
            ("nn.dense", "T_dense", &[2, 3, 4], &[5, 4], vec![]),
            (
                "nn.matmul",
                "T_matmul",
                &[2, 4, 3],
                &[5, 4],
                vec![
                    ("transpose_a", V::Bool(true)),
                    ("transpose_b", V::Bool(true)),
                ],
            ),
            (
                "nn.batch_matmul",
                "T_batch_matmul",
                &[1, 2, 3],
                &[4, 5, 3],
                vec![("transpose_b", V::Bool(true))],
            ),
            (
                "nn.batch_matmul",
                "T_batch_matmul",
                &[1, 2, 3],
                &[1, 3, 2],
                vec![],
            ),
            (
                "nn.conv2d",
                "T_conv2d_gemm",
                &[1, 4, 5, 5],
                &[6, 2, 3, 3],
                vec![("groups", V::Int(2)), ("padding", ints(&[1]))],
            ),
            (
                "nn.dense",
                "T_dense",
                &[2, 3],
                &[5, 3],
                vec![("out_dtype", s("float64"))],
            ),
        ];
        for (name, core, a, b, set) in cases {
            let x = small(&mut rng, DType::F32, a, false);
            let y = small(&mut rng, DType::F32, b, false);
            let Some(TV::Tensor(t)) = te_of(name, &[x, y], &attrs(name, &set)) else {
                panic!("no compute for {name}");
            };
            let core = find_tensor(&t, core).unwrap_or_else(|| panic!("no `{core}`"));
            assert_contraction_form(&core);
        }
    }

    #[test]
    fn averages_of_64_bit_integers_are_exact() {
        // Sums beyond 64 bits, negative quotients with and without remainders, empty windows.
        let max = i128::from(i64::MAX);
        let planes: [&[i128]; 6] = [
            &[max, max, max, 1],
            &[-max - 1, -max - 1, -max - 1, -1],
            &[-7, 0, 0, 0],
            &[-8, 0, 0, 0],
            &[max, -max - 1, 5, -6],
            &[
                i128::from(u64::MAX),
                i128::from(u64::MAX),
                i128::from(u64::MAX),
                2,
            ],
        ];
        for dtype in [DType::I64, DType::U64] {
            let values: Vec<i128> = planes.iter().flat_map(|p| p.iter().copied()).collect();
            let x = NDArray::from_i128_slice(dtype, &[1, 6, 2, 2], &values).unwrap();
            let none = attrs("nn.global_avg_pool2d", &[]);
            assert!(verify("nn.global_avg_pool2d", from_ref(&x), &none, exact));
            let sizes = [("output_size", ints(&[1, 2]))];
            let a = attrs("nn.adaptive_avg_pool2d", &sizes);
            assert!(verify("nn.adaptive_avg_pool2d", from_ref(&x), &a, exact));
            for include in [false, true] {
                let a = attrs(
                    "nn.avg_pool2d",
                    &[
                        ("pool_size", ints(&[2, 2])),
                        ("padding", ints(&[1])),
                        ("strides", ints(&[2, 1])),
                        ("count_include_pad", V::Bool(include)),
                    ],
                );
                assert!(verify("nn.avg_pool2d", from_ref(&x), &a, exact));
            }
        }
    }
}
