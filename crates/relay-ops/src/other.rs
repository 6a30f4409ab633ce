//! The other namespaces (reference §14.6): `image.*`, `vision.*`, the dynamic-shape `dyn.*`
//! twins, device operators, annotations, `random.*`, quantized `qnn.*`
//! operators, and the operators whose attributes struct TVM never declares.

use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};

use crate::elementwise::ONE_HOT_ATTRS;
use crate::nn::{
    AVG_POOL2D_ATTRS, BATCH_MATMUL_ATTRS, CONV2D_ATTRS, CONV2D_TRANSPOSE_ATTRS, DENSE_ATTRS,
    LEAKY_RELU_ATTRS, SOFTMAX_ATTRS,
};
use crate::transform::TOPK_ATTRS;
use crate::{dtype, field, nullable, op, plain, required, required_nullable};

const DATA: &[&str] = &["data"];

/// The fields of `Resize1DAttrs`, `Resize2DAttrs` and `Resize3DAttrs`, which differ only in the
/// default layout.
const fn resize_attrs(layout: &'static str) -> [AttrField; 10] {
    [
        nullable("size", K::IntArray),
        nullable("roi", K::FloatArray),
        field("layout", K::Str, D::Str(layout)),
        field("method", K::Str, D::Str("linear")),
        field(
            "coordinate_transformation_mode",
            K::Str,
            D::Str("half_pixel"),
        ),
        field("rounding_method", K::Str, D::Str("round")),
        field("cubic_alpha", K::Float, D::Float(-0.5)),
        field("cubic_exclude", K::Int, D::Int(0)),
        field("extrapolation_value", K::Float, D::Float(0.0)),
        dtype("out_dtype"),
    ]
}

const RESIZE2D_ATTRS: &[AttrField] = &resize_attrs("NCHW");

/// The inputs of the quantized unary elementwise operators.
const QNN_UNARY: &[&str] = &[
    "x",
    "scale",
    "zero_point",
    "output_scale",
    "output_zero_point",
];

/// The inputs of the quantized binary elementwise operators.
const QNN_BINARY: &[&str] = &[
    "lhs",
    "rhs",
    "lhs_scale",
    "lhs_zero_point",
    "rhs_scale",
    "rhs_zero_point",
    "output_scale",
    "output_zero_point",
];

/// The inputs of the quantized convolutions and `qnn.dense`.
const QNN_CONV: &[&str] = &[
    "data",
    "weight",
    "input_zero_point",
    "kernel_zero_point",
    "input_scale",
    "kernel_scale",
];

/// `BroadcastAttrs` of the quantized binary operators.
const QNN_BROADCAST_ATTRS: &[AttrField] = &[
    field("lhs_axis", K::Int, D::Int(-1)),
    field("rhs_axis", K::Int, D::Int(-1)),
];

/// `DequantizeAttrs`. Recent TVM declares `out_dtype` without a default (Python passes
/// `"float32"`); older TVM had no such field, so it defaults to the unset dtype here.
const QNN_DEQUANTIZE_ATTRS: &[AttrField] = &[dtype("out_dtype"), field("axis", K::Int, D::Int(-1))];

