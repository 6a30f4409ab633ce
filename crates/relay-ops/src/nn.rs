//! Neural-network operators (`nn.*`): convolutions, dense and matrix products, activations,
//! pooling, normalization, padding, resampling and losses (reference §14.5).

use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};

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
    ),
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
    ),
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
    ),
    op(
        "nn.batch_matmul",
        &["tensor_a", "tensor_b"],
        "relay.attrs.BatchMatmulAttrs",
        BATCH_MATMUL_ATTRS,
    ),
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
    plain("nn.relu", DATA),
    op(
        "nn.leaky_relu",
        DATA,
        "relay.attrs.LeakyReluAttrs",
        LEAKY_RELU_ATTRS,
    ),
    op(
        "nn.prelu",
        &["data", "alpha"],
        "relay.attrs.PReluAttrs",
        &[field("axis", K::Int, D::Int(1))],
    ),
    op(
        "nn.softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    ),
    op(
        "nn.fast_softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    ),
    op(
        "nn.log_softmax",
        DATA,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    ),
    op(
        "nn.bias_add",
        &["data", "bias"],
        "relay.attrs.BiasAddAttrs",
        &[field("axis", K::Int, D::Int(1))],
    ),
    plain("nn.batch_flatten", DATA),
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
    ),
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
    ),
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
    ),
    op(
        "nn.global_avg_pool2d",
        DATA,
        "relay.attrs.GlobalPool2DAttrs",
        GLOBAL_POOL2D_ATTRS,
    ),
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
    ),
    op(
        "nn.adaptive_avg_pool2d",
        DATA,
        "relay.attrs.AdaptivePool2DAttrs",
        ADAPTIVE_POOL2D_ATTRS,
    ),
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
    ),
    op(
        "nn.layer_norm",
        &["data", "gamma", "beta"],
        "relay.attrs.LayerNormAttrs",
        &norm_attrs(-1),
    ),
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
    ),
    // Padding; `nn.pad` takes the pad value as its second input.
    op(
        "nn.pad",
        &["data", "pad_value"],
        "relay.attrs.PadAttrs",
        PAD_ATTRS,
    ),
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
