//! Resampling and rearrangement: upsampling, depth/space rearrangements, dilation and the
//! space/batch transforms. They have table entries only (no type relation yet).

use relay_ir::{AttrDefault as D, AttrField, AttrKind as K, OpSchema};

use super::DATA;
use crate::{field, op, plain, required};

/// `SubPixelAttrs`, shared by `nn.depth_to_space` and `nn.space_to_depth`.
const SUBPIXEL_ATTRS: &[AttrField] = &[
    field("block_size", K::Int, D::Int(1)),
    field("layout", K::Str, D::Str("NCHW")),
    field("mode", K::Str, D::Str("DCR")),
];

/// The resampling and rearrangement operators.
pub(super) static OPS: &[OpSchema] = &[
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
];