pub(crate) static OPS: &[OpSchema] = &[
    // Image operators.
    op(
        "image.resize1d",
        DATA,
        "relay.attrs.Resize1DAttrs",
        &resize_attrs("NCW"),
    ),
    op(
        "image.resize2d",
        DATA,
        "relay.attrs.Resize2DAttrs",
        RESIZE2D_ATTRS,
    ),
    op(
        "image.resize3d",
        DATA,
        "relay.attrs.Resize3DAttrs",
        &resize_attrs("NCDHW"),
    ),
    op(
        "image.crop_and_resize",
        &["data", "boxes", "box_indices"],
        "relay.attrs.CropAndResizeAttrs",
        &[
            nullable("crop_size", K::IntArray),
            field("layout", K::Str, D::Str("NCHW")),
            field("method", K::Str, D::Str("bilinear")),
            field("extrapolation_value", K::Float, D::Float(0.0)),
            dtype("out_dtype"),
        ],
    ),
    op(
        "image.dilation2d",
        &["data", "weight"],
        "relay.attrs.Dilation2DAttrs",
        &[
            field("strides", K::IntArray, D::Ints(&[1, 1])),
            field("padding", K::IntArray, D::Ints(&[0, 0])),
            field("dilations", K::IntArray, D::Ints(&[1, 1])),
            field("data_layout", K::Str, D::Str("NCHW")),
            field("kernel_layout", K::Str, D::Str("IHW")),
            dtype("out_dtype"),
        ],
    ),
    op(
        "image.affine_grid",
        DATA,
        "relay.attrs.AffineGridAttrs",
        &[required("target_shape", K::IntArray)],
    ),
    op(
        "image.grid_sample",
        &["data", "grid"],
        "relay.attrs.GridSampleAttrs",
        &[
            field("method", K::Str, D::Str("bilinear")),
            field("layout", K::Str, D::Str("NCHW")),
            field("padding_mode", K::Str, D::Str("zeros")),
            field("align_corners", K::Bool, D::Bool(true)),
        ],
    ),
    // Vision operators. TVM's registrations of these declare no attrs type, so TVM prints their
    // attributes as meta references; the fields here are those of the structs the calls carry,
    // so the keyword form parses and prints. TVM's defaults for `sizes`, `ratios`, `steps`,
    // `offsets`, `variances` and `scales` are float arrays, which `AttrDefault` cannot express;
    // they default to `None` here, meaning TVM's value.
    op(
        "vision.multibox_prior",
        DATA,
        "relay.attrs.MultiBoxPriorAttrs",
        &[
            nullable("sizes", K::FloatArray),
            nullable("ratios", K::FloatArray),
            nullable("steps", K::FloatArray),
            nullable("offsets", K::FloatArray),
            field("clip", K::Bool, D::Bool(false)),
        ],
    ),
    op(
        "vision.multibox_transform_loc",
        &["cls_prob", "loc_pred", "anchor"],
        "relay.attrs.MultiBoxTransformLocAttrs",
        &[
            field("clip", K::Bool, D::Bool(true)),
            field("threshold", K::Float, D::Float(0.01)),
            nullable("variances", K::FloatArray),
            field("keep_background", K::Bool, D::Bool(false)),
        ],
    ),
    op(
        "vision.get_valid_counts",
        &["data", "score_threshold"],
        "relay.attrs.GetValidCountsAttrs",
        &[
            required_nullable("score_threshold", K::Float),
            field("id_index", K::Int, D::Int(0)),
            field("score_index", K::Int, D::Int(1)),
        ],
    ),
    op(
        "vision.non_max_suppression",
        &[
            "data",
            "valid_count",
            "indices",
            "max_output_size",
            "iou_threshold",
        ],
        "relay.attrs.NonMaximumSuppressionAttrs",
        &[
            field("force_suppress", K::Bool, D::Bool(false)),
            field("top_k", K::Int, D::Int(-1)),
            field("coord_start", K::Int, D::Int(2)),
            field("score_index", K::Int, D::Int(1)),
            field("id_index", K::Int, D::Int(0)),
            field("return_indices", K::Bool, D::Bool(true)),
            field("invalid_to_bottom", K::Bool, D::Bool(false)),
        ],
    ),
    op(
        "vision.all_class_non_max_suppression",
        &[
            "boxes",
            "scores",
            "max_output_boxes_per_class",
            "iou_threshold",
            "score_threshold",
        ],
        "relay.attrs.AllClassNonMaximumSuppressionAttrs",
        &[field("output_format", K::Str, D::Str("onnx"))],
    ),
    op(
        "vision.regular_non_max_suppression",
        &["boxes", "scores"],
        "relay.attrs.RegularNonMaximumSuppressionAttrs",
        &[
            required("max_detections_per_class", K::Int),
            required("max_detections", K::Int),
            required("num_classes", K::Int),
            required("iou_threshold", K::Float),
            required("score_threshold", K::Float),
        ],
    ),
    op(
        "vision.roi_align",
        &["data", "rois"],
        "relay.attrs.ROIAlignAttrs",
        &[
            required("pooled_size", K::IntArray),
            required("spatial_scale", K::Float),
            field("sample_ratio", K::Int, D::Int(-1)),
            field("layout", K::Str, D::Str("NCHW")),
            field("mode", K::Str, D::Str("avg")),
        ],
    ),
    op(
        "vision.roi_pool",
        &["data", "rois"],
        "relay.attrs.ROIPoolAttrs",
        &[
            required("pooled_size", K::IntArray),
            required("spatial_scale", K::Float),
            field("layout", K::Str, D::Str("NCHW")),
        ],
    ),
    op(
        "vision.proposal",
        &["cls_prob", "bbox_pred", "im_info"],
        "relay.attrs.ProposalAttrs",
        &[
            nullable("scales", K::FloatArray),
            nullable("ratios", K::FloatArray),
            field("feature_stride", K::Int, D::Int(16)),
            field("threshold", K::Float, D::Float(0.7)),
            field("rpn_pre_nms_top_n", K::Int, D::Int(6000)),
            field("rpn_post_nms_top_n", K::Int, D::Int(300)),
            field("rpn_min_size", K::Int, D::Int(16)),
            field("iou_loss", K::Bool, D::Bool(false)),
        ],
    ),
    op(
        "vision.yolo_reorg",
        DATA,
        "relay.attrs.YoloReorgAttrs",
        &[field("stride", K::Int, D::Int(1))],
    ),
    // Dynamic-shape twins without an evaluation (the others are in `crate::dynamic`).
    op(
        "dyn.topk",
        &["data", "k"],
        "relay.attrs.TopkAttrs",
        TOPK_ATTRS,
    ),
    op(
        "dyn.one_hot",
        &["indices", "on_value", "off_value", "depth"],
        "relay.attrs.OneHotAttrs",
        ONE_HOT_ATTRS,
    ),
    op(
        "dyn.sparse_to_dense",
        &["indices", "output_shape", "values", "default"],
        "relay.attrs.SparseToDenseAttrs",
        &[required_nullable("output_shape", K::IntArray)],
    ),
    op(
        "dyn.nn.pad",
        &["data", "pad_width", "pad_value"],
        "relay.attrs.PadAttrs",
        &[
            required_nullable("pad_width", K::IntArrayArray),
            field("pad_mode", K::Str, D::Str("constant")),
        ],
    ),
    op(
        "dyn.nn.upsampling",
        &["data", "scale_h", "scale_w"],
        "relay.attrs.UpSamplingAttrs",
        &[
            required_nullable("scale_h", K::Float),
            required_nullable("scale_w", K::Float),
            field("layout", K::Str, D::Str("NCHW")),
            field("method", K::Str, D::Str("nearest_neighbor")),
            field("align_corners", K::Bool, D::Bool(false)),
        ],
    ),
    op(
        "dyn.nn.upsampling3d",
        &["data", "scale_d", "scale_h", "scale_w"],
        "relay.attrs.UpSampling3DAttrs",
        &[
            required_nullable("scale_d", K::Float),
            required_nullable("scale_h", K::Float),
            required_nullable("scale_w", K::Float),
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
        "dyn.image.resize2d",
        &["data", "size", "roi"],
        "relay.attrs.Resize2DAttrs",
        RESIZE2D_ATTRS,
    ),
    // Device placement operators. Virtual devices, constants and maps are
    // objects that TVM prints as meta references; `None` stands for an unset or unconstrained
    // one.
    op(
        "on_device",
        &["body"],
        "relay.attrs.OnDeviceAttrs",
        &[
            nullable("virtual_device", K::Any),
            field("constrain_result", K::Bool, D::Bool(false)),
            field("constrain_body", K::Bool, D::Bool(true)),
        ],
    ),
    op(
        "device_copy",
        DATA,
        "relay.attrs.DeviceCopyAttrs",
        &[
            required_nullable("src_virtual_device", K::Any),
            required_nullable("dst_virtual_device", K::Any),
        ],
    ),
    // The memory and VM dialect (`memory.*`, `vm.*`) is in `memory.rs`.
    op(
        "call_lowered",
        &["func", "call_args"],
        "relay.attrs.CallLoweredAttrs",
        &[nullable("metadata", K::Any)],
    ),
    // Annotations. `compiler_begin`, `compiler_end` (`CompilerAttrs`: `compiler`) and
    // `cast_hint` (`CastHintAttrs`: `dtype`) declare no attrs type in their registrations.
    plain("annotation.stop_fusion", DATA),
    plain("annotation.checkpoint", DATA),
    plain("annotation.bitpack_start", DATA),
    plain("annotation.bitpack_end", DATA),
    plain("annotation.compiler_begin", DATA),
    plain("annotation.compiler_end", DATA),
    plain("annotation.cast_hint", DATA),
    // Random number generation.
    op(
        "random.threefry_generate",
        &["key"],
        "relay.attrs.ThreefryGenerateAttrs",
        &[required("out_shape", K::IntArray)],
    ),
    plain("random.threefry_split", &["key"]),
    op(
        "random.uniform",
        &["key", "low", "high"],
        "relay.attrs.UniformAttrs",
        &[required("out_shape", K::IntArray), dtype("out_dtype")],
    ),
    op(
        "random.normal",
        &["key", "mean", "scale"],
        "relay.attrs.NormalAttrs",
        &[required("out_shape", K::IntArray), dtype("out_dtype")],
    ),
    op(
        "random.multinomial",
        &["key", "probs"],
        "relay.attrs.MultinomialAttrs",
        &[field("num_samples", K::Int, D::Int(1))],
    ),
    // Quantized operators: scales and zero points are inputs.
    op(
        "qnn.quantize",
        &["data", "output_scale", "output_zero_point"],
        "relay.attrs.QuantizeAttrs",
        &[
            required("out_dtype", K::DType),
            field("axis", K::Int, D::Int(-1)),
        ],
    ),
    op(
        "qnn.dequantize",
        &["data", "input_scale", "input_zero_point"],
        "relay.attrs.DequantizeAttrs",
        QNN_DEQUANTIZE_ATTRS,
    ),
    op(
        "qnn.requantize",
        &[
            "data",
            "input_scale",
            "input_zero_point",
            "output_scale",
            "output_zero_point",
        ],
        "relay.attrs.RequantizeAttrs",
        &[
            field("axis", K::Int, D::Int(-1)),
            field("rounding", K::Str, D::Str("None")),
            field("compute_dtype", K::Str, D::Str("None")),
            dtype("out_dtype"),
        ],
    ),
    op(
        "qnn.simulated_quantize",
        &["data", "output_scale", "output_zero_point", "axis"],
        "relay.attrs.SimulatedQuantizeAttrs",
        &[field("axis", K::Int, D::Int(-1))],
    ),
    op(
        "qnn.simulated_dequantize",
        &["data", "input_scale", "input_zero_point", "axis"],
        "relay.attrs.DequantizeAttrs",
        QNN_DEQUANTIZE_ATTRS,
    ),
    op(
        "qnn.conv2d",
        QNN_CONV,
        "relay.attrs.Conv2DAttrs",
        CONV2D_ATTRS,
    ),
    op(
        "qnn.conv2d_transpose",
        QNN_CONV,
        "relay.attrs.Conv2DTransposeAttrs",
        CONV2D_TRANSPOSE_ATTRS,
    ),
    op("qnn.dense", QNN_CONV, "relay.attrs.DenseAttrs", DENSE_ATTRS),
    op(
        "qnn.batch_matmul",
        &[
            "x",
            "y",
            "x_zero_point",
            "y_zero_point",
            "x_scale",
            "y_scale",
        ],
        "relay.attrs.BatchMatmulAttrs",
        BATCH_MATMUL_ATTRS,
    ),
    op(
        "qnn.concatenate",
        &[
            "data",
            "input_scales",
            "input_zero_points",
            "output_scale",
            "output_zero_point",
        ],
        "relay.attrs.ConcatenateAttrs",
        &[field("axis", K::Int, D::Int(0))],
    ),
    op(
        "qnn.add",
        QNN_BINARY,
        "relay.attrs.BroadcastAttrs",
        QNN_BROADCAST_ATTRS,
    ),
    op(
        "qnn.mul",
        QNN_BINARY,
        "relay.attrs.BroadcastAttrs",
        QNN_BROADCAST_ATTRS,
    ),
    op(
        "qnn.subtract",
        QNN_BINARY,
        "relay.attrs.BroadcastAttrs",
        QNN_BROADCAST_ATTRS,
    ),
    op(
        "qnn.avg_pool2d",
        &[
            "data",
            "input_scale",
            "input_zero_point",
            "output_scale",
            "output_zero_point",
        ],
        "relay.attrs.AvgPool2DAttrs",
        AVG_POOL2D_ATTRS,
    ),
    op(
        "qnn.softmax",
        QNN_UNARY,
        "relay.attrs.SoftmaxAttrs",
        SOFTMAX_ATTRS,
    ),
    op(
        "qnn.leaky_relu",
        &[
            "x",
            "input_scale",
            "input_zero_point",
            "output_scale",
            "output_zero_point",
        ],
        "relay.attrs.LeakyReluAttrs",
        LEAKY_RELU_ATTRS,
    ),
    plain("qnn.rsqrt", QNN_UNARY),
    plain("qnn.sqrt", QNN_UNARY),
    plain("qnn.exp", QNN_UNARY),
    plain("qnn.erf", QNN_UNARY),
    plain("qnn.sigmoid", QNN_UNARY),
    plain("qnn.tanh", QNN_UNARY),
    plain("qnn.log", QNN_UNARY),
    plain("qnn.abs", QNN_UNARY),
    plain("qnn.hardswish", QNN_UNARY),
    // Operators that build an attrs struct their registration does not declare, so TVM prints
    // the attributes as a meta reference: `ScanopAttrs` (`axis`, `dtype`, `exclusive`),
    // `ScatterElementsAttrs` (`axis`, `reduction`), `ScatterNDAttrs` (`mode`), `UniqueAttrs`
    // (`sorted`, `return_counts`), `TriluAttrs` (`upper`), `StftAttrs` and `DFTAttrs`.
    plain("cumsum", DATA),
    plain("cumprod", DATA),
    plain("scatter_elements", &["data", "indices", "updates"]),
    plain("scatter_nd", &["data", "indices", "updates"]),
    plain("unique", DATA),
    plain("trilu", &["data", "k"]),
    plain("stft", &["data", "window"]),
    plain("dft", &["re_data", "im_data"]),
];
